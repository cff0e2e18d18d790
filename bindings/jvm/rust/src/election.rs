//! Observing an election (campaigns are `NativeClient::campaign`).

use std::sync::Arc;

use fencelock::Observation;

/// A leader, as observers learn of it.
#[derive(uniffi::Record)]
pub struct NativeLeader {
    /// The value the leader announced.
    pub value: Vec<u8>,
    /// Its epoch: larger than every earlier leader's.
    pub epoch: u64,
}

/// The leaders of one election, in increasing epochs.
#[derive(uniffi::Object)]
pub struct NativeObservation {
    observation: Observation,
}

impl NativeObservation {
    pub(crate) fn new(observation: Observation) -> Arc<Self> {
        Arc::new(NativeObservation { observation })
    }
}

#[uniffi::export]
impl NativeObservation {
    /// The next leader; `None` once the observation has ended. Cancel-safe.
    pub async fn next(&self) -> Option<NativeLeader> {
        let leader = self.observation.next().await?;
        Some(NativeLeader {
            value: leader.value,
            epoch: leader.epoch,
        })
    }

    /// Stops observing; every wait, now or later, yields `None`.
    pub fn stop(&self) {
        self.observation.close();
    }

    /// Whether `stop` was called.
    pub fn is_stopped(&self) -> bool {
        self.observation.is_closed()
    }
}

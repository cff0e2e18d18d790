//! `fencelock_loss_reason`: why a lock was lost, as C spells the core's
//! `LossReason`.

use fencelock::LossReason;

use crate::names;

/// Why a lock was lost (`tests/vectors/protocol.json`, `loss_reasons`).
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::VariantArray, strum::IntoStaticStr)]
pub enum fencelock_loss_reason {
    /// A renewal found the key missing on a majority (deleted, evicted, node restarted empty).
    FENCELOCK_LOSS_DELETED = 1,
    /// A renewal found another owner's token on a majority.
    FENCELOCK_LOSS_TAKEN_OVER = 2,
    /// Renewals kept failing (nodes unreachable) until the validity ran out.
    FENCELOCK_LOSS_UNREACHABLE = 3,
    /// The lease ran out without renewal (auto-renew off, or a renewal limit reached).
    FENCELOCK_LOSS_EXPIRED = 4,
    /// A reason added by a later version of fencelock.
    FENCELOCK_LOSS_OTHER = 99,
}

/// What every `fencelock_loss_reason` variant's name starts with.
pub(crate) const LOSS_PREFIX: &str = "FENCELOCK_LOSS_";

impl From<LossReason> for fencelock_loss_reason {
    fn from(reason: LossReason) -> Self {
        names::by_core_name(LOSS_PREFIX, reason.name()).unwrap_or(fencelock_loss_reason::FENCELOCK_LOSS_OTHER)
    }
}

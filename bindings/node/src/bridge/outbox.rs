//! The outbox: operations submitted from the JavaScript thread, handed to
//! the runtime in bursts (why: the [module documentation](super)).

use std::future::Future;
use std::sync::{Arc, Mutex};

use futures_util::stream::{FuturesUnordered, StreamExt};

/// Operations waiting for the task that drives their burst: the first
/// submission of a burst spawns one task, and that task drives every
/// operation submitted until it starts. Every operation catches its own
/// panic (see [`EnvState::promise`](super::state::EnvState::promise)), so one
/// cannot take its burst down.
pub(super) struct Outbox {
    state: Mutex<(Vec<BoxedTask>, bool)>,
}

pub(super) type BoxedTask = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

impl Outbox {
    pub(super) fn new() -> Outbox {
        Outbox {
            state: Mutex::new((Vec::new(), false)),
        }
    }

    pub(super) fn submit(self: &Arc<Self>, runtime: &tokio::runtime::Handle, task: BoxedTask) {
        let mut state = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        state.0.push(task);
        if !state.1 {
            state.1 = true;
            drop(state);
            let outbox = self.clone();
            runtime.spawn(async move {
                let tasks = {
                    let mut state = outbox
                        .state
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner());
                    state.1 = false;
                    std::mem::take(&mut state.0)
                };
                let mut burst: FuturesUnordered<BoxedTask> = tasks.into_iter().collect();
                while burst.next().await.is_some() {}
            });
        }
    }
}

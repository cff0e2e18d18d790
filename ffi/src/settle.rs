//! Waiting, before exit, for clean-up that runs in the background.

use std::time::Duration;

use crate::boundary::{Failure, boundary_status};
use crate::status::fencelock_status;

/// Waits until no client of this process has clean-up running in the
/// background, for up to `timeout_ms`: the undo of an abandoned acquire
/// attempt, the part of a release still on its way to slower nodes, a
/// reconnect-and-release to a node that was down. Call it before the process
/// exits (after freeing or not freeing the clients): background work dies
/// with the process, and a key it would have removed blocks its resource
/// until the ttl. Each clean-up is bounded by its client's connect timeout
/// plus its per-node timeout.
///
/// Statuses: `OK` (nothing left running), `TIMEOUT` (some still running
/// after `timeout_ms`), `WOULD_BLOCK` (called on a thread of an async
/// runtime). Blocks the calling thread up to `timeout_ms`; thread-safe. Do
/// not call it from a fencelock callback: the callbacks of clean-up that
/// waits would wait behind it.
#[unsafe(no_mangle)]
pub extern "C" fn fencelock_settle(timeout_ms: u64) -> fencelock_status {
    boundary_status(|| {
        if fencelock::is_settled() {
            return Ok(());
        }
        let limit = Duration::from_millis(timeout_ms);
        let settled =
            fencelock::block_on(
                async move { tokio::time::timeout(limit, fencelock::settle()).await.is_ok() },
            )?;
        if settled {
            Ok(())
        } else {
            Err(Failure::new(
                fencelock_status::FENCELOCK_STATUS_TIMEOUT,
                format!("background clean-up still running after {timeout_ms} ms"),
            ))
        }
    })
}

//! CLOCK_MONOTONIC as a clock shared by processes: worker processes report
//! the instants of their grants as raw `CLOCK_MONOTONIC` nanoseconds, and the
//! parent maps them onto its own `Instant`s (which on Linux read the same
//! clock), so one `History` holds the grants of every process.

use std::time::{Duration, Instant};

/// Maps CLOCK_MONOTONIC readings (shared by every process on the machine)
/// onto this process's `Instant`s.
pub struct MonotonicClock {
    instant: Instant,
    nanos: u64,
}

impl MonotonicClock {
    pub fn now() -> MonotonicClock {
        MonotonicClock {
            instant: Instant::now(),
            nanos: monotonic_nanos(),
        }
    }

    /// The `Instant` of a `monotonic_nanos()` reading taken in any process.
    pub fn instant(&self, nanos: u64) -> Instant {
        if nanos >= self.nanos {
            self.instant + Duration::from_nanos(nanos - self.nanos)
        } else {
            self.instant - Duration::from_nanos(self.nanos - nanos)
        }
    }
}

/// CLOCK_MONOTONIC now, in nanoseconds.
pub fn monotonic_nanos() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now);
    }
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

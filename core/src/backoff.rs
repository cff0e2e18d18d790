//! Retry delays: exponential backoff with full jitter.

use std::time::Duration;

use rand::Rng;

/// How `acquire` waits between attempts while the lock is busy.
///
/// The delay before retry `n` (from 0) is uniform in
/// `[0, min(max_delay, base_delay · 2^n)]` ("full jitter"), so contenders
/// spread out instead of colliding in lock-step.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The cap of the first delay.
    pub base_delay: Duration,
    /// The largest cap any delay can reach.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            base_delay: Duration::from_millis(10),
            max_delay: Duration::from_millis(500),
        }
    }
}

impl RetryPolicy {
    /// A policy whose first delay is at most `base_delay` and whose delays never exceed `max_delay`.
    pub fn new(base_delay: Duration, max_delay: Duration) -> Self {
        RetryPolicy {
            base_delay,
            max_delay,
        }
    }

    /// The delay before retry number `attempt` (0-based).
    pub fn delay(&self, attempt: u32) -> Duration {
        let cap = self
            .base_delay
            .saturating_mul(1u32.checked_shl(attempt.min(20)).unwrap_or(u32::MAX))
            .min(self.max_delay);
        let cap_us = u64::try_from(cap.as_micros()).unwrap_or(u64::MAX);
        if cap_us == 0 {
            return Duration::ZERO;
        }
        Duration::from_micros(rand::rng().random_range(0..=cap_us))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_are_capped_and_jittered() {
        let policy = RetryPolicy::default();
        let delays: Vec<_> = (0..200).map(|_| policy.delay(30)).collect();
        assert!(delays.iter().all(|d| *d <= policy.max_delay));
        let first = delays[0];
        assert!(delays.iter().any(|d| *d != first), "no jitter");
        assert!((0..100).all(|_| policy.delay(0) <= policy.base_delay));
    }
}

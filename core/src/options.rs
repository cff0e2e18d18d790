//! Per-lock options: ttl, how long to wait, and how renewal behaves.

use std::time::Duration;

use crate::error::{Error, Result};

/// The longest ttl accepted: 2^31 − 1 ms (about 24.8 days). Longer leases
/// defeat the purpose of an expiring lock and risk overflow on the server.
pub const MAX_TTL: Duration = Duration::from_millis(i32::MAX as u64);

/// The shortest ttl accepted. Below it the Redlock safety margin
/// (`ttl·drift + 2 ms`) leaves no validity at all.
pub const MIN_TTL: Duration = Duration::from_millis(10);

/// How long to wait, at most: a year. Anything longer is a mistake.
pub const MAX_WAIT: Duration = Duration::from_secs(366 * 24 * 3600);

/// Options for one acquisition. Unset fields take the client's defaults.
///
/// ```
/// use std::time::Duration;
/// use fencelock::LockOptions;
///
/// let options = LockOptions::new(Duration::from_secs(10))
///     .wait(Duration::from_secs(2))
///     .max_renewals(100);
/// # let _ = options;
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LockOptions {
    pub(crate) ttl: Option<Duration>,
    pub(crate) wait: Option<Duration>,
    pub(crate) auto_renew: Option<bool>,
    pub(crate) max_hold: Option<Duration>,
    pub(crate) max_renewals: Option<u32>,
    pub(crate) fair: bool,
}

impl LockOptions {
    /// Options with this time-to-live: how long the lock lives on Redis
    /// without a renewal. With auto-renew (the default) it is renewed every `ttl/3`.
    pub fn new(ttl: Duration) -> Self {
        LockOptions {
            ttl: Some(ttl),
            ..LockOptions::default()
        }
    }

    /// Sets the time-to-live.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// How long [`Client::acquire`](crate::Client::acquire) keeps retrying
    /// while the lock is held by someone else. Zero means one attempt.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// Turns the watchdog on (default) or off. Off gives a fixed lease that
    /// ends at its ttl unless [`Lock::extend`](crate::Lock::extend) is called.
    pub fn auto_renew(mut self, on: bool) -> Self {
        self.auto_renew = Some(on);
        self
    }

    /// Stops auto-renewal so the lock is not held longer than this in total.
    pub fn max_hold(mut self, limit: Duration) -> Self {
        self.max_hold = Some(limit);
        self
    }

    /// Stops auto-renewal after this many renewals.
    pub fn max_renewals(mut self, limit: u32) -> Self {
        self.max_renewals = Some(limit);
        self
    }

    /// Fair (FIFO) waiting: the lock goes to waiters in order of arrival,
    /// and this acquisition never takes it ahead of an earlier fair or
    /// default waiter (docs/protocol.md §4.9). Off by default: a default
    /// acquisition is also woken in queue order when the lock is released,
    /// but may take a lock that is free at the moment it asks.
    pub fn fair(mut self, on: bool) -> Self {
        self.fair = on;
        self
    }
}

/// The client's defaults for unset [`LockOptions`] fields.
#[derive(Clone, Debug)]
pub(crate) struct LockDefaults {
    pub(crate) ttl: Duration,
    pub(crate) wait: Duration,
    pub(crate) auto_renew: bool,
}

impl Default for LockDefaults {
    fn default() -> Self {
        LockDefaults {
            ttl: Duration::from_secs(30),
            wait: Duration::from_secs(10),
            auto_renew: true,
        }
    }
}

/// Options with every field decided and validated.
#[derive(Clone, Debug)]
pub(crate) struct Resolved {
    pub(crate) ttl: Duration,
    pub(crate) wait: Duration,
    pub(crate) renewal: RenewalPolicy,
    pub(crate) fair: bool,
}

/// When the watchdog renews, and when it stops.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RenewalPolicy {
    pub(crate) auto: bool,
    pub(crate) max_hold: Option<Duration>,
    pub(crate) max_renewals: Option<u32>,
}

impl LockOptions {
    pub(crate) fn resolve(&self, defaults: &LockDefaults) -> Result<Resolved> {
        let ttl = self.ttl.unwrap_or(defaults.ttl);
        validate_ttl(ttl)?;
        let wait = self.wait.unwrap_or(defaults.wait);
        if wait > MAX_WAIT {
            return Err(Error::invalid(format!(
                "wait of {wait:?} is longer than the limit of {MAX_WAIT:?}"
            )));
        }
        Ok(Resolved {
            ttl,
            wait,
            renewal: RenewalPolicy {
                auto: self.auto_renew.unwrap_or(defaults.auto_renew),
                max_hold: self.max_hold,
                max_renewals: self.max_renewals,
            },
            fair: self.fair,
        })
    }
}

/// Checks a ttl against [`MIN_TTL`] and [`MAX_TTL`].
pub(crate) fn validate_ttl(ttl: Duration) -> Result<()> {
    if ttl < MIN_TTL {
        return Err(Error::invalid(format!(
            "ttl of {ttl:?} is too short; use at least {MIN_TTL:?} (and far more than the network round trip)"
        )));
    }
    if ttl > MAX_TTL {
        return Err(Error::invalid(format!(
            "ttl of {ttl:?} is longer than the limit of {} ms; use auto-renewal for long holds",
            MAX_TTL.as_millis()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_bounds() {
        let d = LockDefaults::default();
        assert!(LockOptions::new(Duration::ZERO).resolve(&d).is_err());
        assert!(LockOptions::new(Duration::from_millis(9)).resolve(&d).is_err());
        assert!(LockOptions::new(MAX_TTL).resolve(&d).is_ok());
        assert!(
            LockOptions::new(MAX_TTL + Duration::from_millis(1))
                .resolve(&d)
                .is_err()
        );
        assert!(LockOptions::new(Duration::MAX).resolve(&d).is_err());
        let long_wait = LockOptions::new(Duration::from_secs(1)).wait(Duration::MAX);
        assert!(long_wait.resolve(&d).is_err());
    }
}

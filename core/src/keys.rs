//! The key layout of the wire protocol (docs/protocol.md §2).
//!
//! A lock on resource `R` with prefix `P` uses `P{R}` for the lock and
//! `P{R}:fence` for its fencing counter. The braces are a Redis Cluster hash
//! tag, so both keys live in one slot and every script touches one slot.

use crate::error::{Error, Result};

/// The longest resource name accepted, in bytes. Redis would take far longer
/// keys, but a bound keeps hostile input from costing memory on every node.
pub const MAX_RESOURCE_LEN: usize = 1024;

/// The longest key prefix accepted, in bytes.
pub const MAX_PREFIX_LEN: usize = 256;

/// The default key prefix.
pub const DEFAULT_PREFIX: &str = "fencelock:";

/// What follows the lock key in its fencing counter's key.
const FENCE_SUFFIX: &str = ":fence";

/// What follows an election's lock key in its leader's announcement.
const LEADER_SUFFIX: &str = ":leader";

/// `prefix{name}:leader`: the announcement of the leader of the election
/// whose lock key is `lock_key` (docs/protocol.md §2.1).
pub(crate) fn leader_key(lock_key: &str) -> String {
    [lock_key, LEADER_SUFFIX].concat()
}

/// `prefix` + `leader:` + `name`: where an election's new leaders are published.
pub(crate) fn leader_channel(prefix: &str, name: &str) -> String {
    [prefix, "leader:", name].concat()
}

/// What follows the lock key in its waiters' queue (tickets) and leases.
const QUEUE_SUFFIX: &str = ":queue";
const LEASES_SUFFIX: &str = ":leases";

/// The keys of one lock: the lock key itself, its fencing counter, and
/// its waiters' queue and leases (docs/protocol.md §2.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LockKeys {
    /// `prefix{resource}`.
    lock: String,
    /// `prefix{resource}:fence`.
    fence: String,
    /// `prefix{resource}:queue` and `prefix{resource}:leases`.
    waiters: WaiterKeys,
    /// Where the resource starts in the lock key (after the prefix and `{`), less one.
    pub(crate) prefix_len: usize,
}

/// The two keys that hold a lock's waiters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct WaiterKeys {
    pub(crate) queue: String,
    pub(crate) leases: String,
}

impl WaiterKeys {
    /// The waiter keys that belong to `lock_key`.
    pub(crate) fn of(lock_key: &str) -> Self {
        WaiterKeys {
            queue: [lock_key, QUEUE_SUFFIX].concat(),
            leases: [lock_key, LEASES_SUFFIX].concat(),
        }
    }
}

impl LockKeys {
    pub(crate) fn new(prefix: &str, resource: &str) -> Result<Self> {
        validate_resource(resource)?;
        let lock = [prefix, "{", resource, "}"].concat();
        Ok(LockKeys {
            fence: [&lock, FENCE_SUFFIX].concat(),
            waiters: WaiterKeys::of(&lock),
            lock,
            prefix_len: prefix.len(),
        })
    }

    /// Whether `key` has the form of a lock or counter key under `prefix`
    /// (`prefix{…`): every such key may belong to some resource.
    pub(crate) fn could_be_lock_key(prefix: &str, key: &str) -> bool {
        key.strip_prefix(prefix).is_some_and(|rest| rest.starts_with('{'))
    }

    /// `prefix{resource}`: the key holding the owner's token.
    pub(crate) fn lock(&self) -> &str {
        &self.lock
    }

    /// `prefix{resource}:fence`: the resource's fencing counter.
    pub(crate) fn fence(&self) -> &str {
        &self.fence
    }

    /// `prefix{resource}:queue`: the waiters' tickets.
    pub(crate) fn queue(&self) -> &str {
        &self.waiters.queue
    }

    /// `prefix{resource}:leases`: when each waiter's lease ends.
    pub(crate) fn leases(&self) -> &str {
        &self.waiters.leases
    }

    /// The lock key alone, for a held lock's state (its waiter keys are
    /// only needed at release: [`WaiterKeys::of`]).
    pub(crate) fn into_lock_key(self) -> String {
        self.lock
    }

    /// The keys ACQUIRE takes: lock, fence, queue, leases.
    pub(crate) fn acquire_keys(&self) -> [&str; 4] {
        [self.lock(), self.fence(), self.queue(), self.leases()]
    }
}

/// Checks a resource name against the documented bounds.
pub(crate) fn validate_resource(resource: &str) -> Result<()> {
    if resource.is_empty() {
        return Err(Error::invalid(
            "the resource name is empty; name what you lock, e.g. \"orders:42\"",
        ));
    }
    if resource.len() > MAX_RESOURCE_LEN {
        return Err(Error::invalid(format!(
            "the resource name is {} bytes long; the limit is {MAX_RESOURCE_LEN} bytes",
            resource.len()
        )));
    }
    if resource.starts_with('}') {
        // `P{}…` would be an empty hash tag: Redis Cluster would then hash the
        // whole key, and the lock and its counter could land in different slots.
        return Err(Error::invalid(
            "the resource name may not start with '}' (it would break the Redis Cluster hash tag)",
        ));
    }
    Ok(())
}

/// Checks a key prefix: bounded, and free of braces so the hash tag stays ours.
pub(crate) fn validate_prefix(prefix: &str) -> Result<()> {
    if prefix.len() > MAX_PREFIX_LEN {
        return Err(Error::config(format!(
            "the key prefix is {} bytes long; the limit is {MAX_PREFIX_LEN}",
            prefix.len()
        )));
    }
    if prefix.contains(['{', '}']) {
        return Err(Error::config(
            "the key prefix may not contain '{' or '}': fencelock puts the resource in the hash tag",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_shares_one_hash_tag() {
        let keys = LockKeys::new("fencelock:", "orders:42").unwrap();
        assert_eq!(keys.lock(), "fencelock:{orders:42}");
        assert_eq!(keys.fence(), "fencelock:{orders:42}:fence");
        assert_eq!(keys.queue(), "fencelock:{orders:42}:queue");
        assert_eq!(keys.leases(), "fencelock:{orders:42}:leases");
        assert_eq!(keys.prefix_len, "fencelock:".len());
    }

    #[test]
    fn bounds() {
        assert!(LockKeys::new("p:", "").is_err());
        assert!(LockKeys::new("p:", &"x".repeat(MAX_RESOURCE_LEN)).is_ok());
        assert!(LockKeys::new("p:", &"x".repeat(MAX_RESOURCE_LEN + 1)).is_err());
        assert!(LockKeys::new("p:", "}x").is_err());
        assert!(validate_prefix("a{b").is_err());
        assert!(validate_prefix("app:").is_ok());
    }
}

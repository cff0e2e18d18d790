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
    /// Where the resource ends in the lock key (at the `}` of the hash tag).
    pub(crate) resource_end: usize,
    /// What holding this key is: a lock, a permit, a read or write grant.
    pub(crate) kind: HeldKind,
    /// For a reader of a read-write lock: the keys its release looks at.
    pub(crate) reader: Option<ReaderKeys>,
    /// For a semaphore's permit: the semaphore's size key, which the
    /// permit's renewals keep alive (docs/protocol.md §3.3, §4.11).
    pub(crate) size: Option<String>,
}

/// What holding a lock key is, for messages and [`crate::Lock::permit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HeldKind {
    Lock,
    /// Permit `n` (from 0) of a semaphore.
    Permit(u32),
    /// A read-write lock's reader.
    Read,
    /// A read-write lock's writer.
    Write,
}

impl HeldKind {
    /// How messages name what is held on `name`: "lock 'orders'",
    /// "permit 2 of semaphore 'crawlers'", "read lock 'doc'".
    pub(crate) fn describe(self, name: &str) -> String {
        match self {
            HeldKind::Lock => format!("lock '{name}'"),
            HeldKind::Permit(n) => format!("permit {n} of semaphore '{name}'"),
            HeldKind::Read => format!("read lock '{name}'"),
            HeldKind::Write => format!("write lock '{name}'"),
        }
    }
}

/// What a reader's release needs besides its own key: the write key it
/// may hand on, and the index of readers it leaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ReaderKeys {
    pub(crate) write: String,
    pub(crate) readers: String,
}

/// The keys of a held lock that are not derived from its lock key: a
/// permit's or a read-write lock's queue, a reader's release keys, and a
/// permit's size key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HeldKeys {
    pub(crate) waiters: WaiterKeys,
    pub(crate) reader: Option<ReaderKeys>,
    pub(crate) size: Option<String>,
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
            resource_end: lock.len() - 1,
            lock,
            prefix_len: prefix.len(),
            kind: HeldKind::Lock,
            reader: None,
            size: None,
        })
    }

    /// The Redis glob of the fencing counters of the locks of `prefix` whose
    /// resource matches the glob `matching`: the prefix's own glob
    /// characters escaped, then `{matching}:fence`.
    pub(crate) fn counter_pattern(prefix: &str, matching: &str) -> String {
        let mut pattern = String::with_capacity(prefix.len() + matching.len() + 8);
        for c in prefix.chars() {
            if matches!(c, '*' | '?' | '[' | ']' | '\\') {
                pattern.push('\\');
            }
            pattern.push(c);
        }
        [pattern.as_str(), "{", matching, "}", FENCE_SUFFIX].concat()
    }

    /// The resource whose lock's fencing counter is `key`, if it is one.
    pub(crate) fn resource_of_counter(prefix: &str, key: &str) -> Option<String> {
        let resource = key
            .strip_prefix(prefix)?
            .strip_prefix('{')?
            .strip_suffix(FENCE_SUFFIX)?
            .strip_suffix('}')?;
        (!resource.is_empty() && !resource.starts_with('}')).then(|| resource.to_owned())
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

    /// The waiters' keys, for a held lock's release and a waiter's leaving.
    pub(crate) fn waiters(&self) -> &WaiterKeys {
        &self.waiters
    }

    /// The lock key alone, for a held lock's state (its waiter keys are
    /// only needed at release: [`WaiterKeys::of`]).
    pub(crate) fn into_lock_key(self) -> String {
        self.lock
    }

    /// The lock key and, when they are not the ones [`WaiterKeys::of`]
    /// derives from it (a semaphore's permits share one queue and a size
    /// key, and a read-write lock's readers and writers one queue), the
    /// other keys it needs.
    pub(crate) fn into_held(self) -> (String, Option<Box<HeldKeys>>) {
        let derived =
            WaiterKeys::of(&self.lock) == self.waiters && self.reader.is_none() && self.size.is_none();
        let held = (!derived).then(|| {
            Box::new(HeldKeys {
                waiters: self.waiters,
                reader: self.reader,
                size: self.size,
            })
        });
        (self.lock, held)
    }

    /// The keys ACQUIRE takes: lock, fence, queue, leases.
    pub(crate) fn acquire_keys(&self) -> [&str; 4] {
        [self.lock(), self.fence(), self.queue(), self.leases()]
    }
}

/// The most permits a semaphore may have. Every attempt reads each permit's
/// key (one `MGET`), so the bound keeps an attempt's cost in check.
pub const MAX_PERMITS: u32 = 256;

/// What follows a semaphore's hash tag in each of its keys.
const SEMAPHORE_INFIX: &str = ":sem:";

/// What follows [`SEMAPHORE_INFIX`] in a semaphore's size key.
const SIZE_SUFFIX: &str = "permits";

/// The keys of a counting semaphore named `S` (docs/protocol.md §2.1,
/// §4.11): `P{S}:sem:<i>` for permit `i` (0-based), a lock key like any
/// other, except that its renewals also name the size key, and
/// `P{S}:sem:fence`, `:sem:queue`, `:sem:leases` and `:sem:permits` (the
/// size key) shared by all of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SemaphoreKeys {
    base: String,
    prefix_len: usize,
    permits: u32,
    fence: String,
    waiters: WaiterKeys,
    size: String,
    slots: Vec<String>,
}

impl SemaphoreKeys {
    pub(crate) fn new(prefix: &str, name: &str, permits: u32) -> Result<Self> {
        validate_resource(name)?;
        if !(1..=MAX_PERMITS).contains(&permits) {
            return Err(Error::invalid(format!(
                "a semaphore has 1 to {MAX_PERMITS} permits; {permits} were asked for semaphore '{name}'"
            )));
        }
        let base = [prefix, "{", name, "}", SEMAPHORE_INFIX].concat();
        let key = |suffix: &str| [base.as_str(), suffix].concat();
        Ok(SemaphoreKeys {
            fence: key("fence"),
            waiters: WaiterKeys {
                queue: key("queue"),
                leases: key("leases"),
            },
            size: key(SIZE_SUFFIX),
            slots: (0..permits).map(|i| key(&i.to_string())).collect(),
            prefix_len: prefix.len(),
            permits,
            base,
        })
    }

    /// The semaphore's name.
    pub(crate) fn name(&self) -> &str {
        &self.base[self.prefix_len + 1..self.base.len() - SEMAPHORE_INFIX.len() - 1]
    }

    pub(crate) fn permits(&self) -> u32 {
        self.permits
    }

    /// `P{S}:sem:fence`: one fencing counter for every permit.
    pub(crate) fn fence(&self) -> &str {
        &self.fence
    }

    /// `P{S}:sem:permits`: the number of permits its clients use.
    pub(crate) fn size(&self) -> &str {
        &self.size
    }

    pub(crate) fn waiters(&self) -> &WaiterKeys {
        &self.waiters
    }

    /// `P{S}:sem:<i>` for every permit, in order.
    pub(crate) fn slots(&self) -> &[String] {
        &self.slots
    }

    /// The keys of permit `slot` once held: a lock on its own key, with the
    /// semaphore's counter, queue and size.
    pub(crate) fn permit(&self, slot: usize) -> LockKeys {
        LockKeys {
            lock: self.slots[slot].clone(),
            fence: self.fence.clone(),
            waiters: self.waiters.clone(),
            prefix_len: self.prefix_len,
            resource_end: self.base.len() - SEMAPHORE_INFIX.len() - 1,
            kind: HeldKind::Permit(u32::try_from(slot).unwrap_or(u32::MAX)),
            reader: None,
            size: Some(self.size.clone()),
        }
    }
}

/// What follows a read-write lock's hash tag in each of its keys.
const RW_INFIX: &str = ":rw:";

/// The keys of a read-write lock named `R` (docs/protocol.md §2.1, §4.12):
/// `P{R}:rw:write` (the writer's lock key), `P{R}:rw:read:<id>` (one per
/// reader), `P{R}:rw:readers` (the set of reader keys), `P{R}:rw:fence`,
/// `P{R}:rw:queue`, `P{R}:rw:leases` and `P{R}:rw:writers` (the writers
/// in the queue).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RwKeys {
    base: String,
    prefix_len: usize,
    write: String,
    fence: String,
    waiters: WaiterKeys,
    readers: String,
    writers: String,
}

impl RwKeys {
    pub(crate) fn new(prefix: &str, name: &str) -> Result<Self> {
        validate_resource(name)?;
        let base = [prefix, "{", name, "}", RW_INFIX].concat();
        let key = |suffix: &str| [base.as_str(), suffix].concat();
        Ok(RwKeys {
            write: key("write"),
            fence: key("fence"),
            waiters: WaiterKeys {
                queue: key("queue"),
                leases: key("leases"),
            },
            readers: key("readers"),
            writers: key("writers"),
            prefix_len: prefix.len(),
            base,
        })
    }

    pub(crate) fn name(&self) -> &str {
        &self.base[self.prefix_len + 1..self.resource_end()]
    }

    fn resource_end(&self) -> usize {
        self.base.len() - RW_INFIX.len() - 1
    }

    pub(crate) fn write(&self) -> &str {
        &self.write
    }

    pub(crate) fn fence(&self) -> &str {
        &self.fence
    }

    pub(crate) fn waiters(&self) -> &WaiterKeys {
        &self.waiters
    }

    pub(crate) fn readers(&self) -> &str {
        &self.readers
    }

    pub(crate) fn writers(&self) -> &str {
        &self.writers
    }

    /// `P{R}:rw:read:<id>`: the key of the reader with this id.
    pub(crate) fn reader(&self, id: &str) -> String {
        [self.base.as_str(), "read:", id].concat()
    }

    /// The keys of the writer once it holds.
    pub(crate) fn held_write(&self) -> LockKeys {
        self.held(self.write.clone(), HeldKind::Write, None)
    }

    /// The keys of the reader whose key is `reader_key` once it holds.
    pub(crate) fn held_read(&self, reader_key: String) -> LockKeys {
        let reader = ReaderKeys {
            write: self.write.clone(),
            readers: self.readers.clone(),
        };
        self.held(reader_key, HeldKind::Read, Some(reader))
    }

    fn held(&self, lock: String, kind: HeldKind, reader: Option<ReaderKeys>) -> LockKeys {
        LockKeys {
            lock,
            fence: self.fence.clone(),
            waiters: self.waiters.clone(),
            prefix_len: self.prefix_len,
            resource_end: self.resource_end(),
            kind,
            reader,
            size: None,
        }
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
    fn a_held_permit_keeps_its_size_key_and_a_held_lock_needs_no_other_keys() {
        let (_, held) = LockKeys::new("p:", "res").unwrap().into_held();
        assert!(held.is_none(), "a plain lock's other keys derive from its key");
        let (key, held) = SemaphoreKeys::new("p:", "jobs", 2).unwrap().permit(1).into_held();
        assert_eq!(key, "p:{jobs}:sem:1");
        assert_eq!(
            held.and_then(|held| held.size).as_deref(),
            Some("p:{jobs}:sem:permits")
        );
        let (_, held) = RwKeys::new("p:", "doc").unwrap().held_write().into_held();
        assert_eq!(
            held.map(|held| held.size),
            Some(None),
            "a writer renews its key alone"
        );
    }

    #[test]
    fn a_semaphore_keeps_its_keys_under_one_hash_tag() {
        let keys = SemaphoreKeys::new("p:", "jobs}x", 3).unwrap();
        assert_eq!(keys.name(), "jobs}x");
        assert_eq!(
            keys.slots(),
            ["p:{jobs}x}:sem:0", "p:{jobs}x}:sem:1", "p:{jobs}x}:sem:2"]
        );
        assert_eq!(keys.fence(), "p:{jobs}x}:sem:fence");
        assert_eq!(keys.size(), "p:{jobs}x}:sem:permits");
        assert_eq!(keys.waiters().queue, "p:{jobs}x}:sem:queue");
        let permit = keys.permit(2);
        assert_eq!(permit.lock(), "p:{jobs}x}:sem:2");
        assert_eq!(
            permit.size.as_deref(),
            Some(keys.size()),
            "renewals keep the size"
        );
        assert_eq!(permit.fence(), keys.fence());
        assert_eq!(
            &permit.lock()[permit.prefix_len + 1..permit.resource_end],
            "jobs}x"
        );
        assert!(SemaphoreKeys::new("p:", "jobs", 0).is_err());
        assert!(SemaphoreKeys::new("p:", "jobs", MAX_PERMITS + 1).is_err());
        assert!(SemaphoreKeys::new("p:", "", 1).is_err());
    }

    #[test]
    fn a_read_write_lock_keeps_its_keys_under_one_hash_tag() {
        let keys = RwKeys::new("p:", "doc}7").unwrap();
        assert_eq!(keys.name(), "doc}7");
        assert_eq!(keys.write(), "p:{doc}7}:rw:write");
        assert_eq!(keys.reader("ab"), "p:{doc}7}:rw:read:ab");
        assert_eq!(keys.readers(), "p:{doc}7}:rw:readers");
        assert_eq!(keys.writers(), "p:{doc}7}:rw:writers");
        assert_eq!(keys.fence(), "p:{doc}7}:rw:fence");
        assert_eq!(keys.waiters().queue, "p:{doc}7}:rw:queue");
        let read = keys.held_read(keys.reader("ab"));
        assert_eq!(&read.lock()[read.prefix_len + 1..read.resource_end], "doc}7");
        assert_eq!(read.reader.as_ref().unwrap().write, keys.write());
        assert!(keys.held_write().reader.is_none());
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

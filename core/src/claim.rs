//! What an acquire attempt asks the nodes for: a lock's one key, any one
//! of a semaphore's permits, or a read-write lock for reading or writing
//! (docs/protocol.md §4.2, §4.11, §4.12).
//!
//! A permit is a lock on one of the semaphore's `permits` slot keys. Each
//! node grants the first free slot in the order the attempt lists them, and
//! the attempt holds a permit only when a quorum of nodes granted the *same*
//! slot. Each slot is then a lock like any other, so no more holders than
//! slots can be valid at once, on one node or many (§4.11 gives the
//! argument; counting free slots per node instead over-admits).

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use redis::Value;
use tokio::task::JoinHandle;

use crate::error::Result;
use crate::fencing::MAX_FENCING_TOKEN;
use crate::keys::{LockKeys, RwKeys, SemaphoreKeys};
use crate::node::{Prepared, Reply, as_i64};
use crate::node_set::NodeSet;
use crate::queue::{self, Entry, Leave, Release};
use crate::scripts::{self, LuaScript};
use crate::token::LockToken;

/// What is being acquired.
#[derive(Clone, Debug)]
pub(crate) enum Claim {
    /// A lock on one resource.
    Lock(LockKeys),
    /// Any one permit of a semaphore.
    Permit(Arc<SemaphoreKeys>),
    /// A read-write lock, shared with other readers.
    Read(Arc<RwKeys>),
    /// A read-write lock, alone.
    Write(Arc<RwKeys>),
}

/// One node's grant: which slot (always 0 for a lock) and the counter it
/// returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NodeGrant {
    pub(crate) slot: usize,
    pub(crate) counter: u64,
}

/// One attempt's request to every node.
pub(crate) struct Request {
    pub(crate) script: &'static LuaScript,
    pub(crate) keys: Vec<String>,
    pub(crate) args: Vec<String>,
    /// For a semaphore: the slot behind each slot key sent, in order.
    order: Vec<usize>,
    /// For a reader: the key this attempt's grant sets.
    reader_key: Option<String>,
    /// A lock's re-take ([`crate::queue::Entry::retake`]).
    retake: bool,
}

impl Request {
    /// The call to send to every node.
    pub(crate) fn prepared(&self) -> Prepared {
        let keys: Vec<&str> = self.keys.iter().map(String::as_str).collect();
        if self.retake {
            Prepared::retake(self.script, &keys, &self.args)
        } else {
            Prepared::new(self.script, &keys, &self.args)
        }
    }
}

impl Claim {
    /// The resource or semaphore name.
    pub(crate) fn name(&self) -> &str {
        match self {
            Claim::Lock(keys) => &keys.lock()[keys.prefix_len + 1..keys.resource_end],
            Claim::Permit(keys) => keys.name(),
            Claim::Read(keys) | Claim::Write(keys) => keys.name(),
        }
    }

    /// How messages name what was asked for.
    pub(crate) fn describe(&self) -> String {
        match self {
            Claim::Lock(_) => format!("lock '{}'", self.name()),
            Claim::Permit(keys) => format!("semaphore '{}' ({} permits)", keys.name(), keys.permits()),
            Claim::Read(keys) => format!("read-write lock '{}' for reading", keys.name()),
            Claim::Write(keys) => format!("read-write lock '{}' for writing", keys.name()),
        }
    }

    /// What is refused to an attempt: for a lock, the lock itself; for a
    /// semaphore, every permit.
    pub(crate) fn held_elsewhere(&self) -> String {
        match self {
            Claim::Lock(_) => format!(
                "lock '{}' is held by another owner or kept for a waiter ahead in line",
                self.name()
            ),
            Claim::Permit(keys) => format!(
                "all {} permits of semaphore '{}' are held or kept for waiters ahead in line",
                keys.permits(),
                keys.name()
            ),
            Claim::Read(keys) => format!(
                "read-write lock '{}' is held by a writer, or a writer is waiting ahead in line",
                keys.name()
            ),
            Claim::Write(keys) => format!(
                "read-write lock '{}' is held by readers or another writer, or kept for a waiter ahead in line",
                keys.name()
            ),
        }
    }

    /// How a waiter of this claim leaves its queue.
    pub(crate) fn leave(&self) -> Leave {
        match self {
            Claim::Lock(keys) => Leave::lock(keys),
            Claim::Permit(keys) => Leave::semaphore(keys),
            Claim::Read(keys) | Claim::Write(keys) => Leave::lock(&keys.held_write()),
        }
    }

    /// The fencing counter's key.
    pub(crate) fn fence(&self) -> &str {
        match self {
            Claim::Lock(keys) => keys.fence(),
            Claim::Permit(keys) => keys.fence(),
            Claim::Read(keys) | Claim::Write(keys) => keys.fence(),
        }
    }

    /// The keys of what the grant of `request` on `slot` holds.
    pub(crate) fn held(&self, request: &Request, slot: usize) -> LockKeys {
        match self {
            Claim::Lock(keys) => keys.clone(),
            Claim::Permit(keys) => keys.permit(slot),
            Claim::Write(keys) => keys.held_write(),
            Claim::Read(keys) => keys.held_read(request.reader_key.clone().unwrap_or_default()),
        }
    }

    /// The acquire script and its KEYS and ARGV for an attempt with
    /// `token`. A semaphore's slots go in a random rotation, so that
    /// clients that arrive together mostly ask for different slots, while
    /// every node of one attempt sees the same order; the permit most of
    /// the waiter's wake-ups named goes first. A reader's key is
    /// named by a fresh random id, the same on every node.
    pub(crate) fn request(
        &self,
        nodes: &NodeSet,
        token: &LockToken,
        ttl: Duration,
        entry: &Entry<'_>,
    ) -> Result<Request> {
        let [waiter, ticket, lease, fair] = entry.args();
        let ttl_ms = ttl.as_millis().to_string();
        let args = vec![token.as_str().to_owned(), ttl_ms, waiter, ticket, lease, fair];
        Ok(match self {
            Claim::Lock(keys) => Request {
                script: &scripts::ACQUIRE,
                keys: keys.acquire_keys().map(str::to_owned).to_vec(),
                args,
                order: Vec::new(),
                reader_key: None,
                retake: entry.retake,
            },
            Claim::Write(keys) => Request {
                script: &scripts::WRITE_ACQUIRE,
                keys: rw_keys(keys),
                args,
                order: Vec::new(),
                reader_key: None,
                retake: false,
            },
            Claim::Read(keys) => {
                let reader_key = keys.reader(LockToken::generate()?.as_str());
                let mut all = rw_keys(keys);
                all.push(reader_key.clone());
                Request {
                    script: &scripts::READ_ACQUIRE,
                    keys: all,
                    args,
                    order: Vec::new(),
                    reader_key: Some(reader_key),
                    retake: false,
                }
            }
            Claim::Permit(keys) => {
                let permits = keys.slots().len();
                let start = rand::rng().random_range(0..permits);
                let mut order: Vec<usize> = (0..permits).map(|i| (start + i) % permits).collect();
                // A permit that nodes reserved for this waiter comes first.
                if let Some(first) = entry
                    .prefer
                    .as_ref()
                    .and_then(|key| keys.slots().iter().position(|k| k == key))
                {
                    order.retain(|&slot| slot != first);
                    order.insert(0, first);
                }
                let waiters = keys.waiters();
                let mut all = vec![
                    keys.size().to_owned(),
                    keys.fence().to_owned(),
                    waiters.queue.clone(),
                    waiters.leases.clone(),
                ];
                all.extend(order.iter().map(|&slot| keys.slots()[slot].clone()));
                let handoff = nodes.handoff();
                let mut args = args;
                args.extend([
                    keys.permits().to_string(),
                    handoff.window_ms(),
                    handoff.counted.to_owned(),
                ]);
                Request {
                    script: &scripts::SEM_ACQUIRE,
                    keys: all,
                    args,
                    order,
                    reader_key: None,
                    retake: false,
                }
            }
        })
    }

    /// The grant in a node's reply, if it is one.
    pub(crate) fn read_grant(&self, request: &Request, reply: &Reply) -> Option<NodeGrant> {
        let value = reply.as_ref().ok()?;
        let (slot, counter) = match self {
            Claim::Lock(_) | Claim::Read(_) | Claim::Write(_) => (0, as_i64(value)?),
            Claim::Permit(_) => {
                let Value::Array(items) = value else { return None };
                let [first, index, counter] = items.as_slice() else {
                    return None;
                };
                if as_i64(first)? != 1 {
                    return None;
                }
                let index = usize::try_from(as_i64(index)?).ok()?;
                (*request.order.get(index.checked_sub(1)?)?, as_i64(counter)?)
            }
        };
        let counter = u64::try_from(counter)
            .ok()
            .filter(|n| (1..=MAX_FENCING_TOKEN).contains(n))?;
        Some(NodeGrant { slot, counter })
    }

    /// The counter in a grant that is out of the token range (above 2^53 −
    /// 1), which the node's reply cannot carry exactly.
    pub(crate) fn counter_out_of_range(&self, value: &Value) -> Option<i64> {
        let counter = match self {
            Claim::Lock(_) | Claim::Read(_) | Claim::Write(_) => as_i64(value)?,
            Claim::Permit(_) => match value {
                Value::Array(items) if items.len() == 3 && as_i64(&items[0]) == Some(1) => as_i64(&items[2])?,
                _ => return None,
            },
        };
        (counter > MAX_FENCING_TOKEN as i64).then_some(counter)
    }

    /// For a semaphore: the number of permits a node has stored, when it
    /// differs from ours (SEM_ACQUIRE's `{-1, stored}`).
    pub(crate) fn size_mismatch(&self, value: &Value) -> Option<String> {
        let Claim::Permit(_) = self else { return None };
        let Value::Array(items) = value else { return None };
        match items.as_slice() {
            [first, stored] if as_i64(first) == Some(-1) => Some(match stored {
                Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                other => format!("{other:?}"),
            }),
            _ => None,
        }
    }

    /// Undoes an attempt with `token` on the nodes `only` selects, in the
    /// background, waking nobody; returns the task doing it. For a
    /// semaphore, `keep` is a slot that stays (the one the attempt won): a
    /// node may have granted another.
    pub(crate) fn undo_in_background(
        &self,
        nodes: &Arc<NodeSet>,
        request: &Request,
        token: &LockToken,
        keep: Option<usize>,
        patience: Duration,
        only: impl Fn(usize) -> bool + Send + Sync + 'static,
    ) -> Option<JoinHandle<()>> {
        let (script, keys, args) = match self {
            Claim::Permit(keys) => {
                let slots: Vec<String> = (0..keys.slots().len())
                    .filter(|&slot| Some(slot) != keep)
                    .map(|slot| keys.slots()[slot].clone())
                    .collect();
                if slots.is_empty() {
                    return None;
                }
                (&*scripts::SEM_UNDO, slots, vec![token.as_str().to_owned()])
            }
            _ => {
                let held = self.held(request, 0);
                let (script, keys) = queue::release_keys(held.lock(), held.waiters(), held.reader.as_ref());
                (script, keys, queue::release_args(nodes, token, Release::Undo))
            }
        };
        nodes.everywhere_in_background(script, keys, args, patience, only)
    }
}

/// WRITE_ACQUIRE's KEYS, the first six of READ_ACQUIRE's.
fn rw_keys(keys: &RwKeys) -> Vec<String> {
    vec![
        keys.write().to_owned(),
        keys.fence().to_owned(),
        keys.waiters().queue.clone(),
        keys.waiters().leases.clone(),
        keys.readers().to_owned(),
        keys.writers().to_owned(),
    ]
}

/// The decision rule of an attempt: settled once one slot has a quorum of
/// grants, or no slot can reach one with the nodes still to answer.
pub(crate) fn by_slot_quorum<'a>(
    claim: &'a Claim,
    request: &'a Request,
    nodes: usize,
    needed: usize,
) -> impl FnMut(usize, &Reply) -> bool + 'a {
    let mut counts: Vec<(usize, usize)> = Vec::new();
    let mut answered = 0;
    move |_, reply| {
        answered += 1;
        if let Some(grant) = claim.read_grant(request, reply) {
            match counts.iter_mut().find(|(slot, _)| *slot == grant.slot) {
                Some((_, count)) => *count += 1,
                None => counts.push((grant.slot, 1)),
            }
        }
        let best = counts.iter().map(|(_, count)| *count).max().unwrap_or(0);
        best >= needed || best + (nodes - answered) < needed
    }
}

/// The slot granted by a quorum, if any, with each node's counter for it.
pub(crate) fn winner(grants: &[Option<NodeGrant>], needed: usize) -> Option<(usize, Vec<Option<u64>>)> {
    let mut slots: Vec<usize> = grants.iter().flatten().map(|g| g.slot).collect();
    slots.sort_unstable();
    slots.dedup();
    let slot = slots
        .into_iter()
        .find(|&slot| grants.iter().flatten().filter(|g| g.slot == slot).count() >= needed)?;
    let counters = grants
        .iter()
        .map(|g| g.filter(|g| g.slot == slot).map(|g| g.counter))
        .collect();
    Some((slot, counters))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(slot: usize, counter: u64) -> Option<NodeGrant> {
        Some(NodeGrant { slot, counter })
    }

    #[test]
    fn only_a_quorum_on_one_slot_wins() {
        // Three grants out of five, split 2 + 1: no permit.
        assert_eq!(
            winner(&[grant(0, 4), grant(1, 7), grant(0, 5), None, None], 3),
            None
        );
        let (slot, counters) =
            winner(&[grant(1, 4), grant(1, 7), grant(0, 5), grant(1, 2), None], 3).unwrap();
        assert_eq!(slot, 1);
        assert_eq!(counters, [Some(4), Some(7), None, Some(2), None]);
    }
}

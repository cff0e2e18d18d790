//! The Lua scripts of the wire protocol, with their return codes.
//!
//! docs/protocol.md §3 is the normative description; any change here is a
//! protocol change and needs a new protocol version.

use std::sync::LazyLock;

/// The version of the wire protocol these scripts make (docs/protocol.md
/// §8): clients of different versions may not contend for the same locks
/// as the document describes, and a PostgreSQL schema must speak this one.
pub const PROTOCOL_VERSION: i32 = 4;

/// A script and its SHA1, so calls can go by `EVALSHA`.
pub(crate) struct LuaScript {
    /// For messages about a script (the protocol-document check).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) name: &'static str,
    pub(crate) source: &'static str,
    pub(crate) script: redis::Script,
}

impl LuaScript {
    fn new(name: &'static str, source: &'static str) -> Self {
        LuaScript {
            name,
            source,
            script: redis::Script::new(source),
        }
    }

    pub(crate) fn sha(&self) -> &str {
        self.script.get_hash()
    }
}

/// Shared helper: compares two canonical decimal strings without going through
/// Lua numbers (doubles lose precision above 2^53).
const DECIMAL_LESS: &str = r#"
local function decimal_less(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end
"#;

/// Shared helpers of the scripts that see the waiters' queue
/// (docs/protocol.md §4.9): the node's clock, and dropping waiters whose
/// lease ran out.
const WAITERS: &str = r#"
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function drop_expired(queue, leases, now)
  local gone = redis.call('ZRANGEBYSCORE', leases, '-inf', now, 'LIMIT', 0, 100)
  if #gone > 0 then
    redis.call('ZREM', queue, unpack(gone))
    redis.call('ZREM', leases, unpack(gone))
  end
end
"#;

/// Shared helper of the scripts that free a key (RELEASE, LEAVE, the
/// semaphore's and the read-write lock's): hands it to the first waiter
/// still listening, or deletes it, at once when nobody ever queued (the
/// uncontended release skips the queue upkeep).
const HAND_OFF: &str = r#"
local function hand_off(lock, queue, leases, window_ms, counted)
  if redis.call('EXISTS', queue) == 0 then
    redis.call('DEL', lock)
    return
  end
  drop_expired(queue, leases, now_ms())
  local prefix = string.match(lock, '^[^{]*')
  for _ = 1, 8 do
    local head = redis.call('ZRANGE', queue, 0, 0)[1]
    if not head then break end
    local channel = prefix .. 'wake:' .. string.sub(head, 1, 32)
    if redis.call('PUBLISH', channel, head .. ' ' .. lock) > 0 or counted == '0' then
      redis.call('SET', lock, 'w:' .. head, 'PX', window_ms)
      return
    end
    redis.call('ZREM', queue, head)
    redis.call('ZREM', leases, head)
  end
  redis.call('DEL', lock)
end
"#;

/// Shared helpers of the scripts that take a waiter out of a queue (LEAVE,
/// SEM_LEAVE) while the key is free: the first waiter before expired ones
/// are dropped, and a wake-up for the first waiter after the leave when it
/// is another one. The head changes when the leaver was first (its own
/// lease may have run out: it is dropped then) or when the waiters ahead of
/// the new head were dead; either way the new head may be able to go now (a
/// writer still waits for the readers).
const NEW_HEAD: &str = r#"
local function head_then_drop(queue, leases)
  local head = redis.call('ZRANGE', queue, 0, 0)[1]
  drop_expired(queue, leases, now_ms())
  return head
end

local function wake_new_head(queue, before, named)
  local head = redis.call('ZRANGE', queue, 0, 0)[1]
  if head and head ~= before then
    local prefix = string.match(named, '^[^{]*')
    redis.call('PUBLISH', prefix .. 'wake:' .. string.sub(head, 1, 32), head .. ' ' .. named)
  end
end
"#;

/// `ACQUIRE(KEYS = {lock, fence, queue, leases},
/// ARGV = {token, ttl_ms, waiter, ticket, lease_ms, fair})`.
///
/// Grants (sets the lock key to the token with `PX ttl` and returns the new
/// value of the fencing counter, ≥ 1) when the lock key is absent, or holds a
/// hand-off reserved for `waiter`; in fair mode an absent key is granted only
/// when no other live waiter is first in the queue. Otherwise returns
/// `{0, retry_in_ms, ticket, position}` and, for a named waiter, enters or
/// refreshes it in the queue. Ticket 0 says the waiter never asked to enter
/// a queue before. Every attempt uses a fresh token.
pub(crate) static ACQUIRE: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        "acquire",
        concat_script(&[
            WAITERS,
            r#"
local lock, queue, leases, waiter = KEYS[1], KEYS[3], KEYS[4], ARGV[3]
local current = redis.call('GET', lock)
local free = current == false or (waiter ~= '' and current == 'w:' .. waiter)
if free and current == false and ARGV[6] == '1' then
  drop_expired(queue, leases, now_ms())
  local head = redis.call('ZRANGE', queue, 0, 0)[1]
  free = head == nil or head == waiter
end
if free then
  redis.call('SET', lock, ARGV[1], 'PX', ARGV[2])
  if waiter ~= '' and ARGV[4] ~= '0' then
    redis.call('ZREM', queue, waiter)
    redis.call('ZREM', leases, waiter)
  end
  return redis.call('INCR', KEYS[2])
end
local ticket, position = 0, -1
local now = now_ms()
if waiter ~= '' then
  local asked = tonumber(ARGV[4])
  ticket = tonumber(redis.call('ZSCORE', queue, waiter))
  if ticket == nil then
    local last = redis.call('ZRANGE', queue, -1, -1, 'WITHSCORES')[2]
    ticket = math.max((tonumber(last) or 0) + 1, asked)
    redis.call('ZADD', queue, string.format('%d', ticket), waiter)
  elseif asked > ticket then
    ticket = asked
    redis.call('ZADD', queue, string.format('%d', ticket), waiter)
  end
  redis.call('ZADD', leases, string.format('%d', now + ARGV[5]), waiter)
  redis.call('PEXPIRE', queue, ARGV[5])
  redis.call('PEXPIRE', leases, ARGV[5])
  position = redis.call('ZRANK', queue, waiter)
end
local retry_in = redis.call('PTTL', lock)
if retry_in == -2 then
  local head = redis.call('ZRANGE', queue, 0, 0)[1]
  local lease_end = head and tonumber(redis.call('ZSCORE', leases, head))
  retry_in = lease_end and math.max(lease_end - now, 0) or 0
  if head then
    local prefix = string.match(lock, '^[^{]*')
    redis.call('PUBLISH', prefix .. 'wake:' .. string.sub(head, 1, 32), head .. ' ' .. lock)
  end
end
return {0, retry_in, ticket, position}
"#,
        ]),
    )
});

/// `RELEASE(KEYS = {lock, queue, leases}, ARGV = {token, window_ms, counted,
/// keep_for})`: compare-and-hand-off.
///
/// When the key holds the token, it goes to the first waiter still listening
/// (a reservation `w:<waiter>` for `window_ms`, announced on the waiter's
/// channel) or is deleted; with `window_ms` 0 (the undo of a failed
/// attempt, which must not wake anyone) it is deleted; with a non-empty
/// `keep_for` (a lingering release, docs/protocol.md §4.9) it is reserved
/// for that waiter for `window_ms`, waking nobody; returns 1. Returns 0 when
/// another owner holds the key, -1 when absent. A missing `keep_for` is
/// empty.
pub(crate) static RELEASE: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        "release",
        concat_script(&[
            WAITERS,
            HAND_OFF,
            r#"
local current = redis.call('GET', KEYS[1])
if current == ARGV[1] then
  if ARGV[4] and ARGV[4] ~= '' then
    redis.call('SET', KEYS[1], 'w:' .. ARGV[4], 'PX', ARGV[2])
  elseif ARGV[2] == '0' then
    redis.call('DEL', KEYS[1])
  else
    hand_off(KEYS[1], KEYS[2], KEYS[3], ARGV[2], ARGV[3])
  end
  return 1
end
if current == false then return -1 end
return 0
"#,
        ]),
    )
});

/// `LEAVE(KEYS = {lock, queue, leases}, ARGV = {waiter, window_ms, counted})`:
/// takes a waiter out of the queue, passing on a hand-off reserved for it.
/// While the key is absent (a dead holder's key expired; a read-write
/// lock's readers hold, and readers queued behind a writer that gives up
/// may go in now) it drops expired waiters, and when the first waiter in
/// line is then another than before the drop (the leaver, or dead waiters,
/// were ahead of it) wakes it: it may be able to take the key now and would
/// otherwise find out at its next refresh.
///
/// Returns 1 when a reservation was passed on, 0 otherwise.
pub(crate) static LEAVE: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        "leave",
        concat_script(&[
            WAITERS,
            HAND_OFF,
            NEW_HEAD,
            r#"
local current = redis.call('GET', KEYS[1])
local head
if current == false then head = head_then_drop(KEYS[2], KEYS[3]) end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
if current == 'w:' .. ARGV[1] then
  hand_off(KEYS[1], KEYS[2], KEYS[3], ARGV[2], ARGV[3])
  return 1
end
if current == false then wake_new_head(KEYS[2], head, KEYS[1]) end
return 0
"#,
        ]),
    )
});

/// Shared helper of the semaphore scripts: enters or refreshes a waiter in
/// a queue as ACQUIRE does (whose source, and so SHA1, stays as it was),
/// returning its ticket and position.
const ENTER_QUEUE: &str = r#"
local function enter_queue(queue, leases, waiter, asked, lease_ms, now)
  local ticket = tonumber(redis.call('ZSCORE', queue, waiter))
  if ticket == nil then
    local last = redis.call('ZRANGE', queue, -1, -1, 'WITHSCORES')[2]
    ticket = math.max((tonumber(last) or 0) + 1, asked)
    redis.call('ZADD', queue, string.format('%d', ticket), waiter)
  elseif asked > ticket then
    ticket = asked
    redis.call('ZADD', queue, string.format('%d', ticket), waiter)
  end
  redis.call('ZADD', leases, string.format('%d', now + lease_ms), waiter)
  redis.call('PEXPIRE', queue, lease_ms)
  redis.call('PEXPIRE', leases, lease_ms)
  return ticket, redis.call('ZRANK', queue, waiter)
end
"#;

/// `SEM_ACQUIRE(KEYS = {permits, fence, queue, leases, slot…},
/// ARGV = {token, ttl_ms, waiter, ticket, lease_ms, fair, permits,
/// window_ms, counted})`: takes one of a semaphore's permits
/// (docs/protocol.md §3.11, §4.11).
///
/// The slots are the permits' keys in the client's order of preference. A
/// slot is free when its key is absent or reserved for `waiter`; one
/// reserved for it comes first, else the first absent one, which in fair
/// mode only the first live waiter may take. A grant sets the slot to the
/// token with `PX ttl`, passes on any other reservation for the waiter, wakes
/// the next waiter when another slot is still absent, and returns `{1,
/// index of the slot in KEYS from 1, new counter}`. Otherwise the waiter is
/// queued as by ACQUIRE and `{0, retry_in_ms, ticket, position}` returned.
/// A `permits` other than the one stored returns `{-1, stored}` and changes
/// nothing; the stored number lives as long as the semaphore is in use.
pub(crate) static SEM_ACQUIRE: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        "sem_acquire",
        concat_script(&[
            WAITERS,
            HAND_OFF,
            ENTER_QUEUE,
            r#"
local queue, leases, waiter = KEYS[3], KEYS[4], ARGV[3]
local stored = redis.call('GET', KEYS[1])
if stored and stored ~= ARGV[7] then return {-1, stored} end
local keep = math.max(tonumber(ARGV[2]), tonumber(ARGV[5]))
if not stored or redis.call('PTTL', KEYS[1]) < keep then
  redis.call('SET', KEYS[1], ARGV[7], 'PX', keep)
end
local slots = redis.call('MGET', unpack(KEYS, 5))
local mine = waiter ~= '' and 'w:' .. waiter
local chosen, absent, spare
for i = 1, #slots do
  if mine and slots[i] == mine then
    chosen = chosen or i
  elseif slots[i] == false then
    if absent then spare = spare or i else absent = i end
  end
end
local head
if not chosen and absent then
  if ARGV[6] == '1' then
    drop_expired(queue, leases, now_ms())
    head = redis.call('ZRANGE', queue, 0, 0)[1]
    if head == nil or head == waiter then chosen = absent end
  else
    chosen = absent
  end
end
if chosen then
  redis.call('SET', KEYS[chosen + 4], ARGV[1], 'PX', ARGV[2])
  if waiter ~= '' and ARGV[4] ~= '0' then
    redis.call('ZREM', queue, waiter)
    redis.call('ZREM', leases, waiter)
  end
  for i = chosen + 1, #slots do
    if mine and slots[i] == mine then hand_off(KEYS[i + 4], queue, leases, ARGV[8], ARGV[9]) end
  end
  if (spare or (absent and absent ~= chosen)) then
    local next_head = redis.call('ZRANGE', queue, 0, 0)[1]
    if next_head then
      local prefix = string.match(KEYS[1], '^[^{]*')
      redis.call('PUBLISH', prefix .. 'wake:' .. string.sub(next_head, 1, 32), next_head .. ' ' .. KEYS[1])
    end
  end
  return {1, chosen, redis.call('INCR', KEYS[2])}
end
local ticket, position, now = 0, -1, now_ms()
if waiter ~= '' then
  ticket, position = enter_queue(queue, leases, waiter, tonumber(ARGV[4]), tonumber(ARGV[5]), now)
end
local retry_in = -1
if absent then
  local lease_end = head and tonumber(redis.call('ZSCORE', leases, head))
  retry_in = lease_end and math.max(lease_end - now, 0) or 0
  if head then
    local prefix = string.match(KEYS[1], '^[^{]*')
    redis.call('PUBLISH', prefix .. 'wake:' .. string.sub(head, 1, 32), head .. ' ' .. KEYS[1])
  end
elseif position == 0 or position == 1 then
  for i = 5, #KEYS do
    local left = redis.call('PTTL', KEYS[i])
    if left >= 0 and (retry_in < 0 or left < retry_in) then retry_in = left end
  end
end
return {0, retry_in, ticket, position}
"#,
        ]),
    )
});

/// `SEM_LEAVE(KEYS = {queue, leases, slot…}, ARGV = {waiter, window_ms,
/// counted})`: takes a waiter out of a semaphore's queue, passing on every
/// permit reserved for it. While a permit is absent and none was reserved
/// for it, it wakes a new first waiter as LEAVE does (the message names the
/// size key). Returns how many it passed on.
pub(crate) static SEM_LEAVE: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        "sem_leave",
        concat_script(&[
            WAITERS,
            HAND_OFF,
            NEW_HEAD,
            r#"
local slots = redis.call('MGET', unpack(KEYS, 3))
local absent = false
for i = 1, #slots do
  if slots[i] == false then absent = true end
end
local head
if absent then head = head_then_drop(KEYS[1], KEYS[2]) end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
local passed = 0
for i = 1, #slots do
  if slots[i] == 'w:' .. ARGV[1] then
    hand_off(KEYS[i + 2], KEYS[1], KEYS[2], ARGV[2], ARGV[3])
    passed = passed + 1
  end
end
if absent and passed == 0 then
  wake_new_head(KEYS[1], head, string.sub(KEYS[1], 1, -6) .. 'permits')
end
return passed
"#,
        ]),
    )
});

/// `SEM_UNDO(KEYS = {slot…}, ARGV = {token})`: deletes the slot among
/// `KEYS` that holds `token` (an attempt's leftover), waking nobody.
/// Returns 1 when one did, 0 otherwise.
pub(crate) static SEM_UNDO: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        "sem_undo",
        r#"
local slots = redis.call('MGET', unpack(KEYS))
for i = 1, #slots do
  if slots[i] == ARGV[1] then
    redis.call('DEL', KEYS[i])
    return 1
  end
end
return 0
"#,
    )
});

/// `SEM_HOLDERS(KEYS = {slot…})`: the indices (from 1) of the slots held
/// here by a token, reservations for a waiter left out; for monitoring.
pub(crate) static SEM_HOLDERS: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        "sem_holders",
        r#"
local slots = redis.call('MGET', unpack(KEYS))
local held = {}
for i = 1, #slots do
  if slots[i] and string.sub(slots[i], 1, 2) ~= 'w:' then held[#held + 1] = i end
end
return held
"#,
    )
});

/// Shared helpers of the read-write lock scripts: whether a live reader
/// holds (dropping readers whose key expired from the index), and whether a
/// live writer waits ahead of a ticket.
const READERS_AND_WRITERS: &str = r#"
local function has_readers(readers)
  for _, key in ipairs(redis.call('SMEMBERS', readers)) do
    if redis.call('EXISTS', key) == 1 then return true end
    redis.call('SREM', readers, key)
  end
  return false
end

local function writer_ahead(queue, writers, ticket)
  while true do
    local first = redis.call('ZRANGE', writers, 0, 0, 'WITHSCORES')
    if #first == 0 then return nil end
    if redis.call('ZSCORE', queue, first[1]) then
      if ticket == nil or tonumber(first[2]) < ticket then return first[1] end
      return nil
    end
    redis.call('ZREM', writers, first[1])
  end
end
"#;

/// `WRITE_ACQUIRE(KEYS = {write, fence, queue, leases, readers, writers},
/// ARGV = {token, ttl_ms, waiter, ticket, lease_ms, fair})`: the writer's
/// ACQUIRE of a read-write lock (docs/protocol.md §3.15, §4.12).
///
/// As ACQUIRE on the write key, and only while no reader holds. A refused
/// named waiter is queued and listed among the writers. Returns the new
/// counter, or `{0, retry_in_ms, ticket, position}`.
pub(crate) static WRITE_ACQUIRE: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        "write_acquire",
        concat_script(&[
            WAITERS,
            ENTER_QUEUE,
            READERS_AND_WRITERS,
            r#"
local lock, queue, leases, waiter = KEYS[1], KEYS[3], KEYS[4], ARGV[3]
local current = redis.call('GET', lock)
local free = current == false or (waiter ~= '' and current == 'w:' .. waiter)
local head
if free and current == false and ARGV[6] == '1' then
  drop_expired(queue, leases, now_ms())
  head = redis.call('ZRANGE', queue, 0, 0)[1]
  free = head == nil or head == waiter
end
local reading = free and has_readers(KEYS[5])
if free and not reading then
  redis.call('SET', lock, ARGV[1], 'PX', ARGV[2])
  if waiter ~= '' and ARGV[4] ~= '0' then
    redis.call('ZREM', queue, waiter)
    redis.call('ZREM', leases, waiter)
    redis.call('ZREM', KEYS[6], waiter)
  end
  return redis.call('INCR', KEYS[2])
end
local ticket, position, now = 0, -1, now_ms()
if waiter ~= '' then
  ticket, position = enter_queue(queue, leases, waiter, tonumber(ARGV[4]), tonumber(ARGV[5]), now)
  redis.call('ZADD', KEYS[6], string.format('%d', ticket), waiter)
  redis.call('PEXPIRE', KEYS[6], ARGV[5])
end
local retry_in = -1
if current then
  retry_in = redis.call('PTTL', lock)
elseif reading then
  if position == 0 or position == 1 then
    for _, key in ipairs(redis.call('SMEMBERS', KEYS[5])) do
      local left = redis.call('PTTL', key)
      if left >= 0 and (retry_in < 0 or left < retry_in) then retry_in = left end
    end
  end
elseif head then
  local lease_end = tonumber(redis.call('ZSCORE', leases, head))
  retry_in = lease_end and math.max(lease_end - now, 0) or 0
  local prefix = string.match(lock, '^[^{]*')
  redis.call('PUBLISH', prefix .. 'wake:' .. string.sub(head, 1, 32), head .. ' ' .. lock)
end
return {0, retry_in, ticket, position}
"#,
        ]),
    )
});

/// `READ_ACQUIRE(KEYS = {write, fence, queue, leases, readers, writers,
/// reader}, ARGV = {token, ttl_ms, waiter, ticket, lease_ms, fair})`: a
/// reader's ACQUIRE of a read-write lock (docs/protocol.md §3.16, §4.12).
///
/// Grants when the write key is absent, or reserved for this waiter (the
/// reservation is then removed), and no live writer waits ahead of it (in
/// fair mode: no live waiter at all): sets the reader's own key to the
/// token with `PX ttl`, adds it to the readers, wakes the next waiter when
/// that is a reader too, and returns the new counter. Otherwise queues the
/// waiter and returns `{0, retry_in_ms, ticket, position}`.
pub(crate) static READ_ACQUIRE: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        "read_acquire",
        concat_script(&[
            WAITERS,
            ENTER_QUEUE,
            READERS_AND_WRITERS,
            r#"
local lock, queue, leases, writers, waiter = KEYS[1], KEYS[3], KEYS[4], KEYS[6], ARGV[3]
local current = redis.call('GET', lock)
local reserved = waiter ~= '' and current == 'w:' .. waiter
local free = current == false or reserved
local blocker
if free and not reserved then
  drop_expired(queue, leases, now_ms())
  local ticket = waiter ~= '' and tonumber(redis.call('ZSCORE', queue, waiter)) or nil
  if ARGV[6] == '1' then
    local head = redis.call('ZRANGE', queue, 0, 0)[1]
    if head ~= nil and head ~= waiter then blocker = head end
  else
    blocker = writer_ahead(queue, writers, ticket)
  end
  free = blocker == nil
end
local prefix = string.match(lock, '^[^{]*')
if free then
  redis.call('SET', KEYS[7], ARGV[1], 'PX', ARGV[2])
  redis.call('SADD', KEYS[5], KEYS[7])
  if reserved then redis.call('DEL', lock) end
  if waiter ~= '' and ARGV[4] ~= '0' then
    redis.call('ZREM', queue, waiter)
    redis.call('ZREM', leases, waiter)
  end
  local next_head = redis.call('ZRANGE', queue, 0, 0)[1]
  if next_head and not redis.call('ZSCORE', writers, next_head) then
    redis.call('PUBLISH', prefix .. 'wake:' .. string.sub(next_head, 1, 32), next_head .. ' ' .. lock)
  end
  return redis.call('INCR', KEYS[2])
end
local ticket, position, now = 0, -1, now_ms()
if waiter ~= '' then
  ticket, position = enter_queue(queue, leases, waiter, tonumber(ARGV[4]), tonumber(ARGV[5]), now)
end
local retry_in = -1
if current then
  retry_in = redis.call('PTTL', lock)
elseif blocker then
  local lease_end = tonumber(redis.call('ZSCORE', leases, blocker))
  retry_in = lease_end and math.max(lease_end - now, 0) or 0
  if ARGV[6] == '1' then
    redis.call('PUBLISH', prefix .. 'wake:' .. string.sub(blocker, 1, 32), blocker .. ' ' .. lock)
  end
end
return {0, retry_in, ticket, position}
"#,
        ]),
    )
});

/// `READ_RELEASE(KEYS = {reader, write, queue, leases, readers}, ARGV =
/// {token, window_ms, counted})`: a reader's compare-and-delete
/// (docs/protocol.md §3.17).
///
/// When the reader key holds the token it is deleted and leaves the
/// readers; when it was the last live reader and the write key is absent,
/// the write key is handed to the first waiter as RELEASE hands a lock on
/// (not with `window_ms` 0, an undo). Returns 1, 0 when another owner holds
/// the reader key, -1 when absent.
pub(crate) static READ_RELEASE: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        "read_release",
        concat_script(&[
            WAITERS,
            HAND_OFF,
            READERS_AND_WRITERS,
            r#"
local current = redis.call('GET', KEYS[1])
if current == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('SREM', KEYS[5], KEYS[1])
  if ARGV[2] ~= '0' and redis.call('EXISTS', KEYS[2]) == 0 and not has_readers(KEYS[5]) then
    hand_off(KEYS[2], KEYS[3], KEYS[4], ARGV[2], ARGV[3])
  end
  return 1
end
if current == false then return -1 end
return 0
"#,
        ]),
    )
});

/// `EXTEND(KEYS = {lock, [size]}, ARGV = {token, ttl_ms})`: compare-and-pexpire.
///
/// Returns 1 when extended, 0 when another owner holds the key, -1 when absent.
/// Never re-creates a missing key. A permit's renewal names its semaphore's
/// size key too, whose remaining time it raises to `ttl_ms` when shorter, so
/// the size lives as long as any permit is held (docs/protocol.md §4.11).
pub(crate) static EXTEND: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        "extend",
        r#"
local current = redis.call('GET', KEYS[1])
if current == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if KEYS[2] then
    local left = redis.call('PTTL', KEYS[2])
    if left >= 0 and left < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[2], ARGV[2]) end
  end
  return 1
end
if current == false then return -1 end
return 0
"#,
    )
});

/// `RAISE_FENCE(KEYS = {fence}, ARGV = {token})`: `counter = max(counter, token)`.
///
/// Returns 1 when the counter was raised, 0 when it was already at least `token`.
pub(crate) static RAISE_FENCE: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        "raise_fence",
        concat_script(&[
            DECIMAL_LESS,
            r#"
local current = redis.call('GET', KEYS[1]) or '0'
if decimal_less(current, ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
  return 1
end
return 0
"#,
        ]),
    )
});

/// `FENCED_SET(KEYS = {data}, ARGV = {token, holder, value})`.
///
/// The data key is a hash with fields `fence`, `holder` and `value`. The
/// write happens when no fence is stored, when `token > fence`, or when
/// `token == fence` and the same non-zero holder id stored it (the same
/// grant writing again; holder `0` is a bare token). Returns 1 when
/// written, 0 when the token is stale.
pub(crate) static FENCED_SET: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        "fenced_set",
        concat_script(&[
            DECIMAL_LESS,
            r#"
local stored = redis.call('HMGET', KEYS[1], 'fence', 'holder')
if stored[1] then
  if decimal_less(ARGV[1], stored[1]) then return 0 end
  if ARGV[1] == stored[1] and (ARGV[2] == '0' or ARGV[2] ~= stored[2]) then return 0 end
end
redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'holder', ARGV[2], 'value', ARGV[3])
return 1
"#,
        ]),
    )
});

/// `FENCED_GET(KEYS = {data})`: `{value, fence}` of a fenced hash, or nil.
pub(crate) static FENCED_GET: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        "fenced_get",
        r#"
local fields = redis.call('HMGET', KEYS[1], 'value', 'fence')
if not fields[2] then return false end
return fields
"#,
    )
});

/// `STATUS(KEYS = {lock, fence, leases})`: `{exists, pttl, counter,
/// waiters}` for operators (never the token itself); `waiters` counts the
/// queue's leases still running. Read-only.
pub(crate) static STATUS: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        "status",
        r#"
local exists = redis.call('EXISTS', KEYS[1])
local pttl = redis.call('PTTL', KEYS[1])
local counter = redis.call('GET', KEYS[2]) or '0'
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local waiters = redis.call('ZCOUNT', KEYS[3], string.format('(%d', now), '+inf')
return {exists, pttl, counter, waiters}
"#,
    )
});

/// `ANNOUNCE(KEYS = {lock, leader}, ARGV = {token, epoch, value})`: a
/// leader that holds `lock` here with `token` records `<epoch> <sha1 of
/// token> <value>` in `leader` and publishes `<epoch> <value>` on the
/// election's channel `<prefix>leader:<name>`. Returns 1, or 0 when the lock
/// here is not held with `token` (nothing written).
pub(crate) static ANNOUNCE: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        "announce",
        r#"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[2] .. ' ' .. redis.sha1hex(ARGV[1]) .. ' ' .. ARGV[3])
local prefix = string.match(KEYS[1], '^[^{]*')
local name = string.sub(KEYS[1], #prefix + 2, -2)
redis.call('PUBLISH', prefix .. 'leader:' .. name, ARGV[2] .. ' ' .. ARGV[3])
return 1
"#,
    )
});

/// `LEADER(KEYS = {lock, leader})`: `{epoch, value}` of the leader that
/// announced itself and still holds `lock` here, or an empty array (no
/// leader here, or one elected that has not announced yet).
pub(crate) static LEADER: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        "leader",
        r#"
local token = redis.call('GET', KEYS[1])
local announced = redis.call('GET', KEYS[2])
if not token or not announced then return {} end
local epoch, digest, value = string.match(announced, '^(%d+) (%x+) (.*)$')
if digest ~= redis.sha1hex(token) then return {} end
return {epoch, value}
"#,
    )
});

fn concat_script(parts: &[&str]) -> &'static str {
    Box::leak(parts.concat().into_boxed_str())
}

/// The scripts every connection loads as it opens (`SCRIPT LOAD`, one
/// round trip with the persistence check): those of a lock's every
/// acquire, renewal and release. The node's script cache is shared by all
/// its connections, so the others load on their first use there (the
/// `NOSCRIPT` fallback, once per node and restart).
pub(crate) fn preloaded() -> [&'static LuaScript; 5] {
    [&ACQUIRE, &RELEASE, &EXTEND, &LEAVE, &RAISE_FENCE]
}

/// Every script: for the protocol document and vectors checks, and for a
/// PostgreSQL node to find the script a call names by its SHA1.
pub(crate) fn all() -> [&'static LuaScript; 17] {
    [
        &ACQUIRE,
        &LEAVE,
        &FENCED_GET,
        &RELEASE,
        &EXTEND,
        &RAISE_FENCE,
        &FENCED_SET,
        &STATUS,
        &ANNOUNCE,
        &LEADER,
        &SEM_ACQUIRE,
        &SEM_LEAVE,
        &SEM_UNDO,
        &SEM_HOLDERS,
        &WRITE_ACQUIRE,
        &READ_ACQUIRE,
        &READ_RELEASE,
    ]
}

#[cfg(test)]
mod tests {
    /// docs/protocol.md is the contract other implementations are written
    /// from: every script must appear there exactly as it is sent.
    #[test]
    fn protocol_document_carries_every_script_verbatim() {
        let doc_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/protocol.md");
        let doc = std::fs::read_to_string(doc_path).expect("docs/protocol.md exists");
        for script in super::all() {
            assert!(
                doc.contains(script.source.trim()),
                "docs/protocol.md does not carry the {} script as sent; update the document",
                script.name
            );
        }
    }

    /// tests/vectors/protocol.json holds each script's SHA1 and cases with
    /// their replies; every front and the independent implementation check
    /// the same file. Here the scripts as sent are replayed on a real node.
    #[test]
    fn scripts_match_the_shared_test_vectors() {
        let vectors: serde_json::Value =
            serde_json::from_str(include_str!("../../tests/vectors/protocol.json")).expect("valid JSON");
        assert_eq!(vectors["protocol_version"], super::PROTOCOL_VERSION);
        for script in super::all() {
            let name = script.name.to_uppercase();
            assert_eq!(vectors["scripts"][&name], script.sha(), "SHA1 of {name}");
        }
        let node = fencelock_harness::RedisNode::start(&fencelock_harness::NodeOptions::default());
        let mut connection = node.connection();
        for case in vectors["script_cases"].as_array().expect("script_cases") {
            let _: () = redis::cmd("FLUSHALL").query(&mut connection).unwrap();
            for command in case["setup"].as_array().unwrap() {
                let words: Vec<&str> = command
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|w| w.as_str().unwrap())
                    .collect();
                let _: redis::Value = redis::cmd(words[0])
                    .arg(&words[1..])
                    .query(&mut connection)
                    .unwrap();
            }
            let name = case["script"].as_str().unwrap();
            let script = super::all()
                .into_iter()
                .find(|s| s.name.eq_ignore_ascii_case(name))
                .expect("a known script");
            let strings = |field: &str| -> Vec<String> {
                case[field]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|w| w.as_str().unwrap().to_owned())
                    .collect()
            };
            let (keys, args) = (strings("keys"), strings("args"));
            let mut listener = case.get("published").map(|_| node.connection());
            let mut listening = listener.as_mut().map(|listener| {
                let mut pubsub = listener.as_pubsub();
                pubsub.psubscribe("*").unwrap();
                pubsub
            });
            let reply: redis::Value = redis::cmd("EVAL")
                .arg(script.source)
                .arg(keys.len())
                .arg(&keys)
                .arg(&args)
                .query(&mut connection)
                .unwrap();
            assert_eq!(as_json(&reply), case["reply"], "{name}: {}", case["why"]);
            if let Some(pubsub) = listening.as_mut() {
                let published = published(pubsub, &mut connection);
                assert_eq!(published, case["published"], "{name} published: {}", case["why"]);
            }
            for (key, range) in case
                .get("pttl_after")
                .and_then(|p| p.as_object())
                .into_iter()
                .flatten()
            {
                let pttl: i64 = redis::cmd("PTTL").arg(key).query(&mut connection).unwrap();
                let (low, high) = (range[0].as_i64().unwrap(), range[1].as_i64().unwrap());
                assert!(
                    (low..=high).contains(&pttl),
                    "{name}: PTTL {key} is {pttl}: {}",
                    case["why"]
                );
            }
        }
    }

    /// What the pattern subscriber `pubsub` saw published: every message
    /// before an end marker that `connection` publishes now (a subscriber
    /// gets a node's messages in the order they were published).
    fn published(pubsub: &mut redis::PubSub<'_>, connection: &mut redis::Connection) -> serde_json::Value {
        const END: &str = "vectors:end";
        let _: i64 = redis::cmd("PUBLISH").arg(END).arg("").query(connection).unwrap();
        pubsub
            .set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let mut seen = Vec::new();
        loop {
            let message = pubsub.get_message().expect("the end marker arrives");
            let channel = message.get_channel_name().to_owned();
            if channel == END {
                return seen.into();
            }
            let payload: String = message.get_payload().unwrap();
            seen.push(serde_json::json!([channel, payload]));
        }
    }

    fn as_json(value: &redis::Value) -> serde_json::Value {
        match value {
            redis::Value::Nil => serde_json::Value::Null,
            redis::Value::Int(n) => (*n).into(),
            redis::Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into(),
            redis::Value::Array(items) => items.iter().map(as_json).collect(),
            other => panic!("unexpected reply {other:?}"),
        }
    }
}

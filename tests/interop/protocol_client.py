"""Independent test-only client of fencelock protocol v4 (locks, elections, semaphores, read-write
locks), written from docs/protocol.md alone."""
import argparse, concurrent.futures as cf, hashlib, itertools, os, random, secrets, sys, threading, time
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

# The helpers §3 repeats at the top of the scripts that see the waiters' queue.
_WAITERS = """local function now_ms()
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
"""
_HAND_OFF = """local function hand_off(lock, queue, leases, window_ms, counted)
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
"""

_NEW_HEAD = """local function head_then_drop(queue, leases)
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
"""

_ENTER_QUEUE = """local function enter_queue(queue, leases, waiter, asked, lease_ms, now)
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
"""
_READERS_AND_WRITERS = """local function has_readers(readers)
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
"""

SOURCES = {  # §3, verbatim; each source starts and ends with a newline
    "ACQUIRE": "\n" + _WAITERS + """
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
""",
    "RELEASE": "\n" + _WAITERS + "\n" + _HAND_OFF + """
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
""",
    "LEAVE": "\n" + _WAITERS + "\n" + _HAND_OFF + "\n" + _NEW_HEAD + """
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
""",
    "EXTEND": """
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
""",
    "RAISE_FENCE": """
local function decimal_less(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end

local current = redis.call('GET', KEYS[1]) or '0'
if decimal_less(current, ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
  return 1
end
return 0
""",
    "FENCED_SET": """
local function decimal_less(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end

local stored = redis.call('HMGET', KEYS[1], 'fence', 'holder')
if stored[1] then
  if decimal_less(ARGV[1], stored[1]) then return 0 end
  if ARGV[1] == stored[1] and (ARGV[2] == '0' or ARGV[2] ~= stored[2]) then return 0 end
end
redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'holder', ARGV[2], 'value', ARGV[3])
return 1
""",
    "FENCED_GET": """
local fields = redis.call('HMGET', KEYS[1], 'value', 'fence')
if not fields[2] then return false end
return fields
""",
    "ANNOUNCE": """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[2] .. ' ' .. redis.sha1hex(ARGV[1]) .. ' ' .. ARGV[3])
local prefix = string.match(KEYS[1], '^[^{]*')
local name = string.sub(KEYS[1], #prefix + 2, -2)
redis.call('PUBLISH', prefix .. 'leader:' .. name, ARGV[2] .. ' ' .. ARGV[3])
return 1
""",
    "SEM_ACQUIRE": "\n" + _WAITERS + "\n" + _HAND_OFF + "\n" + _ENTER_QUEUE + """
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
""",
    "SEM_LEAVE": "\n" + _WAITERS + "\n" + _HAND_OFF + "\n" + _NEW_HEAD + """
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
""",
    "SEM_UNDO": """
local slots = redis.call('MGET', unpack(KEYS))
for i = 1, #slots do
  if slots[i] == ARGV[1] then
    redis.call('DEL', KEYS[i])
    return 1
  end
end
return 0
""",
    "WRITE_ACQUIRE": "\n" + _WAITERS + "\n" + _ENTER_QUEUE + "\n" + _READERS_AND_WRITERS + """
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
""",
    "READ_ACQUIRE": "\n" + _WAITERS + "\n" + _ENTER_QUEUE + "\n" + _READERS_AND_WRITERS + """
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
""",
    "READ_RELEASE": "\n" + _WAITERS + "\n" + _HAND_OFF + "\n" + _READERS_AND_WRITERS + """
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
""",
}
SHAS = {  # §3, as printed; checked against the sources at import time
    "ACQUIRE": "d6852d9480d5cab12806e73f0d1c92d50ab20919", "RELEASE": "b72eded995974ad44d1d1af5a83f64189e24dcaa",
    "LEAVE": "074ed4702fc3df7aa55671a11ff501174285c962",
    "EXTEND": "918119dcdfd7bde2f9bf454953e908fe4fb68679", "RAISE_FENCE": "47ffe1b6f7161ac465068d73a91dc415e52f0514",
    "FENCED_SET": "d994da4f6b510a6fceaa105cadd8457225bd2eeb", "FENCED_GET": "7967fcbeab6330684aba873ad57883ad6866ccfa",
    "ANNOUNCE": "24386894b776be97d7f8edfcf82681b94ef95547",
    "SEM_ACQUIRE": "d8de36bfe83c87767e261e0a5c6a6cf25d7da93a",
    "SEM_LEAVE": "91ff5a9e80330d1cf171feef4dc3089d32a8d4b1",
    "SEM_UNDO": "617c3c8a23c256b557f87659aa1f127b1637bc57",
    "WRITE_ACQUIRE": "5f50b13f5ef60067e42375f9d997d12ad2c30fb0",
    "READ_ACQUIRE": "38dfb4e0986573923ca95de72c34b960b57c4fec",
    "READ_RELEASE": "9f54b870669e53b76558fb1f4aa62d0838a0a1e5",
}
for _n, _s in SOURCES.items():
    assert hashlib.sha1(_s.encode()).hexdigest() == SHAS[_n], _n

PENDING, TIMED_OUT = "pending", "timed_out"
AUTH_ERRORS = (redis.exceptions.AuthenticationError, redis.exceptions.NoPermissionError,
               redis.exceptions.AuthorizationError)


class ProtocolError(Exception):
    def __init__(self, kind, msg=""):
        super().__init__(f"{kind}: {msg}" if msg else kind)
        self.kind = kind


MAX_TOKEN = 2**53 - 1  # §2.2: a larger ACQUIRE reply is a failure of that node


def _is_int(r, *allowed):
    return type(r) is int and (r in allowed if allowed else 1 <= r <= MAX_TOKEN)


def _refused(r):  # §3.1: [0, retry_in, ticket, position]
    return isinstance(r, list) and len(r) == 4 and r[0] == 0


def _check_ttl(ttl_ms):
    if not (isinstance(ttl_ms, int) and 10 <= ttl_ms <= 2**31 - 1):
        raise ProtocolError("invalid_argument", f"ttl_ms {ttl_ms!r} out of range")


class _Node:
    """One worker thread owns the node's one connection, so a node's calls run in order on it (§4.2 Undo).
    The per-node timeout is enforced by the caller; the socket timeout only unblocks a dead node."""

    def __init__(self, url, timeout):
        self.client = redis.Redis.from_url(url, socket_connect_timeout=max(timeout, 1.0),
                                           socket_timeout=max(2.0, 20 * timeout), retry=Retry(NoBackoff(), 0))
        self.pool = cf.ThreadPoolExecutor(max_workers=1)

    def _run(self, name, keys, args):  # §3: EVALSHA, once EVAL on NOSCRIPT
        try:
            return self.client.evalsha(SHAS[name], len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:
            return self.client.eval(SOURCES[name], len(keys), *keys, *args)

    def submit(self, name, keys, args):
        return self.pool.submit(self._run, name, keys, args)


class ProtocolLock:
    """A lock, a semaphore's permit (§4.11) or a read-write lock's grant (§4.12): `key` is the key it
    holds, `release` the script and KEYS that release it, `extend_keys` the KEYS of its EXTEND (for a
    permit, the semaphore's size key too, §3.3), `permit` the permit's number or None."""

    def __init__(self, client, resource, token, fencing_token, ttl_ms, bases, key, release, extend_keys, permit):
        self._c, self.resource, self._token, self.key, self._release = client, resource, token, key, release
        self._extend_keys, self.permit = extend_keys, permit
        self.fencing_token, self.ttl_ms = fencing_token, ttl_ms
        self.holder = secrets.randbelow(2**63 - 1) + 1  # §3.5: 1 to 2^63 - 1, per grant
        # §4.5, per node: (sent, ttl_ms) of the last confirmed request or None, and the shortest
        # ttl of requests that may still land (kept for the lock's life: always safe).
        self._bases, self._unknown = bases, [None] * client.n
        self.lost = self.released = False

    @property
    def valid_until(self):  # §4.5: the q-th latest per-node guarantee
        held = sorted((b[0] + (min(b[1], u or b[1]) - self._c.margin(min(b[1], u or b[1]))) / 1000
                       for b, u in zip(self._bases, self._unknown) if b), reverse=True)
        return held[self._c.q - 1] if len(held) >= self._c.q else 0.0

    def extend(self, ttl_ms):  # §4.5
        _check_ttl(ttl_ms)
        if self.lost or self.released or time.monotonic() >= self.valid_until:
            return False
        c, sent = self._c, time.monotonic()
        res = c._quorum("EXTEND", self._extend_keys, [self._token, str(ttl_ms)], lambda v: v == 1)
        for i, r in enumerate(res):
            if _is_int(r, 1):
                self._bases[i] = (sent, ttl_ms)
            elif _is_int(r, 0, -1):
                self._bases[i] = None
            elif not _is_int(r):  # timed out, pending, failed: it may still land
                self._unknown[i] = min(self._unknown[i] or ttl_ms, ttl_ms)
        if sum(_is_int(r, 1) for r in res) >= c.q and self.valid_until > time.monotonic():
            self.ttl_ms = ttl_ms
            return True
        if sum(_is_int(r, 0, -1) for r in res) > c.n - c.q:
            self.lost = True  # taken_over / deleted: reported lost, never re-created
        return False

    def release(self):  # §4.6: sent to all nodes, answered once decided; a second release sends nothing
        if self.released:
            return False
        self.released, c = True, self._c
        res = c._quorum(self._release[0], self._release[1], [self._token, c.WINDOW_MS, "1"], lambda v: v == 1)
        return not self.lost and sum(_is_int(r, 1) for r in res) >= c.q


class ProtocolClient:
    def __init__(self, nodes, key_prefix="fencelock:", timeout_ms=100, drift=0.01,
                 base_delay_ms=10, max_delay_ms=500):
        if not nodes or timeout_ms <= 0 or "{" in key_prefix or "}" in key_prefix \
                or len(key_prefix.encode()) > 256 or not 0 <= drift <= 0.1:
            raise ProtocolError("config", "bad nodes/timeout/prefix/drift")
        self.prefix, self.timeout, self.drift = key_prefix, timeout_ms / 1000, drift
        self.base_delay, self.max_delay = base_delay_ms / 1000, max_delay_ms / 1000
        self.nodes = [_Node(u, self.timeout) for u in nodes]
        self.n, self.q = len(self.nodes), len(self.nodes) // 2 + 1
        self.client_id, self._seq = secrets.token_hex(16), itertools.count(1)  # §2.2
        self._wake_lock, self._waiting, self._subscribers = threading.Lock(), {}, []

    def close(self):
        for sub in self._subscribers:
            sub.stop()
        for nd in self.nodes:
            nd.pool.shutdown(wait=True)
            nd.client.close()

    def lock_key(self, resource):  # §2.1
        if not 1 <= len(resource.encode()) <= 1024 or resource.startswith("}"):
            raise ProtocolError("invalid_argument", "bad resource")
        return f"{self.prefix}{{{resource}}}"

    # §4.9: one subscription per node, started when the client first waits; a waiter is woken
    # once a quorum of nodes handed it the lock since its last attempt, or (not fair) GRACE_S after
    # the first.
    WINDOW_MS, LEASE_MS, GRACE_S = "200", 1000, 0.02

    def _listen(self):
        with self._wake_lock:
            if self._subscribers:
                return
            for i, nd in enumerate(self.nodes):
                ps = nd.client.pubsub(ignore_subscribe_messages=True)
                ps.subscribe(**{f"{self.prefix}wake:{self.client_id}": lambda m, i=i: self._woken(i, m)})
                # A lost subscription is a lost hint (§4.9): the thread ends, waits fall back on pauses.
                self._subscribers.append(ps.run_in_thread(sleep_time=0.05, daemon=True,
                                                          exception_handler=lambda e, ps, t: t.stop()))

    def _woken(self, node, message):
        waiter = message["data"].decode().split(" ", 1)[0]
        with self._wake_lock:
            slot = self._waiting.get(waiter)
            if slot is not None:
                slot[0].add(node)
                if len(slot[0]) >= self.q:
                    slot[1].set()
                elif len(slot[0]) == 1 and not slot[2]:
                    grace = threading.Timer(self.GRACE_S, self._grace_over, (waiter, slot[0]))
                    grace.daemon = True
                    grace.start()

    def _grace_over(self, waiter, handed):
        with self._wake_lock:
            slot = self._waiting.get(waiter)
            if slot is not None and slot[0] is handed:  # no attempt since
                slot[1].set()

    def margin(self, ttl_ms):  # §4.1, in ms
        return ttl_ms * self.drift + 2

    def _quorum(self, name, keys, args, is_yes, early=True):
        """Per-node results: the reply, an Exception, TIMED_OUT or PENDING (§4.1, deciding early)."""
        futs = {nd.submit(name, keys, args): i for i, nd in enumerate(self.nodes)}
        res, left, yes, other = [PENDING] * self.n, set(futs), 0, 0
        deadline = time.monotonic() + self.timeout
        while left and not (early and (yes >= self.q or other > self.n - self.q)):
            done, left = cf.wait(left, max(0.0, deadline - time.monotonic()), cf.FIRST_COMPLETED)
            if not done:
                for f in left:
                    res[futs[f]] = TIMED_OUT
                break
            for f in done:
                r = res[futs[f]] = f.exception() or f.result()
                if is_yes is not None and not isinstance(r, Exception) and is_yes(r):
                    yes += 1
                else:
                    other += 1
        return res

    def _claim(self, kind, name, permits=0):
        """What an attempt asks for (§4.2, §4.11, §4.12): per kind, the acquire script and KEYS for
        a token, how a grant names what it holds, the undo, and the held key with its release and
        the KEYS of its EXTEND (§3.3)."""
        if kind == "lock":
            lk = self.lock_key(name)
            waiters = [lk, lk + ":queue", lk + ":leases"]
            return dict(kind=kind, name=name, fence=lk + ":fence", leave=("LEAVE", waiters),
                        keys=lambda: ("ACQUIRE", [lk, lk + ":fence", lk + ":queue", lk + ":leases"], [], None),
                        held=lambda slot, extra: (lk, ("RELEASE", waiters), [lk]),
                        undo=lambda keep, extra: ("RELEASE", waiters, ["0", "1"]))
        base = self.lock_key(name) + (":sem:" if kind == "permit" else ":rw:")
        queue, leases = base + "queue", base + "leases"
        if kind == "permit":  # §4.11: the permits in a random rotation, the same on every node
            if not 1 <= permits <= 256:
                raise ProtocolError("invalid_argument", "permits must be 1 to 256")
            slots = [base + str(i) for i in range(permits)]

            def keys():
                start = random.randrange(permits)
                order = [(start + i) % permits for i in range(permits)]
                args = [str(permits), self.WINDOW_MS, "1"]
                return ("SEM_ACQUIRE", [base + "permits", base + "fence", queue, leases]
                        + [slots[i] for i in order], args, order)
            return dict(kind=kind, name=name, fence=base + "fence", leave=("SEM_LEAVE", [queue, leases] + slots),
                        keys=keys, held=lambda slot, extra: (slots[slot], ("RELEASE", [slots[slot], queue, leases]),
                                                             [slots[slot], base + "permits"]),
                        undo=lambda keep, extra: ("SEM_UNDO", [k for i, k in enumerate(slots) if i != keep], []))
        write, readers = base + "write", base + "readers"
        rw_keys = [write, base + "fence", queue, leases, readers, base + "writers"]
        common = dict(kind=kind, name=name, fence=base + "fence", leave=("LEAVE", [write, queue, leases]))
        if kind == "write":
            return dict(common, keys=lambda: ("WRITE_ACQUIRE", rw_keys, [], None),
                        held=lambda slot, extra: (write, ("RELEASE", [write, queue, leases]), [write]),
                        undo=lambda keep, extra: ("RELEASE", [write, queue, leases], ["0", "1"]))

        def read_keys():  # §4.12: a fresh reader key per attempt, the same on every node
            reader = base + "read:" + secrets.token_hex(16)
            return "READ_ACQUIRE", rw_keys + [reader], [], reader

        def read_release(reader):
            return "READ_RELEASE", [reader, write, queue, leases, readers]
        return dict(common, keys=read_keys, held=lambda slot, reader: (reader, read_release(reader), [reader]),
                    undo=lambda keep, reader: (*read_release(reader), ["0", "1"]))

    @staticmethod
    def _grant(claim, r, extra):  # (what it holds, counter), or None for anything but a grant
        if claim["kind"] != "permit":
            return (0, r) if _is_int(r) and r >= 1 else None
        if isinstance(r, list) and len(r) == 3 and r[0] == 1:
            return extra[r[1] - 1], r[2]
        return None

    def _undo(self, claim, token, res, extra, keep=None):  # §4.2 Undo: every node but those that refused
        script, keys, args = claim["undo"](keep, extra)
        for i, r in enumerate(res):
            grant = self._grant(claim, r, extra)
            if not _refused(r) and not (keep is not None and grant and grant[0] == keep):
                self.nodes[i].submit(script, keys, [token] + args)

    def _fail_kind(self, claim, res, extra):  # §4.2 step 3
        bad = [r for r in res if r is not PENDING and not _refused(r) and not self._grant(claim, r, extra)]
        zeros = sum(_refused(r) for r in res)
        if zeros >= 1 and zeros >= len(bad):
            return "not_acquired"
        return "auth" if bad and all(isinstance(r, AUTH_ERRORS) for r in bad) else "unavailable"

    def _attempt(self, claim, ttl_ms, waiter="", ticket=0, fair=False):  # §4.2
        token = secrets.token_hex(16)
        script, keys, more, extra = claim["keys"]()
        sent = time.monotonic()
        args = [token, str(ttl_ms), waiter, str(ticket), str(self.LEASE_MS), "1" if fair else "0"] + more
        res = self._quorum(script, keys, args, lambda r: self._grant(claim, r, extra) is not None)
        if any(isinstance(r, list) and len(r) == 2 and r[0] == -1 for r in res):  # §3.11: another size
            self._undo(claim, token, res, extra)
            raise ProtocolError("invalid_argument", f"semaphore {claim['name']!r} is in use with another size")
        grants = [self._grant(claim, r, extra) for r in res]
        held = [g[0] for g in grants if g]
        winner = next((h for h in sorted(set(held)) if held.count(h) >= self.q), None)  # a quorum on ONE key
        if winner is None:
            self._undo(claim, token, res, extra)
            return None, (self._fail_kind(claim, res, extra), [r for r in res if _refused(r)])
        counters = [g[1] if g and g[0] == winner else None for g in grants]
        fence = max(c for c in counters if c is not None)  # §4.4: the max, raised unless q report it
        if self.n > 1 and counters.count(fence) < self.q:
            # Only a node that granted vouches: it reported the token or confirmed the raise.
            raised = self._quorum("RAISE_FENCE", [claim["fence"]], [str(fence)], None, early=False)
            vouching = sum(c is not None and (c == fence or _is_int(r, 0, 1)) for c, r in zip(counters, raised))
            if vouching < self.q:
                self._undo(claim, token, res, extra)
                return None, ("unavailable", [])
        valid_until = sent + (ttl_ms - self.margin(ttl_ms)) / 1000
        if valid_until - time.monotonic() <= 0:
            self._undo(claim, token, res, extra)
            return None, ("unavailable", [])
        if claim["kind"] == "permit":  # §4.11: a node that granted another permit gives it back
            self._undo(claim, token, res, extra, keep=winner)
        bases = [(sent, ttl_ms) if c is not None else None for c in counters]
        key, release, extend_keys = claim["held"](winner, extra)
        permit = winner if claim["kind"] == "permit" else None
        return ProtocolLock(self, claim["name"], token, fence, ttl_ms, bases, key, release, extend_keys, permit), None

    def campaign(self, resource, ttl_ms=30000, wait_ms=10000, value="redis-py"):  # §4.10; None = timeout
        lock = self.acquire(resource, ttl_ms, wait_ms)
        if lock is not None:  # ANNOUNCE to all N nodes; leadership does not depend on it
            keys = [self.lock_key(resource), self.lock_key(resource) + ":leader"]
            args = [lock._token, str(lock.fencing_token), value]
            cf.wait([nd.submit("ANNOUNCE", keys, args) for nd in self.nodes], self.timeout)
        return lock

    def acquire(self, resource, ttl_ms=30000, wait_ms=10000, fair=False):  # §4.3, §4.9; None = timeout
        return self._acquire(self._claim("lock", resource), ttl_ms, wait_ms, fair)

    def semaphore_acquire(self, name, permits, ttl_ms=30000, wait_ms=10000, fair=False):  # §4.11
        return self._acquire(self._claim("permit", name, permits), ttl_ms, wait_ms, fair)

    def read(self, name, ttl_ms=30000, wait_ms=10000, fair=False):  # §4.12
        return self._acquire(self._claim("read", name), ttl_ms, wait_ms, fair)

    def write(self, name, ttl_ms=30000, wait_ms=10000, fair=False):  # §4.12
        return self._acquire(self._claim("write", name), ttl_ms, wait_ms, fair)

    def _acquire(self, claim, ttl_ms, wait_ms, fair):
        _check_ttl(ttl_ms)
        if wait_ms == 0:
            lock, failure = self._attempt(claim, ttl_ms, fair=fair)
            if lock is None and failure[0] not in ("not_acquired", "unavailable"):
                raise ProtocolError(failure[0])
            return lock
        self._listen()
        waiter, woken, ticket, n = f"{self.client_id}:{next(self._seq)}", threading.Event(), 0, 0
        with self._wake_lock:
            self._waiting[waiter] = (set(), woken, fair)
        deadline, lock, evened = time.monotonic() + wait_ms / 1000, None, False
        try:
            while True:
                with self._wake_lock:
                    self._waiting[waiter] = (set(), woken, fair)
                    woken.clear()
                lock, failure = self._attempt(claim, ttl_ms, waiter, ticket, fair)
                if lock is not None:
                    return lock
                kind, refusals = failure
                if kind not in ("not_acquired", "unavailable"):
                    raise ProtocolError(kind)
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                queued = [r for r in refusals if r[3] >= 0]
                tickets = {r[2] for r in queued}
                ticket = max([ticket, 1, *tickets])
                if kind == "unavailable" or not queued:
                    pause = random.uniform(0, min(self.max_delay, self.base_delay * 2 ** n))
                elif len(tickets) > 1 and not evened:
                    pause, evened = 0.0, True  # even out the tickets at once, once
                else:
                    evened, position = False, min(r[3] for r in queued)
                    expiries = [r[1] for r in queued if r[1] >= 0]
                    at_expiry = (min(expiries) + 1) / 1000 if expiries else None
                    if position <= 1 and at_expiry is not None and at_expiry <= 2 * self.LEASE_MS / 3000:
                        pause = at_expiry
                    else:
                        pause = random.uniform(self.LEASE_MS / 6000, self.LEASE_MS / 3000)
                woken.wait(min(pause, left))
                n += 1
        finally:
            with self._wake_lock:
                del self._waiting[waiter]
            for nd in self.nodes:  # leave every queue that may still hold it (§4.9, Leases)
                nd.submit(claim["leave"][0], claim["leave"][1], [waiter, self.WINDOW_MS, "1"])

    def fenced_set(self, key, value, token, holder=0):  # §3.5/§4.8, first node only; False = stale_token
        if key.startswith(self.prefix + "{"):
            raise ProtocolError("invalid_argument", "a data key of the form of a lock key")
        r = self.nodes[0].submit("FENCED_SET", [key], [str(int(token)), str(int(holder)), value]).result(self.timeout)
        if not _is_int(r, 0, 1):
            raise ProtocolError("unavailable", f"unexpected reply {r!r}")
        return r == 1

    def fenced_get(self, key):  # §3.6 -> (value bytes, fence int) or None
        r = self.nodes[0].submit("FENCED_GET", [key], []).result(self.timeout)
        return None if r is None else (r[0], int(r[1]))


def _worker(a):
    client = ProtocolClient(a.nodes.split(","), key_prefix=a.prefix, timeout_ms=a.timeout_ms)
    take = client.campaign if a.elect else client.acquire
    try:
        for i in range(a.iterations):
            writes, extra = True, ""
            if a.permits:
                writes, take = False, lambda name, ttl, wait: client.semaphore_acquire(name, a.permits, ttl, wait)
            elif a.rw:  # reads on even iterations, writes on odd ones, as the other workers
                writes, extra = i % 2 == 1, " w" if i % 2 == 1 else " r"
                take = client.write if writes else client.read
            lock = take(a.resource, a.ttl_ms, a.wait_ms)
            if lock is None:
                raise ProtocolError("timeout", f"could not acquire {a.resource!r}")
            start = time.time_ns()
            try:
                with open(a.counter_file) as f:
                    value = int(f.read().strip() or 0)
            except FileNotFoundError:
                value = 0
            time.sleep(0.005)
            if writes:
                with open(a.counter_file, "w") as f:
                    f.write(f"{value + 1}\n")
            end = time.time_ns()
            if lock.permit is not None:
                extra = f" {lock.permit}"
            with open(a.log_file, "a") as f:
                f.write(f"redis-py {lock.fencing_token} {start} {end}{extra}\n")
            if not lock.release():
                raise ProtocolError("not_held", "release did not reach a quorum")
    finally:
        client.close()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    w = p.add_subparsers(dest="cmd", required=True).add_parser("worker")
    for opt in ("--nodes", "--resource", "--counter-file", "--log-file"):
        w.add_argument(opt, required=True)
    w.add_argument("--iterations", type=int, required=True)
    w.add_argument("--prefix", default="fencelock:")
    w.add_argument("--ttl-ms", type=int, default=10000)
    w.add_argument("--wait-ms", type=int, default=60000)
    w.add_argument("--timeout-ms", type=int, default=int(os.environ.get("FENCELOCK_INTEROP_NODE_TIMEOUT_MS") or "100"),
                   help="the per-node timeout (default: FENCELOCK_INTEROP_NODE_TIMEOUT_MS, else 100)")
    w.add_argument("--elect", action="store_true", help="campaign (§4.10) instead of locking, announcing 'redis-py'")
    w.add_argument("--permits", type=int, default=0, help="take a permit of the semaphore (§4.11) instead")
    w.add_argument("--rw", action="store_true", help="read (even iterations) and write (odd) the read-write lock (§4.12)")
    try:
        _worker(p.parse_args())
    except Exception as e:  # any failure: message on stderr, non-zero exit
        print(f"protocol_client worker: {e}", file=sys.stderr)
        sys.exit(1)

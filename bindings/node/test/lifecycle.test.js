'use strict'

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const {
  Client,
  Fence,
  Lock,
  FenceLockError,
  MAX_HOLDER_ID,
  NotAcquiredError,
  LockTimeoutError,
  NotHeldError,
  StaleTokenError,
  ClosedError,
} = require('fencelock')
const { RedisNodes, unique } = require('./helpers.js')

let nodes
let client

before(async () => {
  nodes = await RedisNodes.start(1)
  // No test here is about node timeouts: a generous one keeps a slow answer
  // on a busy machine from turning "held_by_other" into "timed_out".
  client = new Client({ nodes: nodes.urls, nodeTimeoutMs: 5000 })
})

after(async () => {
  await client.close()
  await nodes.stop()
})

test('acquire, inspect and release', async () => {
  const resource = unique('life')
  const lock = await client.acquire(resource, { ttl: 5000, wait: 1000 })
  assert.ok(lock instanceof Lock)
  assert.equal(lock.resource, resource)
  assert.equal(typeof lock.fencingToken, 'bigint')
  assert.equal(lock.isHeld(), true)
  assert.equal(lock.status, 'held')
  assert.ok(Number.isInteger(lock.remainingMs) && lock.remainingMs > 0 && lock.remainingMs <= 5000)
  assert.equal(await nodes.call(0, 'EXISTS', `fencelock:{${resource}}`), '1')
  const [state] = await client.inspect(resource)
  assert.equal(state.held, true)
  assert.equal(state.fencingCounter, lock.fencingToken)
  assert.equal(state.waiters, 0)
  const waiting = client.acquire(resource, { ttl: 5000, wait: 10000 })
  const deadline = Date.now() + 5000
  while ((await client.inspect(resource))[0].waiters !== 1) {
    assert.ok(Date.now() < deadline, 'the waiter was never counted')
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  await lock.release()
  await (await waiting).release()
  assert.equal(lock.isHeld(), false)
  assert.equal(lock.status, 'released')
  assert.equal(lock.remainingMs, 0)
  assert.equal(await nodes.call(0, 'EXISTS', `fencelock:{${resource}}`), '0')
  await assert.rejects(lock.release(), NotHeldError, 'a second release says the lock is not held')
})

test('tryAcquire returns null while held, a lock once free', async () => {
  const resource = unique('try')
  const first = await client.tryAcquire(resource, { ttl: 5000 })
  assert.ok(first instanceof Lock)
  assert.equal(await client.tryAcquire(resource), null)
  await first.release()
  const second = await client.tryAcquire(resource)
  assert.ok(second instanceof Lock)
  await second.release()
})

test('busy lock: NotAcquiredError with wait 0, LockTimeoutError after a wait, with per-node detail', async () => {
  const resource = unique('busy')
  const held = await client.acquire(resource)
  const notAcquired = await client.acquire(resource, { wait: 0 }).catch((e) => e)
  assert.ok(notAcquired instanceof NotAcquiredError)
  assert.ok(notAcquired instanceof FenceLockError)
  assert.ok(notAcquired instanceof Error)
  assert.equal(notAcquired.code, 'NOT_ACQUIRED')
  assert.equal(notAcquired.name, 'NotAcquiredError')
  assert.equal(notAcquired.resource, resource)
  assert.deepEqual(
    notAcquired.nodes.map((n) => [n.node, n.outcome]),
    [[nodes.urls[0], 'held_by_other']],
  )
  assert.equal(typeof notAcquired.nodes[0].detail, 'string')
  const timeout = await client.acquire(resource, { wait: 50 }).catch((e) => e)
  assert.ok(timeout instanceof LockTimeoutError, String(timeout))
  assert.equal(timeout.code, 'TIMEOUT')
  await held.release()
})

test('fencing tokens strictly increase as BigInt', async () => {
  const resource = unique('fence')
  let last = -1n
  for (let i = 0; i < 20; i++) {
    const lock = await client.acquire(resource)
    assert.equal(typeof lock.fencingToken, 'bigint')
    assert.ok(lock.fencingToken > last, `${lock.fencingToken} > ${last}`)
    last = lock.fencingToken
    await lock.release()
  }
})

test('extend sets a new ttl; extend after release is NotHeld', async () => {
  const resource = unique('extend')
  const lock = await client.acquire(resource, { ttl: 1000, autoRenew: false })
  await lock.extend(60000)
  assert.ok(lock.remainingMs > 1000)
  const pttl = Number(await nodes.call(0, 'PTTL', `fencelock:{${resource}}`))
  assert.ok(pttl > 1000, `pttl ${pttl}`)
  await lock.release()
  await assert.rejects(lock.extend(1000), NotHeldError)
})

test('fencedSet refuses an older token with STALE_TOKEN', async () => {
  const key = unique('stock')
  const resource = unique('fenced')
  const older = await client.acquire(resource)
  const olderToken = older.fencingToken
  await older.release()
  const newer = await client.acquire(resource)
  await client.fencedSet(key, '41', newer.fence)
  const stale = await client.fencedSet(key, '40', olderToken).catch((e) => e)
  assert.ok(stale instanceof StaleTokenError, String(stale))
  assert.equal(stale.code, 'STALE_TOKEN')
  // The same grant may write again (by its fence or the fence's text); a bare
  // equal token, or another grant's equal token, may not.
  await client.fencedSet(key, '42', String(newer.fence))
  await assert.rejects(client.fencedSet(key, 'bare', newer.fencingToken), StaleTokenError)
  const other = new Fence(newer.fencingToken, (newer.fence.holder % MAX_HOLDER_ID) + 1n)
  await assert.rejects(client.fencedSet(key, 'other', other), StaleTokenError)
  assert.deepEqual(await client.fencedGet(key), { value: '42', fencingToken: newer.fencingToken })
  assert.equal(await client.fencedGet(unique('absent')), null)
  await newer.release()
})

test('many concurrent acquires of one resource: one holder at a time, exact counter', async () => {
  const resource = unique('contend')
  let inside = 0
  let maxInside = 0
  let counter = 0
  const workers = Array.from({ length: 50 }, async () => {
    await client.using(resource, { ttl: 5000, wait: 30000 }, async () => {
      inside += 1
      maxInside = Math.max(maxInside, inside)
      const seen = counter
      await new Promise((r) => setImmediate(r))
      counter = seen + 1
      inside -= 1
    })
  })
  await Promise.all(workers)
  assert.equal(counter, 50)
  assert.equal(maxInside, 1)
})

test('a closed client refuses new operations with ClosedError; held locks still release', async () => {
  const other = new Client({ nodes: nodes.urls })
  const lock = await other.acquire(unique('closing'))
  await other.close()
  await assert.rejects(other.acquire(unique('closed')), ClosedError)
  await lock.release()
})

'use strict'

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { Client, LockLostError, NotHeldError } = require('fencelock')
const { RedisNodes, unique, eventually } = require('./helpers.js')

let nodes
let client

before(async () => {
  nodes = await RedisNodes.start(1)
  client = new Client({ nodes: nodes.urls })
})

after(async () => {
  await client.close()
  await nodes.stop()
})

/** Resolves with the signal's reason once it aborts. */
function aborted(signal) {
  if (signal.aborted) return Promise.resolve(signal.reason)
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(signal.reason), { once: true }))
}

test('lock.signal aborts with a LockLostError when the key is deleted', async () => {
  const resource = unique('sig')
  const lock = await client.acquire(resource, { ttl: 300 })
  const { signal } = lock
  assert.equal(signal.aborted, false)
  assert.equal(lock.signal, signal, 'the same signal every time')
  await nodes.call(0, 'DEL', `fencelock:{${resource}}`)
  const reason = await aborted(signal)
  assert.ok(reason instanceof LockLostError)
  assert.equal(reason.code, 'LOST')
  assert.equal(reason.resource, resource)
  assert.equal(reason.reason, 'deleted')
  assert.equal(lock.isHeld(), false)
  assert.equal(lock.status, 'lost:deleted')
  await assert.rejects(lock.release(), NotHeldError)
})

test('a signal first read after the loss is already aborted', async () => {
  const resource = unique('late')
  const lock = await client.acquire(resource, { ttl: 300 })
  await nodes.call(0, 'DEL', `fencelock:{${resource}}`)
  await eventually(() => lock.status !== 'held')
  assert.equal(lock.signal.aborted, true)
  assert.ok(lock.signal.reason instanceof LockLostError)
})

test('a released lock never aborts its signal', async () => {
  const lock = await client.acquire(unique('clean'), { ttl: 300 })
  const { signal } = lock
  await lock.release()
  await new Promise((r) => setTimeout(r, 400))
  assert.equal(signal.aborted, false)
})

test('using() aborts its signal on loss and releases at the end', async () => {
  const resource = unique('using-lost')
  let sawAbort = false
  const result = await client.using(resource, { ttl: 300 }, async (signal, lock) => {
    assert.equal(lock.resource, resource)
    await nodes.call(0, 'DEL', `fencelock:{${resource}}`)
    const reason = await aborted(signal)
    sawAbort = reason instanceof LockLostError
    return 'done'
  })
  assert.equal(result, 'done')
  assert.ok(sawAbort)
  assert.equal(await client.tryAcquire(resource).then((l) => l && l.release().then(() => true)), true)
})

test('using() releases when fn returns and when it throws', async () => {
  const resource = unique('using')
  let held
  const value = await client.using(resource, async (signal, lock) => {
    held = lock
    assert.equal(signal.aborted, false)
    return 42
  })
  assert.equal(value, 42)
  assert.equal(held.status, 'released')
  assert.equal(await nodes.call(0, 'EXISTS', `fencelock:{${resource}}`), '0')

  const boom = new Error('boom')
  await assert.rejects(
    client.using(resource, { ttl: 5000 }, async (_signal, lock) => {
      held = lock
      throw boom
    }),
    (error) => error === boom,
  )
  assert.equal(held.status, 'released')
  assert.equal(await nodes.call(0, 'EXISTS', `fencelock:{${resource}}`), '0')
})

test('an AbortSignal cancels a waiting acquire and leaves no key', async () => {
  const resource = unique('abort')
  const holder = await client.acquire(resource, { ttl: 10000 })
  const controller = new AbortController()
  const waiting = client.acquire(resource, { wait: 60000, signal: controller.signal })
  setTimeout(() => controller.abort(new Error('stop waiting')), 50)
  await assert.rejects(waiting, { message: 'stop waiting' })
  await holder.release()
  // Nothing of the cancelled attempt stays behind.
  await eventually(async () => (await nodes.call(0, 'EXISTS', `fencelock:{${resource}}`)) === '0')
  assert.equal(await nodes.call(0, 'EXISTS', `fencelock:{${resource}}`), '0')

  const already = AbortSignal.abort()
  await assert.rejects(client.acquire(resource, { signal: already }), { name: 'AbortError' })
  const byTimeout = client.acquire(unique('free'), { signal: AbortSignal.timeout(60000) })
  await (await byTimeout).release()
})

test('an abort that loses the race with the grant rejects and releases the lock', async () => {
  const resource = unique('abort-race')
  const controller = new AbortController()
  const waiting = client.acquire(resource, { wait: 5000, signal: controller.signal })
  // Block the JavaScript thread: the grant comes back meanwhile and waits to
  // be handed over; the abort then comes first in line.
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300)
  controller.abort(new Error('gave up'))
  await assert.rejects(waiting, { message: 'gave up' })
  // The lock nobody received does not stay behind for its ttl.
  await eventually(async () => (await nodes.call(0, 'EXISTS', `fencelock:{${resource}}`)) === '0', {
    timeoutMs: 3000,
  })
})

test('Symbol.asyncDispose releases, and is a no-op after release', async () => {
  const resource = unique('dispose')
  const lock = await client.acquire(resource)
  await lock[Symbol.asyncDispose]()
  assert.equal(lock.status, 'released')
  await lock[Symbol.asyncDispose]()
  assert.equal(await nodes.call(0, 'EXISTS', `fencelock:{${resource}}`), '0')
})

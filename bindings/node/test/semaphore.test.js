'use strict'

// Counting semaphores (docs/protocol.md §4.11): at most `permits` holders at
// once, each holding a Lock with its own permit number, renewal, lost signal
// and fencing token; waiters woken by a release; an AbortSignal cancels a wait.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const {
  Client,
  Lock,
  Semaphore,
  InvalidArgumentError,
  LockLostError,
  LockTimeoutError,
  NotAcquiredError,
  NotHeldError,
  MAX_PERMITS,
} = require('fencelock')
const { RedisNodes, unique, eventually } = require('./helpers.js')

const permitKey = (name, permit) => `fencelock:{${name}}:sem:${permit}`
const queueKey = (name) => `fencelock:{${name}}:sem:queue`
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let nodes
let nodes5
let client

before(async () => {
  nodes = await RedisNodes.start(1)
  nodes5 = await RedisNodes.start(5)
  client = new Client({ nodes: nodes.urls })
})

after(async () => {
  await client.close()
  await nodes.stop()
  await nodes5.stop()
})

/** Resolves with the signal's reason once it aborts. */
function aborted(signal) {
  if (signal.aborted) return Promise.resolve(signal.reason)
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(signal.reason), { once: true }))
}

test('a semaphore hands out distinct permits as Locks, up to its size', async () => {
  const name = unique('sem')
  const sem = client.semaphore(name, 2)
  assert.ok(sem instanceof Semaphore)
  assert.equal(sem.name, name)
  assert.equal(sem.permits, 2)
  assert.match(require('node:util').inspect(sem), /Semaphore \{ name: ".*", permits: 2 \}/)
  assert.equal(await sem.holders(), 0)

  const a = await sem.acquire({ ttl: 5000, wait: 0 })
  const b = await sem.tryAcquire({ ttl: 5000 })
  assert.ok(a instanceof Lock && b instanceof Lock)
  assert.equal(a.resource, name)
  assert.deepEqual([a.permit, b.permit].sort(), [0, 1], 'two holders on one permit')
  assert.equal(typeof a.permit, 'number')
  assert.match(require('node:util').inspect(a), new RegExp(`permit: ${a.permit}`))
  for (const held of [a, b]) {
    assert.equal(held.isHeld(), true)
    assert.equal(held.signal.aborted, false)
    assert.equal(await nodes.call(0, 'EXISTS', permitKey(name, held.permit)), '1')
  }
  // One counter per semaphore: a later grant has a larger token.
  assert.ok(b.fencingToken > a.fencingToken)
  assert.equal(await sem.holders(), 2)

  // Full: one attempt resolves null, a bounded wait rejects.
  assert.equal(await sem.tryAcquire({ ttl: 5000 }), null)
  await assert.rejects(sem.acquire({ ttl: 5000, wait: 0 }), NotAcquiredError)
  await assert.rejects(sem.acquire({ ttl: 5000, wait: 100 }), LockTimeoutError)
  // The timed-out waiter has left the queue when the call rejects: a release
  // made next is not handed to it.
  assert.equal(await nodes.call(0, 'ZCARD', queueKey(name)), '0', 'the timed-out waiter is still in line')

  await a.release()
  assert.equal(await nodes.call(0, 'EXISTS', permitKey(name, a.permit)), '0')
  assert.equal(await sem.holders(), 1)
  await assert.rejects(a.release(), NotHeldError)
  const again = await sem.acquire({ ttl: 5000, wait: 1000 })
  assert.equal(again.permit, a.permit, 'the free permit')
  assert.ok(again.fencingToken > b.fencingToken)
  await again.release()

  // A lock of the same name is another thing; a plain lock has no permit.
  const plain = await client.acquire(name, { ttl: 5000, wait: 0 })
  assert.equal(plain.permit, null)
  assert.doesNotMatch(require('node:util').inspect(plain), /permit/)
  await plain.release()
  await b.release()
  assert.equal(await sem.holders(), 0)
})

/** `workers` clients take a permit `rounds` times each; the most holders there ever were at once. */
async function contend(urls, name, permits, workers, rounds) {
  let inside = 0
  let peak = 0
  let entries = 0
  const permitsInside = new Set()
  const clashes = []
  const clients = Array.from({ length: workers }, () => new Client({ nodes: urls, nodeTimeoutMs: 1000 }))
  try {
    await Promise.all(
      clients.map(async (workerClient) => {
        const sem = workerClient.semaphore(name, permits)
        for (let round = 0; round < rounds; round++) {
          const lock = await sem.acquire({ ttl: 5000, wait: 60000 })
          inside += 1
          entries += 1
          peak = Math.max(peak, inside)
          if (permitsInside.has(lock.permit)) clashes.push(lock.permit)
          permitsInside.add(lock.permit)
          await sleep(10)
          permitsInside.delete(lock.permit)
          inside -= 1
          await lock.release()
        }
      }),
    )
    return { peak, entries, clashes, holders: await clients[0].semaphore(name, permits).holders() }
  } finally {
    await Promise.all(clients.map((c) => c.close()))
  }
}

test('several clients never hold more permits than there are (1 node)', async () => {
  const result = await contend(nodes.urls, unique('contend1'), 3, 8, 10)
  assert.equal(result.entries, 80)
  assert.ok(result.peak <= 3, `${result.peak} holders of 3 permits`)
  assert.deepEqual(result.clashes, [], 'two holders at once on one permit')
  // Else the workload never overlapped and the bound above tests nothing.
  assert.ok(result.peak >= 2, 'never two holders at once')
  assert.equal(result.holders, 0)
})

test('several clients never hold more permits than there are (5 nodes, quorum)', async () => {
  const result = await contend(nodes5.urls, unique('contend5'), 2, 6, 6)
  assert.equal(result.entries, 36)
  assert.ok(result.peak <= 2, `${result.peak} holders of 2 permits`)
  assert.deepEqual(result.clashes, [])
  assert.ok(result.peak >= 2, 'never two holders at once')
  assert.equal(result.holders, 0)
})

test('holders() counts the permits held on a majority of five nodes', async () => {
  const five = new Client({ nodes: nodes5.urls })
  try {
    const sem = five.semaphore(unique('count5'), 3)
    assert.equal(await sem.holders(), 0)
    const locks = [
      await sem.acquire({ ttl: 5000, wait: 0 }),
      await sem.acquire({ ttl: 5000, wait: 0 }),
      await sem.acquire({ ttl: 5000, wait: 0 }),
    ]
    assert.deepEqual(locks.map((l) => l.permit).sort(), [0, 1, 2])
    assert.equal(await sem.holders(), 3)
    assert.equal(await sem.tryAcquire({ ttl: 5000 }), null)
    await locks[0].release()
    assert.equal(await sem.holders(), 2)
    await Promise.all(locks.slice(1).map((l) => l.release()))
    assert.equal(await sem.holders(), 0)
  } finally {
    await five.close()
  }
})

test('clients that disagree on the permits get an InvalidArgumentError saying the size', async () => {
  const name = unique('sized')
  const held = await client.semaphore(name, 2).acquire({ ttl: 5000, wait: 0 })
  const other = new Client({ nodes: nodes.urls })
  try {
    const three = other.semaphore(name, 3)
    for (const attempt of [() => three.acquire({ ttl: 5000, wait: 1000 }), () => three.tryAcquire({ ttl: 5000 })]) {
      const error = await attempt().catch((e) => e)
      assert.ok(error instanceof InvalidArgumentError, String(error))
      assert.equal(error.code, 'INVALID_ARGUMENT')
      assert.match(error.message, /has 2 permits/)
      assert.match(error.message, new RegExp(`semaphore '${name}' \\(3 permits\\)`))
    }
    // The right size still works alongside.
    const second = await other.semaphore(name, 2).tryAcquire({ ttl: 5000 })
    assert.notEqual(second, null)
    assert.notEqual(second.permit, held.permit)
    await second.release()
  } finally {
    await other.close()
    await held.release()
  }
})

test('bad permits, names and options are refused before anything is sent', async () => {
  const name = unique('bad')
  assert.equal(MAX_PERMITS, 256)
  assert.equal(client.semaphore(name, 1).permits, 1)
  assert.equal(client.semaphore(name, MAX_PERMITS).permits, MAX_PERMITS)
  for (const permits of [0, MAX_PERMITS + 1, -1, 1.5, Infinity, 2 ** 32]) {
    assert.throws(() => client.semaphore(name, permits), {
      name: 'RangeError',
      message: `permits must be a whole number from 1 to 256, got ${permits}`,
    })
  }
  for (const permits of ['3', NaN, undefined, null, 2n]) {
    assert.throws(() => client.semaphore(name, permits), { name: 'TypeError', message: /^permits must be a number/ })
  }
  assert.throws(() => client.semaphore('', 2), { name: 'RangeError', message: 'name must not be empty' })
  assert.throws(() => client.semaphore(42, 2), { name: 'TypeError', message: /^name must be a string/ })
  // A name only the core refuses: its error class.
  assert.throws(() => client.semaphore('}brace', 2), InvalidArgumentError)
  const sem = client.semaphore(name, 2)
  await assert.rejects(sem.acquire({ ttl: 0 }), { name: 'RangeError', message: /^options\.ttl must be/ })
  await assert.rejects(sem.acquire({ retry: 1 }), { name: 'TypeError', message: /options\.retry is not an option/ })
  await assert.rejects(sem.tryAcquire({ wait: 10 }), { name: 'TypeError', message: /options\.wait is not an option/ })
  await assert.rejects(sem.acquire({ signal: 'stop' }), { name: 'TypeError', message: /options\.signal must be/ })
  await assert.rejects(sem.acquire({ fair: 'yes' }), { name: 'TypeError', message: /options\.fair must be a boolean/ })
})

test('a permit renews, and its signal aborts when its key is deleted', async () => {
  const name = unique('lost')
  const sem = client.semaphore(name, 2)
  const other = await sem.acquire({ ttl: 5000 })
  const lock = await sem.acquire({ ttl: 1000 })
  const { signal } = lock
  await sleep(1500)
  assert.equal(lock.isHeld(), true)
  assert.ok(lock.renewals >= 1, `renewals: ${lock.renewals}`)
  const pttl = Number(await nodes.call(0, 'PTTL', permitKey(name, lock.permit)))
  assert.ok(pttl > 0 && pttl <= 1000, `pttl ${pttl}`)
  await nodes.call(0, 'DEL', permitKey(name, lock.permit))
  const reason = await aborted(signal)
  assert.ok(reason instanceof LockLostError)
  assert.equal(reason.reason, 'deleted')
  assert.equal(lock.status, 'lost:deleted')
  await assert.rejects(lock.release(), NotHeldError)
  // Losing one permit leaves the other holder alone.
  assert.equal(other.isHeld(), true)
  assert.equal(other.signal.aborted, false)
  await other.release()
})

test('a fixed-lease permit (autoRenew: false) expires at its ttl', async () => {
  const lock = await client.semaphore(unique('fixed'), 1).acquire({ ttl: 200, autoRenew: false })
  const reason = await aborted(lock.signal)
  assert.equal(reason.reason, 'expired')
  assert.equal(lock.renewals, 0)
})

test('a waiting acquire is woken by push when a permit is released, and gets that permit', async () => {
  const name = unique('wake')
  const sem = client.semaphore(name, 2)
  const held = [await sem.acquire({ ttl: 30000 }), await sem.acquire({ ttl: 30000 })]
  const other = new Client({ nodes: nodes.urls })
  try {
    let got = null
    const waiting = other
      .semaphore(name, 2)
      .acquire({ ttl: 5000, wait: 20000 })
      .then((lock) => (got = lock))
    await eventually(async () => (await nodes.call(0, 'ZCARD', queueKey(name))) === '1', { timeoutMs: 5000 })
    await sleep(100)
    assert.equal(got, null, 'a third holder of two permits')
    const released = performance.now()
    await held[1].release()
    await waiting
    const elapsed = performance.now() - released
    // The holders' keys live 30 s: only the release let it in, and the push
    // brought it well within a waiter's own pause.
    assert.ok(elapsed < 500, `took ${elapsed.toFixed(0)} ms`)
    assert.equal(got.permit, held[1].permit)
    assert.equal(await nodes.call(0, 'ZCARD', queueKey(name)), '0')
    await got.release()
  } finally {
    await other.close()
    await held[0].release()
  }
})

test('an AbortSignal cancels a waiting acquire, which takes no permit', async () => {
  const name = unique('abort')
  const sem = client.semaphore(name, 1)
  const holder = await sem.acquire({ ttl: 30000 })
  const other = new Client({ nodes: nodes.urls })
  try {
    const controller = new AbortController()
    const waiting = other.semaphore(name, 1).acquire({ ttl: 5000, wait: 60000, signal: controller.signal })
    await eventually(async () => (await nodes.call(0, 'ZCARD', queueKey(name))) === '1', { timeoutMs: 5000 })
    const why = new Error('shutting down')
    controller.abort(why)
    await assert.rejects(waiting, (error) => error === why)
    // An aborted signal rejects at once with its reason.
    await assert.rejects(other.semaphore(name, 1).acquire({ signal: AbortSignal.abort(why) }), (e) => e === why)
    await holder.release()
    await sleep(300)
    assert.equal(await nodes.call(0, 'EXISTS', permitKey(name, 0)), '0', 'the cancelled waiter took the permit')
    assert.equal(await sem.holders(), 0)
    // A signal that never aborts does not get in the way.
    const lock = await other.semaphore(name, 1).acquire({ ttl: 5000, signal: new AbortController().signal })
    assert.equal(lock.permit, 0)
    await lock.release()
  } finally {
    await other.close()
  }
})

test('a closed client refuses to acquire permits', async () => {
  const closed = new Client({ nodes: nodes.urls })
  const sem = closed.semaphore(unique('closed'), 2)
  await closed.close()
  await assert.rejects(sem.acquire({ wait: 0 }), { name: 'ClosedError' })
  await assert.rejects(sem.tryAcquire(), { name: 'ClosedError' })
  await assert.rejects(sem.holders(), { name: 'ClosedError' })
})

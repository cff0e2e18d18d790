'use strict'

// Read-write locks (docs/protocol.md §4.12): any number of readers or one
// writer, each grant a Lock with its own lease, renewal, lost signal and
// fencing token; a waiting writer is not overtaken by later readers; waiters
// woken by a release; an AbortSignal cancels a wait.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { inspect } = require('node:util')
const {
  Client,
  Lock,
  RwLock,
  InvalidArgumentError,
  LockLostError,
  LockTimeoutError,
  NotAcquiredError,
  NotHeldError,
  StaleTokenError,
} = require('fencelock')
const { RedisNodes, unique, eventually } = require('./helpers.js')

const writeKey = (name) => `fencelock:{${name}}:rw:write`
const readersKey = (name) => `fencelock:{${name}}:rw:readers`
const writersKey = (name) => `fencelock:{${name}}:rw:writers`
const queueKey = (name) => `fencelock:{${name}}:rw:queue`
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

/** The reader keys of `name` that exist now on node 0 (the set may still list deleted ones). */
async function readerKeys(name) {
  const members = (await nodes.call(0, 'SMEMBERS', readersKey(name))).split(' ').filter(Boolean)
  const live = []
  for (const key of members) {
    if ((await nodes.call(0, 'EXISTS', key)) === '1') live.push(key)
  }
  return live.sort()
}

const count = async (command, key) => Number(await nodes.call(0, command, key))

/**
 * Readers and writers inside a critical section: whether a writer ever
 * shared it, the most readers there were at once, and each grant's kind and
 * token in the order of grant.
 */
class History {
  readers = 0
  writers = 0
  peakReaders = 0
  writes = 0
  clashes = []
  grants = []

  // Called as soon as acquire resolves, before any release: a writer excludes
  // every other grant, so the order of these calls is the order of the grants
  // around each writer.
  enter(kind, token) {
    this.grants.push([kind, token])
    if (kind === 'write') {
      this.writes += 1
      if (this.readers || this.writers)
        this.clashes.push(`a writer beside ${this.readers} readers, ${this.writers} writers`)
      this.writers += 1
    } else {
      if (this.writers) this.clashes.push('a reader beside a writer')
      this.readers += 1
      this.peakReaders = Math.max(this.peakReaders, this.readers)
    }
  }

  leave(kind) {
    if (kind === 'write') this.writers -= 1
    else this.readers -= 1
  }

  /** Writers whose token is not above every earlier grant's and below every later one's. */
  tokenOrderViolations() {
    const found = []
    this.grants.forEach(([kind, token], i) => {
      if (kind !== 'write') return
      for (const [, earlier] of this.grants.slice(0, i)) {
        if (token <= earlier) found.push(`writer ${i} token ${token} <= earlier ${earlier}`)
      }
      for (const [, later] of this.grants.slice(i + 1)) {
        if (token >= later) found.push(`writer ${i} token ${token} >= later ${later}`)
      }
    })
    return found
  }
}

test('readers share a read-write lock and a writer holds it alone', async () => {
  const name = unique('rw')
  const rw = client.rwLock(name)
  assert.ok(rw instanceof RwLock)
  assert.equal(rw.name, name)
  assert.equal(inspect(rw), `RwLock { name: ${JSON.stringify(name)} }`)

  const a = await rw.acquireRead({ ttl: 5000, wait: 0 })
  const b = await rw.tryRead({ ttl: 5000 })
  assert.ok(a instanceof Lock && b instanceof Lock, 'readers share')
  assert.equal(a.resource, name)
  assert.equal(a.permit, null)
  assert.equal(a.isHeld() && b.isHeld() && !a.signal.aborted, true)
  // Each reader holds a key of its own, listed in the readers set.
  const keys = await readerKeys(name)
  assert.equal(keys.length, 2)
  for (const key of keys) assert.match(key, /^fencelock:\{rw:\d+:\d+\}:rw:read:[0-9a-f]{32}$/)
  assert.equal(await nodes.call(0, 'EXISTS', writeKey(name)), '0')
  // One counter: a later grant has a larger token.
  assert.ok(b.fencingToken > a.fencingToken)

  assert.equal(await rw.tryWrite({ ttl: 5000 }), null, 'a writer beside two readers')
  await assert.rejects(rw.acquireWrite({ ttl: 5000, wait: 0 }), NotAcquiredError)
  await a.release()
  assert.equal((await readerKeys(name)).length, 1)
  await assert.rejects(rw.acquireWrite({ ttl: 5000, wait: 200 }), LockTimeoutError)
  // The timed-out waiter has left the queue when the call rejects: a release
  // made next is not handed to it.
  assert.equal(await count('ZCARD', queueKey(name)), 0, 'the timed-out writer is still in line')
  assert.equal(await rw.tryWrite({ ttl: 5000 }), null, 'a writer beside a reader')
  await assert.rejects(a.release(), NotHeldError)
  await b.release()
  assert.deepEqual(await readerKeys(name), [])

  const writer = await rw.acquireWrite({ ttl: 5000, wait: 0 })
  assert.ok(writer instanceof Lock)
  assert.equal(writer.resource, name)
  assert.ok(writer.fencingToken > b.fencingToken)
  assert.equal(await nodes.call(0, 'EXISTS', writeKey(name)), '1')
  assert.equal(await rw.tryRead({ ttl: 5000 }), null, 'a reader beside a writer')
  assert.equal(await rw.tryWrite({ ttl: 5000 }), null, 'two writers')
  await assert.rejects(rw.acquireRead({ ttl: 5000, wait: 0 }), NotAcquiredError)
  await assert.rejects(rw.acquireRead({ ttl: 5000, wait: 200 }), LockTimeoutError)
  assert.equal(await count('ZCARD', queueKey(name)), 0, 'the timed-out reader is still in line')
  // A lock of the same name is another thing.
  const plain = await client.acquire(name, { ttl: 5000, wait: 0 })
  await plain.release()
  await writer.release()
  assert.equal(await nodes.call(0, 'EXISTS', writeKey(name)), '0')

  const reader = await rw.acquireRead({ ttl: 5000, wait: 0 })
  assert.ok(reader.fencingToken > writer.fencingToken)
  await reader.release()
})

/** `workers` clients read or write `rounds` times each (every fourth turn a write). */
async function contend(urls, name, workers, rounds) {
  const history = new History()
  const clients = Array.from({ length: workers }, () => new Client({ nodes: urls, nodeTimeoutMs: 1000 }))
  try {
    await Promise.all(
      clients.map(async (workerClient, w) => {
        const rw = workerClient.rwLock(name)
        for (let round = 0; round < rounds; round++) {
          const kind = (w + round) % 4 === 0 ? 'write' : 'read'
          const options = { ttl: 5000, wait: 60000 }
          const lock = kind === 'write' ? await rw.acquireWrite(options) : await rw.acquireRead(options)
          history.enter(kind, lock.fencingToken)
          await sleep(kind === 'read' ? 20 : 5)
          history.leave(kind)
          await lock.release()
        }
      }),
    )
    const last = await clients[0].rwLock(name).tryWrite({ ttl: 5000 })
    assert.notEqual(last, null, 'something is still held')
    assert.ok(history.grants.every(([, token]) => last.fencingToken > token))
    await last.release()
    return history
  } finally {
    await Promise.all(clients.map((c) => c.close()))
  }
}

function assertReadersOrOneWriter(history, grants) {
  assert.equal(history.grants.length, grants)
  assert.deepEqual(history.clashes.slice(0, 5), [])
  // Else the workload never wrote or never shared, and the checks above test nothing.
  assert.ok(history.writes >= grants / 5, `${history.writes} writes`)
  assert.ok(history.peakReaders >= 2, 'never two readers at once')
  assert.deepEqual(history.tokenOrderViolations().slice(0, 5), [])
}

test('several clients keep readers or one writer (1 node)', async () => {
  const history = await contend(nodes.urls, unique('contend1'), 8, 12)
  assertReadersOrOneWriter(history, 96)
  const writes = history.grants.filter(([kind]) => kind === 'write').map(([, token]) => token)
  assert.equal(new Set(writes).size, writes.length, "a writer's token was handed out twice")
})

test('several clients keep readers or one writer (5 nodes, quorum)', async () => {
  const history = await contend(nodes5.urls, unique('contend5'), 6, 8)
  assertReadersOrOneWriter(history, 48)
})

test('a waiting writer is not overtaken by readers that ask after it', async () => {
  const name = unique('order')
  const rw = client.rwLock(name)
  const first = await rw.acquireRead({ ttl: 30000 })
  const others = Array.from({ length: 4 }, () => new Client({ nodes: nodes.urls }))
  try {
    const order = []
    const take = async (other, kind, hold) => {
      const lock =
        kind === 'write'
          ? await other.rwLock(name).acquireWrite({ ttl: 10000, wait: 20000 })
          : await other.rwLock(name).acquireRead({ ttl: 10000, wait: 20000 })
      order.push([kind, lock.fencingToken])
      await sleep(hold)
      await lock.release()
    }
    const writer = take(others[0], 'write', 200)
    await eventually(async () => (await count('ZCARD', writersKey(name))) === 1, { timeoutMs: 5000 })
    // Readers that come now wait behind the writer, though only a reader holds the lock.
    assert.equal(await rw.tryRead({ ttl: 5000 }), null, 'a reader got in ahead of a waiting writer')
    const late = others.slice(1).map((other) => take(other, 'read', 50))
    await eventually(async () => (await count('ZCARD', queueKey(name))) === 4, { timeoutMs: 5000 })
    await sleep(200)
    assert.deepEqual(order, [], 'got in while the first reader held')
    await first.release()
    await Promise.all([writer, ...late])
    assert.deepEqual(
      order.map(([kind]) => kind),
      ['write', 'read', 'read', 'read'],
    )
    const writerToken = order[0][1]
    assert.ok(writerToken > first.fencingToken)
    assert.ok(order.slice(1).every(([, token]) => token > writerToken))
    assert.equal(await count('ZCARD', writersKey(name)), 0)
    assert.equal(await count('ZCARD', queueKey(name)), 0)
  } finally {
    await Promise.all(others.map((c) => c.close()))
  }
})

test("a reader's signal aborts when its own key is deleted, and the other reader stays", async () => {
  const name = unique('lost')
  const rw = client.rwLock(name)
  const a = await rw.acquireRead({ ttl: 1000 })
  const b = await rw.acquireRead({ ttl: 1000 })
  await sleep(800)
  assert.ok(a.renewals >= 1 && b.renewals >= 1, 'the readers were not renewed')
  const keys = await readerKeys(name)
  assert.equal(keys.length, 2)
  const pttl = Number(await nodes.call(0, 'PTTL', keys[0]))
  assert.ok(pttl > 0 && pttl <= 1000, `pttl ${pttl}`)
  await nodes.call(0, 'DEL', keys[0])
  const [lost, kept] = await Promise.race([aborted(a.signal).then(() => [a, b]), aborted(b.signal).then(() => [b, a])])
  const reason = lost.signal.reason
  assert.ok(reason instanceof LockLostError)
  assert.equal(reason.reason, 'deleted')
  assert.equal(lost.status, 'lost:deleted')
  await assert.rejects(lost.release(), NotHeldError)
  // The other reader keeps its own lease: still held and renewed well past its ttl.
  const renewals = kept.renewals
  await sleep(800)
  assert.equal(kept.isHeld(), true)
  assert.equal(kept.signal.aborted, false)
  assert.ok(kept.renewals > renewals)
  assert.deepEqual(await readerKeys(name), keys.slice(1))
  assert.equal(await rw.tryWrite({ ttl: 5000 }), null, 'a writer beside the remaining reader')
  await kept.release()
  const writer = await rw.tryWrite({ ttl: 5000 })
  assert.notEqual(writer, null)
  await writer.release()
})

test('a waiting acquire is woken by push when the holder releases (both ways)', async () => {
  const name = unique('wake')
  const rw = client.rwLock(name)
  const other = new Client({ nodes: nodes.urls })
  try {
    for (const [heldKind, waitingKind] of [
      ['write', 'read'],
      ['read', 'write'],
    ]) {
      const held = heldKind === 'write' ? await rw.acquireWrite({ ttl: 30000 }) : await rw.acquireRead({ ttl: 30000 })
      let got = null
      const mine = other.rwLock(name)
      const options = { ttl: 5000, wait: 20000 }
      const waiting = (waitingKind === 'write' ? mine.acquireWrite(options) : mine.acquireRead(options)).then(
        (lock) => (got = lock),
      )
      await eventually(async () => (await count('ZCARD', queueKey(name))) === 1, { timeoutMs: 5000 })
      await sleep(100)
      assert.equal(got, null, `a ${waitingKind} beside a ${heldKind}`)
      const released = performance.now()
      await held.release()
      await waiting
      const elapsed = performance.now() - released
      // The holder's key lives 30 s: only the release let it in, and the push
      // brought it well within a waiter's own pause.
      assert.ok(elapsed < 500, `${waitingKind} after ${heldKind}: took ${elapsed.toFixed(0)} ms`)
      assert.ok(got.fencingToken > held.fencingToken)
      assert.equal(await count('ZCARD', queueKey(name)), 0)
      await got.release()
    }
  } finally {
    await other.close()
  }
})

test('an AbortSignal cancels a waiting writer, which leaves the line and takes nothing', async () => {
  const name = unique('abort')
  const rw = client.rwLock(name)
  const reader = await rw.acquireRead({ ttl: 30000 })
  const other = new Client({ nodes: nodes.urls })
  try {
    const controller = new AbortController()
    const waiting = other.rwLock(name).acquireWrite({ ttl: 5000, wait: 60000, signal: controller.signal })
    await eventually(async () => (await count('ZCARD', writersKey(name))) === 1, { timeoutMs: 5000 })
    const why = new Error('shutting down')
    controller.abort(why)
    await assert.rejects(waiting, (error) => error === why)
    // The cancelled writer leaves the line: readers are let in again.
    await eventually(async () => (await count('ZCARD', writersKey(name))) === 0, { timeoutMs: 5000 })
    const second = await rw.tryRead({ ttl: 5000 })
    assert.notEqual(second, null, 'the cancelled writer still holds readers back')
    await second.release()
    // An aborted signal rejects at once with its reason, for readers and writers.
    await assert.rejects(other.rwLock(name).acquireWrite({ signal: AbortSignal.abort(why) }), (e) => e === why)
    await assert.rejects(other.rwLock(name).acquireRead({ signal: AbortSignal.abort(why) }), (e) => e === why)
    await reader.release()
    await sleep(300)
    assert.equal(await nodes.call(0, 'EXISTS', writeKey(name)), '0', 'the cancelled writer took the lock')
    // A waiting reader is cancelled the same way.
    const writer = await rw.acquireWrite({ ttl: 30000 })
    const readerController = new AbortController()
    const waitingReader = other.rwLock(name).acquireRead({ ttl: 5000, wait: 60000, signal: readerController.signal })
    await eventually(async () => (await count('ZCARD', queueKey(name))) === 1, { timeoutMs: 5000 })
    readerController.abort(why)
    await assert.rejects(waitingReader, (e) => e === why)
    await writer.release()
    await sleep(300)
    assert.deepEqual(await readerKeys(name), [], 'the cancelled reader took the lock')
    // A signal that never aborts does not get in the way.
    const lock = await other.rwLock(name).acquireWrite({ ttl: 5000, signal: new AbortController().signal })
    assert.equal(lock.resource, name)
    await lock.release()
  } finally {
    await other.close()
  }
})

test('a stale writer is refused by a fenced write (5 nodes)', async () => {
  const five = new Client({ nodes: nodes5.urls })
  try {
    const name = unique('stale')
    const rw = five.rwLock(name)
    const first = await rw.acquireWrite({ ttl: 200, autoRenew: false })
    const reason = await aborted(first.signal)
    assert.equal(reason.reason, 'expired')
    const reader = await rw.acquireRead({ ttl: 2000, wait: 2000 })
    assert.ok(reader.fencingToken > first.fencingToken)
    await reader.release()
    const second = await rw.acquireWrite({ ttl: 2000, wait: 2000 })
    assert.ok(second.fencingToken > reader.fencingToken)
    await five.fencedSet(`data:${name}`, 'second', second.fence)
    await assert.rejects(five.fencedSet(`data:${name}`, 'first', first.fence), StaleTokenError)
    assert.deepEqual(await five.fencedGet(`data:${name}`), { value: 'second', fencingToken: second.fencingToken })
    await second.release()
  } finally {
    await five.close()
  }
})

test('bad names and options are refused before anything is sent', async () => {
  const name = unique('bad')
  assert.throws(() => client.rwLock(''), { name: 'RangeError', message: 'name must not be empty' })
  assert.throws(() => client.rwLock(42), { name: 'TypeError', message: /^name must be a string/ })
  assert.throws(() => client.rwLock(), { name: 'TypeError', message: /^name must be a string/ })
  assert.throws(() => client.rwLock('x'.repeat(100000)), { name: 'RangeError', message: /^name is 100000 bytes long/ })
  // A name only the core refuses: its error class.
  assert.throws(() => client.rwLock('}brace'), InvalidArgumentError)
  const rw = client.rwLock(name)
  for (const acquire of [(o) => rw.acquireRead(o), (o) => rw.acquireWrite(o)]) {
    await assert.rejects(acquire({ ttl: 0 }), { name: 'RangeError', message: /^options\.ttl must be/ })
    await assert.rejects(acquire({ retry: 1 }), { name: 'TypeError', message: /options\.retry is not an option/ })
    await assert.rejects(acquire({ signal: 'stop' }), { name: 'TypeError', message: /options\.signal must be/ })
    await assert.rejects(acquire({ fair: 'yes' }), { name: 'TypeError', message: /options\.fair must be a boolean/ })
    await assert.rejects(acquire('fast'), { name: 'TypeError', message: /^options must be an object/ })
  }
  for (const attempt of [(o) => rw.tryRead(o), (o) => rw.tryWrite(o)]) {
    await assert.rejects(attempt({ wait: 10 }), { name: 'TypeError', message: /options\.wait is not an option/ })
    await assert.rejects(attempt({ signal: AbortSignal.abort() }), {
      name: 'TypeError',
      message: /options\.signal is not an option/,
    })
    await assert.rejects(attempt({ maxRenewals: -1 }), { name: 'RangeError', message: /options\.maxRenewals/ })
  }
  // Nothing was taken by the refused calls.
  const writer = await rw.tryWrite({ ttl: 5000 })
  assert.notEqual(writer, null)
  await writer.release()
})

test('the lock options apply to readers and writers', async () => {
  const rw = client.rwLock(unique('options'))
  const reader = await rw.acquireRead({ ttl: 200, autoRenew: false })
  const writerAsked = performance.now()
  // fair: true waits in line too, and gets in once the fixed-lease reader expires.
  const writer = await rw.acquireWrite({ ttl: 200, autoRenew: false, fair: true, wait: 5000 })
  assert.ok(performance.now() - writerAsked >= 150, 'the writer got in beside the reader')
  assert.equal((await aborted(reader.signal)).reason, 'expired')
  assert.equal(reader.renewals, 0)
  assert.equal((await aborted(writer.signal)).reason, 'expired')
  assert.equal(writer.renewals, 0)
  const capped = await rw.acquireRead({ ttl: 300, maxRenewals: 1 })
  assert.equal((await aborted(capped.signal)).reason, 'expired')
  assert.equal(capped.renewals, 1)
})

test('a closed client refuses readers and writers', async () => {
  const closed = new Client({ nodes: nodes.urls })
  const rw = closed.rwLock(unique('closed'))
  await closed.close()
  await assert.rejects(rw.acquireRead({ wait: 0 }), { name: 'ClosedError' })
  await assert.rejects(rw.acquireWrite({ wait: 0 }), { name: 'ClosedError' })
  await assert.rejects(rw.tryRead(), { name: 'ClosedError' })
  await assert.rejects(rw.tryWrite(), { name: 'ClosedError' })
})

'use strict'

// Leader election: campaign (a lock on the election's name that announces
// its winner) and observe (an async iterable of the leaders, by push).

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const {
  Client,
  Lock,
  Leadership,
  Observation,
  ClosedError,
  InvalidArgumentError,
  LockLostError,
  LockTimeoutError,
  NotAcquiredError,
  NotHeldError,
  MAX_LEADER_VALUE,
} = require('fencelock')
const { RedisNodes, unique, eventually } = require('./helpers.js')

/** How soon an observer learns of a new leader by push (the core re-reads only every 2 s). */
const PUSH_MS = 1000

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

/** Observers subscribed to the election `name` on node `i` (PUBSUB NUMSUB). */
async function observers(name, i = 0) {
  const reply = await nodes.call(i, 'PUBSUB', 'NUMSUB', `fencelock:leader:${name}`)
  return Number(reply.split(' ').pop())
}

/** What `promise` resolves with, or a rejection after `ms`. */
async function within(promise, ms) {
  let timer
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`not settled within ${ms} ms`)), ms)
  })
  try {
    return await Promise.race([promise, late])
  } finally {
    clearTimeout(timer)
  }
}

/** The observation's next item, or a rejection after `ms`. */
function nextWithin(observation, ms) {
  return within(observation.next(), ms)
}

/** Resolves with the signal's reason once it aborts. */
function aborted(signal) {
  if (signal.aborted) return Promise.resolve(signal.reason)
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(signal.reason), { once: true }))
}

test('campaign elects a leader: a Lock on the name whose epoch is its fencing token', async () => {
  const name = unique('elect')
  const leadership = await client.campaign(name, { ttl: 5000, value: 'host-a:1' })
  assert.ok(leadership instanceof Leadership)
  assert.ok(leadership instanceof Lock)
  assert.equal(leadership.name, name)
  assert.equal(typeof leadership.epoch, 'bigint')
  assert.ok(leadership.epoch > 0n)
  assert.equal(leadership.epoch, leadership.fencingToken)
  assert.equal(leadership.fence.token, leadership.epoch)
  assert.ok(Buffer.isBuffer(leadership.value))
  assert.equal(leadership.value.toString(), 'host-a:1')
  assert.equal(leadership.isLeader(), true)
  assert.equal(leadership.signal.aborted, false)
  assert.equal(await nodes.call(0, 'EXISTS', `fencelock:{${name}}`), '1')
  // Nobody else can lead meanwhile.
  await assert.rejects(client.campaign(name, { wait: 0 }), NotAcquiredError)
  await assert.rejects(client.campaign(name, { wait: 100 }), LockTimeoutError)
  // The timed-out candidate has left the queue when the call rejects: a
  // resign made next is not handed to it.
  assert.equal(await nodes.call(0, 'ZCARD', `fencelock:{${name}}:queue`), '0', 'the candidate is still in line')

  await leadership.resign()
  assert.equal(leadership.isLeader(), false)
  assert.equal(await nodes.call(0, 'EXISTS', `fencelock:{${name}}`), '0')
  await assert.rejects(leadership.resign(), NotHeldError)

  // Bytes go through as they are; no value is an empty one.
  const bytes = new Uint8Array([0, 255, 32, 10])
  const binary = await client.campaign(name, { ttl: 5000, value: bytes })
  bytes[0] = 7 // the leadership kept a copy
  assert.deepEqual([...binary.value], [0, 255, 32, 10])
  assert.ok(binary.epoch > leadership.epoch)
  await binary.resign()
  const empty = await client.campaign(name)
  assert.equal(empty.value.length, 0)
  await empty.resign()
})

test('a second candidate waits, and wins at once with a larger epoch when the leader resigns', async () => {
  const name = unique('handover')
  const first = await client.campaign(name, { ttl: 5000, value: 'first' })
  const other = new Client({ nodes: nodes.urls })
  try {
    let won = null
    const candidate = other.campaign(name, { ttl: 5000, value: 'second' }).then((l) => (won = l))
    // In line (its ticket is in the waiters' queue), and not elected.
    await eventually(async () => (await nodes.call(0, 'ZCARD', `fencelock:{${name}}:queue`)) === '1', {
      timeoutMs: 5000,
    })
    await new Promise((r) => setTimeout(r, 100))
    assert.equal(won, null, 'the second candidate won while the first still led')

    const resigned = performance.now()
    await first.resign()
    const second = await candidate
    const tookMs = performance.now() - resigned
    assert.ok(tookMs < 1000, `the waiting candidate took ${tookMs.toFixed(0)} ms to win`)
    assert.ok(second.epoch > first.epoch)
    assert.equal(second.value.toString(), 'second')
    assert.equal(second.isLeader(), true)
    await second.resign()
  } finally {
    await other.close()
  }
})

test('an observer learns each new leader, value and epoch, by push', async () => {
  const name = unique('observe')
  const observation = client.observe(name)
  assert.ok(observation instanceof Observation)
  try {
    await eventually(async () => (await observers(name)) === 1, { timeoutMs: 5000 })
    const first = await client.campaign(name, { ttl: 5000, value: 'host-a:1' })
    const seen = await nextWithin(observation, PUSH_MS)
    assert.equal(seen.done, false)
    assert.ok(Buffer.isBuffer(seen.value.value))
    assert.equal(seen.value.value.toString(), 'host-a:1')
    assert.equal(seen.value.epoch, first.epoch)

    await first.resign()
    const second = await client.campaign(name, { ttl: 5000, value: Buffer.from([1, 2, 0, 3]) })
    const next = await nextWithin(observation, PUSH_MS)
    assert.deepEqual([...next.value.value], [1, 2, 0, 3])
    assert.equal(next.value.epoch, second.epoch)
    assert.ok(next.value.epoch > first.epoch)
    await second.resign()
  } finally {
    observation.close()
  }
})

test('an observer starts with the current leader', async () => {
  const name = unique('current')
  const leadership = await client.campaign(name, { ttl: 5000, value: 'already' })
  for await (const leader of client.observe(name)) {
    assert.equal(leader.value.toString(), 'already')
    assert.equal(leader.epoch, leadership.epoch)
    break
  }
  await leadership.resign()
})

test("the leadership's signal aborts when the election's key is deleted or overwritten", async () => {
  const deleted = unique('lost-del')
  const first = await client.campaign(deleted, { ttl: 300 })
  const { signal } = first
  await nodes.call(0, 'DEL', `fencelock:{${deleted}}`)
  const reason = await aborted(signal)
  assert.ok(reason instanceof LockLostError)
  assert.equal(reason.reason, 'deleted')
  assert.equal(reason.resource, deleted)
  assert.equal(first.isLeader(), false)
  await assert.rejects(first.resign(), NotHeldError)

  const overwritten = unique('lost-set')
  const second = await client.campaign(overwritten, { ttl: 300 })
  const watched = second.signal
  await nodes.call(0, 'SET', `fencelock:{${overwritten}}`, 'someone-else')
  assert.equal((await aborted(watched)).reason, 'taken_over')
  assert.equal(second.isLeader(), false)
})

test('Symbol.asyncDispose resigns, and the next candidate wins', async () => {
  const name = unique('dispose')
  const leadership = await client.campaign(name, { ttl: 5000 })
  await leadership[Symbol.asyncDispose]()
  assert.equal(leadership.status, 'released')
  assert.equal(await nodes.call(0, 'EXISTS', `fencelock:{${name}}`), '0')
  await leadership[Symbol.asyncDispose]() // no-op the second time
  const next = await client.campaign(name, { ttl: 5000, wait: 0 })
  assert.ok(next.epoch > leadership.epoch)
  await next.resign()
})

test('an AbortSignal cancels a waiting campaign, which leaves nothing behind', async () => {
  const name = unique('abort')
  const leader = await client.campaign(name, { ttl: 5000 })
  const controller = new AbortController()
  const waiting = client.campaign(name, { ttl: 5000, signal: controller.signal })
  await eventually(async () => (await nodes.call(0, 'ZCARD', `fencelock:{${name}}:queue`)) === '1', {
    timeoutMs: 5000,
  })
  controller.abort(new Error('stop campaigning'))
  await assert.rejects(waiting, { message: 'stop campaigning' })
  await leader.resign()
  // The cancelled candidate does not take over.
  await new Promise((r) => setTimeout(r, 200))
  assert.equal(await nodes.call(0, 'EXISTS', `fencelock:{${name}}`), '0')
  await assert.rejects(client.campaign(name, { signal: AbortSignal.abort() }), { name: 'AbortError' })
})

test('a value over MAX_LEADER_VALUE bytes is refused; one of exactly that many goes through', async () => {
  const name = unique('big')
  assert.equal(MAX_LEADER_VALUE, 65536)
  const error = await client.campaign(name, { value: Buffer.alloc(MAX_LEADER_VALUE + 1) }).catch((e) => e)
  assert.ok(error instanceof InvalidArgumentError, String(error))
  assert.equal(error.code, 'INVALID_ARGUMENT')
  assert.match(error.message, /leader value is 65537 bytes/)
  assert.equal(await nodes.call(0, 'EXISTS', `fencelock:{${name}}`), '0')
  await assert.rejects(client.campaign(name, { value: 'é'.repeat(MAX_LEADER_VALUE / 2 + 1) }), InvalidArgumentError)

  const biggest = Buffer.alloc(MAX_LEADER_VALUE, 'x')
  biggest[0] = 0
  const leadership = await client.campaign(name, { ttl: 5000, value: biggest })
  for await (const leader of client.observe(name)) {
    assert.ok(leader.value.equals(biggest))
    break
  }
  await leadership.resign()
})

test('bad arguments are refused before anything is sent', async () => {
  await assert.rejects(client.campaign(''), { name: 'RangeError', message: /name must not be empty/ })
  await assert.rejects(client.campaign('x'.repeat(1025)), { name: 'RangeError', message: /name is 1025 bytes/ })
  await assert.rejects(client.campaign(42), { name: 'TypeError', message: /name must be a string/ })
  await assert.rejects(client.campaign('n', { ttl: 0 }), { name: 'RangeError', message: /options\.ttl/ })
  await assert.rejects(client.campaign('n', { ttl: -5 }), { name: 'RangeError', message: /options\.ttl/ })
  await assert.rejects(client.campaign('n', { ttl: NaN }), { name: 'TypeError', message: /options\.ttl/ })
  await assert.rejects(client.campaign('n', { wait: 1.5 }), { name: 'RangeError', message: /options\.wait/ })
  await assert.rejects(client.campaign('n', { value: 42 }), { name: 'TypeError', message: /options\.value/ })
  await assert.rejects(client.campaign('n', { value: null }), { name: 'TypeError', message: /options\.value/ })
  await assert.rejects(client.campaign('n', { fair: true }), { name: 'TypeError', message: /options\.fair is not/ })
  await assert.rejects(client.campaign('n', { signal: 'no' }), { name: 'TypeError', message: /options\.signal/ })
  await assert.rejects(client.campaign('n', 'opts'), { name: 'TypeError' })
  // The core's own rule: a name may not start with `}`.
  await assert.rejects(client.campaign('}n'), InvalidArgumentError)

  assert.throws(() => client.observe(''), { name: 'RangeError', message: /name must not be empty/ })
  assert.throws(() => client.observe(null), { name: 'TypeError', message: /name must be a string/ })
  assert.throws(() => client.observe('n', { wait: 1 }), { name: 'TypeError', message: /options\.wait is not/ })
  assert.throws(() => client.observe('n', { signal: {} }), { name: 'TypeError', message: /options\.signal/ })
  assert.throws(() => client.observe('}n'), InvalidArgumentError)
})

test('break out of for await stops the observation: its subscription ends', async () => {
  const name = unique('break')
  const leadership = await client.campaign(name, { ttl: 5000, value: 'v' })
  const observation = client.observe(name)
  await eventually(async () => (await observers(name)) === 1, { timeoutMs: 5000 })
  let seen = 0
  for await (const leader of observation) {
    assert.equal(leader.epoch, leadership.epoch)
    seen += 1
    break
  }
  assert.equal(seen, 1)
  await eventually(async () => (await observers(name)) === 0, { timeoutMs: 5000 })
  assert.deepEqual(await observation.next(), { done: true, value: undefined })
  await leadership.resign()
})

test('an AbortSignal ends a waiting observation, and the loop finishes normally', async () => {
  const name = unique('obs-abort')
  const controller = new AbortController()
  const observation = client.observe(name, { signal: controller.signal })
  await eventually(async () => (await observers(name)) === 1, { timeoutMs: 5000 })
  const loop = (async () => {
    let count = 0
    for await (const _ of observation) count += 1
    return count
  })()
  controller.abort()
  assert.equal(await within(loop, 3000), 0)
  await eventually(async () => (await observers(name)) === 0, { timeoutMs: 5000 })

  // Aborted before it began: ended at once, nothing subscribed.
  const never = client.observe(name, { signal: AbortSignal.abort() })
  assert.deepEqual(await never.next(), { done: true, value: undefined })
})

test("the client's close() ends its open observations; campaign and observe then refuse", async () => {
  const own = new Client({ nodes: nodes.urls })
  const name = unique('close')
  const reading = own.observe(name)
  const idle = own.observe(unique('close-idle'))
  await eventually(async () => (await observers(name)) === 1, { timeoutMs: 5000 })
  const pending = reading.next()
  await own.close()
  assert.deepEqual(await within(pending, 3000), { done: true, value: undefined })
  assert.deepEqual(await within(idle.next(), 3000), { done: true, value: undefined })
  await eventually(async () => (await observers(name)) === 0, { timeoutMs: 5000 })
  await assert.rejects(own.campaign(name), ClosedError)
  assert.throws(() => own.observe(name), ClosedError)
})

test('Redlock over 3 nodes: campaign, observe and hand over', async () => {
  const three = await RedisNodes.start(3)
  const first = new Client({ nodes: three.urls })
  const second = new Client({ nodes: three.urls })
  try {
    const name = unique('redlock')
    const observation = second.observe(name)
    const leadership = await first.campaign(name, { ttl: 5000, value: 'a' })
    let holding = 0
    for (let i = 0; i < 3; i++) {
      if ((await three.call(i, 'EXISTS', `fencelock:{${name}}`)) === '1') holding += 1
    }
    assert.ok(holding >= 2, `the election's key is on ${holding} of 3 nodes`)
    const seen = await nextWithin(observation, 3000)
    assert.equal(seen.value.epoch, leadership.epoch)
    assert.equal(seen.value.value.toString(), 'a')
    await assert.rejects(second.campaign(name, { wait: 200 }), LockTimeoutError)

    const successor = second.campaign(name, { ttl: 5000, value: 'b' })
    await leadership.resign()
    const next = await successor
    assert.ok(next.epoch > leadership.epoch)
    const learned = await nextWithin(observation, 3000)
    assert.equal(learned.value.epoch, next.epoch)
    assert.equal(learned.value.value.toString(), 'b')
    observation.close()
    await next.resign()
  } finally {
    await first.close()
    await second.close()
    await three.stop()
  }
})

'use strict'

// Every bad input gets the documented error: TypeError for a wrong type,
// RangeError for an out-of-range value (both naming the argument),
// ConfigError / InvalidArgumentError for what only the core can judge.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { Client, ConfigError, Fence, InvalidArgumentError, MAX_RESOURCE_LEN } = require('fencelock')
const { RedisNodes, unique, PACKAGE } = require('./helpers.js')

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

const badMs = [
  [NaN, TypeError],
  ['100', TypeError],
  [null, TypeError],
  [100n, TypeError],
  [Infinity, RangeError],
  [-Infinity, RangeError],
  [-1, RangeError],
  [1.5, RangeError],
  [2 ** 53, RangeError],
]

test('bad ttl / wait / maxHold values reject with TypeError or RangeError naming the option', async () => {
  for (const option of ['ttl', 'wait', 'maxHold']) {
    for (const [value, ErrorClass] of badMs) {
      const error = await client.acquire(unique('bad'), { [option]: value }).catch((e) => e)
      assert.ok(error instanceof ErrorClass, `${option}=${String(value)} gave ${error}`)
      assert.match(error.message, new RegExp(`options\\.${option}`))
    }
  }
  for (const ttl of [0, 9, 2 ** 31]) {
    await assert.rejects(client.acquire('r', { ttl }), RangeError)
  }
  for (const [value, ErrorClass] of badMs) {
    const error = await client.tryAcquire(unique('bad'), { ttl: value }).catch((e) => e)
    assert.ok(error instanceof ErrorClass, `ttl=${String(value)} gave ${error}`)
  }
})

test('bad resource, options and callbacks', async () => {
  await assert.rejects(client.acquire(42), { name: 'TypeError', message: /resource must be a string/ })
  await assert.rejects(client.acquire(undefined), TypeError)
  await assert.rejects(client.acquire(''), { name: 'RangeError', message: /resource must not be empty/ })
  await assert.rejects(client.acquire('x'.repeat(MAX_RESOURCE_LEN + 1)), { name: 'RangeError', message: /bytes/ })
  await assert.rejects(client.acquire('é'.repeat(MAX_RESOURCE_LEN / 2 + 1)), RangeError)
  await assert.rejects(client.acquire('}x'), InvalidArgumentError)
  await assert.rejects(client.acquire('r', 'fast'), { name: 'TypeError', message: /options must be an object/ })
  await assert.rejects(client.acquire('r', { ttlMs: 100 }), {
    name: 'TypeError',
    message: /options\.ttlMs is not an option/,
  })
  await assert.rejects(client.acquire('r', { signal: {} }), { name: 'TypeError', message: /AbortSignal/ })
  await assert.rejects(client.acquire('r', { autoRenew: 'yes' }), TypeError)
  await assert.rejects(client.acquire('r', { fair: 'yes' }), TypeError)
  await assert.rejects(client.tryAcquire('r', { fair: 1 }), TypeError)
  await assert.rejects(client.acquire('r', { maxRenewals: -1 }), RangeError)
  await assert.rejects(client.tryAcquire('r', { wait: 10 }), { name: 'TypeError', message: /wait is not an option/ })
  await assert.rejects(client.using('r', {}, 'not a function'), TypeError)
  await assert.rejects(client.using('r'), TypeError)
})

test('bad extend arguments and fenced writes', async () => {
  const lock = await client.acquire(unique('ext'))
  for (const [value, ErrorClass] of [...badMs, [0, RangeError], [5, RangeError]]) {
    const error = await lock.extend(value).catch((e) => e)
    assert.ok(error instanceof ErrorClass, `extend(${String(value)}) gave ${error}`)
    assert.match(error.message, /\bms\b/)
  }
  await lock.release()
  await assert.rejects(client.fencedSet('k', 'v', -1n), RangeError)
  await assert.rejects(client.fencedSet('k', 'v', 2n ** 64n), RangeError)
  await assert.rejects(client.fencedSet('k', 'v', 1.5), RangeError)
  await assert.rejects(client.fencedSet('k', 'v', 'x'), RangeError)
  await assert.rejects(client.fencedSet('k', 'v', {}), TypeError)
  assert.throws(() => new Fence(1n, 2n ** 63n), RangeError)
  assert.equal(String(Fence.parse('7:9')), '7:9')
  assert.equal(Fence.parse('7').holder, 0n)
  await assert.rejects(client.fencedSet('fencelock:{x}', 'v', 1n), InvalidArgumentError)
  await assert.rejects(client.fencedSet('k', 42, 1n), TypeError)
  await assert.rejects(client.fencedSet('', 'v', 1n), RangeError)
  await assert.rejects(client.fencedGet(null), TypeError)
})

test('bad client options', () => {
  assert.throws(() => new Client(), TypeError)
  assert.throws(() => new Client({}), { name: 'TypeError', message: /options\.nodes/ })
  assert.throws(() => new Client({ nodes: [] }), TypeError)
  assert.throws(() => new Client({ nodes: [42] }), { name: 'TypeError', message: /options\.nodes\[0\]/ })
  assert.throws(() => new Client({ nodes: nodes.urls, nodeTimeoutMs: 0 }), RangeError)
  assert.throws(() => new Client({ nodes: nodes.urls, nodeTimeoutMs: NaN }), TypeError)
  assert.throws(() => new Client({ nodes: nodes.urls, driftFactor: 0.5 }), RangeError)
  assert.throws(() => new Client({ nodes: nodes.urls, timeout: 5 }), {
    name: 'TypeError',
    message: /options\.timeout is not an option/,
  })
  assert.throws(() => new Client({ nodes: ['http://127.0.0.1:1'] }), ConfigError)
  assert.throws(() => new Client({ nodes: ['redis://127.0.0.1:1', 'redis://127.0.0.1:1'] }), ConfigError)
  assert.throws(() => new Client({ nodes: ['redis://127.0.0.1:1'], keyPrefix: '{x}' }), ConfigError)
  const error = (() => {
    try {
      new Client({ nodes: ['nope'] })
    } catch (e) {
      return e
    }
  })()
  assert.equal(error.code, 'CONFIG')
})

test("tlsMinVersion: '1.2' and '1.3' work, anything else is a TypeError or RangeError naming it", async () => {
  // A plain redis:// node ignores the TLS minimum: the client works with either.
  for (const tlsMinVersion of ['1.2', '1.3', undefined]) {
    const tlsClient = new Client({ nodes: nodes.urls, tlsMinVersion })
    try {
      const lock = await tlsClient.acquire(unique('tls-min'), { ttl: 5000, wait: 0 })
      await lock.release()
    } finally {
      await tlsClient.close()
    }
  }
  for (const bad of [1.3, 1.2, 13, true, null, 13n, ['1.3'], { version: '1.3' }, Buffer.from('1.3')]) {
    assert.throws(() => new Client({ nodes: nodes.urls, tlsMinVersion: bad }), {
      name: 'TypeError',
      message: /^options\.tlsMinVersion must be the string '1\.2' or '1\.3', got /,
    })
  }
  for (const bad of ['1.1', '1.4', '1.0', '', '1', '13', '1.30', ' 1.3', 'TLSv1.3']) {
    assert.throws(() => new Client({ nodes: nodes.urls, tlsMinVersion: bad }), {
      name: 'RangeError',
      message: `options.tlsMinVersion must be '1.2' or '1.3', got the string ${JSON.stringify(bad)}`,
    })
  }
  // The native module guards itself the same way when called directly.
  const { NativeClient } = require(path.join(PACKAGE, 'native.js'))
  assert.throws(() => new NativeClient({ nodes: nodes.urls, tlsMinVersion: '1.1' }), {
    name: 'RangeError',
    message: `tlsMinVersion must be '1.2' or '1.3', got "1.1"`,
  })
  // '1.3' reaches the core, which cannot apply it to a Redis Cluster: a ConfigError from the
  // constructor (the core reports it on the first poll of its build).
  assert.throws(
    () => new Client({ nodes: ['rediss+cluster://127.0.0.1:1'], tlsMinVersion: '1.3' }),
    (refused) => {
      assert.ok(refused instanceof ConfigError, String(refused))
      assert.match(refused.message, /tls-protocols/)
      return true
    },
  )
})

test('the native lock functions refuse anything but a live lock handle', () => {
  // index.js keeps the handles private; called directly, the addon checks them itself.
  const native = require(path.join(PACKAGE, 'native.js'))
  const functions = ['lockFencingToken', 'lockResource', 'lockIsHeld', 'lockRemainingMs', 'lockStatus', 'lockRenewals']
  functions.push('lockRelease', 'lockExtend', 'lockWatchLost')
  for (const name of functions) {
    for (const bad of [undefined, null, 1, 'handle', {}, [], () => {}, Symbol('h')]) {
      assert.throws(
        () => native[name](bad, name === 'lockWatchLost' ? () => {} : 1000),
        { message: /not a lock handle/ },
        `${name}(${String(bad)})`,
      )
    }
  }
})

'use strict'

// The shared protocol vectors (tests/vectors/protocol.json) through the Node
// front: the keys the client writes, the resources it refuses, and the
// tables every front shares (limits, error kinds, loss reasons, node outcomes,
// metrics, log levels).

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const fencelock = require('fencelock')
const { Client, FenceLockError, InvalidArgumentError, NotAcquiredError } = fencelock
const { RedisNodes, ROOT, PACKAGE } = require('./helpers.js')

const VECTORS_TEXT = fs.readFileSync(path.join(ROOT, 'tests', 'vectors', 'protocol.json'), 'utf8')
const VECTORS = JSON.parse(VECTORS_TEXT)

let nodes
before(async () => {
  nodes = await RedisNodes.start(1)
})
after(async () => {
  await nodes.stop()
})

test('limits are the vectors', () => {
  const limits = VECTORS.limits
  assert.equal(fencelock.MIN_TTL_MS, limits.min_ttl_ms)
  assert.equal(fencelock.MAX_TTL_MS, limits.max_ttl_ms)
  assert.equal(fencelock.MAX_WAIT_MS, limits.max_wait_ms)
  assert.equal(fencelock.MAX_RESOURCE_LEN, limits.max_resource_bytes)
  assert.equal(fencelock.MAX_PREFIX_LEN, limits.max_prefix_bytes)
  assert.equal(fencelock.MAX_DRIFT_FACTOR, limits.max_drift_factor)
  assert.equal(fencelock.MAX_FENCING_TOKEN, BigInt(limits.max_fencing_token))
  // JSON.parse rounds 2^63 - 1 to a double: read the digits themselves.
  assert.equal(fencelock.MAX_HOLDER_ID, BigInt(/"max_holder_id": (\d+)/.exec(VECTORS_TEXT)[1]))
  assert.equal(fencelock.MAX_LEADER_VALUE, limits.max_leader_value_bytes)
  assert.equal(fencelock.MAX_PERMITS, limits.max_permits)
})

/** The error class of a kind, by the naming rule in lib/errors.js. */
function className(kind) {
  const camel = kind
    .split('_')
    .map((part) => part[0].toUpperCase() + part.slice(1))
    .join('')
  return ({ Timeout: 'LockTimeout', Lost: 'LockLost' }[camel] ?? camel) + 'Error'
}

test('every error kind has its class, and every class is a kind', () => {
  for (const { name } of VECTORS.error_kinds) {
    const Class = fencelock[className(name)]
    assert.ok(Class && Class.prototype instanceof FenceLockError, `no class ${className(name)} for kind ${name}`)
    assert.equal(Class.kind, name)
    assert.equal(Class.code, name.toUpperCase())
    const error = new Class('message')
    assert.equal(error.kind, name)
    assert.equal(error.name, className(name))
  }
  const classes = Object.values(fencelock).filter((value) => value.prototype instanceof FenceLockError)
  assert.deepEqual(classes.map((Class) => Class.kind).sort(), VECTORS.error_kinds.map((k) => k.name).sort())
})

test('loss reasons and node outcomes are the core names of the vectors', async () => {
  const client = new Client({ nodes: nodes.urls })
  try {
    const lock = await client.acquire('vectors-loss', { ttl: 200, autoRenew: false })
    const reason = await new Promise((resolve) =>
      lock.signal.addEventListener('abort', () => resolve(lock.signal.reason)),
    )
    assert.ok(
      VECTORS.loss_reasons.some((r) => r.name === reason.reason),
      reason.reason,
    )
    assert.match(reason.message, /ran out without renewal/)
    await nodes.call(0, 'SET', 'fencelock:{vectors-held}', 'someone-else', 'PX', '5000')
    const error = await client.acquire('vectors-held', { wait: 0 }).catch((e) => e)
    assert.ok(error instanceof NotAcquiredError)
    assert.deepEqual(
      error.nodes.map((n) => n.outcome),
      ['held_by_other'],
    )
    assert.ok(VECTORS.node_outcomes.some((o) => o.name === error.nodes[0].outcome))
  } finally {
    await client.close()
  }
})

for (const vector of VECTORS.keys) {
  test(`key vector ${JSON.stringify(vector.prefix)} + ${JSON.stringify(vector.resource)} is the key the client writes`, async () => {
    const client = new Client({ nodes: nodes.urls, keyPrefix: vector.prefix })
    try {
      const lock = await client.acquire(vector.resource, { ttl: 5000, wait: 2000 })
      const owner = await nodes.call(0, 'GET', vector.lock_key)
      assert.equal(owner.length, VECTORS.token.hex_digits)
      assert.ok(
        [...owner].every((c) => VECTORS.token.alphabet.includes(c)),
        owner,
      )
      assert.equal(await nodes.call(0, 'GET', vector.fence_key), String(lock.fencingToken))
      await lock.release()
    } finally {
      await client.close()
    }
  })
}

test('invalid resource vectors are refused before anything is sent', async () => {
  const client = new Client({ nodes: nodes.urls })
  try {
    for (const v of VECTORS.invalid_resources) {
      const resource = 'resource' in v ? v.resource : v.resource_repeat.repeat(v.times)
      const error = await client.tryAcquire(resource).catch((e) => e)
      assert.ok(error instanceof RangeError || error instanceof InvalidArgumentError, `${v.why}: ${error}`)
    }
  } finally {
    await client.close()
  }
})

test('metrics are the vectors: the snapshot fields, latency buckets and exported names', async () => {
  const table = VECTORS.metrics
  // The Node front spells each field in camelCase (renewal_failures is renewalFailures).
  const camel = (field) => field.replace(/_([a-z])/g, (_, c) => c.toUpperCase())
  const client = new Client({ nodes: nodes.urls })
  let snapshot
  try {
    snapshot = client.metrics()
  } finally {
    await client.close()
  }
  assert.deepEqual(Object.keys(snapshot), table.fields.map(camel))
  assert.deepEqual(
    Object.keys(snapshot.failed),
    VECTORS.error_kinds.map((k) => k.name),
  )
  assert.deepEqual(
    Object.keys(snapshot.lost),
    VECTORS.loss_reasons.map((r) => r.name),
  )
  // Bounds in ms, the Node front's unit.
  assert.deepEqual(
    fencelock.LATENCY_BUCKETS_MS,
    table.latency_buckets_seconds.map((s) => s * 1000),
  )
  assert.deepEqual(
    snapshot.acquireLatency.buckets.map(([bound]) => bound),
    fencelock.LATENCY_BUCKETS_MS,
  )
  assert.deepEqual(
    fencelock.METRIC_NAMES,
    Object.fromEntries(table.fields.map((field) => [camel(field), table.exported_names[field]])),
  )
})

test('fencelock/prometheus exports the vectors names', async () => {
  const { Registry } = require('prom-client')
  const { registerMetrics } = require('fencelock/prometheus')
  const table = VECTORS.metrics
  const client = new Client({ nodes: nodes.urls })
  const registry = new Registry()
  try {
    registerMetrics(client, registry)
    const text = await registry.metrics()
    const exported = text
      .split('\n')
      .filter((line) => line.startsWith('# TYPE '))
      .map((line) => line.split(' ')[2])
    assert.deepEqual(
      exported,
      table.fields.map((field) => table.exported_names[field]),
    )
    const histogram = table.exported_names.acquire_latency
    const les = [...text.matchAll(new RegExp(`^${histogram}_bucket\\{le="([^"]+)"\\}`, 'gm'))].map((m) => m[1])
    assert.deepEqual(les, [...table.latency_buckets_seconds.map(String), '+Inf'])
  } finally {
    await client.close()
  }
})

test('log levels are the vectors: the names, most severe first, and the numbers the addon takes', () => {
  const levels = VECTORS.log_levels
  assert.deepEqual(
    fencelock.LOG_LEVELS,
    levels.map(({ name }) => name),
  )
  const native = require(path.join(PACKAGE, 'native.js'))
  const before = fencelock.getLogLevel()
  try {
    for (const { name, c_value } of levels) {
      // setLogLevel(name) hands the addon the index + 1: the vectors' number.
      assert.equal(fencelock.LOG_LEVELS.indexOf(name) + 1, c_value, name)
      fencelock.setLogLevel(name)
      assert.equal(fencelock.getLogLevel(), name)
      native.setLogLevel(c_value)
    }
    for (const outside of [0, Math.max(...levels.map((l) => l.c_value)) + 1]) {
      assert.throws(() => native.setLogLevel(outside), /1 \(error\) to 5 \(trace\)/)
    }
  } finally {
    fencelock.setLogLevel(before)
  }
})

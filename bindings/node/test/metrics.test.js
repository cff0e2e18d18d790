'use strict'

// client.metrics(): the counters move exactly as a scripted scenario says
// (acquire, a refused try, a wait handed the lock, release, renewal, a
// deleted key, a wait stopped by its AbortSignal); fencelock/prometheus
// reports them in a prom-client registry.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { execFileSync } = require('node:child_process')
const { Client, NotHeldError, InvalidArgumentError, LATENCY_BUCKETS_MS, METRIC_NAMES } = require('fencelock')
const { registerMetrics } = require('fencelock/prometheus')
const prom = require('prom-client')
const { RedisNodes, unique, eventually } = require('./helpers.js')

let nodes
before(async () => {
  nodes = await RedisNodes.start(1)
})
after(async () => {
  await nodes.stop()
})

/** `counts` as it should be: every key zero but those of `nonzero`. */
function only(counts, nonzero) {
  return Object.fromEntries(Object.keys(counts).map((key) => [key, nonzero[key] ?? 0]))
}

function lockKey(resource) {
  return `fencelock:{${resource}}`
}

test('a new client counts nothing', async () => {
  const client = new Client({ nodes: nodes.urls })
  const m = client.metrics()
  await client.close()
  assert.deepEqual(Object.keys(m), [
    'acquired',
    'failed',
    'lost',
    'released',
    'renewals',
    'renewalFailures',
    'held',
    'waiting',
    'acquireLatency',
  ])
  assert.deepEqual([m.acquired, m.released, m.renewals, m.renewalFailures, m.held, m.waiting], [0, 0, 0, 0, 0, 0])
  assert.deepEqual(new Set(Object.values(m.failed)), new Set([0]))
  assert.deepEqual(new Set(Object.values(m.lost)), new Set([0]))
  assert.deepEqual(m.acquireLatency, {
    count: 0,
    sum: 0,
    buckets: LATENCY_BUCKETS_MS.map((bound) => [bound, 0]),
    p50: null,
    p99: null,
  })
  // A snapshot is a copy: changing it changes nothing in the client.
  m.failed.timeout = 5
  assert.equal(client.metrics().failed.timeout, 0)
})

test('counters follow a scripted scenario', async () => {
  const [a, b, c] = [0, 1, 2].map(() => new Client({ nodes: nodes.urls }))
  const resource = unique('metrics')
  try {
    // A takes the lock: one acquisition, one lock held, one latency sample.
    const held = await a.acquire(resource, { ttl: 10000, wait: 0 })
    let m = a.metrics()
    assert.deepEqual([m.acquired, m.held, m.waiting, m.released], [1, 1, 0, 0])
    const latency = m.acquireLatency
    assert.equal(latency.count, 1)
    assert.ok(latency.sum > 0, `sum ${latency.sum}`)
    // The sample lies in one bucket, counted cumulatively; p50 and p99 are its bound (in ms).
    const first = latency.buckets.find(([, n]) => n === 1)[0]
    assert.deepEqual(
      latency.buckets.map(([, n]) => n),
      LATENCY_BUCKETS_MS.map((bound) => (bound >= first ? 1 : 0)),
    )
    assert.equal(latency.p50, first)
    assert.equal(latency.p99, first)
    assert.ok(latency.sum <= first, `${latency.sum} ms beyond its bucket's ${first} ms`)

    // B contends: a refused try is a failure of kind not_acquired (and a latency sample).
    assert.equal(await b.tryAcquire(resource, { ttl: 10000 }), null)
    m = b.metrics()
    assert.deepEqual(m.failed, only(m.failed, { not_acquired: 1 }))
    assert.deepEqual([m.acquired, m.held, m.acquireLatency.count], [0, 0, 1])

    // B waits: counted as waiting until A's release hands it the lock.
    const waiting = b.acquire(resource, { ttl: 1000, wait: 10000 })
    await eventually(() => b.metrics().waiting === 1, { timeoutMs: 5000 })
    assert.deepEqual([b.metrics().acquired, a.metrics().waiting], [0, 0])
    await held.release()
    const lock = await waiting
    const [ma, mb] = [a.metrics(), b.metrics()]
    assert.deepEqual([ma.released, ma.held, ma.acquired], [1, 0, 1])
    assert.deepEqual([mb.acquired, mb.waiting, mb.held, mb.released, mb.acquireLatency.count], [1, 0, 1, 0, 2])

    // B's 1 s lease renews (a late renewal would see it expired, not deleted); then its key is deleted: one loss, deleted.
    await eventually(() => b.metrics().renewals >= 1, { timeoutMs: 3000 })
    assert.ok(lock.renewals >= 1)
    const lost = new Promise((resolve) => lock.signal.addEventListener('abort', () => resolve(lock.signal.reason)))
    await nodes.call(0, 'DEL', lockKey(resource))
    assert.equal((await lost).reason, 'deleted')
    await eventually(() => b.metrics().held === 0, { timeoutMs: 3000 })
    m = b.metrics()
    assert.deepEqual(m.lost, only(m.lost, { deleted: 1 }))
    assert.deepEqual([m.renewalFailures, m.released], [0, 0])
    await assert.rejects(lock.release(), NotHeldError)
    assert.equal(b.metrics().released, 0, 'a failed release is no release')

    // C's wait, stopped by its AbortSignal, counts as cancelled and stops waiting.
    const blocker = await a.acquire(resource, { ttl: 10000, wait: 0 })
    const controller = new AbortController()
    const given = c.acquire(resource, { ttl: 10000, wait: 30000, signal: controller.signal })
    await eventually(() => c.metrics().waiting === 1, { timeoutMs: 5000 })
    controller.abort()
    await assert.rejects(given, (error) => error.name === 'AbortError')
    await eventually(() => c.metrics().failed.cancelled === 1, { timeoutMs: 3000 })
    m = c.metrics()
    assert.deepEqual(m.failed, only(m.failed, { cancelled: 1 }))
    assert.deepEqual([m.waiting, m.acquired, m.held, m.acquireLatency.count], [0, 0, 0, 1])
    await blocker.release()

    // Latency samples: one per acquire call, successful or not.
    m = a.metrics()
    assert.deepEqual([m.acquired, m.released, m.held, m.acquireLatency.count], [2, 2, 0, 2])
    assert.equal(b.metrics().acquireLatency.count, 2)
  } finally {
    await Promise.all([a, b, c].map((client) => client.close()))
  }
})

test('permits, read-write grants and bad input count', async () => {
  const client = new Client({ nodes: nodes.urls })
  const name = unique('metrics-kinds')
  try {
    const permit = await client.semaphore(`${name}:sem`, 2).acquire({ ttl: 10000, wait: 0 })
    const reader = await client.rwLock(`${name}:rw`).acquireRead({ ttl: 10000, wait: 0 })
    // Refused by the core (not by the argument checks, which throw before it counts).
    await assert.rejects(client.acquire('}bad', { ttl: 10000, wait: 0 }), InvalidArgumentError)
    let m = client.metrics()
    assert.deepEqual([m.acquired, m.held, m.acquireLatency.count], [2, 2, 3])
    assert.deepEqual(m.failed, only(m.failed, { invalid_argument: 1 }))
    await permit.release()
    await reader.release()
    m = client.metrics()
    assert.deepEqual([m.held, m.released], [0, 2])
    await client.close()
    assert.equal(client.metrics().released, 2, 'metrics() works after close()')
  } finally {
    await client.close()
  }
})

// --- fencelock/prometheus ----------------------------------------------------

/** The samples of a scrape (`name{labels}` → value) and each family's type. */
async function scrape(registry) {
  const text = await registry.metrics()
  const types = {}
  const samples = {}
  for (const line of text.split('\n')) {
    if (line.startsWith('# TYPE ')) {
      const [, , name, type] = line.split(' ')
      types[name] = type
    } else if (line && !line.startsWith('#')) {
      const at = line.lastIndexOf(' ')
      samples[line.slice(0, at)] = Number(line.slice(at + 1))
    }
  }
  return { samples, types }
}

test('registerMetrics reports the snapshot in a prom-client registry', async () => {
  const client = new Client({ nodes: nodes.urls })
  const resource = unique('metrics-prom')
  const registry = new prom.Registry()
  try {
    const unregister = registerMetrics(client, registry)
    const lock = await client.acquire(resource, { ttl: 10000, wait: 0 })
    assert.equal(await client.tryAcquire(resource, { ttl: 10000 }), null)
    let { samples, types } = await scrape(registry)
    assert.deepEqual(types, {
      [METRIC_NAMES.acquired]: 'counter',
      [METRIC_NAMES.failed]: 'counter',
      [METRIC_NAMES.lost]: 'counter',
      [METRIC_NAMES.released]: 'counter',
      [METRIC_NAMES.renewals]: 'counter',
      [METRIC_NAMES.renewalFailures]: 'counter',
      [METRIC_NAMES.held]: 'gauge',
      [METRIC_NAMES.waiting]: 'gauge',
      [METRIC_NAMES.acquireLatency]: 'histogram',
    })
    assert.equal(samples.fencelock_acquired_total, 1)
    assert.equal(samples['fencelock_failed_total{kind="not_acquired"}'], 1)
    assert.equal(samples['fencelock_failed_total{kind="timeout"}'], 0)
    assert.equal(samples['fencelock_lost_total{reason="deleted"}'], 0)
    assert.equal(samples.fencelock_released_total, 0)
    assert.equal(samples.fencelock_held, 1)
    assert.equal(samples.fencelock_waiting, 0)
    const snapshot = client.metrics()
    const kinds = Object.keys(samples)
      .filter((key) => key.startsWith('fencelock_failed_total{'))
      .map((key) => /kind="(\w+)"/.exec(key)[1])
    assert.deepEqual(kinds, Object.keys(snapshot.failed))
    // The histogram is in seconds, as Prometheus counts time.
    const latency = snapshot.acquireLatency
    assert.equal(samples.fencelock_acquire_latency_seconds_count, 2)
    assert.ok(Math.abs(samples.fencelock_acquire_latency_seconds_sum - latency.sum / 1000) < 1e-9)
    assert.equal(samples['fencelock_acquire_latency_seconds_bucket{le="+Inf"}'], 2)
    for (const [boundMs, below] of latency.buckets) {
      assert.equal(samples[`fencelock_acquire_latency_seconds_bucket{le="${boundMs / 1000}"}`], below, `${boundMs} ms`)
    }

    // Each scrape reads a new snapshot.
    await lock.release()
    ;({ samples } = await scrape(registry))
    assert.equal(samples.fencelock_released_total, 1)
    assert.equal(samples.fencelock_held, 0)

    // Unregistering the last client takes the metrics out of the registry.
    unregister()
    unregister()
    assert.equal(await registry.metrics(), '\n')
  } finally {
    await client.close()
  }
})

test('registerMetrics: several clients in one registry, told apart by labels', async () => {
  const [one, two] = [0, 1].map(() => new Client({ nodes: nodes.urls }))
  const registry = new prom.Registry()
  try {
    const unregisterOne = registerMetrics(one, registry, { labels: { pool: 'one' } })
    registerMetrics(two, registry, { labels: { pool: 'two' } })
    await (await one.acquire(unique('metrics-pools'), { ttl: 10000 })).release()
    let { samples } = await scrape(registry)
    assert.equal(samples['fencelock_acquired_total{pool="one"}'], 1)
    assert.equal(samples['fencelock_acquired_total{pool="two"}'], 0)
    assert.equal(samples['fencelock_released_total{pool="one"}'], 1)
    assert.equal(samples['fencelock_failed_total{pool="two",kind="cancelled"}'], 0)
    assert.equal(samples['fencelock_acquire_latency_seconds_count{pool="one"}'], 1)
    assert.equal(samples['fencelock_acquire_latency_seconds_bucket{pool="two",le="+Inf"}'], 0)

    assert.throws(() => registerMetrics(two, registry, { labels: { other: 'x' } }), /labels \[pool\]/)
    assert.throws(() => registerMetrics(two, registry), /labels \[pool\]/)
    assert.throws(() => registerMetrics(two, registry, { labels: { pool: 'one' } }), /registered already/)
    unregisterOne()
    ;({ samples } = await scrape(registry))
    assert.equal(samples['fencelock_acquired_total{pool="one"}'], undefined)
    assert.equal(samples['fencelock_acquired_total{pool="two"}'], 0)
  } finally {
    await Promise.all([one.close(), two.close()])
  }
})

test('registerMetrics checks its arguments', async () => {
  const client = new Client({ nodes: nodes.urls })
  try {
    const registry = new prom.Registry()
    assert.throws(() => registerMetrics({ metrics: () => ({}) }, registry), TypeError)
    assert.throws(() => registerMetrics(client, {}), TypeError)
    assert.throws(() => registerMetrics(client, registry, { label: {} }), TypeError)
    assert.throws(() => registerMetrics(client, registry, { labels: { kind: 'x' } }), RangeError)
    assert.throws(() => registerMetrics(client, registry, { labels: { 'no-dash': 'x' } }), RangeError)
    assert.throws(() => registerMetrics(client, registry, { labels: { pool: 1 } }), TypeError)
    assert.equal(await registry.metrics(), '\n', 'a refused call registers nothing')

    // A metric of the same name that fencelock did not register is left alone.
    const taken = new prom.Registry()
    new prom.Gauge({ name: 'fencelock_held', help: 'someone else', registers: [taken] })
    assert.throws(() => registerMetrics(client, taken), /fencelock_held already/)
    assert.deepEqual(
      taken.getMetricsAsArray().map((metric) => metric.name),
      ['fencelock_held'],
    )

    // Without a registry: prom-client's global one.
    const unregister = registerMetrics(client, undefined, { labels: { app: 'test' } })
    assert.match(await prom.register.metrics(), /fencelock_acquired_total\{app="test"\} 0/)
    unregister()
    assert.equal(prom.register.getSingleMetric('fencelock_acquired_total'), undefined)

    // A registry cleared since gets the metrics anew.
    registerMetrics(client, registry)
    registry.clear()
    registerMetrics(client, registry)
    assert.match(await registry.metrics(), /^fencelock_held 0$/m)
  } finally {
    await client.close()
  }
})

/** Runs `code` in a child Node process in the package folder; its stdout. */
function node(args, code) {
  return execFileSync(process.execPath, [...args, '-e', code], { cwd: __dirname, encoding: 'utf8' })
}

test('fencelock never loads prom-client; fencelock/prometheus says what to install when it is missing', () => {
  const loaded = node(
    [],
    "require('fencelock'); console.log(Object.keys(require.cache).some((f) => f.includes('prom-client')))",
  )
  assert.equal(loaded.trim(), 'false')
  const missing = node(
    [],
    `const Module = require('node:module')
const resolve = Module._resolveFilename
Module._resolveFilename = function (request, ...rest) {
  if (request === 'prom-client') {
    throw Object.assign(new Error("Cannot find module 'prom-client'"), { code: 'MODULE_NOT_FOUND' })
  }
  return resolve.call(this, request, ...rest)
}
const { Client } = require('fencelock')
const { registerMetrics } = require('fencelock/prometheus')
const client = new Client({ nodes: ['redis://127.0.0.1:1'] })
try {
  registerMetrics(client)
} catch (error) {
  console.log(error.message)
}
client.close()`,
  )
  assert.match(missing, /fencelock\/prometheus needs prom-client .*npm install prom-client/)
  const esm = node(
    ['--input-type=module'],
    "import { registerMetrics, METRIC_NAMES } from 'fencelock/prometheus'; console.log(typeof registerMetrics, METRIC_NAMES.held)",
  )
  assert.equal(esm.trim(), 'function fencelock_held')
})

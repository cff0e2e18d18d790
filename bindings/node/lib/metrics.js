'use strict'

// `Client#metrics()`: the core's snapshot of a client's counters as a plain
// object (camelCase fields, durations in ms), and the names and latency
// buckets it is exported with (`METRIC_NAMES`, `LATENCY_BUCKETS_MS`).

const native = require('../native.js')

/** Each field of `Client#metrics()` → the name it is exported under (Prometheus style). */
const METRIC_NAMES = Object.freeze(native.metricNames())

/** The upper bounds of the acquire-latency buckets, in ms. */
const LATENCY_BUCKETS_MS = Object.freeze(native.latencyBucketsMs())

/** The public snapshot of the addon's flat one (`NativeMetrics` in native.d.ts). */
function toMetrics(n) {
  const counts = (list) => Object.fromEntries(list.map(({ name, count }) => [name, count]))
  return {
    acquired: n.acquired,
    failed: counts(n.failed),
    lost: counts(n.lost),
    released: n.released,
    renewals: n.renewals,
    renewalFailures: n.renewalFailures,
    held: n.held,
    waiting: n.waiting,
    acquireLatency: {
      count: n.latencyCount,
      sum: n.latencySumMs,
      buckets: LATENCY_BUCKETS_MS.map((bound, i) => [bound, n.latencyBuckets[i]]),
      p50: n.latencyP50Ms ?? null,
      p99: n.latencyP99Ms ?? null,
    },
  }
}

module.exports = { METRIC_NAMES, LATENCY_BUCKETS_MS, toMetrics }

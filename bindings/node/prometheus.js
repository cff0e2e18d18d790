'use strict'

/**
 * fencelock/prometheus: a client's metrics (`client.metrics()`) in a
 * prom-client registry.
 *
 *   const prom = require('prom-client')
 *   const { registerMetrics } = require('fencelock/prometheus')
 *   registerMetrics(client, prom.register)
 *   // GET /metrics: res.end(await prom.register.metrics())
 *
 * prom-client is an optional peer dependency: install it beside fencelock
 * (`npm install prom-client`). `require('fencelock')` never loads it;
 * `registerMetrics` loads it on its first call and throws an `Error` saying
 * what to install when it is missing.
 *
 * Each scrape reads each registered client's snapshot once (no I/O) and
 * reports it under `METRIC_NAMES`: the counters `fencelock_acquired_total`,
 * `fencelock_failed_total` (label `kind`), `fencelock_lost_total` (label
 * `reason`), `fencelock_released_total`, `fencelock_renewals_total` and
 * `fencelock_renewal_failures_total`, the gauges `fencelock_held` and
 * `fencelock_waiting`, and the histogram `fencelock_acquire_latency_seconds`
 * (in seconds, as Prometheus counts time; buckets `LATENCY_BUCKETS_MS`).
 */

const { Client } = require('./lib/client.js')
const { METRIC_NAMES } = require('./lib/metrics.js')
const { describe } = require('./lib/args.js')

const HELP = {
  acquired: 'Acquire calls that returned a lock, a permit or a read or write grant.',
  failed: 'Acquire calls that failed, by error kind.',
  lost: 'Held locks lost, by reason.',
  released: 'Releases that succeeded.',
  renewals: 'Automatic renewals that succeeded.',
  renewalFailures: 'Automatic renewals that failed (retried until the lock is lost).',
  held: 'Locks, permits and grants held now.',
  waiting: 'Acquire calls waiting for a lock now.',
  acquireLatency: 'How long acquire calls took, successful or not.',
}

// The labels of the per-kind and per-reason counters, and the histogram's own.
const RESERVED_LABELS = ['kind', 'reason', 'le']
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/

let promClient
/** prom-client, loaded on first use; an `Error` naming it when it is not installed. */
function loadPromClient() {
  if (promClient === undefined) {
    try {
      promClient = require('prom-client')
    } catch (error) {
      if (error?.code !== 'MODULE_NOT_FOUND' || !String(error.message).includes("'prom-client'")) throw error
      throw new Error(
        'fencelock/prometheus needs prom-client (an optional peer dependency of fencelock): npm install prom-client',
        { cause: error },
      )
    }
  }
  return promClient
}

/** The fencelock metrics of one registry and the clients they report. */
class Collection {
  constructor(prom, registry, labelNames) {
    this.registry = registry
    this.labelNames = labelNames
    this.sources = []
    this.cached = null
    const snapshots = () => this.snapshots()
    const counter = (name, count, ...extra) =>
      new prom.Counter({
        name: METRIC_NAMES[name],
        help: HELP[name],
        labelNames: [...labelNames, ...extra],
        registers: [],
        collect() {
          this.reset()
          for (const { metrics, labels } of snapshots()) {
            for (const [more, value] of count(metrics)) this.inc({ ...labels, ...more }, value)
          }
        },
      })
    const field = (name) => (metrics) => [[{}, metrics[name]]]
    const byName = (name, label) => (metrics) =>
      Object.entries(metrics[name]).map(([key, value]) => [{ [label]: key }, value])
    const gauge = (name) =>
      new prom.Gauge({
        name: METRIC_NAMES[name],
        help: HELP[name],
        labelNames,
        registers: [],
        collect() {
          this.reset()
          for (const { metrics, labels } of snapshots()) this.set(labels, metrics[name])
        },
      })
    this.metrics = [
      counter('acquired', field('acquired')),
      counter('failed', byName('failed', 'kind'), 'kind'),
      counter('lost', byName('lost', 'reason'), 'reason'),
      counter('released', field('released')),
      counter('renewals', field('renewals')),
      counter('renewalFailures', field('renewalFailures')),
      gauge('held'),
      gauge('waiting'),
      new LatencyHistogram(METRIC_NAMES.acquireLatency, HELP.acquireLatency, labelNames, snapshots),
    ]
    const taken = this.metrics.find((metric) => registry.getSingleMetric(metric.name) !== undefined)
    if (taken !== undefined) {
      throw new Error(`the registry has a metric named ${taken.name} already (not one fencelock registered)`)
    }
    for (const metric of this.metrics) registry.registerMetric(metric)
  }

  /**
   * Each client's snapshot with its labels: taken once for all the metrics
   * of one scrape (a registry reads them all in one go), then anew.
   */
  snapshots() {
    if (this.cached === null) {
      this.cached = this.sources.map(({ client, labels }) => ({ metrics: client.metrics(), labels }))
      queueMicrotask(() => {
        this.cached = null
      })
    }
    return this.cached
  }

  add(client, labels) {
    const names = Object.keys(labels)
    if (names.length !== this.labelNames.length || !names.every((name) => this.labelNames.includes(name))) {
      throw new TypeError(
        `every client in one registry needs the labels [${this.labelNames.join(', ')}], got [${names.join(', ')}]`,
      )
    }
    const same = (source) => this.labelNames.every((name) => source.labels[name] === labels[name])
    if (this.sources.some(same)) {
      throw new TypeError(`a client with the labels ${JSON.stringify(labels)} is registered already`)
    }
    const source = { client, labels }
    this.sources.push(source)
    return () => this.remove(source)
  }

  remove(source) {
    const i = this.sources.indexOf(source)
    if (i < 0) return
    this.sources.splice(i, 1)
    if (this.sources.length > 0) return
    for (const metric of this.metrics) {
      if (this.registry.getSingleMetric(metric.name) === metric) this.registry.removeSingleMetric(metric.name)
    }
    collections.delete(this.registry)
  }
}

/**
 * The acquire-latency histogram, in seconds. Not a prom-client `Histogram`:
 * that one counts the values it observes, while these counts are the
 * client's own (the snapshot's cumulative buckets, sum and count), which
 * the registry reads through `get()` like any metric's.
 */
class LatencyHistogram {
  #snapshots

  constructor(name, help, labelNames, snapshots) {
    this.name = name
    this.help = help
    this.type = 'histogram'
    this.labelNames = labelNames
    this.aggregator = 'sum'
    this.#snapshots = snapshots
  }

  async get() {
    const values = []
    for (const { metrics, labels } of this.#snapshots()) {
      const { count, sum, buckets } = metrics.acquireLatency
      const bucket = `${this.name}_bucket`
      for (const [boundMs, below] of buckets) {
        values.push({ labels: { ...labels, le: boundMs / 1000 }, value: below, metricName: bucket })
      }
      values.push({ labels: { ...labels, le: '+Inf' }, value: count, metricName: bucket })
      values.push({ labels, value: sum / 1000, metricName: `${this.name}_sum` })
      values.push({ labels, value: count, metricName: `${this.name}_count` })
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator }
  }

  /** Nothing to reset: the counts are the clients'. */
  reset() {}
}

/** Registry → its `Collection`. */
const collections = new WeakMap()

function labelsArg(options) {
  if (options === undefined) return {}
  if (options === null || typeof options !== 'object') {
    throw new TypeError(`options must be an object, got ${describe(options)}`)
  }
  for (const key of Object.keys(options)) {
    if (key !== 'labels') throw new TypeError(`unknown option ${JSON.stringify(key)} (the options are: labels)`)
  }
  const { labels } = options
  if (labels === undefined) return {}
  if (labels === null || typeof labels !== 'object' || Array.isArray(labels)) {
    throw new TypeError(`labels must be an object of strings, got ${describe(labels)}`)
  }
  for (const [name, value] of Object.entries(labels)) {
    if (!LABEL_NAME.test(name) || name.startsWith('__'))
      throw new RangeError(`${JSON.stringify(name)} is not a label name`)
    if (RESERVED_LABELS.includes(name))
      throw new RangeError(`the label name ${JSON.stringify(name)} is fencelock's own`)
    if (typeof value !== 'string') throw new TypeError(`label ${name} must be a string, got ${describe(value)}`)
  }
  return { ...labels }
}

/**
 * Reports `client`'s metrics in the prom-client `registry` (default: the
 * global `register`), with the constant `options.labels` on each series.
 * Several clients may share a registry, each with its own label values
 * (and all with the same label names). Returns a function that stops
 * reporting this client (the metrics leave the registry with the last client).
 */
function registerMetrics(client, registry, options) {
  if (!(client instanceof Client)) throw new TypeError(`client must be a fencelock Client, got ${describe(client)}`)
  const labels = labelsArg(options)
  const prom = loadPromClient()
  registry ??= prom.register
  if (typeof registry?.registerMetric !== 'function' || typeof registry.getSingleMetric !== 'function') {
    throw new TypeError(`registry must be a prom-client Registry, got ${describe(registry)}`)
  }
  let collection = collections.get(registry)
  // A registry cleared since (`registry.clear()`) gets the metrics anew.
  if (collection !== undefined && registry.getSingleMetric(collection.metrics[0].name) !== collection.metrics[0]) {
    collection = undefined
  }
  if (collection === undefined) {
    collection = new Collection(prom, registry, Object.keys(labels))
    collections.set(registry, collection)
  }
  return collection.add(client, labels)
}

module.exports = { registerMetrics, METRIC_NAMES }

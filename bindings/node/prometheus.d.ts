/**
 * `fencelock/prometheus`: a client's metrics (`client.metrics()`) in a
 * prom-client registry. prom-client is an optional peer dependency
 * (`npm install prom-client`); `registerMetrics` throws an `Error` saying so
 * when it is missing.
 */

import type { Client } from './index'

/** What `registerMetrics` needs of a prom-client `Registry`. */
export interface PromRegistry {
  /** Adds a metric (fencelock adds one per exported name, once per registry). */
  registerMetric(metric: any): void
  /** The metric of that name, if any (fencelock refuses to replace one it did not register). */
  getSingleMetric(name: string): unknown
  /** Takes the metric of that name out (when the last client is unregistered). */
  removeSingleMetric(name: string): void
}

/** Options of `registerMetrics`. */
export interface RegisterMetricsOptions {
  /**
   * Constant labels on every series of this client (e.g. `{ pool: 'orders' }`):
   * every client of one registry needs the same label names, with other
   * values. Not `kind`, `reason` or `le` (fencelock's own).
   */
  labels?: Record<string, string>
}

/**
 * Reports `client`'s metrics in the prom-client `registry` (default: the
 * global `register`): each scrape reads the client's snapshot once (no I/O)
 * and reports the counters `fencelock_acquired_total`,
 * `fencelock_failed_total` (label `kind`), `fencelock_lost_total` (label
 * `reason`), `fencelock_released_total`, `fencelock_renewals_total`,
 * `fencelock_renewal_failures_total`, the gauges `fencelock_held` and
 * `fencelock_waiting`, and the histogram `fencelock_acquire_latency_seconds`
 * (in seconds). Returns a function that stops reporting this client.
 *
 * Throws a `TypeError` for a client that is not a fencelock `Client`, a bad
 * registry or options, or labels unlike those of the clients registered
 * before (other names, or the same values); a `RangeError` for a label name
 * that is not one (or is `kind`, `reason` or `le`); an `Error` when
 * prom-client is not installed, or when the registry has a metric of one of
 * these names that fencelock did not register.
 */
export declare function registerMetrics(
  client: Client,
  registry?: PromRegistry,
  options?: RegisterMetricsOptions,
): () => void

/** The names the metrics are exported under (as `METRIC_NAMES` of `fencelock`). */
export { METRIC_NAMES } from './index'

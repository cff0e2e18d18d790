// Type-checked by `npm run typecheck` and test/dispose.test.js (never run):
// the typings of client.metrics() and of fencelock/prometheus.
import { Registry } from 'prom-client'
import type { AcquireLatency, Client, Metrics } from 'fencelock'
import { LATENCY_BUCKETS_MS, METRIC_NAMES } from 'fencelock'
import { registerMetrics, type RegisterMetricsOptions } from 'fencelock/prometheus'

/** A line of text from a snapshot: every field has its documented type. */
export function summary(client: Client): string {
  const m: Metrics = client.metrics()
  const latency: AcquireLatency = m.acquireLatency
  const failed: number = m.failed.not_acquired ?? 0
  const deleted: number = m.lost['deleted'] ?? 0
  const buckets: Array<[number, number]> = latency.buckets
  const p99: number | null = latency.p99
  return `${m.acquired} ${failed} ${deleted} ${m.renewalFailures} ${m.held} ${m.waiting} ${latency.sum} ${buckets.length} ${p99}`
}

// @ts-expect-error: the Node front spells it in camelCase
export const snake = (m: Metrics): number => m.renewal_failures

export const heldName: string = METRIC_NAMES.held
// @ts-expect-error: METRIC_NAMES is keyed by the snapshot's fields
export const noName: string = METRIC_NAMES.nothing
export const firstBound: number | undefined = LATENCY_BUCKETS_MS[0]

/** A prom-client Registry is what registerMetrics takes; it returns the way out. */
export function register(client: Client): () => void {
  const options: RegisterMetricsOptions = { labels: { pool: 'orders' } }
  const unregister: () => void = registerMetrics(client, new Registry(), options)
  registerMetrics(client)
  return unregister
}
// @ts-expect-error: label values are strings
export const numberLabel: RegisterMetricsOptions = { labels: { pool: 1 } }

package dev.fencelock

import dev.fencelock.ffi.NativeMetrics
import java.time.Duration

/** One bucket of the acquire-latency histogram: how many acquisitions took at most [upperBound] (cumulative). */
data class LatencyBucket(val upperBound: Duration, val count: Long)

/** The acquire latency: [count], [sum], cumulative [buckets], and the median and 99th percentile. */
data class Latency(
    val count: Long,
    val sum: Duration,
    val buckets: List<LatencyBucket>,
    val p50: Duration?,
    val p99: Duration?,
)

/**
 * What a client has counted so far ([Client.metrics]): acquisitions,
 * failures by kind, losses by reason, releases, renewals, the locks held and
 * the calls waiting now, and the acquire latency.
 */
data class Metrics(
    val acquired: Long,
    val failed: Map<ErrorKind, Long>,
    val lost: Map<LossReason, Long>,
    val released: Long,
    val renewals: Long,
    val renewalFailures: Long,
    val held: Long,
    val waiting: Long,
    val acquireLatency: Latency,
) {
    internal companion object {
        fun of(m: NativeMetrics) = Metrics(
            acquired = m.acquired.toLong(),
            failed = m.failed.mapNotNull { c -> ErrorKind.fromName(c.name)?.let { it to c.count.toLong() } }.toMap(),
            lost = m.lost.mapNotNull { c -> LossReason.fromName(c.name)?.let { it to c.count.toLong() } }.toMap(),
            released = m.released.toLong(),
            renewals = m.renewals.toLong(),
            renewalFailures = m.renewalFailures.toLong(),
            held = m.held.toLong(),
            waiting = m.waiting.toLong(),
            acquireLatency = Latency(
                count = m.latencyCount.toLong(),
                sum = m.latencySum,
                buckets = m.latencyBucketBounds.zip(m.latencyBucketCounts) { bound, n -> LatencyBucket(bound, n.toLong()) },
                p50 = m.latencyP50,
                p99 = m.latencyP99,
            ),
        )
    }
}

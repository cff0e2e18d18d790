package dev.fencelock

import kotlinx.coroutines.async
import kotlinx.coroutines.cancelAndJoin
import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.json.JSONObject
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance
import java.io.File
import java.lang.reflect.Modifier
import java.time.Duration
import java.util.UUID

/** Client.metrics(): the counters move exactly as a scripted scenario says, against one real Redis node. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class MetricsTest {
    private lateinit var nodes: RedisNodes

    @BeforeAll
    fun start() {
        nodes = RedisNodes(1)
    }

    @AfterAll
    fun stop() = nodes.close()

    private fun unique(name: String) = "jvm:$name:${UUID.randomUUID()}"

    /** Every kind (or reason) at zero except those in [nonZero]. */
    private fun <K> only(all: Map<K, Long>, vararg nonZero: Pair<K, Long>): Map<K, Long> =
        all.mapValues { (key, _) -> nonZero.toMap()[key] ?: 0L }

    private suspend fun eventually(what: String, condition: () -> Boolean) {
        withTimeout(5000) { while (!condition()) delay(5) }
        assertTrue(condition(), what)
    }

    @Test
    fun countersFollowAScriptedScenario() = runBlocking<Unit> {
        val (a, b, c) = List(3) { Client(nodes.urls) }
        val resource = unique("metrics")
        try {
            // A takes the lock: one acquisition, one lock held, one latency sample.
            val held = a.acquire(resource, ttl = Duration.ofSeconds(10))
            var m = a.metrics()
            assertEquals(listOf(1L, 1L, 0L, 0L), listOf(m.acquired, m.held, m.waiting, m.released))
            assertEquals(1L, m.acquireLatency.count)
            // The sample lies in one bucket, counted cumulatively; p50 and p99 are its bound.
            val first = m.acquireLatency.buckets.first { it.count == 1L }.upperBound
            assertEquals(m.acquireLatency.buckets.map { if (it.upperBound >= first) 1L else 0L }, m.acquireLatency.buckets.map { it.count })
            assertEquals(first, m.acquireLatency.p50)
            assertTrue(m.acquireLatency.sum <= first, "${m.acquireLatency.sum} beyond its bucket's $first")

            // B contends: a refused try is a failure of kind not_acquired (and a latency sample).
            assertNull(b.tryAcquire(resource, Duration.ofSeconds(10)))
            m = b.metrics()
            assertEquals(only(m.failed, ErrorKind.NOT_ACQUIRED to 1L), m.failed)
            assertEquals(listOf(0L, 0L, 1L), listOf(m.acquired, m.held, m.acquireLatency.count))

            // B waits: counted as waiting until A's release hands it the lock.
            val waiting = async { b.acquire(resource, ttl = Duration.ofSeconds(1), wait = Duration.ofSeconds(10)) }
            eventually("B waits") { b.metrics().waiting == 1L }
            assertEquals(0L, a.metrics().waiting)
            held.release()
            val lock = waiting.await()
            val (ma, mb) = a.metrics() to b.metrics()
            assertEquals(listOf(1L, 0L, 1L), listOf(ma.released, ma.held, ma.acquired))
            assertEquals(listOf(1L, 0L, 1L, 0L, 2L), listOf(mb.acquired, mb.waiting, mb.held, mb.released, mb.acquireLatency.count))

            // B's 1 s lease renews (a late renewal would see it expired, not deleted); then its key is deleted: one loss, deleted.
            eventually("B renews") { b.metrics().renewals >= 1 }
            nodes.call(0, "DEL fencelock:{$resource}")
            assertEquals(LossReason.DELETED, withTimeout(3000) { lock.awaitLost() })
            eventually("B holds nothing") { b.metrics().held == 0L }
            m = b.metrics()
            assertEquals(only(m.lost, LossReason.DELETED to 1L), m.lost)
            assertEquals(listOf(0L, 0L), listOf(m.renewalFailures, m.released))
            runCatching { lock.release() }
            assertEquals(0L, b.metrics().released, "a failed release is no release")

            // C's wait, cancelled, counts as cancelled and stops waiting.
            val blocker = a.acquire(resource, ttl = Duration.ofSeconds(10))
            val given = async { c.acquire(resource, ttl = Duration.ofSeconds(10), wait = Duration.ofSeconds(30)) }
            eventually("C waits") { c.metrics().waiting == 1L }
            given.cancelAndJoin()
            eventually("C's wait counted as cancelled") { c.metrics().failed[ErrorKind.CANCELLED] == 1L }
            m = c.metrics()
            assertEquals(only(m.failed, ErrorKind.CANCELLED to 1L), m.failed)
            assertEquals(listOf(0L, 0L, 0L, 1L), listOf(m.waiting, m.acquired, m.held, m.acquireLatency.count))
            blocker.release()

            // Latency samples: one per acquire call, successful or not.
            m = a.metrics()
            assertEquals(listOf(2L, 2L, 0L, 2L), listOf(m.acquired, m.released, m.held, m.acquireLatency.count))
        } finally {
            listOf(a, b, c).forEach { it.close() }
        }
    }

    @Test
    fun fieldsAndBucketsAreTheVectors() {
        val vectors = JSONObject(File(RedisNodes.repo(), "tests/vectors/protocol.json").readText()).getJSONObject("metrics")
        val camel = { name: String -> name.replace(Regex("_([a-z])")) { it.groupValues[1].uppercase() } }
        val fields = vectors.getJSONArray("fields").map { camel(it as String) }
        // The data class's properties, in declaration order (HotSpot lists fields so).
        val properties = Metrics::class.java.declaredFields.filterNot { Modifier.isStatic(it.modifiers) }.map { it.name }
        assertEquals(fields, properties)
        Client(nodes.urls).use { client ->
            val bounds = client.metrics().acquireLatency.buckets.map { it.upperBound }
            val expected = vectors.getJSONArray("latency_buckets_seconds").map { Duration.ofNanos(Math.round((it as Number).toDouble() * 1e9)) }
            assertEquals(expected, bounds)
            assertEquals(ErrorKind.entries.toSet(), client.metrics().failed.keys, "every kind counted, zeros included")
            assertEquals(LossReason.entries.toSet(), client.metrics().lost.keys, "every reason counted, zeros included")
        }
    }
}

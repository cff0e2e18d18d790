package dev.fencelock

import kotlinx.coroutines.async
import kotlinx.coroutines.awaitAll
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance
import java.time.Duration
import java.util.UUID
import java.util.concurrent.atomic.AtomicInteger

/** Redlock over three real nodes: a node down, semaphores and read-write locks. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class QuorumTest {
    private lateinit var nodes: RedisNodes
    private lateinit var client: Client
    private lateinit var other: Client

    @BeforeAll
    fun start() {
        nodes = RedisNodes(3)
        client = Client.builder().nodes(nodes.urls).nodeTimeout(Duration.ofMillis(100)).build()
        other = Client(nodes.urls, ClientOptions(nodeTimeout = Duration.ofMillis(100)))
    }

    @AfterAll
    fun stop() {
        client.close()
        other.close()
        nodes.close()
    }

    private fun unique(name: String) = "jvm:$name:${UUID.randomUUID()}"

    @Test
    fun threeNodesWithOneKilledStillGrant() = runBlocking<Unit> {
        assertEquals(2, client.quorum)
        assertEquals(3, client.nodes.size)
        val resource = unique("quorum")
        nodes.run("kill 2")
        try {
            var last = 0L
            repeat(3) {
                val lock = client.acquire(resource, ttl = Duration.ofSeconds(5), wait = Duration.ofSeconds(2))
                assertTrue(lock.isHeld)
                assertTrue(lock.fencingToken > last)
                last = lock.fencingToken
                assertNull(other.tryAcquire(resource, Duration.ofSeconds(5)), "two live nodes still exclude")
                lock.release()
            }
        } finally {
            nodes.run("restart 2")
        }
    }

    @Test
    fun semaphoreNeverOverAdmits() = runBlocking<Unit> {
        val sem = client.semaphore(unique("sem"), 2)
        assertEquals(2, sem.permits)
        val inside = AtomicInteger()
        val most = AtomicInteger()
        val tokens = mutableListOf<Pair<Int, Long>>()
        coroutineScope {
            (0 until 8).map { i ->
                async {
                    val c = if (i % 2 == 0) client else other
                    val permit = c.semaphore(sem.name, 2).acquire(ttl = Duration.ofSeconds(5), wait = Duration.ofSeconds(10))
                    val now = inside.incrementAndGet()
                    most.accumulateAndGet(now) { a, b -> maxOf(a, b) }
                    synchronized(tokens) { tokens += permit.permit!! to permit.fencingToken }
                    delay(60)
                    inside.decrementAndGet()
                    permit.release()
                }
            }.awaitAll()
        }
        assertEquals(2, most.get(), "at most 2 holders at once, and 2 did hold together")
        // In quorum mode the successive holders of each permit get strictly increasing tokens.
        assertEquals(8, tokens.size)
        assertEquals(8, tokens.toSet().size, "no permit's token repeats: $tokens")
        val a = sem.acquire(ttl = Duration.ofSeconds(5))
        val b = sem.tryAcquire(Duration.ofSeconds(5))
        assertNotNull(b)
        assertNull(sem.tryAcquire(Duration.ofSeconds(5)), "a third permit is refused")
        assertEquals(2, sem.holders())
        a.release()
        b!!.release()
        assertEquals(0, sem.holders())
    }

    @Test
    fun readWriteLockReadersShareAndAWriterExcludes() = runBlocking<Unit> {
        val name = unique("rw")
        val rw = client.rwLock(name)
        val r1 = rw.acquireRead(ttl = Duration.ofSeconds(5))
        val r2 = other.rwLock(name).acquireRead(ttl = Duration.ofSeconds(5), wait = Duration.ofSeconds(1))
        assertTrue(r1.isHeld && r2.isHeld, "two readers at once")
        assertNull(other.rwLock(name).tryAcquireWrite(Duration.ofSeconds(5)), "no writer beside readers")
        val writer = async { other.rwLock(name).acquireWrite(ttl = Duration.ofSeconds(5), wait = Duration.ofSeconds(5)) }
        // In line on a majority of the nodes: in their sets of waiting writers.
        val writers = "fencelock:{$name}:rw:writers"
        val deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos()
        while (nodes.urls.indices.count { nodes.call(it, "ZCARD $writers") != "0" } < nodes.urls.size / 2 + 1) {
            assertTrue(System.nanoTime() < deadline, "the writer never queued")
            delay(5)
        }
        assertNull(rw.tryAcquireRead(Duration.ofSeconds(5)), "a waiting writer holds later readers back")
        r1.release()
        r2.release()
        val w = writer.await()
        assertTrue(w.fencingToken > maxOf(r1.fencingToken, r2.fencingToken))
        assertNull(rw.tryAcquireRead(Duration.ofSeconds(5)), "no reader beside the writer")
        assertNull(rw.tryAcquireWrite(Duration.ofSeconds(5)), "no second writer")
        w.release()
        val after = rw.tryAcquireRead(Duration.ofSeconds(5))
        assertNotNull(after)
        after!!.release()
    }
}

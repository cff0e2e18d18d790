package dev.fencelock

import kotlinx.coroutines.async
import kotlinx.coroutines.awaitAll
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.delay
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertThrows
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance
import java.time.Duration
import java.util.UUID
import java.util.concurrent.CancellationException
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicInteger
import java.util.concurrent.atomic.AtomicReference

private fun ms(n: Long): Duration = Duration.ofMillis(n)

private fun unique(name: String) = "jvm:$name:${UUID.randomUUID()}"

/** The lock, its lost signal, cancellation and fenced writes, against one real Redis node. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class LockTest {
    private lateinit var nodes: RedisNodes
    private lateinit var client: Client
    private lateinit var other: Client

    @BeforeAll
    fun start() {
        nodes = RedisNodes(1)
        client = Client(nodes.urls)
        other = Client(nodes.urls)
    }

    @AfterAll
    fun stop() {
        client.close()
        other.close()
        nodes.close()
    }

    @Test
    fun acquireTryReleaseAndExtend() = runBlocking<Unit> {
        val resource = unique("basic")
        val lock = client.acquire(resource, ttl = Duration.ofSeconds(5), wait = Duration.ofSeconds(1))
        assertTrue(lock.isHeld)
        assertEquals(LockStatus.HELD, lock.status)
        assertEquals(resource, lock.resource)
        assertNull(other.tryAcquire(resource, Duration.ofSeconds(5)), "held elsewhere: one attempt gives null")
        assertThrows(NotAcquiredException::class.java) {
            runBlocking { other.acquire(resource, ttl = Duration.ofSeconds(5), wait = Duration.ZERO) }
        }
        val timedOut = assertThrows(LockTimeoutException::class.java) {
            runBlocking { other.acquire(resource, ttl = Duration.ofSeconds(5), wait = ms(150)) }
        }
        assertEquals(ErrorKind.TIMEOUT, timedOut.kind)
        assertEquals(resource, timedOut.resource)
        // The timed-out waiter has left the queue when the call throws: a
        // release made next is not handed to it.
        assertEquals("0", nodes.call(0, "ZCARD fencelock:{$resource}:queue"), "the timed-out waiter is still in line")

        lock.extend(Duration.ofSeconds(60))
        assertTrue(lock.remaining > Duration.ofSeconds(30), "extended: ${lock.remaining}")
        lock.release()
        assertFalse(lock.isHeld)
        assertEquals(LockStatus.RELEASED, lock.status)
        assertThrows(NotHeldException::class.java) { runBlocking { lock.release() } }
        assertThrows(NotHeldException::class.java) { runBlocking { lock.extend(Duration.ofSeconds(1)) } }

        val next = other.tryAcquire(resource, Duration.ofSeconds(5))
        assertNotNull(next, "free after release")
        next!!.release()
    }

    @Test
    fun fencingTokensStrictlyIncrease() = runBlocking<Unit> {
        val resource = unique("tokens")
        var last = 0L
        repeat(6) { i ->
            val c = if (i % 2 == 0) client else other
            val lock = c.acquire(resource, ttl = Duration.ofSeconds(5), wait = Duration.ofSeconds(2))
            assertTrue(lock.fencingToken > last, "token ${lock.fencingToken} after $last")
            assertEquals(Fence(lock.fencingToken, lock.holderId), lock.fence)
            last = lock.fencingToken
            lock.release()
        }
    }

    @Test
    fun autoCloseableReleases() {
        val resource = unique("closeable")
        val lock = client.acquireBlocking(resource, Duration.ofSeconds(5), Duration.ofSeconds(1))
        lock.use { assertTrue(it.isHeld) }
        assertEquals(LockStatus.RELEASED, lock.status)
        lock.close() // a second close does nothing
        val again = other.tryAcquireBlocking(resource, Duration.ofSeconds(5))
        assertNotNull(again, "use { } released the lock")
        again!!.close()
    }

    @Test
    fun closeReleasesOnAThreadWhoseInterruptFlagIsSet() {
        // Shutdown code often catches an InterruptedException and sets the
        // flag again before try-with-resources closes the lock. Before the
        // fix close() threw InterruptedException at once and the lock stayed.
        val resource = unique("interrupted-close")
        val lock = client.acquireBlocking(resource, Duration.ofSeconds(30), Duration.ofSeconds(1))
        Thread.currentThread().interrupt()
        try {
            lock.close()
            assertTrue(Thread.currentThread().isInterrupted, "close() cleared the interrupt flag")
        } finally {
            Thread.interrupted()
        }
        assertEquals(LockStatus.RELEASED, lock.status)
        assertEquals("0", nodes.call(0, "EXISTS fencelock:{$resource}"), "the lock is still held on the node")
    }

    @Test
    fun lostSignalFiresWithDeletedWhenTheKeyIsDeleted() = runBlocking<Unit> {
        val resource = unique("lost")
        val lock = client.acquire(resource, ttl = ms(600), wait = Duration.ofSeconds(1))
        val heard = AtomicReference<LossReason>()
        lock.onLost { heard.set(it) }
        assertFalse(lock.lost.isDone)
        nodes.call(0, "DEL fencelock:{$resource}")
        val reason = lock.lost.get(3, TimeUnit.SECONDS)
        assertEquals(LossReason.DELETED, reason)
        assertEquals("deleted", reason.wireName)
        assertTrue(reason.description.isNotEmpty())
        assertFalse(lock.isHeld)
        assertEquals(LockStatus.LOST, lock.status)
        assertEquals(LossReason.DELETED, lock.lossReason)
        withTimeout(1000) { while (heard.get() == null) delay(10) }
        assertEquals(LossReason.DELETED, heard.get())
        assertEquals(LossReason.DELETED, lock.awaitLost())
        assertThrows(NotHeldException::class.java) { runBlocking { lock.release() } }
    }

    @Test
    fun aCancelledWaitReturnsPromptlyAndLeavesNothingHeld() = runBlocking<Unit> {
        val resource = unique("cancel")
        val holder = client.acquire(resource, ttl = Duration.ofSeconds(5))
        // A coroutine waiting for the lock, cancelled.
        val waiter = launch { other.acquire(resource, ttl = Duration.ofSeconds(30), wait = Duration.ofSeconds(30)) }
        delay(200)
        val started = System.nanoTime()
        waiter.cancel()
        waiter.join()
        val tookMs = (System.nanoTime() - started) / 1_000_000
        assertTrue(tookMs < 1000, "cancelled in $tookMs ms")
        // A CompletableFuture waiting for the lock, cancelled.
        val future = other.acquireAsync(resource, Duration.ofSeconds(30), Duration.ofSeconds(30))
        delay(200)
        assertTrue(future.cancel(true))
        assertThrows(CancellationException::class.java) { future.join() }
        holder.release()
        other.settle()
        // Nothing is held: a single attempt of a third party gets the lock at once.
        val third = Client(nodes.urls)
        val free = third.tryAcquire(resource, Duration.ofSeconds(5))
        assertNotNull(free, "nothing held after the cancelled waits")
        free!!.release()
        third.close()
    }

    @Test
    fun settleWaitsForACancelledFutureToLeaveTheQueue() = runBlocking<Unit> {
        // Cancelling a future completes it at once; its coroutine drops the
        // native call later, and the core's undo starts after that: a settle
        // right after the cancel waits for both.
        val resource = unique("settle-cancelled")
        val holder = client.acquire(resource, ttl = Duration.ofSeconds(5))
        repeat(10) { round ->
            val future = other.acquireAsync(resource, Duration.ofSeconds(30), Duration.ofSeconds(30))
            withTimeout(3000) {
                while (nodes.call(0, "ZCARD fencelock:{$resource}:queue") != "1") delay(5)
            }
            assertTrue(future.cancel(true))
            other.settle()
            assertEquals("0", nodes.call(0, "ZCARD fencelock:{$resource}:queue"), "round $round: still queued after settle")
        }
        holder.release()
    }

    @Test
    fun aGrantRacingACancellationIsReleased() = runBlocking<Unit> {
        // Cancel waits at many moments around the grant: whatever the timing,
        // the resource ends up free (a lock granted to nobody is released).
        val resource = unique("race")
        repeat(20) { i ->
            val holder = client.acquire(resource, ttl = Duration.ofSeconds(5))
            val waiter = launch { other.acquire(resource, ttl = Duration.ofSeconds(30), wait = Duration.ofSeconds(5)).release() }
            delay(5)
            holder.release()
            delay((i % 5).toLong())
            waiter.cancel()
            waiter.join()
        }
        other.settle()
        val free = client.tryAcquire(resource, Duration.ofSeconds(5))
        assertNotNull(free, "the resource is free after 20 raced cancellations")
        free!!.release()
    }

    @Test
    fun fencedWriteFromAStaleHolderIsRefused() = runBlocking<Unit> {
        val resource = unique("fenced")
        val key = "jvm-data:${UUID.randomUUID()}"
        val first = client.acquire(resource, ttl = Duration.ofSeconds(5))
        client.fencedSet(key, "from first", first.fence)
        first.release()
        val second = other.acquire(resource, ttl = Duration.ofSeconds(5))
        assertTrue(second.fencingToken > first.fencingToken)
        other.fencedSet(key, "from second", second.fence)
        val stale = assertThrows(StaleTokenException::class.java) {
            runBlocking { client.fencedSet(key, "late write", first.fence) }
        }
        assertEquals(ErrorKind.STALE_TOKEN, stale.kind)
        assertThrows(StaleTokenException::class.java) { client.fencedSetBlocking(key, "late", first.fence) }
        assertEquals(FencedValue("from second", second.fencingToken), client.fencedGet(key))
        assertNull(client.fencedGet("jvm-data:missing:${UUID.randomUUID()}"))
        second.release()
    }

    @Test
    fun fairWaitingAndWithLock() = runBlocking<Unit> {
        val resource = unique("fair")
        val waiting = Client(nodes.urls)
        val holder = client.acquire(resource, LockOptions(ttl = Duration.ofSeconds(5), fair = true))
        val order = mutableListOf<Int>()
        coroutineScope {
            val waiters = (1..3).map { n ->
                val job = async {
                    waiting.withLock(resource, LockOptions(ttl = Duration.ofSeconds(5), wait = Duration.ofSeconds(10), fair = true)) {
                        synchronized(order) { order += n }
                    }
                }
                // The next waiter comes once this one is in line on the node (the
                // client's waiting gauge counts it before its first attempt lands).
                withTimeout(5000) { while (nodes.call(0, "ZCARD fencelock:{$resource}:queue") != n.toString()) delay(5) }
                job
            }
            holder.release()
            waiters.awaitAll()
        }
        assertEquals(listOf(1, 2, 3), order, "fair waiters are served in order")
        waiting.close()
    }

    @Test
    fun inspectShowsHolderTtlCounterAndWaiters() = runBlocking<Unit> {
        val resource = unique("inspect")
        val free = client.inspect(resource).single()
        assertEquals(listOf(false, 0L, 0L), listOf(free.held, free.fencingCounter, free.waiters))
        assertNull(free.ttl)
        assertNull(free.error)
        assertFalse(free.node.contains("@"), "no credentials in ${free.node}")

        val lock = client.acquire(resource, ttl = Duration.ofSeconds(5))
        val waiter = async { other.acquire(resource, ttl = Duration.ofSeconds(5), wait = Duration.ofSeconds(10)) }
        withTimeout(5000) { while (client.inspect(resource).single().waiters < 1) delay(10) }
        val held = client.inspectBlocking(resource).single()
        assertTrue(held.held)
        assertEquals(lock.fencingToken, held.fencingCounter)
        assertEquals(1L, held.waiters)
        assertNotNull(held.ttl)
        val ttl = held.ttl!!
        assertTrue(ttl > Duration.ZERO && ttl <= Duration.ofSeconds(5), "ttl $ttl")

        lock.release()
        val next = waiter.await()
        assertEquals(next.fencingToken, client.inspectAsync(resource).get(5, TimeUnit.SECONDS).single().fencingCounter)
        next.release()
        assertFalse(client.inspect(resource).single().held)
    }

    @Test
    fun metricsCountAcquisitionsAndReleases() = runBlocking<Unit> {
        val metered = Client(nodes.urls)
        val resource = unique("metrics")
        metered.acquire(resource, ttl = Duration.ofSeconds(5)).release()
        val held = metered.acquire(resource, ttl = Duration.ofSeconds(5))
        val m = metered.metrics()
        assertEquals(2, m.acquired)
        assertEquals(1, m.released)
        assertEquals(1, m.held)
        assertEquals(2, m.acquireLatency.count)
        assertNotNull(m.acquireLatency.p50)
        held.release()
        metered.close()
    }

    @Test
    fun leaderElection() = runBlocking<Unit> {
        val name = unique("election")
        val observation = other.observe(name)
        val leader = client.campaign(name, ttl = Duration.ofSeconds(5), value = "node-a".toByteArray())
        assertTrue(leader.isLeader)
        val seen = withTimeout(3000) { observation.next() }
        assertEquals(leader.epoch, seen!!.epoch)
        assertEquals("node-a", String(seen.value))
        val challenger = async { other.campaign(name, ttl = Duration.ofSeconds(5), wait = Duration.ofSeconds(5), value = "node-b".toByteArray()) }
        delay(100)
        leader.resign()
        val next = challenger.await()
        assertTrue(next.epoch > leader.epoch)
        val seenNext = withTimeout(3000) { observation.next() }
        assertEquals(next.epoch, seenNext!!.epoch)
        next.close()
        observation.close()
        assertTrue(observation.isClosed)
        assertNull(observation.next())
    }
}

package dev.fencelock

import dev.fencelock.ffi.errorKinds
import dev.fencelock.ffi.limits
import dev.fencelock.ffi.lossReasons
import kotlinx.coroutines.runBlocking
import org.json.JSONObject
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertThrows
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance
import org.junit.jupiter.api.function.Executable
import java.io.File
import java.time.Duration

/** The Kotlin tables against tests/vectors/protocol.json and the native library; bad input. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ArgumentsAndVectorsTest {
    private val vectors = JSONObject(File(RedisNodes.repo(), "tests/vectors/protocol.json").readText())

    // A node nobody listens on: argument errors come before any I/O.
    private lateinit var client: Client

    @BeforeAll
    fun start() {
        client = Client(listOf("redis://127.0.0.1:1"), ClientOptions(connectTimeout = Duration.ofMillis(100)))
    }

    @AfterAll
    fun stop() = client.close()

    @Test
    fun errorKindsAreTheVectors() {
        val expected = vectors.getJSONArray("error_kinds").map { (it as JSONObject).getString("name") to it.getInt("code") }
        assertEquals(expected, ErrorKind.entries.map { it.wireName to it.code })
        assertEquals(expected, errorKinds().map { it.name to it.code }, "the native library's table")
        for (kind in ErrorKind.entries) {
            val e = exceptionFor(kind, "m", "r")
            assertEquals(kind, e.kind)
            assertEquals("r", e.resource)
        }
        assertEquals(ErrorKind.entries.size, ErrorKind.entries.map { exceptionFor(it, "m")::class }.toSet().size, "one class per kind")
    }

    @Test
    fun lossReasonsAreTheVectors() {
        val expected = vectors.getJSONArray("loss_reasons").map { (it as JSONObject).getString("name") }
        assertEquals(expected, LossReason.entries.map { it.wireName })
        assertEquals(expected, lossReasons())
        for (reason in LossReason.entries) assertTrue(reason.description != reason.wireName, "a sentence for $reason")
    }

    @Test
    fun limitsAreTheVectors() {
        val l = vectors.getJSONObject("limits")
        val native = limits()
        assertEquals(l.getLong("min_ttl_ms"), Limits.MIN_TTL.toMillis())
        assertEquals(l.getLong("max_ttl_ms"), Limits.MAX_TTL.toMillis())
        assertEquals(l.getLong("max_wait_ms"), Limits.MAX_WAIT.toMillis())
        assertEquals(l.getInt("max_resource_bytes"), Limits.MAX_RESOURCE_BYTES)
        assertEquals(l.getInt("max_prefix_bytes"), Limits.MAX_PREFIX_BYTES)
        assertEquals(l.getDouble("max_drift_factor"), Limits.MAX_DRIFT_FACTOR)
        assertEquals(l.getLong("max_fencing_token"), Limits.MAX_FENCING_TOKEN)
        assertEquals(l.getLong("max_holder_id"), Limits.MAX_HOLDER_ID)
        assertEquals(l.getInt("max_leader_value_bytes"), Limits.MAX_LEADER_VALUE_BYTES)
        assertEquals(l.getInt("max_permits"), Limits.MAX_PERMITS)
        assertEquals(Limits.MIN_TTL.toMillis(), native.minTtlMs.toLong())
        assertEquals(Limits.MAX_TTL.toMillis(), native.maxTtlMs.toLong())
        assertEquals(Limits.MAX_WAIT.toMillis(), native.maxWaitMs.toLong())
        assertEquals(Limits.MAX_RESOURCE_BYTES, native.maxResourceBytes.toInt())
        assertEquals(Limits.MAX_PREFIX_BYTES, native.maxPrefixBytes.toInt())
        assertEquals(Limits.MAX_DRIFT_FACTOR, native.maxDriftFactor)
        assertEquals(Limits.MAX_FENCING_TOKEN, native.maxFencingToken.toLong())
        assertEquals(Limits.MAX_HOLDER_ID, native.maxHolderId.toLong())
        assertEquals(Limits.MAX_LEADER_VALUE_BYTES, native.maxLeaderValueBytes.toInt())
        assertEquals(Limits.MAX_PERMITS, native.maxPermits.toInt())
    }

    /** Each form of a call throws [InvalidArgumentException] at once: suspend, CompletableFuture, blocking. */
    private fun invalidEverywhere(what: String, suspending: suspend () -> Unit, async: () -> Unit, blocking: () -> Unit) {
        val forms = listOf(
            Executable { runBlocking { suspending() } },
            Executable { async() },
            Executable { blocking() },
        )
        for (form in forms) {
            val e = assertThrows(InvalidArgumentException::class.java, form, what)
            assertEquals(ErrorKind.INVALID_ARGUMENT, e.kind)
            assertTrue(e.message!!.isNotEmpty())
        }
    }

    @Test
    fun badInputGetsTheDocumentedException() {
        val ttl = Duration.ofSeconds(1)
        val tooLong = "x".repeat(Limits.MAX_RESOURCE_BYTES + 1)
        for ((what, resource, badTtl) in listOf(
            Triple("empty resource", "", ttl),
            Triple("oversized resource", tooLong, ttl),
            Triple("zero ttl", "r", Duration.ZERO),
            Triple("ttl below the minimum", "r", Limits.MIN_TTL.minusMillis(1)),
            Triple("ttl above the maximum", "r", Limits.MAX_TTL.plusMillis(1)),
            Triple("negative ttl", "r", Duration.ofMillis(-5)),
            Triple("huge ttl", "r", Duration.ofSeconds(Long.MAX_VALUE)),
        )) {
            invalidEverywhere(
                what,
                { client.acquire(resource, badTtl) },
                { client.acquireAsync(resource, badTtl) },
                { client.acquireBlocking(resource, badTtl) },
            )
            invalidEverywhere(
                "$what (try)",
                { client.tryAcquire(resource, badTtl) },
                { client.tryAcquireAsync(resource, badTtl) },
                { client.tryAcquireBlocking(resource, badTtl) },
            )
        }
        invalidEverywhere(
            "negative wait",
            { client.acquire("r", ttl, Duration.ofMillis(-1)) },
            { client.acquireAsync("r", ttl, Duration.ofMillis(-1)) },
            { client.acquireBlocking("r", ttl, Duration.ofMillis(-1)) },
        )
        invalidEverywhere(
            "wait above the maximum",
            { client.acquire("r", ttl, Limits.MAX_WAIT.plusDays(1)) },
            { client.acquireAsync("r", ttl, Limits.MAX_WAIT.plusDays(1)) },
            { client.acquireBlocking("r", ttl, Limits.MAX_WAIT.plusDays(1)) },
        )
        assertThrows(InvalidArgumentException::class.java) { client.semaphore("s", 0) }
        assertThrows(InvalidArgumentException::class.java) { client.semaphore("s", Limits.MAX_PERMITS + 1) }
        assertThrows(InvalidArgumentException::class.java) { client.semaphore("", 2) }
        assertThrows(InvalidArgumentException::class.java) { client.rwLock("") }
        assertThrows(InvalidArgumentException::class.java) { client.semaphore("s", 2).tryAcquireBlocking(Duration.ZERO) }
        assertThrows(InvalidArgumentException::class.java) { client.rwLock("w").acquireWriteAsync(Duration.ofMillis(-1)) }
        assertThrows(InvalidArgumentException::class.java) {
            runBlocking { client.acquire("r", LockOptions(ttl = ttl, maxRenewals = -1)) }
        }
        assertThrows(InvalidArgumentException::class.java) {
            client.campaignAsync("e", value = ByteArray(Limits.MAX_LEADER_VALUE_BYTES + 1))
        }
        assertThrows(InvalidArgumentException::class.java) { client.fencedSetAsync("k", "v", Fence(-1, 0)) }
        assertThrows(InvalidArgumentException::class.java) { client.fencedSetBlocking("", "v", Fence(1, 0)) }
        assertThrows(InvalidArgumentException::class.java) { client.fencedSetBlocking("fencelock:{x}", "v", Fence(1, 0)) }
    }

    @Test
    fun badConfigurationGetsConfigException() {
        assertThrows(ConfigException::class.java) { Client(emptyList()) }
        assertThrows(ConfigException::class.java) { Client(listOf("http://127.0.0.1:1")) }
        assertThrows(ConfigException::class.java) { Client(listOf("redis://127.0.0.1:1", "redis://127.0.0.1:1")) }
        assertThrows(ConfigException::class.java) { Client(listOf("redis://127.0.0.1:1"), ClientOptions(driftFactor = 0.5)) }
        assertThrows(ConfigException::class.java) { Client(listOf("redis://127.0.0.1:1"), ClientOptions(keyPrefix = "{x}")) }
        assertThrows(ConfigException::class.java) { Client(listOf("redis://127.0.0.1:1"), ClientOptions(nodeTimeout = Duration.ZERO)) }
        assertThrows(ConfigException::class.java) { Client(listOf("redis://127.0.0.1:1"), ClientOptions(tlsMinVersion = "1.1")) }
        assertThrows(InvalidArgumentException::class.java) { Client(listOf("redis://127.0.0.1:1"), ClientOptions(nodeTimeout = Duration.ofMillis(-1))) }
        val shown = ClientOptions(password = "hunter2").toString()
        assertTrue("hunter2" !in shown, shown)
    }

    @Test
    fun aClosedClientRefusesWithClosedException() {
        val closing = Client(listOf("redis://127.0.0.1:1"))
        closing.close()
        val e = assertThrows(ClosedException::class.java) { closing.acquireBlocking("r", Duration.ofSeconds(1)) }
        assertEquals(ErrorKind.CLOSED, e.kind)
    }

    @Test
    fun anUnreachableNodeIsUnavailable() {
        val e = assertThrows(UnavailableException::class.java) {
            client.tryAcquireBlocking("r", Duration.ofSeconds(1))
        }
        assertTrue(e.nodes.isNotEmpty() || e.message!!.isNotEmpty())
    }
}

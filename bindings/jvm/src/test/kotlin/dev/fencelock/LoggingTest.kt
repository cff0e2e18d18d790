package dev.fencelock

import dev.fencelock.ffi.logLevels
import org.json.JSONObject
import org.junit.jupiter.api.AfterEach
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertThrows
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeEach
import org.junit.jupiter.api.Test
import java.io.File
import java.time.Duration
import java.util.UUID
import java.util.concurrent.CopyOnWriteArrayList
import java.util.concurrent.TimeUnit
import java.util.logging.Handler
import java.util.logging.Level
import java.util.logging.LogRecord
import java.util.logging.Logger

/**
 * fencelock's log records through `System.Logger`, which goes to
 * java.util.logging here (no other backend is on the test class path),
 * mirroring tests/c/test_log.c and the other fronts' logging tests: a
 * scripted scenario on nodes of its own behind an ACL password (an
 * acquisition at DEBUG with its fields, an unreachable node and a loss at
 * WARNING, renewals at TRACE), the threshold switch and off, the threshold
 * that follows the logger, a handler that throws, no password or lock token
 * in any record, and the level table against the vectors' log_levels. Each
 * test leaves the `fencelock` logger as it found it and the level following it.
 */
class LoggingTest {
    /** Keeps every record it is given, in order. */
    private class Capture : Handler() {
        val records = CopyOnWriteArrayList<LogRecord>()

        override fun publish(record: LogRecord) {
            records += record
        }

        override fun flush() {}

        override fun close() {}
    }

    /** Throws on every record, and counts them. */
    private class Throwing : Handler() {
        @Volatile var calls = 0

        override fun publish(record: LogRecord) {
            calls++
            throw IllegalStateException("a handler that throws")
        }

        override fun flush() {}

        override fun close() {}
    }

    // Held here: java.util.logging keeps loggers weakly, and one collected
    // would forget the level and handlers set on it.
    private val julLogger: Logger = Logger.getLogger(FenceLockLog.LOGGER_NAME)
    private val capture = Capture()
    private var savedLevel: Level? = null

    @BeforeEach
    fun attach() {
        savedLevel = julLogger.level
        julLogger.addHandler(capture)
    }

    @AfterEach
    fun detach() {
        julLogger.removeHandler(capture)
        julLogger.level = savedLevel
        FenceLockLog.followLogger()
    }

    private fun unique(name: String) = "jvm:log-$name:${UUID.randomUUID()}"

    /** Whether [line] (message, then name=value fields) has the field [name]=[value], whole. */
    private fun hasField(line: String, name: String, value: String): Boolean =
        line.split(' ').contains("$name=$value")

    private fun LogRecord.isAbout(message: String, resource: String?): Boolean =
        (this.message == message || this.message.startsWith("$message ")) &&
            (resource == null || hasField(this.message, "resource", resource))

    private fun since(mark: Int): List<LogRecord> = capture.records.toList().drop(mark)

    private fun dump(records: List<LogRecord>): String =
        records.joinToString("\n      ") { "${it.loggerName} ${it.level} ${it.message}" }

    /** Polls up to 10 s for the record [message] about [resource] after [mark]; null when it did not come. */
    private fun find(mark: Int, message: String, resource: String?): LogRecord? {
        val deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10)
        while (true) {
            since(mark).firstOrNull { it.isAbout(message, resource) }?.let { return it }
            if (System.nanoTime() > deadline) return null
            Thread.sleep(20)
        }
    }

    /** Takes [resource] and reads its random token on node 0. */
    private fun take(client: Client, nodes: RedisNodes, resource: String): Pair<Lock, String> {
        val lock = client.acquireBlocking(resource, Duration.ofSeconds(1), Duration.ZERO)
        val token = nodes.call(0, "GET fencelock:{$resource}")
        assertTrue(Regex("[0-9a-f]{32}").matches(token), "the lock token on node 0 is 32 hex digits, got $token")
        return lock to token
    }

    /** Deletes the lock's key on a majority and waits for its loss. */
    private fun lose(lock: Lock, nodes: RedisNodes) {
        nodes.call(0, "DEL fencelock:{${lock.resource}}")
        nodes.call(1, "DEL fencelock:{${lock.resource}}")
        // (With a node down, the core may call it deleted or unreachable: either is a loss.)
        assertNotNull(lock.lost.get(10, TimeUnit.SECONDS), "lost after its key was deleted on a majority")
        assertThrows(NotHeldException::class.java) { lock.close() }
    }

    @Test
    fun recordsReachSystemLoggerAtTheirLevelWithoutSecrets() {
        val password = "pw-SECRET-4711"
        val tokens = mutableListOf<String>()
        RedisNodes(3).use { nodes ->
            // Takes the lock on a resource, keeps its token, then loses it.
            fun takeAndLose(client: Client, resource: String) {
                val (lock, token) = take(client, nodes, resource)
                tokens += token
                lose(lock, nodes)
            }

            for (i in 0 until 3) assertEquals("OK", nodes.call(i, "ACL SETUSER app on >$password ~* &* +@all"))
            nodes.run("kill 2")
            val urls = nodes.urls.map { it.replace("redis://", "redis://app:$password@") }
            val unreachable = nodes.urls[2].removePrefix("redis://")

            // Every level, read from the logger by the client's creation.
            julLogger.level = Level.ALL
            Client(urls).use { client ->
                assertEquals(LogLevel.TRACE, FenceLockLog.level, "the client read the logger's level")

                val acquiredRes = unique("acquired")
                val (lock, token) = take(client, nodes, acquiredRes)
                tokens += token
                val acquired = find(0, "lock acquired", acquiredRes)
                assertNotNull(acquired, "a 'lock acquired' record:\n      ${dump(since(0))}")
                assertEquals(Level.FINE, acquired!!.level, "DEBUG is java.util.logging's FINE")
                assertTrue(acquired.loggerName.startsWith("${FenceLockLog.LOGGER_NAME}."), acquired.loggerName)
                assertTrue(hasField(acquired.message, "fencing_token", lock.fencingToken.toString()), acquired.message)
                val renewed = find(0, "lock renewed", acquiredRes)
                assertEquals(Level.FINER, renewed?.level, "a renewal at TRACE (FINER): $renewed")
                val down = find(0, "node unreachable at start; will retry on use", null)
                assertEquals(Level.WARNING, down?.level, "the unreachable node at WARNING:\n      ${dump(since(0))}")
                assertTrue(unreachable in down!!.message, down.message)
                lose(lock, nodes)
                val lost = find(0, "lock lost", acquiredRes)
                assertEquals(Level.WARNING, lost?.level, "a loss at WARNING: ${lost?.message}")
                assertTrue(" reason=" in lost!!.message, lost.message)

                // Fixed at WARN: a loss still comes, the acquisition before it does not.
                FenceLockLog.level = LogLevel.WARN
                assertEquals(LogLevel.WARN, FenceLockLog.level)
                // Records queued before the switch are still delivered: count from a
                // loss that came after it (delivery keeps the order records were made in).
                val barrierRes = unique("barrier")
                takeAndLose(client, barrierRes)
                val barrier = find(0, "lock lost", barrierRes)
                assertNotNull(barrier, "the barrier's loss at WARN")
                var mark = capture.records.indexOf(barrier) + 1
                val warnRes = unique("warn")
                takeAndLose(client, warnRes)
                // Delivered in order: what the acquisition logged came before its loss.
                assertNotNull(find(mark, "lock lost", warnRes), "the loss at WARN")
                val chatty = since(mark).filter { it.level.intValue() < Level.WARNING.intValue() }
                assertTrue(chatty.isEmpty(), "only warnings and errors at WARN:\n      ${dump(chatty)}")
                assertEquals(LogLevel.WARN, FenceLockLog.level, "a fixed level is kept")

                // Off: nothing, not even a loss, and a new client does not undo it. Back
                // at WARN, the next loss shows whatever was logged meanwhile would be here.
                mark = capture.records.size
                FenceLockLog.off()
                assertNull(FenceLockLog.level)
                Client(nodes.urls.take(1)).close()
                assertNull(FenceLockLog.level, "a fixed level survives a new client")
                val offRes = unique("off")
                takeAndLose(client, offRes)
                FenceLockLog.level = LogLevel.WARN
                val afterOffRes = unique("after-off")
                takeAndLose(client, afterOffRes)
                assertNotNull(find(mark, "lock lost", afterOffRes), "the loss back at WARN")
                val leaked = since(mark).filter { offRes in it.message }
                assertTrue(leaked.isEmpty(), "nothing while off:\n      ${dump(leaked)}")
            }
        }
        val all = since(0)
        assertTrue(all.size > 5, "records were captured")
        for (record in all) {
            val text = "${record.loggerName} ${record.message} ${record.parameters?.joinToString() ?: ""}"
            assertFalse(password in text, "a password reached a record: $text")
            for (token in tokens) assertFalse(token in text, "a lock token reached a record: $text")
        }
    }

    @Test
    fun theLevelFollowsTheLoggerUntilFixed() {
        val expected = listOf(
            Level.OFF to null,
            Level.SEVERE to LogLevel.ERROR,
            Level.WARNING to LogLevel.WARN,
            Level.INFO to LogLevel.INFO,
            Level.CONFIG to LogLevel.INFO,
            Level.FINE to LogLevel.DEBUG,
            Level.FINER to LogLevel.TRACE,
            Level.ALL to LogLevel.TRACE,
        )
        for ((julLevel, level) in expected) {
            julLogger.level = julLevel
            assertEquals(level, FenceLockLog.followLogger(), "followLogger() with the logger at $julLevel")
            assertEquals(level, FenceLockLog.level, "forwarded with the logger at $julLevel")
        }
        // Fixed, a new client leaves it; followLogger() goes back to the logger's.
        FenceLockLog.level = LogLevel.ERROR
        julLogger.level = Level.FINE
        Client(listOf("redis://127.0.0.1:1")).close()
        assertEquals(LogLevel.ERROR, FenceLockLog.level, "a fixed level survives a new client")
        assertEquals(LogLevel.DEBUG, FenceLockLog.followLogger())
        // Following, a new client reads the logger again.
        julLogger.level = Level.WARNING
        Client(listOf("redis://127.0.0.1:1")).close()
        assertEquals(LogLevel.WARN, FenceLockLog.level, "a new client read the logger's level")
    }

    @Test
    fun aHandlerThatThrowsLosesItsRecordNotTheProcess() {
        val throwing = Throwing()
        julLogger.level = Level.FINE
        // First: java.util.logging stops at the handler that throws.
        julLogger.removeHandler(capture)
        julLogger.addHandler(throwing)
        julLogger.addHandler(capture)
        val failuresBefore = FenceLockLog.loggerFailures
        try {
            RedisNodes(1).use { nodes ->
                Client(nodes.urls).use { client ->
                    val first = client.acquireBlocking(unique("throwing"), Duration.ofSeconds(5), Duration.ZERO)
                    val deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10)
                    while (throwing.calls == 0 && System.nanoTime() < deadline) Thread.sleep(20)
                    assertTrue(throwing.calls > 0, "the throwing handler was called")
                    first.close()
                    assertTrue(FenceLockLog.loggerFailures > failuresBefore, "the failure was counted")
                    julLogger.removeHandler(throwing)
                    val mark = capture.records.size
                    val resource = unique("after-throwing")
                    client.acquireBlocking(resource, Duration.ofSeconds(5), Duration.ZERO).use {
                        assertNotNull(find(mark, "lock acquired", resource), "records still come after a handler threw")
                    }
                }
            }
        } finally {
            julLogger.removeHandler(throwing)
        }
    }

    @Test
    fun levelsAreTheVectors() {
        val vectors = JSONObject(File(RedisNodes.repo(), "tests/vectors/protocol.json").readText())
        val expected = vectors.getJSONArray("log_levels").map { (it as JSONObject).getString("name") to it.getInt("c_value") }
        assertEquals(expected, LogLevel.entries.map { it.wireName to it.number })
        assertEquals(expected, logLevels().map { it.name to it.number.toInt() }, "the native library's table")
        // The documented mapping onto System.Logger's levels.
        val documented = mapOf(
            "error" to System.Logger.Level.ERROR,
            "warn" to System.Logger.Level.WARNING,
            "info" to System.Logger.Level.INFO,
            "debug" to System.Logger.Level.DEBUG,
            "trace" to System.Logger.Level.TRACE,
        )
        assertEquals(documented.keys, expected.map { it.first }.toSet(), "the mapping covers exactly the vectors' levels")
        for ((name, number) in expected) {
            val level = LogLevel.fromName(name)
            assertNotNull(level, name)
            assertEquals(level, LogLevel.fromNumber(number))
            assertEquals(documented[name], level!!.loggerLevel, "$name's System.Logger level")
        }
        assertNull(LogLevel.fromNumber(0))
        assertNull(LogLevel.fromNumber(6))
        assertNull(LogLevel.fromName("warning"))
    }
}

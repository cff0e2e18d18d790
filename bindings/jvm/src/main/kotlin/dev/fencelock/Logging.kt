package dev.fencelock

import dev.fencelock.ffi.NativeLogRecord
import dev.fencelock.ffi.NativeLogSink
import dev.fencelock.ffi.forwardLogs
import dev.fencelock.ffi.logLevel
import dev.fencelock.ffi.setLogLevel
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.atomic.AtomicLong

/**
 * How much one of fencelock's log records matters, most severe first: the
 * core's levels (`log_levels` in tests/vectors/protocol.json, where [number]
 * is `c_value`), each with the `System.Logger.Level` its records carry.
 */
enum class LogLevel(
    /** The stable name: `error`, `warn`, `info`, `debug`, `trace`. */
    val wireName: String,
    /** The stable number: 1 (error) to 5 (trace). */
    val number: Int,
    /** The level a record at this level is logged with. */
    val loggerLevel: System.Logger.Level,
) {
    /** Something failed that the caller must know about: `ERROR`. */
    ERROR("error", 1, System.Logger.Level.ERROR),

    /** A lock was lost, a renewal failed, a node was unreachable: `WARNING`. */
    WARN("warn", 2, System.Logger.Level.WARNING),

    /** Rare, notable events: `INFO`. */
    INFO("info", 3, System.Logger.Level.INFO),

    /** Each acquisition, release, extension and connection change: `DEBUG`. */
    DEBUG("debug", 4, System.Logger.Level.DEBUG),

    /** Each renewal: `TRACE`. */
    TRACE("trace", 5, System.Logger.Level.TRACE),
    ;

    companion object {
        /** The level with stable name [name], or `null`. */
        @JvmStatic
        fun fromName(name: String): LogLevel? = entries.firstOrNull { it.wireName == name }

        /** The level with stable number [number], or `null`. */
        @JvmStatic
        fun fromNumber(number: Int): LogLevel? = entries.firstOrNull { it.number == number }
    }
}

/**
 * fencelock's log records (a lock acquired, released or lost, a renewal
 * failed, a node unreachable…) in the JDK's platform logging,
 * `System.Logger`: java.util.logging by default, SLF4J, Log4j or whatever
 * the application binds through a `System.LoggerFinder`.
 *
 * Each record goes to the logger of the core module that emitted it, a child
 * of [LOGGER_NAME]: `fencelock::lock_state` → `System.getLogger("fencelock.lock_state")`,
 * so configuring the `fencelock` logger (its level, its handlers or
 * appenders) covers every record. The message is one line: what happened,
 * then `name=value` fields, as in `lock acquired resource=jobs fencing_token=17 attempts=1`.
 * Levels: error → `ERROR`, warn → `WARNING` (a lost lock, a failed renewal, an
 * unreachable node), info → `INFO`, debug → `DEBUG` (each acquisition,
 * release, extension and connection change), trace → `TRACE` (each renewal);
 * see [LogLevel]. With java.util.logging, `DEBUG` is `FINE` and `TRACE` is `FINER`.
 *
 * Only records at the forwarded [level] and above leave the native library.
 * By default that level follows the `fencelock` logger: the most verbose
 * level it is loggable at (`isLoggable`), read when the first [Client] is
 * made, at each [Client] made after, and by [followLogger]. So configure
 * logging before creating clients, or call [followLogger] after changing it.
 * Setting [level] (or calling [off]) fixes the level instead, whatever the
 * logger's, until [followLogger] is called.
 *
 * Records arrive on one fencelock thread, one at a time and in order, never
 * on a thread that runs a lock operation: a slow logger never slows a lock,
 * and when it cannot keep up records are dropped (the next record says how
 * many). An exception a logger throws costs the record it threw on and
 * nothing else: it never reaches a lock operation or the native library.
 * Records name nodes by their URL without the password and never carry a
 * password or a lock's random token (fencing tokens, which are not secrets, they do).
 * Forwarding is process-wide.
 */
object FenceLockLog {
    /** The logger every record goes to (through a child per core module): `"fencelock"`. */
    const val LOGGER_NAME: String = "fencelock"

    // Under this object's monitor: whether the level follows the logger, the
    // fixed level otherwise, and whether the native sink is installed.
    private var following = true
    private var fixed: LogLevel? = null
    private var forwarding = false

    /** Exceptions loggers threw since the process started (each cost its record). */
    private val failures = AtomicLong()

    /**
     * The level records are forwarded at now, `null` when none are (also
     * before the first [Client] or setting). Setting it fixes the level
     * (`null`: nothing), whatever the `fencelock` logger's level, until
     * [followLogger] is called; it starts forwarding when no client did yet.
     *
     * @throws InvalidArgumentException the records cannot be forwarded in this
     *   process (another Rust `tracing` subscriber took the native library's events).
     */
    @JvmStatic
    var level: LogLevel?
        get() = logLevel()?.let { LogLevel.fromNumber(it.toInt()) }
        set(value) {
            synchronized(this) {
                following = false
                fixed = value
                apply()
            }
        }

    /** Forwards nothing from now on, whatever the logger's level: `level = null`. */
    @JvmStatic
    fun off() {
        level = null
    }

    /**
     * Forwards, from now on, the levels the `fencelock` logger is loggable at
     * (read now, and again as each [Client] is made), undoing a fixed [level].
     * Returns the level now forwarded at, `null` for none.
     *
     * @throws InvalidArgumentException the records cannot be forwarded in this process.
     */
    @JvmStatic
    fun followLogger(): LogLevel? = synchronized(this) {
        following = true
        fixed = null
        apply()
    }

    /** How many records were lost because a logger threw on them. */
    @JvmStatic
    val loggerFailures: Long get() = failures.get()

    /**
     * The most verbose level the `fencelock` logger is loggable at, `null`
     * when none. A logger that throws here is taken to log warnings (losses
     * and failed renewals must not go silent because of it).
     */
    internal fun loggerThreshold(logger: System.Logger = System.getLogger(LOGGER_NAME)): LogLevel? =
        try {
            LogLevel.entries.lastOrNull { logger.isLoggable(it.loggerLevel) }
        } catch (e: Exception) {
            failures.incrementAndGet()
            LogLevel.WARN
        }

    /** Called as each client is made: a failure here never fails the client, it is logged. */
    internal fun beforeClientConnects() {
        try {
            synchronized(this) { if (following || !forwarding) apply() }
        } catch (e: Exception) {
            runCatching {
                System.getLogger(LOGGER_NAME).log(
                    System.Logger.Level.ERROR,
                    "could not forward fencelock's log records: ${e.message}",
                )
            }
        }
    }

    /** Installs the sink (once) or changes its level; returns the level forwarded at. Under the monitor. */
    private fun apply(): LogLevel? {
        val threshold = if (following) loggerThreshold() else fixed
        val number = threshold?.number?.toUByte()
        translating {
            if (forwarding) {
                setLogLevel(number)
            } else {
                forwardLogs(Sink, number)
                forwarding = true
            }
        }
        return threshold
    }

    /** The native library's sink, called on its log delivery thread. */
    private object Sink : NativeLogSink {
        private val loggers = ConcurrentHashMap<String, System.Logger>()

        override fun record(record: NativeLogRecord) {
            // Nothing thrown here may reach the native side: catch every
            // Throwable (the generated bridge catches only Exception).
            try {
                val level = LogLevel.fromNumber(record.level.toInt()) ?: LogLevel.WARN
                loggers.computeIfAbsent(record.target, ::loggerFor).log(level.loggerLevel, record.line)
            } catch (e: Throwable) {
                failures.incrementAndGet()
            }
        }

        /** `fencelock::lock_state` → the logger `fencelock.lock_state`. */
        private fun loggerFor(target: String): System.Logger {
            val name = target.replace("::", ".")
            val dotted = if (name == LOGGER_NAME || name.startsWith("$LOGGER_NAME.")) name else "$LOGGER_NAME.$name"
            return System.getLogger(dotted)
        }
    }
}

package dev.fencelock

import java.time.Duration

/**
 * The core's limits (`limits` in tests/vectors/protocol.json; the vectors
 * test checks these against it and against the native library).
 */
object Limits {
    /** The shortest ttl accepted. */
    @JvmField
    val MIN_TTL: Duration = Duration.ofMillis(10)

    /** The longest ttl accepted: 2^31 − 1 ms (about 24.8 days). */
    @JvmField
    val MAX_TTL: Duration = Duration.ofMillis(2_147_483_647)

    /** The longest wait accepted: 366 days. */
    @JvmField
    val MAX_WAIT: Duration = Duration.ofDays(366)

    /** The longest resource name (and fenced key), in UTF-8 bytes. */
    const val MAX_RESOURCE_BYTES: Int = 1024

    /** The longest key prefix, in UTF-8 bytes. */
    const val MAX_PREFIX_BYTES: Int = 256

    /** The largest clock-drift factor. */
    const val MAX_DRIFT_FACTOR: Double = 0.1

    /** The largest fencing token handed out (2^53 − 1). */
    const val MAX_FENCING_TOKEN: Long = 9_007_199_254_740_991L

    /** The largest holder id of a fence (2^63 − 1). */
    const val MAX_HOLDER_ID: Long = Long.MAX_VALUE

    /** The longest value a leader may announce, in bytes. */
    const val MAX_LEADER_VALUE_BYTES: Int = 65_536

    /** The most permits a semaphore may have. */
    const val MAX_PERMITS: Int = 256
}

/** Why a lock was lost (`loss_reasons` in tests/vectors/protocol.json). */
enum class LossReason(val wireName: String) {
    /** A renewal found the key missing on a majority (deleted, evicted, or the node restarted empty). */
    DELETED("deleted"),

    /** A renewal found another owner's token on a majority. */
    TAKEN_OVER("taken_over"),

    /** Renewals kept failing until the validity ran out. */
    UNREACHABLE("unreachable"),

    /** The lease ran out without renewal (auto-renew off, or a renewal limit reached). */
    EXPIRED("expired"),
    ;

    /** The core's sentence for this reason. */
    val description: String get() = translating { dev.fencelock.ffi.lossReasonText(wireName) }

    companion object {
        /** The reason with stable name [name], or `null`. */
        @JvmStatic
        fun fromName(name: String): LossReason? = entries.firstOrNull { it.wireName == name }
    }
}

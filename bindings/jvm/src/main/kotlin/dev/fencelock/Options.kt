package dev.fencelock

import dev.fencelock.ffi.NativeClientOptions
import dev.fencelock.ffi.NativeLockOptions
import java.time.Duration

/**
 * Client settings; every `null` takes the core's default. From Kotlin use
 * named arguments, from Java [ClientOptions.builder] (or [Client.builder]).
 */
data class ClientOptions @JvmOverloads constructor(
    /** Prefix of every key (default `"fencelock:"`); no braces. */
    val keyPrefix: String? = null,
    /** Hard limit on each request to one node (default 100 ms). */
    val nodeTimeout: Duration? = null,
    /** Limit on opening a connection (default 1 s). */
    val connectTimeout: Duration? = null,
    /** Clock-drift factor of the Redlock validity formula, 0 to 0.1 (default 0.01). */
    val driftFactor: Double? = null,
    /** Cap of the first retry delay while a lock is busy. */
    val retryBaseDelay: Duration? = null,
    /** Largest retry delay cap. */
    val retryMaxDelay: Duration? = null,
    /** ttl of acquisitions that give none (default 30 s). */
    val defaultTtl: Duration? = null,
    /** wait of acquisitions that give none (default 10 s). */
    val defaultWait: Duration? = null,
    /** Whether locks are renewed at ttl/3 while held, unless their options say otherwise (default true). */
    val autoRenew: Boolean? = null,
    /** ACL user name for every node (overrides the URLs'). */
    val username: String? = null,
    /** Password for every node (overrides the URLs'). Never printed. */
    val password: String? = null,
    /** PEM CA bundle to trust for `rediss://` nodes instead of the Mozilla roots. */
    val tlsCaPem: String? = null,
    /** PEM client certificate for mutual TLS (with [tlsClientKeyPem]). */
    val tlsClientCertPem: String? = null,
    /** PEM client key for mutual TLS (with [tlsClientCertPem]). */
    val tlsClientKeyPem: String? = null,
    /** Oldest TLS version accepted: `"1.2"` (default) or `"1.3"`. */
    val tlsMinVersion: String? = null,
    /** Allow a quorum that mixes `rediss://` and `redis://` nodes. */
    val allowMixedTls: Boolean? = null,
    /** Refuse nodes that do not run AOF. */
    val requireAof: Boolean? = null,
    /** Label the metrics facade's series with resource names too. */
    val metricsPerResource: Boolean? = null,
) {
    override fun toString(): String =
        "ClientOptions(keyPrefix=$keyPrefix, nodeTimeout=$nodeTimeout, connectTimeout=$connectTimeout, " +
            "defaultTtl=$defaultTtl, defaultWait=$defaultWait, password=${password?.let { "<redacted>" }})"

    internal fun toNative(nodes: List<String>) = NativeClientOptions(
        nodes = nodes,
        keyPrefix = keyPrefix,
        nodeTimeout = nodeTimeout?.let { nonNegative("nodeTimeout", it) },
        connectTimeout = connectTimeout?.let { nonNegative("connectTimeout", it) },
        driftFactor = driftFactor,
        retryBaseDelay = retryBaseDelay?.let { nonNegative("retryBaseDelay", it) },
        retryMaxDelay = retryMaxDelay?.let { nonNegative("retryMaxDelay", it) },
        defaultTtl = defaultTtl?.let { nonNegative("defaultTtl", it) },
        defaultWait = defaultWait?.let { nonNegative("defaultWait", it) },
        autoRenew = autoRenew,
        username = username,
        password = password,
        tlsCaPem = tlsCaPem,
        tlsClientCertPem = tlsClientCertPem,
        tlsClientKeyPem = tlsClientKeyPem,
        tlsMinVersion = tlsMinVersion,
        allowMixedTls = allowMixedTls,
        requireAof = requireAof,
        metricsPerResource = metricsPerResource,
    )

    /** Builds [ClientOptions] step by step (for Java). */
    class Builder internal constructor(private var options: ClientOptions = ClientOptions()) {
        fun keyPrefix(value: String) = apply { options = options.copy(keyPrefix = value) }
        fun nodeTimeout(value: Duration) = apply { options = options.copy(nodeTimeout = value) }
        fun connectTimeout(value: Duration) = apply { options = options.copy(connectTimeout = value) }
        fun driftFactor(value: Double) = apply { options = options.copy(driftFactor = value) }
        fun retry(baseDelay: Duration, maxDelay: Duration) = apply { options = options.copy(retryBaseDelay = baseDelay, retryMaxDelay = maxDelay) }
        fun defaultTtl(value: Duration) = apply { options = options.copy(defaultTtl = value) }
        fun defaultWait(value: Duration) = apply { options = options.copy(defaultWait = value) }
        fun autoRenew(value: Boolean) = apply { options = options.copy(autoRenew = value) }
        fun username(value: String) = apply { options = options.copy(username = value) }
        fun password(value: String) = apply { options = options.copy(password = value) }
        fun tlsCaPem(value: String) = apply { options = options.copy(tlsCaPem = value) }
        fun tlsClientCert(certPem: String, keyPem: String) = apply { options = options.copy(tlsClientCertPem = certPem, tlsClientKeyPem = keyPem) }
        fun tlsMinVersion(value: String) = apply { options = options.copy(tlsMinVersion = value) }
        fun allowMixedTls(value: Boolean) = apply { options = options.copy(allowMixedTls = value) }
        fun requireAof(value: Boolean) = apply { options = options.copy(requireAof = value) }
        fun metricsPerResource(value: Boolean) = apply { options = options.copy(metricsPerResource = value) }
        fun build(): ClientOptions = options
    }

    companion object {
        /** A builder with every setting at its default. */
        @JvmStatic
        fun builder(): Builder = Builder()
    }
}

/**
 * Options of one acquisition; every `null` takes the client's default.
 * From Java: `LockOptions.builder().ttl(…).waitFor(…).fair(true).build()`.
 */
data class LockOptions @JvmOverloads constructor(
    /** How long the lock lives without renewal ([Limits.MIN_TTL] to [Limits.MAX_TTL]). */
    val ttl: Duration? = null,
    /** How long to keep trying while the lock is busy (zero: one attempt). */
    val wait: Duration? = null,
    /** Fair (FIFO) waiting: never take the lock ahead of an earlier waiter. */
    val fair: Boolean = false,
    /** Whether the lock is renewed at ttl/3 while held. */
    val autoRenew: Boolean? = null,
    /** Stop renewing once the lock has been held this long in total. */
    val maxHold: Duration? = null,
    /** Stop renewing after this many renewals. */
    val maxRenewals: Int? = null,
) {
    internal fun toNative(): NativeLockOptions {
        if (maxRenewals != null && maxRenewals < 0) {
            throw InvalidArgumentException("maxRenewals must not be negative, got $maxRenewals")
        }
        return NativeLockOptions(
            ttl = ttl?.let { nonNegative("ttl", it) },
            wait = wait?.let { nonNegative("wait", it) },
            autoRenew = autoRenew,
            maxHold = maxHold?.let { nonNegative("maxHold", it) },
            maxRenewals = maxRenewals?.toUInt(),
            fair = fair,
        )
    }

    /** Builds [LockOptions] step by step (for Java). */
    class Builder internal constructor(private var options: LockOptions = LockOptions()) {
        fun ttl(value: Duration) = apply { options = options.copy(ttl = value) }

        /** The wait (named so because `wait` is `Object.wait` in Java). */
        fun waitFor(value: Duration) = apply { options = options.copy(wait = value) }
        fun fair(value: Boolean) = apply { options = options.copy(fair = value) }
        fun autoRenew(value: Boolean) = apply { options = options.copy(autoRenew = value) }
        fun maxHold(value: Duration) = apply { options = options.copy(maxHold = value) }
        fun maxRenewals(value: Int) = apply { options = options.copy(maxRenewals = value) }
        fun build(): LockOptions = options
    }

    companion object {
        /** A builder with every option at the client's default. */
        @JvmStatic
        fun builder(): Builder = Builder()
    }
}

/** [value], or [InvalidArgumentException] when it is negative. */
internal fun nonNegative(name: String, value: Duration): Duration {
    if (value.isNegative) throw InvalidArgumentException("$name must not be negative, got $value")
    return value
}

package dev.fencelock

import dev.fencelock.ffi.NativeException
import dev.fencelock.ffi.NativeNodeReport

/**
 * The kinds of failure every fencelock front shares (docs/protocol.md §7,
 * `error_kinds` in tests/vectors/protocol.json): a stable [code] and [wireName].
 * Each has its exception class ([exceptionFor]).
 */
enum class ErrorKind(val code: Int, val wireName: String) {
    /** The lock is held by someone else (a quorum of nodes said so). */
    NOT_ACQUIRED(1, "not_acquired"),

    /** The wait passed before the lock could be taken. */
    TIMEOUT(2, "timeout"),

    /** Not enough nodes answered to decide. */
    UNAVAILABLE(3, "unavailable"),

    /** The lock was lost while held. */
    LOST(4, "lost"),

    /** The lock was no longer held when released or extended. */
    NOT_HELD(5, "not_held"),

    /** A fenced write carried a token older than the one stored. */
    STALE_TOKEN(6, "stale_token"),

    /** An argument was out of range (empty resource, ttl too short…). */
    INVALID_ARGUMENT(7, "invalid_argument"),

    /** The client configuration is invalid. */
    CONFIG(8, "config"),

    /** A node refused the credentials, or the ACL user lacks a permission. */
    AUTH(9, "auth"),

    /** The TLS handshake or certificate verification failed. */
    TLS(10, "tls"),

    /** The client is closed. */
    CLOSED(11, "closed"),

    /** A blocking call was made where it would deadlock. */
    WOULD_BLOCK(12, "would_block"),

    /** The operation was cancelled (coroutine cancellation is a `CancellationException` instead). */
    CANCELLED(102, "cancelled"),

    /** A bug in fencelock, caught before it reached the caller. */
    INTERNAL(200, "internal"),
    ;

    companion object {
        /** The kind with stable name [name], or `null`. */
        @JvmStatic
        fun fromName(name: String): ErrorKind? = entries.firstOrNull { it.wireName == name }
    }
}

/** One node's part in a failed operation: the node (URL without password), its [outcome] name and [detail]. */
data class NodeReport(val node: String, val outcome: String, val detail: String) {
    override fun toString(): String = "$node: $detail"
}

/**
 * Base class of every error fencelock throws. [kind] says what failed,
 * [resource] what it was about, and [nodes] what each node answered (empty
 * when no node was asked). Catch a subclass for one kind, e.g.
 * [NotAcquiredException] or [StaleTokenException].
 */
open class FenceLockException(
    message: String,
    val kind: ErrorKind,
    val resource: String? = null,
    val nodes: List<NodeReport> = emptyList(),
    cause: Throwable? = null,
) : RuntimeException(message, cause)

/** The lock is held by someone else (`not_acquired`). */
class NotAcquiredException @JvmOverloads constructor(message: String, resource: String? = null, nodes: List<NodeReport> = emptyList()) :
    FenceLockException(message, ErrorKind.NOT_ACQUIRED, resource, nodes)

/** The wait passed before the lock could be taken (`timeout`). */
class LockTimeoutException @JvmOverloads constructor(message: String, resource: String? = null, nodes: List<NodeReport> = emptyList()) :
    FenceLockException(message, ErrorKind.TIMEOUT, resource, nodes)

/** Not enough nodes answered (`unavailable`). */
class UnavailableException @JvmOverloads constructor(message: String, resource: String? = null, nodes: List<NodeReport> = emptyList()) :
    FenceLockException(message, ErrorKind.UNAVAILABLE, resource, nodes)

/** The lock was lost while held (`lost`). */
class LockLostException @JvmOverloads constructor(message: String, resource: String? = null, nodes: List<NodeReport> = emptyList()) :
    FenceLockException(message, ErrorKind.LOST, resource, nodes)

/** The lock was no longer held when released or extended (`not_held`). */
class NotHeldException @JvmOverloads constructor(message: String, resource: String? = null, nodes: List<NodeReport> = emptyList()) :
    FenceLockException(message, ErrorKind.NOT_HELD, resource, nodes)

/** A fenced write carried a token older than the stored one (`stale_token`): stop and re-acquire. */
class StaleTokenException @JvmOverloads constructor(message: String, resource: String? = null, nodes: List<NodeReport> = emptyList()) :
    FenceLockException(message, ErrorKind.STALE_TOKEN, resource, nodes)

/** An argument was out of range (`invalid_argument`). */
class InvalidArgumentException @JvmOverloads constructor(message: String, resource: String? = null, nodes: List<NodeReport> = emptyList()) :
    FenceLockException(message, ErrorKind.INVALID_ARGUMENT, resource, nodes)

/** The client configuration is invalid (`config`). */
class ConfigException @JvmOverloads constructor(message: String, resource: String? = null, nodes: List<NodeReport> = emptyList()) :
    FenceLockException(message, ErrorKind.CONFIG, resource, nodes)

/** A node refused the credentials or an ACL right (`auth`). */
class AuthException @JvmOverloads constructor(message: String, resource: String? = null, nodes: List<NodeReport> = emptyList()) :
    FenceLockException(message, ErrorKind.AUTH, resource, nodes)

/** The TLS handshake or certificate verification failed (`tls`). */
class TlsException @JvmOverloads constructor(message: String, resource: String? = null, nodes: List<NodeReport> = emptyList()) :
    FenceLockException(message, ErrorKind.TLS, resource, nodes)

/** The client is closed (`closed`). */
class ClosedException @JvmOverloads constructor(message: String, resource: String? = null, nodes: List<NodeReport> = emptyList()) :
    FenceLockException(message, ErrorKind.CLOSED, resource, nodes)

/** A blocking call was made where it would deadlock (`would_block`). */
class WouldBlockException @JvmOverloads constructor(message: String, resource: String? = null, nodes: List<NodeReport> = emptyList()) :
    FenceLockException(message, ErrorKind.WOULD_BLOCK, resource, nodes)

/** The operation was cancelled by the core (`cancelled`); a cancelled coroutine gets a `CancellationException`. */
class CancelledException @JvmOverloads constructor(message: String, resource: String? = null, nodes: List<NodeReport> = emptyList()) :
    FenceLockException(message, ErrorKind.CANCELLED, resource, nodes)

/** A bug in fencelock, caught before it reached the caller (`internal`). */
class InternalException @JvmOverloads constructor(message: String, resource: String? = null, nodes: List<NodeReport> = emptyList()) :
    FenceLockException(message, ErrorKind.INTERNAL, resource, nodes)

/** The exception of [kind], with its message, resource and node reports. */
fun exceptionFor(kind: ErrorKind, message: String, resource: String? = null, nodes: List<NodeReport> = emptyList()): FenceLockException =
    when (kind) {
        ErrorKind.NOT_ACQUIRED -> NotAcquiredException(message, resource, nodes)
        ErrorKind.TIMEOUT -> LockTimeoutException(message, resource, nodes)
        ErrorKind.UNAVAILABLE -> UnavailableException(message, resource, nodes)
        ErrorKind.LOST -> LockLostException(message, resource, nodes)
        ErrorKind.NOT_HELD -> NotHeldException(message, resource, nodes)
        ErrorKind.STALE_TOKEN -> StaleTokenException(message, resource, nodes)
        ErrorKind.INVALID_ARGUMENT -> InvalidArgumentException(message, resource, nodes)
        ErrorKind.CONFIG -> ConfigException(message, resource, nodes)
        ErrorKind.AUTH -> AuthException(message, resource, nodes)
        ErrorKind.TLS -> TlsException(message, resource, nodes)
        ErrorKind.CLOSED -> ClosedException(message, resource, nodes)
        ErrorKind.WOULD_BLOCK -> WouldBlockException(message, resource, nodes)
        ErrorKind.CANCELLED -> CancelledException(message, resource, nodes)
        ErrorKind.INTERNAL -> InternalException(message, resource, nodes)
    }

/** A core error as the exception of its kind; the message lists the nodes' answers as the core's does. */
internal fun NativeException.Failure.toPublic(): FenceLockException {
    val reports = nodes.map(NativeNodeReport::toPublic)
    val full = if (reports.isEmpty()) text else "$text [${reports.joinToString("; ")}]"
    val kind = ErrorKind.fromName(kind) ?: ErrorKind.INTERNAL
    return exceptionFor(kind, full, resource, reports)
}

private fun NativeNodeReport.toPublic() = NodeReport(node, outcome, detail)

/**
 * Runs a call into the native library, turning its errors into the public
 * exceptions: a core error into its kind's class, a panic caught by uniffi
 * into [InternalException]. Works around suspend calls too (inline).
 */
internal inline fun <T> translating(call: () -> T): T =
    try {
        call()
    } catch (e: NativeException.Failure) {
        throw e.toPublic()
    } catch (e: dev.fencelock.ffi.InternalException) {
        throw InternalException("fencelock's native library failed: ${e.message}; this is a bug, please report it")
    }

package dev.fencelock

import dev.fencelock.ffi.NativeLock
import kotlinx.coroutines.Job
import kotlinx.coroutines.NonCancellable
import kotlinx.coroutines.future.await
import kotlinx.coroutines.launch
import kotlinx.coroutines.withContext
import java.lang.ref.Cleaner
import java.time.Duration
import java.util.concurrent.CompletableFuture

/** Where a lock stands. */
enum class LockStatus {
    /** Held; [Lock.remaining] says for how long without a renewal. */
    HELD,

    /** Released by its owner. */
    RELEASED,

    /** Lost while held: do not touch the protected resource any more. */
    LOST,
}

/**
 * What a fenced write carries: the lock's fencing [token] and the grant's
 * [holder] id (0 for a bare token). Its text form is `token:holder`.
 */
data class Fence(val token: Long, val holder: Long) {
    override fun toString(): String = "$token:$holder"

    companion object {
        /** A fence of a bare token: it writes only where every stored token is older. */
        @JvmStatic
        fun bare(token: Long): Fence = Fence(token, 0)
    }
}

/** Called once when a lock is lost, with the reason. */
fun interface LostListener {
    fun onLost(reason: LossReason)
}

/**
 * A held lock (also a semaphore's permit, a reader or writer of a [RwLock],
 * and the lock behind a [Leadership]).
 *
 * Renewed in the background while held. [close] releases it, so
 * `use { }` (Kotlin) and try-with-resources (Java) free it at the end of the
 * block; in coroutines prefer the suspending [release]. A lock that is
 * garbage-collected without release stops renewing and expires at its ttl.
 *
 * Write to the protected storage only with [fencingToken] (or [fence]): a
 * holder paused past its lease is then refused instead of overwriting newer data.
 */
class Lock internal constructor(private val native: NativeLock) : AutoCloseable {
    init {
        // From now on the lock is the caller's: a handle dropped before this
        // line (a cancelled wait) is released by the native side.
        native.claim()
    }

    /** The resource (or semaphore, read-write lock, election) name. */
    val resource: String = native.resource()

    /** The fencing token: strictly greater than that of every earlier holder of this resource. */
    val fencingToken: Long = native.fencingToken().toLong()

    /** This grant's id, which fenced writes carry beside the token. */
    val holderId: Long = native.holder().toLong()

    /** The token with this grant's id, for [Client.fencedSet]. */
    val fence: Fence get() = Fence(fencingToken, holderId)

    /** For a semaphore's permit: which permit, from 0; `null` otherwise. */
    val permit: Int? = native.permit()?.toInt()

    /** True while held and its validity (on the local monotonic clock) has not run out. */
    val isHeld: Boolean get() = native.isHeld()

    /** How long it stays valid without another renewal; zero when not held. */
    val remaining: Duration get() = native.remaining()

    /** How many times it was renewed. */
    val renewals: Int get() = native.renewals().toInt()

    /** Where it stands. */
    val status: LockStatus
        get() = when (native.status().state) {
            "held" -> LockStatus.HELD
            "lost" -> LockStatus.LOST
            else -> LockStatus.RELEASED
        }

    /** Why it was lost, or `null` while held or after release. */
    val lossReason: LossReason? get() = native.status().reason?.let(LossReason::fromName)

    @Volatile
    private var closed = false

    private val lostState: Lazy<LostState> = lazy(LazyThreadSafetyMode.SYNCHRONIZED) { watchLoss() }

    /**
     * Completes with the reason when the lock is lost; never after a clean
     * release. Its callbacks run on a fencelock thread: keep them short.
     */
    val lost: CompletableFuture<LossReason> get() = lostState.value.future

    /** Calls [listener] once if the lock is lost (at once if it already was). Returns this lock. */
    fun onLost(listener: LostListener): Lock {
        lost.thenAccept { listener.onLost(it) }
        return this
    }

    /** Suspends until the lock is lost, with the reason (never returns after a clean release). */
    suspend fun awaitLost(): LossReason = lost.await()

    /**
     * Sets the ttl to [ttl] from now on a majority of nodes (never re-creating
     * a missing key); later renewals use it. Throws [LockLostException] if the
     * lock is gone, [NotHeldException] after release, [InvalidArgumentException]
     * for a ttl out of range.
     */
    suspend fun extend(ttl: Duration) {
        checkExtend(ttl)
        translating { native.extend(ttl) }
    }

    /** [extend] as a `CompletableFuture` (argument errors are thrown at once). */
    fun extendAsync(ttl: Duration): CompletableFuture<Unit> {
        checkExtend(ttl)
        return futureOf { translating { native.extend(ttl) } }
    }

    /** [extend], blocking the calling thread. */
    fun extendBlocking(ttl: Duration) = blocking { extend(ttl) }

    private fun checkExtend(ttl: Duration) {
        nonNegative("ttl", ttl)
        translating { native.checkExtend(ttl) }
    }

    /**
     * Releases the lock on every node and stops renewing. Throws
     * [NotHeldException] if it had expired, been lost or been released.
     *
     * Not cancellable (a clean-up step, bounded by the node timeouts): it
     * also runs in the `finally` of a cancelled coroutine.
     */
    suspend fun release() {
        closed = true
        try {
            withContext(NonCancellable) { translating { native.release() } }
        } finally {
            settleLostWatch()
        }
    }

    /** [release] as a `CompletableFuture`. */
    fun releaseAsync(): CompletableFuture<Unit> = futureOf { release() }

    /**
     * Releases the lock (blocking): the end of `use { }` or try-with-resources.
     * A second call does nothing; a lock lost before it throws [NotHeldException]
     * (which try-with-resources adds as suppressed when the block threw).
     * It releases even on a thread whose interrupt flag is set (shutdown code
     * often sets it again after catching an interrupt), and sets the flag
     * again after.
     */
    override fun close() {
        if (closed) return
        // runBlocking would throw at once on a flagged thread, before the
        // release ever started: the lock would stay held.
        val interrupted = Thread.interrupted()
        try {
            blocking { release() }
        } finally {
            if (interrupted) Thread.currentThread().interrupt()
        }
    }

    /** After release: a lost lock's future gets its reason; a watch still waiting is stopped. */
    private fun settleLostWatch() {
        if (!lostState.isInitialized()) return
        val state = lostState.value
        lossReason?.let { state.future.complete(it) }
        state.job?.cancel()
    }

    private fun watchLoss(): LostState {
        val future = CompletableFuture<LossReason>()
        lossReason?.let {
            future.complete(it)
            return LostState(future, null)
        }
        if (closed || status == LockStatus.RELEASED) return LostState(future, null)
        // The watch holds the lock's state, not the lock, and the coroutine
        // holds the watch and the future, not this object: a Lock nobody
        // references is still collected, which stops its renewals.
        val watch = native.lostWatch()
        val job = fencelockScope.launch {
            watch.use { w ->
                val name = w.wait()
                if (name != null) future.complete(LossReason.fromName(name) ?: LossReason.DELETED)
            }
        }
        cleaner.register(this) { job.cancel() }
        return LostState(future, job)
    }

    override fun toString(): String = "Lock(resource=$resource, fencingToken=$fencingToken, status=$status)"

    private class LostState(val future: CompletableFuture<LossReason>, val job: Job?)

    private companion object {
        val cleaner: Cleaner = Cleaner.create()
    }
}

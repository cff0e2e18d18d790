package dev.fencelock

import dev.fencelock.ffi.NativeObservation
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.flow
import java.util.concurrent.CompletableFuture

/**
 * Leadership won by [Client.campaign]: held like a [Lock] on the election's
 * name, renewed while held and lost the way a lock is lost. [resign] (or
 * [close]) hands over at once.
 */
class Leadership internal constructor(
    /** The lock behind the leadership. */
    val lock: Lock,
    private val announced: ByteArray,
) : AutoCloseable {
    /** The election's name. */
    val name: String get() = lock.resource

    /** This leader's epoch: its fencing token, greater than every earlier leader's. */
    val epoch: Long get() = lock.fencingToken

    /** The epoch with this grant's holder id, for fenced writes. */
    val fence: Fence get() = lock.fence

    /** The value announced to observers. */
    val value: ByteArray get() = announced.copyOf()

    /** Whether this is still the leader, as far as this process can know. */
    val isLeader: Boolean get() = lock.isHeld

    /** Completes with the reason when leadership is lost (never after [resign]). */
    val lost: CompletableFuture<LossReason> get() = lock.lost

    /** Calls [listener] once if leadership is lost. */
    fun onLost(listener: LostListener): Leadership {
        lock.onLost(listener)
        return this
    }

    /** Gives up leadership at once; the next candidate wins. [NotHeldException] if it was already lost. */
    suspend fun resign() = lock.release()

    /** [resign] as a `CompletableFuture`. */
    fun resignAsync(): CompletableFuture<Unit> = lock.releaseAsync()

    /** Resigns (blocking); a second call does nothing. */
    override fun close() = lock.close()

    override fun toString(): String = "Leadership(name=$name, epoch=$epoch, isLeader=$isLeader)"
}

/** A leader, as observers learn of it: the [value] it announced and its [epoch]. */
class Leader(val value: ByteArray, val epoch: Long) {
    override fun equals(other: Any?): Boolean = other is Leader && other.epoch == epoch && other.value.contentEquals(value)

    override fun hashCode(): Int = 31 * epoch.hashCode() + value.contentHashCode()

    override fun toString(): String = "Leader(epoch=$epoch, value=${value.size} bytes)"
}

/**
 * The leaders of one election, in increasing epochs: the current leader (if
 * any), then each new one. A consumer slower than the elections skips to the
 * latest. Close it to stop observing.
 */
class Observation internal constructor(private val native: NativeObservation) : AutoCloseable {
    /** The next leader; `null` once closed. */
    suspend fun next(): Leader? = native.next()?.let { Leader(it.value, it.epoch.toLong()) }

    /** [next] as a `CompletableFuture`. */
    fun nextAsync(): CompletableFuture<Leader?> = futureOf { next() }

    /** The leaders as a [Flow], until the observation is closed. */
    fun leaders(): Flow<Leader> = flow {
        while (true) emit(next() ?: break)
    }

    /** Whether [close] was called. */
    val isClosed: Boolean get() = native.isStopped()

    /** Stops observing; every wait, now or later, yields `null`. */
    override fun close() = native.stop()
}

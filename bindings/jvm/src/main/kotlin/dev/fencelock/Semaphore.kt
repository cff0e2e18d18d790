package dev.fencelock

import dev.fencelock.ffi.NativeLock
import dev.fencelock.ffi.NativeLockOptions
import dev.fencelock.ffi.NativeRwLock
import dev.fencelock.ffi.NativeSemaphore
import java.time.Duration
import java.util.concurrent.CompletableFuture

/**
 * A counting semaphore: at most [permits] holders at once. Each permit is a
 * [Lock] (renewed, with a lost signal and a fencing token); close it to
 * give the permit back. From [Client.semaphore].
 */
class Semaphore internal constructor(private val native: NativeSemaphore) {
    /** The semaphore's name. */
    val name: String = native.name()

    /** How many holders it admits at once. */
    val permits: Int = native.permits().toInt()

    /** Takes a permit, waiting up to [wait] (the client's default when `null`) while all are held. */
    suspend fun acquire(ttl: Duration, wait: Duration? = null): Lock = acquire(LockOptions(ttl = ttl, wait = wait))

    /** Takes a permit with [options]. */
    suspend fun acquire(options: LockOptions): Lock {
        val o = checked(options)
        return Lock(translating { native.acquire(o) })
    }

    /** [acquire] as a `CompletableFuture`. */
    @JvmOverloads
    fun acquireAsync(ttl: Duration, wait: Duration? = null): CompletableFuture<Lock> {
        val o = checked(LockOptions(ttl = ttl, wait = wait))
        return futureOf(::releaseUnclaimed) { Lock(translating { native.acquire(o) }) }
    }

    /** [acquire], blocking the calling thread. */
    @JvmOverloads
    fun acquireBlocking(ttl: Duration, wait: Duration? = null): Lock = blocking { acquire(ttl, wait) }

    /** One attempt: `null` when every permit is held. */
    suspend fun tryAcquire(ttl: Duration): Lock? {
        val o = checked(LockOptions(ttl = ttl))
        return translating { native.tryAcquire(o) }?.let(::Lock)
    }

    /** [tryAcquire] as a `CompletableFuture`. */
    fun tryAcquireAsync(ttl: Duration): CompletableFuture<Lock?> {
        val o = checked(LockOptions(ttl = ttl))
        return futureOf(::releaseUnclaimed) { translating { native.tryAcquire(o) }?.let(::Lock) }
    }

    /** [tryAcquire], blocking the calling thread. */
    fun tryAcquireBlocking(ttl: Duration): Lock? = blocking { tryAcquire(ttl) }

    /** How many permits are held now (for monitoring; may be out of date when it arrives). */
    suspend fun holders(): Int = translating { native.holders() }.toInt()

    /** [holders], blocking the calling thread. */
    fun holdersBlocking(): Int = blocking { holders() }

    private fun checked(options: LockOptions): NativeLockOptions =
        options.toNative().also { translating { native.check(it) } }

    override fun toString(): String = "Semaphore(name=$name, permits=$permits)"
}

/**
 * A read-write lock: any number of readers at once, or one writer. Each
 * grant is a [Lock]; a writer's fencing token is larger than every earlier
 * reader's and writer's. Writers are not starved. From [Client.rwLock].
 */
class RwLock internal constructor(private val native: NativeRwLock) {
    /** The lock's name. */
    val name: String = native.name()

    /** Takes it for reading, beside other readers, waiting up to [wait] while a writer holds it or waits. */
    suspend fun acquireRead(ttl: Duration, wait: Duration? = null): Lock = acquireRead(LockOptions(ttl = ttl, wait = wait))

    /** [acquireRead] with [options]. */
    suspend fun acquireRead(options: LockOptions): Lock = grant(options) { native.read(it) }

    /** Takes it for writing, alone, waiting up to [wait] while anyone else holds it. */
    suspend fun acquireWrite(ttl: Duration, wait: Duration? = null): Lock = acquireWrite(LockOptions(ttl = ttl, wait = wait))

    /** [acquireWrite] with [options]. */
    suspend fun acquireWrite(options: LockOptions): Lock = grant(options) { native.write(it) }

    /** One attempt to read: `null` when a writer holds it or waits. */
    suspend fun tryAcquireRead(ttl: Duration): Lock? {
        val o = checked(LockOptions(ttl = ttl))
        return translating { native.tryRead(o) }?.let(::Lock)
    }

    /** One attempt to write: `null` when anyone else holds it. */
    suspend fun tryAcquireWrite(ttl: Duration): Lock? {
        val o = checked(LockOptions(ttl = ttl))
        return translating { native.tryWrite(o) }?.let(::Lock)
    }

    /** [acquireRead] as a `CompletableFuture`. */
    @JvmOverloads
    fun acquireReadAsync(ttl: Duration, wait: Duration? = null): CompletableFuture<Lock> {
        val o = checked(LockOptions(ttl = ttl, wait = wait))
        return futureOf(::releaseUnclaimed) { Lock(translating { native.read(o) }) }
    }

    /** [acquireWrite] as a `CompletableFuture`. */
    @JvmOverloads
    fun acquireWriteAsync(ttl: Duration, wait: Duration? = null): CompletableFuture<Lock> {
        val o = checked(LockOptions(ttl = ttl, wait = wait))
        return futureOf(::releaseUnclaimed) { Lock(translating { native.write(o) }) }
    }

    /** [acquireRead], blocking the calling thread. */
    @JvmOverloads
    fun acquireReadBlocking(ttl: Duration, wait: Duration? = null): Lock = blocking { acquireRead(ttl, wait) }

    /** [acquireWrite], blocking the calling thread. */
    @JvmOverloads
    fun acquireWriteBlocking(ttl: Duration, wait: Duration? = null): Lock = blocking { acquireWrite(ttl, wait) }

    /** [tryAcquireRead], blocking the calling thread. */
    fun tryAcquireReadBlocking(ttl: Duration): Lock? = blocking { tryAcquireRead(ttl) }

    /** [tryAcquireWrite], blocking the calling thread. */
    fun tryAcquireWriteBlocking(ttl: Duration): Lock? = blocking { tryAcquireWrite(ttl) }

    private suspend inline fun grant(options: LockOptions, take: (NativeLockOptions) -> NativeLock): Lock {
        val o = checked(options)
        return Lock(translating { take(o) })
    }

    private fun checked(options: LockOptions): NativeLockOptions =
        options.toNative().also { translating { native.check(it) } }

    override fun toString(): String = "RwLock(name=$name)"
}

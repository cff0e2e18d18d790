package dev.fencelock

import dev.fencelock.ffi.NativeClient
import dev.fencelock.ffi.NativeNodeLockState
import java.time.Duration
import java.util.concurrent.CompletableFuture

/**
 * One node's view of a lock ([Client.inspect]): whether it is [held] there,
 * the [ttl] left, the node's [fencingCounter] (grants counted, ever) and its
 * live [waiters]; [error] when the node did not answer.
 */
data class NodeLockState(
    val node: String,
    val held: Boolean,
    val ttl: Duration?,
    val fencingCounter: Long,
    val waiters: Long,
    val error: String?,
) {
    internal companion object {
        fun of(state: NativeNodeLockState) = NodeLockState(
            node = state.node,
            held = state.held,
            ttl = state.ttl,
            fencingCounter = state.fencingCounter.toLong(),
            waiters = state.waiters.toLong(),
            error = state.error,
        )
    }
}

/** What [Client.fencedGet] reads: the value and the fencing token of the write that stored it. */
data class FencedValue(val value: String, val fencingToken: Long)

/**
 * A client of one Redis node (single-node locks), of N independent masters
 * (Redlock, decided by quorum), or of one PostgreSQL server.
 *
 * ```kotlin
 * Client(listOf("redis://127.0.0.1:6379")).use { client ->
 *     client.acquire("orders:42", ttl = Duration.ofSeconds(10), wait = Duration.ofSeconds(2)).use { lock ->
 *         client.fencedSet("orders:42:state", "paid", lock.fence)
 *     }
 * }
 * ```
 *
 * Every operation has three forms: a suspend function (`acquire`), a
 * `CompletableFuture` (`acquireAsync`) and a blocking call (`acquireBlocking`).
 * Bad arguments throw [InvalidArgumentException] at the call in each form;
 * other failures are the [FenceLockException] subclass of their kind.
 *
 * The constructor validates the configuration at once ([ConfigException]) and
 * connects in the background; operations wait for the connections. It also
 * reads the level of fencelock's logger (see [FenceLockLog]).
 */
class Client @JvmOverloads constructor(nodes: List<String>, options: ClientOptions = ClientOptions()) : AutoCloseable {
    init {
        // Before the client exists, so that its own records (a node
        // unreachable at start) follow the logger's level.
        FenceLockLog.beforeClientConnects()
    }

    private val native: NativeClient = translating { NativeClient(options.toNative(nodes)) }

    /** The nodes, as URLs without credentials. */
    val nodes: List<String> get() = native.nodes()

    /** How many nodes must agree: n/2 + 1. */
    val quorum: Int get() = native.quorum().toInt()

    /**
     * Takes the lock on [resource], waiting up to [wait] (the client's default
     * when `null`) while it is held elsewhere. Throws [LockTimeoutException]
     * when the wait passed ([NotAcquiredException] when it is zero),
     * [UnavailableException] when no quorum answered. Cancelling the coroutine
     * stops the wait and leaves nothing held.
     */
    suspend fun acquire(resource: String, ttl: Duration, wait: Duration? = null, fair: Boolean = false): Lock =
        acquire(resource, LockOptions(ttl = ttl, wait = wait, fair = fair))

    /** Takes the lock on [resource] with [options] (see the other overload). */
    suspend fun acquire(resource: String, options: LockOptions): Lock {
        val native = checked(resource, options)
        return Lock(translating { this.native.acquire(resource, native) })
    }

    /** [acquire] as a `CompletableFuture`; cancelling it stops the wait and leaves nothing held. */
    @JvmOverloads
    fun acquireAsync(resource: String, ttl: Duration, wait: Duration? = null): CompletableFuture<Lock> =
        acquireAsync(resource, LockOptions(ttl = ttl, wait = wait))

    /** [acquire] with [options] as a `CompletableFuture`. */
    fun acquireAsync(resource: String, options: LockOptions): CompletableFuture<Lock> {
        val native = checked(resource, options)
        return futureOf(::releaseUnclaimed) { Lock(translating { this.native.acquire(resource, native) }) }
    }

    /** [acquire], blocking the calling thread; an interrupt stops the wait. */
    @JvmOverloads
    fun acquireBlocking(resource: String, ttl: Duration, wait: Duration? = null): Lock =
        acquireBlocking(resource, LockOptions(ttl = ttl, wait = wait))

    /** [acquire] with [options], blocking the calling thread. */
    fun acquireBlocking(resource: String, options: LockOptions): Lock = blocking { acquire(resource, options) }

    /** One attempt: `null` when the lock is held elsewhere. */
    suspend fun tryAcquire(resource: String, ttl: Duration): Lock? = tryAcquire(resource, LockOptions(ttl = ttl))

    /** One attempt with [options] (their wait plays no part). */
    suspend fun tryAcquire(resource: String, options: LockOptions): Lock? {
        val native = checked(resource, options)
        return translating { this.native.tryAcquire(resource, native) }?.let(::Lock)
    }

    /** [tryAcquire] as a `CompletableFuture`. */
    fun tryAcquireAsync(resource: String, ttl: Duration): CompletableFuture<Lock?> =
        tryAcquireAsync(resource, LockOptions(ttl = ttl))

    /** [tryAcquire] with [options] as a `CompletableFuture`. */
    fun tryAcquireAsync(resource: String, options: LockOptions): CompletableFuture<Lock?> {
        val native = checked(resource, options)
        return futureOf(::releaseUnclaimed) { translating { this.native.tryAcquire(resource, native) }?.let(::Lock) }
    }

    /** [tryAcquire], blocking the calling thread. */
    fun tryAcquireBlocking(resource: String, ttl: Duration): Lock? = blocking { tryAcquire(resource, ttl) }

    /** [tryAcquire] with [options], blocking the calling thread. */
    fun tryAcquireBlocking(resource: String, options: LockOptions): Lock? = blocking { tryAcquire(resource, options) }

    /**
     * Runs [block] while holding the lock on [resource], then releases it
     * (suspending, unlike `use`). A release error is thrown only when the
     * block itself succeeded.
     */
    suspend fun <T> withLock(resource: String, ttl: Duration, wait: Duration? = null, block: suspend (Lock) -> T): T =
        withLock(resource, LockOptions(ttl = ttl, wait = wait), block)

    /** [withLock] with [options]. */
    suspend fun <T> withLock(resource: String, options: LockOptions, block: suspend (Lock) -> T): T {
        val lock = acquire(resource, options)
        val result = try {
            block(lock)
        } catch (e: Throwable) {
            runCatching { lock.release() }.exceptionOrNull()?.let(e::addSuppressed)
            throw e
        }
        lock.release()
        return result
    }

    /**
     * The counting semaphore [name] with [permits] permits (1 to
     * [Limits.MAX_PERMITS]); every client of it must give the same number. No I/O.
     */
    fun semaphore(name: String, permits: Int): Semaphore {
        if (permits < 1 || permits > Limits.MAX_PERMITS) {
            throw InvalidArgumentException("permits must be from 1 to ${Limits.MAX_PERMITS}, got $permits", name)
        }
        return Semaphore(translating { native.semaphore(name, permits.toUInt()) })
    }

    /** The read-write lock [name]: many readers or one writer. No I/O. */
    fun rwLock(name: String): RwLock = RwLock(translating { native.rwLock(name) })

    /**
     * Writes [value] to the Redis hash [key] on the first node only if [fence]
     * is newer than the last write's (a larger token, or the same token from
     * the same grant). Throws [StaleTokenException] otherwise: a newer holder
     * has written since.
     */
    suspend fun fencedSet(key: String, value: String, fence: Fence) {
        checkFence(fence)
        translating { native.fencedSet(key, value, fence.token.toULong(), fence.holder.toULong()) }
    }

    /** [fencedSet] with a bare token: it writes only where every stored token is older. */
    suspend fun fencedSet(key: String, value: String, token: Long) = fencedSet(key, value, Fence.bare(token))

    /** [fencedSet] as a `CompletableFuture`. */
    fun fencedSetAsync(key: String, value: String, fence: Fence): CompletableFuture<Unit> {
        checkFence(fence)
        return futureOf { fencedSet(key, value, fence) }
    }

    /** [fencedSet], blocking the calling thread. */
    fun fencedSetBlocking(key: String, value: String, fence: Fence) = blocking { fencedSet(key, value, fence) }

    /** Reads what [fencedSet] stored, or `null`. */
    suspend fun fencedGet(key: String): FencedValue? =
        translating { native.fencedGet(key) }?.let { FencedValue(it.value, it.fencingToken.toLong()) }

    /** [fencedGet] as a `CompletableFuture`. */
    fun fencedGetAsync(key: String): CompletableFuture<FencedValue?> = futureOf { fencedGet(key) }

    /** [fencedGet], blocking the calling thread. */
    fun fencedGetBlocking(key: String): FencedValue? = blocking { fencedGet(key) }

    /**
     * Campaigns to lead the election [name]: waits in line until elected (or
     * up to [wait], then [LockTimeoutException]), announces [value] to
     * observers and returns the [Leadership]. [ttl] is the leader's lease
     * (the client's default ttl when `null`).
     */
    suspend fun campaign(name: String, ttl: Duration? = null, wait: Duration? = null, value: ByteArray = ByteArray(0)): Leadership {
        checkCampaign(name, ttl, wait, value)
        return Leadership(Lock(translating { native.campaign(name, ttl, wait, value) }), value)
    }

    /** [campaign] as a `CompletableFuture`. */
    @JvmOverloads
    fun campaignAsync(name: String, ttl: Duration? = null, wait: Duration? = null, value: ByteArray = ByteArray(0)): CompletableFuture<Leadership> {
        checkCampaign(name, ttl, wait, value)
        return futureOf({ releaseUnclaimed(it.lock) }) { campaign(name, ttl, wait, value) }
    }

    private fun checkCampaign(name: String, ttl: Duration?, wait: Duration?, value: ByteArray) {
        ttl?.let { nonNegative("ttl", it) }
        wait?.let { nonNegative("wait", it) }
        translating { native.checkCampaign(name, ttl, wait, value) }
    }

    /** Follows the election [name]: the current leader, then each new one. Close it when done. */
    fun observe(name: String): Observation = Observation(translating { native.observe(name) })

    /**
     * Each node's view of the lock on [resource]: held or not, the ttl left,
     * the fencing counter and the live waiters, or the node's error. For
     * operators (`fencelock inspect` shows the same); out of date as soon as
     * it returns.
     */
    suspend fun inspect(resource: String): List<NodeLockState> =
        translating { native.inspect(resource) }.map(NodeLockState::of)

    /** [inspect] as a `CompletableFuture`. */
    fun inspectAsync(resource: String): CompletableFuture<List<NodeLockState>> = futureOf { inspect(resource) }

    /** [inspect], blocking the calling thread. */
    fun inspectBlocking(resource: String): List<NodeLockState> = blocking { inspect(resource) }

    /** What this client has counted so far. */
    fun metrics(): Metrics = Metrics.of(native.metrics())

    /**
     * Suspends until the clean-up this client runs in the background (undoing
     * cancelled acquisitions, releases on their way to slow nodes) has
     * finished: call it, under a time limit, before the process exits.
     */
    suspend fun settle() {
        undone()
        native.settle()
    }

    /** [settle], blocking the calling thread. */
    fun settleBlocking() = blocking { settle() }

    /** Refuses new operations from now on ([ClosedException]); held locks can still be released. */
    override fun close() = native.shutdown()

    override fun toString(): String = "Client(nodes=$nodes)"

    private fun checked(resource: String, options: LockOptions) = options.toNative().also {
        translating { native.checkRequest(resource, it) }
    }

    private fun checkFence(fence: Fence) {
        if (fence.token < 0) throw InvalidArgumentException("the fencing token must not be negative, got ${fence.token}")
        if (fence.holder < 0) throw InvalidArgumentException("the holder id must not be negative, got ${fence.holder}")
    }

    companion object {
        /** A builder: `Client.builder().node(url).keyPrefix("shop:").build()`. */
        @JvmStatic
        fun builder(): Builder = Builder()
    }

    /** Builds a [Client] step by step (for Java). */
    class Builder internal constructor() {
        private val nodes = mutableListOf<String>()
        private val options = ClientOptions.builder()

        fun node(url: String) = apply { nodes += url }
        fun nodes(urls: Collection<String>) = apply { nodes += urls }
        fun keyPrefix(value: String) = apply { options.keyPrefix(value) }
        fun nodeTimeout(value: Duration) = apply { options.nodeTimeout(value) }
        fun connectTimeout(value: Duration) = apply { options.connectTimeout(value) }
        fun driftFactor(value: Double) = apply { options.driftFactor(value) }
        fun retry(baseDelay: Duration, maxDelay: Duration) = apply { options.retry(baseDelay, maxDelay) }
        fun defaultTtl(value: Duration) = apply { options.defaultTtl(value) }
        fun defaultWait(value: Duration) = apply { options.defaultWait(value) }
        fun autoRenew(value: Boolean) = apply { options.autoRenew(value) }
        fun username(value: String) = apply { options.username(value) }
        fun password(value: String) = apply { options.password(value) }
        fun tlsCaPem(value: String) = apply { options.tlsCaPem(value) }
        fun tlsClientCert(certPem: String, keyPem: String) = apply { options.tlsClientCert(certPem, keyPem) }
        fun tlsMinVersion(value: String) = apply { options.tlsMinVersion(value) }
        fun allowMixedTls(value: Boolean) = apply { options.allowMixedTls(value) }
        fun requireAof(value: Boolean) = apply { options.requireAof(value) }
        fun metricsPerResource(value: Boolean) = apply { options.metricsPerResource(value) }

        /** Validates the configuration ([ConfigException]) and returns the client, connecting in the background. */
        fun build(): Client = Client(nodes.toList(), options.build())
    }
}

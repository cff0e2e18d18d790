package dev.fencelock

import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import java.util.concurrent.CompletableFuture

/**
 * Where fencelock runs the coroutines behind its `CompletableFuture`s and lost
 * signals: daemon threads ([Dispatchers.Default]), so nothing here keeps the JVM alive.
 */
internal val fencelockScope = CoroutineScope(SupervisorJob() + Dispatchers.Default)

/**
 * Runs [block] as a `CompletableFuture`. Cancelling the future cancels the
 * coroutine (an acquisition under way is undone). A result that arrives
 * after the future was cancelled goes to [unclaimed] (a lock is released).
 */
internal fun <T> futureOf(unclaimed: (T) -> Unit = {}, block: suspend () -> T): CompletableFuture<T> {
    val future = CompletableFuture<T>()
    val job = fencelockScope.launch {
        try {
            val value = block()
            if (!future.complete(value)) unclaimed(value)
        } catch (e: CancellationException) {
            future.cancel(false)
            throw e
        } catch (e: Throwable) {
            future.completeExceptionally(e)
        }
    }
    future.whenComplete { _, _ -> if (future.isCancelled) job.cancel() }
    return future
}

/** Runs [block] on this thread until it ends; an interrupt cancels it (`InterruptedException`). */
internal fun <T> blocking(block: suspend () -> T): T = runBlocking { block() }

/** Releases a lock nobody will receive, in the background. */
internal fun releaseUnclaimed(lock: Lock?) {
    if (lock != null) fencelockScope.launch { runCatching { lock.release() } }
}

package dev.fencelock

import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.Job
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.joinAll
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import java.util.concurrent.CompletableFuture
import java.util.concurrent.ConcurrentHashMap

/**
 * Where fencelock runs the coroutines behind its `CompletableFuture`s and lost
 * signals: daemon threads ([Dispatchers.Default]), so nothing here keeps the JVM alive.
 */
internal val fencelockScope = CoroutineScope(SupervisorJob() + Dispatchers.Default)

/**
 * Coroutines undoing what a cancelled future had started: the cancelled
 * coroutine itself until it has dropped its native call (which starts the
 * core's undo), and the release of a lock that came too late.
 * [Client.settle] waits for them before the core's own clean-up.
 */
private val undoing: MutableSet<Job> = ConcurrentHashMap.newKeySet()

/** Counts [job] among the undoing until it completes. */
private fun trackUndo(job: Job) {
    undoing.add(job)
    job.invokeOnCompletion { undoing.remove(job) }
}

/** Suspends until no undo is under way (one may start another: loop). */
internal suspend fun undone() {
    while (true) {
        // toTypedArray (the set's own toArray) copies whatever is there; Kotlin's
        // toList reads the size first and fails if a job leaves in between.
        val jobs = undoing.toTypedArray()
        if (jobs.isEmpty()) return
        joinAll(*jobs)
    }
}

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
    future.whenComplete { _, _ ->
        if (future.isCancelled) {
            // The future is done now; the coroutine's teardown comes later.
            trackUndo(job)
            job.cancel()
        }
    }
    return future
}

/** Runs [block] on this thread until it ends; an interrupt cancels it (`InterruptedException`). */
internal fun <T> blocking(block: suspend () -> T): T = runBlocking { block() }

/** Releases a lock nobody will receive, in the background. */
internal fun releaseUnclaimed(lock: Lock?) {
    if (lock != null) trackUndo(fencelockScope.launch { runCatching { lock.release() } })
}

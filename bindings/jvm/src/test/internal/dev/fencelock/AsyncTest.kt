package dev.fencelock

import kotlinx.coroutines.awaitCancellation
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test

/** The bookkeeping behind cancelled futures (Async.kt); no nodes needed. */
class AsyncTest {
    @Test
    fun waitingForUndosNeverFailsWhileTheyFinish() = runBlocking<Unit> {
        // Each cancelled future's coroutine is an undo that ends on another
        // thread at about the time undone() looks at the set: the set can
        // shrink between any two of its reads.
        repeat(20_000) {
            val future = futureOf<Unit> { awaitCancellation() }
            assertTrue(future.cancel(true))
            withTimeout(5_000) { undone() }
        }
    }
}

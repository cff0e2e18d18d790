using System;
using System.Diagnostics;
using System.Threading;
using System.Threading.Tasks;

namespace FenceLock.Tests
{
    /// <summary>
    /// Calls made while the one node of <see cref="Tests.Single"/> is paused (SIGSTOP through the
    /// harness's "pause 0", undone by "resume 0"): such a call waits for the node timeout, so one
    /// that ends promptly after its token is cancelled was stopped in flight, not before it started
    /// nor at its timeout.
    /// </summary>
    internal static class PausedNode
    {
        private static readonly TimeSpan Deadline = TimeSpan.FromSeconds(10);

        /// <summary>Options under which a call on a paused node waits 5 s before it fails.</summary>
        internal static FenceLockOptions SlowTimeouts()
        {
            return new FenceLockOptions { NodeTimeout = TimeSpan.FromSeconds(5), ConnectTimeout = TimeSpan.FromSeconds(5) };
        }

        /// <summary>
        /// Starts <paramref name="call"/> with the node paused (its client made with
        /// <see cref="SlowTimeouts"/>), cancels its token 200 ms later, and checks that it was still
        /// waiting then and ended within 2 s of the cancel as a task cancelled by that token.
        /// </summary>
        internal static async Task CheckCancelledInFlight<T>(Func<CancellationToken, Task<T>> call, string what)
        {
            var nodes = Tests.Single;
            using (var cancel = new CancellationTokenSource())
            {
                Task<T> running;
                bool waited;
                TimeSpan took;
                nodes.Run("pause 0");
                try
                {
                    running = call(cancel.Token);
                    await Task.Delay(200);
                    waited = !running.IsCompleted;
                    var clock = Stopwatch.StartNew();
                    cancel.Cancel();
                    await Check.Within(running, Deadline);
                    took = clock.Elapsed;
                }
                finally
                {
                    nodes.Run("resume 0");
                }
                Check.That(waited, what + " waited for the paused node");
                var e = await Check.Throws<OperationCanceledException>(() => running, orSubclass: true);
                Check.That(running.IsCanceled && e.CancellationToken == cancel.Token,
                    what + " cancelled by the caller's token, got " + running.Status);
                Check.That(took < TimeSpan.FromSeconds(2),
                    what + " ended " + took.TotalMilliseconds + " ms after the cancel, not at the timeout");
            }
        }

        /// <summary>
        /// Runs <paramref name="call"/> with the node paused (its client with the default 100 ms node
        /// timeout) and checks that the task faults with <see cref="UnavailableException"/>.
        /// </summary>
        internal static async Task<UnavailableException> CheckUnavailable<T>(Func<Task<T>> call)
        {
            var nodes = Tests.Single;
            nodes.Run("pause 0");
            try
            {
                return await Check.Throws<UnavailableException>(() => call());
            }
            finally
            {
                nodes.Run("resume 0");
            }
        }
    }
}

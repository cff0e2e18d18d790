using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;

namespace FenceLock.Tests
{
    /// <summary>
    /// A client's metrics (<see cref="FenceLockClient.Metrics"/>), mirroring
    /// tests/c/test_metrics.c: counters that move exactly as a scripted
    /// scenario says (acquire, contend, wait, release, renew, lose, cancel),
    /// and the snapshot itself (immutable, read-only tables, buckets on the
    /// library's bounds, a disposed client). The bounds against the vectors
    /// are in SharedTables.cs.
    /// </summary>
    internal static class Metrics
    {
        private static readonly TimeSpan Deadline = TimeSpan.FromSeconds(10);

        /// <summary>Every failure count but <paramref name="kind"/>'s is zero, and that one is <paramref name="count"/>.</summary>
        private static void FailedOnly(FenceLockMetrics m, FenceLockStatus kind, long count, string when)
        {
            Check.That(m.Failed.Count >= 13, when + ": every error kind listed, got " + m.Failed.Count);
            Check.That(m.Failed.ContainsKey(FenceLockStatus.NotAcquired) && m.Failed.ContainsKey(FenceLockStatus.Cancelled)
                && !m.Failed.ContainsKey(FenceLockStatus.Ok), when + ": keyed by error kind");
            foreach (var entry in m.Failed)
                Check.Equal(entry.Key == kind ? count : 0, entry.Value, when + ": Failed[" + entry.Key + "]");
        }

        /// <summary>Every loss count but <paramref name="reason"/>'s is zero, and that one is <paramref name="count"/>.</summary>
        private static void LostOnly(FenceLockMetrics m, LockLossReason reason, long count, string when)
        {
            Check.Equal(4, m.Lost.Count, when + ": every loss reason listed");
            foreach (var entry in m.Lost)
                Check.Equal(entry.Key == reason ? count : 0, entry.Value, when + ": Lost[" + entry.Key + "]");
        }

        /// <summary>
        /// <paramref name="count"/> calls timed, a positive sum, cumulative
        /// buckets on the library's bounds, and quantiles that are bounds.
        /// </summary>
        private static void LatencyConsistent(FenceLockMetrics m, long count, string when)
        {
            var latency = m.AcquireLatency;
            Check.Equal(count, latency.Count, when + ": AcquireLatency.Count");
            Check.That(latency.Sum > TimeSpan.Zero, when + ": a positive Sum");
            Check.Equal(FenceLockLatency.BucketBounds.Count, latency.Buckets.Count, when + ": one bucket per bound");
            for (var i = 0; i < latency.Buckets.Count; i++)
            {
                Check.Equal(FenceLockLatency.BucketBounds[i], latency.Buckets[i].UpperBound, when + ": bound " + i);
                if (i > 0) Check.That(latency.Buckets[i].Count >= latency.Buckets[i - 1].Count, when + ": cumulative");
            }
            Check.That(latency.Buckets.Last().Count <= count, when + ": the buckets count no more than Count");
            // Every call here took well under the last bound (10 s).
            Check.That(latency.P50.HasValue && FenceLockLatency.BucketBounds.Contains(latency.P50.Value),
                when + ": P50 is a bound, got " + latency.P50);
            Check.That(latency.P99.HasValue && FenceLockLatency.BucketBounds.Contains(latency.P99.Value),
                when + ": P99 is a bound, got " + latency.P99);
            Check.That(latency.P50 <= latency.P99, when + ": P50 <= P99");
        }

        internal static async Task CountersFollowAScriptedScenario()
        {
            var nodes = Tests.Single;
            using (var a = new FenceLockClient(nodes.Urls, Tests.GenerousNodeTimeout()))
            using (var b = new FenceLockClient(nodes.Urls, Tests.GenerousNodeTimeout()))
            using (var c = new FenceLockClient(nodes.Urls, Tests.GenerousNodeTimeout()))
            {
                var resource = Tests.Unique("metrics");

                // Nothing yet: zeros, and no latency estimate.
                var m = a.Metrics;
                Check.That(m.Acquired == 0 && m.Held == 0 && m.Waiting == 0 && m.AcquireLatency.Count == 0, "zeros at first");
                Check.That(m.AcquireLatency.P50 == null && m.AcquireLatency.P99 == null, "no estimate at first");
                FailedOnly(m, FenceLockStatus.NotAcquired, 0, "at first");
                LostOnly(m, LockLossReason.Deleted, 0, "at first");

                // A takes the lock: one acquisition, one lock held, one latency sample.
                var held = await a.AcquireAsync(resource, TimeSpan.FromSeconds(10), TimeSpan.Zero);
                m = a.Metrics;
                Check.That(m.Acquired == 1 && m.Held == 1 && m.Waiting == 0 && m.Released == 0,
                    "A: acquired 1, held 1, got " + m.Acquired + ", " + m.Held);
                FailedOnly(m, FenceLockStatus.NotAcquired, 0, "A acquired");
                LatencyConsistent(m, 1, "A acquired");

                // B contends: a refused try is a failure of kind NotAcquired.
                Check.That(await b.TryAcquireAsync(resource, TimeSpan.FromSeconds(10)) == null, "B's try is refused");
                m = b.Metrics;
                Check.That(m.Acquired == 0 && m.Held == 0, "B holds nothing");
                FailedOnly(m, FenceLockStatus.NotAcquired, 1, "B refused");
                LatencyConsistent(m, 1, "B refused");

                // B waits: counted as waiting until A's release hands it the lock.
                var waiting = b.AcquireAsync(resource, TimeSpan.FromSeconds(1), TimeSpan.FromSeconds(10));
                Check.That(await Check.Eventually(() => b.Metrics.Waiting == 1, Deadline), "B counted as waiting");
                await Task.Delay(100);
                Check.That(b.Metrics.Waiting == 1 && !waiting.IsCompleted, "B still waiting");
                await held.ReleaseAsync();
                held.Dispose();
                m = a.Metrics;
                Check.That(m.Released == 1 && m.Held == 0 && m.Acquired == 1, "A: released 1, held 0");
                var handle = await waiting;
                m = b.Metrics;
                Check.That(m.Acquired == 1 && m.Waiting == 0 && m.Held == 1,
                    "B: acquired 1, waiting 0, held 1, got " + m.Acquired + ", " + m.Waiting + ", " + m.Held);
                FailedOnly(m, FenceLockStatus.NotAcquired, 1, "B acquired");
                LatencyConsistent(m, 2, "B acquired");

                // B's 1 s lease renews (every ttl/3; a late renewal would see it expired, not
                // deleted); then its key goes: one loss, deleted.
                Check.That(await Check.Eventually(() => b.Metrics.Renewals >= 1, Deadline), "a renewal counted");
                Check.Equal(0L, b.Metrics.RenewalFailures, "no renewal failed");
                Check.Equal("1", nodes.Call(0, "DEL fencelock:{" + resource + "}"), "DEL");
                Check.That(await Check.Eventually(() => handle.LostToken.IsCancellationRequested, Deadline), "B's lock lost");
                m = b.Metrics;
                Check.Equal(0L, m.Held, "B holds nothing after the loss");
                LostOnly(m, LockLossReason.Deleted, 1, "B lost");
                Check.Equal(0L, m.RenewalFailures, "no renewal failed");
                await Check.Throws<NotHeldException>(() => handle.ReleaseAsync());
                await handle.DisposeAsync();
                Check.Equal(0L, b.Metrics.Released, "a failed release is no release");

                // C's waiting acquire, cancelled: a failure of kind Cancelled, no longer waiting.
                var blocker = await a.AcquireAsync(resource, TimeSpan.FromSeconds(10), TimeSpan.Zero);
                using (var cancel = new CancellationTokenSource())
                {
                    var given = c.AcquireAsync(resource, TimeSpan.FromSeconds(10), TimeSpan.FromSeconds(30), cancel.Token);
                    Check.That(await Check.Eventually(() => c.Metrics.Waiting == 1, Deadline), "C counted as waiting");
                    cancel.Cancel();
                    await Check.Throws<OperationCanceledException>(() => given, orSubclass: true);
                }
                m = c.Metrics;
                Check.That(m.Waiting == 0 && m.Acquired == 0 && m.Held == 0, "C: nothing waiting, acquired or held");
                FailedOnly(m, FenceLockStatus.Cancelled, 1, "C cancelled");
                LatencyConsistent(m, 1, "C cancelled");

                // Latency counts every acquire call: A made 2, B 2, C 1.
                m = a.Metrics;
                Check.That(m.Acquired == 2 && m.Held == 1, "A: acquired 2, held 1");
                LatencyConsistent(m, 2, "A's second");
                await blocker.DisposeAsync();
                m = a.Metrics;
                Check.That(m.Released == 2 && m.Held == 0, "A: released 2, held 0");
                LostOnly(m, LockLossReason.Deleted, 0, "A at the end");
            }
        }

        internal static async Task SnapshotIsImmutableAndReadOnly()
        {
            var client = new FenceLockClient(Tests.Single.Urls, Tests.GenerousNodeTimeout());
            var before = client.Metrics;
            var handle = await client.AcquireAsync(Tests.Unique("metrics-snapshot"), TimeSpan.FromSeconds(5), TimeSpan.Zero);
            var after = client.Metrics;
            Check.That(before.Acquired == 0 && before.Held == 0 && before.AcquireLatency.Count == 0,
                "an earlier snapshot does not move");
            Check.That(after.Acquired == 1 && after.Held == 1 && after.AcquireLatency.Count == 1, "a new one does");
            Check.That(!ReferenceEquals(before, after), "each read is a new snapshot");
            var failed = before.Failed as IDictionary<FenceLockStatus, long>;
            Check.That(failed == null || failed.IsReadOnly, "Failed is read-only");
            if (failed != null)
                Check.ThrowsNow<NotSupportedException>(() => failed[FenceLockStatus.Timeout] = 5);
            var lost = before.Lost as IDictionary<LockLossReason, long>;
            Check.That(lost == null || lost.IsReadOnly, "Lost is read-only");
            Check.Equal(0L, before.Failed[FenceLockStatus.Timeout], "unchanged");
            var buckets = after.AcquireLatency.Buckets as IList<LatencyBucket>;
            Check.That(buckets == null || buckets.IsReadOnly, "Buckets is read-only");
            await handle.DisposeAsync();
            Check.Equal(1L, client.Metrics.Released, "released after DisposeAsync");
            client.Dispose();
            Check.ThrowsNow<ObjectDisposedException>(() => { var m = client.Metrics; });
        }
    }
}

using System;
using System.Linq;
using System.Text.RegularExpressions;
using System.Threading;
using System.Threading.Tasks;

namespace FenceLock.Tests
{
    /// <summary>
    /// Read-write locks: <see cref="FenceLockClient.ReaderWriterLock"/> and
    /// <see cref="FenceLockReaderWriterLock"/>, mirroring tests/c/test_rw_lock.c: readers share and a
    /// writer holds alone (one node and three), contention mixing reads and writes (one node and three),
    /// a waiting writer not overtaken by later readers, a reader's loss while another stays, waiters
    /// woken and cancelled, fair waiting, bad arguments.
    /// </summary>
    internal static class ReaderWriterLock
    {
        private static readonly TimeSpan Second = TimeSpan.FromSeconds(1);
        private static readonly TimeSpan Lease = TimeSpan.FromSeconds(5);
        private static readonly TimeSpan Deadline = TimeSpan.FromSeconds(10);

        private static string RwKey(string name, string suffix) => "fencelock:{" + name + "}:rw:" + suffix;

        /// <summary>On how many nodes <paramref name="command"/> on a read-write key answers as <paramref name="reply"/> wants.</summary>
        /// <summary>Checks that no node queues a waiter for <paramref name="name"/>: a waiter that timed
        /// out has left every queue when its call fails, so a release made next is not handed to it.</summary>
        private static void QueueIsEmpty(RedisNodes nodes, string name)
        {
            Check.Equal(nodes.Urls.Count, NodesAnswering(nodes, "ZCARD", name, "queue", r => r == "0"),
                "nodes whose queue the timed-out waiter left");
        }

        private static int NodesAnswering(RedisNodes nodes, string command, string name, string suffix, Func<string, bool> reply)
        {
            var count = 0;
            for (var i = 0; i < nodes.Urls.Count; i++)
                if (reply(nodes.Call(i, command + " " + RwKey(name, suffix)))) count++;
            return count;
        }

        /// <summary>The reader keys listed in the readers set on node <paramref name="index"/>.</summary>
        private static string[] ReaderKeys(RedisNodes nodes, int index, string name) =>
            nodes.Call(index, "SMEMBERS " + RwKey(name, "readers")).Split(new[] { ' ' }, StringSplitOptions.RemoveEmptyEntries);

        private static bool IsReaderKey(string key, string name) =>
            key.StartsWith(RwKey(name, "read:"), StringComparison.Ordinal)
            && Regex.IsMatch(key.Substring(RwKey(name, "read:").Length), "^[0-9a-f]{32}$");

        // ---- readers share, a writer holds alone ----------------------------

        internal static Task ReadersShareAndAWriterHoldsAloneOnOneNode() => ReadersShareAndAWriterHoldsAlone(Tests.Single);

        internal static Task ReadersShareAndAWriterHoldsAloneOnThreeNodes() => ReadersShareAndAWriterHoldsAlone(Tests.Trio);

        private static async Task ReadersShareAndAWriterHoldsAlone(RedisNodes nodes)
        {
            using (var client = new FenceLockClient(nodes.Urls, Tests.GenerousNodeTimeout()))
            {
                var name = Tests.Unique("rw-share");
                var rw = client.ReaderWriterLock(name);
                Check.Equal(name, rw.Name, "Name");
                var majority = nodes.Urls.Count / 2 + 1;

                var first = await rw.AcquireReadAsync(Lease, TimeSpan.Zero);
                var second = await rw.TryAcquireReadAsync(Lease);
                Check.That(second != null, "readers share");
                Check.Equal(name, first.Resource, "a grant's resource is the lock's name");
                Check.Equal(name, second.Resource, "a grant's resource is the lock's name");
                Check.That(first.Permit == null, "a grant is not a semaphore's permit");
                Check.That(first.IsHeld && second.IsHeld, "both held");
                Check.That(NodesAnswering(nodes, "SCARD", name, "readers", r => r == "2") >= majority, "two reader keys");
                Check.Equal(nodes.Urls.Count, NodesAnswering(nodes, "EXISTS", name, "write", r => r == "0"), "no write key");
                var keys = ReaderKeys(nodes, 0, name);
                Check.Equal(2, keys.Length, "the readers set lists both");
                foreach (var key in keys)
                {
                    Check.That(IsReaderKey(key, name), "a reader key: " + key);
                    var left = long.Parse(nodes.Call(0, "PTTL " + key));
                    Check.That(left > 0 && left <= 5000, "the reader's own lease: " + left);
                }

                Check.That(await rw.TryAcquireWriteAsync(Lease) == null, "no writer beside readers");
                await Check.Throws<NotAcquiredException>(() => rw.AcquireWriteAsync(Lease, TimeSpan.Zero));
                await Check.Throws<LockTimeoutException>(() => rw.AcquireWriteAsync(Lease, TimeSpan.FromMilliseconds(150)));
                QueueIsEmpty(nodes, name);
                await first.ReleaseAsync();
                await Check.Throws<NotHeldException>(() => first.ReleaseAsync());
                Check.That(await rw.TryAcquireWriteAsync(Lease) == null, "one reader left is enough to keep it out");
                await second.ReleaseAsync();
                Check.That(NodesAnswering(nodes, "SCARD", name, "readers", r => r == "0") >= majority, "no reader left");

                var writer = await rw.AcquireWriteAsync(Lease, TimeSpan.Zero);
                Check.Equal(name, writer.Resource, "the writer's resource");
                Check.That(writer.FencingToken > first.FencingToken && writer.FencingToken > second.FencingToken,
                    "the writer's token is above both readers'");
                Check.That(NodesAnswering(nodes, "EXISTS", name, "write", r => r == "1") >= majority, "the write key");
                Check.That(await rw.TryAcquireReadAsync(Lease) == null, "no reader beside a writer");
                await Check.Throws<LockTimeoutException>(() => rw.AcquireReadAsync(Lease, TimeSpan.FromMilliseconds(150)));
                QueueIsEmpty(nodes, name);
                Check.That(await rw.TryAcquireWriteAsync(Lease) == null, "no second writer");
                Check.Equal(nodes.Urls.Count, NodesAnswering(nodes, "SCARD", name, "readers", r => r == "0"), "no reader key");

                await writer.ExtendAsync(TimeSpan.FromSeconds(20));
                Check.That(NodesAnswering(nodes, "PTTL", name, "write", r => long.Parse(r) > 10000) >= majority,
                    "extend sets the write key's ttl");
                var plain = await client.AcquireAsync(name, Second, TimeSpan.Zero);
                Check.That(plain.Permit == null, "a lock of the same name is another thing (and not blocked)");
                await plain.DisposeAsync();

                await writer.DisposeAsync();
                Check.That(NodesAnswering(nodes, "EXISTS", name, "write", r => r == "0") >= majority, "the write key is gone");
                var reader = await rw.AcquireReadAsync(Lease, TimeSpan.Zero);
                Check.That(reader.FencingToken > writer.FencingToken, "the next reader's token is above the writer's");
                await reader.DisposeAsync();
                first.Dispose();
                second.Dispose();
                Check.That(rw.ToString().Contains(name), "ToString names the lock");
            }
        }

        // ---- contention: reads and writes from several clients ----------------

        internal static Task ContentionOnOneNode() => Contention(Tests.Single, 6, 10);

        internal static Task ContentionOnThreeNodes() => Contention(Tests.Trio, 5, 8);

        private static async Task Contention(RedisNodes nodes, int workers, int rounds)
        {
            var name = Tests.Unique("rw-contend");
            int readers = 0, writers = 0, peakReaders = 0, reads = 0, writes = 0;
            long maxToken = 0, maxWriterToken = 0; // tokens fit: at most 2^53 - 1
            var clients = Enumerable.Range(0, workers)
                .Select(_ => new FenceLockClient(nodes.Urls, Tests.GenerousNodeTimeout())).ToList();
            try
            {
                var tasks = clients.Select((client, worker) => Task.Run(async () =>
                {
                    var rw = client.ReaderWriterLock(name);
                    for (var round = 0; round < rounds; round++)
                    {
                        var write = (worker + round) % 4 == 0; // a quarter of the rounds write
                        if (write)
                        {
                            var grant = await rw.AcquireWriteAsync(Lease, TimeSpan.FromSeconds(60));
                            var token = (long)grant.FencingToken;
                            Check.Equal(0, Interlocked.Increment(ref writers) - 1, "one writer at a time");
                            Check.Equal(0, Volatile.Read(ref readers), "no reader beside a writer");
                            // Every grant recorded so far came before this one.
                            Check.That(token > Interlocked.Read(ref maxToken), "a writer's token is above every earlier grant's");
                            RaiseTo(ref maxWriterToken, token);
                            RaiseTo(ref maxToken, token);
                            Interlocked.Increment(ref writes);
                            await Task.Delay(1 + round % 3);
                            Interlocked.Decrement(ref writers);
                            await grant.DisposeAsync();
                        }
                        else
                        {
                            var grant = await rw.AcquireReadAsync(Lease, TimeSpan.FromSeconds(60));
                            var token = (long)grant.FencingToken;
                            var now = Interlocked.Increment(ref readers);
                            for (var seen = Volatile.Read(ref peakReaders); now > seen; seen = Volatile.Read(ref peakReaders))
                                if (Interlocked.CompareExchange(ref peakReaders, now, seen) == seen) break;
                            Check.Equal(0, Volatile.Read(ref writers), "no writer beside a reader");
                            Check.That(token > Interlocked.Read(ref maxWriterToken), "a reader's token is above every earlier writer's");
                            RaiseTo(ref maxToken, token);
                            Interlocked.Increment(ref reads);
                            await Task.Delay(3 + round % 5);
                            Interlocked.Decrement(ref readers);
                            await grant.DisposeAsync();
                        }
                    }
                })).ToArray();
                await Task.WhenAll(tasks);
            }
            finally
            {
                foreach (var client in clients) client.Dispose();
            }
            Check.Equal(workers * rounds, reads + writes, "every round got its grant");
            Check.That(writes > 0, "the workload wrote");
            Check.That(peakReaders > 1, "readers shared (not a mutex): peak " + peakReaders);
            using (var client = new FenceLockClient(nodes.Urls, Tests.GenerousNodeTimeout()))
            {
                var writer = await client.ReaderWriterLock(name).TryAcquireWriteAsync(Lease);
                Check.That(writer != null, "all released: a writer gets in at once");
                Check.That((long)writer.FencingToken > maxToken, "above every grant of the run");
                // A release answers once a majority decided; the other nodes follow.
                Check.That(await Check.Eventually(
                    () => NodesAnswering(nodes, "SCARD", name, "readers", r => r == "0") == nodes.Urls.Count,
                    TimeSpan.FromSeconds(3)), "no reader key left on any node");
                await writer.DisposeAsync();
            }
        }

        private static void RaiseTo(ref long slot, long value)
        {
            for (var seen = Interlocked.Read(ref slot); value > seen; seen = Interlocked.Read(ref slot))
                if (Interlocked.CompareExchange(ref slot, value, seen) == seen) break;
        }

        // ---- a waiting writer is not overtaken --------------------------------

        /// <summary>Once a writer waits, readers that ask later queue behind it: it waits only for the
        /// reader already holding.</summary>
        internal static async Task WaitingWriterIsNotOvertakenByLaterReaders()
        {
            using (var holderClient = new FenceLockClient(Tests.Single.Urls))
            using (var writerClient = new FenceLockClient(Tests.Single.Urls))
            using (var readerClient = new FenceLockClient(Tests.Single.Urls))
            {
                var name = Tests.Unique("rw-queue");
                var early = await holderClient.ReaderWriterLock(name).AcquireReadAsync(Lease, TimeSpan.Zero);
                var writing = writerClient.ReaderWriterLock(name).AcquireWriteAsync(Lease, Timeout.InfiniteTimeSpan);
                Check.That(await Check.Eventually(() => Tests.Single.Call(0, "ZCARD " + RwKey(name, "writers")) == "1", Deadline),
                    "the writer is queued");
                Check.That(!writing.IsCompleted, "the writer waits for the reader");

                var rw = readerClient.ReaderWriterLock(name);
                Check.That(await rw.TryAcquireReadAsync(Lease) == null, "a later reader is refused: a writer waits ahead");
                await Check.Throws<LockTimeoutException>(() => rw.AcquireReadAsync(Lease, TimeSpan.FromMilliseconds(150)));
                var late = rw.AcquireReadAsync(Lease, Timeout.InfiniteTimeSpan);
                await Task.Delay(200);
                Check.That(!late.IsCompleted && !writing.IsCompleted, "both wait");

                await early.DisposeAsync();
                Check.That(await Check.Within(writing, TimeSpan.FromSeconds(2)), "the writer goes first");
                var writer = await writing;
                Check.That(writer.FencingToken > early.FencingToken, "with a larger token");
                await Task.Delay(200);
                Check.That(!late.IsCompleted, "the late reader still waits");

                await writer.DisposeAsync();
                Check.That(await Check.Within(late, TimeSpan.FromSeconds(2)), "woken by the writer's release");
                var reader = await late;
                Check.That(reader.FencingToken > writer.FencingToken, "its token is above the writer's");
                await reader.DisposeAsync();
            }
        }

        // ---- a reader's loss ------------------------------------------------

        internal static async Task ReaderLostWhileAnotherStays()
        {
            using (var client = new FenceLockClient(Tests.Single.Urls))
            {
                var name = Tests.Unique("rw-lost");
                var rw = client.ReaderWriterLock(name);
                var lease = TimeSpan.FromMilliseconds(600);
                var doomed = await rw.AcquireReadAsync(lease, TimeSpan.Zero);
                var doomedKey = ReaderKeys(Tests.Single, 0, name).Single();
                var kept = await rw.AcquireReadAsync(lease, TimeSpan.Zero);
                var keptKey = ReaderKeys(Tests.Single, 0, name).Single(k => k != doomedKey);
                Check.That(IsReaderKey(doomedKey, name) && IsReaderKey(keptKey, name), "reader keys");
                await Task.Delay(1000);
                Check.That(doomed.IsHeld && kept.IsHeld, "renewed past their ttl");

                var lost = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
                doomed.LostToken.Register(() => lost.TrySetResult(true));
                Check.Equal("1", Tests.Single.Call(0, "DEL " + doomedKey), "DEL");
                Check.That(await Check.Within(lost.Task, Deadline), "LostToken cancelled");
                Check.Equal((LockLossReason?)LockLossReason.Deleted, doomed.LossReason, "LossReason");
                Check.That(!doomed.IsHeld, "no longer held");
                await Check.Throws<NotHeldException>(() => doomed.ReleaseAsync());
                Check.That(kept.IsHeld && !kept.LostToken.IsCancellationRequested, "the other reader is untouched");
                Check.Equal("1", Tests.Single.Call(0, "EXISTS " + keptKey), "its key is still there");
                Check.That(await rw.TryAcquireWriteAsync(Lease) == null, "a reader still holds: no writer");

                var keptLost = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
                kept.LostToken.Register(() => keptLost.TrySetResult(true));
                Check.Equal("1", Tests.Single.Call(0, "DEL " + keptKey), "DEL");
                Check.That(await Check.Within(keptLost.Task, Deadline), "the other's LostToken cancelled");
                var writer = await rw.TryAcquireWriteAsync(Lease);
                Check.That(writer != null, "no reader left: a writer gets in");
                Check.That(writer.FencingToken > kept.FencingToken, "with a larger token");
                await writer.DisposeAsync();
                doomed.Dispose();
                kept.Dispose();
            }
        }

        // ---- waiting --------------------------------------------------------

        internal static async Task WaitersWokenAndCancelled()
        {
            using (var first = new FenceLockClient(Tests.Single.Urls))
            using (var second = new FenceLockClient(Tests.Single.Urls))
            {
                var name = Tests.Unique("rw-wait");
                var rw1 = first.ReaderWriterLock(name);
                var rw2 = second.ReaderWriterLock(name);
                var writer = await rw1.AcquireWriteAsync(Lease, TimeSpan.Zero);
                await Check.Throws<NotAcquiredException>(() => rw2.AcquireReadAsync(Lease, TimeSpan.Zero));

                // Cancelled waiters, a reader and a writer: the tasks are cancelled.
                using (var cancel = new CancellationTokenSource())
                {
                    var cancelledRead = rw2.AcquireReadAsync(Lease, Timeout.InfiniteTimeSpan, cancel.Token);
                    var cancelledWrite = rw2.AcquireWriteAsync(Lease, Timeout.InfiniteTimeSpan, cancel.Token);
                    Check.That(await Check.Eventually(() => Tests.Single.Call(0, "ZCARD " + RwKey(name, "writers")) == "1", Deadline),
                        "the writer is in line");
                    Check.That(!cancelledRead.IsCompleted && !cancelledWrite.IsCompleted, "still waiting");
                    cancel.Cancel();
                    await Check.Throws<OperationCanceledException>(() => cancelledRead, orSubclass: true);
                    await Check.Throws<OperationCanceledException>(() => cancelledWrite, orSubclass: true);
                    Check.That(cancelledRead.IsCanceled && cancelledWrite.IsCanceled, "the tasks are cancelled");
                }

                // Two readers waiting are both woken by the writer's release (the cancelled writer is not ahead).
                var readerA = rw2.AcquireReadAsync(Lease, Timeout.InfiniteTimeSpan);
                var readerB = rw1.AcquireReadAsync(Lease, Timeout.InfiniteTimeSpan);
                await Task.Delay(200);
                Check.That(!readerA.IsCompleted && !readerB.IsCompleted, "readers wait while written");
                await writer.DisposeAsync();
                Check.That(await Check.Within(Task.WhenAll(readerA, readerB), TimeSpan.FromSeconds(2)), "both woken");
                var a = await readerA;
                var b = await readerB;
                Check.That(a.IsHeld && b.IsHeld, "together");
                Check.That(a.FencingToken > writer.FencingToken && b.FencingToken > writer.FencingToken, "above the writer's token");

                // A writer waits for both readers, and is woken by the last one's release.
                var lastWriter = rw1.AcquireWriteAsync(Lease, Timeout.InfiniteTimeSpan);
                await Task.Delay(200);
                Check.That(!lastWriter.IsCompleted, "waits for the readers");
                await a.DisposeAsync();
                await Task.Delay(200);
                Check.That(!lastWriter.IsCompleted, "one reader still in");
                await b.DisposeAsync();
                Check.That(await Check.Within(lastWriter, TimeSpan.FromSeconds(2)), "woken by the last reader's release");
                var last = await lastWriter;
                Check.That(last.FencingToken > a.FencingToken && last.FencingToken > b.FencingToken, "above the readers' tokens");
                await last.DisposeAsync();
            }
        }

        /// <summary>With a live waiter first in the lock's line, fair reads and writes are refused though
        /// nothing holds; without Fair both go in.</summary>
        internal static async Task FairOptionReachesTheReadWriteQueue()
        {
            using (var client = new FenceLockClient(Tests.Single.Urls))
            {
                var name = Tests.Unique("rw-fair");
                const string waiter = "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee:1";
                Tests.Single.Call(0, "ZADD " + RwKey(name, "queue") + " 1 " + waiter);
                Tests.Single.Call(0, "ZADD " + RwKey(name, "leases") + " 99999999999999 " + waiter);
                var rw = client.ReaderWriterLock(name);
                var fair = new LockOptions(Second) { Wait = TimeSpan.Zero, Fair = true };
                await Check.Throws<NotAcquiredException>(() => rw.AcquireReadAsync(fair));
                await Check.Throws<NotAcquiredException>(() => rw.AcquireWriteAsync(fair));
                Check.That(await rw.TryAcquireReadAsync(fair) == null, "a fair read try is refused");
                Check.That(await rw.TryAcquireWriteAsync(fair) == null, "a fair write try is refused");
                Check.Equal("0", Tests.Single.Call(0, "SCARD " + RwKey(name, "readers")), "no reader");
                Check.Equal("0", Tests.Single.Call(0, "EXISTS " + RwKey(name, "write")), "no writer");

                var unfair = new LockOptions(Second) { Wait = TimeSpan.Zero };
                var reader = await rw.AcquireReadAsync(unfair);
                var other = await rw.TryAcquireReadAsync(unfair);
                Check.That(other != null, "without Fair, readers go in side by side");
                await reader.DisposeAsync();
                await other.DisposeAsync();
                var writer = await rw.AcquireWriteAsync(unfair);
                await writer.DisposeAsync();
                var next = await rw.TryAcquireWriteAsync(unfair);
                Check.That(next != null && next.FencingToken > writer.FencingToken, "and a writer too");
                await next.DisposeAsync();
            }
        }

        // ---- bad arguments --------------------------------------------------

        internal static async Task BadReaderWriterLockArguments()
        {
            using (var client = new FenceLockClient(Tests.Single.Urls))
            {
                var name = Tests.Unique("rw-bad");
                Check.ThrowsNow<ArgumentNullException>(() => client.ReaderWriterLock(null));
                Check.ThrowsNow<ArgumentException>(() => client.ReaderWriterLock(""));
                Check.ThrowsNow<ArgumentException>(() => client.ReaderWriterLock("a\0b"));
                Check.ThrowsNow<ArgumentException>(() => client.ReaderWriterLock(new string('x', FenceLockLimits.MaxResourceBytes + 1)));
                var braced = client.ReaderWriterLock("}x"); // refused by libfencelock when used
                Check.ThrowsNow<ArgumentException>(() => braced.AcquireReadAsync(Second, Second));
                Check.ThrowsNow<ArgumentException>(() => braced.TryAcquireWriteAsync(Second));

                var rw = client.ReaderWriterLock(name);
                Check.ThrowsNow<ArgumentOutOfRangeException>(() => rw.AcquireReadAsync(TimeSpan.Zero, Second));
                Check.ThrowsNow<ArgumentOutOfRangeException>(() => rw.AcquireWriteAsync(TimeSpan.Zero, Second));
                Check.ThrowsNow<ArgumentOutOfRangeException>(() => rw.AcquireReadAsync(Second, TimeSpan.FromMilliseconds(-5)));
                Check.ThrowsNow<ArgumentOutOfRangeException>(() => rw.AcquireWriteAsync(Second, FenceLockLimits.MaxWait + Second));
                Check.ThrowsNow<ArgumentOutOfRangeException>(() => rw.TryAcquireReadAsync(FenceLockLimits.MaxTtl + Second));
                Check.ThrowsNow<ArgumentOutOfRangeException>(() => rw.TryAcquireWriteAsync(FenceLockLimits.MaxTtl + Second));
                Check.ThrowsNow<ArgumentNullException>(() => rw.AcquireReadAsync(null));
                Check.ThrowsNow<ArgumentNullException>(() => rw.AcquireWriteAsync(null));
                Check.ThrowsNow<ArgumentNullException>(() => rw.TryAcquireReadAsync((LockOptions)null));
                Check.ThrowsNow<ArgumentNullException>(() => rw.TryAcquireWriteAsync((LockOptions)null));
                var writer = await rw.TryAcquireWriteAsync(Second);
                Check.That(writer != null, "nothing was started: a writer gets in at once");
                await writer.DisposeAsync();
            }
            var closed = new FenceLockClient(Tests.Single.Urls);
            var kept = closed.ReaderWriterLock(Tests.Unique("rw-closed"));
            closed.Dispose();
            Check.ThrowsNow<ObjectDisposedException>(() => closed.ReaderWriterLock("x"));
            Check.ThrowsNow<ObjectDisposedException>(() => kept.AcquireReadAsync(Second, Second));
            Check.ThrowsNow<ObjectDisposedException>(() => kept.AcquireWriteAsync(new LockOptions(Second)));
            Check.ThrowsNow<ObjectDisposedException>(() => kept.TryAcquireReadAsync(new LockOptions(Second)));
            Check.ThrowsNow<ObjectDisposedException>(() => kept.TryAcquireWriteAsync(Second));
        }
    }
}

using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;

namespace FenceLock.Tests
{
    /// <summary>
    /// Counting semaphores: <see cref="FenceLockClient.Semaphore"/>, <see cref="FenceLockSemaphore"/>
    /// and <see cref="FenceLockHandle.Permit"/>, mirroring tests/c/test_semaphore.c: capacity under
    /// contention (one node and three), permit numbers and holders, clients that disagree on the
    /// number of permits, waiters woken and cancelled, fair waiting, a permit's loss, a count cancelled
    /// on a paused node, bad arguments.
    /// </summary>
    internal static class Semaphore
    {
        private static readonly TimeSpan Second = TimeSpan.FromSeconds(1);
        private static readonly TimeSpan Deadline = TimeSpan.FromSeconds(10);

        private static string PermitKey(string name, int permit) => "fencelock:{" + name + "}:sem:" + permit;

        /// <summary>On how many nodes <paramref name="command"/> on a permit's key answers <paramref name="reply"/>.</summary>
        private static int NodesAnswering(RedisNodes nodes, string command, string name, int permit, Func<string, bool> reply)
        {
            var count = 0;
            for (var i = 0; i < nodes.Urls.Count; i++)
                if (reply(nodes.Call(i, command + " " + PermitKey(name, permit)))) count++;
            return count;
        }

        // ---- capacity under contention ----------------------------------

        internal static Task CapacityUnderContentionOnOneNode() => CapacityUnderContention(Tests.Single, 6, 8);

        internal static Task CapacityUnderContentionOnThreeNodes() => CapacityUnderContention(Tests.Trio, 5, 6);

        private static async Task CapacityUnderContention(RedisNodes nodes, int workers, int rounds)
        {
            const int permits = 3;
            var name = Tests.Unique("sem-contend");
            var inside = 0;
            var peak = 0;
            var grants = 0;
            var occupied = new int[permits];
            var lastToken = new long[permits]; // tokens fit: at most 2^53 - 1
            var clients = Enumerable.Range(0, workers)
                .Select(_ => new FenceLockClient(nodes.Urls, Tests.GenerousNodeTimeout())).ToList();
            try
            {
                var tasks = clients.Select(client => Task.Run(async () =>
                {
                    var semaphore = client.Semaphore(name, permits);
                    for (var round = 0; round < rounds; round++)
                    {
                        var permit = await semaphore.AcquireAsync(TimeSpan.FromSeconds(5), TimeSpan.FromSeconds(60));
                        var now = Interlocked.Increment(ref inside);
                        for (var seen = Volatile.Read(ref peak); now > seen; seen = Volatile.Read(ref peak))
                            if (Interlocked.CompareExchange(ref peak, now, seen) == seen) break;
                        Check.That(permit.Permit.HasValue && permit.Permit.Value >= 0 && permit.Permit.Value < permits,
                            "a permit number in range, got " + permit.Permit);
                        var number = permit.Permit.Value;
                        Check.Equal(0, Interlocked.Exchange(ref occupied[number], 1), "one holder per permit number");
                        // One node: every token above every earlier one; three: per permit.
                        var last = Interlocked.Exchange(ref lastToken[number], (long)permit.FencingToken);
                        Check.That((long)permit.FencingToken > last, "permit " + number + "'s token rises");
                        Interlocked.Increment(ref grants);
                        await Task.Delay(2 + round % 4);
                        Volatile.Write(ref occupied[number], 0);
                        Interlocked.Decrement(ref inside);
                        await permit.ReleaseAsync();
                        permit.Dispose();
                    }
                })).ToArray();
                await Task.WhenAll(tasks);
            }
            finally
            {
                foreach (var client in clients) client.Dispose();
            }
            Check.Equal(workers * rounds, grants, "every round got a permit");
            Check.That(peak <= permits, "never more holders than permits: peak " + peak);
            Check.That(peak > 1, "more than one holder at once (not a mutex): peak " + peak);
            using (var client = new FenceLockClient(nodes.Urls))
                Check.Equal(0, await client.Semaphore(name, permits).HoldersAsync(), "none held at the end");
        }

        // ---- permit numbers, holders, release ----------------------------

        internal static Task PermitsAndHoldersOnOneNode() => PermitsAndHolders(Tests.Single);

        internal static Task PermitsAndHoldersOnThreeNodes() => PermitsAndHolders(Tests.Trio);

        private static async Task PermitsAndHolders(RedisNodes nodes)
        {
            using (var client = new FenceLockClient(nodes.Urls, Tests.GenerousNodeTimeout()))
            {
                var name = Tests.Unique("sem-holders");
                var semaphore = client.Semaphore(name, 3);
                Check.Equal(name, semaphore.Name, "Name");
                Check.Equal(3, semaphore.Permits, "Permits");
                Check.Equal(0, await semaphore.HoldersAsync(), "none held yet");
                var majority = nodes.Urls.Count / 2 + 1;

                var held = new List<FenceLockHandle>();
                for (var i = 0; i < 3; i++)
                {
                    var permit = await semaphore.TryAcquireAsync(TimeSpan.FromSeconds(5));
                    Check.That(permit != null, "permit " + i + " is free");
                    Check.That(permit.Permit.HasValue && permit.Permit.Value >= 0 && permit.Permit.Value < 3, "in range");
                    Check.That(held.All(h => h.Permit != permit.Permit), "a permit number no one else holds");
                    Check.Equal(name, permit.Resource, "a permit's resource is the semaphore's name");
                    Check.That(permit.IsHeld, "held");
                    if (nodes.Urls.Count == 1 && held.Count > 0)
                        Check.That(permit.FencingToken > held[held.Count - 1].FencingToken, "tokens rise on one node");
                    Check.That(NodesAnswering(nodes, "EXISTS", name, permit.Permit.Value, r => r == "1") >= majority,
                        "its own key on a majority");
                    held.Add(permit);
                    Check.Equal(i + 1, await semaphore.HoldersAsync(), "HoldersAsync after " + (i + 1));
                }
                Check.That(await semaphore.TryAcquireAsync(TimeSpan.FromSeconds(5)) == null, "full: null");
                await Check.Throws<NotAcquiredException>(() => semaphore.AcquireAsync(Second, TimeSpan.Zero));
                await Check.Throws<LockTimeoutException>(() => semaphore.AcquireAsync(Second, TimeSpan.FromMilliseconds(150)));
                // The timed-out waiter has left every queue when the call fails: a
                // release made next is not handed to it.
                var queue = "fencelock:{" + name + "}:sem:queue";
                Check.That(Enumerable.Range(0, nodes.Urls.Count).All(i => nodes.Call(i, "ZCARD " + queue) == "0"),
                    "the timed-out waiter is still in line");

                var first = held[0];
                await first.ExtendAsync(TimeSpan.FromSeconds(20));
                Check.That(NodesAnswering(nodes, "PTTL", name, first.Permit.Value, r => long.Parse(r) > 10000) >= majority,
                    "extend sets the permit key's ttl");
                await first.ReleaseAsync();
                Check.That(!first.IsHeld, "released");
                Check.That(NodesAnswering(nodes, "EXISTS", name, first.Permit.Value, r => r == "0") >= majority,
                    "the released permit's key is gone");
                Check.Equal(2, await semaphore.HoldersAsync(), "one released");
                var again = await semaphore.AcquireAsync(Second, TimeSpan.Zero);
                Check.Equal(first.Permit, again.Permit, "the freed permit is the one handed out");
                Check.That(again.FencingToken > first.FencingToken, "its next holder has a larger token");
                await first.DisposeAsync();

                var plain = await client.AcquireAsync(name, Second, TimeSpan.Zero);
                Check.That(plain.Permit == null, "a lock of the same name is not a permit (and not blocked)");
                await plain.DisposeAsync();
                Check.That(again.ToString().Contains("permit " + again.Permit), "ToString names the permit");

                await again.DisposeAsync();
                foreach (var permit in held) await permit.DisposeAsync();
                Check.Equal(0, await semaphore.HoldersAsync(), "all released");
            }
        }

        // ---- clients that disagree ----------------------------------------

        internal static async Task PermitsMustAgree()
        {
            using (var first = new FenceLockClient(Tests.Single.Urls))
            using (var second = new FenceLockClient(Tests.Single.Urls))
            {
                var name = Tests.Unique("sem-size");
                var held = await first.Semaphore(name, 2).AcquireAsync(Second, TimeSpan.Zero);
                var wrong = second.Semaphore(name, 3);
                var e = await Check.Throws<ArgumentException>(() => wrong.AcquireAsync(Second, Second));
                Check.That(e.Message.Contains("has 2 permits"), "the message names the size in use: " + e.Message);
                e = await Check.Throws<ArgumentException>(() => second.Semaphore(name, 1).TryAcquireAsync(Second));
                Check.That(e.Message.Contains("has 2 permits"), "a try too: " + e.Message);
                var agreed = await second.Semaphore(name, 2).AcquireAsync(Second, TimeSpan.Zero);
                Check.That(agreed.Permit != held.Permit, "the agreed size works, another permit");
                await agreed.DisposeAsync();
                await held.DisposeAsync();
            }
        }

        // ---- waiting -----------------------------------------------------

        internal static async Task WaiterWokenByReleaseAndCancelled()
        {
            using (var holderClient = new FenceLockClient(Tests.Single.Urls))
            using (var waiterClient = new FenceLockClient(Tests.Single.Urls))
            {
                var name = Tests.Unique("sem-wait");
                var holder = await holderClient.Semaphore(name, 1).AcquireAsync(TimeSpan.FromSeconds(5), TimeSpan.Zero);
                Check.Equal((int?)0, holder.Permit, "the only permit is number 0");
                var semaphore = waiterClient.Semaphore(name, 1);
                using (var cancel = new CancellationTokenSource())
                {
                    var cancelled = semaphore.AcquireAsync(Second, Timeout.InfiniteTimeSpan, cancel.Token);
                    await Task.Delay(100);
                    Check.That(!cancelled.IsCompleted, "still waiting");
                    cancel.Cancel();
                    await Check.Throws<OperationCanceledException>(() => cancelled, orSubclass: true);
                    Check.That(cancelled.IsCanceled, "the task is cancelled");
                }
                var waiting = semaphore.AcquireAsync(Second, Timeout.InfiniteTimeSpan);
                await Task.Delay(200);
                Check.That(!waiting.IsCompleted, "waits while the permit is held");
                await holder.DisposeAsync();
                Check.That(await Check.Within(waiting, TimeSpan.FromSeconds(2)), "woken by the release");
                var next = await waiting;
                Check.Equal((int?)0, next.Permit, "gets the released permit");
                Check.That(next.FencingToken > holder.FencingToken, "with a larger token");
                await next.DisposeAsync();
                Check.Equal(0, await semaphore.HoldersAsync(), "the cancelled waiter took nothing");
            }
        }

        /// <summary>With a live waiter first in the semaphore's line, a fair request is refused though
        /// every permit is free; one without Fair takes a permit.</summary>
        internal static async Task FairOptionReachesTheSemaphoreQueue()
        {
            using (var client = new FenceLockClient(Tests.Single.Urls))
            {
                var name = Tests.Unique("sem-fair");
                const string waiter = "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee:1";
                Tests.Single.Call(0, "ZADD fencelock:{" + name + "}:sem:queue 1 " + waiter);
                Tests.Single.Call(0, "ZADD fencelock:{" + name + "}:sem:leases 99999999999999 " + waiter);
                var semaphore = client.Semaphore(name, 2);
                var fair = new LockOptions(Second) { Wait = TimeSpan.Zero, Fair = true };
                await Check.Throws<NotAcquiredException>(() => semaphore.AcquireAsync(fair));
                Check.That(await semaphore.TryAcquireAsync(fair) == null, "a fair try is refused");
                Check.Equal(0, await semaphore.HoldersAsync(), "every permit stays free");
                var permit = await semaphore.TryAcquireAsync(new LockOptions(Second));
                Check.That(permit != null && permit.Permit.HasValue, "a default try takes a free permit");
                await permit.DisposeAsync();
            }
        }

        // ---- loss ----------------------------------------------------------

        internal static async Task PermitLostWhenItsKeyIsDeleted()
        {
            using (var client = new FenceLockClient(Tests.Single.Urls))
            {
                var name = Tests.Unique("sem-lost");
                var semaphore = client.Semaphore(name, 2);
                var lease = TimeSpan.FromMilliseconds(600);
                var doomed = await semaphore.AcquireAsync(lease, TimeSpan.Zero);
                var other = await semaphore.AcquireAsync(lease, TimeSpan.Zero);
                await Task.Delay(1000);
                Check.That(doomed.IsHeld && other.IsHeld, "renewed past their ttl");
                var lost = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
                doomed.LostToken.Register(() => lost.TrySetResult(true));
                Check.Equal("1", Tests.Single.Call(0, "DEL " + PermitKey(name, doomed.Permit.Value)), "DEL");
                Check.That(await Check.Within(lost.Task, Deadline), "LostToken cancelled");
                Check.Equal((LockLossReason?)LockLossReason.Deleted, doomed.LossReason, "LossReason");
                Check.That(!doomed.IsHeld, "no longer held");
                await Check.Throws<NotHeldException>(() => doomed.ReleaseAsync());
                Check.That(other.IsHeld && !other.LostToken.IsCancellationRequested, "the other permit is untouched");
                Check.Equal(1, await semaphore.HoldersAsync(), "one permit held");
                doomed.Dispose();
                await other.DisposeAsync();
            }
        }

        // ---- a paused node ------------------------------------------------

        /// <summary>
        /// <see cref="FenceLockSemaphore.HoldersAsync"/> on a paused node: cancelled, it ends at once as
        /// a cancelled task; left alone, it faults with <see cref="UnavailableException"/> at the node
        /// timeout. Afterwards the same semaphores count as before.
        /// </summary>
        internal static async Task HoldersCancelledInFlight()
        {
            using (var slow = new FenceLockClient(Tests.Single.Urls, PausedNode.SlowTimeouts()))
            using (var quick = new FenceLockClient(Tests.Single.Urls))
            {
                var name = Tests.Unique("sem-paused");
                var semaphore = slow.Semaphore(name, 3);
                var quickly = quick.Semaphore(name, 3);
                // A lease long enough that no renewal falls in the pause.
                var permit = await semaphore.AcquireAsync(TimeSpan.FromSeconds(30), TimeSpan.Zero);
                await PausedNode.CheckCancelledInFlight(token => semaphore.HoldersAsync(token), "HoldersAsync");
                var e = await PausedNode.CheckUnavailable(() => quickly.HoldersAsync());
                Check.Equal(FenceLockStatus.Unavailable, e.Status, "Status");

                Check.Equal(1, await semaphore.HoldersAsync(), "counted after the pause");
                Check.Equal(1, await quickly.HoldersAsync(), "by the other client too");
                var never = semaphore.HoldersAsync(new CancellationToken(true));
                Check.That(never.IsCanceled, "an already-cancelled token starts nothing");
                await permit.DisposeAsync();
                Check.Equal(0, await semaphore.HoldersAsync(), "none held at the end");
            }
        }

        // ---- bad arguments -------------------------------------------------

        internal static async Task BadSemaphoreArguments()
        {
            using (var client = new FenceLockClient(Tests.Single.Urls))
            {
                var name = Tests.Unique("sem-bad");
                Check.Equal(256, FenceLockLimits.MaxPermits, "MaxPermits");
                Check.ThrowsNow<ArgumentNullException>(() => client.Semaphore(null, 2));
                Check.ThrowsNow<ArgumentException>(() => client.Semaphore("", 2));
                Check.ThrowsNow<ArgumentException>(() => client.Semaphore("a\0b", 2));
                Check.ThrowsNow<ArgumentException>(() => client.Semaphore(new string('x', FenceLockLimits.MaxResourceBytes + 1), 2));
                foreach (var permits in new[] { 0, -1, FenceLockLimits.MaxPermits + 1, int.MinValue })
                {
                    var e = Check.ThrowsNow<ArgumentOutOfRangeException>(() => client.Semaphore(name, permits));
                    Check.Equal("permits", e.ParamName, "ParamName");
                    Check.That(e.Message.Contains(FenceLockLimits.MaxPermits.ToString()), "the message names the limit");
                }
                var semaphore = client.Semaphore(name, 2);
                Check.ThrowsNow<ArgumentOutOfRangeException>(() => semaphore.AcquireAsync(TimeSpan.Zero, Second));
                Check.ThrowsNow<ArgumentOutOfRangeException>(() => semaphore.AcquireAsync(Second, TimeSpan.FromMilliseconds(-5)));
                Check.ThrowsNow<ArgumentOutOfRangeException>(() => semaphore.TryAcquireAsync(FenceLockLimits.MaxTtl + Second));
                Check.ThrowsNow<ArgumentNullException>(() => semaphore.AcquireAsync(null));
                Check.ThrowsNow<ArgumentNullException>(() => semaphore.TryAcquireAsync((LockOptions)null));
                Check.Equal(0, await semaphore.HoldersAsync(), "nothing was started");

                // The bounds themselves are fine.
                var widest = client.Semaphore(Tests.Unique("sem-wide"), FenceLockLimits.MaxPermits);
                var permit = await widest.TryAcquireAsync(Second);
                Check.That(permit != null && permit.Permit < FenceLockLimits.MaxPermits, "a permit of the widest semaphore");
                Check.Equal(1, await widest.HoldersAsync(), "one held");
                await permit.DisposeAsync();
                var single = await client.Semaphore(name, 1).TryAcquireAsync(Second);
                Check.Equal((int?)0, single.Permit, "one permit: number 0");
                await single.DisposeAsync();
                Check.That(semaphore.ToString().Contains(name) && semaphore.ToString().Contains("2 permits"), "ToString");
            }
            var closed = new FenceLockClient(Tests.Single.Urls);
            var kept = closed.Semaphore(Tests.Unique("sem-closed"), 2);
            closed.Dispose();
            Check.ThrowsNow<ObjectDisposedException>(() => closed.Semaphore("x", 2));
            Check.ThrowsNow<ObjectDisposedException>(() => kept.AcquireAsync(Second, Second));
            Check.ThrowsNow<ObjectDisposedException>(() => kept.TryAcquireAsync(new LockOptions(Second)));
            Check.ThrowsNow<ObjectDisposedException>(() => kept.HoldersAsync());
        }
    }
}

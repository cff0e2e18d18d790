using System;
using System.Collections.Generic;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace FenceLock.Tests
{
    /// <summary>
    /// Leader election: <see cref="FenceLockClient.CampaignAsync(string, TimeSpan, TimeSpan, byte[], CancellationToken)"/>,
    /// <see cref="Leadership"/> and <see cref="FenceLockClient.ObserveAsync"/>, on one node and on three.
    /// </summary>
    internal static class Election
    {
        private static readonly TimeSpan Deadline = TimeSpan.FromSeconds(10);

        internal static Task CampaignResignAndObserveOnOneNode() => CampaignResignAndObserve(Tests.Single);

        internal static Task CampaignResignAndObserveOnThreeNodes() => CampaignResignAndObserve(Tests.Trio);

        private static async Task CampaignResignAndObserve(RedisNodes nodes)
        {
            using (var first = new FenceLockClient(nodes.Urls))
            using (var second = new FenceLockClient(nodes.Urls))
            using (var watcher = new FenceLockClient(nodes.Urls))
            {
                var name = Tests.Unique("election");
                var leaders = watcher.ObserveAsync(name).GetAsyncEnumerator();
                try
                {
                    Check.That(await Check.Eventually(() => Subscribed(nodes, name), Deadline), "the observer subscribed");
                    var leader = await first.CampaignAsync(name, TimeSpan.FromSeconds(5), TimeSpan.Zero, "host-a:1");
                    Check.That(leader.IsLeader, "leads");
                    Check.Equal(name, leader.Name, "Name");
                    Check.Equal(leader.Epoch, leader.Fence.Token, "the epoch is the fencing token");
                    Check.Equal("host-a:1", Encoding.UTF8.GetString(leader.Value), "Value");
                    // Within a second: by push (an observer's own read comes every 2 s).
                    var seen = await NextWithin(leaders, TimeSpan.FromSeconds(1));
                    Check.Equal(leader.Epoch, seen.Epoch, "the first leader's epoch");
                    Check.Equal("host-a:1", seen.ValueText, "ValueText");

                    await Check.Throws<NotAcquiredException>(() =>
                        second.CampaignAsync(name, TimeSpan.FromSeconds(5), TimeSpan.Zero, "host-b:2"));
                    var waiting = second.CampaignAsync(name, TimeSpan.FromSeconds(5), Timeout.InfiniteTimeSpan,
                        Encoding.UTF8.GetBytes("host-b:2"));
                    await Task.Delay(200);
                    Check.That(!waiting.IsCompleted, "the second candidate waits in line");
                    await leader.ResignAsync();
                    Check.That(!leader.IsLeader, "no longer leads after resigning");
                    Check.That(await Check.Within(waiting, TimeSpan.FromSeconds(2)), "the successor wins at once");
                    var successor = await waiting;
                    Check.That(successor.Epoch > leader.Epoch, "a larger epoch");
                    seen = await NextWithin(leaders, TimeSpan.FromSeconds(1));
                    Check.Equal(successor.Epoch, seen.Epoch, "the observer learns the successor");
                    Check.Equal("host-b:2", seen.ValueText, "and its value");
                    await leader.DisposeAsync(); // resigned already: disposes quietly
                    await successor.DisposeAsync();
                    Check.That(!successor.LostToken.IsCancellationRequested, "resigning is not losing");
                }
                finally
                {
                    await leaders.DisposeAsync();
                }
                Check.That(await Check.Eventually(() => !Subscribed(nodes, name), Deadline),
                    "disposing the enumerator ended its subscriptions");
            }
        }

        internal static async Task LeadershipLostWhenItsKeyIsDeleted()
        {
            using (var client = new FenceLockClient(Tests.Single.Urls))
            {
                var name = Tests.Unique("deposed");
                var leader = await client.CampaignAsync(name, TimeSpan.FromMilliseconds(300));
                var lost = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
                leader.LostToken.Register(() => lost.TrySetResult(true));
                Check.Equal("1", Tests.Single.Call(0, "DEL fencelock:{" + name + "}"), "DEL");
                Check.That(await Check.Within(lost.Task, Deadline), "LostToken cancelled");
                Check.Equal((LockLossReason?)LockLossReason.Deleted, leader.LossReason, "LossReason");
                Check.That(!leader.IsLeader, "no longer leads");
                await Check.Throws<NotHeldException>(() => leader.ResignAsync());
                leader.Dispose();
                leader.Dispose(); // twice is fine
            }
        }

        internal static async Task CancelledCampaignAndObservation()
        {
            using (var client = new FenceLockClient(Tests.Single.Urls))
            {
                var name = Tests.Unique("withdrawn");
                var leader = await client.CampaignAsync(name, TimeSpan.FromSeconds(5));
                using (var cancel = new CancellationTokenSource())
                {
                    var candidate = client.CampaignAsync(name, TimeSpan.FromSeconds(5), cancel.Token);
                    await Task.Delay(100);
                    cancel.Cancel();
                    await Check.Throws<OperationCanceledException>(() => candidate, orSubclass: true);
                    Check.That(candidate.IsCanceled, "the campaign is cancelled");
                }
                using (var cancel = new CancellationTokenSource())
                {
                    var leaders = client.ObserveAsync(name, cancel.Token).GetAsyncEnumerator();
                    Check.That(await leaders.MoveNextAsync(), "the current leader");
                    Check.Equal(leader.Epoch, leaders.Current.Epoch, "is the leader's epoch");
                    var next = leaders.MoveNextAsync().AsTask();
                    await Task.Delay(100);
                    Check.That(!next.IsCompleted, "no new leader yet");
                    cancel.Cancel();
                    await Check.Throws<OperationCanceledException>(() => next, orSubclass: true);
                    await leaders.DisposeAsync();
                    await leaders.DisposeAsync(); // twice is fine
                }
                await leader.DisposeAsync();
                // The withdrawn candidate left nothing behind: the election is free at once.
                var again = await client.CampaignAsync(name, TimeSpan.FromSeconds(5), TimeSpan.Zero, (byte[])null);
                Check.That(again.Epoch > leader.Epoch, "a new leader, a larger epoch");
                await again.DisposeAsync();
            }
        }

        internal static async Task BadCampaignArguments()
        {
            using (var client = new FenceLockClient(Tests.Single.Urls))
            {
                var name = Tests.Unique("bad-election");
                var second = TimeSpan.FromSeconds(1);
                Check.ThrowsNow<ArgumentNullException>(() => client.CampaignAsync(null, second));
                Check.ThrowsNow<ArgumentException>(() => client.CampaignAsync("", second));
                Check.ThrowsNow<ArgumentOutOfRangeException>(() => client.CampaignAsync(name, TimeSpan.Zero));
                Check.ThrowsNow<ArgumentOutOfRangeException>(() =>
                    client.CampaignAsync(name, second, TimeSpan.FromMilliseconds(-5), (byte[])null));
                var tooLong = new byte[FenceLockLimits.MaxLeaderValueBytes + 1];
                var e = Check.ThrowsNow<ArgumentOutOfRangeException>(() => client.CampaignAsync(name, second, second, tooLong));
                Check.That(e.Message.Contains(FenceLockLimits.MaxLeaderValueBytes.ToString()), "the message names the limit");
                Check.ThrowsNow<ArgumentException>(() => client.CampaignAsync(name, second, second, "\ud800"));
                Check.ThrowsNow<ArgumentNullException>(() => client.ObserveAsync(null));
                Check.ThrowsNow<ArgumentException>(() => client.ObserveAsync("a\0b"));
                // The longest value is fine, and reaches observers whole.
                var longest = new byte[FenceLockLimits.MaxLeaderValueBytes];
                longest[longest.Length - 1] = 7;
                var leader = await client.CampaignAsync(name, second, TimeSpan.Zero, longest);
                var leaders = client.ObserveAsync(name).GetAsyncEnumerator();
                Check.That(await leaders.MoveNextAsync(), "a leader");
                Check.Equal(longest.Length, leaders.Current.Value.Length, "the whole value");
                Check.Equal((byte)7, leaders.Current.Value[longest.Length - 1], "its last byte");
                await leaders.DisposeAsync();
                await leader.DisposeAsync();
            }
            var closing = new FenceLockClient(Tests.Single.Urls);
            var followed = closing.ObserveAsync(Tests.Unique("closing")).GetAsyncEnumerator();
            var pending = followed.MoveNextAsync().AsTask();
            closing.Dispose();
            Check.That(await Check.Within(pending, Deadline), "disposing the client ends a pending wait");
            Check.That(!await pending, "the enumeration ends (MoveNextAsync is false)");
            await followed.DisposeAsync();
            var closed = new FenceLockClient(Tests.Single.Urls);
            closed.Dispose();
            Check.ThrowsNow<ObjectDisposedException>(() => closed.CampaignAsync("x", TimeSpan.FromSeconds(1)));
            Check.ThrowsNow<ObjectDisposedException>(() => closed.ObserveAsync("x"));
        }

        private static bool Subscribed(RedisNodes nodes, string name)
        {
            for (var i = 0; i < nodes.Urls.Count; i++)
                if (!nodes.Call(i, "PUBSUB NUMSUB fencelock:leader:" + name).EndsWith(" 1")) return false;
            return true;
        }

        private static async Task<Leader> NextWithin(IAsyncEnumerator<Leader> leaders, TimeSpan limit)
        {
            var next = leaders.MoveNextAsync().AsTask();
            Check.That(await Check.Within(next, limit), "a leader within " + limit.TotalMilliseconds + " ms");
            Check.That(await next, "MoveNextAsync is true");
            return leaders.Current;
        }
    }
}

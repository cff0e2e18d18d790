using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;

namespace FenceLock.Tests
{
    /// <summary>
    /// <see cref="FenceLockClient.InspectAsync"/>, mirroring tests/c/test_inspect.c: each node's
    /// view of a free lock, a held one with a waiter in line, and a released one, on one node and
    /// three; a node that does not answer; a call cancelled in flight; bad arguments.
    /// </summary>
    internal static class Inspect
    {
        private static readonly TimeSpan Deadline = TimeSpan.FromSeconds(10);

        /// <summary>Polls <see cref="FenceLockClient.InspectAsync"/> until <paramref name="seen"/> holds (a grant or a
        /// release returns once a majority decided: on three nodes the last one may answer a little later).</summary>
        private static async Task<IReadOnlyList<NodeLockState>> Until(FenceLockClient client, string resource,
            Func<IReadOnlyList<NodeLockState>, bool> seen, string what)
        {
            var clock = Stopwatch.StartNew();
            while (true)
            {
                var states = await client.InspectAsync(resource);
                if (seen(states)) return states;
                Check.That(clock.Elapsed < Deadline, what + " within " + Deadline + "; last seen: "
                    + string.Join("; ", states.Select(s => s.ToString())));
                await Task.Delay(10);
            }
        }

        private static void CheckFree(IReadOnlyList<NodeLockState> states, RedisNodes nodes, bool counted)
        {
            Check.Equal(nodes.Urls.Count, states.Count, "one entry per node");
            foreach (var state in states)
            {
                Check.That(state.Error == null, "the node answered: " + state);
                Check.That(state.Node.Contains("127.0.0.1") && !state.Node.Contains("@"), "the node, without credentials: " + state.Node);
                Check.That(!state.Held && state.Ttl == null && state.Waiters == 0, "free: " + state);
                Check.That(counted ? state.FencingCounter >= 1 : state.FencingCounter == 0, "the counter: " + state);
            }
        }

        internal static Task InspectHeldReleasedAndWaitingOnOneNode() => HeldReleasedAndWaiting(Tests.Single);

        internal static Task InspectHeldReleasedAndWaitingOnThreeNodes() => HeldReleasedAndWaiting(Tests.Trio);

        private static async Task HeldReleasedAndWaiting(RedisNodes nodes)
        {
            using (var client = new FenceLockClient(nodes.Urls, Tests.GenerousNodeTimeout()))
            using (var other = new FenceLockClient(nodes.Urls, Tests.GenerousNodeTimeout()))
            {
                var resource = Tests.Unique("inspect");
                CheckFree(await client.InspectAsync(resource), nodes, false);

                var ttl = TimeSpan.FromSeconds(5);
                var holder = await client.AcquireAsync(resource, ttl, TimeSpan.Zero);
                var waiting = other.AcquireAsync(resource, ttl, TimeSpan.FromSeconds(20));
                var held = await Until(client, resource, states => states.All(s => s.Held && s.Waiters == 1),
                    "held, with the waiter in line, on every node");
                foreach (var state in held)
                {
                    Check.That(state.Error == null, "the node answered: " + state);
                    Check.That(state.Ttl.HasValue && state.Ttl.Value > TimeSpan.Zero && state.Ttl.Value <= ttl, "ttl: " + state);
                    Check.That(state.FencingCounter >= 1 && state.FencingCounter <= holder.FencingToken, "counter: " + state);
                }
                Check.Equal(holder.FencingToken, held.Max(s => s.FencingCounter), "the token is the highest counter");
                Check.That(!waiting.IsCompleted, "the waiter still waits");

                await holder.DisposeAsync();
                var next = await waiting;
                Check.That(next.FencingToken > holder.FencingToken, "the waiter's token is larger");
                var handedOn = await client.InspectAsync(resource);
                Check.That(handedOn.Count(s => s.Held) > nodes.Urls.Count / 2, "held by the waiter on a majority");
                Check.Equal(next.FencingToken, handedOn.Max(s => s.FencingCounter), "the counter follows the grant");

                await next.DisposeAsync();
                var released = await Until(client, resource, states => states.All(s => !s.Held && s.Waiters == 0),
                    "free on every node");
                CheckFree(released, nodes, true);
            }
        }

        internal static async Task InspectShowsANodeThatDoesNotAnswer()
        {
            var trio = Tests.Trio;
            using (var client = new FenceLockClient(trio.Urls, Tests.GenerousNodeTimeout()))
            {
                var resource = Tests.Unique("inspect-down");
                var holder = await client.AcquireAsync(resource, TimeSpan.FromSeconds(5), TimeSpan.Zero);
                await Until(client, resource, seen => seen.All(s => s.Held), "held on every node");
                IReadOnlyList<NodeLockState> states;
                try
                {
                    trio.Run("kill 2");
                    states = await client.InspectAsync(resource);
                }
                finally
                {
                    trio.Run("restart 2");
                }
                Check.Equal(3, states.Count, "one entry per node, the dead one too");
                Check.That(states.Take(2).All(s => s.Error == null && s.Held), "the live nodes hold it");
                var down = states[2];
                Check.That(!string.IsNullOrEmpty(down.Error), "the dead node's error: " + down);
                Check.Equal(trio.Urls[2], down.Node, "the dead node, by its URL");
                Check.That(!down.Held && down.Ttl == null && down.FencingCounter == 0 && down.Waiters == 0,
                    "nothing else said of it: " + down);
                await holder.DisposeAsync();
            }
        }

        /// <summary>With the node paused, inspect waits for the 5 s connect timeout; cancelled, it ends at once.</summary>
        internal static async Task InspectCancelledInFlight()
        {
            var nodes = Tests.Single;
            var options = new FenceLockOptions { NodeTimeout = TimeSpan.FromSeconds(5), ConnectTimeout = TimeSpan.FromSeconds(5) };
            using (var client = new FenceLockClient(nodes.Urls, options))
            using (var cancel = new CancellationTokenSource())
            {
                Task<IReadOnlyList<NodeLockState>> inspecting;
                bool waited;
                TimeSpan took;
                nodes.Run("pause 0");
                try
                {
                    inspecting = client.InspectAsync(Tests.Unique("inspect-paused"), cancel.Token);
                    await Task.Delay(200);
                    waited = !inspecting.IsCompleted;
                    var clock = Stopwatch.StartNew();
                    cancel.Cancel();
                    await Check.Within(inspecting, Deadline);
                    took = clock.Elapsed;
                }
                finally
                {
                    nodes.Run("resume 0");
                }
                Check.That(waited, "the inspection waited for the paused node");
                var e = await Check.Throws<OperationCanceledException>(() => inspecting, orSubclass: true);
                Check.That(inspecting.IsCanceled && e.CancellationToken == cancel.Token, "cancelled by the caller's token");
                Check.That(took < TimeSpan.FromSeconds(2), "ended " + took.TotalMilliseconds + " ms after the cancel, not at the timeout");

                var never = client.InspectAsync(Tests.Unique("inspect-precancelled"), new CancellationToken(true));
                Check.That(never.IsCanceled, "an already-cancelled token starts nothing");
            }
        }

        internal static async Task BadInspectArguments()
        {
            var client = new FenceLockClient(Tests.Single.Urls);
            using (client)
            {
                Check.ThrowsNow<ArgumentNullException>(() => client.InspectAsync(null));
                Check.ThrowsNow<ArgumentException>(() => client.InspectAsync(""));
                Check.ThrowsNow<ArgumentException>(() => client.InspectAsync(new string('a', 1025)));
                Check.ThrowsNow<ArgumentException>(() => client.InspectAsync("a\0b"));
                Check.ThrowsNow<ArgumentException>(() => client.InspectAsync("bad\ud800"));
                var longest = await client.InspectAsync(new string('a', 1024));
                Check.Equal(1, longest.Count, "the longest resource is inspected");
                // A rule only libfencelock checks: its INVALID_ARGUMENT becomes ArgumentException at the call.
                Check.ThrowsNow<ArgumentException>(() => client.InspectAsync("}x"));
            }
            Check.ThrowsNow<ObjectDisposedException>(() => client.InspectAsync("r"));
        }
    }
}

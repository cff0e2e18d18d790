using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using FenceLock;

namespace FenceLock.Tests
{
    /// <summary>
    /// libfencelock's log records through <see cref="FenceLockLog.Source"/>,
    /// mirroring tests/c/test_log.c: a scripted scenario on nodes of its own
    /// (an acquisition at Verbose, renewals at Verbose with id 5, an
    /// unreachable node and a loss at Warning), the switch (Warning, Off) read
    /// at client creation and by Refresh, a listener that throws, no password
    /// or lock token in any record, and the level mapping against the
    /// vectors' log_levels. Each test leaves the switch Off and its listener removed.
    /// </summary>
    internal static class Logging
    {
        private static readonly TimeSpan Deadline = TimeSpan.FromSeconds(10);
        private const string Password = "pw-SECRET-4711";

        /// <summary>One TraceEvent as a listener received it.</summary>
        private sealed class Captured
        {
            public Captured(string source, TraceEventType type, int id, string message)
            {
                Source = source;
                Type = type;
                Id = id;
                Message = message ?? "";
            }

            public string Source { get; }
            public TraceEventType Type { get; }
            public int Id { get; }
            public string Message { get; }

            public override string ToString() => Source + " " + Type + " " + Id + ": " + Message;
        }

        /// <summary>Keeps every event it is given, in order; thread-safe.</summary>
        private sealed class CapturingListener : TraceListener
        {
            private readonly object gate = new object();
            private readonly List<Captured> events = new List<Captured>();

            public override bool IsThreadSafe => true;

            public int Count
            {
                get { lock (gate) return events.Count; }
            }

            public List<Captured> Since(int mark)
            {
                lock (gate) return events.Skip(mark).ToList();
            }

            public override void TraceEvent(TraceEventCache cache, string source, TraceEventType type, int id,
                string message)
            {
                lock (gate) events.Add(new Captured(source, type, id, message));
            }

            public override void TraceEvent(TraceEventCache cache, string source, TraceEventType type, int id,
                string format, params object[] args)
            {
                TraceEvent(cache, source, type, id, args == null ? format : string.Format(format, args));
            }

            public override void Write(string message) { }

            public override void WriteLine(string message) { }
        }

        /// <summary>Throws from every event it is given, and counts them.</summary>
        private sealed class ThrowingListener : TraceListener
        {
            private int calls;

            public int Calls => Volatile.Read(ref calls);

            public override bool IsThreadSafe => true;

            public override void TraceEvent(TraceEventCache cache, string source, TraceEventType type, int id,
                string message)
            {
                Interlocked.Increment(ref calls);
                throw new InvalidOperationException("a listener that throws");
            }

            public override void Write(string message) { }

            public override void WriteLine(string message) { }
        }

        /// <summary>A record's line (message, then name=value fields) has <paramref name="name"/>=<paramref name="value"/>, whole.</summary>
        private static bool HasField(string line, string name, string value)
        {
            var pair = " " + name + "=" + value;
            for (var at = line.IndexOf(pair, StringComparison.Ordinal); at >= 0;
                 at = line.IndexOf(pair, at + 1, StringComparison.Ordinal))
            {
                var end = at + pair.Length;
                if (end == line.Length || line[end] == ' ') return true;
            }
            return false;
        }

        /// <summary>Whether the event is the record <paramref name="message"/> about <paramref name="resource"/> (any when null).</summary>
        private static bool Is(Captured e, string message, string resource)
        {
            return (e.Message == message || e.Message.StartsWith(message + " ", StringComparison.Ordinal))
                && (resource == null || HasField(e.Message, "resource", resource));
        }

        /// <summary>Polls up to <see cref="Deadline"/> for the record; null when it did not come.</summary>
        private static async Task<Captured> Find(CapturingListener listener, int mark, string message, string resource)
        {
            Captured found = null;
            await Check.Eventually(() => (found = listener.Since(mark).FirstOrDefault(e => Is(e, message, resource))) != null,
                Deadline);
            return found;
        }

        private static string Dump(IEnumerable<Captured> events) =>
            string.Join("\n      ", events.Select(e => e.ToString()));

        private static void DeleteOnMajority(RedisNodes nodes, string resource)
        {
            nodes.Call(0, "DEL fencelock:{" + resource + "}");
            nodes.Call(1, "DEL fencelock:{" + resource + "}");
        }

        /// <summary>Takes <paramref name="resource"/> and reads its random token on node 0.</summary>
        private static async Task<Tuple<FenceLockHandle, string>> Take(FenceLockClient client, RedisNodes nodes,
            string resource)
        {
            var handle = await client.AcquireAsync(resource, TimeSpan.FromSeconds(1), TimeSpan.Zero);
            var token = nodes.Call(0, "GET fencelock:{" + resource + "}");
            Check.That(token.Length == 32 && token.All(c => "0123456789abcdef".IndexOf(c) >= 0),
                "the lock token on node 0 is 32 hex digits, got " + token);
            return Tuple.Create(handle, token);
        }

        /// <summary>Deletes the lock's key on a majority and waits for its LostToken.</summary>
        private static async Task Lose(FenceLockHandle handle, RedisNodes nodes)
        {
            var lost = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
            handle.LostToken.Register(() => lost.TrySetResult(true));
            DeleteOnMajority(nodes, handle.Resource);
            Check.That(await Check.Within(lost.Task, Deadline), "lost after its key was deleted on a majority");
            await handle.DisposeAsync();
        }

        internal static async Task RecordsReachTheTraceSourceAtItsLevelWithoutSecrets()
        {
            var listener = new CapturingListener();
            var source = FenceLockLog.Source;
            Check.Equal(FenceLockLog.SourceName, source.Name, "Source.Name");
            Check.Equal("FenceLock", FenceLockLog.SourceName, "SourceName");
            source.Listeners.Add(listener);
            var tokens = new List<string>();
            try
            {
                using (var nodes = RedisNodes.Start(3))
                {
                    for (var i = 0; i < 3; i++)
                        Check.Equal("OK", nodes.Call(i, "ACL SETUSER app on >" + Password + " ~* &* +@all"), "ACL SETUSER");
                    nodes.Run("kill 2");
                    var urls = nodes.Urls.Select(url => url.Replace("redis://", "redis://app:" + Password + "@")).ToList();
                    var unreachable = nodes.Urls[2].Substring("redis://".Length);

                    // Set before the client: its creation reads the switch (no Refresh).
                    source.Switch.Level = SourceLevels.Verbose;
                    using (var client = new FenceLockClient(urls))
                    {
                        // Verbose: the acquisition (id 4), renewals (id 5), the loss (Warning).
                        var acquiredRes = Tests.Unique("log-acquired");
                        var taken = await Take(client, nodes, acquiredRes);
                        tokens.Add(taken.Item2);
                        var acquired = await Find(listener, 0, "lock acquired", acquiredRes);
                        Check.That(acquired != null, "a 'lock acquired' record:\n      " + Dump(listener.Since(0)));
                        Check.Equal(TraceEventType.Verbose, acquired.Type, "lock acquired: type");
                        Check.Equal((int)FenceLockLogLevel.Debug, acquired.Id, "lock acquired: id");
                        Check.Equal("FenceLock", acquired.Source, "lock acquired: source");
                        Check.That(HasField(acquired.Message, "fencing_token", taken.Item1.FencingToken.ToString()),
                            "the fencing token in " + acquired.Message);
                        var renewed = await Find(listener, 0, "lock renewed", acquiredRes);
                        Check.That(renewed != null && renewed.Type == TraceEventType.Verbose
                            && renewed.Id == (int)FenceLockLogLevel.Trace, "a renewal at Verbose, id 5: " + renewed);
                        var down = listener.Since(0).FirstOrDefault(e => Is(e, "node unreachable at start; will retry on use", null));
                        Check.That(down != null && down.Type == TraceEventType.Warning && down.Id == (int)FenceLockLogLevel.Warn
                            && down.Message.Contains(unreachable), "the unreachable node at Warning: " + down);
                        await Lose(taken.Item1, nodes);
                        var lost = await Find(listener, 0, "lock lost", acquiredRes);
                        Check.That(lost != null && lost.Type == TraceEventType.Warning && lost.Id == (int)FenceLockLogLevel.Warn
                            && lost.Message.Contains(" reason="), "a loss at Warning, id 2: " + lost);

                        // Warning, by Refresh: a loss still comes, the acquisition before it does not.
                        source.Switch.Level = SourceLevels.Warning;
                        FenceLockLog.Refresh();
                        // Records logged before the switch (the unreachable node's reconnects at
                        // Verbose) may still be on their way; delivered in order, they all come
                        // before a loss logged after it.
                        var fenceRes = Tests.Unique("log-switched");
                        taken = await Take(client, nodes, fenceRes);
                        tokens.Add(taken.Item2);
                        await Lose(taken.Item1, nodes);
                        Check.That(await Find(listener, 0, "lock lost", fenceRes) != null, "a loss after the switch");
                        var mark = listener.Count;
                        var warnRes = Tests.Unique("log-warn");
                        taken = await Take(client, nodes, warnRes);
                        tokens.Add(taken.Item2);
                        await Lose(taken.Item1, nodes);
                        // Delivered in order: anything the acquisition logged came before its loss.
                        Check.That(await Find(listener, mark, "lock lost", warnRes) != null, "the loss at Warning");
                        var chatty = listener.Since(mark).Where(e => e.Type != TraceEventType.Warning && e.Type != TraceEventType.Error);
                        Check.That(!chatty.Any(), "only warnings and errors at Warning:\n      " + Dump(chatty));

                        // Off, read by a new client's creation: nothing, not even a loss. Back at
                        // Warning, the next loss shows everything logged meanwhile would be here.
                        mark = listener.Count;
                        source.Switch.Level = SourceLevels.Off;
                        new FenceLockClient(nodes.Urls.Take(1)).Dispose();
                        var offRes = Tests.Unique("log-off");
                        taken = await Take(client, nodes, offRes);
                        tokens.Add(taken.Item2);
                        await Lose(taken.Item1, nodes);
                        source.Switch.Level = SourceLevels.Warning;
                        FenceLockLog.Refresh();
                        var afterOffRes = Tests.Unique("log-after-off");
                        taken = await Take(client, nodes, afterOffRes);
                        await Lose(taken.Item1, nodes);
                        Check.That(await Find(listener, mark, "lock lost", afterOffRes) != null, "the loss back at Warning");
                        var leaked = listener.Since(mark).Where(e => e.Message.Contains(offRes));
                        Check.That(!leaked.Any(), "nothing while Off:\n      " + Dump(leaked));
                    }
                }
                var all = listener.Since(0);
                Check.That(all.Count > 0, "records were captured");
                foreach (var e in all)
                {
                    Check.That(!e.Message.Contains(Password), "a password reached a record: " + e.Message);
                    foreach (var token in tokens)
                        Check.That(!e.Message.Contains(token), "a lock token reached a record: " + e.Message);
                }
            }
            finally
            {
                source.Switch.Level = SourceLevels.Off;
                FenceLockLog.Refresh();
                source.Listeners.Remove(listener);
            }
        }

        internal static async Task AThrowingListenerLosesItsRecordNotTheProcess()
        {
            var source = FenceLockLog.Source;
            var throwing = new ThrowingListener();
            var listener = new CapturingListener();
            source.Listeners.Add(throwing); // first: TraceSource stops at it
            source.Listeners.Add(listener);
            source.Switch.Level = SourceLevels.Verbose;
            try
            {
                FenceLockLog.Refresh();
                using (var client = new FenceLockClient(Tests.Single.Urls))
                {
                    var first = await client.AcquireAsync(Tests.Unique("log-throwing"), TimeSpan.FromSeconds(5), TimeSpan.Zero);
                    Check.That(await Check.Eventually(() => throwing.Calls > 0, Deadline), "the throwing listener was called");
                    await first.DisposeAsync();
                    source.Listeners.Remove(throwing);
                    var mark = listener.Count;
                    var resource = Tests.Unique("log-after-throwing");
                    var second = await client.AcquireAsync(resource, TimeSpan.FromSeconds(5), TimeSpan.Zero);
                    Check.That(await Find(listener, mark, "lock acquired", resource) != null,
                        "records still come after a listener threw");
                    await second.DisposeAsync();
                }
            }
            finally
            {
                source.Switch.Level = SourceLevels.Off;
                FenceLockLog.Refresh();
                source.Listeners.Remove(throwing);
                source.Listeners.Remove(listener);
            }
        }

        /// <summary>
        /// The vectors' log_levels are exactly <see cref="FenceLockLogLevel"/>'s
        /// members, each mapped to the documented event type; the switch's
        /// levels give the documented native thresholds.
        /// </summary>
        internal static Task LevelsAreTheVectors()
        {
            SharedTables.CheckEnum(typeof(FenceLockLogLevel), "log_levels", extra: null);
            var documented = new Dictionary<string, TraceEventType>
            {
                { "error", TraceEventType.Error },
                { "warn", TraceEventType.Warning },
                { "info", TraceEventType.Information },
                { "debug", TraceEventType.Verbose },
                { "trace", TraceEventType.Verbose },
            };
            var names = SharedTables.Entries("log_levels").Select(entry => SharedTables.Text(entry, "name")).ToList();
            Check.Equal(string.Join(",", documented.Keys.OrderBy(n => n)), string.Join(",", names.OrderBy(n => n)),
                "the mapping covers exactly the vectors' levels");
            foreach (var name in names)
            {
                var level = (FenceLockLogLevel)Enum.Parse(typeof(FenceLockLogLevel), SharedTables.Pascal(name));
                Check.Equal(documented[name], FenceLockLog.EventTypeOf(level), "EventTypeOf(" + level + ")");
            }
            Check.ThrowsNow<ArgumentOutOfRangeException>(() => FenceLockLog.EventTypeOf((FenceLockLogLevel)0));
            Check.ThrowsNow<ArgumentOutOfRangeException>(() => FenceLockLog.EventTypeOf((FenceLockLogLevel)6));

            var thresholds = new Dictionary<SourceLevels, int>
            {
                { SourceLevels.Off, 0 },
                { SourceLevels.Critical, 0 },
                { SourceLevels.ActivityTracing, 0 },
                { SourceLevels.Error, 1 },
                { SourceLevels.Warning, 2 },
                { SourceLevels.Information, 3 },
                { SourceLevels.Verbose, 5 },
                { SourceLevels.All, 5 },
            };
            foreach (var pair in thresholds)
                Check.Equal(pair.Value, FenceLockLog.ThresholdOf(new SourceSwitch("test") { Level = pair.Key }),
                    "the native threshold of SourceLevels." + pair.Key);
            return Task.CompletedTask;
        }
    }
}

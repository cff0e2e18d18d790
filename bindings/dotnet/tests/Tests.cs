using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Reflection;
using System.Text.RegularExpressions;
using System.Threading;
using System.Threading.Tasks;

namespace FenceLock.Tests
{
    /// <summary>
    /// Tests of the .NET binding against real redis-server nodes started by
    /// the shared harness. Prints one line per test and "N passed, N failed"
    /// (then ", N skipped" if a test could not run here, e.g. the PostgreSQL
    /// ones without PostgreSQL); exits 1 on any failure.
    ///
    ///   Tests.exe                          run every test ($FENCELOCK_DOTNET_TEST filters by name)
    ///   Tests.exe hold URL RESOURCE MS     helper process: take the lock, print
    ///                                      "token N", hold it MS ms, release
    /// </summary>
    internal static class Tests
    {
        private static readonly TimeSpan Second = TimeSpan.FromSeconds(1);
        private static readonly TimeSpan Deadline = TimeSpan.FromSeconds(10); // for things that must happen
        private static RedisNodes single;
        private static RedisNodes trio;

        /// <summary>The one-node set every test file shares.</summary>
        internal static RedisNodes Single => single;

        /// <summary>The three-node (Redlock) set every test file shares.</summary>
        internal static RedisNodes Trio => trio;

        private static int Main(string[] args)
        {
            if (args.Length == 4 && args[0] == "hold")
                return Hold(args[1], args[2], int.Parse(args[3])).GetAwaiter().GetResult();
            return RunAll().GetAwaiter().GetResult();
        }

        private static readonly Func<Task>[] All =
        {
            NativeVersionIsLoaded,
            AcquireExtendRelease,
            LockOptionsReachTheLock,
            FairOptionReachesTheQueue,
            ContinuationsRunOnThreadPool,
            FencingTokensIncrease,
            ContentionInOneProcess,
            ContentionAcrossProcesses,
            ConcurrentWaitersEachGetTheLock,
            LostTokenCancelledWhenKeyDeleted,
            DisposeTwiceAndUseAfterDispose,
            DisposeReleasesWithoutBlocking,
            LockOutlivesItsClient,
            ForgottenHandleStopsRenewing,
            CancelWaitingAcquire,
            OptionsReachTheNativeClient,
            TlsMinVersionOption,
            BadClientArguments,
            BadLockArguments,
            StaleFencedWriteIsRefused,
            FencedGetCancelledInFlight,
            RedlockSurvivesOneNodeKilled,
            ProtocolVectors,
            Inspect.InspectHeldReleasedAndWaitingOnOneNode,
            Inspect.InspectHeldReleasedAndWaitingOnThreeNodes,
            Inspect.InspectShowsANodeThatDoesNotAnswer,
            Inspect.InspectCancelledInFlight,
            Inspect.BadInspectArguments,
            Election.CampaignResignAndObserveOnOneNode,
            Election.CampaignResignAndObserveOnThreeNodes,
            Election.LeadershipLostWhenItsKeyIsDeleted,
            Election.CancelledCampaignAndObservation,
            Election.BadCampaignArguments,
            Semaphore.CapacityUnderContentionOnOneNode,
            Semaphore.CapacityUnderContentionOnThreeNodes,
            Semaphore.PermitsAndHoldersOnOneNode,
            Semaphore.PermitsAndHoldersOnThreeNodes,
            Semaphore.PermitsMustAgree,
            Semaphore.WaiterWokenByReleaseAndCancelled,
            Semaphore.FairOptionReachesTheSemaphoreQueue,
            Semaphore.PermitLostWhenItsKeyIsDeleted,
            Semaphore.HoldersCancelledInFlight,
            Semaphore.BadSemaphoreArguments,
            ReaderWriterLock.ReadersShareAndAWriterHoldsAloneOnOneNode,
            ReaderWriterLock.ReadersShareAndAWriterHoldsAloneOnThreeNodes,
            ReaderWriterLock.ContentionOnOneNode,
            ReaderWriterLock.ContentionOnThreeNodes,
            ReaderWriterLock.WaitingWriterIsNotOvertakenByLaterReaders,
            ReaderWriterLock.ReaderLostWhileAnotherStays,
            ReaderWriterLock.WaitersWokenAndCancelled,
            ReaderWriterLock.FairOptionReachesTheReadWriteQueue,
            ReaderWriterLock.BadReaderWriterLockArguments,
            Metrics.CountersFollowAScriptedScenario,
            Metrics.SnapshotIsImmutableAndReadOnly,
            Logging.RecordsReachTheTraceSourceAtItsLevelWithoutSecrets,
            Logging.AThrowingListenerLosesItsRecordNotTheProcess,
            Logging.LevelsAreTheVectors,
            SharedTables.ErrorKindsAreTheVectors,
            SharedTables.LossReasonsAndOutcomesAreTheVectors,
            SharedTables.LimitsAreTheVectors,
            SharedTables.MetricsAreTheVectors,
            Postgres.AcquireRefuseExtendReleaseOnPostgres,
            Postgres.WaiterServedAfterReleaseOnPostgres,
            Postgres.StaleFencedWriteIsRefusedOnPostgres,
            Postgres.LostTokenCancelledWhenThePostgresLeaseRowIsDeleted,
            Postgres.PostgresBesideRedisIsAConfigErrorWithoutThePassword,
        };

        private static async Task<int> RunAll()
        {
            var only = Environment.GetEnvironmentVariable("FENCELOCK_DOTNET_TEST");
            int passed = 0, failed = 0, skipped = 0;
            using (single = RedisNodes.Start(1))
            using (trio = RedisNodes.Start(3))
            {
                foreach (var test in All)
                {
                    var name = test.Method.Name;
                    if (!string.IsNullOrEmpty(only) && !name.Contains(only)) continue;
                    var error = await Run(test);
                    if (error != null && error.StartsWith(SkipPrefix, StringComparison.Ordinal))
                    {
                        Console.WriteLine("skip " + name + ": " + error.Substring(SkipPrefix.Length));
                        skipped++;
                        continue;
                    }
                    Console.WriteLine((error == null ? "ok   " : "FAIL ") + name);
                    if (error != null) Console.WriteLine("    " + error);
                    if (error == null) passed++; else failed++;
                }
                Postgres.Stop();
            }
            Console.WriteLine(passed + " passed, " + failed + " failed" + (skipped > 0 ? ", " + skipped + " skipped" : ""));
            return failed == 0 ? 0 : 1;
        }

        /// <summary>How <see cref="Run"/> marks the reason of a skipped test.</summary>
        private const string SkipPrefix = "skip: ";

        /// <summary>Null if <paramref name="test"/> passed, else why it failed (or <see cref="SkipPrefix"/> and why it was skipped).</summary>
        private static async Task<string> Run(Func<Task> test)
        {
            try
            {
                // A hung test must fail, not hang the run.
                var run = Task.Run(test);
                if (!await Check.Within(run, TimeSpan.FromSeconds(60))) return "did not finish within 60 s";
                await run;
                return null;
            }
            catch (CheckFailedException e)
            {
                return e.Message;
            }
            catch (SkippedException e)
            {
                return SkipPrefix + e.Message;
            }
            catch (Exception e)
            {
                return "unexpected " + e;
            }
        }

        // ---- helpers -----------------------------------------------------

        /// <summary>A resource no other test (or earlier run) uses.</summary>
        internal static string Unique(string name)
        {
            return "dotnet-" + name + "-" + Process.GetCurrentProcess().Id + "-" + DateTime.UtcNow.Ticks;
        }

        private static string Exists(RedisNodes nodes, int index, string resource, string prefix = "fencelock:")
        {
            return nodes.Call(index, "EXISTS " + prefix + "{" + resource + "}");
        }

        // ---- tests -------------------------------------------------------

        private static Task NativeVersionIsLoaded()
        {
            Check.That(Regex.IsMatch(FenceLockClient.NativeVersion, @"^\d+\.\d+\.\d+$"), "version is MAJOR.MINOR.PATCH");
            return Task.CompletedTask;
        }

        private static async Task AcquireExtendRelease()
        {
            using (var client = new FenceLockClient(single.Urls))
            {
                var resource = Unique("basic");
                var handle = await client.AcquireAsync(resource, Second, TimeSpan.Zero);
                Check.Equal(resource, handle.Resource, "Resource");
                Check.That(handle.FencingToken > 0, "token > 0");
                Check.That(handle.IsHeld, "held");
                var remaining = handle.Remaining;
                Check.That(remaining > TimeSpan.Zero && remaining <= Second, "0 < Remaining <= ttl");
                Check.Equal("1", Exists(single, 0, resource), "key exists");

                await handle.ExtendAsync(TimeSpan.FromSeconds(5));
                Check.That(handle.Remaining > remaining, "extended");
                Check.That(long.Parse(single.Call(0, "PTTL fencelock:{" + resource + "}")) > 1000, "PTTL after extend");

                await handle.ReleaseAsync();
                Check.That(!handle.IsHeld, "not held after release");
                Check.Equal("0", Exists(single, 0, resource), "key deleted");
                Check.That(!handle.LostToken.IsCancellationRequested, "a release is not a loss");

                var again = await Check.Throws<NotHeldException>(() => handle.ReleaseAsync());
                Check.Equal(FenceLockStatus.NotHeld, again.Status, "Status");
                Check.That(again.Message.Contains(resource), "message names the resource");
                await Check.Throws<NotHeldException>(() => handle.ExtendAsync(Second));
                await handle.DisposeAsync();
            }
        }

        /// <summary>With a live waiter first in line, a fair acquire is refused though the lock is free;
        /// one without Fair takes it.</summary>
        private static async Task FairOptionReachesTheQueue()
        {
            using (var client = new FenceLockClient(single.Urls))
            {
                var resource = Unique("fair");
                // A waiter with a long lease, as a live waiter between two attempts looks.
                const string waiter = "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee:1";
                single.Call(0, "ZADD fencelock:{" + resource + "}:queue 1 " + waiter);
                single.Call(0, "ZADD fencelock:{" + resource + "}:leases 99999999999999 " + waiter);
                var fair = new LockOptions(Second) { Wait = TimeSpan.Zero, Fair = true };
                await Check.Throws<NotAcquiredException>(() => client.AcquireAsync(resource, fair));
                Check.That(await client.TryAcquireAsync(resource, fair) == null, "a fair try is refused");
                Check.Equal("0", Exists(single, 0, resource), "the lock stays free");
                var handle = await client.TryAcquireAsync(resource, new LockOptions(Second));
                Check.That(handle != null, "a default try takes the free lock");
                await handle.DisposeAsync();
            }
        }

        /// <summary>Auto-renew off, a renewal cap and a hold cap each let a 300 ms lease end; defaults keep renewing.</summary>
        private static async Task LockOptionsReachTheLock()
        {
            using (var client = new FenceLockClient(single.Urls))
            {
                var lease = TimeSpan.FromMilliseconds(300);
                // The renewed lock's lease is 1 s: a renewal late on a busy machine
                // would end a 300 ms one.
                var renewed = await client.AcquireAsync(Unique("opts-default"), new LockOptions(TimeSpan.FromSeconds(1)));
                var ended = new[]
                {
                    await client.AcquireAsync(Unique("opts-fixed"), new LockOptions(lease) { AutoRenew = false }),
                    await client.AcquireAsync(Unique("opts-renewals"), new LockOptions(lease) { MaxRenewals = 1 }),
                    await client.AcquireAsync(Unique("opts-hold"),
                        new LockOptions(lease) { MaxHold = TimeSpan.FromMilliseconds(400) }),
                };
                await Task.Delay(1500);
                Check.That(renewed.IsHeld, "the lock with defaults is renewed");
                foreach (var handle in ended)
                {
                    Check.That(!handle.IsHeld, handle.Resource + " ended at its lease");
                    Check.That(handle.LostToken.IsCancellationRequested, handle.Resource + " reported lost");
                    Check.Equal(LockLossReason.Expired, handle.LossReason, handle.Resource + " LossReason");
                    Check.Equal("0", Exists(single, 0, handle.Resource), handle.Resource + " expired on Redis");
                }
                var busy = new LockOptions(lease) { Wait = TimeSpan.Zero };
                await Check.Throws<NotAcquiredException>(() => client.AcquireAsync(renewed.Resource, busy));
                Check.That(await client.TryAcquireAsync(renewed.Resource, new LockOptions(lease) { Wait = Second }) == null,
                    "a try ignores the wait");
                Check.ThrowsNow<ArgumentOutOfRangeException>(() => client.AcquireAsync("x", new LockOptions(TimeSpan.Zero)));
                Check.ThrowsNow<ArgumentOutOfRangeException>(() =>
                    client.AcquireAsync("x", new LockOptions(lease) { MaxHold = TimeSpan.FromSeconds(-1) }));
                Check.ThrowsNow<ArgumentNullException>(() => client.AcquireAsync("x", (LockOptions)null));
                await renewed.ReleaseAsync();
                foreach (var handle in ended) await handle.DisposeAsync();
                await renewed.DisposeAsync();
            }
        }

        private static async Task ContinuationsRunOnThreadPool()
        {
            using (var client = new FenceLockClient(single.Urls))
            {
                // The native callback runs on a fencelock runtime thread, which
                // is not a pool thread: landing on the pool proves the hop.
                var handle = await client.AcquireAsync(Unique("thread"), Second, TimeSpan.Zero).ConfigureAwait(false);
                Check.That(Thread.CurrentThread.IsThreadPoolThread, "continuation on the thread pool");
                await handle.ReleaseAsync().ConfigureAwait(false);
                Check.That(Thread.CurrentThread.IsThreadPoolThread, "release continuation on the thread pool");
                handle.Dispose();
            }
        }

        private static async Task FencingTokensIncrease()
        {
            using (var client = new FenceLockClient(single.Urls))
            {
                var resource = Unique("tokens");
                ulong previous = 0;
                for (var i = 0; i < 5; i++)
                {
                    var handle = await client.AcquireAsync(resource, Second, Second);
                    Check.That(handle.FencingToken > previous, "token " + handle.FencingToken + " > " + previous);
                    previous = handle.FencingToken;
                    await handle.DisposeAsync();
                }
            }
        }

        /// <summary>
        /// For tests that are not about node timeouts: a slow answer on a busy
        /// machine must not turn "held by another" into "timed out".
        /// </summary>
        internal static FenceLockOptions GenerousNodeTimeout()
        {
            return new FenceLockOptions { NodeTimeout = TimeSpan.FromSeconds(5) };
        }

        private static async Task ContentionInOneProcess()
        {
            using (var client = new FenceLockClient(single.Urls, GenerousNodeTimeout()))
            {
                var resource = Unique("busy");
                var holder = await client.AcquireAsync(resource, TimeSpan.FromSeconds(2), TimeSpan.Zero);
                Check.That(await client.TryAcquireAsync(resource, Second) == null, "TryAcquireAsync gives null when held");
                await Check.Throws<NotAcquiredException>(() => client.AcquireAsync(resource, Second, TimeSpan.Zero));

                var timeout = await Check.Throws<LockTimeoutException>(
                    () => client.AcquireAsync(resource, Second, TimeSpan.FromMilliseconds(150)));
                Check.Equal(FenceLockStatus.Timeout, timeout.Status, "Status");
                Check.Equal(1, timeout.Nodes.Count, "one node report");
                Check.Equal(NodeOutcome.HeldByOther, timeout.Nodes[0].Outcome, "outcome");
                Check.That(timeout.Nodes[0].Node.Contains("127.0.0.1"), "node URL in the report");
                Check.That(timeout is NotAcquiredException, "a timeout is a kind of not-acquired");
                // The timed-out waiter has left the queue when the call fails: a
                // release made next is not handed to it.
                var queue = "fencelock:{" + resource + "}:queue";
                Check.Equal("0", single.Call(0, "ZCARD " + queue), "the timed-out waiter's place in the queue");

                await holder.DisposeAsync();
                var next = await client.TryAcquireAsync(resource, Second);
                Check.That(next != null, "free after the holder's DisposeAsync");
                await next.DisposeAsync();
            }
        }

        private static async Task ContentionAcrossProcesses()
        {
            var resource = Unique("procs");
            using (var child = StartHolder(single.Urls[0], resource, 700))
            using (var client = new FenceLockClient(single.Urls))
            {
                var line = child.StandardOutput.ReadLine() ?? "";
                var match = Regex.Match(line, @"^token (\d+)$");
                Check.That(match.Success, "child printed its token, got '" + line + "'");
                var childToken = ulong.Parse(match.Groups[1].Value);

                Check.That(await client.TryAcquireAsync(resource, Second) == null, "held by the other process");
                // The child releases after 700 ms; waiting up to 10 s must get the lock.
                var handle = await client.AcquireAsync(resource, Second, Deadline);
                Check.That(handle.FencingToken > childToken, "token above the child's");
                child.WaitForExit();
                Check.Equal(0, child.ExitCode, "child exit code");
                await handle.DisposeAsync();
            }
        }

        private static async Task ConcurrentWaitersEachGetTheLock()
        {
            using (var client = new FenceLockClient(single.Urls))
            {
                var resource = Unique("queue");
                var holders = 0;
                var overlap = false;
                Func<Task<ulong>> worker = async () =>
                {
                    var handle = await client.AcquireAsync(resource, TimeSpan.FromSeconds(5), Deadline);
                    if (Interlocked.Increment(ref holders) != 1) overlap = true;
                    await Task.Delay(5);
                    Interlocked.Decrement(ref holders);
                    await handle.DisposeAsync();
                    return handle.FencingToken;
                };
                var tokens = await Task.WhenAll(Enumerable.Range(0, 10).Select(_ => worker()));
                Check.That(!overlap, "never two holders at once");
                Check.Equal(10, tokens.Distinct().Count(), "ten distinct tokens");
            }
        }

        private static async Task LostTokenCancelledWhenKeyDeleted()
        {
            using (var client = new FenceLockClient(single.Urls))
            {
                var resource = Unique("lost");
                var handle = await client.AcquireAsync(resource, TimeSpan.FromMilliseconds(300), TimeSpan.Zero);
                var onPool = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
                handle.LostToken.Register(() => onPool.TrySetResult(Thread.CurrentThread.IsThreadPoolThread));
                Check.That(!handle.LostToken.IsCancellationRequested, "not lost yet");
                Check.That(handle.LossReason == null, "no loss reason yet");

                Check.Equal("1", single.Call(0, "DEL fencelock:{" + resource + "}"), "DEL");
                // The next renewal (every ttl/3) finds the key gone.
                Check.That(await Check.Within(onPool.Task, Deadline), "LostToken cancelled");
                Check.That(onPool.Task.Result, "LostToken callbacks run on the thread pool");
                Check.Equal((LockLossReason?)LockLossReason.Deleted, handle.LossReason, "LossReason");
                Check.That(!handle.IsHeld, "not held after loss");
                await Check.Throws<LockLostException>(() => handle.ExtendAsync(Second));
                await Check.Throws<NotHeldException>(() => handle.ReleaseAsync());
                await handle.DisposeAsync(); // a lock no longer held disposes quietly
            }
        }

        private static async Task DisposeTwiceAndUseAfterDispose()
        {
            var client = new FenceLockClient(single.Urls);
            var resource = Unique("dispose");
            var handle = await client.AcquireAsync(resource, Second, TimeSpan.Zero);
            await handle.DisposeAsync();
            Check.Equal("0", Exists(single, 0, resource), "DisposeAsync released");
            await handle.DisposeAsync();
            handle.Dispose();
            handle.Dispose();

            Check.ThrowsNow<ObjectDisposedException>(() => { var held = handle.IsHeld; });
            Check.ThrowsNow<ObjectDisposedException>(() => { var left = handle.Remaining; });
            Check.ThrowsNow<ObjectDisposedException>(() => handle.ExtendAsync(Second));
            Check.ThrowsNow<ObjectDisposedException>(() => handle.ReleaseAsync());
            Check.Equal(resource, handle.Resource, "Resource readable after dispose");

            client.Dispose();
            client.Dispose();
            Check.ThrowsNow<ObjectDisposedException>(() => client.AcquireAsync(resource, Second, TimeSpan.Zero));
            Check.ThrowsNow<ObjectDisposedException>(() => client.TryAcquireAsync(resource, Second));
            Check.ThrowsNow<ObjectDisposedException>(() => client.FencedSetAsync("k", "v", 1));
            Check.ThrowsNow<ObjectDisposedException>(() => client.FencedGetAsync("k"));
        }

        private static async Task DisposeReleasesWithoutBlocking()
        {
            using (var client = new FenceLockClient(single.Urls))
            {
                var resource = Unique("sync-dispose");
                var handle = await client.AcquireAsync(resource, TimeSpan.FromSeconds(60), TimeSpan.Zero);
                handle.Dispose();
                // The background release deletes the key long before its 60 s ttl.
                Check.That(await Check.Eventually(() => Exists(single, 0, resource) == "0", Deadline), "key released");
                var next = await client.TryAcquireAsync(resource, Second);
                Check.That(next != null, "free again");
                await next.DisposeAsync();
            }
        }

        private static async Task LockOutlivesItsClient()
        {
            var client = new FenceLockClient(single.Urls);
            var resource = Unique("orphan");
            var handle = await client.AcquireAsync(resource, Second, TimeSpan.Zero);
            client.Dispose();
            Check.That(handle.IsHeld, "still held after the client is disposed");
            await handle.ReleaseAsync();
            Check.Equal("0", Exists(single, 0, resource), "released");
            await handle.DisposeAsync();
        }

        private static async Task ForgottenHandleStopsRenewing()
        {
            using (var client = new FenceLockClient(single.Urls))
            {
                var resource = Unique("forgotten");
                // Acquired on another thread and never stored: nothing references the handle.
                await Task.Run(async () => { await client.AcquireAsync(resource, TimeSpan.FromMilliseconds(300), TimeSpan.Zero); });
                Check.Equal("1", Exists(single, 0, resource), "key exists");
                // The finalizer frees the lock: renewal stops and the key expires at its ttl.
                var expired = await Check.Eventually(() =>
                {
                    // Mono scans the callback thread's stack conservatively, and the
                    // handle was made there: run another acquire's callbacks, so a
                    // stale copy of the pointer on that stack is overwritten.
                    using (var other = client.TryAcquireAsync(Unique("forgotten-other"), Second).Result) { }
                    GC.Collect();
                    GC.WaitForPendingFinalizers();
                    return Exists(single, 0, resource) == "0";
                }, Deadline);
                Check.That(expired, "key expired after the handle was collected");
            }
        }

        private static async Task CancelWaitingAcquire()
        {
            using (var client = new FenceLockClient(single.Urls))
            {
                var resource = Unique("cancel");
                var holder = await client.AcquireAsync(resource, TimeSpan.FromSeconds(5), TimeSpan.Zero);
                using (var cancel = new CancellationTokenSource())
                {
                    var waiting = client.AcquireAsync(resource, Second, TimeSpan.FromSeconds(30), cancel.Token);
                    await Task.Delay(100);
                    Check.That(!waiting.IsCompleted, "still waiting");
                    cancel.Cancel();
                    var e = await Check.Throws<OperationCanceledException>(() => waiting, orSubclass: true);
                    Check.That(waiting.IsCanceled, "task is cancelled");
                    Check.That(e.CancellationToken == cancel.Token, "carries the caller's token");
                }
                // The cancelled waiter leaves the queue in the background; a release
                // reaching the node before that would hand it the lock until it has.
                var queue = "fencelock:{" + resource + "}:queue";
                Check.That(await Check.Eventually(() => single.Call(0, "ZCARD " + queue) == "0", Deadline),
                    "the cancelled waiter left the queue");
                await holder.DisposeAsync();
                // The cancelled acquire left nothing behind: the key is gone and free at once.
                Check.Equal("0", Exists(single, 0, resource), "no key left");
                var next = await client.TryAcquireAsync(resource, Second);
                Check.That(next != null, "free at once");
                await next.DisposeAsync();

                var other = Unique("precancelled");
                var never = client.AcquireAsync(other, Second, Second, new CancellationToken(true));
                Check.That(never.IsCanceled, "an already-cancelled token starts nothing");
                Check.Equal("0", Exists(single, 0, other), "nothing taken");
            }
        }

        private static async Task OptionsReachTheNativeClient()
        {
            var options = new FenceLockOptions
            {
                KeyPrefix = "dntest:",
                NodeTimeout = TimeSpan.FromMilliseconds(200),
                ConnectTimeout = TimeSpan.FromSeconds(2),
                DriftFactor = 0.02,
                RetryBase = TimeSpan.FromMilliseconds(5),
                RetryMax = TimeSpan.FromMilliseconds(50),
                AutoRenew = true,
            };
            using (var client = new FenceLockClient(single.Urls, options))
            {
                var resource = Unique("prefix");
                var handle = await client.AcquireAsync(resource, Second, TimeSpan.Zero);
                Check.Equal("1", Exists(single, 0, resource, "dntest:"), "key under the custom prefix");
                await handle.DisposeAsync();
                Check.Equal("0", Exists(single, 0, resource, "dntest:"), "released");
            }
        }

        private static async Task TlsMinVersionOption()
        {
            // Plain redis:// nodes ignore the TLS minimum; either value is accepted.
            foreach (var version in new[] { FenceLockTlsVersion.Tls12, FenceLockTlsVersion.Tls13 })
            {
                var options = new FenceLockOptions { NodeTimeout = TimeSpan.FromSeconds(5), TlsMinVersion = version };
                using (var client = new FenceLockClient(single.Urls, options))
                {
                    var resource = Unique("tls-min-" + version);
                    var handle = await client.AcquireAsync(resource, Second, TimeSpan.Zero);
                    Check.Equal("1", Exists(single, 0, resource), "acquired with TlsMinVersion " + version);
                    await handle.DisposeAsync();
                }
            }
            Check.Equal(12, (int)FenceLockTlsVersion.Tls12, "the C ABI's value");
            Check.Equal(13, (int)FenceLockTlsVersion.Tls13, "the C ABI's value");

            // TLS 1.3 reaches the core: it cannot be applied to a Redis Cluster.
            var cluster = Check.ThrowsNow<ConfigException>(() => new FenceLockClient("rediss+cluster://127.0.0.1:1",
                new FenceLockOptions { TlsMinVersion = FenceLockTlsVersion.Tls13 }));
            Check.That(cluster.Message.Contains("tls-protocols"), "message says what to do: " + cluster.Message);

            // An int cast to the enum that names no version: refused before anything is sent.
            foreach (var bad in new[] { 11, 14, -1, 0 })
            {
                var range = Check.ThrowsNow<ArgumentOutOfRangeException>(() => new FenceLockClient(single.Urls,
                    new FenceLockOptions { TlsMinVersion = (FenceLockTlsVersion)bad }));
                Check.Equal("TlsMinVersion", range.ParamName, "names the option");
                Check.That(range.Message.Contains("Tls12") && range.Message.Contains("Tls13"),
                    "message lists the versions: " + range.Message);
            }
        }

        private static Task BadClientArguments()
        {
            Check.ThrowsNow<ArgumentNullException>(() => new FenceLockClient((IEnumerable<string>)null));
            Check.ThrowsNow<ArgumentNullException>(() => new FenceLockClient((string)null));
            Check.ThrowsNow<ArgumentException>(() => new FenceLockClient(new string[] { null }));
            Check.ThrowsNow<ConfigException>(() => new FenceLockClient(new string[0]));
            var bad = Check.ThrowsNow<ConfigException>(() => new FenceLockClient("not a url"));
            Check.That(bad.Message.Contains("not a url"), "message quotes the URL: " + bad.Message);
            Check.ThrowsNow<ConfigException>(() => new FenceLockClient("http://127.0.0.1:1"));
            Check.ThrowsNow<ConfigException>(() => new FenceLockClient(new[] { single.Urls[0], single.Urls[0] }));
            Check.ThrowsNow<ConfigException>(
                () => new FenceLockClient(single.Urls, new FenceLockOptions { NodeTimeout = TimeSpan.Zero }));
            Check.ThrowsNow<ConfigException>(
                () => new FenceLockClient(single.Urls, new FenceLockOptions { DriftFactor = double.NaN }));
            Check.ThrowsNow<ArgumentException>(
                () => new FenceLockClient(single.Urls, new FenceLockOptions { RetryBase = Second }));
            return Task.CompletedTask;
        }

        // tests/vectors/protocol.json, shared by every front: one object per
        // line and no escapes, so a regular expression per field reads it.
        private static string Field(string line, string name)
        {
            var match = Regex.Match(line, "\"" + name + "\": \"([^\"]*)\"");
            return match.Success ? match.Groups[1].Value : null;
        }

        private static async Task ProtocolVectors()
        {
            var path = Environment.GetEnvironmentVariable("FENCELOCK_VECTORS") ?? "tests/vectors/protocol.json";
            int keys = 0, invalid = 0;
            foreach (var line in System.IO.File.ReadAllLines(path))
            {
                if (Field(line, "lock_key") != null)
                {
                    var options = new FenceLockOptions { KeyPrefix = Field(line, "prefix") };
                    using (var client = new FenceLockClient(single.Urls, options))
                    {
                        var handle = await client.AcquireAsync(Field(line, "resource"), Second, Second);
                        var owner = single.Call(0, "GET " + Field(line, "lock_key"));
                        Check.That(Regex.IsMatch(owner, "^[0-9a-f]{32}$"), "token format: " + owner);
                        Check.Equal(handle.FencingToken.ToString(), single.Call(0, "GET " + Field(line, "fence_key")), "fence key");
                        await handle.DisposeAsync();
                    }
                    keys++;
                }
                else if (line.Contains("\"why\"") && !line.Contains("\"script\""))
                {
                    var resource = Field(line, "resource");
                    if (resource == null)
                    {
                        var times = int.Parse(Regex.Match(line, "\"times\": ([0-9]+)").Groups[1].Value);
                        resource = new string(Field(line, "resource_repeat")[0], times);
                    }
                    using (var client = new FenceLockClient(single.Urls))
                    {
                        await Check.Throws<ArgumentException>(() => client.TryAcquireAsync(resource, Second), orSubclass: true);
                    }
                    invalid++;
                }
            }
            Check.That(keys >= 6 && invalid >= 3, "read every vector (" + keys + " keys, " + invalid + " invalid)");
        }

        private static async Task BadLockArguments()
        {
            using (var client = new FenceLockClient(single.Urls))
            {
                // Checked in C#, thrown before anything starts.
                Check.ThrowsNow<ArgumentNullException>(() => client.AcquireAsync(null, Second, TimeSpan.Zero));
                Check.ThrowsNow<ArgumentNullException>(() => client.TryAcquireAsync(null, Second));
                Check.ThrowsNow<ArgumentException>(() => client.AcquireAsync("a\0b", Second, TimeSpan.Zero));
                Check.ThrowsNow<ArgumentException>(() => client.AcquireAsync("bad\ud800", Second, TimeSpan.Zero));
                Check.ThrowsNow<ArgumentOutOfRangeException>(() => client.AcquireAsync("r", TimeSpan.Zero, TimeSpan.Zero));
                Check.ThrowsNow<ArgumentOutOfRangeException>(() => client.AcquireAsync("r", TimeSpan.FromSeconds(-1), TimeSpan.Zero));
                Check.ThrowsNow<ArgumentOutOfRangeException>(() => client.AcquireAsync("r", TimeSpan.FromMilliseconds(5), TimeSpan.Zero));
                Check.ThrowsNow<ArgumentOutOfRangeException>(
                    () => client.AcquireAsync("r", TimeSpan.FromMilliseconds(int.MaxValue + 1L), TimeSpan.Zero));
                Check.ThrowsNow<ArgumentOutOfRangeException>(() => client.AcquireAsync("r", Second, TimeSpan.FromSeconds(-1)));
                Check.ThrowsNow<ArgumentOutOfRangeException>(() => client.AcquireAsync("r", Second, TimeSpan.FromDays(400)));
                Check.ThrowsNow<ArgumentNullException>(() => client.FencedSetAsync(null, "v", 1));
                Check.ThrowsNow<ArgumentNullException>(() => client.FencedSetAsync("k", null, 1));

                Check.ThrowsNow<ArgumentException>(() => client.AcquireAsync("", Second, TimeSpan.Zero));
                Check.ThrowsNow<ArgumentException>(() => client.TryAcquireAsync("", Second));
                Check.ThrowsNow<ArgumentException>(() => client.AcquireAsync(new string('a', 1025), Second, TimeSpan.Zero));
                Check.ThrowsNow<ArgumentException>(() => client.AcquireAsync(new string('\u00e9', 513), Second, TimeSpan.Zero));
                var longest = await client.AcquireAsync(new string('a', 1024), Second, TimeSpan.Zero);
                await longest.DisposeAsync();

                // A rule only libfencelock checks: its INVALID_ARGUMENT becomes ArgumentException.
                await Check.Throws<ArgumentException>(() => client.FencedSetAsync("", "v", 1));
                await Check.Throws<ArgumentException>(() => client.FencedGetAsync(""));
                Check.ThrowsNow<ArgumentNullException>(() => client.FencedGetAsync(null));
                Check.ThrowsNow<ArgumentException>(() => client.FencedGetAsync("a\0b"));
                Check.ThrowsNow<ArgumentException>(() => client.FencedGetAsync("bad\ud800"));

                var handle = await client.AcquireAsync(Unique("args"), Second, TimeSpan.Zero);
                Check.ThrowsNow<ArgumentOutOfRangeException>(() => handle.ExtendAsync(TimeSpan.Zero));
                Check.ThrowsNow<ArgumentOutOfRangeException>(() => handle.ExtendAsync(TimeSpan.MaxValue));
                await handle.DisposeAsync();
            }
        }

        private static async Task StaleFencedWriteIsRefused()
        {
            using (var client = new FenceLockClient(single.Urls))
            {
                var resource = Unique("fence");
                var first = await client.AcquireAsync(resource, Second, Second);
                await first.DisposeAsync();
                var second = await client.AcquireAsync(resource, Second, Second);
                Check.That(second.FencingToken > first.FencingToken, "tokens increase");

                var key = Unique("fenced-key");
                await client.FencedSetAsync(key, "newer", second.Fence);
                // The same grant may write again; a bare equal token, or another grant's, may not.
                await client.FencedSetAsync(key, "newest", second.Fence);
                await Check.Throws<StaleTokenException>(() => client.FencedSetAsync(key, "bare", second.FencingToken));
                var other = new Fence(second.FencingToken, second.Fence.Holder % Fence.MaxHolderId + 1);
                await Check.Throws<StaleTokenException>(() => client.FencedSetAsync(key, "other", other));
                var stale = await Check.Throws<StaleTokenException>(() => client.FencedSetAsync(key, "stale", first.FencingToken));
                Check.Equal(FenceLockStatus.StaleToken, stale.Status, "Status");
                Check.Equal(second.Fence, Fence.Parse(second.Fence.ToString()), "a fence's text reads back");
                Check.That(second.Fence.Holder >= 1 && second.Fence.Holder <= Fence.MaxHolderId, "holder id range");
                Check.ThrowsNow<FormatException>(() => Fence.Parse("1:2:3"));
                Check.ThrowsNow<ArgumentOutOfRangeException>(() => new Fence(1, Fence.MaxHolderId + 1));

                var stored = await client.FencedGetAsync(key);
                Check.Equal("newest", stored.Value, "stored value");
                Check.Equal(second.FencingToken, stored.FencingToken, "stored token");
                var absent = await client.FencedGetAsync(Unique("absent"));
                Check.That(absent.Value == null && absent.FencingToken == 0, "absent key");
                await second.DisposeAsync();
            }
        }

        /// <summary>
        /// <see cref="FenceLockClient.FencedGetAsync"/> on a paused node: cancelled, it ends at once as a
        /// cancelled task; left alone, it faults with <see cref="UnavailableException"/> at the node timeout.
        /// Afterwards the same clients read as before.
        /// </summary>
        private static async Task FencedGetCancelledInFlight()
        {
            using (var slow = new FenceLockClient(single.Urls, PausedNode.SlowTimeouts()))
            using (var quick = new FenceLockClient(single.Urls))
            {
                var key = Unique("fenced-paused");
                await slow.FencedSetAsync(key, "stored", 7);
                await PausedNode.CheckCancelledInFlight(token => slow.FencedGetAsync(key, token), "FencedGetAsync");
                var e = await PausedNode.CheckUnavailable(() => quick.FencedGetAsync(key));
                Check.Equal(FenceLockStatus.Unavailable, e.Status, "Status");

                foreach (var client in new[] { slow, quick })
                {
                    var stored = await client.FencedGetAsync(key);
                    Check.Equal("stored", stored.Value, "read after the pause");
                    Check.Equal(7UL, stored.FencingToken, "its token");
                }
                var never = slow.FencedGetAsync(key, new CancellationToken(true));
                Check.That(never.IsCanceled, "an already-cancelled token starts nothing");
            }
        }

        private static async Task RedlockSurvivesOneNodeKilled()
        {
            // With node 0 killed, the single try needs both others in time.
            using (var client = new FenceLockClient(trio.Urls, GenerousNodeTimeout()))
            {
                var resource = Unique("quorum");
                try
                {
                    trio.Run("kill 0");
                    var handle = await client.AcquireAsync(resource, TimeSpan.FromSeconds(2), TimeSpan.Zero);
                    Check.Equal("1", Exists(trio, 1, resource), "key on node 1");
                    Check.Equal("1", Exists(trio, 2, resource), "key on node 2");
                    await handle.DisposeAsync();

                    trio.Run("kill 1");
                    var e = await Check.Throws<UnavailableException>(
                        () => client.AcquireAsync(resource, TimeSpan.FromSeconds(2), TimeSpan.Zero));
                    Check.Equal(3, e.Nodes.Count, "a report per node");
                    var down = e.Nodes.Count(n => n.Outcome == NodeOutcome.Failed || n.Outcome == NodeOutcome.TimedOut);
                    Check.Equal(2, down, "two nodes down");
                    Check.That(e.Message.Contains(trio.Urls[0]), "message names a failed node");
                }
                finally
                {
                    trio.Run("restart 0");
                    trio.Run("restart 1");
                }
                var again = await client.AcquireAsync(resource, TimeSpan.FromSeconds(2), TimeSpan.FromSeconds(5));
                await again.DisposeAsync();
            }
        }

        // ---- the helper process ------------------------------------------

        /// <summary>Starts this program in "hold" mode, under the same runtime (mono, dotnet or an apphost).</summary>
        private static Process StartHolder(string url, string resource, int ms)
        {
            var host = Process.GetCurrentProcess().MainModule.FileName;
            var self = Assembly.GetEntryAssembly().Location;
            var hostName = System.IO.Path.GetFileNameWithoutExtension(host);
            var viaHost = hostName.StartsWith("mono", StringComparison.Ordinal) || hostName == "dotnet";
            var arguments = (viaHost ? "\"" + self + "\" " : "") + "hold \"" + url + "\" \"" + resource + "\" " + ms;
            var info = new ProcessStartInfo(viaHost ? host : self, arguments)
            {
                UseShellExecute = false,
                RedirectStandardOutput = true,
            };
            return Process.Start(info);
        }

        private static async Task<int> Hold(string url, string resource, int ms)
        {
            using (var client = new FenceLockClient(url))
            {
                var handle = await client.AcquireAsync(resource, TimeSpan.FromSeconds(5), TimeSpan.Zero);
                Console.WriteLine("token " + handle.FencingToken);
                Console.Out.Flush();
                await Task.Delay(ms);
                try
                {
                    await handle.ReleaseAsync();
                    return 0;
                }
                catch (FenceLockException)
                {
                    return 4;
                }
                finally
                {
                    handle.Dispose();
                }
            }
        }
    }
}

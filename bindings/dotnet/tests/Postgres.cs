using System;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;

namespace FenceLock.Tests
{
    /// <summary>
    /// PostgreSQL as a node (docs/postgres-store.md): the same locks, tokens, waits, fenced writes
    /// and lost token over a real PostgreSQL server from redis-nodes --postgres, started at the
    /// first of these tests. Each is skipped, saying why, when that server cannot start
    /// (PostgreSQL not installed).
    /// </summary>
    internal static class Postgres
    {
        private static readonly TimeSpan Deadline = TimeSpan.FromSeconds(5);
        private static readonly object Gate = new object();
        private static RedisNodes server;
        private static string unavailable;

        /// <summary>The server, started on first use; skips the test when it cannot start.</summary>
        private static RedisNodes Server()
        {
            lock (Gate)
            {
                if (server == null && unavailable == null)
                {
                    try
                    {
                        server = RedisNodes.StartPostgres();
                    }
                    catch (PostgresMissingException e)
                    {
                        unavailable = e.Message;
                    }
                }
                if (unavailable != null) Check.Skip("no PostgreSQL server: " + unavailable);
                return server;
            }
        }

        /// <summary>Stops the server if a test started it.</summary>
        internal static void Stop()
        {
            lock (Gate)
            {
                server?.Dispose();
                server = null;
            }
        }

        private static string Url => Server().Urls[0];

        private static FenceLockOptions Generous() => Tests.GenerousNodeTimeout();

        private static string LeaseKey(string resource) => "fencelock:{" + resource + "}";

        /// <summary>The WHERE clause of a lock's lease row.</summary>
        private static string LeaseRow(string resource) =>
            "FROM fencelock.keys WHERE key = '" + LeaseKey(resource).Replace("'", "''") + "'";

        internal static async Task AcquireRefuseExtendReleaseOnPostgres()
        {
            var pg = Server();
            using (var holder = new FenceLockClient(Url, Generous()))
            using (var other = new FenceLockClient(new[] { Url }, Generous()))
            {
                var resource = Tests.Unique("pg-basic");
                var handle = await holder.AcquireAsync(resource, TimeSpan.FromSeconds(5), TimeSpan.Zero);
                Check.That(handle.IsHeld && handle.FencingToken > 0, "held, token > 0");
                Check.Equal("1", pg.Sql("SELECT count(*) " + LeaseRow(resource)), "the lease row");
                Check.That(await other.TryAcquireAsync(resource, TimeSpan.FromSeconds(5)) == null,
                    "TryAcquireAsync from another client gives null while held");
                var refused = await Check.Throws<NotAcquiredException>(
                    () => other.AcquireAsync(resource, TimeSpan.FromSeconds(5), TimeSpan.Zero));
                Check.Equal(NodeOutcome.HeldByOther, refused.Nodes.Single().Outcome, "the node's outcome");

                await handle.ExtendAsync(TimeSpan.FromSeconds(8));
                var ms = long.Parse(pg.Sql(
                    "SELECT (extract(epoch FROM expires_at - clock_timestamp()) * 1000)::int " + LeaseRow(resource)));
                Check.That(ms > 5000 && ms <= 8000, "the lease row's expiry follows extend: " + ms + " ms");
                Check.That(handle.Remaining > TimeSpan.FromSeconds(5), "Remaining after extend: " + handle.Remaining);

                await handle.ReleaseAsync();
                Check.That(!handle.IsHeld, "not held after release");
                Check.Equal("0", pg.Sql("SELECT count(*) " + LeaseRow(resource)), "the lease row is gone");
                var again = await other.AcquireAsync(resource, TimeSpan.FromSeconds(5), TimeSpan.Zero);
                Check.That(again.FencingToken > handle.FencingToken,
                    "a larger token: " + again.FencingToken + " > " + handle.FencingToken);
                await again.ReleaseAsync();
            }
        }

        internal static async Task WaiterServedAfterReleaseOnPostgres()
        {
            Server();
            using (var holder = new FenceLockClient(Url, Generous()))
            using (var waiter = new FenceLockClient(Url, Generous()))
            {
                var resource = Tests.Unique("pg-wait");
                var handle = await holder.AcquireAsync(resource, TimeSpan.FromSeconds(10), TimeSpan.Zero);
                var waiting = waiter.AcquireAsync(resource, TimeSpan.FromSeconds(5), TimeSpan.FromSeconds(8));
                Check.That(!await Check.Within(waiting, TimeSpan.FromMilliseconds(500)), "the waiter waits while held");
                await handle.ReleaseAsync();
                Check.That(await Check.Within(waiting, Deadline), "the waiter is served after the release");
                var next = await waiting;
                Check.That(next.FencingToken > handle.FencingToken,
                    "a larger token: " + next.FencingToken + " > " + handle.FencingToken);
                await next.ReleaseAsync();
            }
        }

        internal static async Task StaleFencedWriteIsRefusedOnPostgres()
        {
            Server();
            using (var client = new FenceLockClient(Url, Generous()))
            {
                var resource = Tests.Unique("pg-fence");
                var first = await client.AcquireAsync(resource, TimeSpan.FromSeconds(5), TimeSpan.Zero);
                await first.ReleaseAsync();
                var second = await client.AcquireAsync(resource, TimeSpan.FromSeconds(5), TimeSpan.Zero);
                var key = Tests.Unique("pg-fenced-key");
                await client.FencedSetAsync(key, "new", second.Fence);
                var stale = await Check.Throws<StaleTokenException>(() => client.FencedSetAsync(key, "old", first.Fence));
                Check.Equal(FenceLockStatus.StaleToken, stale.Status, "Status");
                var stored = await client.FencedGetAsync(key);
                Check.Equal("new", stored.Value, "stored value");
                Check.Equal(second.FencingToken, stored.FencingToken, "stored token");
                await client.FencedSetAsync(key, "newer", second.Fence);
                Check.Equal("newer", (await client.FencedGetAsync(key)).Value, "the same grant writes again");
                var absent = await client.FencedGetAsync(Tests.Unique("pg-absent"));
                Check.That(absent.Value == null && absent.FencingToken == 0, "absent key");
                await second.ReleaseAsync();
            }
        }

        internal static async Task LostTokenCancelledWhenThePostgresLeaseRowIsDeleted()
        {
            var pg = Server();
            using (var client = new FenceLockClient(Url))
            {
                var resource = Tests.Unique("pg-lost");
                var handle = await client.AcquireAsync(resource, TimeSpan.FromMilliseconds(600), TimeSpan.Zero);
                var lost = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
                handle.LostToken.Register(() => lost.TrySetResult(true));
                Check.That(!handle.LostToken.IsCancellationRequested && handle.LossReason == null, "not lost yet");
                Check.Equal(LeaseKey(resource), pg.Sql("DELETE " + LeaseRow(resource) + " RETURNING key"),
                    "the deleted lease row");
                Check.That(await Check.Within(lost.Task, Deadline), "LostToken cancelled");
                Check.Equal((LockLossReason?)LockLossReason.Deleted, handle.LossReason, "LossReason");
                Check.That(!handle.IsHeld, "not held after the loss");
                await Check.Throws<LockLostException>(() => handle.ExtendAsync(TimeSpan.FromSeconds(1)));
                await handle.DisposeAsync();
            }
        }

        internal static async Task PostgresBesideRedisIsAConfigErrorWithoutThePassword()
        {
            Server();
            var password = new Uri(Url).UserInfo.Split(':')[1];
            Check.That(password.Length > 0, "the URL has a password");
            foreach (var nodes in new[] { new[] { Url, "redis://127.0.0.1:1" }, new[] { "redis://127.0.0.1:1", Url } })
            {
                var error = Check.ThrowsNow<ConfigException>(() => new FenceLockClient(nodes).Dispose());
                Check.Equal(FenceLockStatus.Config, error.Status, "Status");
                Check.That(error.Message.Contains("PostgreSQL"), "the message says why: " + error.Message);
                Check.That(!error.Message.Contains(password) && !error.ToString().Contains(password),
                    "the password is not in the error: " + error);
            }
            // A working client does not show it either.
            using (var client = new FenceLockClient(Url, Generous()))
            {
                var resource = Tests.Unique("pg-secret");
                var handle = await client.AcquireAsync(resource, TimeSpan.FromSeconds(5), TimeSpan.Zero);
                var refused = await Check.Throws<NotAcquiredException>(
                    () => client.AcquireAsync(resource, TimeSpan.FromSeconds(5), TimeSpan.Zero));
                foreach (var shown in new[]
                {
                    client.ToString(), handle.ToString(), refused.ToString(), refused.Nodes.Single().ToString(),
                    refused.Nodes.Single().Node,
                })
                {
                    Check.That(!shown.Contains(password), "the password is not in " + shown);
                }
                Check.That(refused.Nodes.Single().Node.Contains("127.0.0.1"), "the node is named: " + refused.Nodes.Single().Node);
                await handle.ReleaseAsync();
            }
        }
    }
}

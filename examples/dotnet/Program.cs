// The ASP.NET-style scenario as a console program: "POST /orders/{id}/pay"
// must not run twice at once for one order. Each request awaits the lock with
// a short wait, does its critical section under the lock (writing with the
// fencing token), answers 409 when another request holds the lock, and
// releases by awaiting DisposeAsync.
//
//   FENCELOCK_NODES=redis://127.0.0.1:6379 mono Example.exe [ORDER-ID]
//
// Three requests for one order: A is slow (it holds the lock until B has
// its answer, so the run is deterministic); B arrives meanwhile, waits
// 300 ms and gets 409; C, the client's retry after A, finds the order paid.
using System;
using System.Threading;
using System.Threading.Tasks;
using FenceLock;

namespace FenceLock.Example
{
    /// <summary>What an HTTP handler would return.</summary>
    internal sealed class Response
    {
        public Response(int status, string body)
        {
            Status = status;
            Body = body;
        }

        public int Status { get; }
        public string Body { get; }
    }

    internal static class Program
    {
        private static readonly TimeSpan LockTtl = TimeSpan.FromSeconds(10);
        private static readonly TimeSpan LockWait = TimeSpan.FromMilliseconds(300);

        private static int Main(string[] args)
        {
            var nodes = Environment.GetEnvironmentVariable("FENCELOCK_NODES");
            if (string.IsNullOrEmpty(nodes))
            {
                Console.Error.WriteLine("set FENCELOCK_NODES to one or more comma-separated redis:// URLs");
                return 2;
            }
            var order = args.Length > 0 ? args[0] : "order-" + DateTime.UtcNow.Ticks;
            using (var locks = new FenceLockClient(nodes.Split(',')))
            {
                return RunAsync(locks, order).GetAwaiter().GetResult();
            }
        }

        private static async Task<int> RunAsync(FenceLockClient locks, string order)
        {
            var aInside = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
            var bAnswered = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);

            // A: a slow payment provider; it is still busy when B arrives.
            var a = PayAsync(locks, order, async cancel =>
            {
                aInside.SetResult(true);
                await bAnswered.Task;
            }, CancellationToken.None);
            await aInside.Task;

            var b = await PayAsync(locks, order, cancel => Task.CompletedTask, CancellationToken.None);
            Print("B", b);
            bAnswered.SetResult(true);
            Print("A", await a);

            var c = await PayAsync(locks, order, cancel => Task.CompletedTask, CancellationToken.None);
            Print("C", c);
            return a.Result.Status == 200 && b.Status == 409 && c.Status == 200 ? 0 : 1;
        }

        /// <summary>The handler: lock the order, charge once, answer 409 when another request holds it.</summary>
        private static async Task<Response> PayAsync(FenceLockClient locks, string order,
            Func<CancellationToken, Task> charge, CancellationToken requestAborted)
        {
            FenceLockHandle handle;
            try
            {
                handle = await locks.AcquireAsync("order:" + order, LockTtl, LockWait, requestAborted);
            }
            catch (NotAcquiredException)
            {
                // Also catches LockTimeoutException: held elsewhere for the whole wait.
                return new Response(409, "busy: order " + order + " is being processed by another request");
            }
            try
            {
                return await ChargeOnceAsync(locks, order, handle, charge, requestAborted);
            }
            finally
            {
                await handle.DisposeAsync(); // releases now rather than at the ttl
            }
        }

        /// <summary>The critical section: everything it writes carries the fencing token.</summary>
        private static async Task<Response> ChargeOnceAsync(FenceLockClient locks, string order, FenceLockHandle handle,
            Func<CancellationToken, Task> charge, CancellationToken requestAborted)
        {
            var stateKey = "order-state:" + order;
            var state = await locks.FencedGetAsync(stateKey, requestAborted);
            if (state.Value == "paid") return new Response(200, "order " + order + " already paid");

            // Stop the work if the client goes away or the lock is lost (key
            // deleted, nodes unreachable): another request may hold it then.
            using (var work = CancellationTokenSource.CreateLinkedTokenSource(requestAborted, handle.LostToken))
            {
                await charge(work.Token);
            }
            // A stale holder (paused past its ttl) is refused here with StaleTokenException.
            await locks.FencedSetAsync(stateKey, "paid", handle.Fence, requestAborted);
            return new Response(200, "paid order " + order + " (fencing token " + handle.FencingToken + ")");
        }

        private static void Print(string request, Response response)
        {
            Console.WriteLine(request + ": " + response.Status + " " + response.Body);
        }
    }
}

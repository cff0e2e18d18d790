// Interop worker (.NET front on Mono): ITERATIONS times, take the lock, do a
// non-atomic read-modify-write of the counter file, log the critical section.
// FENCELOCK_INTEROP_TAKE (see worker.py) says what it takes instead: `elect`
// campaigns (announcing "dotnet", also FENCELOCK_INTEROP_ELECT=1) and logs its
// epoch, `permits:K` a permit (logged as a fifth field, the counter untouched),
// `rw` reads (even iterations, `r`) and writes (odd, `w`).
// FENCELOCK_INTEROP_NODE_TIMEOUT_MS, if set (not empty), is the per-node timeout
// in milliseconds (anything else fails the worker).
//   mono InteropWorker.exe NODES RESOURCE ITERATIONS COUNTER_FILE LOG_FILE   (NODES comma-separated)
using System;
using System.Diagnostics;
using System.Globalization;
using System.IO;
using System.Threading;
using System.Threading.Tasks;
using FenceLock;

static class InteropWorker
{
    // Wall-clock nanoseconds, comparable across processes on one machine.
    static long NowNs()
    {
        return (DateTime.UtcNow - new DateTime(1970, 1, 1, 0, 0, 0, DateTimeKind.Utc)).Ticks * 100;
    }

    static async Task Run(string[] args)
    {
        string resource = args[1], counter = args[3], log = args[4];
        int iterations = int.Parse(args[2]);
        string mode = Environment.GetEnvironmentVariable("FENCELOCK_INTEROP_TAKE") ?? "lock";
        if (Environment.GetEnvironmentVariable("FENCELOCK_INTEROP_ELECT") == "1")
        {
            mode = "elect";
        }
        TimeSpan ttl = TimeSpan.FromSeconds(10), wait = TimeSpan.FromSeconds(120);
        var options = new FenceLockOptions();
        string timeoutMs = Environment.GetEnvironmentVariable("FENCELOCK_INTEROP_NODE_TIMEOUT_MS");
        if (!string.IsNullOrEmpty(timeoutMs))
        {
            options.NodeTimeout = TimeSpan.FromMilliseconds(int.Parse(timeoutMs, NumberStyles.None, CultureInfo.InvariantCulture));
        }
        using (var client = new FenceLockClient(args[0].Split(','), options))
        {
            for (int i = 0; i < iterations; i++)
            {
                IAsyncDisposable held;
                ulong token;
                bool writes = true;
                string extra = "";
                if (mode == "elect")
                {
                    var leadership = await client.CampaignAsync(resource, ttl, wait, "dotnet");
                    held = leadership;
                    token = leadership.Epoch;
                }
                else
                {
                    FenceLockHandle handle;
                    if (mode.StartsWith("permits:", StringComparison.Ordinal))
                    {
                        handle = await client.Semaphore(resource, int.Parse(mode.Substring(8))).AcquireAsync(ttl, wait);
                        writes = false;
                        extra = " " + handle.Permit;
                    }
                    else if (mode == "rw")
                    {
                        var rw = client.ReaderWriterLock(resource);
                        writes = i % 2 == 1;
                        handle = writes ? await rw.AcquireWriteAsync(ttl, wait) : await rw.AcquireReadAsync(ttl, wait);
                        extra = writes ? " w" : " r";
                    }
                    else
                    {
                        handle = await client.AcquireAsync(resource, ttl, wait);
                    }
                    held = handle;
                    token = handle.FencingToken;
                }
                long start = NowNs();
                string text = File.ReadAllText(counter).Trim();
                long value = text.Length == 0 ? 0 : long.Parse(text);
                Thread.Sleep(3); // widen the window a lost update needs
                if (writes)
                {
                    File.WriteAllText(counter, (value + 1) + "\n");
                }
                File.AppendAllText(log, "dotnet " + token + " " + start + " " + NowNs() + extra + "\n");
                await held.DisposeAsync(); // releases (resigns), then frees
            }
        }
    }

    static int Main(string[] args)
    {
        if (args.Length != 5)
        {
            Console.Error.WriteLine("usage: InteropWorker.exe NODES RESOURCE ITERATIONS COUNTER_FILE LOG_FILE");
            return 2;
        }
        try
        {
            Run(args).GetAwaiter().GetResult();
            return 0;
        }
        catch (Exception e)
        {
            Console.Error.WriteLine("dotnet worker: " + e.Message);
            return 1;
        }
    }
}

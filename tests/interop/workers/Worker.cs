// Interop worker (.NET front on Mono): ITERATIONS times, take the lock, do a
// non-atomic read-modify-write of the counter file, log the critical section.
// With FENCELOCK_INTEROP_ELECT=1 it campaigns instead (announcing "dotnet")
// and logs its epoch.
//   mono InteropWorker.exe NODES RESOURCE ITERATIONS COUNTER_FILE LOG_FILE   (NODES comma-separated)
using System;
using System.Diagnostics;
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
        bool elect = Environment.GetEnvironmentVariable("FENCELOCK_INTEROP_ELECT") == "1";
        using (var client = new FenceLockClient(args[0].Split(',')))
        {
            for (int i = 0; i < iterations; i++)
            {
                IAsyncDisposable held;
                ulong token;
                if (elect)
                {
                    var leadership = await client.CampaignAsync(resource, TimeSpan.FromSeconds(10),
                        TimeSpan.FromSeconds(120), "dotnet");
                    held = leadership;
                    token = leadership.Epoch;
                }
                else
                {
                    var handle = await client.AcquireAsync(resource, TimeSpan.FromSeconds(10), TimeSpan.FromSeconds(120));
                    held = handle;
                    token = handle.FencingToken;
                }
                long start = NowNs();
                string text = File.ReadAllText(counter).Trim();
                long value = text.Length == 0 ? 0 : long.Parse(text);
                Thread.Sleep(3); // widen the window a lost update needs
                File.WriteAllText(counter, (value + 1) + "\n");
                File.AppendAllText(log, "dotnet " + token + " " + start + " " + NowNs() + "\n");
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

using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Text.RegularExpressions;

namespace FenceLock.Tests
{
    /// <summary>
    /// The shared Redis harness (tests/harness, program redis-nodes) as a
    /// child process, as tests/c/harness.c uses it: the first stdout line
    /// lists the node URLs; then one command per stdin line (kill I,
    /// restart I, pause I, resume I, call I ARGS…) answered "ok …" or
    /// "error: …". Closing stdin stops every node.
    /// </summary>
    internal sealed class RedisNodes : IDisposable
    {
        private readonly Process process;

        private RedisNodes(Process process, List<string> urls)
        {
            this.process = process;
            Urls = urls;
        }

        /// <summary>The node URLs, redis://127.0.0.1:PORT.</summary>
        public IReadOnlyList<string> Urls { get; }

        /// <summary>Starts <paramref name="count"/> nodes with the program in $FENCELOCK_REDIS_NODES.</summary>
        public static RedisNodes Start(int count)
        {
            var program = Environment.GetEnvironmentVariable("FENCELOCK_REDIS_NODES");
            if (string.IsNullOrEmpty(program))
                throw new InvalidOperationException("FENCELOCK_REDIS_NODES is not set: run scripts/test-dotnet.sh");
            var info = new ProcessStartInfo(program, "--nodes " + count)
            {
                UseShellExecute = false,
                RedirectStandardInput = true,
                RedirectStandardOutput = true,
            };
            var process = Process.Start(info);
            var first = process.StandardOutput.ReadLine();
            if (first == null) throw new InvalidOperationException("redis-nodes printed nothing (is redis-server installed?)");
            var urls = new List<string>();
            foreach (Match match in Regex.Matches(first, "\"(redis://[^\"]+)\"")) urls.Add(match.Groups[1].Value);
            if (urls.Count != count) throw new InvalidOperationException("redis-nodes said: " + first);
            return new RedisNodes(process, urls);
        }

        /// <summary>Runs one harness command; returns what follows "ok", throws on "error: …".</summary>
        public string Run(string command)
        {
            process.StandardInput.WriteLine(command);
            process.StandardInput.Flush();
            var line = process.StandardOutput.ReadLine() ?? "error: harness exited";
            if (!line.StartsWith("ok", StringComparison.Ordinal))
                throw new InvalidOperationException("harness: " + command + " -> " + line);
            return line.Length > 2 ? line.Substring(3) : "";
        }

        /// <summary>Runs a Redis command on node <paramref name="index"/>.</summary>
        public string Call(int index, string redisCommand) => Run("call " + index + " " + redisCommand);

        /// <summary>Stops the nodes (end of stdin) and waits for the harness.</summary>
        public void Dispose()
        {
            process.StandardInput.Close();
            process.WaitForExit();
            process.Dispose();
        }
    }
}

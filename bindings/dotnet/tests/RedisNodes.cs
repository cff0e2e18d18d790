using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Text;
using System.Text.RegularExpressions;

namespace FenceLock.Tests
{
    /// <summary>
    /// The shared Redis harness (tests/harness, program redis-nodes) as a
    /// child process, as tests/c/harness.c uses it: the first stdout line
    /// lists the node URLs; then one command per stdin line (kill I,
    /// restart I, pause I, resume I, call I ARGS…) answered "ok …" or
    /// "error: …". Closing stdin stops every node. <see cref="StartPostgres"/>
    /// runs one PostgreSQL server instead (redis-nodes --postgres), which
    /// takes "sql STATEMENT" (<see cref="Sql"/>).
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

        /// <summary>
        /// Starts one PostgreSQL server (redis-nodes --postgres); <see cref="Urls"/> holds its
        /// postgresql:// URL. Throws <see cref="InvalidOperationException"/> with what redis-nodes
        /// said on stderr when it cannot start one (PostgreSQL not installed).
        /// </summary>
        public static RedisNodes StartPostgres()
        {
            var program = Environment.GetEnvironmentVariable("FENCELOCK_REDIS_NODES");
            if (string.IsNullOrEmpty(program))
                throw new InvalidOperationException("FENCELOCK_REDIS_NODES is not set: run scripts/test-dotnet.sh");
            var info = new ProcessStartInfo(program, "--postgres")
            {
                UseShellExecute = false,
                RedirectStandardInput = true,
                RedirectStandardOutput = true,
                RedirectStandardError = true,
            };
            var process = Process.Start(info);
            var said = new StringBuilder();
            process.ErrorDataReceived += (sender, e) =>
            {
                if (e.Data == null) return;
                lock (said) said.AppendLine(e.Data);
                Console.Error.WriteLine(e.Data);
            };
            process.BeginErrorReadLine();
            var first = process.StandardOutput.ReadLine();
            var match = first == null ? null : Regex.Match(first, "\"(postgresql://[^\"]+)\"");
            if (match == null || !match.Success)
            {
                process.StandardInput.Close();
                process.WaitForExit(); // and for the end of stderr
                string text;
                lock (said) text = said.ToString().Trim();
                var code = process.ExitCode;
                process.Dispose();
                var why = "redis-nodes --postgres did not start (exit " + code + "): "
                    + (first == null ? text : first + " " + text);
                // 77: PostgreSQL is not installed, the one reason its tests skip.
                if (code == 77) throw new PostgresMissingException(why);
                throw new InvalidOperationException(why);
            }
            return new RedisNodes(process, new List<string> { match.Groups[1].Value });
        }

        /// <summary>Runs one SQL statement as the superuser (PostgreSQL only); returns what it printed.</summary>
        public string Sql(string statement) => Run("sql " + statement);

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

    /// <summary>PostgreSQL is not installed: the one reason a PostgreSQL test skips.</summary>
    internal sealed class PostgresMissingException : Exception
    {
        public PostgresMissingException(string message) : base(message) { }
    }
}

using System;
using System.Collections.Generic;
using System.Linq;
using System.Text.RegularExpressions;
using System.Threading;
using System.Threading.Tasks;
using FenceLock;

namespace FenceLock.Tests
{
    /// <summary>
    /// The tables every front shares (tests/vectors/protocol.json: error
    /// kinds, loss reasons, node outcomes, limits, metrics) against this
    /// binding's enums, exception classes, <see cref="FenceLockLimits"/> and
    /// <see cref="FenceLockMetrics"/>.
    /// </summary>
    internal static class SharedTables
    {
        private static string VectorsPath =>
            Environment.GetEnvironmentVariable("FENCELOCK_VECTORS") ?? "tests/vectors/protocol.json";

        /// <summary>The entries (one per line) of list <paramref name="list"/>.</summary>
        internal static List<string> Entries(string list)
        {
            var entries = new List<string>();
            var inside = false;
            foreach (var line in System.IO.File.ReadAllLines(VectorsPath))
            {
                if (line.StartsWith("  \"" + list + "\": [")) inside = true;
                else if (inside && line.StartsWith("  ]")) break;
                else if (inside) entries.Add(line);
            }
            Check.That(entries.Count > 0, "the vectors have a list " + list);
            return entries;
        }

        internal static string Text(string line, string field) =>
            Regex.Match(line, "\"" + field + "\": \"([^\"]*)\"").Groups[1].Value;

        private static string Number(string line, string field) =>
            Regex.Match(line, "\"" + field + "\": ([0-9.]+)").Groups[1].Value;

        /// <summary>"taken_over" as this binding's enum members spell it: "TakenOver".</summary>
        internal static string Pascal(string name) =>
            string.Concat(name.Split('_').Select(part => char.ToUpperInvariant(part[0]) + part.Substring(1)));

        /// <summary>
        /// The exception of a kind, by the rule in Exceptions.cs: the kind in
        /// PascalCase plus Exception (LockTimeout…, LockLost… for timeout and
        /// lost), except invalid_argument and cancelled, an ArgumentException
        /// and an OperationCanceledException as .NET expects.
        /// </summary>
        private static string ExceptionName(string kind)
        {
            if (kind == "invalid_argument") return "ArgumentException";
            if (kind == "cancelled") return "OperationCanceledException";
            var pascal = Pascal(kind);
            if (pascal == "Timeout" || pascal == "Lost") pascal = "Lock" + pascal;
            return pascal + "Exception";
        }

        internal static Task ErrorKindsAreTheVectors()
        {
            var kinds = Entries("error_kinds");
            foreach (var entry in kinds)
            {
                var name = Text(entry, "name");
                var code = int.Parse(Number(entry, "code"));
                var status = (FenceLockStatus)Enum.Parse(typeof(FenceLockStatus), Pascal(name));
                Check.Equal(code, (int)status, "FenceLockStatus." + Pascal(name));
                var exception = NativeErrors.ToException(code, IntPtr.Zero, CancellationToken.None);
                Check.Equal(ExceptionName(name), exception.GetType().Name, "the exception of kind " + name);
                var fenceLock = exception as FenceLockException;
                if (fenceLock != null) Check.Equal(status, fenceLock.Status, "Status of " + name);
            }
            var classes = typeof(FenceLockException).Assembly.GetTypes()
                .Where(type => type.IsSubclassOf(typeof(FenceLockException)))
                .Select(type => type.Name).OrderBy(n => n);
            var expected = kinds.Select(entry => ExceptionName(Text(entry, "name")))
                .Where(n => n != "ArgumentException" && n != "OperationCanceledException").OrderBy(n => n);
            Check.Equal(string.Join(",", expected), string.Join(",", classes), "one exception class per kind");
            return Task.CompletedTask;
        }

        internal static Task LossReasonsAndOutcomesAreTheVectors()
        {
            CheckEnum(typeof(LockLossReason), "loss_reasons", extra: LockLossReason.Other);
            CheckEnum(typeof(NodeOutcome), "node_outcomes", extra: null);
            return Task.CompletedTask;
        }

        internal static void CheckEnum(Type type, string list, Enum extra)
        {
            var entries = Entries(list);
            foreach (var entry in entries)
            {
                var member = Pascal(Text(entry, "name"));
                Check.That(Enum.IsDefined(type, member), type.Name + " has " + member);
                Check.Equal(int.Parse(Number(entry, "c_value")), (int)Enum.Parse(type, member), type.Name + "." + member);
            }
            var members = Enum.GetNames(type).Where(n => extra == null || n != extra.ToString());
            Check.Equal(entries.Count, members.Count(), type.Name + " has exactly the vectors' members");
        }

        internal static Task LimitsAreTheVectors()
        {
            var line = System.IO.File.ReadAllLines(VectorsPath).Single(l => l.Contains("\"limits\""));
            Check.Equal(ulong.Parse(Number(line, "min_ttl_ms")), (ulong)FenceLockLimits.MinTtl.TotalMilliseconds, "MinTtl");
            Check.Equal(ulong.Parse(Number(line, "max_ttl_ms")), (ulong)FenceLockLimits.MaxTtl.TotalMilliseconds, "MaxTtl");
            Check.Equal(ulong.Parse(Number(line, "max_wait_ms")), (ulong)FenceLockLimits.MaxWait.TotalMilliseconds, "MaxWait");
            Check.Equal(int.Parse(Number(line, "max_resource_bytes")), FenceLockLimits.MaxResourceBytes, "MaxResourceBytes");
            Check.Equal(int.Parse(Number(line, "max_prefix_bytes")), FenceLockLimits.MaxPrefixBytes, "MaxPrefixBytes");
            Check.Equal(double.Parse(Number(line, "max_drift_factor"), System.Globalization.CultureInfo.InvariantCulture),
                FenceLockLimits.MaxDriftFactor, "MaxDriftFactor");
            Check.Equal(ulong.Parse(Number(line, "max_fencing_token")), FenceLockLimits.MaxFencingToken, "MaxFencingToken");
            Check.Equal(ulong.Parse(Number(line, "max_holder_id")), FenceLockLimits.MaxHolderId, "MaxHolderId");
            Check.Equal(int.Parse(Number(line, "max_leader_value_bytes")), FenceLockLimits.MaxLeaderValueBytes,
                "MaxLeaderValueBytes");
            Check.Equal(int.Parse(Number(line, "max_permits")), FenceLockLimits.MaxPermits, "MaxPermits");
            Check.Equal(FenceLockLimits.MaxHolderId, Fence.MaxHolderId, "Fence.MaxHolderId");
            return Task.CompletedTask;
        }

        /// <summary>
        /// The metrics table: one <see cref="FenceLockMetrics"/> property per
        /// field (in PascalCase) and no other, and the latency buckets' bounds.
        /// </summary>
        internal static Task MetricsAreTheVectors()
        {
            var line = System.IO.File.ReadAllLines(VectorsPath).Single(l => l.StartsWith("  \"metrics\": {"));
            var fields = Regex.Match(line, "\"fields\": \\[([^\\]]*)\\]").Groups[1].Value
                .Split(',').Select(field => Pascal(field.Trim().Trim('"'))).OrderBy(n => n).ToList();
            Check.That(fields.Count >= 9, "the vectors list the metrics' fields");
            var properties = typeof(FenceLockMetrics).GetProperties().Select(p => p.Name).OrderBy(n => n);
            Check.Equal(string.Join(",", fields), string.Join(",", properties), "FenceLockMetrics has the vectors' fields");
            var seconds = Regex.Match(line, "\"latency_buckets_seconds\": \\[([^\\]]*)\\]").Groups[1].Value
                .Split(',').Select(s => double.Parse(s, System.Globalization.CultureInfo.InvariantCulture)).ToList();
            var bounds = FenceLockLatency.BucketBounds;
            Check.Equal(seconds.Count, bounds.Count, "as many buckets as the vectors");
            for (var i = 0; i < seconds.Count; i++)
                Check.Equal((long)Math.Round(seconds[i] * TimeSpan.TicksPerSecond), bounds[i].Ticks, "bucket " + i);
            Check.Equal(TimeSpan.FromTicks(5000), bounds[0], "the first bound (0.5 ms)");
            Check.Equal(TimeSpan.FromSeconds(10), bounds[bounds.Count - 1], "the last bound");
            return Task.CompletedTask;
        }
    }
}

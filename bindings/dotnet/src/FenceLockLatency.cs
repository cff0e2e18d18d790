using System;
using System.Collections.Generic;
using System.Collections.ObjectModel;
using System.Linq;
using System.Runtime.InteropServices;

namespace FenceLock
{
    /// <summary>
    /// How long a client's acquire calls took (<see cref="FenceLockMetrics.AcquireLatency"/>):
    /// a histogram with Prometheus's cumulative buckets, and quantile estimates from it.
    /// </summary>
    public sealed class FenceLockLatency
    {
        private static readonly Lazy<IReadOnlyList<TimeSpan>> Bounds =
            new Lazy<IReadOnlyList<TimeSpan>>(ReadBounds);

        internal FenceLockLatency(NativeMethods.NativeMetrics native)
        {
            Count = FenceLockMetrics.Count(native.LatencyCount);
            Sum = FromNanoseconds(native.LatencySumNs);
            var bounds = BucketBounds;
            Buckets = new ReadOnlyCollection<LatencyBucket>(Enumerable.Range(0, bounds.Count)
                .Select(i => new LatencyBucket(bounds[i], FenceLockMetrics.Count(native.LatencyBuckets[i])))
                .ToList());
            P50 = Estimate(native.LatencyP50Ns);
            P99 = Estimate(native.LatencyP99Ns);
        }

        /// <summary>
        /// The upper bounds of the buckets, ascending (0.5 ms to 10 s, the
        /// <c>latency_buckets_seconds</c> every front shares), as the loaded
        /// libfencelock has them (<c>fencelock_latency_buckets</c>).
        /// </summary>
        public static IReadOnlyList<TimeSpan> BucketBounds => Bounds.Value;

        /// <summary>How many acquire calls were timed (every acquisition and every failure).</summary>
        public long Count { get; }

        /// <summary>Their total duration.</summary>
        public TimeSpan Sum { get; }

        /// <summary>
        /// One bucket per <see cref="BucketBounds"/> entry: how many calls took
        /// at most its bound (cumulative); the other <see cref="Count"/> minus
        /// the last bucket's took longer than the last bound.
        /// </summary>
        public IReadOnlyList<LatencyBucket> Buckets { get; }

        /// <summary>
        /// The estimated median: the bound of the bucket it falls in; null
        /// with nothing timed yet, or past the last bound.
        /// </summary>
        public TimeSpan? P50 { get; }

        /// <summary>The estimated 99th percentile, as <see cref="P50"/>.</summary>
        public TimeSpan? P99 { get; }

        private static TimeSpan FromNanoseconds(ulong nanoseconds) =>
            TimeSpan.FromTicks((long)(nanoseconds / 100));

        private static TimeSpan? Estimate(ulong nanoseconds) =>
            nanoseconds == NativeMethods.NativeMetrics.NoEstimate ? (TimeSpan?)null : FromNanoseconds(nanoseconds);

        private static IReadOnlyList<TimeSpan> ReadBounds()
        {
            var nanoseconds = new long[NativeMethods.NativeMetrics.BucketCount];
            Marshal.Copy(NativeMethods.fencelock_latency_buckets(), nanoseconds, 0, nanoseconds.Length);
            return new ReadOnlyCollection<TimeSpan>(nanoseconds.Select(ns => FromNanoseconds((ulong)ns)).ToList());
        }
    }
}

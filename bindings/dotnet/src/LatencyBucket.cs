using System;

namespace FenceLock
{
    /// <summary>
    /// One bucket of <see cref="FenceLockLatency.Buckets"/>: how many acquire
    /// calls took at most <see cref="UpperBound"/> (cumulative, as Prometheus counts).
    /// </summary>
    public struct LatencyBucket
    {
        /// <summary>A bucket of <paramref name="count"/> calls that took at most <paramref name="upperBound"/>.</summary>
        public LatencyBucket(TimeSpan upperBound, long count)
        {
            UpperBound = upperBound;
            Count = count;
        }

        /// <summary>The bucket's upper bound (inclusive).</summary>
        public TimeSpan UpperBound { get; }

        /// <summary>How many calls took at most <see cref="UpperBound"/>.</summary>
        public long Count { get; }

        /// <summary><c>"&lt;= 00:00:00.0010000: 3"</c>, for logs.</summary>
        public override string ToString() => "<= " + UpperBound + ": " + Count;
    }
}

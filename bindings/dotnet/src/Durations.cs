using System;
using System.Threading;

namespace FenceLock
{
    /// <summary>
    /// TimeSpan to the ABI's milliseconds, with the ranges the header states
    /// checked here so the mistake surfaces as an
    /// <see cref="ArgumentOutOfRangeException"/> naming the parameter.
    /// </summary>
    internal static class Durations
    {
        /// <summary>Shortest ttl the core accepts (core/src/options.rs MIN_TTL).</summary>
        internal static readonly TimeSpan MinTtl = TimeSpan.FromMilliseconds(10);

        /// <summary>Longest ttl: INT32_MAX ms (the PX argument Redis takes).</summary>
        internal static readonly TimeSpan MaxTtl = TimeSpan.FromMilliseconds(int.MaxValue);

        /// <summary>Longest wait the core accepts (MAX_WAIT, 366 days); also what an infinite wait means.</summary>
        internal static readonly TimeSpan MaxWait = TimeSpan.FromDays(366);

        /// <summary>A ttl in whole milliseconds (rounded up, so 9.5 ms is refused rather than truncated).</summary>
        internal static ulong Ttl(TimeSpan ttl, string parameterName)
        {
            if (ttl < MinTtl || ttl > MaxTtl)
                throw new ArgumentOutOfRangeException(parameterName, ttl,
                    "a ttl must be from 10 ms to " + int.MaxValue + " ms");
            return CeilingMilliseconds(ttl);
        }

        /// <summary>A wait: zero for one attempt, <see cref="Timeout.InfiniteTimeSpan"/> for the longest allowed.</summary>
        internal static ulong Wait(TimeSpan wait, string parameterName)
        {
            if (wait == Timeout.InfiniteTimeSpan) return CeilingMilliseconds(MaxWait);
            if (wait < TimeSpan.Zero || wait > MaxWait)
                throw new ArgumentOutOfRangeException(parameterName, wait,
                    "a wait must be from 0 to 366 days, or Timeout.InfiniteTimeSpan");
            return CeilingMilliseconds(wait);
        }

        private static ulong CeilingMilliseconds(TimeSpan span)
        {
            return (ulong)((span.Ticks + TimeSpan.TicksPerMillisecond - 1) / TimeSpan.TicksPerMillisecond);
        }
    }
}

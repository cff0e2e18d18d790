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
        /// <summary>A ttl in whole milliseconds (rounded up, so 9.5 ms is refused rather than truncated).</summary>
        internal static ulong Ttl(TimeSpan ttl, string parameterName)
        {
            if (ttl < FenceLockLimits.MinTtl || ttl > FenceLockLimits.MaxTtl)
                throw new ArgumentOutOfRangeException(parameterName, ttl,
                    "a ttl must be from " + FenceLockLimits.MinTtl.TotalMilliseconds + " ms to "
                    + FenceLockLimits.MaxTtl.TotalMilliseconds + " ms");
            return CeilingMilliseconds(ttl);
        }

        /// <summary>A wait: zero for one attempt, <see cref="Timeout.InfiniteTimeSpan"/> for the longest allowed.</summary>
        internal static ulong Wait(TimeSpan wait, string parameterName)
        {
            if (wait == Timeout.InfiniteTimeSpan) return CeilingMilliseconds(FenceLockLimits.MaxWait);
            if (wait < TimeSpan.Zero || wait > FenceLockLimits.MaxWait)
                throw new ArgumentOutOfRangeException(parameterName, wait,
                    "a wait must be from 0 to " + FenceLockLimits.MaxWait.TotalDays
                    + " days, or Timeout.InfiniteTimeSpan");
            return CeilingMilliseconds(wait);
        }

        /// <summary>A cap on a hold: not negative, in whole milliseconds (rounded up).</summary>
        internal static ulong Cap(TimeSpan cap, string parameterName)
        {
            if (cap < TimeSpan.Zero)
                throw new ArgumentOutOfRangeException(parameterName, cap, "must not be negative");
            return CeilingMilliseconds(cap);
        }

        private static ulong CeilingMilliseconds(TimeSpan span)
        {
            return (ulong)((span.Ticks + TimeSpan.TicksPerMillisecond - 1) / TimeSpan.TicksPerMillisecond);
        }
    }
}

using System;
using System.Runtime.InteropServices;

namespace FenceLock
{
    /// <summary>
    /// The limits of the loaded libfencelock (<c>fencelock_get_limits</c>),
    /// read once: what this binding checks arguments against, so it never
    /// keeps copies of the core's numbers.
    /// </summary>
    public static class FenceLockLimits
    {
        private static readonly NativeMethods.NativeLimits Native =
            Marshal.PtrToStructure<NativeMethods.NativeLimits>(NativeMethods.fencelock_get_limits());

        /// <summary>Shortest ttl accepted.</summary>
        public static TimeSpan MinTtl { get; } = TimeSpan.FromMilliseconds(Native.MinTtlMs);

        /// <summary>Longest ttl accepted (INT32_MAX ms, what Redis's PEXPIRE takes).</summary>
        public static TimeSpan MaxTtl { get; } = TimeSpan.FromMilliseconds(Native.MaxTtlMs);

        /// <summary>Longest wait accepted (366 days); what an infinite wait means.</summary>
        public static TimeSpan MaxWait { get; } = TimeSpan.FromMilliseconds(Native.MaxWaitMs);

        /// <summary>Longest resource name (and fenced key), in bytes of UTF-8.</summary>
        public static int MaxResourceBytes { get; } = checked((int)Native.MaxResourceBytes.ToUInt64());

        /// <summary>Longest key prefix, in bytes of UTF-8.</summary>
        public static int MaxPrefixBytes { get; } = checked((int)Native.MaxPrefixBytes.ToUInt64());

        /// <summary>Largest clock-drift factor a client accepts.</summary>
        public static double MaxDriftFactor { get; } = Native.MaxDriftFactor;

        /// <summary>Largest fencing token handed out (2^53 - 1).</summary>
        public static ulong MaxFencingToken { get; } = Native.MaxFencingToken;

        /// <summary>Longest value a leader may announce (<see cref="FenceLockClient.CampaignAsync(string, TimeSpan, TimeSpan, byte[], System.Threading.CancellationToken)"/>), in bytes.</summary>
        public static int MaxLeaderValueBytes { get; } = checked((int)Native.MaxLeaderValueBytes.ToUInt64());

        /// <summary>Most permits a semaphore may have (<see cref="FenceLockClient.Semaphore"/>).</summary>
        public static int MaxPermits { get; } = checked((int)Native.MaxPermits);

        /// <summary>Largest holder id of a fence (fits a signed 64-bit SQL column).</summary>
        public static ulong MaxHolderId { get; } = Native.MaxHolderId;
    }
}

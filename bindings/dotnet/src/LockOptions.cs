using System;

namespace FenceLock
{
    /// <summary>
    /// What one acquire asks for (<see cref="FenceLockClient.AcquireAsync(string, LockOptions, System.Threading.CancellationToken)"/>):
    /// the lease, and optionally the wait, auto-renewal, caps on renewal and fair waiting.
    /// Unset properties take the client's defaults (<see cref="FenceLockOptions"/>).
    /// </summary>
    public sealed class LockOptions
    {
        /// <summary>Options with this lease: <see cref="FenceLockLimits.MinTtl"/> to <see cref="FenceLockLimits.MaxTtl"/>.</summary>
        public LockOptions(TimeSpan ttl)
        {
            Ttl = ttl;
        }

        /// <summary>The lease on Redis; renewed every third of it while held, unless <see cref="AutoRenew"/> is false.</summary>
        public TimeSpan Ttl { get; set; }

        /// <summary>How long to keep trying while another owner holds the lock: zero for one attempt,
        /// <see cref="System.Threading.Timeout.InfiniteTimeSpan"/> for the longest allowed; null for the client's default.</summary>
        public TimeSpan? Wait { get; set; }

        /// <summary>Renew the lease while held (null: the client's default, on). False gives a fixed lease
        /// that ends at <see cref="Ttl"/> unless extended.</summary>
        public bool? AutoRenew { get; set; }

        /// <summary>Stop renewing so the lock is not held longer than this in total (null: no cap).
        /// The lock then ends at its lease and <see cref="FenceLockHandle.LostToken"/> fires with reason Expired.</summary>
        public TimeSpan? MaxHold { get; set; }

        /// <summary>Stop renewing after this many renewals (null: no cap).</summary>
        public uint? MaxRenewals { get; set; }

        /// <summary>Fair (FIFO) waiting: never take the lock ahead of an earlier waiter, even when it is free
        /// at the moment this asks. False (the default): waiters are still woken in arrival order, but a
        /// newcomer may take a free lock.</summary>
        public bool Fair { get; set; }
    }
}

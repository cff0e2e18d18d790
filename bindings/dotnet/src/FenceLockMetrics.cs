using System;
using System.Collections.Generic;
using System.Collections.ObjectModel;
using System.Runtime.InteropServices;

namespace FenceLock
{
    /// <summary>
    /// A snapshot of what one <see cref="FenceLockClient"/> has counted since
    /// it was made (<see cref="FenceLockClient.Metrics"/>; design.md §8, the
    /// same numbers every front reports). Acquisitions count every acquire of
    /// the client: locks, semaphore permits, read and write grants and
    /// campaigns. Immutable: share it between threads freely.
    /// </summary>
    /// <remarks>
    /// Each counter is read on its own, so a snapshot taken while locks come
    /// and go may mix moments. <c>System.Diagnostics.Metrics</c> instruments
    /// are not published: the Mono runtime this binding is built and tested
    /// with has no <c>System.Diagnostics.Metrics</c>; poll this snapshot and
    /// export it yourself.
    /// </remarks>
    public sealed class FenceLockMetrics
    {
        private FenceLockMetrics(NativeMethods.NativeMetrics native)
        {
            Acquired = Count(native.Acquired);
            Released = Count(native.Released);
            Renewals = Count(native.Renewals);
            RenewalFailures = Count(native.RenewalFailures);
            Held = Count(native.Held);
            Waiting = Count(native.Waiting);
            var failed = new Dictionary<FenceLockStatus, long>();
            var nFailed = Math.Min((int)native.NFailed.ToUInt64(), NativeMethods.NativeMetrics.MaxKinds);
            for (var i = 0; i < nFailed; i++)
                failed[(FenceLockStatus)native.Failed[i].Kind] = Count(native.Failed[i].Count);
            Failed = new ReadOnlyDictionary<FenceLockStatus, long>(failed);
            var lost = new Dictionary<LockLossReason, long>();
            var nLost = Math.Min((int)native.NLost.ToUInt64(), NativeMethods.NativeMetrics.MaxReasons);
            for (var i = 0; i < nLost; i++)
                lost[(LockLossReason)native.Lost[i].Reason] = Count(native.Lost[i].Count);
            Lost = new ReadOnlyDictionary<LockLossReason, long>(lost);
            AcquireLatency = new FenceLockLatency(native);
        }

        /// <summary>Acquisitions that returned a lock, a permit or a grant.</summary>
        public long Acquired { get; }

        /// <summary>
        /// Acquisitions that failed, by error kind: every kind the library
        /// knows, zeros included. A refused <c>TryAcquireAsync</c> counts as
        /// <see cref="FenceLockStatus.NotAcquired"/>, a wait that ran out as
        /// <see cref="FenceLockStatus.Timeout"/>, an acquire stopped by its
        /// <see cref="System.Threading.CancellationToken"/> as
        /// <see cref="FenceLockStatus.Cancelled"/>.
        /// </summary>
        public IReadOnlyDictionary<FenceLockStatus, long> Failed { get; }

        /// <summary>Held locks lost, by reason: every reason, zeros included.</summary>
        public IReadOnlyDictionary<LockLossReason, long> Lost { get; }

        /// <summary>Releases that succeeded (a release of a lock no longer held is none).</summary>
        public long Released { get; }

        /// <summary>Automatic renewals that succeeded.</summary>
        public long Renewals { get; }

        /// <summary>Automatic renewals that failed (retried until the lock is lost).</summary>
        public long RenewalFailures { get; }

        /// <summary>Gauge: locks held now (not released, lost or disposed).</summary>
        public long Held { get; }

        /// <summary>Gauge: acquire calls waiting in a lock's queue now.</summary>
        public long Waiting { get; }

        /// <summary>How long acquire calls took, successful or not.</summary>
        public FenceLockLatency AcquireLatency { get; }

        /// <summary>A snapshot of the native client <paramref name="client"/> (<c>fencelock_client_metrics</c>).</summary>
        internal static FenceLockMetrics Read(ClientSafeHandle client)
        {
            var size = Marshal.SizeOf(typeof(NativeMethods.NativeMetrics));
            var buffer = Marshal.AllocHGlobal(size);
            try
            {
                Marshal.WriteIntPtr(buffer, new IntPtr(size));
                var error = IntPtr.Zero;
                NativeErrors.Check(NativeMethods.fencelock_client_metrics(client, buffer, ref error), error);
                return new FenceLockMetrics(Marshal.PtrToStructure<NativeMethods.NativeMetrics>(buffer));
            }
            finally
            {
                Marshal.FreeHGlobal(buffer);
            }
        }

        /// <summary>A native count as a long (counts never come near 2^63).</summary>
        internal static long Count(ulong count) => count > long.MaxValue ? long.MaxValue : (long)count;
    }
}

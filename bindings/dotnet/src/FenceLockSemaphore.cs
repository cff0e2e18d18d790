using System;
using System.Threading;
using System.Threading.Tasks;

namespace FenceLock
{
    /// <summary>
    /// A counting semaphore on the client's nodes, from
    /// <see cref="FenceLockClient.Semaphore"/>: at most <see cref="Permits"/>
    /// holders at once, across every process and language that uses it.
    /// (Named so as not to clash with <see cref="System.Threading.Semaphore"/>,
    /// which counts within one machine.)
    ///
    /// Each permit is handed out as a <see cref="FenceLockHandle"/>: it has its
    /// own lease, renewed in the background; its own fencing token (the
    /// successive holders of one permit get increasing tokens); a
    /// <see cref="FenceLockHandle.LostToken"/>; and <see cref="FenceLockHandle.Permit"/>
    /// says which permit it is. Disposing or releasing it frees the permit for
    /// the next waiter at once. Every user of a semaphore must give the same
    /// number of permits while it is in use.
    ///
    /// The object holds no native resource and costs nothing to create: the
    /// nodes learn of the semaphore on the first acquire. Thread-safe.
    /// </summary>
    public sealed class FenceLockSemaphore
    {
        private readonly FenceLockClient client;
        private readonly byte[] name;
        private readonly uint permits;

        internal FenceLockSemaphore(FenceLockClient client, string name, byte[] encodedName, int permits)
        {
            this.client = client;
            this.name = encodedName;
            this.permits = (uint)permits;
            Name = name;
            Permits = permits;
        }

        /// <summary>The semaphore's name (its permits' <see cref="FenceLockHandle.Resource"/>).</summary>
        public string Name { get; }

        /// <summary>How many holders it admits at once.</summary>
        public int Permits { get; }

        /// <summary>
        /// Takes a permit, waiting (woken by push when a holder releases, no
        /// thread blocked) for up to <paramref name="wait"/> while every permit
        /// is held. The permit lives <paramref name="ttl"/> on Redis and is
        /// renewed until released.
        /// </summary>
        /// <param name="ttl">Lease on Redis: <see cref="FenceLockLimits.MinTtl"/> to <see cref="FenceLockLimits.MaxTtl"/>.</param>
        /// <param name="wait">How long to keep trying: zero for one attempt, up to <see cref="FenceLockLimits.MaxWait"/>,
        /// or <see cref="Timeout.InfiniteTimeSpan"/> for the longest allowed.</param>
        /// <param name="cancellationToken">Stops the wait: the task is cancelled and any partial grant undone.</param>
        /// <returns>The permit: a lock handle whose <see cref="FenceLockHandle.Permit"/> is 0 to <see cref="Permits"/> - 1.</returns>
        /// <exception cref="ArgumentOutOfRangeException"><paramref name="ttl"/> or <paramref name="wait"/> out of range.</exception>
        /// <exception cref="ObjectDisposedException">The client was disposed.</exception>
        /// <remarks>The task faults with <see cref="LockTimeoutException"/> (every permit held for the whole wait),
        /// <see cref="NotAcquiredException"/> (every permit held, zero wait), <see cref="UnavailableException"/>
        /// (no majority answered), each with per-node detail, or <see cref="ArgumentException"/> when the nodes
        /// hold this semaphore with another number of permits (the message says "has N permits").</remarks>
        public Task<FenceLockHandle> AcquireAsync(TimeSpan ttl, TimeSpan wait,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            return Start(ttl, Durations.Wait(wait, nameof(wait)), false, cancellationToken);
        }

        /// <summary>
        /// Takes a permit with per-permit <paramref name="options"/>: the lease,
        /// the wait, auto-renewal, caps on renewal and fair waiting (never take a
        /// free permit ahead of an earlier waiter). Unset ones take the client's
        /// defaults. Otherwise as <see cref="AcquireAsync(TimeSpan, TimeSpan, CancellationToken)"/>.
        /// </summary>
        /// <exception cref="ArgumentNullException"><paramref name="options"/> is null.</exception>
        /// <exception cref="ArgumentOutOfRangeException">A duration in <paramref name="options"/> is out of range.</exception>
        /// <exception cref="ObjectDisposedException">The client was disposed.</exception>
        public Task<FenceLockHandle> AcquireAsync(LockOptions options,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            return Start(options, null, false, cancellationToken);
        }

        /// <summary>
        /// One attempt to take a permit: the handle, or null when every permit is held.
        /// Arguments and errors as <see cref="AcquireAsync(TimeSpan, TimeSpan, CancellationToken)"/>.
        /// </summary>
        public Task<FenceLockHandle> TryAcquireAsync(TimeSpan ttl,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            return Start(ttl, 0, true, cancellationToken);
        }

        /// <summary>
        /// One attempt with per-permit <paramref name="options"/> (their
        /// <see cref="LockOptions.Wait"/> is ignored): the handle, or null when
        /// every permit is held (or, fair, when an earlier waiter is first in line).
        /// </summary>
        public Task<FenceLockHandle> TryAcquireAsync(LockOptions options,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            return Start(options, 0, true, cancellationToken);
        }

        /// <summary>
        /// How many permits are held now: those held on a majority of the nodes
        /// (a permit being handed to a waiter is not counted). For monitoring:
        /// the answer may be out of date when it arrives.
        /// </summary>
        /// <remarks>Runs <c>fencelock_semaphore_holders_async</c>: no thread waits for the round trip
        /// to the nodes (bounded by the connect timeout), and <paramref name="cancellationToken"/>
        /// stops it in flight (the task is then cancelled). The task faults with
        /// <see cref="UnavailableException"/> when no majority answered.</remarks>
        /// <exception cref="ObjectDisposedException">The client was disposed.</exception>
        public Task<int> HoldersAsync(CancellationToken cancellationToken = default(CancellationToken))
        {
            var native = client.NativeHandle();
            return new HoldersOperation(cancellationToken).Start((IntPtr userData, out IntPtr operation, ref IntPtr error) =>
                NativeMethods.fencelock_semaphore_holders_async(native, name, permits, HoldersOperation.Callback, userData,
                    out operation, ref error));
        }

        /// <inheritdoc />
        public override string ToString() => "FenceLockSemaphore(" + Name + ", " + Permits + " permits)";

        private Task<FenceLockHandle> Start(TimeSpan ttl, ulong waitMs, bool heldIsNull,
            CancellationToken cancellationToken)
        {
            var ttlMs = Durations.Ttl(ttl, nameof(ttl));
            var native = client.NativeHandle();
            return new AcquireOperation(heldIsNull, cancellationToken).Start(
                (IntPtr userData, out IntPtr operation, ref IntPtr error) =>
                    NativeMethods.fencelock_semaphore_acquire_async(native, name, permits, ttlMs, waitMs,
                        AcquireOperation.Callback, userData, out operation, ref error));
        }

        private Task<FenceLockHandle> Start(LockOptions options, ulong? forceWaitMs, bool heldIsNull,
            CancellationToken cancellationToken)
        {
            using (var nativeOptions = NativeLockOptions.Create(options, forceWaitMs))
            {
                var native = client.NativeHandle();
                // The call copies the options: they may be freed as soon as it returns.
                return new AcquireOperation(heldIsNull, cancellationToken).Start(
                    (IntPtr userData, out IntPtr operation, ref IntPtr error) =>
                        NativeMethods.fencelock_semaphore_acquire_with_async(native, name, permits, nativeOptions,
                            AcquireOperation.Callback, userData, out operation, ref error));
            }
        }
    }
}

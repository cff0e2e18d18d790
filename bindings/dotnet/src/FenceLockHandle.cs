using System;
using System.Threading;
using System.Threading.Tasks;

namespace FenceLock
{
    /// <summary>
    /// A held lock, from <see cref="FenceLockClient.AcquireAsync(string, System.TimeSpan, System.TimeSpan, System.Threading.CancellationToken)"/> or
    /// <see cref="FenceLockClient.TryAcquireAsync(string, System.TimeSpan, System.Threading.CancellationToken)"/>, or a
    /// semaphore's permit (<see cref="FenceLockSemaphore"/>, <see cref="Permit"/>), or a read-write lock's
    /// read or write grant (<see cref="FenceLockReaderWriterLock"/>). It is renewed in the
    /// background until released or disposed (unless auto-renew is off).
    ///
    /// End it with <c>await handle.DisposeAsync()</c> (release, then free) or
    /// <see cref="ReleaseAsync"/> to see the release's outcome.
    /// <see cref="Dispose"/> never blocks: it starts the release in the
    /// background and frees the handle at once. A handle dropped without
    /// either is finalized like <c>fencelock_lock_free</c>: renewal stops and
    /// the key expires at its ttl. Thread-safe, except that disposing while
    /// another thread uses the handle makes that use throw
    /// <see cref="ObjectDisposedException"/>.
    /// </summary>
    public sealed class FenceLockHandle : IAsyncDisposable, IDisposable
    {
        private readonly LockSafeHandle native;
        private readonly CancellationTokenSource lost = new CancellationTokenSource();
        private int lossReason;
        private int released;
        private int disposed;

        internal FenceLockHandle(LockSafeHandle native)
        {
            this.native = native;
            Resource = Utf8.Decode(NativeMethods.fencelock_lock_resource(native));
            Fence fence;
            NativeErrors.Check(NativeMethods.fencelock_lock_fence(native, out fence), IntPtr.Zero);
            Fence = fence;
            FencingToken = fence.Token;
            uint permit;
            Permit = NativeMethods.fencelock_lock_permit(native, out permit) ? checked((int)permit) : (int?)null;
            // A lock lost already is reported at once, with its reason.
            LossCallback.Attach(native, this);
        }

        /// <summary>The locked resource. Still readable after dispose.</summary>
        public string Resource { get; }

        /// <summary>
        /// The fencing token: greater than every earlier holder's token for
        /// this resource. Send it with every write to the protected storage
        /// (see <see cref="FenceLockClient.FencedSetAsync"/>). Still readable after dispose.
        /// </summary>
        public ulong FencingToken { get; }

        /// <summary>
        /// For a semaphore's permit (<see cref="FenceLockSemaphore.AcquireAsync(TimeSpan, TimeSpan, CancellationToken)"/>):
        /// which of its permits this is, 0 to <see cref="FenceLockSemaphore.Permits"/> - 1 (two holders of
        /// one semaphore at once never share a number). Null for a lock or a leadership. Still readable after dispose.
        /// </summary>
        public int? Permit { get; }

        /// <summary>
        /// What a fenced write of this holder carries: the fencing token and
        /// this grant's holder id (see <see cref="FenceLockClient.FencedSetAsync"/>).
        /// Still readable after dispose.
        /// </summary>
        public Fence Fence { get; }

        /// <summary>Whether the lock is held: not released, not lost, validity not run out. Never blocks.</summary>
        /// <exception cref="ObjectDisposedException">The handle was disposed.</exception>
        public bool IsHeld
        {
            get
            {
                ThrowIfDisposed();
                bool held;
                NativeErrors.Check(NativeMethods.fencelock_lock_is_held(native, out held), IntPtr.Zero);
                return held;
            }
        }

        /// <summary>How long the lock stays valid without another renewal (zero when not held). Never blocks.</summary>
        /// <exception cref="ObjectDisposedException">The handle was disposed.</exception>
        public TimeSpan Remaining
        {
            get
            {
                ThrowIfDisposed();
                ulong remainingMs;
                NativeErrors.Check(NativeMethods.fencelock_lock_remaining_ms(native, out remainingMs), IntPtr.Zero);
                return TimeSpan.FromMilliseconds(remainingMs);
            }
        }

        /// <summary>
        /// Cancelled when the lock is lost while held (key deleted or taken
        /// over, nodes unreachable until the validity ran out). Pass it to the
        /// work the lock protects. Not cancelled by a release. Registered
        /// callbacks run on the thread pool.
        /// </summary>
        public CancellationToken LostToken => lost.Token;

        /// <summary>Why the lock was lost; null while it was not.</summary>
        public LockLossReason? LossReason
        {
            get
            {
                var reason = Volatile.Read(ref lossReason);
                return reason == 0 ? (LockLossReason?)null : (LockLossReason)reason;
            }
        }

        /// <summary>
        /// Sets the lock's ttl to <paramref name="ttl"/> from now on a majority
        /// of nodes; later renewals use it. Does not re-create a missing key.
        /// </summary>
        /// <exception cref="ArgumentOutOfRangeException">ttl outside <see cref="FenceLockLimits.MinTtl"/> … <see cref="FenceLockLimits.MaxTtl"/>.</exception>
        /// <exception cref="ObjectDisposedException">The handle was disposed.</exception>
        /// <remarks>The task faults with <see cref="LockLostException"/> (stop using the resource),
        /// <see cref="NotHeldException"/> (released before) or <see cref="UnavailableException"/>.</remarks>
        public Task ExtendAsync(TimeSpan ttl, CancellationToken cancellationToken = default(CancellationToken))
        {
            var ttlMs = Durations.Ttl(ttl, nameof(ttl));
            ThrowIfDisposed();
            return new DoneOperation(cancellationToken).Start((IntPtr userData, out IntPtr operation, ref IntPtr error) =>
                NativeMethods.fencelock_lock_extend_async(native, ttlMs, DoneOperation.Callback, userData,
                    out operation, ref error));
        }

        /// <summary>
        /// Releases the lock on every node (compare-and-delete) and stops
        /// renewal. The handle must still be disposed.
        /// </summary>
        /// <exception cref="ObjectDisposedException">The handle was disposed.</exception>
        /// <remarks>The task faults with <see cref="NotHeldException"/> when the lock had expired,
        /// been lost or released before, and <see cref="UnavailableException"/> when too few
        /// nodes confirmed it (those that failed get it again in the background, and where
        /// it never lands the lock expires at its ttl).</remarks>
        public Task ReleaseAsync(CancellationToken cancellationToken = default(CancellationToken))
        {
            ThrowIfDisposed();
            var release = new DoneOperation(cancellationToken).Start((IntPtr userData, out IntPtr operation, ref IntPtr error) =>
                NativeMethods.fencelock_lock_release_async(native, DoneOperation.Callback, userData,
                    out operation, ref error));
            return MarkReleasedAfter(release);
        }

        /// <summary>
        /// Releases the lock (a lock no longer held is fine) and frees the
        /// handle. Other release failures (<see cref="UnavailableException"/>)
        /// are thrown after the handle is freed; the key then expires at its ttl.
        /// Calling it again does nothing.
        /// </summary>
        public ValueTask DisposeAsync()
        {
            if (Volatile.Read(ref disposed) != 0) return default(ValueTask);
            return new ValueTask(ReleaseThenFreeAsync());
        }

        /// <summary>
        /// Frees the handle without waiting: if the lock was not released, a
        /// release is started in the background (its outcome is ignored; if
        /// it fails the key expires at its ttl). Never blocks, never throws,
        /// safe to call twice. Prefer <see cref="DisposeAsync"/> where you can await.
        /// </summary>
        public void Dispose()
        {
            if (Interlocked.Exchange(ref disposed, 1) != 0) return;
            if (Volatile.Read(ref released) == 0) StartBackgroundRelease();
            native.Dispose();
        }

        /// <inheritdoc />
        public override string ToString() =>
            "FenceLockHandle(" + Resource + (Permit.HasValue ? ", permit " + Permit : "") + ", token " + FencingToken + ")";

        /// <summary>Called by the lost callback (on fencelock's callback thread): cancel LostToken on the thread pool.</summary>
        internal void OnLost(LockLossReason reason)
        {
            if (Interlocked.CompareExchange(ref lossReason, (int)reason, 0) != 0) return;
            ThreadPool.QueueUserWorkItem(state => ((CancellationTokenSource)state).Cancel(), lost);
        }

        private async Task MarkReleasedAfter(Task release)
        {
            try
            {
                await release.ConfigureAwait(false);
            }
            catch (NotHeldException)
            {
                Volatile.Write(ref released, 1); // nothing left to release either
                throw;
            }
            Volatile.Write(ref released, 1);
        }

        private async Task ReleaseThenFreeAsync()
        {
            try
            {
                if (Volatile.Read(ref released) == 0) await ReleaseAsync().ConfigureAwait(false);
            }
            catch (NotHeldException)
            {
                // Expired, lost or released already: the goal of disposing is met.
            }
            catch (ObjectDisposedException)
            {
                // Disposed concurrently: that Dispose started the release.
            }
            finally
            {
                Dispose();
            }
        }

        private void StartBackgroundRelease()
        {
            try
            {
                var error = IntPtr.Zero;
                IntPtr operation;
                // The lock may be freed right after this returns: the release keeps what it needs.
                // Not OK means nothing started (the error says why); either way nobody waits for it.
                NativeMethods.fencelock_lock_release_async(native, DoneOperation.Discard, IntPtr.Zero,
                    out operation, ref error);
                NativeMethods.fencelock_operation_free(operation);
                NativeMethods.fencelock_error_free(error);
            }
            catch (ObjectDisposedException)
            {
                // Cannot happen (we own the only Dispose), but Dispose must not throw.
            }
        }

        private void ThrowIfDisposed()
        {
            if (Volatile.Read(ref disposed) != 0) throw new ObjectDisposedException(nameof(FenceLockHandle));
        }
    }
}

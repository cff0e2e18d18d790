using System;
using System.Threading;
using System.Threading.Tasks;

namespace FenceLock
{
    /// <summary>
    /// A read-write lock on the client's nodes, from
    /// <see cref="FenceLockClient.ReaderWriterLock"/>: any number of readers at
    /// once, or one writer, across every process and language that uses it.
    /// (Named so as not to clash with <see cref="System.Threading.ReaderWriterLock"/>,
    /// which works within one process.)
    ///
    /// Each read or write grant is handed out as a <see cref="FenceLockHandle"/>:
    /// it has its own lease, renewed in the background (a reader that dies
    /// frees itself at its ttl, whatever the other readers do); its own
    /// fencing token (a writer's is larger than that of every read and write
    /// grant before it, so a store that keeps the largest token it has seen
    /// refuses a stale writer); and a <see cref="FenceLockHandle.LostToken"/>.
    /// Disposing or releasing it lets the next waiters in at once. Writers are
    /// not starved: once a writer waits, readers that ask later queue behind it.
    ///
    /// The object holds no native resource and costs nothing to create: the
    /// nodes learn of the lock on the first acquire. Thread-safe.
    /// </summary>
    public sealed class FenceLockReaderWriterLock
    {
        private readonly FenceLockClient client;
        private readonly byte[] name;

        internal FenceLockReaderWriterLock(FenceLockClient client, string name, byte[] encodedName)
        {
            this.client = client;
            this.name = encodedName;
            Name = name;
        }

        /// <summary>The lock's name (its grants' <see cref="FenceLockHandle.Resource"/>).</summary>
        public string Name { get; }

        /// <summary>
        /// Takes the lock for reading, beside any other readers, waiting (woken
        /// by push when a writer releases, no thread blocked) for up to
        /// <paramref name="wait"/> while a writer holds it or waits ahead. The
        /// grant lives <paramref name="ttl"/> on Redis and is renewed until released.
        /// </summary>
        /// <param name="ttl">Lease on Redis: <see cref="FenceLockLimits.MinTtl"/> to <see cref="FenceLockLimits.MaxTtl"/>.</param>
        /// <param name="wait">How long to keep trying: zero for one attempt, up to <see cref="FenceLockLimits.MaxWait"/>,
        /// or <see cref="Timeout.InfiniteTimeSpan"/> for the longest allowed.</param>
        /// <param name="cancellationToken">Stops the wait: the task is cancelled and any partial grant undone.</param>
        /// <returns>The read grant: a lock handle whose <see cref="FenceLockHandle.Resource"/> is <see cref="Name"/>.</returns>
        /// <exception cref="ArgumentOutOfRangeException"><paramref name="ttl"/> or <paramref name="wait"/> out of range.</exception>
        /// <exception cref="ArgumentException">The name starts with <c>}</c> (refused by libfencelock).</exception>
        /// <exception cref="ObjectDisposedException">The client was disposed.</exception>
        /// <remarks>The task faults with <see cref="LockTimeoutException"/> (a writer held it or waited ahead for
        /// the whole wait), <see cref="NotAcquiredException"/> (the same, zero wait) or <see cref="UnavailableException"/>
        /// (no majority answered), each with per-node detail.</remarks>
        public Task<FenceLockHandle> AcquireReadAsync(TimeSpan ttl, TimeSpan wait,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            return Start(false, ttl, Durations.Wait(wait, nameof(wait)), false, cancellationToken);
        }

        /// <summary>
        /// Takes the lock for reading with per-grant <paramref name="options"/>:
        /// the lease, the wait, auto-renewal, caps on renewal and fair waiting
        /// (never go ahead of an earlier waiter, reader or writer). Unset ones
        /// take the client's defaults. Otherwise as
        /// <see cref="AcquireReadAsync(TimeSpan, TimeSpan, CancellationToken)"/>.
        /// </summary>
        /// <exception cref="ArgumentNullException"><paramref name="options"/> is null.</exception>
        /// <exception cref="ArgumentOutOfRangeException">A duration in <paramref name="options"/> is out of range.</exception>
        /// <exception cref="ObjectDisposedException">The client was disposed.</exception>
        public Task<FenceLockHandle> AcquireReadAsync(LockOptions options,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            return Start(false, options, null, false, cancellationToken);
        }

        /// <summary>
        /// Takes the lock for writing, alone, waiting (woken by push when the
        /// last reader or the writer releases, no thread blocked) for up to
        /// <paramref name="wait"/> while readers or another writer hold it. A
        /// waiting writer waits only for the readers already holding when it
        /// queued. The grant lives <paramref name="ttl"/> on Redis and is renewed until released.
        /// </summary>
        /// <param name="ttl">Lease on Redis: <see cref="FenceLockLimits.MinTtl"/> to <see cref="FenceLockLimits.MaxTtl"/>.</param>
        /// <param name="wait">How long to keep trying: zero for one attempt, up to <see cref="FenceLockLimits.MaxWait"/>,
        /// or <see cref="Timeout.InfiniteTimeSpan"/> for the longest allowed.</param>
        /// <param name="cancellationToken">Stops the wait: the task is cancelled and any partial grant undone
        /// (the readers queued behind this writer may then go in).</param>
        /// <returns>The write grant: a lock handle whose <see cref="FenceLockHandle.FencingToken"/> is larger than
        /// that of every read and write grant of this lock before it.</returns>
        /// <exception cref="ArgumentOutOfRangeException"><paramref name="ttl"/> or <paramref name="wait"/> out of range.</exception>
        /// <exception cref="ArgumentException">The name starts with <c>}</c> (refused by libfencelock).</exception>
        /// <exception cref="ObjectDisposedException">The client was disposed.</exception>
        /// <remarks>The task faults with <see cref="LockTimeoutException"/> (readers or a writer held it for the whole
        /// wait), <see cref="NotAcquiredException"/> (the same, zero wait) or <see cref="UnavailableException"/>
        /// (no majority answered), each with per-node detail.</remarks>
        public Task<FenceLockHandle> AcquireWriteAsync(TimeSpan ttl, TimeSpan wait,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            return Start(true, ttl, Durations.Wait(wait, nameof(wait)), false, cancellationToken);
        }

        /// <summary>
        /// Takes the lock for writing with per-grant <paramref name="options"/>
        /// (as <see cref="AcquireReadAsync(LockOptions, CancellationToken)"/>).
        /// Otherwise as <see cref="AcquireWriteAsync(TimeSpan, TimeSpan, CancellationToken)"/>.
        /// </summary>
        /// <exception cref="ArgumentNullException"><paramref name="options"/> is null.</exception>
        /// <exception cref="ArgumentOutOfRangeException">A duration in <paramref name="options"/> is out of range.</exception>
        /// <exception cref="ObjectDisposedException">The client was disposed.</exception>
        public Task<FenceLockHandle> AcquireWriteAsync(LockOptions options,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            return Start(true, options, null, false, cancellationToken);
        }

        /// <summary>
        /// One attempt to read: the handle, or null when a writer holds the lock or waits for it.
        /// Arguments and errors as <see cref="AcquireReadAsync(TimeSpan, TimeSpan, CancellationToken)"/>.
        /// </summary>
        public Task<FenceLockHandle> TryAcquireReadAsync(TimeSpan ttl,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            return Start(false, ttl, 0, true, cancellationToken);
        }

        /// <summary>
        /// One attempt to read with per-grant <paramref name="options"/> (their
        /// <see cref="LockOptions.Wait"/> is ignored): the handle, or null when a
        /// writer holds the lock or waits for it (or, fair, when an earlier waiter is first in line).
        /// </summary>
        public Task<FenceLockHandle> TryAcquireReadAsync(LockOptions options,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            return Start(false, options, 0, true, cancellationToken);
        }

        /// <summary>
        /// One attempt to write: the handle, or null when a reader or another writer holds the lock.
        /// Arguments and errors as <see cref="AcquireWriteAsync(TimeSpan, TimeSpan, CancellationToken)"/>.
        /// </summary>
        public Task<FenceLockHandle> TryAcquireWriteAsync(TimeSpan ttl,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            return Start(true, ttl, 0, true, cancellationToken);
        }

        /// <summary>
        /// One attempt to write with per-grant <paramref name="options"/> (their
        /// <see cref="LockOptions.Wait"/> is ignored): the handle, or null when a
        /// reader or another writer holds the lock (or, fair, when an earlier waiter is first in line).
        /// </summary>
        public Task<FenceLockHandle> TryAcquireWriteAsync(LockOptions options,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            return Start(true, options, 0, true, cancellationToken);
        }

        /// <inheritdoc />
        public override string ToString() => "FenceLockReaderWriterLock(" + Name + ")";

        private Task<FenceLockHandle> Start(bool write, TimeSpan ttl, ulong waitMs, bool heldIsNull,
            CancellationToken cancellationToken)
        {
            var ttlMs = Durations.Ttl(ttl, nameof(ttl));
            var native = client.NativeHandle();
            return new AcquireOperation(heldIsNull, cancellationToken).Start(
                (IntPtr userData, out IntPtr operation, ref IntPtr error) => write
                    ? NativeMethods.fencelock_rw_write_async(native, name, ttlMs, waitMs,
                        AcquireOperation.Callback, userData, out operation, ref error)
                    : NativeMethods.fencelock_rw_read_async(native, name, ttlMs, waitMs,
                        AcquireOperation.Callback, userData, out operation, ref error));
        }

        private Task<FenceLockHandle> Start(bool write, LockOptions options, ulong? forceWaitMs, bool heldIsNull,
            CancellationToken cancellationToken)
        {
            using (var nativeOptions = NativeLockOptions.Create(options, forceWaitMs))
            {
                var native = client.NativeHandle();
                // The call copies the options: they may be freed as soon as it returns.
                return new AcquireOperation(heldIsNull, cancellationToken).Start(
                    (IntPtr userData, out IntPtr operation, ref IntPtr error) => write
                        ? NativeMethods.fencelock_rw_write_with_async(native, name, nativeOptions,
                            AcquireOperation.Callback, userData, out operation, ref error)
                        : NativeMethods.fencelock_rw_read_with_async(native, name, nativeOptions,
                            AcquireOperation.Callback, userData, out operation, ref error));
            }
        }
    }
}

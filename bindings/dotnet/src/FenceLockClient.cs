using System;
using System.Collections.Generic;
using System.Linq;
using System.Runtime.InteropServices;
using System.Threading;
using System.Threading.Tasks;

namespace FenceLock
{
    /// <summary>
    /// A client of one Redis node (single-node locks) or of N independent
    /// masters (Redlock: a lock needs a majority, N/2+1). Thread-safe: share
    /// one per process. Locks taken through it stay valid, and keep being
    /// renewed, after the client is disposed.
    /// </summary>
    public sealed class FenceLockClient : IDisposable
    {

        private readonly ClientSafeHandle native;
        private int disposed;

        /// <summary>
        /// Connects to <paramref name="nodes"/> (<c>redis://[user:password@]host:port[/db]</c>,
        /// <c>rediss://</c> for TLS, <c>redis+cluster://</c> for one Redis Cluster).
        /// Blocks while connecting (up to the connect timeout, default 1 s); a
        /// node that is merely down does not fail the constructor, since locks
        /// need only a majority.
        /// </summary>
        /// <exception cref="ArgumentNullException"><paramref name="nodes"/> is null.</exception>
        /// <exception cref="ArgumentException">A node is null or not valid Unicode.</exception>
        /// <exception cref="ConfigException">No nodes, a bad or duplicate URL, or a bad option.</exception>
        /// <exception cref="AuthException">A node refused the credentials.</exception>
        /// <exception cref="TlsException">A TLS handshake failed.</exception>
        public FenceLockClient(IEnumerable<string> nodes, FenceLockOptions options = null)
        {
            if (nodes == null) throw new ArgumentNullException(nameof(nodes));
            native = Connect(EncodeNodes(nodes), options);
        }

        /// <summary>Connects to a single node; see <see cref="FenceLockClient(IEnumerable{string}, FenceLockOptions)"/>.</summary>
        public FenceLockClient(string node, FenceLockOptions options = null)
            : this(new[] { node ?? throw new ArgumentNullException(nameof(node)) }, options)
        {
        }

        /// <summary>The version of the loaded libfencelock, <c>MAJOR.MINOR.PATCH</c>.</summary>
        public static string NativeVersion => Utf8.Decode(NativeMethods.fencelock_version());

        /// <summary>
        /// Takes the lock on <paramref name="resource"/>, retrying with backoff
        /// for up to <paramref name="wait"/> while another owner holds it. No
        /// thread is blocked while waiting. The lock lives <paramref name="ttl"/>
        /// on Redis and is renewed until released.
        /// </summary>
        /// <param name="resource">What to lock: 1 to <see cref="FenceLockLimits.MaxResourceBytes"/> bytes of UTF-8.</param>
        /// <param name="ttl">Lease on Redis: <see cref="FenceLockLimits.MinTtl"/> to <see cref="FenceLockLimits.MaxTtl"/>.</param>
        /// <param name="wait">How long to keep trying: zero for one attempt, up to <see cref="FenceLockLimits.MaxWait"/>,
        /// or <see cref="Timeout.InfiniteTimeSpan"/> for the longest allowed.</param>
        /// <param name="cancellationToken">Stops the wait: the task is cancelled and any partial grant undone.</param>
        /// <exception cref="ArgumentNullException"><paramref name="resource"/> is null.</exception>
        /// <exception cref="ArgumentOutOfRangeException"><paramref name="ttl"/> or <paramref name="wait"/> out of range.</exception>
        /// <exception cref="ArgumentException"><paramref name="resource"/> is empty, too long, has a NUL or a lone surrogate.</exception>
        /// <exception cref="ObjectDisposedException">The client was disposed.</exception>
        /// <remarks>The task faults with <see cref="LockTimeoutException"/> (held elsewhere for the whole wait),
        /// <see cref="NotAcquiredException"/> (held elsewhere, zero wait) or
        /// <see cref="UnavailableException"/> (no majority answered), each with per-node detail.</remarks>
        public Task<FenceLockHandle> AcquireAsync(string resource, TimeSpan ttl, TimeSpan wait,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            return StartAcquire(resource, ttl, Durations.Wait(wait, nameof(wait)), false, cancellationToken);
        }

        /// <summary>
        /// Takes the lock on <paramref name="resource"/> with per-lock
        /// <paramref name="options"/>: the lease, the wait, auto-renewal and
        /// caps on renewal (unset ones take the client's defaults). Otherwise
        /// as <see cref="AcquireAsync(string, TimeSpan, TimeSpan, CancellationToken)"/>.
        /// </summary>
        /// <exception cref="ArgumentNullException"><paramref name="resource"/> or <paramref name="options"/> is null.</exception>
        /// <exception cref="ArgumentOutOfRangeException">A duration in <paramref name="options"/> is out of range.</exception>
        /// <exception cref="ObjectDisposedException">The client was disposed.</exception>
        public Task<FenceLockHandle> AcquireAsync(string resource, LockOptions options,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            return StartAcquire(resource, options, null, false, cancellationToken);
        }

        /// <summary>
        /// One attempt with per-lock <paramref name="options"/> (their
        /// <see cref="LockOptions.Wait"/> is ignored): the handle, or null when
        /// another owner holds it.
        /// </summary>
        public Task<FenceLockHandle> TryAcquireAsync(string resource, LockOptions options,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            return StartAcquire(resource, options, 0, true, cancellationToken);
        }

        /// <summary>
        /// One attempt to take the lock: the handle, or null when another owner holds it.
        /// Arguments and errors as <see cref="AcquireAsync(string, TimeSpan, TimeSpan, CancellationToken)"/>.
        /// </summary>
        public Task<FenceLockHandle> TryAcquireAsync(string resource, TimeSpan ttl,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            return StartAcquire(resource, ttl, 0, true, cancellationToken);
        }

        /// <summary>
        /// Campaigns to lead the election <paramref name="name"/>: waits in
        /// line (woken by push, as a lock's waiters are) until it wins, then
        /// announces itself to observers (<see cref="ObserveAsync"/>) with
        /// <paramref name="value"/>. An election is a lock on its name: do not
        /// also lock that name for anything else.
        /// </summary>
        /// <param name="name">The election: 1 to <see cref="FenceLockLimits.MaxResourceBytes"/> bytes of UTF-8.</param>
        /// <param name="ttl">The leader's lease, renewed while it leads: a leader that dies is replaced about one ttl later.</param>
        /// <param name="wait">How long to wait to win: zero for one attempt, or
        /// <see cref="Timeout.InfiniteTimeSpan"/> until elected (at most <see cref="FenceLockLimits.MaxWait"/>).</param>
        /// <param name="value">What observers learn of this leader (an address, an id): null for none, at most
        /// <see cref="FenceLockLimits.MaxLeaderValueBytes"/> bytes.</param>
        /// <param name="cancellationToken">Withdraws the candidate: the task is cancelled.</param>
        /// <exception cref="ArgumentNullException"><paramref name="name"/> is null.</exception>
        /// <exception cref="ArgumentOutOfRangeException"><paramref name="ttl"/> or <paramref name="wait"/> out of range,
        /// or <paramref name="value"/> too long.</exception>
        /// <exception cref="ArgumentException"><paramref name="name"/> is empty, too long, has a NUL or a lone surrogate.</exception>
        /// <exception cref="ObjectDisposedException">The client was disposed.</exception>
        /// <remarks>The task faults as <see cref="AcquireAsync(string, TimeSpan, TimeSpan, CancellationToken)"/>'s does:
        /// <see cref="LockTimeoutException"/> once <paramref name="wait"/> passed, <see cref="NotAcquiredException"/>
        /// when it is zero and another leads.</remarks>
        public Task<Leadership> CampaignAsync(string name, TimeSpan ttl, TimeSpan wait, byte[] value,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            var election = EncodeResource(name, nameof(name));
            var ttlMs = Durations.Ttl(ttl, nameof(ttl));
            var waitMs = Durations.Wait(wait, nameof(wait));
            var announced = value == null ? new byte[0] : (byte[])value.Clone();
            if (announced.Length > FenceLockLimits.MaxLeaderValueBytes)
                throw new ArgumentOutOfRangeException(nameof(value), announced.Length,
                    "a leader's value is at most " + FenceLockLimits.MaxLeaderValueBytes
                    + " bytes: announce an address or an id, not the data itself");
            ThrowIfDisposed();
            var won = new AcquireOperation(false, cancellationToken).Start(
                (IntPtr userData, out IntPtr operation, ref IntPtr error) =>
                    NativeMethods.fencelock_campaign_async(native, election, ttlMs, waitMs, announced,
                        (UIntPtr)(uint)announced.Length, AcquireOperation.Callback, userData, out operation, ref error));
            return AsLeadership(won, announced);
        }

        /// <summary>
        /// As <see cref="CampaignAsync(string, TimeSpan, TimeSpan, byte[], CancellationToken)"/>, announcing
        /// <paramref name="value"/> as UTF-8 text.
        /// </summary>
        public Task<Leadership> CampaignAsync(string name, TimeSpan ttl, TimeSpan wait, string value,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            return CampaignAsync(name, ttl, wait, Utf8.EncodeCounted(value, nameof(value)), cancellationToken);
        }

        /// <summary>
        /// Campaigns until elected, announcing no value; see
        /// <see cref="CampaignAsync(string, TimeSpan, TimeSpan, byte[], CancellationToken)"/>.
        /// </summary>
        public Task<Leadership> CampaignAsync(string name, TimeSpan ttl,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            return CampaignAsync(name, ttl, Timeout.InfiniteTimeSpan, (byte[])null, cancellationToken);
        }

        /// <summary>
        /// Follows the election <paramref name="name"/>: enumerating yields the
        /// current leader (if there is one), then each new one as it announces
        /// itself, learned by push (with a read every 2 s as a safety net); a
        /// reader slower than the elections skips to the latest. It ends only
        /// when the client is disposed: stop with <c>break</c> or <paramref name="cancellationToken"/>
        /// (<c>await foreach</c> then throws <see cref="OperationCanceledException"/>).
        /// Each enumeration holds one subscriber connection per node until it is disposed.
        /// </summary>
        /// <exception cref="ArgumentNullException"><paramref name="name"/> is null.</exception>
        /// <exception cref="ArgumentException"><paramref name="name"/> is empty, too long, has a NUL or a lone surrogate.</exception>
        /// <exception cref="ObjectDisposedException">The client was disposed (here or when enumerating).</exception>
        public IAsyncEnumerable<Leader> ObserveAsync(string name,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            var election = EncodeResource(name, nameof(name));
            ThrowIfDisposed();
            return new LeaderObservation(this, election, cancellationToken);
        }

        /// <summary>
        /// The counting semaphore <paramref name="name"/> with
        /// <paramref name="permits"/> permits: at most that many holders at
        /// once (<see cref="FenceLockSemaphore.AcquireAsync(TimeSpan, TimeSpan, CancellationToken)"/>),
        /// each permit a <see cref="FenceLockHandle"/> with its own lease,
        /// fencing token and <see cref="FenceLockHandle.LostToken"/>. No I/O:
        /// the nodes learn of it on the first acquire. Every user of the
        /// semaphore must give the same <paramref name="permits"/> while it is
        /// in use (an acquire with another number faults with
        /// <see cref="ArgumentException"/>). A semaphore's keys never collide
        /// with those of a lock or election of the same name.
        /// </summary>
        /// <param name="name">The semaphore: 1 to <see cref="FenceLockLimits.MaxResourceBytes"/> bytes of UTF-8.</param>
        /// <param name="permits">How many holders it admits at once: 1 to <see cref="FenceLockLimits.MaxPermits"/>.</param>
        /// <exception cref="ArgumentNullException"><paramref name="name"/> is null.</exception>
        /// <exception cref="ArgumentException"><paramref name="name"/> is empty, too long, has a NUL or a lone surrogate.</exception>
        /// <exception cref="ArgumentOutOfRangeException"><paramref name="permits"/> is below 1 or above
        /// <see cref="FenceLockLimits.MaxPermits"/>.</exception>
        /// <exception cref="ObjectDisposedException">The client was disposed.</exception>
        public FenceLockSemaphore Semaphore(string name, int permits)
        {
            var encoded = EncodeResource(name, nameof(name));
            if (permits < 1 || permits > FenceLockLimits.MaxPermits)
                throw new ArgumentOutOfRangeException(nameof(permits), permits,
                    "a semaphore has 1 to " + FenceLockLimits.MaxPermits + " permits");
            ThrowIfDisposed();
            return new FenceLockSemaphore(this, name, encoded, permits);
        }

        /// <summary>
        /// The read-write lock <paramref name="name"/>: any number of readers
        /// at once (<see cref="FenceLockReaderWriterLock.AcquireReadAsync(TimeSpan, TimeSpan, CancellationToken)"/>)
        /// or one writer (<see cref="FenceLockReaderWriterLock.AcquireWriteAsync(TimeSpan, TimeSpan, CancellationToken)"/>),
        /// each grant a <see cref="FenceLockHandle"/> with its own lease,
        /// fencing token and <see cref="FenceLockHandle.LostToken"/>. No I/O:
        /// the nodes learn of it on the first acquire. A read-write lock's keys
        /// never collide with those of a lock, semaphore or election of the same name.
        /// </summary>
        /// <param name="name">The lock: 1 to <see cref="FenceLockLimits.MaxResourceBytes"/> bytes of UTF-8.</param>
        /// <exception cref="ArgumentNullException"><paramref name="name"/> is null.</exception>
        /// <exception cref="ArgumentException"><paramref name="name"/> is empty, too long, has a NUL or a lone surrogate.</exception>
        /// <exception cref="ObjectDisposedException">The client was disposed.</exception>
        public FenceLockReaderWriterLock ReaderWriterLock(string name)
        {
            var encoded = EncodeResource(name, nameof(name));
            ThrowIfDisposed();
            return new FenceLockReaderWriterLock(this, name, encoded);
        }

        /// <summary>
        /// Writes <paramref name="value"/> to the Redis key <paramref name="key"/>
        /// only if <paramref name="fence"/> (<see cref="FenceLockHandle.Fence"/>)
        /// is newer than the last write's: a larger token, or the same token
        /// from the same grant. A bare token (a <c>ulong</c>) writes only where
        /// every stored token is older. A paused former holder therefore cannot
        /// overwrite newer data.
        /// </summary>
        /// <remarks>Runs <c>fencelock_fenced_set_async</c>: no thread waits for the
        /// round trip, and <paramref name="cancellationToken"/> stops a write
        /// not yet sent. The task faults with <see cref="StaleTokenException"/>
        /// when a newer holder already wrote.</remarks>
        /// <exception cref="ArgumentNullException"><paramref name="key"/> or <paramref name="value"/> is null.</exception>
        /// <exception cref="ObjectDisposedException">The client was disposed.</exception>
        public Task FencedSetAsync(string key, string value, Fence fence,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            var keyBytes = Utf8.EncodeRequired(key, nameof(key));
            var valueBytes = Utf8.EncodeRequired(value, nameof(value));
            ThrowIfDisposed();
            return new DoneOperation(cancellationToken).Start((IntPtr userData, out IntPtr operation, ref IntPtr error) =>
                NativeMethods.fencelock_fenced_set_async(native, keyBytes, valueBytes, fence, DoneOperation.Callback,
                    userData, out operation, ref error));
        }

        /// <summary>
        /// Reads a value written by <see cref="FencedSetAsync"/> and the token
        /// that wrote it (null value and token 0 when the key does not exist).
        /// </summary>
        /// <remarks>Runs <c>fencelock_fenced_get_async</c>: no thread waits for the
        /// round trip, and <paramref name="cancellationToken"/> stops it in flight
        /// (the task is then cancelled). A key libfencelock refuses (empty, too
        /// long, of a lock key's form) faults the task with <see cref="ArgumentException"/>,
        /// as <see cref="FencedSetAsync"/> does.</remarks>
        /// <exception cref="ArgumentNullException"><paramref name="key"/> is null.</exception>
        /// <exception cref="ArgumentException"><paramref name="key"/> has a NUL or a lone surrogate.</exception>
        /// <exception cref="ObjectDisposedException">The client was disposed.</exception>
        public Task<FencedValue> FencedGetAsync(string key, CancellationToken cancellationToken = default(CancellationToken))
        {
            var keyBytes = Utf8.EncodeRequired(key, nameof(key));
            ThrowIfDisposed();
            return new FencedGetOperation(cancellationToken).Start((IntPtr userData, out IntPtr operation, ref IntPtr error) =>
                NativeMethods.fencelock_fenced_get_async(native, keyBytes, FencedGetOperation.Callback, userData,
                    out operation, ref error));
        }

        /// <summary>
        /// Each node's view of the lock on <paramref name="resource"/>, one
        /// <see cref="NodeLockState"/> per node in the order the client was
        /// given them: held or not, the ttl left, the fencing counter and the
        /// live waiters, or the node's error. One read-only script per node,
        /// all at once; the owner's token is never read. For operators
        /// (<c>fencelock inspect</c> shows the same): out of date as soon as it returns.
        /// </summary>
        /// <remarks>Runs <c>fencelock_inspect_async</c>: no thread waits for the
        /// round trip (each node's is bounded by the connect timeout), and
        /// <paramref name="cancellationToken"/> stops it in flight. A node that
        /// does not answer does not fault the task: its entry's
        /// <see cref="NodeLockState.Error"/> says why.</remarks>
        /// <exception cref="ArgumentNullException"><paramref name="resource"/> is null.</exception>
        /// <exception cref="ArgumentException"><paramref name="resource"/> is empty, too long, has a NUL or a lone surrogate.</exception>
        /// <exception cref="ObjectDisposedException">The client was disposed.</exception>
        public Task<IReadOnlyList<NodeLockState>> InspectAsync(string resource,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            var name = EncodeResource(resource);
            ThrowIfDisposed();
            return new InspectOperation(cancellationToken).Start((IntPtr userData, out IntPtr operation, ref IntPtr error) =>
                NativeMethods.fencelock_inspect_async(native, name, InspectOperation.Callback, userData, out operation,
                    ref error));
        }

        /// <summary>
        /// What this client has counted so far (design.md §8): acquisitions,
        /// failures by kind, losses by reason, releases, renewals and renewal
        /// failures, the locks held and the calls waiting now, and the acquire
        /// latency. Each read is a new snapshot (<c>fencelock_client_metrics</c>):
        /// no I/O, never blocks, thread-safe.
        /// </summary>
        /// <exception cref="ObjectDisposedException">The client was disposed.</exception>
        public FenceLockMetrics Metrics
        {
            get
            {
                ThrowIfDisposed();
                return FenceLockMetrics.Read(native);
            }
        }

        /// <summary>
        /// Closes the client without network I/O and without blocking. Locks
        /// taken through it stay valid until released or disposed. Calling it
        /// again does nothing; other members then throw <see cref="ObjectDisposedException"/>.
        /// </summary>
        public void Dispose()
        {
            if (Interlocked.Exchange(ref disposed, 1) != 0) return;
            native.Dispose();
        }

        /// <summary>The native client, for the objects made from this one (a semaphore, a read-write lock).</summary>
        /// <exception cref="ObjectDisposedException">The client was disposed.</exception>
        internal ClientSafeHandle NativeHandle()
        {
            ThrowIfDisposed();
            return native;
        }

        /// <summary>Starts following an election (<c>fencelock_observe</c>) for one enumeration.</summary>
        internal ObservationSafeHandle StartObservation(byte[] election)
        {
            ThrowIfDisposed();
            var error = IntPtr.Zero;
            IntPtr observation;
            NativeErrors.Check(NativeMethods.fencelock_observe(native, election, out observation, ref error), error);
            return new ObservationSafeHandle(observation);
        }

        private static async Task<Leadership> AsLeadership(Task<FenceLockHandle> won, byte[] value)
        {
            return new Leadership(await won.ConfigureAwait(false), value);
        }

        private Task<FenceLockHandle> StartAcquire(string resource, TimeSpan ttl, ulong waitMs, bool heldIsNull,
            CancellationToken cancellationToken)
        {
            var name = EncodeResource(resource);
            var ttlMs = Durations.Ttl(ttl, nameof(ttl));
            ThrowIfDisposed();
            return new AcquireOperation(heldIsNull, cancellationToken).Start(
                (IntPtr userData, out IntPtr operation, ref IntPtr error) =>
                    NativeMethods.fencelock_acquire_async(native, name, ttlMs, waitMs, AcquireOperation.Callback,
                        userData, out operation, ref error));
        }

        private Task<FenceLockHandle> StartAcquire(string resource, LockOptions options, ulong? forceWaitMs,
            bool heldIsNull, CancellationToken cancellationToken)
        {
            var name = EncodeResource(resource);
            using (var nativeOptions = NativeLockOptions.Create(options, forceWaitMs))
            {
                ThrowIfDisposed();
                // The call copies the options: they may be freed as soon as it returns.
                return new AcquireOperation(heldIsNull, cancellationToken).Start(
                    (IntPtr userData, out IntPtr operation, ref IntPtr error) =>
                        NativeMethods.fencelock_acquire_with_async(native, name, nativeOptions, AcquireOperation.Callback,
                            userData, out operation, ref error));
            }
        }

        // The length rule is the library's (FenceLockLimits); checking it here
        // makes the mistake an exception at the call, not a faulted task.
        private static byte[] EncodeResource(string resource, string parameterName = "resource")
        {
            var name = Utf8.EncodeRequired(resource, parameterName);
            var length = name.Length - 1; // without the NUL
            if (length < 1 || length > FenceLockLimits.MaxResourceBytes)
                throw new ArgumentException("a resource is 1 to " + FenceLockLimits.MaxResourceBytes + " bytes of UTF-8, got " + length,
                    parameterName);
            return name;
        }

        private static List<byte[]> EncodeNodes(IEnumerable<string> nodes)
        {
            return nodes.Select(node =>
            {
                if (node == null) throw new ArgumentException("a node URL is null", nameof(nodes));
                return Utf8.Encode(node, nameof(nodes));
            }).ToList();
        }

        // fencelock_client_new takes `const char *const *`: copy each URL to
        // unmanaged memory for the call, then free them (borrowed for the call only).
        private static ClientSafeHandle Connect(List<byte[]> urls, FenceLockOptions options)
        {
            // Before connecting, so this client's own records follow FenceLockLog.Source's switch.
            FenceLockLog.BeforeClientConnects();
            var pointers = new IntPtr[urls.Count];
            try
            {
                for (var i = 0; i < urls.Count; i++)
                {
                    pointers[i] = Marshal.AllocHGlobal(urls[i].Length);
                    Marshal.Copy(urls[i], 0, pointers[i], urls[i].Length);
                }
                using (var nativeOptions = NativeOptions.Create(options))
                {
                    var error = IntPtr.Zero;
                    IntPtr client;
                    var status = NativeMethods.fencelock_client_new(pointers, (UIntPtr)(uint)pointers.Length,
                        nativeOptions, out client, ref error);
                    NativeErrors.Check(status, error);
                    return new ClientSafeHandle(client);
                }
            }
            finally
            {
                foreach (var pointer in pointers) Marshal.FreeHGlobal(pointer);
            }
        }

        private void ThrowIfDisposed()
        {
            if (Volatile.Read(ref disposed) != 0) throw new ObjectDisposedException(nameof(FenceLockClient));
        }
    }
}

using System;
using System.Threading;
using System.Threading.Tasks;

namespace FenceLock
{
    /// <summary>
    /// Leadership of an election, won by
    /// <see cref="FenceLockClient.CampaignAsync(string, TimeSpan, TimeSpan, byte[], CancellationToken)"/>.
    /// It is a lock on the election's name, held and renewed like any
    /// <see cref="FenceLockHandle"/>, and lost the way a lock is lost.
    ///
    /// End it with <c>await leadership.DisposeAsync()</c> or
    /// <see cref="ResignAsync"/>: the next candidate in line wins at once.
    /// <see cref="Dispose"/> never blocks (it resigns in the background). A
    /// leadership dropped without either stops renewing, and another
    /// candidate wins once its lease ends. Thread-safe as a lock handle is.
    /// </summary>
    public sealed class Leadership : IAsyncDisposable, IDisposable
    {
        private readonly FenceLockHandle handle;
        private readonly byte[] value;

        internal Leadership(FenceLockHandle handle, byte[] value)
        {
            this.handle = handle;
            this.value = value;
        }

        /// <summary>The election's name.</summary>
        public string Name => handle.Resource;

        /// <summary>
        /// This leader's epoch: its fencing token, greater than every earlier
        /// leader's. Send it with what the leader writes, so that a deposed
        /// leader's late writes are refused.
        /// </summary>
        public ulong Epoch => handle.FencingToken;

        /// <summary>The epoch with this grant's holder id, for <see cref="FenceLockClient.FencedSetAsync"/>.</summary>
        public Fence Fence => handle.Fence;

        /// <summary>The value announced to observers (a copy).</summary>
        public byte[] Value => (byte[])value.Clone();

        /// <summary>Whether this is still the leader, as far as this process can know. Never blocks.</summary>
        /// <exception cref="ObjectDisposedException">The leadership was disposed.</exception>
        public bool IsLeader => handle.IsHeld;

        /// <summary>
        /// Cancelled when leadership is lost (its lease taken over or run
        /// out); not by resigning. Pass it to the work only a leader may do.
        /// </summary>
        public CancellationToken LostToken => handle.LostToken;

        /// <summary>Why leadership was lost; null while it was not.</summary>
        public LockLossReason? LossReason => handle.LossReason;

        /// <summary>
        /// Gives up leadership at once (a release of the election's lock): the
        /// next candidate in line wins. The leadership must still be disposed.
        /// </summary>
        /// <remarks>The task faults with <see cref="NotHeldException"/> when leadership
        /// had been lost or given up before.</remarks>
        /// <exception cref="ObjectDisposedException">The leadership was disposed.</exception>
        public Task ResignAsync(CancellationToken cancellationToken = default(CancellationToken)) =>
            handle.ReleaseAsync(cancellationToken);

        /// <summary>Resigns (leadership already gone is fine) and frees the handle.</summary>
        public ValueTask DisposeAsync() => handle.DisposeAsync();

        /// <summary>Frees the handle without waiting, resigning in the background. Never throws.</summary>
        public void Dispose() => handle.Dispose();

        /// <inheritdoc />
        public override string ToString() => "Leadership(" + Name + ", epoch " + Epoch + ")";
    }
}

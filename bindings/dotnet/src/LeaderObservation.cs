using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;

namespace FenceLock
{
    /// <summary>
    /// The leaders of one election, from <see cref="FenceLockClient.ObserveAsync"/>:
    /// each enumeration follows the election on its own (one subscription per
    /// node) from the current leader on, and stops when it is disposed
    /// (<c>await foreach</c> does that at the end of the loop) or ends when
    /// the client is disposed.
    /// </summary>
    internal sealed class LeaderObservation : IAsyncEnumerable<Leader>
    {
        private readonly FenceLockClient client;
        private readonly byte[] name;
        private readonly CancellationToken observeToken;

        internal LeaderObservation(FenceLockClient client, byte[] name, CancellationToken observeToken)
        {
            this.client = client;
            this.name = name;
            this.observeToken = observeToken;
        }

        public IAsyncEnumerator<Leader> GetAsyncEnumerator(CancellationToken cancellationToken = default(CancellationToken))
        {
            var tokens = CancellationTokenSource.CreateLinkedTokenSource(observeToken, cancellationToken);
            try
            {
                return new Enumerator(client.StartObservation(name), tokens);
            }
            catch
            {
                tokens.Dispose();
                throw;
            }
        }

        /// <summary>One observation: <c>fencelock_observe</c>, read one leader per <see cref="MoveNextAsync"/>.</summary>
        private sealed class Enumerator : IAsyncEnumerator<Leader>
        {
            private readonly ObservationSafeHandle native;
            private readonly CancellationTokenSource tokens;

            internal Enumerator(ObservationSafeHandle native, CancellationTokenSource tokens)
            {
                this.native = native;
                this.tokens = tokens;
            }

            public Leader Current { get; private set; }

            /// <summary>
            /// Waits for the next leader (the first call: the current one, if
            /// any). False only once the client was disposed: an election has
            /// no last leader. Cancelling the enumeration's token cancels the
            /// wait (<see cref="OperationCanceledException"/>).
            /// </summary>
            public ValueTask<bool> MoveNextAsync()
            {
                var next = new NextLeaderOperation(tokens.Token).Start(
                    (IntPtr userData, out IntPtr operation, ref IntPtr error) =>
                        NativeMethods.fencelock_observation_next_async(native, NextLeaderOperation.Callback, userData,
                            out operation, ref error));
                return new ValueTask<bool>(Advance(next));
            }

            /// <summary>Ends the subscriptions (a pending wait is cancelled). Calling it again does nothing.</summary>
            public ValueTask DisposeAsync()
            {
                native.Dispose();
                tokens.Dispose();
                return default(ValueTask);
            }

            private async Task<bool> Advance(Task<Leader> next)
            {
                var leader = await next.ConfigureAwait(false);
                if (leader == null) return false;
                Current = leader;
                return true;
            }
        }
    }
}

using System;
using System.Collections.Generic;
using System.Runtime.CompilerServices;
using System.Threading;

// The tests compare NativeErrors' table with tests/vectors/protocol.json.
[assembly: InternalsVisibleTo("Tests")]

namespace FenceLock
{
    /// <summary>
    /// Turns a status and its optional <c>fencelock_error</c> into the
    /// exception this binding documents. The error object is read and freed
    /// here, on whatever thread reports it (reading is thread-safe and never
    /// blocks), so no native object outlives the failure.
    /// </summary>
    internal static class NativeErrors
    {
        /// <summary>Throws for any status but OK; frees <paramref name="error"/> either way.</summary>
        internal static void Check(int status, IntPtr error)
        {
            if (status == (int)FenceLockStatus.Ok)
            {
                NativeMethods.fencelock_error_free(error);
                return;
            }
            throw ToException(status, error, CancellationToken.None);
        }

        /// <summary>Builds (does not throw) the exception for a failed status; frees the error object.</summary>
        internal static Exception ToException(int status, IntPtr error, CancellationToken cancellationToken)
        {
            using (var owned = new ErrorSafeHandle(error))
            {
                var message = error == IntPtr.Zero ? null : Utf8.Decode(NativeMethods.fencelock_error_message(owned));
                var nodes = error == IntPtr.Zero ? null : ReadNodes(owned);
                return Create(status, message ?? StatusName(status), nodes, cancellationToken);
            }
        }

        /// <summary>The C name of a status, e.g. FENCELOCK_STATUS_NOT_ACQUIRED.</summary>
        internal static string StatusName(int status)
        {
            return Utf8.Decode(NativeMethods.fencelock_status_name(status));
        }

        private static IReadOnlyList<NodeReport> ReadNodes(ErrorSafeHandle error)
        {
            var count = (int)NativeMethods.fencelock_error_node_count(error).ToUInt64();
            var nodes = new List<NodeReport>(count);
            for (var i = 0; i < count; i++)
            {
                IntPtr node, detail;
                int outcome;
                if (NativeMethods.fencelock_error_node(error, (UIntPtr)(uint)i, out node, out outcome, out detail) != 0)
                    break;
                nodes.Add(new NodeReport(Utf8.Decode(node), (NodeOutcome)outcome, Utf8.Decode(detail)));
            }
            return nodes;
        }

        private static Exception Create(int status, string message, IReadOnlyList<NodeReport> nodes,
            CancellationToken cancellationToken)
        {
            switch ((FenceLockStatus)status)
            {
                case FenceLockStatus.NotAcquired: return new NotAcquiredException(message, nodes);
                case FenceLockStatus.Timeout: return new LockTimeoutException(message, nodes);
                case FenceLockStatus.Unavailable: return new UnavailableException(message, nodes);
                case FenceLockStatus.Lost: return new LockLostException(message, nodes);
                case FenceLockStatus.NotHeld: return new NotHeldException(message, nodes);
                case FenceLockStatus.StaleToken: return new StaleTokenException(message, nodes);
                case FenceLockStatus.Config: return new ConfigException(message, nodes);
                case FenceLockStatus.Auth: return new AuthException(message, nodes);
                case FenceLockStatus.Tls: return new TlsException(message, nodes);
                case FenceLockStatus.Closed: return new ClosedException(message, nodes);
                case FenceLockStatus.WouldBlock: return new WouldBlockException(message, nodes);
                case FenceLockStatus.Internal: return new InternalException(FenceLockStatus.Internal, message, nodes);
                // Mistakes in a call are .NET argument errors, as callers expect.
                case FenceLockStatus.InvalidArgument: return new ArgumentException(message);
                case FenceLockStatus.InvalidUtf8: return new ArgumentException(message);
                case FenceLockStatus.NullArgument: return new ArgumentNullException(null, message);
                case FenceLockStatus.Cancelled: return new OperationCanceledException(message, cancellationToken);
                default: return new InternalException((FenceLockStatus)status, message, nodes);
            }
        }

        /// <summary>True for statuses that mean the call itself was wrong (thrown synchronously).</summary>
        internal static bool IsUsageError(int status)
        {
            return status == (int)FenceLockStatus.InvalidArgument || status == (int)FenceLockStatus.InvalidUtf8
                || status == (int)FenceLockStatus.NullArgument;
        }
    }
}

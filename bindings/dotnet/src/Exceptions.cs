using System;
using System.Collections.Generic;

namespace FenceLock
{
    /// <summary>What one node answered on a failed operation.</summary>
    public sealed class NodeReport
    {
        /// <summary>Creates a report.</summary>
        public NodeReport(string node, NodeOutcome outcome, string detail)
        {
            Node = node;
            Outcome = outcome;
            Detail = detail;
        }

        /// <summary>The node's URL, password removed.</summary>
        public string Node { get; }

        /// <summary>What the node answered.</summary>
        public NodeOutcome Outcome { get; }

        /// <summary>A readable detail (the Redis error, "timed out", …).</summary>
        public string Detail { get; }

        /// <inheritdoc />
        public override string ToString() => Node + ": " + Outcome + " (" + Detail + ")";
    }

    /// <summary>
    /// Base of every failure fencelock reports. <see cref="Status"/> is the C
    /// ABI's status; <see cref="Nodes"/> says what each Redis node answered
    /// (empty when the operation reached none).
    /// </summary>
    /// <remarks>
    /// One subclass per error kind of the core, named by one rule: the kind in
    /// PascalCase plus <c>Exception</c> (<c>not_held</c> is
    /// <see cref="NotHeldException"/>), except <see cref="LockTimeoutException"/>
    /// and <see cref="LockLostException"/> (not to pass for
    /// <see cref="TimeoutException"/> or a lost connection). An invalid
    /// argument is an <see cref="ArgumentException"/>, a cancelled operation an
    /// <see cref="OperationCanceledException"/>, as .NET callers expect. The
    /// tests hold the classes to tests/vectors/protocol.json.
    /// </remarks>
    public class FenceLockException : Exception
    {
        private static readonly IReadOnlyList<NodeReport> NoNodes = new NodeReport[0];

        /// <summary>Creates an exception with a status, a message and per-node detail.</summary>
        public FenceLockException(FenceLockStatus status, string message, IReadOnlyList<NodeReport> nodes = null)
            : base(message)
        {
            Status = status;
            Nodes = nodes ?? NoNodes;
        }

        /// <summary>The status libfencelock returned.</summary>
        public FenceLockStatus Status { get; }

        /// <summary>What each node answered, in the order the client was given them.</summary>
        public IReadOnlyList<NodeReport> Nodes { get; }
    }

    /// <summary>The lock is held by another owner (one attempt, no wait).</summary>
    public class NotAcquiredException : FenceLockException
    {
        /// <summary>Creates the exception.</summary>
        public NotAcquiredException(string message, IReadOnlyList<NodeReport> nodes = null)
            : this(FenceLockStatus.NotAcquired, message, nodes) { }

        /// <summary>For subclasses that are a kind of "not acquired".</summary>
        protected NotAcquiredException(FenceLockStatus status, string message, IReadOnlyList<NodeReport> nodes)
            : base(status, message, nodes) { }
    }

    /// <summary>
    /// Another owner held the lock for the whole wait. A kind of
    /// <see cref="NotAcquiredException"/>, so one catch covers "busy"
    /// whether or not the caller waited.
    /// </summary>
    public sealed class LockTimeoutException : NotAcquiredException
    {
        /// <summary>Creates the exception.</summary>
        public LockTimeoutException(string message, IReadOnlyList<NodeReport> nodes = null)
            : base(FenceLockStatus.Timeout, message, nodes) { }
    }

    /// <summary>Not enough Redis nodes answered to decide (no quorum).</summary>
    public sealed class UnavailableException : FenceLockException
    {
        /// <summary>Creates the exception.</summary>
        public UnavailableException(string message, IReadOnlyList<NodeReport> nodes = null)
            : base(FenceLockStatus.Unavailable, message, nodes) { }
    }

    /// <summary>The lock was lost while held: stop touching what it protects.</summary>
    public sealed class LockLostException : FenceLockException
    {
        /// <summary>Creates the exception.</summary>
        public LockLostException(string message, IReadOnlyList<NodeReport> nodes = null)
            : base(FenceLockStatus.Lost, message, nodes) { }
    }

    /// <summary>The lock was no longer held (expired, lost or already released).</summary>
    public sealed class NotHeldException : FenceLockException
    {
        /// <summary>Creates the exception.</summary>
        public NotHeldException(string message, IReadOnlyList<NodeReport> nodes = null)
            : base(FenceLockStatus.NotHeld, message, nodes) { }
    }

    /// <summary>A fenced write carried an older token than the last write: a newer holder exists.</summary>
    public sealed class StaleTokenException : FenceLockException
    {
        /// <summary>Creates the exception.</summary>
        public StaleTokenException(string message, IReadOnlyList<NodeReport> nodes = null)
            : base(FenceLockStatus.StaleToken, message, nodes) { }
    }

    /// <summary>The client configuration is invalid (bad URL, no nodes, duplicate node, bad option).</summary>
    public sealed class ConfigException : FenceLockException
    {
        /// <summary>Creates the exception.</summary>
        public ConfigException(string message, IReadOnlyList<NodeReport> nodes = null)
            : base(FenceLockStatus.Config, message, nodes) { }
    }

    /// <summary>Redis refused the credentials, or the ACL user lacks a permission.</summary>
    public sealed class AuthException : FenceLockException
    {
        /// <summary>Creates the exception.</summary>
        public AuthException(string message, IReadOnlyList<NodeReport> nodes = null)
            : base(FenceLockStatus.Auth, message, nodes) { }
    }

    /// <summary>The TLS handshake or certificate verification failed.</summary>
    public sealed class TlsException : FenceLockException
    {
        /// <summary>Creates the exception.</summary>
        public TlsException(string message, IReadOnlyList<NodeReport> nodes = null)
            : base(FenceLockStatus.Tls, message, nodes) { }
    }

    /// <summary>The native client is closed (or was made before <c>fork()</c>).</summary>
    public sealed class ClosedException : FenceLockException
    {
        /// <summary>Creates the exception.</summary>
        public ClosedException(string message, IReadOnlyList<NodeReport> nodes = null)
            : base(FenceLockStatus.Closed, message, nodes) { }
    }

    /// <summary>
    /// A blocking native call was made on a thread of an async runtime inside
    /// libfencelock. This binding never does that; seeing it means a bug here,
    /// please report it.
    /// </summary>
    public sealed class WouldBlockException : FenceLockException
    {
        /// <summary>Creates the exception.</summary>
        public WouldBlockException(string message, IReadOnlyList<NodeReport> nodes = null)
            : base(FenceLockStatus.WouldBlock, message, nodes) { }
    }

    /// <summary>A bug in libfencelock (an internal panic caught at the boundary; kind <c>internal</c>), or a status this binding does not know.</summary>
    public sealed class InternalException : FenceLockException
    {
        /// <summary>Creates the exception.</summary>
        public InternalException(FenceLockStatus status, string message, IReadOnlyList<NodeReport> nodes = null)
            : base(status, message, nodes) { }
    }
}

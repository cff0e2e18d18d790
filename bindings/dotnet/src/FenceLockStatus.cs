namespace FenceLock
{
    /// <summary>
    /// The status codes of the C ABI (<c>fencelock_status</c>), with the same
    /// stable values: 1–99 are the error kinds every front shares, 100–199
    /// mistakes in a call, 200 and above fencelock's own failures.
    /// </summary>
    public enum FenceLockStatus
    {
        /// <summary>Success.</summary>
        Ok = 0,
        /// <summary>The lock is held by another owner.</summary>
        NotAcquired = 1,
        /// <summary>The wait ran out while another owner held the lock.</summary>
        Timeout = 2,
        /// <summary>Not enough Redis nodes answered to decide.</summary>
        Unavailable = 3,
        /// <summary>The lock was lost while held.</summary>
        Lost = 4,
        /// <summary>The lock was no longer held when released or extended.</summary>
        NotHeld = 5,
        /// <summary>A fenced write carried a token older than the stored one.</summary>
        StaleToken = 6,
        /// <summary>An argument is out of range.</summary>
        InvalidArgument = 7,
        /// <summary>The client configuration is invalid.</summary>
        Config = 8,
        /// <summary>Redis refused the credentials, or the ACL user lacks a permission.</summary>
        Auth = 9,
        /// <summary>The TLS handshake or certificate verification failed.</summary>
        Tls = 10,
        /// <summary>The client is closed.</summary>
        Closed = 11,
        /// <summary>A blocking call was made on a thread of an async runtime inside libfencelock.</summary>
        WouldBlock = 12,
        /// <summary>A required argument was null.</summary>
        NullArgument = 100,
        /// <summary>A string argument was not valid UTF-8.</summary>
        InvalidUtf8 = 101,
        /// <summary>The operation was cancelled.</summary>
        Cancelled = 102,
        /// <summary>A bug in fencelock.</summary>
        Internal = 200,
    }

    /// <summary>What one Redis node answered (<c>fencelock_node_outcome</c>).</summary>
    public enum NodeOutcome
    {
        /// <summary>The node did what was asked.</summary>
        Ok = 0,
        /// <summary>Another owner holds the key on this node.</summary>
        HeldByOther = 1,
        /// <summary>The key does not exist on this node.</summary>
        Missing = 2,
        /// <summary>No reply within the per-node timeout.</summary>
        TimedOut = 3,
        /// <summary>The node answered with an error or could not be reached.</summary>
        Failed = 4,
        /// <summary>The decision was reached before this node answered.</summary>
        Pending = 5,
    }

    /// <summary>Why a lock was lost (<c>fencelock_loss_reason</c>).</summary>
    public enum LockLossReason
    {
        /// <summary>A renewal found the key missing on a majority of nodes.</summary>
        Deleted = 1,
        /// <summary>A renewal found another owner's token on a majority of nodes.</summary>
        TakenOver = 2,
        /// <summary>Renewals kept failing until the validity ran out.</summary>
        Unreachable = 3,
        /// <summary>The lease ran out without renewal.</summary>
        Expired = 4,
        /// <summary>A reason added by a later version of libfencelock.</summary>
        Other = 99,
    }
}

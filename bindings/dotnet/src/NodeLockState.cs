using System;

namespace FenceLock
{
    /// <summary>
    /// One node's view of a lock, from <see cref="FenceLockClient.InspectAsync"/>:
    /// whether it is <see cref="Held"/> there, the <see cref="Ttl"/> left, the
    /// node's <see cref="FencingCounter"/> (grants counted there, ever) and its
    /// live <see cref="Waiters"/>; <see cref="Error"/> when the node did not
    /// answer. For operators: never the owner's token, and out of date as soon
    /// as it is read. Immutable.
    /// </summary>
    public sealed class NodeLockState
    {
        internal NodeLockState(string node, bool held, TimeSpan? ttl, ulong fencingCounter, long waiters, string error)
        {
            Node = node;
            Held = held;
            Ttl = ttl;
            FencingCounter = fencingCounter;
            Waiters = waiters;
            Error = error;
        }

        /// <summary>The node's URL, without credentials.</summary>
        public string Node { get; }

        /// <summary>Whether the lock key exists on that node.</summary>
        public bool Held { get; }

        /// <summary>The key's remaining ttl there; null when the key does not exist, has no ttl, or the node did not answer.</summary>
        public TimeSpan? Ttl { get; }

        /// <summary>
        /// The resource's fencing counter on that node: how many grants it has
        /// counted there, ever (0 when none, or when the node did not answer).
        /// The holder's <see cref="FenceLockHandle.FencingToken"/> is the
        /// highest counter of the nodes that granted it.
        /// </summary>
        public ulong FencingCounter { get; }

        /// <summary>The waiters in the lock's queue on that node whose lease still runs.</summary>
        public long Waiters { get; }

        /// <summary>Null when the node answered; otherwise why it did not (and the other properties say nothing about it).</summary>
        public string Error { get; }

        /// <inheritdoc />
        public override string ToString()
        {
            if (Error != null) return "NodeLockState(" + Node + ", error: " + Error + ")";
            return "NodeLockState(" + Node + ", " + (Held ? "held" : "free")
                + (Ttl.HasValue ? ", ttl " + Ttl.Value.TotalMilliseconds + " ms" : "")
                + ", fencing counter " + FencingCounter + ", " + Waiters + " waiting)";
        }
    }
}

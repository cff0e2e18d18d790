using System;
using System.Linq;

namespace FenceLock
{
    /// <summary>
    /// A leader of an election, as observers learn of it
    /// (<see cref="FenceLockClient.ObserveAsync"/>): its epoch and the value
    /// it announced. Two leaders are equal when both are.
    /// </summary>
    public sealed class Leader : IEquatable<Leader>
    {
        private readonly byte[] value;

        internal Leader(ulong epoch, byte[] value)
        {
            Epoch = epoch;
            this.value = value;
        }

        /// <summary>The leader's epoch: its fencing token, greater than every earlier leader's.</summary>
        public ulong Epoch { get; }

        /// <summary>The value the leader announced (a copy).</summary>
        public byte[] Value => (byte[])value.Clone();

        /// <summary>The value as UTF-8 text (invalid bytes become U+FFFD).</summary>
        public string ValueText => System.Text.Encoding.UTF8.GetString(value);

        /// <inheritdoc />
        public bool Equals(Leader other) => other != null && Epoch == other.Epoch && value.SequenceEqual(other.value);

        /// <inheritdoc />
        public override bool Equals(object obj) => Equals(obj as Leader);

        /// <inheritdoc />
        public override int GetHashCode() => Epoch.GetHashCode();

        /// <inheritdoc />
        public override string ToString() => "Leader(epoch " + Epoch + ", " + ValueText + ")";
    }
}

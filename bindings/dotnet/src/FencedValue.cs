namespace FenceLock
{
    /// <summary>A value written by <see cref="FenceLockClient.FencedSetAsync"/> and the token that wrote it.</summary>
    public sealed class FencedValue
    {
        /// <summary>Creates a value.</summary>
        public FencedValue(string value, ulong fencingToken)
        {
            Value = value;
            FencingToken = fencingToken;
        }

        /// <summary>The stored value; null when the key does not exist.</summary>
        public string Value { get; }

        /// <summary>The token of the last accepted write; 0 when the key does not exist.</summary>
        public ulong FencingToken { get; }
    }
}

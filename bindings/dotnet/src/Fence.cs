using System;
using System.Globalization;
using System.Runtime.InteropServices;

namespace FenceLock
{
    /// <summary>
    /// What a fenced write carries: a fencing token and the holder id of the
    /// grant it comes from (<see cref="FenceLockHandle.Fence"/>). Storage
    /// accepts it over an equal token only from the same grant, so one holder
    /// may write repeatedly while a second holder that got the same token
    /// (after a node lost its counter) is refused. A holder of 0 is a bare
    /// token, which writes only where every stored token is older.
    /// <c>ToString()</c> gives <c>"token:holder"</c>; <see cref="Parse"/> reads it back.
    /// </summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct Fence : IEquatable<Fence>
    {
        /// <summary>The largest holder id (<see cref="FenceLockLimits.MaxHolderId"/>): ids fit a signed 64-bit SQL column.</summary>
        public static ulong MaxHolderId => FenceLockLimits.MaxHolderId;

        private readonly ulong token;
        private readonly ulong holder;

        /// <summary>A fence of <paramref name="token"/> from grant <paramref name="holder"/> (0: a bare token).</summary>
        /// <exception cref="ArgumentOutOfRangeException"><paramref name="holder"/> is above <see cref="MaxHolderId"/>.</exception>
        public Fence(ulong token, ulong holder = 0)
        {
            if (holder > MaxHolderId)
                throw new ArgumentOutOfRangeException(nameof(holder), holder, "a holder id is at most " + MaxHolderId);
            this.token = token;
            this.holder = holder;
        }

        /// <summary>The fencing token.</summary>
        public ulong Token => token;

        /// <summary>The grant's holder id; 0 for a bare token.</summary>
        public ulong Holder => holder;

        /// <summary>Reads <c>"token:holder"</c> (or a bare <c>"token"</c>).</summary>
        /// <exception cref="ArgumentNullException"><paramref name="text"/> is null.</exception>
        /// <exception cref="FormatException"><paramref name="text"/> is not a fence.</exception>
        public static Fence Parse(string text)
        {
            if (text == null) throw new ArgumentNullException(nameof(text));
            var parts = text.Split(':');
            ulong token = 0, holder = 0;
            bool valid = parts.Length <= 2 && Number(parts[0], out token) && (parts.Length == 1 || Number(parts[1], out holder));
            if (!valid || holder > MaxHolderId)
                throw new FormatException("'" + text + "' is not a fence: expected token:holder or a bare token");
            return new Fence(token, holder);
        }

        private static bool Number(string digits, out ulong value)
        {
            value = 0;
            foreach (var c in digits)
                if (c < '0' || c > '9') return false;
            return digits.Length > 0 && ulong.TryParse(digits, NumberStyles.None, CultureInfo.InvariantCulture, out value);
        }

        /// <inheritdoc/>
        public override string ToString() =>
            token.ToString(CultureInfo.InvariantCulture) + ":" + holder.ToString(CultureInfo.InvariantCulture);

        /// <inheritdoc/>
        public bool Equals(Fence other) => token == other.token && holder == other.holder;

        /// <inheritdoc/>
        public override bool Equals(object obj) => obj is Fence other && Equals(other);

        /// <inheritdoc/>
        public override int GetHashCode() => token.GetHashCode() * 31 + holder.GetHashCode();

        /// <summary>A bare token: it writes only where every stored token is older.</summary>
        public static implicit operator Fence(ulong token) => new Fence(token);
    }
}

using System;
using System.Runtime.InteropServices;
using System.Text;

namespace FenceLock
{
    /// <summary>
    /// Strings across the boundary. The ABI takes NUL-terminated UTF-8; we
    /// encode ourselves (rather than trust each runtime's default string
    /// marshalling) so Mono and modern .NET behave the same, lone surrogates
    /// are refused instead of silently replaced, and an embedded NUL cannot
    /// truncate a resource name into another one.
    /// </summary>
    internal static class Utf8
    {
        private static readonly UTF8Encoding Strict = new UTF8Encoding(false, true);

        /// <summary>Encodes <paramref name="text"/> with a trailing NUL; null stays null.</summary>
        /// <exception cref="ArgumentException">The text has a NUL or a lone surrogate.</exception>
        internal static byte[] Encode(string text, string parameterName)
        {
            if (text == null) return null;
            if (text.IndexOf('\0') >= 0)
                throw new ArgumentException("must not contain a NUL character", parameterName);
            try
            {
                var bytes = new byte[Strict.GetByteCount(text) + 1];
                Strict.GetBytes(text, 0, text.Length, bytes, 0);
                return bytes;
            }
            catch (EncoderFallbackException e)
            {
                throw new ArgumentException("is not valid Unicode (lone surrogate): " + e.Message, parameterName, e);
            }
        }

        /// <summary>Encodes a required argument: null throws <see cref="ArgumentNullException"/>.</summary>
        internal static byte[] EncodeRequired(string text, string parameterName)
        {
            if (text == null) throw new ArgumentNullException(parameterName);
            return Encode(text, parameterName);
        }

        /// <summary>
        /// Encodes text the ABI takes with its length (a leader's value): no
        /// NUL is added, so a NUL character is just a byte. Null stays null.
        /// </summary>
        /// <exception cref="ArgumentException">The text has a lone surrogate.</exception>
        internal static byte[] EncodeCounted(string text, string parameterName)
        {
            if (text == null) return null;
            try
            {
                return Strict.GetBytes(text);
            }
            catch (EncoderFallbackException e)
            {
                throw new ArgumentException("is not valid Unicode (lone surrogate): " + e.Message, parameterName, e);
            }
        }

        /// <summary>Copies a NUL-terminated UTF-8 string owned by native code; NULL gives null.</summary>
        internal static string Decode(IntPtr pointer)
        {
            return pointer == IntPtr.Zero ? null : Marshal.PtrToStringUTF8(pointer);
        }
    }
}

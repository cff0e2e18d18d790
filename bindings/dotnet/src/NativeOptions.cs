using System;

namespace FenceLock
{
    /// <summary>
    /// Copies a <see cref="FenceLockOptions"/> into a native
    /// <c>fencelock_options</c>, calling a setter only for what was set so
    /// every default stays libfencelock's own.
    /// </summary>
    internal static class NativeOptions
    {
        /// <summary>A native options object for <paramref name="options"/> (null: none, i.e. all defaults).</summary>
        internal static OptionsSafeHandle Create(FenceLockOptions options)
        {
            IntPtr pointer;
            if (options == null)
                return new OptionsSafeHandle(IntPtr.Zero); // passed as NULL: defaults
            NativeErrors.Check(NativeMethods.fencelock_options_new(out pointer), IntPtr.Zero);
            var native = new OptionsSafeHandle(pointer);
            try
            {
                Apply(native, options);
                return native;
            }
            catch
            {
                native.Dispose();
                throw;
            }
        }

        private static void Apply(OptionsSafeHandle native, FenceLockOptions options)
        {
            if (options.KeyPrefix != null)
                Check(NativeMethods.fencelock_options_set_key_prefix(native, Utf8.Encode(options.KeyPrefix, "KeyPrefix")));
            if (options.NodeTimeout.HasValue)
                Check(NativeMethods.fencelock_options_set_node_timeout_ms(native, Millis(options.NodeTimeout.Value, "NodeTimeout")));
            if (options.ConnectTimeout.HasValue)
                Check(NativeMethods.fencelock_options_set_connect_timeout_ms(native, Millis(options.ConnectTimeout.Value, "ConnectTimeout")));
            if (options.DriftFactor.HasValue)
                Check(NativeMethods.fencelock_options_set_drift_factor(native, options.DriftFactor.Value));
            ApplyRetry(native, options);
            if (options.AutoRenew.HasValue)
                Check(NativeMethods.fencelock_options_set_auto_renew(native, options.AutoRenew.Value));
            if (options.Username != null || options.Password != null)
                Check(NativeMethods.fencelock_options_set_credentials(native,
                    Utf8.Encode(options.Username, "Username"), Utf8.Encode(options.Password, "Password")));
            ApplyTls(native, options);
        }

        private static void ApplyRetry(OptionsSafeHandle native, FenceLockOptions options)
        {
            if (!options.RetryBase.HasValue && !options.RetryMax.HasValue) return;
            if (!options.RetryBase.HasValue || !options.RetryMax.HasValue)
                throw new ArgumentException("set RetryBase and RetryMax together", "options");
            Check(NativeMethods.fencelock_options_set_retry_ms(native,
                Millis(options.RetryBase.Value, "RetryBase"), Millis(options.RetryMax.Value, "RetryMax")));
        }

        private static void ApplyTls(OptionsSafeHandle native, FenceLockOptions options)
        {
            if (options.TlsCaPem != null)
            {
                var pem = Pem(options.TlsCaPem);
                Check(NativeMethods.fencelock_options_set_tls_ca_pem(native, pem, (UIntPtr)(uint)pem.Length));
            }
            if (options.TlsMinVersion.HasValue)
                Check(NativeMethods.fencelock_options_set_tls_min_version(native, TlsVersion(options.TlsMinVersion.Value)));
            if (options.TlsClientCertificatePem == null && options.TlsClientKeyPem == null) return;
            if (options.TlsClientCertificatePem == null || options.TlsClientKeyPem == null)
                throw new ArgumentException("set TlsClientCertificatePem and TlsClientKeyPem together", "options");
            var cert = Pem(options.TlsClientCertificatePem);
            var key = Pem(options.TlsClientKeyPem);
            Check(NativeMethods.fencelock_options_set_tls_client_cert_pem(native,
                cert, (UIntPtr)(uint)cert.Length, key, (UIntPtr)(uint)key.Length));
        }

        // The enum's values are the ABI's; a cast from an arbitrary int is a caller mistake.
        private static int TlsVersion(FenceLockTlsVersion version)
        {
            if (version != FenceLockTlsVersion.Tls12 && version != FenceLockTlsVersion.Tls13)
                throw new ArgumentOutOfRangeException("TlsMinVersion", version,
                    "must be FenceLockTlsVersion.Tls12 or FenceLockTlsVersion.Tls13");
            return (int)version;
        }

        // PEM is ASCII; the ABI takes the bytes and their length (no NUL needed).
        private static byte[] Pem(string pem) => System.Text.Encoding.ASCII.GetBytes(pem);

        // Negative spans are a caller mistake; the range itself is checked by the client.
        private static ulong Millis(TimeSpan span, string name)
        {
            if (span < TimeSpan.Zero) throw new ArgumentOutOfRangeException(name, span, "must not be negative");
            return (ulong)span.TotalMilliseconds;
        }

        private static void Check(int status) => NativeErrors.Check(status, IntPtr.Zero);
    }
}

using System;

namespace FenceLock
{
    /// <summary>
    /// Client settings. Every property left null keeps libfencelock's
    /// default; the client validates them all at once when it is made
    /// (<see cref="ConfigException"/> says what is wrong), so a
    /// setter never throws.
    /// </summary>
    public sealed class FenceLockOptions
    {
        /// <summary>Prefix of every Redis key (default <c>fencelock:</c>).</summary>
        public string KeyPrefix { get; set; }

        /// <summary>Hard limit on each request to one node (default 100 ms; zero is refused).</summary>
        public TimeSpan? NodeTimeout { get; set; }

        /// <summary>Limit on opening a connection to one node (default 1 s).</summary>
        public TimeSpan? ConnectTimeout { get; set; }

        /// <summary>Clock-drift factor subtracted from a lock's validity (default 0.01; 0 to 0.1).</summary>
        public double? DriftFactor { get; set; }

        /// <summary>First backoff between attempts while waiting (full jitter, doubling up to <see cref="RetryMax"/>).</summary>
        public TimeSpan? RetryBase { get; set; }

        /// <summary>Largest backoff between attempts while waiting. Set together with <see cref="RetryBase"/>.</summary>
        public TimeSpan? RetryMax { get; set; }

        /// <summary>Renew acquired locks automatically until released (default true).</summary>
        public bool? AutoRenew { get; set; }

        /// <summary>ACL user name for every node (overrides the URLs'; never logged).</summary>
        public string Username { get; set; }

        /// <summary>Password for every node (overrides the URLs'; never logged).</summary>
        public string Password { get; set; }

        /// <summary>PEM CA bundle trusted for <c>rediss://</c> nodes instead of the built-in roots.</summary>
        public string TlsCaPem { get; set; }

        /// <summary>PEM certificate chain presented to <c>rediss://</c> nodes that require client certificates.</summary>
        public string TlsClientCertificatePem { get; set; }

        /// <summary>PEM private key for <see cref="TlsClientCertificatePem"/>.</summary>
        public string TlsClientKeyPem { get; set; }

        /// <summary>
        /// Oldest TLS version accepted from <c>rediss://</c> nodes (default
        /// <see cref="FenceLockTlsVersion.Tls12"/>; TLS 1.0 and 1.1 are never spoken).
        /// With <see cref="FenceLockTlsVersion.Tls13"/>, a node that offers only TLS 1.2
        /// fails with <see cref="TlsException"/>, and <c>rediss+cluster://</c>
        /// nodes are refused with <see cref="ConfigException"/> (restrict those
        /// with the servers' <c>tls-protocols</c>). A value that is not a defined
        /// <see cref="FenceLockTlsVersion"/> makes the client constructor throw
        /// <see cref="ArgumentOutOfRangeException"/>.
        /// </summary>
        public FenceLockTlsVersion? TlsMinVersion { get; set; }
    }

    /// <summary>
    /// A TLS protocol version, for <see cref="FenceLockOptions.TlsMinVersion"/>
    /// (the values of the C ABI's <c>fencelock_tls_version</c>).
    /// </summary>
    public enum FenceLockTlsVersion
    {
        /// <summary>TLS 1.2 and 1.3 (the default).</summary>
        Tls12 = 12,
        /// <summary>TLS 1.3 only.</summary>
        Tls13 = 13,
    }
}

//! TLS that redis-rs cannot be told to do: a minimum protocol version.
//!
//! redis-rs builds its rustls configuration itself and offers TLS 1.2 and
//! 1.3. A client that demands TLS 1.3 therefore opens its single-node
//! `rediss://` connections here: TCP, then the handshake with our own rustls
//! configuration (same trust roots, client certificate and host-name
//! verification as redis-rs would use), then redis-rs takes over the
//! encrypted stream (authentication, database, commands). Every other
//! connection goes through redis-rs unchanged.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{
    AsyncConnectionConfig, ConnectionAddr, ConnectionInfo, RedisConnectionInfo, RedisError, RedisResult,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::error::{Error, Result};

/// The oldest TLS version a client accepts from `rediss://` nodes.
///
/// ```
/// use fencelock::{Client, TlsVersion};
/// let builder = Client::builder()
///     .node("rediss://redis.internal:6380")
///     .tls_min_version(TlsVersion::V1_3);
/// # let _ = builder;
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    /// TLS 1.2 and 1.3 (the default; older versions are never spoken).
    #[default]
    V1_2,
    /// TLS 1.3 only.
    V1_3,
}

/// TLS material shared by every node of a client.
#[derive(Clone, Default)]
pub(crate) struct TlsMaterial {
    pub(crate) root_ca_pem: Option<Vec<u8>>,
    pub(crate) client_cert_pem: Option<(Vec<u8>, Vec<u8>)>,
    pub(crate) min_version: TlsVersion,
}

impl TlsMaterial {
    /// Whether connections need [`OwnTls`] rather than redis-rs's TLS.
    pub(crate) fn needs_own_handshake(&self) -> bool {
        self.min_version > TlsVersion::V1_2
    }
}

/// Opens TLS connections to one node with our own rustls configuration.
#[derive(Clone)]
pub(crate) struct OwnTls {
    connector: TlsConnector,
    host: String,
    port: u16,
    server_name: ServerName<'static>,
    redis: RedisConnectionInfo,
}

impl OwnTls {
    /// Prepares connections to the TLS address in `info`.
    pub(crate) fn new(info: &ConnectionInfo, tls: &TlsMaterial, node: &str) -> Result<Self> {
        let ConnectionAddr::TcpTls { host, port, .. } = info.addr() else {
            return Err(Error::config(format!(
                "node {node}: a TLS minimum version needs a rediss:// URL"
            )));
        };
        let server_name = ServerName::try_from(host.clone()).map_err(|e| {
            Error::config(format!(
                "node {node}: '{host}' is not a valid TLS server name ({e})"
            ))
        })?;
        Ok(OwnTls {
            connector: TlsConnector::from(Arc::new(client_config(tls, node)?)),
            host: host.clone(),
            port: *port,
            server_name,
            redis: info.redis_settings().clone(),
        })
    }

    /// Connects, completes the handshake and hands the stream to redis-rs,
    /// whose connection task is spawned on the current runtime.
    pub(crate) async fn connect(&self, connect_timeout: Duration) -> RedisResult<MultiplexedConnection> {
        let open = async {
            let tcp = TcpStream::connect((self.host.as_str(), self.port)).await?;
            tcp.set_nodelay(true)?;
            let stream = self.connector.connect(self.server_name.clone(), tcp).await?;
            let config = AsyncConnectionConfig::new().set_response_timeout(None);
            MultiplexedConnection::new_with_config(&self.redis, stream, config).await
        };
        let (connection, driver) = tokio::time::timeout(connect_timeout, open)
            .await
            .map_err(|_| RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut)))??;
        tokio::spawn(driver);
        Ok(connection)
    }
}

/// The rustls configuration redis-rs would build, restricted to the
/// client's TLS versions.
fn client_config(tls: &TlsMaterial, node: &str) -> Result<rustls::ClientConfig> {
    let versions: &[&'static rustls::SupportedProtocolVersion] = match tls.min_version {
        TlsVersion::V1_2 => rustls::ALL_VERSIONS,
        TlsVersion::V1_3 => &[&rustls::version::TLS13],
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .map_err(|e| Error::config(format!("TLS versions for node {node}: {e}")))?
        .with_root_certificates(roots(tls, node)?);
    match &tls.client_cert_pem {
        None => Ok(builder.with_no_client_auth()),
        Some((cert, key)) => {
            let chain = CertificateDer::pem_slice_iter(cert)
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| Error::config(format!("client certificate PEM: {e}")))?;
            let key = PrivateKeyDer::from_pem_slice(key)
                .map_err(|e| Error::config(format!("client key PEM: {e}")))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| Error::config(format!("client certificate and key do not fit together: {e}")))
        }
    }
}

/// The given CA bundle, or the Mozilla roots (as redis-rs uses).
fn roots(tls: &TlsMaterial, node: &str) -> Result<rustls::RootCertStore> {
    let mut roots = rustls::RootCertStore::empty();
    let Some(pem) = &tls.root_ca_pem else {
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        return Ok(roots);
    };
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(|e| Error::config(format!("CA bundle PEM for node {node}: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| Error::config(format!("CA bundle for node {node}: {e}")))?;
    }
    if roots.is_empty() {
        return Err(Error::config("the CA bundle holds no certificate"));
    }
    Ok(roots)
}

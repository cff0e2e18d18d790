//! TLS for `rediss://` nodes: our own rustls configuration (the trust
//! roots, client certificate and host-name verification redis-rs would use,
//! plus a minimum protocol version, which redis-rs cannot be told), applied
//! to a TCP stream that [`crate::connection`] opened itself and then hands
//! to redis-rs (authentication, database, commands). Redis Cluster nodes
//! keep redis-rs's own TLS.

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

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
    /// Whether a minimum above what redis-rs speaks is asked for (which a
    /// Redis Cluster node, connected by redis-rs, cannot honour).
    pub(crate) fn raises_minimum(&self) -> bool {
        self.min_version > TlsVersion::V1_2
    }
}

/// The TLS handshake with one node.
#[derive(Clone)]
pub(crate) struct Handshake {
    connector: TlsConnector,
    server_name: ServerName<'static>,
}

impl Handshake {
    /// Prepares handshakes with `host` (the name its certificate must carry).
    pub(crate) fn new(host: &str, tls: &TlsMaterial, node: &str) -> Result<Self> {
        let server_name = ServerName::try_from(host.to_owned()).map_err(|e| {
            Error::config(format!(
                "node {node}: '{host}' is not a valid TLS server name ({e})"
            ))
        })?;
        Ok(Handshake {
            connector: TlsConnector::from(Arc::new(client_config(tls, node)?)),
            server_name,
        })
    }

    /// Runs the handshake over `tcp`.
    pub(crate) async fn over(&self, tcp: TcpStream) -> std::io::Result<TlsStream<TcpStream>> {
        self.connector.connect(self.server_name.clone(), tcp).await
    }
}

/// The rustls configuration redis-rs would build, restricted to the
/// client's TLS versions.
pub(crate) fn client_config(tls: &TlsMaterial, node: &str) -> Result<rustls::ClientConfig> {
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

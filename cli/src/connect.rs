//! Turns the connection flags into a connected client.

use std::path::Path;

use fencelock::{Client, ClientBuilder, Error, ErrorKind, TlsVersion};

use crate::args::{Connection, TlsMinVersion};

/// Connects to the nodes the flags (or `FENCELOCK_NODES`) name.
pub async fn connect(connection: &Connection) -> Result<Client, Error> {
    if connection.nodes.is_empty() {
        return Err(Error::new(
            ErrorKind::Config,
            "no Redis node given: pass --node redis://host:port (repeat it for Redlock) or set FENCELOCK_NODES",
        ));
    }
    builder(connection)?.build().await
}

fn builder(connection: &Connection) -> Result<ClientBuilder, Error> {
    let mut builder = Client::builder()
        .nodes(connection.nodes.iter().map(|node| node.trim()))
        .key_prefix(connection.key_prefix.as_str())
        .node_timeout(connection.node_timeout)
        .tls_min_version(match connection.tls_min_version {
            TlsMinVersion::V1_2 => TlsVersion::V1_2,
            TlsMinVersion::V1_3 => TlsVersion::V1_3,
        });
    if let Some(user) = &connection.username {
        builder = builder.username(user.as_str());
    }
    if let Some(password) = &connection.password {
        builder = builder.password(password.as_str());
    }
    if let Some(ca) = &connection.tls_ca {
        builder = builder.tls_ca_pem(read(ca, "--tls-ca")?);
    }
    if let (Some(cert), Some(key)) = (&connection.tls_cert, &connection.tls_key) {
        builder = builder.tls_client_cert_pem(read(cert, "--tls-cert")?, read(key, "--tls-key")?);
    }
    Ok(builder)
}

fn read(path: &Path, flag: &str) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|e| {
        Error::new(
            ErrorKind::Config,
            format!("cannot read {flag} file {}: {e}", path.display()),
        )
    })
}

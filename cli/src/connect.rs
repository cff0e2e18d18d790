//! Turns the connection flags into a connected client.

use std::path::Path;

use fencelock::{Client, ClientBuilder, Error, ErrorKind, TlsVersion};

use crate::args::{Connection, Secret, TlsMinVersion};

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
        .nodes(connection.nodes.iter().map(|node| node.expose()))
        .key_prefix(connection.key_prefix.as_str())
        .node_timeout(connection.node_timeout)
        .connect_timeout(connection.connect_timeout)
        .require_aof(connection.require_aof)
        .tls_min_version(match connection.tls_min_version {
            TlsMinVersion::V1_2 => TlsVersion::V1_2,
            TlsMinVersion::V1_3 => TlsVersion::V1_3,
        });
    if let Some(user) = &connection.username {
        builder = builder.username(user.as_str());
    }
    if let Some(password) = password(connection)? {
        builder = builder.password(password.expose());
    }
    if let Some(ca) = &connection.tls_ca {
        builder = builder.tls_ca_pem(read(ca, "--tls-ca")?);
    }
    if let (Some(cert), Some(key)) = (&connection.tls_cert, &connection.tls_key) {
        builder = builder.tls_client_cert_pem(read(cert, "--tls-cert")?, read(key, "--tls-key")?);
    }
    Ok(builder)
}

/// The password from `--password` / `FENCELOCK_PASSWORD`, or from the first
/// line of `--password-file` / `FENCELOCK_PASSWORD_FILE` (clap refuses both).
fn password(connection: &Connection) -> Result<Option<Secret>, Error> {
    match (&connection.password, &connection.password_file) {
        (Some(password), _) => Ok(Some(password.clone())),
        (None, Some(path)) => read_password_file(path).map(Some),
        (None, None) => Ok(None),
    }
}

/// The first line of `path`, without its line ending. Errors name the file,
/// never its content.
pub fn read_password_file(path: &Path) -> Result<Secret, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Error::new(
            ErrorKind::Config,
            format!("cannot read --password-file {}: {e}", path.display()),
        )
    })?;
    match text.lines().next() {
        Some(line) if !line.is_empty() => Ok(Secret::new(line.to_owned())),
        _ => Err(Error::new(
            ErrorKind::Config,
            format!(
                "--password-file {} is empty; its first line must be the password",
                path.display()
            ),
        )),
    }
}

fn read(path: &Path, flag: &str) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|e| {
        Error::new(
            ErrorKind::Config,
            format!("cannot read {flag} file {}: {e}", path.display()),
        )
    })
}

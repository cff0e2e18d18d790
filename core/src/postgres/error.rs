//! PostgreSQL's errors as node failures: the kind the quorum reports, and
//! what the user should do.

use tokio_postgres::error::SqlState;

use crate::error::{ErrorKind, NodeFailure};

/// Classifies a tokio-postgres error so quorum errors report the right kind.
pub(crate) fn classify_postgres_error(err: &tokio_postgres::Error) -> NodeFailure {
    if let Some(db) = err.as_db_error() {
        let code = db.code();
        let (kind, advice) = if *code == SqlState::INVALID_PASSWORD
            || *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
        {
            (
                ErrorKind::Auth,
                "; check the user and password of the postgresql:// URL",
            )
        } else if *code == SqlState::INSUFFICIENT_PRIVILEGE {
            (
                ErrorKind::Auth,
                "; grant the role the privileges listed in docs/postgres-store.md",
            )
        } else if *code == SqlState::QUERY_CANCELED || *code == SqlState::LOCK_NOT_AVAILABLE {
            (
                ErrorKind::Unavailable,
                "; the server cancelled the script: raise statement_timeout and lock_timeout \
                 of the role fencelock connects as above the client's per-node timeout",
            )
        } else {
            (ErrorKind::Unavailable, "")
        };
        return NodeFailure {
            kind,
            detail: format!("{} (SQLSTATE {}){advice}", db.message(), code.code()),
        };
    }
    // tokio-postgres keeps its error kinds private; its TLS failures all
    // read "error performing TLS handshake: …".
    let tls = err.to_string().contains("TLS handshake")
        || std::iter::successors(std::error::Error::source(err), |e| e.source())
            .any(|e| e.is::<rustls::Error>() || e.to_string().contains("certificate"));
    if tls {
        return NodeFailure {
            kind: ErrorKind::Tls,
            detail: format!(
                "{}; the server must offer TLS with a certificate for this host name \
                 signed by the CA given (sslrootcert in the URL, or the client's CA bundle), \
                 or use sslmode=disable on a trusted network",
                with_causes(err)
            ),
        };
    }
    NodeFailure {
        kind: ErrorKind::Unavailable,
        detail: with_causes(err),
    }
}

/// The error and its causes, which tokio-postgres's `Display` leaves out:
/// "error performing TLS handshake: invalid peer certificate: UnknownIssuer".
fn with_causes(err: &tokio_postgres::Error) -> String {
    let mut text = err.to_string();
    for cause in std::iter::successors(std::error::Error::source(err), |e| e.source()) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

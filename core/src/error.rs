//! Typed errors with per-node detail.
//!
//! Every front (C, Python, Node, .NET, the CLI) maps [`ErrorKind`] to its own
//! idiom, so the kinds and their numeric codes are part of the API: new kinds
//! may be added, existing ones are never renumbered.

use std::fmt;

/// What went wrong, independent of the node(s) it happened on.
///
/// The numeric value ([`ErrorKind::code`]) is stable and shared by every front.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The lock is held by someone else (a quorum of nodes said so).
    NotAcquired,
    /// The `wait` deadline passed before the lock could be taken.
    Timeout,
    /// Not enough nodes answered to decide: Redis unreachable, paused or erroring.
    Unavailable,
    /// The lock was lost while held (key deleted, expired or taken over).
    Lost,
    /// The lock was no longer held when released or extended.
    NotHeld,
    /// A fenced write carried a token older than the one already stored.
    StaleToken,
    /// An argument was out of range (empty resource, zero ttl, oversized key…).
    InvalidArgument,
    /// The client configuration is invalid (bad URL, no nodes, zero timeout…).
    Config,
    /// Redis refused the credentials or the ACL user lacks a permission.
    Auth,
    /// The TLS handshake or certificate verification failed.
    Tls,
    /// The client, lock or runtime is closed (or unusable after `fork()`).
    Closed,
    /// A blocking call was made from inside an async runtime, where it would deadlock.
    WouldBlock,
}

impl ErrorKind {
    /// The stable numeric code of this kind, shared by every front.
    pub fn code(self) -> i32 {
        match self {
            ErrorKind::NotAcquired => 1,
            ErrorKind::Timeout => 2,
            ErrorKind::Unavailable => 3,
            ErrorKind::Lost => 4,
            ErrorKind::NotHeld => 5,
            ErrorKind::StaleToken => 6,
            ErrorKind::InvalidArgument => 7,
            ErrorKind::Config => 8,
            ErrorKind::Auth => 9,
            ErrorKind::Tls => 10,
            ErrorKind::Closed => 11,
            ErrorKind::WouldBlock => 12,
        }
    }

    /// A short name for logs and foreign exception names (`"not_acquired"`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::NotAcquired => "not_acquired",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Lost => "lost",
            ErrorKind::NotHeld => "not_held",
            ErrorKind::StaleToken => "stale_token",
            ErrorKind::InvalidArgument => "invalid_argument",
            ErrorKind::Config => "config",
            ErrorKind::Auth => "auth",
            ErrorKind::Tls => "tls",
            ErrorKind::Closed => "closed",
            ErrorKind::WouldBlock => "would_block",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one node answered to one request.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeOutcome {
    /// The node did what was asked (granted, extended, released).
    Ok,
    /// The key is held by another owner on this node.
    HeldByOther,
    /// The key does not exist on this node (expired or deleted).
    Missing,
    /// No reply within the per-node timeout.
    TimedOut,
    /// The node answered with an error, or the connection failed.
    Failed(NodeFailure),
    /// The decision was reached before this node answered.
    Pending,
}

/// Why a node failed, classified so that quorum errors can pick the right kind.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeFailure {
    /// How the failure is classified ([`ErrorKind::Unavailable`], [`ErrorKind::Auth`], [`ErrorKind::Tls`]…).
    pub kind: ErrorKind,
    /// The node's or the connection's own words.
    pub detail: String,
}

impl fmt::Display for NodeOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeOutcome::Ok => f.write_str("ok"),
            NodeOutcome::HeldByOther => f.write_str("held by another owner"),
            NodeOutcome::Missing => f.write_str("key missing"),
            NodeOutcome::TimedOut => f.write_str("timed out"),
            NodeOutcome::Failed(failure) => write!(f, "error: {}", failure.detail),
            NodeOutcome::Pending => f.write_str("no reply before the decision"),
        }
    }
}

/// One node's part in an operation: which node (URL without password) and what it said.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeReport {
    /// The node, as `redis://host:port/db` with any password removed.
    pub node: String,
    /// What it answered.
    pub outcome: NodeOutcome,
}

/// The error type of every fencelock operation.
///
/// Carries a stable [`ErrorKind`], a message meant for humans (what failed,
/// where, and what to do), the resource it concerns, and, for operations that
/// went to several nodes, what each node answered.
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    resource: Option<String>,
    nodes: Vec<NodeReport>,
}

/// `Result` with fencelock's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A new error of `kind` with a human-readable message.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            resource: None,
            nodes: Vec::new(),
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidArgument, message)
    }

    pub(crate) fn config(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Config, message)
    }

    pub(crate) fn with_resource(mut self, resource: &str) -> Self {
        self.resource = Some(resource.to_owned());
        self
    }

    pub(crate) fn with_nodes(mut self, nodes: Vec<NodeReport>) -> Self {
        self.nodes = nodes;
        self
    }

    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message without the per-node list.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The resource the failed operation was about, if any.
    pub fn resource(&self) -> Option<&str> {
        self.resource.as_deref()
    }

    /// What each node answered (empty for errors that did not reach a node).
    pub fn nodes(&self) -> &[NodeReport] {
        &self.nodes
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if !self.nodes.is_empty() {
            f.write_str(" [")?;
            for (i, report) in self.nodes.iter().enumerate() {
                if i > 0 {
                    f.write_str("; ")?;
                }
                write!(f, "{}: {}", report.node, report.outcome)?;
            }
            f.write_str("]")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("kind", &self.kind)
            .field("message", &self.message)
            .field("resource", &self.resource)
            .field("nodes", &self.nodes)
            .finish()
    }
}

impl std::error::Error for Error {}

/// Classifies a redis-rs error so quorum errors can report the right kind.
pub(crate) fn classify_redis_error(err: &redis::RedisError) -> NodeFailure {
    use redis::ErrorKind as Rk;
    let text = err.to_string();
    if is_permission_error(err, &text) {
        return NodeFailure {
            kind: ErrorKind::Auth,
            detail: format!(
                "permission denied by the node's ACL ({text}); grant the commands listed in docs/protocol.md"
            ),
        };
    }
    let kind = match err.kind() {
        Rk::AuthenticationFailed => ErrorKind::Auth,
        Rk::InvalidClientConfig => ErrorKind::Config,
        _ if looks_like_tls(err) => ErrorKind::Tls,
        _ => ErrorKind::Unavailable,
    };
    let detail = match tls_alert_hint(&text) {
        Some(hint) if kind == ErrorKind::Tls => format!("{text}; {hint}"),
        _ => text,
    };
    NodeFailure { kind, detail }
}

/// NOPERM replies, and ACL refusals raised inside scripts (plain error replies).
fn is_permission_error(err: &redis::RedisError, text: &str) -> bool {
    err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoPerm)
        || text.contains("can't run this command")
        || text.contains("no permissions to access")
}

/// The kind for a quorum that failed: `Auth` or `Tls` when every failing node
/// says so (a configuration problem to fix, not to retry), else `Unavailable`.
pub(crate) fn quorum_failure_kind(reports: &[NodeReport]) -> ErrorKind {
    let mut kinds = reports.iter().filter_map(|r| match &r.outcome {
        NodeOutcome::Failed(failure) => Some(failure.kind),
        NodeOutcome::TimedOut => Some(ErrorKind::Unavailable),
        _ => None,
    });
    match kinds.next() {
        Some(first) if matches!(first, ErrorKind::Auth | ErrorKind::Tls) && kinds.all(|k| k == first) => {
            first
        }
        _ => ErrorKind::Unavailable,
    }
}

fn looks_like_tls(err: &redis::RedisError) -> bool {
    let text = err.to_string().to_ascii_lowercase();
    // rustls's own words for an alert from the node ("received fatal alert:
    // UnknownCA") and for a node it cannot talk to.
    [
        "certificate",
        "tls",
        "handshake",
        "invalidcertificate",
        "fatal alert",
        "peer is incompatible",
        "peer misbehaved",
    ]
    .iter()
    .any(|needle| text.contains(needle))
}

/// What a TLS alert sent by the node means for the user: the node refused
/// the client's certificate (or its absence) or its TLS versions.
fn tls_alert_hint(text: &str) -> Option<&'static str> {
    let alert = text.split("received fatal alert: ").nth(1)?;
    let name = alert.split(|c: char| !c.is_ascii_alphanumeric()).next()?;
    Some(match name {
        "CertificateRequired" => {
            "the node requires a client certificate (tls-auth-clients yes): give the client a certificate and key signed by the node's CA"
        }
        "UnknownCA"
        | "BadCertificate"
        | "CertificateUnknown"
        | "UnsupportedCertificate"
        | "CertificateExpired"
        | "CertificateRevoked"
        | "AccessDenied" => {
            "the node refused the client certificate: use one signed by a CA in the node's tls-ca-cert-file, and valid now"
        }
        "HandshakeFailure" => {
            "the node refused the handshake: it may require a client certificate (tls-auth-clients yes), or share no cipher suite with the client"
        }
        "ProtocolVersion" => {
            "the node and the client share no TLS version: check the node's tls-protocols and the client's TLS minimum (the client never speaks TLS older than 1.2)"
        }
        _ => return None,
    })
}

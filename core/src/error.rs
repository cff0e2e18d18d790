//! Typed errors with per-node detail.
//!
//! Every front (C, Python, Node, .NET, the CLI) maps [`ErrorKind`] to its own
//! idiom, so the kinds and their numeric codes are part of the API: new kinds
//! may be added, existing ones are never renumbered.

use std::fmt;

/// What went wrong, independent of the node(s) it happened on.
///
/// The discriminant is the stable number ([`ErrorKind::code`]) and the
/// snake_case variant name the stable name ([`ErrorKind::as_str`]) every front
/// shares; `tests/vectors/protocol.json` (`error_kinds`) lists both, and each
/// front's tests compare their own table with it.
#[non_exhaustive]
#[repr(i32)]
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, strum::VariantArray, strum::IntoStaticStr, strum::EnumString,
)]
#[strum(serialize_all = "snake_case")]
pub enum ErrorKind {
    /// The lock is held by someone else (a quorum of nodes said so).
    NotAcquired = 1,
    /// The `wait` deadline passed before the lock could be taken.
    Timeout = 2,
    /// Not enough nodes answered to decide: Redis unreachable, paused or erroring.
    Unavailable = 3,
    /// The lock was lost while held (key deleted, expired or taken over).
    Lost = 4,
    /// The lock was no longer held when released or extended.
    NotHeld = 5,
    /// A fenced write carried a token older than the one already stored.
    StaleToken = 6,
    /// An argument was out of range (empty resource, zero ttl, oversized key…).
    InvalidArgument = 7,
    /// The client configuration is invalid (bad URL, no nodes, zero timeout…).
    Config = 8,
    /// Redis refused the credentials or the ACL user lacks a permission.
    Auth = 9,
    /// The TLS handshake or certificate verification failed.
    Tls = 10,
    /// The client, lock or runtime is closed (or unusable after `fork()`).
    Closed = 11,
    /// A blocking call was made from inside an async runtime, where it would deadlock.
    WouldBlock = 12,
    /// The operation was stopped through its [`Canceller`](crate::Canceller)
    /// (a Node `AbortSignal`, a cancelled asyncio task, C's
    /// `fencelock_operation_cancel`, a .NET `CancellationToken`). Numbered
    /// 102, as the C ABI's `FENCELOCK_STATUS_CANCELLED` always was.
    Cancelled = 102,
    /// A bug in fencelock: a panic was caught before it reached the caller.
    /// Numbered 200, as the C ABI's `FENCELOCK_STATUS_INTERNAL` always was.
    Internal = 200,
}

impl ErrorKind {
    /// Every kind, in code order.
    pub const ALL: &'static [ErrorKind] = <ErrorKind as strum::VariantArray>::VARIANTS;

    /// The stable numeric code of this kind, shared by every front (the C
    /// ABI's status has the same value).
    pub fn code(self) -> i32 {
        self as i32
    }

    /// The stable name, for logs and foreign error classes (`"not_acquired"`, …).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The kind with stable name `name`, if this version knows it.
    pub fn from_name(name: &str) -> Option<ErrorKind> {
        name.parse().ok()
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one node answered to one request.
///
/// [`NodeOutcome::name`] is the stable name every front shares
/// (`tests/vectors/protocol.json`, `node_outcomes`).
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
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

impl NodeOutcome {
    /// The outcome of a script reply the protocol does not allow.
    pub(crate) fn unexpected_reply(value: &redis::Value) -> Self {
        NodeOutcome::Failed(NodeFailure {
            kind: ErrorKind::Unavailable,
            detail: format!("unexpected script reply {value:?}; is another program using fencelock's keys?"),
        })
    }

    /// The stable name of this outcome: `"ok"`, `"held_by_other"`, `"missing"`,
    /// `"timed_out"`, `"failed"` or `"pending"`.
    pub fn name(&self) -> &'static str {
        self.into()
    }
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

    /// The error for a panic caught before it reached the caller: `what`
    /// (e.g. "an internal fencelock task") panicked, which is a bug.
    pub fn panicked(what: &str) -> Self {
        Error::new(
            ErrorKind::Internal,
            format!("{what} panicked; this is a bug in fencelock, please report it"),
        )
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
    if let Some(detail) = refusal_detail(err) {
        return NodeFailure {
            kind: ErrorKind::Auth,
            detail,
        };
    }
    let text = err.to_string();
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

/// A node's refusal of the credentials or of an ACL right: a configuration
/// problem that no retry fixes, so it must not pass for an unavailable node.
#[derive(Debug)]
enum Refusal<'a> {
    /// The ACL user lacks a right; the node's words about which.
    Acl(&'a str),
    /// `WRONGPASS`: wrong user name or password, or a disabled user.
    Credentials,
    /// `NOAUTH`: the node wants `AUTH` before anything else.
    NotAuthenticated,
    /// `AUTH <password>` sent to a node whose default user has no password.
    NoPasswordOnNode,
}

/// What the node refused, from an error reply's code and words; `None` for
/// any other error. tests/vectors/protocol.json (`server_errors`) holds the
/// replies of Redis 7.0 to 8.0 and Valkey 7.2 to 9.1 this must recognise.
fn refusal<'a>(code: &str, words: &'a str) -> Option<Refusal<'a>> {
    match code {
        // Every server refuses a command sent outside a script with this code
        // (src/server.c processCommand), and EXEC after an ACL change
        // (src/multi.c), whatever the wording after it.
        "NOPERM" => Some(Refusal::Acl(words)),
        // AUTH and HELLO … AUTH with a bad password or a disabled user (src/acl.c).
        "WRONGPASS" => Some(Refusal::Credentials),
        // requirepass, or a default user that needs a password (src/server.c).
        "NOAUTH" => Some(Refusal::NotAuthenticated),
        "ERR" => err_refusal(words),
        _ => None,
    }
}

/// How servers start a refusal of a key, channel or database (src/acl.c
/// getAclErrorMessage, Redis 7.2 and later, every Valkey).
const NO_PERMISSIONS: &str = "No permissions to access ";

/// Refusals that come back as plain `ERR`. Inside a script an ACL refusal
/// becomes a Lua error, and Lua errors all have the code `ERR`, so only the
/// exact phrase each server puts first can tell: a script's own error and
/// the Lua runtime's errors start with other words (`user_script:1: …`).
fn err_refusal(words: &str) -> Option<Refusal<'_>> {
    // Redis 7.2 and later, every Valkey: src/script.c scriptVerifyACL.
    if let Some(what) = words.strip_prefix("ACL failure in script: ") {
        return Some(Refusal::Acl(what));
    }
    // Redis 7.0: src/script.c scriptVerifyACL, then "can't run this command
    // or subcommand", "can't access at least one of the keys…" (src/acl.c).
    if let Some(what) = words.strip_prefix("The user executing the script ") {
        return Some(Refusal::Acl(what));
    }
    // redis-rs reports a refused SELECT (the database in the node URL) as its
    // own error with the node's words but not their NOPERM code; the words are
    // src/acl.c getAclErrorMessage's, which no other reply starts with.
    if words.starts_with(NO_PERMISSIONS) {
        return Some(Refusal::Acl(words));
    }
    // src/acl.c authCommand: the client has a password, the node has none.
    if words.starts_with("AUTH <password> called without any password configured") {
        return Some(Refusal::NoPasswordOnNode);
    }
    None
}

/// The detail of a refusal: the node's reply as it sent it (`CODE words`)
/// and what to change. `None` when `err` is no refusal.
fn refusal_detail(err: &redis::RedisError) -> Option<String> {
    let (code, words) = (err.code()?, err.detail()?);
    let reply = match code {
        // redis-rs's refused SELECT: the node's words, without the code it dropped.
        "ERR" if words.starts_with(NO_PERMISSIONS) => words.to_owned(),
        _ => format!("{code} {words}"),
    };
    Some(match refusal(code, words)? {
        Refusal::Acl(what) => format!("permission denied by the node's ACL: {reply}; {}", acl_hint(what)),
        Refusal::Credentials => format!(
            "the node refused the credentials: {reply}; check the user name and password in the node URL, \
             and that the ACL user is on"
        ),
        Refusal::NotAuthenticated => format!(
            "the node requires a password: {reply}; put the user name and password in the node URL \
             (redis://user:password@host:port)"
        ),
        Refusal::NoPasswordOnNode => format!(
            "the node has no password: {reply}; remove the password from the node URL, or add the name \
             of the ACL user it belongs to"
        ),
    })
}

/// Which right to grant, from the node's words about the refusal: the
/// command when the node names it (all but Redis 7.0's scripts), else the
/// kind of thing refused. ACL LOG on the node names what the words do not.
fn acl_hint(what: &str) -> String {
    if let Some(command) = quoted_after(what, "to run the '") {
        return format!(
            "grant the user +{command} (ACL SETUSER <user> +{command}); docs/protocol.md lists every \
             command fencelock needs"
        );
    }
    let hint = if what.contains("run this command") {
        "grant the user the commands fencelock's scripts call (docs/protocol.md, ACL rights); \
         ACL LOG on the node names the refused one"
    } else if what.contains("channel") {
        "grant the user the channel (&pattern); ACL LOG on the node names it"
    } else if what.contains("key") {
        "grant the user the lock keys (~<prefix>*, ~fencelock:* by default) and the fenced data keys; \
         ACL LOG on the node names the refused key"
    } else if what.contains("database") {
        "grant the user the database of the node URL (db=<n>), or use one it may access"
    } else {
        "grant the rights docs/protocol.md lists; ACL LOG on the node names the refused one"
    };
    hint.to_owned()
}

/// The text between `before` and the next `'`.
fn quoted_after<'a>(text: &'a str, before: &str) -> Option<&'a str> {
    let start = text.find(before)? + before.len();
    let len = text[start..].find('\'')?;
    Some(&text[start..start + len])
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An error reply as redis-rs hands it over, from its wire line (without `-` and CRLF).
    fn reply_error(line: &str) -> redis::RedisError {
        match redis::parse_redis_value(format!("-{line}\r\n").as_bytes()) {
            Ok(redis::Value::ServerError(err)) => err.into(),
            other => panic!("{line:?} is not an error reply: {other:?}"),
        }
    }

    fn kind_named(name: &str) -> ErrorKind {
        ErrorKind::from_name(name).unwrap_or_else(|| panic!("no kind {name} in the vectors' server_errors"))
    }

    /// Every outcome, in the C ABI's order. Made here because `NodeFailure`
    /// is not constructible outside the crate.
    fn every_outcome() -> Vec<NodeOutcome> {
        let failure = NodeFailure {
            kind: ErrorKind::Unavailable,
            detail: "refused".into(),
        };
        // A new variant makes this match fail to compile: add it to the list and the vectors.
        let listed = |outcome: &NodeOutcome| match outcome {
            NodeOutcome::Ok
            | NodeOutcome::HeldByOther
            | NodeOutcome::Missing
            | NodeOutcome::TimedOut
            | NodeOutcome::Failed(_)
            | NodeOutcome::Pending => true,
        };
        let all = vec![
            NodeOutcome::Ok,
            NodeOutcome::HeldByOther,
            NodeOutcome::Missing,
            NodeOutcome::TimedOut,
            NodeOutcome::Failed(failure),
            NodeOutcome::Pending,
        ];
        assert!(all.iter().all(listed));
        all
    }

    #[test]
    fn node_outcome_names_are_the_vectors() {
        let vectors: serde_json::Value =
            serde_json::from_str(include_str!("../../tests/vectors/protocol.json")).expect("valid JSON");
        let expected: Vec<&str> = vectors["node_outcomes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["name"].as_str().unwrap())
            .collect();
        let names: Vec<&str> = every_outcome().iter().map(NodeOutcome::name).collect();
        assert_eq!(names, expected);
    }

    /// Every reply of tests/vectors/protocol.json's `server_errors` (Redis 7.0
    /// to 8.0, Valkey 7.2 to 9.1) is classified as the vectors say, and a
    /// refusal keeps the node's own words.
    #[test]
    fn server_error_vectors_are_classified_as_documented() {
        let vectors: serde_json::Value =
            serde_json::from_str(include_str!("../../tests/vectors/protocol.json")).expect("valid JSON");
        let mut wrong = Vec::new();
        let entries = vectors["server_errors"]["replies"]
            .as_array()
            .expect("server_errors.replies");
        for entry in entries {
            let text = |field: &str| entry[field].as_str().expect("a string");
            let (reply, expected) = (text("reply"), kind_named(text("kind")));
            let failure = classify_redis_error(&reply_error(reply));
            if failure.kind != expected {
                wrong.push(format!(
                    "{} {}: {:?}, not {:?}: {reply}",
                    text("server"),
                    text("case"),
                    failure.kind,
                    expected
                ));
            } else if expected == ErrorKind::Auth && !failure.detail.contains(reply) {
                wrong.push(format!(
                    "{} {}: the node's words are lost: {}",
                    text("server"),
                    text("case"),
                    failure.detail
                ));
            }
        }
        assert!(entries.len() >= 100, "read every vector ({})", entries.len());
        assert!(
            wrong.is_empty(),
            "{} of {} misclassified:\n{}",
            wrong.len(),
            entries.len(),
            wrong.join("\n")
        );
    }

    fn detail_of(line: &str) -> String {
        let failure = classify_redis_error(&reply_error(line));
        assert_eq!(failure.kind, ErrorKind::Auth, "{line}");
        failure.detail
    }

    /// The detail says what to grant: the command when the node names it, the
    /// lock keys for a key, and where to look when the node does not say.
    #[test]
    fn refusals_say_what_to_grant() {
        let named =
            detail_of("ERR ACL failure in script: User locker has no permissions to run the 'del' command");
        assert!(named.contains("ACL SETUSER <user> +del"), "{named}");
        let sub = detail_of("NOPERM this user has no permissions to run the 'client|setname' command");
        assert!(sub.contains("+client|setname"), "{sub}");
        let unnamed = detail_of("ERR The user executing the script can't run this command or subcommand");
        assert!(unnamed.contains("ACL LOG"), "{unnamed}");
        for key in [
            "NOPERM No permissions to access a key",
            "ERR ACL failure in script: No permissions to access a key",
        ] {
            assert!(detail_of(key).contains("~fencelock:*"), "{key}");
        }
        assert!(
            detail_of("WRONGPASS invalid username-password pair or user is disabled.")
                .contains("password in the node URL")
        );
        assert!(detail_of("NOAUTH Authentication required.").contains("redis://user:password@"));
    }

    /// redis-rs turns a refused SELECT (the database of the node URL) into its
    /// own error that keeps the node's words but drops their NOPERM code.
    #[test]
    fn a_database_refused_at_connection_is_auth() {
        let err = redis::RedisError::from((
            redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError),
            "Redis server refused to switch database",
            "No permissions to access database".to_owned(),
        ));
        let failure = classify_redis_error(&err);
        assert_eq!(failure.kind, ErrorKind::Auth);
        assert!(
            failure
                .detail
                .contains(": No permissions to access database; grant the user the database")
        );
    }

    /// The phrases count only where the servers put them: first. A script's
    /// own error (`error('…')`) that quotes one is the script's business.
    #[test]
    fn phrases_elsewhere_in_an_error_are_no_refusal() {
        for line in [
            "ERR user_script:1: ACL failure in script: quoted script: abc, on @user_script:1.",
            "ERR user_script:1: The user executing the script is made up script: abc, on @user_script:1.",
            "WRONGTYPE No permissions to access a key, says nobody",
        ] {
            assert_eq!(
                classify_redis_error(&reply_error(line)).kind,
                ErrorKind::Unavailable,
                "{line}"
            );
        }
        let refused = redis::RedisError::from((
            redis::ErrorKind::AuthenticationFailed,
            "Password authentication failed",
        ));
        assert_eq!(classify_redis_error(&refused).kind, ErrorKind::Auth);
    }
}

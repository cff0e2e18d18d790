//! Client configuration: [`ClientBuilder`].

use std::fmt;
use std::time::Duration;

use crate::backoff::RetryPolicy;
use crate::endpoint::{Endpoint, Topology};
use crate::error::{Error, Result};
use crate::keys::{DEFAULT_PREFIX, validate_prefix};
use crate::node::NodeSettings;
use crate::options::{LockDefaults, LockOptions};
use crate::tls::{TlsMaterial, TlsVersion};

/// The largest clock-drift factor accepted (10 %).
pub const MAX_DRIFT_FACTOR: f64 = 0.1;

/// Builds a [`Client`](crate::Client): one node for a single-node lock, or several
/// independent masters for Redlock.
///
/// ```no_run
/// # async fn demo() -> fencelock::Result<()> {
/// use std::time::Duration;
///
/// let client = fencelock::Client::builder()
///     .node("redis://127.0.0.1:7001")
///     .node("redis://127.0.0.1:7002")
///     .node("redis://127.0.0.1:7003")
///     .key_prefix("shop:")
///     .node_timeout(Duration::from_millis(50))
///     .build()
///     .await?;
/// # let _ = client; Ok(()) }
/// ```
///
/// An even node count works (the quorum is `n/2 + 1`) but tolerates no more
/// failures than the odd count below it, so prefer 1, 3, 5 or 7.
#[derive(Clone)]
pub struct ClientBuilder {
    pub(crate) nodes: Vec<String>,
    pub(crate) key_prefix: String,
    pub(crate) node_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) drift_factor: f64,
    pub(crate) retry: RetryPolicy,
    pub(crate) defaults: LockDefaults,
    pub(crate) username: Option<String>,
    pub(crate) password: Option<String>,
    pub(crate) tls: TlsMaterial,
    pub(crate) allow_mixed_tls: bool,
    pub(crate) require_aof: bool,
    pub(crate) metrics_per_resource: bool,
}

impl Default for ClientBuilder {
    fn default() -> Self {
        ClientBuilder {
            nodes: Vec::new(),
            key_prefix: DEFAULT_PREFIX.to_owned(),
            node_timeout: Duration::from_millis(100),
            connect_timeout: Duration::from_secs(1),
            drift_factor: 0.01,
            retry: RetryPolicy::default(),
            defaults: LockDefaults::default(),
            username: None,
            password: None,
            tls: TlsMaterial::default(),
            allow_mixed_tls: false,
            require_aof: false,
            metrics_per_resource: false,
        }
    }
}

impl ClientBuilder {
    /// Adds a node: `redis://[user:password@]host:port[/db]`, `rediss://…` for
    /// TLS, or `redis+cluster://…` / `rediss+cluster://…` for a whole Redis
    /// Cluster acting as one node.
    pub fn node(mut self, url: impl Into<String>) -> Self {
        self.nodes.push(url.into());
        self
    }

    /// Adds several nodes.
    pub fn nodes<I, S>(mut self, urls: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.nodes.extend(urls.into_iter().map(Into::into));
        self
    }

    /// Prefix of every key (default `"fencelock:"`). May not contain braces.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// Hard limit on each request to one node (default 100 ms). A node that
    /// does not answer in time counts as a failure for that attempt.
    pub fn node_timeout(mut self, timeout: Duration) -> Self {
        self.node_timeout = timeout;
        self
    }

    /// Limit on opening a connection when the client is built (default 1 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Clock-drift factor of the Redlock validity formula (default 0.01):
    /// validity = ttl − elapsed − (ttl·drift + 2 ms).
    pub fn drift_factor(mut self, factor: f64) -> Self {
        self.drift_factor = factor;
        self
    }

    /// How `acquire` backs off between attempts.
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// Default ttl for [`LockOptions`] that set none (default 30 s).
    pub fn default_ttl(mut self, ttl: Duration) -> Self {
        self.defaults.ttl = ttl;
        self
    }

    /// Default wait for [`LockOptions`] that set none (default 10 s).
    pub fn default_wait(mut self, wait: Duration) -> Self {
        self.defaults.wait = wait;
        self
    }

    /// Whether locks are auto-renewed unless their options say otherwise (default on).
    pub fn default_auto_renew(mut self, on: bool) -> Self {
        self.defaults.auto_renew = on;
        self
    }

    /// ACL user name for every node (overrides the URL's).
    pub fn username(mut self, user: impl Into<String>) -> Self {
        self.username = Some(user.into());
        self
    }

    /// Password for every node (overrides the URL's). Never printed.
    pub fn password(mut self, password: impl Into<String>) -> Self {
        self.password = Some(password.into());
        self
    }

    /// A PEM CA bundle to trust for `rediss://` nodes instead of the Mozilla roots.
    pub fn tls_ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls.root_ca_pem = Some(pem.into());
        self
    }

    /// A PEM client certificate and key for mutual TLS.
    pub fn tls_client_cert_pem(mut self, cert: impl Into<Vec<u8>>, key: impl Into<Vec<u8>>) -> Self {
        self.tls.client_cert_pem = Some((cert.into(), key.into()));
        self
    }

    /// The oldest TLS version accepted from `rediss://` nodes (default
    /// [`TlsVersion::V1_2`]; TLS 1.0 and 1.1 are never spoken). With
    /// [`TlsVersion::V1_3`], a node that offers only TLS 1.2 fails with
    /// [`crate::ErrorKind::Tls`]. Not available for `rediss+cluster://` nodes,
    /// whose TLS redis-rs sets up: restrict those with the servers'
    /// `tls-protocols`.
    pub fn tls_min_version(mut self, version: TlsVersion) -> Self {
        self.tls.min_version = version;
        self
    }

    /// Refuses nodes that do not run AOF (`appendonly yes`), or whose
    /// persistence cannot be checked (`CONFIG GET` refused by the ACL, a
    /// Redis Cluster node): their connections fail with
    /// [`crate::ErrorKind::Config`], and `build` fails if any node is
    /// refused. Without AOF a restarted node forgets its fencing counters
    /// and tokens may repeat (docs/protocol.md §5). A PostgreSQL node is
    /// refused likewise when a crash may lose its commits (`fsync` or
    /// `synchronous_commit` off). Off by default: such nodes are then only
    /// reported, with a warning event once per node.
    pub fn require_aof(mut self, require: bool) -> Self {
        self.require_aof = require;
        self
    }

    /// Labels what goes to the `metrics` facade with the resource (or
    /// semaphore, or read-write lock) name too. Off by default: every
    /// resource name becomes a time series of its own, which only suits a
    /// few, fixed names. [`crate::Client::metrics`] counts per client either way.
    pub fn metrics_per_resource(mut self, on: bool) -> Self {
        self.metrics_per_resource = on;
        self
    }

    /// Allows a quorum that mixes `rediss://` and `redis://` nodes (refused by
    /// default: one plaintext node weakens the whole quorum).
    pub fn allow_mixed_tls(mut self, allow: bool) -> Self {
        self.allow_mixed_tls = allow;
        self
    }

    pub(crate) fn validate(self) -> Result<ValidConfig> {
        if self.nodes.is_empty() {
            return Err(Error::config(
                "no nodes given; add one URL (single-node lock) or several independent masters (Redlock)",
            ));
        }
        let endpoints = self
            .nodes
            .iter()
            .map(|url| Endpoint::parse(url))
            .collect::<Result<Vec<_>>>()?;
        reject_duplicates(&endpoints)?;
        reject_mixed_stores(&endpoints)?;
        if !self.allow_mixed_tls && endpoints.iter().any(|e| e.tls) && endpoints.iter().any(|e| !e.tls) {
            return Err(Error::config(
                "some nodes use TLS (rediss://) and some do not; use TLS everywhere or call allow_mixed_tls(true)",
            ));
        }
        validate_prefix(&self.key_prefix)?;
        if self.node_timeout.is_zero() || self.connect_timeout.is_zero() {
            return Err(Error::config(
                "node_timeout and connect_timeout must be greater than zero",
            ));
        }
        if !(0.0..=MAX_DRIFT_FACTOR).contains(&self.drift_factor) {
            return Err(Error::config(format!(
                "drift_factor {} is out of range; use a value from 0 to {MAX_DRIFT_FACTOR} (0.01 is usual)",
                self.drift_factor
            )));
        }
        if self.retry.base_delay.is_zero() || self.retry.max_delay < self.retry.base_delay {
            return Err(Error::config(
                "retry policy needs base_delay > 0 and max_delay >= base_delay",
            ));
        }
        // Fails early on bad default ttl or wait instead of at the first acquire.
        LockOptions::default()
            .resolve(&self.defaults)
            .map_err(|e| Error::config(format!("default lock options: {}", e.message())))?;
        let settings = NodeSettings {
            request_timeout: self.node_timeout,
            connect_timeout: self.connect_timeout,
            username: self.username,
            password: self.password,
            tls: self.tls,
            require_aof: self.require_aof,
        };
        Ok(ValidConfig {
            endpoints,
            settings,
            key_prefix: self.key_prefix,
            drift_factor: self.drift_factor,
            retry: self.retry,
            defaults: self.defaults,
            metrics_per_resource: self.metrics_per_resource,
        })
    }
}

/// One PostgreSQL server per client, and never beside Redis nodes: a
/// PostgreSQL server keeps its own replicas consistent, so a quorum of
/// independent servers is not how it is made highly available (and a
/// quorum of Redis and SQL nodes would mix two clocks and two failure models).
fn reject_mixed_stores(endpoints: &[Endpoint]) -> Result<()> {
    let postgres = endpoints
        .iter()
        .filter(|e| e.topology == Topology::Postgres)
        .count();
    if postgres == 0 || (postgres == 1 && endpoints.len() == 1) {
        return Ok(());
    }
    Err(Error::config(if postgres == endpoints.len() {
        format!(
            "{postgres} PostgreSQL nodes given; use one PostgreSQL server per client (its own \
             replication is what keeps it available), or Redis masters for Redlock"
        )
    } else {
        "PostgreSQL and Redis nodes given together; a client uses one store: either one \
         postgresql:// URL or redis:// nodes"
            .to_owned()
    }))
}

fn reject_duplicates(endpoints: &[Endpoint]) -> Result<()> {
    for (i, a) in endpoints.iter().enumerate() {
        if let Some(b) = endpoints[..i].iter().find(|b| b.identity() == a.identity()) {
            return Err(Error::config(format!(
                "node {a} is listed twice (also as {b}); Redlock needs independent masters"
            )));
        }
    }
    Ok(())
}

impl fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|url| Endpoint::parse(url).map_or_else(|_| "<invalid url>".to_owned(), |e| e.to_string()))
            .collect();
        f.debug_struct("ClientBuilder")
            .field("nodes", &nodes)
            .field("key_prefix", &self.key_prefix)
            .field("node_timeout", &self.node_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("drift_factor", &self.drift_factor)
            .field("retry", &self.retry)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("tls_min_version", &self.tls.min_version)
            .field("require_aof", &self.require_aof)
            .field("metrics_per_resource", &self.metrics_per_resource)
            .finish_non_exhaustive()
    }
}

/// A configuration that passed validation.
pub(crate) struct ValidConfig {
    pub(crate) endpoints: Vec<Endpoint>,
    pub(crate) settings: NodeSettings,
    pub(crate) key_prefix: String,
    pub(crate) drift_factor: f64,
    pub(crate) retry: RetryPolicy,
    pub(crate) defaults: LockDefaults,
    pub(crate) metrics_per_resource: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    fn kind(builder: ClientBuilder) -> ErrorKind {
        builder.validate().err().expect("should be rejected").kind()
    }

    #[test]
    fn rejects_bad_configuration() {
        let one = || ClientBuilder::default().node("redis://127.0.0.1:1");
        assert_eq!(kind(ClientBuilder::default()), ErrorKind::Config);
        assert_eq!(kind(one().node("redis://127.0.0.1:1")), ErrorKind::Config);
        assert_eq!(kind(one().node_timeout(Duration::ZERO)), ErrorKind::Config);
        assert_eq!(kind(one().drift_factor(f64::NAN)), ErrorKind::Config);
        assert_eq!(kind(one().drift_factor(0.5)), ErrorKind::Config);
        assert_eq!(kind(one().key_prefix("{x}")), ErrorKind::Config);
        assert_eq!(kind(one().default_ttl(Duration::ZERO)), ErrorKind::Config);
        assert_eq!(kind(one().node("rediss://127.0.0.1:2")), ErrorKind::Config);
        assert!(
            one()
                .node("rediss://127.0.0.1:2")
                .allow_mixed_tls(true)
                .validate()
                .is_ok()
        );
        assert!(
            one()
                .node("redis://127.0.0.1:2")
                .node("redis://127.0.0.1:1/1")
                .validate()
                .is_ok()
        );
    }

    #[test]
    fn debug_never_shows_passwords() {
        let builder = ClientBuilder::default()
            .node("redis://user:hunter2@127.0.0.1:1")
            .password("correct-horse");
        let shown = format!("{builder:?}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("correct-horse"),
            "{shown}"
        );
    }
}

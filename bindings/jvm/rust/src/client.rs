//! `NativeClient`: the core client, connected in the background.

use std::sync::Arc;
use std::time::Duration;

use fencelock::{CampaignOptions, Client, ClientSettings, Fence, LockOptions, TlsVersion};

use crate::election::NativeObservation;
use crate::errors::{Result, invalid};
use crate::lock::{NativeLock, granted, granted_one};
use crate::metrics::NativeMetrics;
use crate::shared_locks::{NativeRwLock, NativeSemaphore};

/// Client settings (all optional but `nodes`); unset ones take the core's defaults.
#[derive(uniffi::Record)]
pub struct NativeClientOptions {
    /// One `redis://[user:password@]host:port[/db]` URL (single-node lock), or
    /// several independent masters (Redlock); `rediss://` for TLS,
    /// `postgresql://…` for one PostgreSQL server.
    pub nodes: Vec<String>,
    /// Prefix of every key (default `"fencelock:"`).
    pub key_prefix: Option<String>,
    /// Hard limit on each request to one node (default 100 ms).
    pub node_timeout: Option<Duration>,
    /// Limit on opening a connection (default 1 s).
    pub connect_timeout: Option<Duration>,
    /// Clock-drift factor of the Redlock validity formula (default 0.01).
    pub drift_factor: Option<f64>,
    /// Cap of the first retry delay while a lock is busy.
    pub retry_base_delay: Option<Duration>,
    /// Largest retry delay cap.
    pub retry_max_delay: Option<Duration>,
    /// ttl for acquisitions that give none (default 30 s).
    pub default_ttl: Option<Duration>,
    /// wait for acquisitions that give none (default 10 s).
    pub default_wait: Option<Duration>,
    /// Whether locks are renewed while held unless their options say otherwise.
    pub auto_renew: Option<bool>,
    /// ACL user name for every node (overrides the URLs').
    pub username: Option<String>,
    /// Password for every node (overrides the URLs'). Never printed.
    pub password: Option<String>,
    /// PEM CA bundle to trust for `rediss://` nodes instead of the Mozilla roots.
    pub tls_ca_pem: Option<String>,
    /// PEM client certificate for mutual TLS (with `tls_client_key_pem`).
    pub tls_client_cert_pem: Option<String>,
    /// PEM client key for mutual TLS (with `tls_client_cert_pem`).
    pub tls_client_key_pem: Option<String>,
    /// Oldest TLS version accepted: `"1.2"` (default) or `"1.3"`.
    pub tls_min_version: Option<String>,
    /// Allow a quorum that mixes `rediss://` and `redis://` nodes.
    pub allow_mixed_tls: Option<bool>,
    /// Refuse nodes that do not run AOF.
    pub require_aof: Option<bool>,
    /// Label the `metrics` facade's series with the resource name too.
    pub metrics_per_resource: Option<bool>,
}

/// Options of one acquisition; each unset one takes the client's default.
#[derive(uniffi::Record)]
pub struct NativeLockOptions {
    /// How long the lock lives without renewal.
    pub ttl: Option<Duration>,
    /// How long to keep trying while the lock is busy.
    pub wait: Option<Duration>,
    /// Whether the lock is renewed at ttl/3 while held.
    pub auto_renew: Option<bool>,
    /// Stop renewing once the lock has been held this long in total.
    pub max_hold: Option<Duration>,
    /// Stop renewing after this many renewals.
    pub max_renewals: Option<u32>,
    /// Fair (FIFO) waiting.
    pub fair: bool,
}

impl NativeLockOptions {
    pub(crate) fn to_core(&self) -> LockOptions {
        let mut options = LockOptions::default().fair(self.fair);
        if let Some(ttl) = self.ttl {
            options = options.ttl(ttl);
        }
        if let Some(wait) = self.wait {
            options = options.wait(wait);
        }
        if let Some(on) = self.auto_renew {
            options = options.auto_renew(on);
        }
        if let Some(limit) = self.max_hold {
            options = options.max_hold(limit);
        }
        if let Some(limit) = self.max_renewals {
            options = options.max_renewals(limit);
        }
        options
    }
}

/// What `fenced_get` reads: the value and the fencing token of the write that stored it.
#[derive(uniffi::Record)]
pub struct FencedValue {
    /// The stored value.
    pub value: String,
    /// The fencing token of the write that stored it.
    pub fencing_token: u64,
}

/// One node's view of a lock (`Client::inspect`).
#[derive(uniffi::Record)]
pub struct NativeNodeLockState {
    /// The node, without credentials.
    pub node: String,
    /// Whether the lock key exists there.
    pub held: bool,
    /// Its remaining ttl, if it exists and has one.
    pub ttl: Option<Duration>,
    /// How many grants the node has counted for the resource, ever.
    pub fencing_counter: u64,
    /// The waiters in the lock's queue there whose lease is still running.
    pub waiters: u64,
    /// The node's error, if it did not answer.
    pub error: Option<String>,
}

impl From<fencelock::NodeLockState> for NativeNodeLockState {
    fn from(state: fencelock::NodeLockState) -> Self {
        NativeNodeLockState {
            node: state.node,
            held: state.held,
            ttl: state.ttl_ms.map(Duration::from_millis),
            fencing_counter: state.fencing_counter,
            waiters: state.waiters,
            error: state.error,
        }
    }
}

/// The core client.
#[derive(uniffi::Object)]
pub struct NativeClient {
    client: Client,
}

#[uniffi::export]
impl NativeClient {
    /// Validates `options` (a `config` error at once) and starts connecting
    /// in the background; operations wait for the connections.
    #[uniffi::constructor]
    pub fn new(options: NativeClientOptions) -> Result<Arc<Self>> {
        let client = builder(options)?.start()?;
        Ok(Arc::new(NativeClient { client }))
    }

    /// Checks an acquisition's arguments without I/O (`invalid_argument`).
    pub fn check_request(&self, resource: String, options: NativeLockOptions) -> Result<()> {
        Ok(self.client.check_request(&resource, &options.to_core())?)
    }

    /// Takes the lock, waiting up to the options' wait while it is busy.
    pub async fn acquire(&self, resource: String, options: NativeLockOptions) -> Result<Arc<NativeLock>> {
        let (client, options) = (self.client.clone(), options.to_core());
        granted_one(async move { client.acquire(&resource, options).await }).await
    }

    /// One attempt: `None` when the lock is held elsewhere.
    pub async fn try_acquire(
        &self,
        resource: String,
        options: NativeLockOptions,
    ) -> Result<Option<Arc<NativeLock>>> {
        let (client, options) = (self.client.clone(), options.to_core());
        granted(async move { client.try_acquire(&resource, options).await }).await
    }

    /// Checks a campaign's arguments without I/O.
    pub fn check_campaign(
        &self,
        name: String,
        ttl: Option<Duration>,
        wait: Option<Duration>,
        value: Vec<u8>,
    ) -> Result<()> {
        Ok(self
            .client
            .check_campaign(&name, &campaign_options(ttl, wait, value))?)
    }

    /// Campaigns to lead the election `name`; the leadership is a lock on
    /// `name` whose fencing token is the epoch.
    pub async fn campaign(
        &self,
        name: String,
        ttl: Option<Duration>,
        wait: Option<Duration>,
        value: Vec<u8>,
    ) -> Result<Arc<NativeLock>> {
        let (client, options) = (self.client.clone(), campaign_options(ttl, wait, value));
        granted_one(async move { Ok(client.campaign(&name, options).await?.into_lock()) }).await
    }

    /// Follows the election `name`: the current leader, then each new one.
    pub fn observe(&self, name: String) -> Result<Arc<NativeObservation>> {
        Ok(NativeObservation::new(self.client.observe(&name)?))
    }

    /// The counting semaphore `name` with `permits` permits. No I/O.
    pub fn semaphore(&self, name: String, permits: u32) -> Result<Arc<NativeSemaphore>> {
        Ok(NativeSemaphore::new(
            self.client.clone(),
            self.client.semaphore(&name, permits)?,
        ))
    }

    /// The read-write lock `name`. No I/O.
    pub fn rw_lock(&self, name: String) -> Result<Arc<NativeRwLock>> {
        Ok(NativeRwLock::new(
            self.client.clone(),
            self.client.rw_lock(&name)?,
        ))
    }

    /// Writes `value` to the hash `key` on the first node only if the fence
    /// (token, holder; holder 0 for a bare token) is newer than the last write's.
    pub async fn fenced_set(&self, key: String, value: String, token: u64, holder: u64) -> Result<()> {
        if holder > fencelock::MAX_HOLDER_ID {
            return Err(invalid(format!(
                "holder must be from 0 to {}",
                fencelock::MAX_HOLDER_ID
            )));
        }
        Ok(self
            .client
            .fenced_set(&key, &value, Fence { token, holder })
            .await?)
    }

    /// Reads what `fenced_set` stored, or `None`.
    pub async fn fenced_get(&self, key: String) -> Result<Option<FencedValue>> {
        let stored = self.client.fenced_get(&key).await?;
        Ok(stored.map(|(value, fencing_token)| FencedValue { value, fencing_token }))
    }

    /// Each node's view of `resource`: held or not, ttl, fencing counter,
    /// live waiters, or the node's error (one read-only script per node).
    pub async fn inspect(&self, resource: String) -> Result<Vec<NativeNodeLockState>> {
        let states = self.client.inspect(&resource).await?;
        Ok(states.into_iter().map(NativeNodeLockState::from).collect())
    }

    /// What this client has counted so far.
    pub fn metrics(&self) -> NativeMetrics {
        self.client.metrics().into()
    }

    /// The nodes, as URLs without credentials.
    pub fn nodes(&self) -> Vec<String> {
        self.client.nodes()
    }

    /// How many nodes must agree.
    pub fn quorum(&self) -> u32 {
        u32::try_from(self.client.quorum()).unwrap_or(u32::MAX)
    }

    /// Resolves once the client's background clean-up has finished.
    pub async fn settle(&self) {
        self.client.settle().await;
    }

    /// Refuses new operations from now on (not `close`, which uniffi's
    /// Kotlin objects own).
    pub fn shutdown(&self) {
        self.client.close();
    }
}

/// Without a ttl the client's default applies, as for `acquire`; without a
/// wait, the campaign waits until elected.
fn campaign_options(ttl: Option<Duration>, wait: Option<Duration>, value: Vec<u8>) -> CampaignOptions {
    let mut options = CampaignOptions::default().value(value);
    if let Some(ttl) = ttl {
        options = options.ttl(ttl);
    }
    if let Some(wait) = wait {
        options = options.wait(wait);
    }
    options
}

fn builder(options: NativeClientOptions) -> Result<fencelock::ClientBuilder> {
    let mut settings = ClientSettings::default();
    settings.key_prefix = options.key_prefix;
    settings.node_timeout = options.node_timeout;
    settings.connect_timeout = options.connect_timeout;
    settings.drift_factor = options.drift_factor;
    settings.retry_base_delay = options.retry_base_delay;
    settings.retry_max_delay = options.retry_max_delay;
    settings.default_ttl = options.default_ttl;
    settings.default_wait = options.default_wait;
    settings.auto_renew = options.auto_renew;
    settings.username = options.username;
    settings.password = options.password;
    settings.tls_ca_pem = options.tls_ca_pem.map(String::into_bytes);
    settings.tls_client_cert = match (options.tls_client_cert_pem, options.tls_client_key_pem) {
        (Some(cert), Some(key)) => Some((cert.into_bytes(), key.into_bytes())),
        (None, None) => None,
        _ => {
            return Err(config(
                "give both tlsClientCertPem and tlsClientKeyPem for mutual TLS, or neither",
            ));
        }
    };
    settings.tls_min_version = match options.tls_min_version.as_deref() {
        None => None,
        Some("1.2") => Some(TlsVersion::V1_2),
        Some("1.3") => Some(TlsVersion::V1_3),
        Some(other) => {
            return Err(config(&format!(
                "tlsMinVersion must be \"1.2\" or \"1.3\", not {other:?}"
            )));
        }
    };
    settings.allow_mixed_tls = options.allow_mixed_tls;
    settings.require_aof = options.require_aof;
    settings.metrics_per_resource = options.metrics_per_resource;
    Ok(Client::builder().nodes(options.nodes).settings(settings))
}

/// A configuration error for the Kotlin side.
fn config(message: &str) -> crate::errors::NativeError {
    fencelock::Error::new(fencelock::ErrorKind::Config, message).into()
}

//! `NativeClient`: the core client, connected in the background.

use std::future::Future;

use napi::Env;
use napi::bindgen_prelude::{BigInt, Buffer, PromiseRaw, ToNapiValue};
use napi_derive::napi;

use fencelock::{CampaignOptions, Client, ClientSettings, Lock, LockOptions, TlsVersion};

use crate::args::{millis, opt_millis, throw};
use crate::bridge;
use crate::errors;
use crate::lock::{self, Canceller, LockHandle};
use crate::metrics::NativeMetrics;
use crate::observe::NativeObservation;
use crate::rw_lock::NativeRwLock;
use crate::semaphore::NativeSemaphore;
use crate::values::{null, undefined};

/// Client settings, as validated by the JavaScript layer (all optional but `nodes`).
#[napi(object)]
pub struct ClientOptions {
    /// One `redis://[user:password@]host:port[/db]` URL (single-node lock), or
    /// several independent masters (Redlock). `rediss://` for TLS.
    pub nodes: Vec<String>,
    /// Prefix of every key (default `"fencelock:"`). May not contain braces.
    pub key_prefix: Option<String>,
    /// Hard limit on each request to one node, in ms (default 100).
    pub node_timeout_ms: Option<f64>,
    /// Limit on opening a connection, in ms (default 1000).
    pub connect_timeout_ms: Option<f64>,
    /// Clock-drift factor of the Redlock validity formula, 0 to 0.1 (default 0.01).
    pub drift_factor: Option<f64>,
    /// Cap of the first retry delay while a lock is busy, in ms (default 10).
    pub retry_base_delay_ms: Option<f64>,
    /// Largest retry delay cap, in ms (default 500).
    pub retry_max_delay_ms: Option<f64>,
    /// ttl for `acquire` calls that give none, in ms (default 30000).
    pub default_ttl_ms: Option<f64>,
    /// wait for `acquire` calls that give none, in ms (default 10000).
    pub default_wait_ms: Option<f64>,
    /// Whether locks are renewed at ttl/3 while held unless their options say
    /// otherwise (default true).
    pub auto_renew: Option<bool>,
    /// ACL user name for every node (overrides the URLs').
    pub username: Option<String>,
    /// Password for every node (overrides the URLs'). Never printed.
    pub password: Option<String>,
    /// PEM CA bundle to trust for `rediss://` nodes instead of the Mozilla roots.
    pub tls_ca_pem: Option<String>,
    /// PEM client certificate for mutual TLS (with `tlsClientKeyPem`).
    pub tls_client_cert_pem: Option<String>,
    /// PEM client key for mutual TLS (with `tlsClientCertPem`).
    pub tls_client_key_pem: Option<String>,
    /// Oldest TLS version accepted from `rediss://` nodes: `'1.2'` (default;
    /// TLS 1.0 and 1.1 are never spoken) or `'1.3'`. Another string throws a
    /// `RangeError`, a non-string (such as the number `1.3`) a `TypeError`.
    /// With `'1.3'`, a node that offers only TLS 1.2 fails with `TlsError`,
    /// and `rediss+cluster://` nodes are refused with `ConfigError` (restrict
    /// those with the servers' `tls-protocols`).
    #[napi(ts_type = "'1.2' | '1.3'")]
    pub tls_min_version: Option<String>,
    /// Allow a quorum that mixes `rediss://` and `redis://` nodes (refused by default).
    pub allow_mixed_tls: Option<bool>,
}

/// Options of one acquire, as checked by `lib/args.js` (each absent one
/// takes the client's default).
#[napi(object, js_name = "LockOptions")]
pub struct NativeLockOptions {
    /// How long the lock lives without renewal, in ms.
    pub ttl_ms: Option<f64>,
    /// How long `acquire` keeps retrying while the lock is busy, in ms.
    pub wait_ms: Option<f64>,
    /// Whether the lock is renewed at ttl/3 while held.
    pub auto_renew: Option<bool>,
    /// Stop renewing once the lock has been held this long in total, in ms.
    pub max_hold_ms: Option<f64>,
    /// Stop renewing after this many renewals.
    pub max_renewals: Option<u32>,
    /// Fair (FIFO) waiting: never take the lock ahead of an earlier waiter.
    pub fair: Option<bool>,
}

/// Options of one campaign, as checked by `lib/args.js`.
#[napi(object, js_name = "CampaignOptions")]
pub struct NativeCampaignOptions {
    /// The leader's lease, in ms (absent: the client's default ttl).
    pub ttl_ms: Option<f64>,
    /// How long to wait to be elected, in ms (absent: until elected).
    pub wait_ms: Option<f64>,
    /// What observers learn about this leader (absent: empty).
    pub value: Option<Buffer>,
}

/// What `fencedGet` reads: the value and the fencing token of the write that stored it.
#[napi(object)]
pub struct FencedValue {
    /// The stored value.
    pub value: String,
    /// The fencing token of the write that stored it.
    pub fencing_token: BigInt,
}

/// One node's view of a lock, from `inspect` (for operators; never the owner's token).
#[napi(object)]
pub struct NodeLockState {
    /// The node, without credentials.
    pub node: String,
    /// Whether the lock key exists there.
    pub held: bool,
    /// Its remaining ttl in ms, if it exists and has one.
    pub ttl_ms: Option<f64>,
    /// The resource's fencing counter on that node.
    pub fencing_counter: BigInt,
    /// The waiters in the lock's queue there whose lease still runs.
    pub waiters: u32,
    /// The error, if the node did not answer.
    pub error: Option<String>,
}

/// The native client behind `Client` in `lib/client.js`.
#[napi]
pub struct NativeClient {
    client: Client,
}

#[napi]
impl NativeClient {
    /// Validates `options` (throwing the core's `ConfigError` at once) and
    /// starts connecting in the background; operations wait for it.
    #[napi(constructor)]
    pub fn new(env: Env, options: ClientOptions) -> napi::Result<Self> {
        let client = builder(&env, options)?
            .start()
            .map_err(|err| errors::throw(&env, &err))?;
        Ok(NativeClient { client })
    }

    /// Takes the lock, waiting up to `options.waitMs` while it is busy;
    /// rejects with `LockTimeoutError` then (or `NotAcquiredError` when it
    /// is 0). `canceller.cancel()` stops the wait and undoes any partial
    /// grant: the promise rejects with a `CancelledError`, which
    /// `Client#acquire` replaces with the `AbortSignal`'s reason.
    #[napi(ts_return_type = "Promise<unknown>")]
    pub fn acquire<'env>(
        &self,
        env: &'env Env,
        resource: String,
        options: NativeLockOptions,
        canceller: Option<&Canceller>,
    ) -> napi::Result<PromiseRaw<'env, LockHandle>> {
        let options = options.to_core(env)?;
        let client = self.client.clone();
        let attempt = async move { client.acquire(&resource, options).await.map(Some) };
        lock_promise(env, attempt, canceller)
    }

    /// One attempt (`options.waitMs` plays no part): resolves `null` when the
    /// lock is held elsewhere.
    #[napi(ts_return_type = "Promise<unknown | null>")]
    pub fn try_acquire<'env>(
        &self,
        env: &'env Env,
        resource: String,
        options: NativeLockOptions,
    ) -> napi::Result<PromiseRaw<'env, Option<LockHandle>>> {
        let options = options.to_core(env)?;
        let client = self.client.clone();
        let attempt = async move { client.try_acquire(&resource, options).await };
        lock_promise(env, attempt, None)
    }

    /// Campaigns to lead the election `name`: waits until elected (or up to
    /// `options.waitMs`, then rejects with `LockTimeoutError`), announces
    /// `options.value` to observers, and resolves with the lock handle of
    /// the leadership (a lock on `name`; its fencing token is the epoch).
    /// A value over `MAX_LEADER_VALUE` bytes rejects with
    /// `InvalidArgumentError`. `canceller` stops the wait as for `acquire`.
    #[napi(ts_return_type = "Promise<unknown>")]
    pub fn campaign<'env>(
        &self,
        env: &'env Env,
        name: String,
        options: NativeCampaignOptions,
        canceller: Option<&Canceller>,
    ) -> napi::Result<PromiseRaw<'env, LockHandle>> {
        let options = options.to_core(env)?;
        let client = self.client.clone();
        let attempt = async move {
            let leadership = client.campaign(&name, options).await?;
            Ok(Some(leadership.into_lock()))
        };
        lock_promise(env, attempt, canceller)
    }

    /// Starts following the election `name` (subscribing on every node at
    /// once); `next()` on the result gives each new leader. Throws
    /// `ClosedError` after `close`, `InvalidArgumentError` for a name the
    /// core refuses.
    #[napi]
    pub fn observe(&self, env: Env, name: String) -> napi::Result<NativeObservation> {
        let observation = self
            .client
            .observe(&name)
            .map_err(|err| errors::throw(&env, &err))?;
        Ok(NativeObservation::new(observation))
    }

    /// The counting semaphore `name` with `permits` permits (1 to
    /// `MAX_PERMITS`), checked by `lib/args.js` first. No I/O. Throws the
    /// core's `InvalidArgumentError` for a name or number it refuses.
    #[napi]
    pub fn semaphore(&self, env: Env, name: String, permits: u32) -> napi::Result<NativeSemaphore> {
        let semaphore = self
            .client
            .semaphore(&name, permits)
            .map_err(|err| errors::throw(&env, &err))?;
        Ok(NativeSemaphore::new(semaphore))
    }

    /// The read-write lock `name`, checked by `lib/args.js` first. No I/O.
    /// Throws the core's `InvalidArgumentError` for a name it refuses.
    #[napi]
    pub fn rw_lock(&self, env: Env, name: String) -> napi::Result<NativeRwLock> {
        let rw = self
            .client
            .rw_lock(&name)
            .map_err(|err| errors::throw(&env, &err))?;
        Ok(NativeRwLock::new(rw))
    }

    /// Writes `value` to the hash `key` on the first node, only if the fence
    /// (`fencingToken`, `holder`) is newer than the last write's: a larger
    /// token, or the same token from the same grant (holder 0: a bare token);
    /// rejects with `StaleTokenError` otherwise.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn fenced_set<'env>(
        &self,
        env: &'env Env,
        key: String,
        value: String,
        fencing_token: BigInt,
        holder: BigInt,
    ) -> napi::Result<PromiseRaw<'env, ()>> {
        let token = token_u64(env, "fencingToken", &fencing_token)?;
        let holder = token_u64(env, "holder", &holder)?;
        if holder > fencelock::MAX_HOLDER_ID {
            return Err(throw(env, false, "holder must be a bigint from 0n to 2n**63n-1n"));
        }
        let fence = fencelock::Fence { token, holder };
        let state = bridge::state(env.raw())?;
        let client = self.client.clone();
        let work = async move { client.fenced_set(&key, &value, fence).await };
        state.promise(work, |env, ()| undefined(env))
    }

    /// Reads what `fencedSet` stored, or `null`.
    #[napi(ts_return_type = "Promise<FencedValue | null>")]
    pub fn fenced_get<'env>(
        &self,
        env: &'env Env,
        key: String,
    ) -> napi::Result<PromiseRaw<'env, Option<FencedValue>>> {
        let state = bridge::state(env.raw())?;
        let client = self.client.clone();
        let work = async move { client.fenced_get(&key).await };
        state.promise(work, |env, stored| {
            let value = stored.map(|(value, token)| FencedValue {
                value,
                fencing_token: BigInt::from(token),
            });
            // SAFETY: on the JavaScript thread of `env`.
            unsafe { Option::<FencedValue>::to_napi_value(env, value) }
        })
    }

    /// Each node's view of `resource`.
    #[napi(ts_return_type = "Promise<NodeLockState[]>")]
    pub fn inspect<'env>(
        &self,
        env: &'env Env,
        resource: String,
    ) -> napi::Result<PromiseRaw<'env, Vec<NodeLockState>>> {
        let state = bridge::state(env.raw())?;
        let client = self.client.clone();
        let work = async move { client.inspect(&resource).await };
        state.promise(work, |env, states| {
            let states: Vec<NodeLockState> = states
                .into_iter()
                .map(|s| NodeLockState {
                    node: s.node,
                    held: s.held,
                    ttl_ms: s.ttl_ms.map(|t| t as f64),
                    fencing_counter: BigInt::from(s.fencing_counter),
                    waiters: u32::try_from(s.waiters).unwrap_or(u32::MAX),
                    error: s.error,
                })
                .collect();
            // SAFETY: on the JavaScript thread of `env`.
            unsafe { Vec::<NodeLockState>::to_napi_value(env, states) }
        })
    }

    /// The core's snapshot of what this client counted (no I/O; also after `close`).
    #[napi]
    pub fn metrics(&self) -> NativeMetrics {
        self.client.metrics().into()
    }

    /// Refuses new operations from now on and ends every observation this
    /// client started (the core ends them: a pending `next()` resolves
    /// `null`). Held locks can still be released.
    #[napi]
    pub fn close(&self) {
        self.client.close();
    }
}

/// A promise for the lock `attempt` takes: resolved with its lock handle,
/// or `null` for none (`tryAcquire` found it held). Under `canceller`, a
/// cancelled attempt rejects with `CancelledError` and leaves nothing held.
pub(crate) fn lock_promise<'env, T, F>(
    env: &'env Env,
    attempt: F,
    canceller: Option<&Canceller>,
) -> napi::Result<PromiseRaw<'env, T>>
where
    F: Future<Output = fencelock::Result<Option<Lock>>> + Send + 'static,
{
    let state = bridge::state(env.raw())?;
    let canceller = canceller.map(Canceller::core);
    let work = async move {
        match canceller {
            None => attempt.await,
            Some(canceller) => canceller.run(attempt).await?,
        }
    };
    state.promise(work, |env, lock| match lock {
        Some(lock) => lock::handle(env, lock),
        None => null(env),
    })
}

fn builder(env: &Env, o: ClientOptions) -> napi::Result<fencelock::ClientBuilder> {
    let mut settings = ClientSettings::default();
    settings.key_prefix = o.key_prefix;
    settings.node_timeout = opt_millis(env, "nodeTimeoutMs", o.node_timeout_ms)?;
    settings.connect_timeout = opt_millis(env, "connectTimeoutMs", o.connect_timeout_ms)?;
    settings.drift_factor = o.drift_factor;
    settings.retry_base_delay = opt_millis(env, "retryBaseDelayMs", o.retry_base_delay_ms)?;
    settings.retry_max_delay = opt_millis(env, "retryMaxDelayMs", o.retry_max_delay_ms)?;
    settings.default_ttl = opt_millis(env, "defaultTtlMs", o.default_ttl_ms)?;
    settings.default_wait = opt_millis(env, "defaultWaitMs", o.default_wait_ms)?;
    settings.auto_renew = o.auto_renew;
    settings.username = o.username;
    settings.password = o.password;
    settings.tls_ca_pem = o.tls_ca_pem.map(String::into_bytes);
    settings.tls_client_cert = match (o.tls_client_cert_pem, o.tls_client_key_pem) {
        (Some(cert), Some(key)) => Some((cert.into_bytes(), key.into_bytes())),
        (None, None) => None,
        _ => {
            return Err(throw(
                env,
                true,
                "tlsClientCertPem and tlsClientKeyPem must be given together",
            ));
        }
    };
    settings.tls_min_version = match o.tls_min_version.as_deref() {
        None => None,
        Some("1.2") => Some(TlsVersion::V1_2),
        Some("1.3") => Some(TlsVersion::V1_3),
        Some(other) => {
            return Err(throw(
                env,
                false,
                &format!("tlsMinVersion must be '1.2' or '1.3', got {other:?}"),
            ));
        }
    };
    settings.allow_mixed_tls = o.allow_mixed_tls;
    Ok(Client::builder().nodes(o.nodes).settings(settings))
}

impl NativeLockOptions {
    /// The core's options (a number the addon refuses throws, naming it).
    pub(crate) fn to_core(&self, env: &Env) -> napi::Result<LockOptions> {
        let mut options = LockOptions::default();
        if let Some(ttl) = opt_millis(env, "ttl", self.ttl_ms)? {
            options = options.ttl(ttl);
        }
        if let Some(wait) = opt_millis(env, "wait", self.wait_ms)? {
            options = options.wait(wait);
        }
        if let Some(on) = self.auto_renew {
            options = options.auto_renew(on);
        }
        if let Some(limit) = self.max_hold_ms {
            options = options.max_hold(millis(env, "maxHold", limit)?);
        }
        if let Some(limit) = self.max_renewals {
            options = options.max_renewals(limit);
        }
        if let Some(on) = self.fair {
            options = options.fair(on);
        }
        Ok(options)
    }
}

impl NativeCampaignOptions {
    fn to_core(&self, env: &Env) -> napi::Result<CampaignOptions> {
        // Without a ttl the client's default applies, as for `acquire`;
        // without a wait, the campaign waits until elected.
        let mut options = CampaignOptions::default();
        if let Some(ttl) = opt_millis(env, "ttl", self.ttl_ms)? {
            options = options.ttl(ttl);
        }
        if let Some(wait) = opt_millis(env, "wait", self.wait_ms)? {
            options = options.wait(wait);
        }
        if let Some(value) = &self.value {
            // Its length is the core's to check (InvalidArgumentError).
            options = options.value(value.to_vec());
        }
        Ok(options)
    }
}

fn token_u64(env: &Env, name: &str, token: &BigInt) -> napi::Result<u64> {
    let (negative, value, lossless) = token.get_u64();
    if negative || !lossless {
        return Err(throw(
            env,
            false,
            &format!("{name} must be a bigint from 0n to 2n**64n-1n"),
        ));
    }
    Ok(value)
}

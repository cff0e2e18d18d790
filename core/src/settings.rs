//! [`ClientSettings`]: a client's options as plain optional values, for the
//! fronts that receive them as one options object (Node's and the JVM's
//! `ClientOptions`, Python's keyword arguments). Each front converts its
//! language's values (milliseconds, `Duration`s, strings) and checks their
//! types, naming the option as its users spell it; what an option *means* —
//! which default stands in for one left out, and how the retry bounds
//! combine — is decided here, once, by [`ClientBuilder::settings`].

use std::fmt;
use std::time::Duration;

use crate::backoff::RetryPolicy;
use crate::config::ClientBuilder;
use crate::tls::TlsVersion;

/// A client's options; each `None` keeps the builder's default. The nodes
/// are given to the builder itself ([`ClientBuilder::nodes`]).
///
/// ```
/// let mut settings = fencelock::ClientSettings::default();
/// settings.key_prefix = Some("shop:".to_owned());
/// settings.node_timeout = Some(std::time::Duration::from_millis(50));
/// let builder = fencelock::Client::builder()
///     .node("redis://127.0.0.1:6379")
///     .settings(settings);
/// # let _ = builder;
/// ```
#[derive(Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct ClientSettings {
    /// [`ClientBuilder::key_prefix`].
    pub key_prefix: Option<String>,
    /// [`ClientBuilder::node_timeout`].
    pub node_timeout: Option<Duration>,
    /// [`ClientBuilder::connect_timeout`].
    pub connect_timeout: Option<Duration>,
    /// [`ClientBuilder::drift_factor`].
    pub drift_factor: Option<f64>,
    /// The first retry's delay ([`RetryPolicy::base_delay`]).
    pub retry_base_delay: Option<Duration>,
    /// The longest retry delay ([`RetryPolicy::max_delay`]). Left out with a
    /// base delay given: the default, or the base delay if that is longer.
    pub retry_max_delay: Option<Duration>,
    /// [`ClientBuilder::default_ttl`].
    pub default_ttl: Option<Duration>,
    /// [`ClientBuilder::default_wait`].
    pub default_wait: Option<Duration>,
    /// [`ClientBuilder::default_auto_renew`].
    pub auto_renew: Option<bool>,
    /// [`ClientBuilder::username`].
    pub username: Option<String>,
    /// [`ClientBuilder::password`]. Never printed.
    pub password: Option<String>,
    /// [`ClientBuilder::tls_ca_pem`].
    pub tls_ca_pem: Option<Vec<u8>>,
    /// [`ClientBuilder::tls_client_cert_pem`]: the certificate (chain) and
    /// its private key, which is never printed.
    pub tls_client_cert: Option<(Vec<u8>, Vec<u8>)>,
    /// [`ClientBuilder::tls_min_version`].
    pub tls_min_version: Option<TlsVersion>,
    /// [`ClientBuilder::allow_mixed_tls`].
    pub allow_mixed_tls: Option<bool>,
    /// [`ClientBuilder::require_aof`].
    pub require_aof: Option<bool>,
    /// [`ClientBuilder::metrics_per_resource`].
    pub metrics_per_resource: Option<bool>,
}

impl ClientBuilder {
    /// Applies every option `settings` gives, keeping the builder's value
    /// for each one it leaves out.
    pub fn settings(mut self, settings: ClientSettings) -> Self {
        let ClientSettings {
            key_prefix,
            node_timeout,
            connect_timeout,
            drift_factor,
            retry_base_delay,
            retry_max_delay,
            default_ttl,
            default_wait,
            auto_renew,
            username,
            password,
            tls_ca_pem,
            tls_client_cert,
            tls_min_version,
            allow_mixed_tls,
            require_aof,
            metrics_per_resource,
        } = settings;
        if retry_base_delay.is_some() || retry_max_delay.is_some() {
            let base = retry_base_delay.unwrap_or(self.retry.base_delay);
            let max = retry_max_delay.unwrap_or_else(|| self.retry.max_delay.max(base));
            self = self.retry(RetryPolicy::new(base, max));
        }
        if let Some((cert, key)) = tls_client_cert {
            self = self.tls_client_cert_pem(cert, key);
        }
        let b = given(self, key_prefix, Self::key_prefix);
        let b = given(b, node_timeout, Self::node_timeout);
        let b = given(b, connect_timeout, Self::connect_timeout);
        let b = given(b, drift_factor, Self::drift_factor);
        let b = given(b, default_ttl, Self::default_ttl);
        let b = given(b, default_wait, Self::default_wait);
        let b = given(b, auto_renew, Self::default_auto_renew);
        let b = given(b, username, Self::username);
        let b = given(b, password, Self::password);
        let b = given(b, tls_ca_pem, Self::tls_ca_pem);
        let b = given(b, tls_min_version, Self::tls_min_version);
        let b = given(b, allow_mixed_tls, Self::allow_mixed_tls);
        let b = given(b, require_aof, Self::require_aof);
        given(b, metrics_per_resource, Self::metrics_per_resource)
    }
}

/// `set(builder, value)` when the option is given, else the builder unchanged.
fn given<T>(
    builder: ClientBuilder,
    value: Option<T>,
    set: fn(ClientBuilder, T) -> ClientBuilder,
) -> ClientBuilder {
    match value {
        Some(value) => set(builder, value),
        None => builder,
    }
}

impl fmt::Debug for ClientSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redacted = |given: bool| given.then_some("<redacted>");
        f.debug_struct("ClientSettings")
            .field("key_prefix", &self.key_prefix)
            .field("node_timeout", &self.node_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("drift_factor", &self.drift_factor)
            .field("retry_base_delay", &self.retry_base_delay)
            .field("retry_max_delay", &self.retry_max_delay)
            .field("default_ttl", &self.default_ttl)
            .field("default_wait", &self.default_wait)
            .field("auto_renew", &self.auto_renew)
            .field("username", &self.username)
            .field("password", &redacted(self.password.is_some()))
            .field("tls_ca_pem", &self.tls_ca_pem.as_ref().map(Vec::len))
            .field("tls_client_cert", &redacted(self.tls_client_cert.is_some()))
            .field("tls_min_version", &self.tls_min_version)
            .field("allow_mixed_tls", &self.allow_mixed_tls)
            .field("require_aof", &self.require_aof)
            .field("metrics_per_resource", &self.metrics_per_resource)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(change: impl FnOnce(&mut ClientSettings)) -> ClientBuilder {
        let mut settings = ClientSettings::default();
        change(&mut settings);
        ClientBuilder::default().settings(settings)
    }

    #[test]
    fn left_out_options_keep_the_defaults() {
        let defaults = ClientBuilder::default();
        let built = with(|_| {});
        assert_eq!(format!("{built:?}"), format!("{defaults:?}"));
    }

    #[test]
    fn given_options_are_applied() {
        let built = with(|s| {
            s.key_prefix = Some("shop:".into());
            s.node_timeout = Some(Duration::from_millis(50));
            s.connect_timeout = Some(Duration::from_millis(700));
            s.drift_factor = Some(0.02);
            s.default_ttl = Some(Duration::from_secs(7));
            s.default_wait = Some(Duration::from_secs(3));
            s.auto_renew = Some(false);
            s.username = Some("app".into());
            s.password = Some("pw".into());
            s.tls_ca_pem = Some(b"ca".to_vec());
            s.tls_client_cert = Some((b"cert".to_vec(), b"key".to_vec()));
            s.tls_min_version = Some(TlsVersion::V1_3);
            s.allow_mixed_tls = Some(true);
            s.require_aof = Some(true);
            s.metrics_per_resource = Some(true);
        });
        assert_eq!(built.key_prefix, "shop:");
        assert_eq!(built.node_timeout, Duration::from_millis(50));
        assert_eq!(built.connect_timeout, Duration::from_millis(700));
        assert_eq!(built.drift_factor, 0.02);
        assert_eq!(built.defaults.ttl, Duration::from_secs(7));
        assert_eq!(built.defaults.wait, Duration::from_secs(3));
        assert!(!built.defaults.auto_renew);
        assert_eq!(built.username.as_deref(), Some("app"));
        assert_eq!(built.password.as_deref(), Some("pw"));
        assert_eq!(built.tls.root_ca_pem.as_deref(), Some(&b"ca"[..]));
        assert_eq!(
            built.tls.client_cert_pem,
            Some((b"cert".to_vec(), b"key".to_vec()))
        );
        assert_eq!(built.tls.min_version, TlsVersion::V1_3);
        assert!(built.allow_mixed_tls && built.require_aof && built.metrics_per_resource);
    }

    #[test]
    fn a_retry_bound_left_out_is_the_default_or_the_base_delay() {
        let default = RetryPolicy::default();
        let base_only = with(|s| s.retry_base_delay = Some(Duration::from_millis(2)));
        assert_eq!(
            base_only.retry,
            RetryPolicy::new(Duration::from_millis(2), default.max_delay)
        );
        // A base delay above the default maximum raises the maximum with it.
        let long_base = default.max_delay * 2;
        let raised = with(|s| s.retry_base_delay = Some(long_base));
        assert_eq!(raised.retry, RetryPolicy::new(long_base, long_base));
        let max_only = with(|s| s.retry_max_delay = Some(Duration::from_secs(2)));
        assert_eq!(
            max_only.retry,
            RetryPolicy::new(default.base_delay, Duration::from_secs(2))
        );
    }

    #[test]
    fn debug_output_shows_no_secret() {
        let settings = ClientSettings {
            password: Some("hunter2-secret".into()),
            tls_client_cert: Some((b"CERT".to_vec(), b"PRIVATE-KEY".to_vec())),
            ..ClientSettings::default()
        };
        let shown = format!("{settings:?}");
        assert!(
            !shown.contains("hunter2-secret") && !shown.contains("PRIVATE-KEY"),
            "{shown}"
        );
        assert!(shown.contains("<redacted>"), "{shown}");
    }
}

//! Node addresses: parsing `redis://`, `rediss://` and `redis+cluster://` URLs,
//! and printing them without secrets.

use std::fmt;

use redis::IntoConnectionInfo;

use crate::error::{Error, Result};

/// Whether a node is one Redis server or a whole Redis Cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Topology {
    /// One Redis master.
    Standalone,
    /// A Redis Cluster reached through one or more seed addresses; a lock's keys
    /// share a hash tag, so each script touches one slot.
    Cluster,
}

/// A validated node address. Its `Debug` and `Display` never show the password.
#[derive(Clone)]
pub(crate) struct Endpoint {
    /// The URL handed to redis-rs (scheme `redis` or `rediss`), password included.
    connect_url: String,
    /// The same address with credentials removed, for messages and logs.
    display: String,
    /// `host:port/db`, lower-cased, to find duplicates.
    identity: String,
    pub(crate) topology: Topology,
    pub(crate) tls: bool,
}

impl Endpoint {
    /// Parses and validates one node URL.
    pub(crate) fn parse(raw: &str) -> Result<Self> {
        let url = url::Url::parse(raw).map_err(|e| {
            Error::config(format!(
                "node URL '{}' is not a valid URL ({e}); expected e.g. redis://127.0.0.1:6379/0",
                redact_unparsed(raw)
            ))
        })?;
        let (tls, topology) = match url.scheme() {
            "redis" => (false, Topology::Standalone),
            "rediss" => (true, Topology::Standalone),
            "redis+cluster" => (false, Topology::Cluster),
            "rediss+cluster" => (true, Topology::Cluster),
            other => {
                return Err(Error::config(format!(
                    "node URL scheme '{other}' is not supported; use redis://, rediss://, \
                     redis+cluster:// or rediss+cluster://"
                )));
            }
        };
        let host = match url.host_str() {
            Some(host) if !host.is_empty() => host.to_ascii_lowercase(),
            _ => {
                return Err(Error::config(format!(
                    "node URL '{}' has no host",
                    redact_unparsed(raw)
                )));
            }
        };
        let port = url.port().unwrap_or(6379);
        if port == 0 {
            return Err(Error::config(format!(
                "node URL '{}' has port 0; give the port Redis listens on (1-65535)",
                redact_unparsed(raw)
            )));
        }
        let db = parse_db(&url, raw)?;
        if topology == Topology::Cluster && db != 0 {
            return Err(Error::config(
                "a Redis Cluster has only database 0; remove the database from the redis+cluster:// URL",
            ));
        }
        let scheme = if tls { "rediss" } else { "redis" };
        let mut connect = url.clone();
        // `Url::set_scheme` refuses to switch between "special" schemes; these are not special.
        connect
            .set_scheme(scheme)
            .map_err(|()| Error::config("cannot normalise the node URL scheme"))?;
        let user = url.username();
        let display_user = if user.is_empty() {
            String::new()
        } else {
            format!("{user}@")
        };
        let db_suffix = if db == 0 { String::new() } else { format!("/{db}") };
        let display = format!("{}://{display_user}{host}:{port}{db_suffix}", url.scheme());
        let identity = format!("{host}:{port}/{db}");
        let endpoint = Endpoint {
            connect_url: connect.to_string(),
            display,
            identity,
            topology,
            tls,
        };
        // Let redis-rs check what it will need later (credential decoding, TLS support).
        endpoint.connection_info()?;
        Ok(endpoint)
    }

    pub(crate) fn connection_info(&self) -> Result<redis::ConnectionInfo> {
        self.connect_url
            .as_str()
            .into_connection_info()
            .map_err(|e| Error::config(format!("node URL {} is not usable: {e}", self.display)))
    }

    pub(crate) fn identity(&self) -> &str {
        &self.identity
    }
}

fn parse_db(url: &url::Url, raw: &str) -> Result<i64> {
    let path = url.path().trim_start_matches('/');
    if path.is_empty() {
        return Ok(0);
    }
    path.parse::<i64>().ok().filter(|db| *db >= 0).ok_or_else(|| {
        Error::config(format!(
            "node URL '{}' names database '{path}'; the database must be a number like /0",
            redact_unparsed(raw)
        ))
    })
}

/// Removes anything between `//` and `@` from a string that failed to parse, so a
/// password never reaches an error message.
fn redact_unparsed(raw: &str) -> String {
    match (raw.find("://"), raw.rfind('@')) {
        (Some(start), Some(at)) if at > start => {
            format!("{}***@{}", &raw[..start + 3], &raw[at + 1..])
        }
        _ => raw.to_owned(),
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.display)
    }
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Endpoint").field(&self.display).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_redacts() {
        let e = Endpoint::parse("redis://alice:s3cret@LocalHost:7000/2").unwrap();
        assert_eq!(e.to_string(), "redis://alice@localhost:7000/2");
        assert!(!format!("{e:?}").contains("s3cret"));
        assert_eq!(e.identity(), "localhost:7000/2");
        assert!(!e.tls);
    }

    #[test]
    fn rejects_bad_urls_without_leaking_secrets() {
        for bad in [
            "",
            "localhost:6379",
            "http://x:1",
            "redis://:pw@h:0",
            "redis://h:1/abc",
            "redis://h:65536",
            "redis+cluster://h:1/3",
        ] {
            let err = Endpoint::parse(bad).unwrap_err();
            assert_eq!(err.kind(), crate::ErrorKind::Config, "{bad}: {err}");
            assert!(!err.to_string().contains(":pw@"), "{err}");
        }
        let err = Endpoint::parse("redis://u:topsecret@h:0").unwrap_err();
        assert!(!err.to_string().contains("topsecret"), "{err}");
    }

    #[test]
    fn cluster_and_tls_schemes() {
        let e = Endpoint::parse("rediss+cluster://h:7000").unwrap();
        assert!(e.tls);
        assert_eq!(e.topology, Topology::Cluster);
    }
}

//! Node addresses: parsing `redis://`, `rediss://`, `redis+cluster://` and
//! `postgresql://` URLs, and printing them without secrets.

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
    /// A PostgreSQL server running the protocol's scripts as SQL functions
    /// (docs/postgres-store.md).
    Postgres,
}

/// The query parameter of a `postgresql://` URL naming the schema of
/// fencelock's tables and functions (not a libpq parameter: removed before
/// the URL reaches the driver).
pub(crate) const SCHEMA_PARAMETER: &str = "fencelock_schema";

/// The query parameter of a `postgresql://` URL giving the server's own
/// `HOST:PORT` for LISTEN sessions, when the URL's address is a pooler.
pub(crate) const LISTEN_PARAMETER: &str = "fencelock_listen";

/// The query parameter of a `postgresql://` URL saying that a
/// transaction-pooling proxy is at its address (`transaction`) or not (`none`).
pub(crate) const POOLER_PARAMETER: &str = "fencelock_pooler";

/// `HOST:PORT` (or `[IPv6]:PORT`) of `fencelock_listen`.
fn parse_listen_address(value: &str) -> Result<(String, u16)> {
    let bad = || {
        Error::config(format!(
            "{LISTEN_PARAMETER} is not HOST:PORT (its value is not shown: it may hold a secret); \
             give the PostgreSQL server's own address (not the pooler's), e.g. \
             {LISTEN_PARAMETER}=db.internal:5432"
        ))
    };
    let (host, port) = value.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().ok().filter(|p| *p != 0).ok_or_else(bad)?;
    if host.is_empty() || host.contains(['/', '@', '?', '#']) {
        return Err(bad());
    }
    Ok((host.to_ascii_lowercase(), port))
}

/// The schema when the URL names none.
pub(crate) const DEFAULT_SCHEMA: &str = "fencelock";

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
    /// What a `postgresql://` URL says beyond the driver's settings.
    pub(crate) postgres: Option<PostgresOptions>,
}

/// The parameters of a `postgresql://` URL that fencelock reads itself
/// (removed before the URL reaches the driver).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PostgresOptions {
    /// `fencelock_schema`: the schema of fencelock's tables and functions.
    pub(crate) schema: String,
    /// `sslrootcert`: the CA bundle file (the driver does not read it).
    pub(crate) root_cert_file: Option<std::path::PathBuf>,
    /// `fencelock_listen=HOST:PORT`: where the LISTEN sessions go when the
    /// URL's address is a transaction pooler, which keeps no session.
    pub(crate) listen_at: Option<(String, u16)>,
    /// `fencelock_pooler=transaction`: the URL's address is a transaction
    /// pooler, so no statement is prepared once per session.
    pub(crate) pooled: bool,
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
        if matches!(url.scheme(), "postgresql" | "postgres") {
            return Self::parse_postgres(url, raw);
        }
        let (tls, topology) = match url.scheme() {
            "redis" => (false, Topology::Standalone),
            "rediss" => (true, Topology::Standalone),
            "redis+cluster" => (false, Topology::Cluster),
            "rediss+cluster" => (true, Topology::Cluster),
            other => {
                return Err(Error::config(format!(
                    "node URL scheme '{other}' is not supported; use redis://, rediss://, \
                     redis+cluster://, rediss+cluster:// or postgresql://"
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
            postgres: None,
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

    /// A `postgresql://user:password@host:port/db?sslmode=…&fencelock_schema=…` URL.
    fn parse_postgres(mut url: url::Url, raw: &str) -> Result<Self> {
        let mut schema = None;
        let mut root_cert_file = None;
        let mut listen = None;
        let mut pooler = None;
        let others: Vec<(String, String)> = url
            .query_pairs()
            .filter_map(|(name, value)| match (&*name, &*value) {
                (SCHEMA_PARAMETER, _) => {
                    schema = Some(value.into_owned());
                    None
                }
                (LISTEN_PARAMETER, _) => {
                    listen = Some(value.into_owned());
                    None
                }
                (POOLER_PARAMETER, _) => {
                    pooler = Some(value.into_owned());
                    None
                }
                // Read by us: the driver does not know it.
                ("sslrootcert", _) => {
                    root_cert_file = Some(std::path::PathBuf::from(&*value));
                    None
                }
                // TLS here always verifies the CA and the host name, so
                // libpq's verifying modes are what `require` does.
                ("sslmode", "verify-ca" | "verify-full") => Some((name.into_owned(), "require".to_owned())),
                _ => Some((name.into_owned(), value.into_owned())),
            })
            .collect();
        let schema = schema.unwrap_or_else(|| DEFAULT_SCHEMA.to_owned());
        if schema.is_empty() || schema.len() > 63 || schema.contains('\0') {
            return Err(Error::config(format!(
                "{SCHEMA_PARAMETER}='{schema}' is not a usable schema name: 1 to 63 bytes, no NUL"
            )));
        }
        if others.is_empty() {
            url.set_query(None);
        } else {
            url.query_pairs_mut().clear().extend_pairs(others);
        }
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .map(str::to_ascii_lowercase);
        let Some(host) = host else {
            return Err(Error::config(format!(
                "node URL '{}' has no host; expected e.g. postgresql://app@127.0.0.1:5432/app",
                redact_unparsed(raw)
            )));
        };
        let port = url.port().unwrap_or(5432);
        let database = url.path().trim_start_matches('/').to_owned();
        let config: tokio_postgres::Config = url.as_str().parse().map_err(|e| {
            Error::config(format!(
                "node URL '{}' is not a usable PostgreSQL URL: {e}",
                redact_unparsed(raw)
            ))
        })?;
        let tls = !matches!(config.get_ssl_mode(), tokio_postgres::config::SslMode::Disable);
        let user = url.username();
        let display_user = if user.is_empty() {
            String::new()
        } else {
            format!("{user}@")
        };
        Ok(Endpoint {
            connect_url: url.to_string(),
            display: format!("postgresql://{display_user}{host}:{port}/{database}"),
            identity: format!("postgresql:{host}:{port}/{database}"),
            topology: Topology::Postgres,
            tls,
            postgres: Some(PostgresOptions {
                schema,
                root_cert_file,
                listen_at: listen.as_deref().map(parse_listen_address).transpose()?,
                pooled: match pooler.as_deref() {
                    None | Some("none") => false,
                    Some("transaction") => true,
                    Some(_) => {
                        return Err(Error::config(format!(
                            "{POOLER_PARAMETER} must be 'transaction' (a transaction-pooling proxy such \
                             as PgBouncer is at the URL's address) or 'none'"
                        )));
                    }
                },
            }),
        })
    }

    /// The driver's configuration of the LISTEN sessions: the node's, at
    /// the `fencelock_listen` address if the URL gives one.
    pub(crate) fn postgres_listen_config(&self) -> Result<tokio_postgres::Config> {
        let Some((host, port)) = self.postgres.as_ref().and_then(|p| p.listen_at.clone()) else {
            return self.postgres_config();
        };
        let mut url = url::Url::parse(&self.connect_url)
            .map_err(|e| Error::config(format!("node URL {} is not usable: {e}", self.display)))?;
        url.set_host(Some(&host))
            .and_then(|()| {
                url.set_port(Some(port))
                    .map_err(|()| url::ParseError::InvalidPort)
            })
            .map_err(|e| {
                Error::config(format!(
                    "{LISTEN_PARAMETER}={host}:{port} of node {}: {e}",
                    self.display
                ))
            })?;
        url.as_str().parse().map_err(|e| {
            Error::config(format!(
                "{LISTEN_PARAMETER} of node {} is not usable: {e}",
                self.display
            ))
        })
    }

    /// The driver's configuration of a PostgreSQL node (its password included).
    pub(crate) fn postgres_config(&self) -> Result<tokio_postgres::Config> {
        self.connect_url
            .parse()
            .map_err(|e| Error::config(format!("node URL {} is not usable: {e}", self.display)))
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
    fn a_listen_address_moves_only_the_listen_sessions() {
        let e = Endpoint::parse(
            "postgresql://app:s3cret@pooler:6432/locks?sslmode=disable&fencelock_listen=DB.internal:5432",
        )
        .unwrap();
        assert_eq!(e.to_string(), "postgresql://app@pooler:6432/locks");
        let options = e.postgres.as_ref().unwrap();
        assert_eq!(options.listen_at, Some(("db.internal".to_owned(), 5432)));
        assert!(!options.pooled);
        let pooled =
            Endpoint::parse("postgresql://app@pooler:6432/locks?fencelock_pooler=transaction").unwrap();
        assert!(pooled.postgres.as_ref().unwrap().pooled);
        assert_eq!(
            pooled.postgres_config().unwrap().get_ports(),
            [6432],
            "the parameter does not reach the driver"
        );
        let requests = e.postgres_config().unwrap();
        let listen = e.postgres_listen_config().unwrap();
        assert_eq!(requests.get_ports(), [6432]);
        assert_eq!(listen.get_ports(), [5432]);
        assert_eq!(
            listen.get_hosts(),
            [tokio_postgres::config::Host::Tcp("db.internal".to_owned())]
        );
        assert_eq!(listen.get_password(), Some(&b"s3cret"[..]));
        assert_eq!(listen.get_dbname(), Some("locks"));
        let direct = Endpoint::parse("postgresql://app@db/locks").unwrap();
        assert_eq!(
            direct.postgres_listen_config().unwrap().get_ports(),
            direct.postgres_config().unwrap().get_ports()
        );
    }

    #[test]
    fn postgres_urls_keep_their_schema_apart_and_redact_the_password() {
        let e = Endpoint::parse("postgresql://app:s3cret@DB:6543/locks?sslmode=disable&fencelock_schema=fl")
            .unwrap();
        assert_eq!(e.topology, Topology::Postgres);
        assert_eq!(e.to_string(), "postgresql://app@db:6543/locks");
        assert!(!format!("{e:?}").contains("s3cret"));
        assert_eq!(e.postgres.as_ref().unwrap().schema, "fl");
        assert!(!e.tls);
        let config = e.postgres_config().unwrap();
        assert_eq!(config.get_dbname(), Some("locks"));
        let defaults = Endpoint::parse("postgres://app@h/db").unwrap();
        assert_eq!(defaults.postgres.as_ref().unwrap().schema, DEFAULT_SCHEMA);
        assert_eq!(defaults.to_string(), "postgresql://app@h:5432/db");
        assert!(defaults.tls, "sslmode defaults to prefer");
        for bad in [
            "postgresql://u:pw@h:1/db?nonsense=1",
            "postgresql://u:pw@h/db?fencelock_schema=",
            "postgresql://u:pw@h/db?fencelock_listen=h",
            "postgresql://u:pw@h/db?fencelock_listen=h:0",
            "postgresql://u:pw@h/db?fencelock_listen=:5432",
            "postgresql://u:pw@h/db?fencelock_listen=u:pw@h:5432",
            "postgresql://u:pw@h/db?fencelock_pooler=session",
        ] {
            let err = Endpoint::parse(bad).unwrap_err();
            assert_eq!(err.kind(), crate::ErrorKind::Config, "{bad}: {err}");
            assert!(!err.to_string().contains(":pw@"), "{err}");
        }
    }

    #[test]
    fn cluster_and_tls_schemes() {
        let e = Endpoint::parse("rediss+cluster://h:7000").unwrap();
        assert!(e.tls);
        assert_eq!(e.topology, Topology::Cluster);
    }
}

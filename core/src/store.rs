//! What a node's store is to the rest of the core: replies to the
//! protocol's scripts, failures it can classify, and subscriptions whose
//! messages are payloads.
//!
//! Two stores speak the protocol: Redis (the scripts in Lua, through
//! redis-rs; `connection.rs`, `node.rs`) and PostgreSQL (the same scripts in
//! PL/pgSQL, through tokio-postgres; `postgres.rs`). Both reply with the
//! values a Lua script returns, so the quorum, lease, waiting and fencing
//! logic reads both alike.

use std::pin::Pin;

use futures_util::Stream;
use redis::RedisError;

use crate::error::{ErrorKind, NodeFailure, classify_redis_error};
use crate::postgres::classify_postgres_error;

/// The payloads published on one subscribed channel, until its connection ends.
pub(crate) type Messages = Pin<Box<dyn Stream<Item = Vec<u8>> + Send>>;

/// A request's failure, from either store.
#[derive(Debug)]
pub(crate) enum StoreError {
    /// From redis-rs: an error reply, or the connection.
    Redis(RedisError),
    /// From tokio-postgres: an error from the server, or the connection.
    Postgres(tokio_postgres::Error),
    /// Refused before it was sent (a value the store cannot hold), or a
    /// reply that is not what the protocol says.
    Refused(NodeFailure),
}

impl StoreError {
    /// Whether the connection is gone (rather than the node answering with an error).
    pub(crate) fn is_broken(&self) -> bool {
        match self {
            StoreError::Redis(err) => {
                err.is_io_error() || err.is_connection_dropped() || err.is_unrecoverable_error()
            }
            StoreError::Postgres(err) => err.is_closed() || err.as_db_error().is_none(),
            StoreError::Refused(_) => false,
        }
    }

    /// The node's failure, classified for quorum errors.
    pub(crate) fn classify(&self) -> NodeFailure {
        match self {
            StoreError::Redis(err) => classify_redis_error(err),
            StoreError::Postgres(err) => classify_postgres_error(err),
            StoreError::Refused(failure) => failure.clone(),
        }
    }

    /// Redis lost its script cache: run the script as `EVAL`.
    pub(crate) fn is_noscript(&self) -> bool {
        matches!(self, StoreError::Redis(err)
            if err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript))
    }

    /// A failure of ours, before anything was sent.
    pub(crate) fn refused(kind: ErrorKind, detail: impl Into<String>) -> Self {
        StoreError::Refused(NodeFailure {
            kind,
            detail: detail.into(),
        })
    }
}

impl From<RedisError> for StoreError {
    fn from(err: RedisError) -> Self {
        StoreError::Redis(err)
    }
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(err: tokio_postgres::Error) -> Self {
        StoreError::Postgres(err)
    }
}

impl From<std::io::Error> for StoreError {
    fn from(err: std::io::Error) -> Self {
        StoreError::Redis(err.into())
    }
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.classify().detail)
    }
}

//! Whether a node keeps its fencing counters across a restart.
//!
//! Fencing tokens only increase while counters survive: a node restarting
//! without AOF comes back with none, and a later grant may then repeat an
//! earlier token (docs/protocol.md §5). Each new connection asks the node
//! (`CONFIG GET appendonly appendfsync`, with the script preload); a node without AOF is reported
//! with a warning, once per client, and refused when the client requires
//! AOF ([`crate::ClientBuilder::require_aof`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use redis::{RedisResult, Value};

use crate::error::{ErrorKind, NodeFailure};

/// What a node said about its persistence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Persistence {
    /// AOF on, with this `appendfsync` policy (`always`, `everysec`, `no`).
    Aof(String),
    /// AOF off: a restart loses every counter written since the last snapshot.
    Off,
    /// The node would not say (no `CONFIG` right, a Redis Cluster…): why.
    Unknown(String),
    /// A PostgreSQL server that syncs each commit (`fsync`, `synchronous_commit`).
    Durable,
    /// A PostgreSQL server whose commits a crash may lose: why.
    NotDurable(String),
}

/// What a client does about nodes without AOF.
#[derive(Clone, Debug)]
pub(crate) struct PersistencePolicy {
    /// Refuse them (their connections fail with a `config` error).
    pub(crate) require_aof: bool,
    /// Set once the user was told about this node.
    warned: Arc<AtomicBool>,
}

impl PersistencePolicy {
    pub(crate) fn new(require_aof: bool) -> Self {
        PersistencePolicy {
            require_aof,
            warned: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Judges a new connection to `node`: `Err` refuses it.
    pub(crate) fn judge(&self, node: &str, persistence: &Persistence) -> Result<(), NodeFailure> {
        let remedy = match persistence {
            Persistence::NotDurable(_) => "set fsync = on and synchronous_commit = on",
            _ => "run it with appendonly yes and appendfsync always",
        };
        let problem = match persistence {
            Persistence::Aof(fsync) if fsync == "always" => return Ok(()),
            Persistence::Aof(fsync) => {
                // Durable against a crash of Redis alone; power loss can lose the last writes.
                self.warn_once(node, &format!("appendfsync is {fsync}, not always"), remedy);
                return Ok(());
            }
            Persistence::Durable => return Ok(()),
            Persistence::NotDurable(why) => format!("a crash may lose its commits ({why})"),
            Persistence::Off => "it runs without AOF (appendonly no)".to_owned(),
            Persistence::Unknown(why) => format!("its persistence could not be checked ({why})"),
        };
        if self.require_aof {
            return Err(NodeFailure {
                kind: ErrorKind::Config,
                detail: format!(
                    "refused because {problem} and the client requires durable nodes (require_aof): a \
                     restart would lose its fencing counters and tokens could repeat (docs/protocol.md §5); \
                     {remedy}, or drop require_aof"
                ),
            });
        }
        self.warn_once(node, &problem, remedy);
        Ok(())
    }

    fn warn_once(&self, node: &str, problem: &str, remedy: &str) {
        if !self.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                node,
                "{problem}: after a restart of this node, fencing tokens may repeat (docs/protocol.md §5); \
                 {remedy}, or set require_aof to refuse such nodes"
            );
        }
    }
}

/// The question to the node: `CONFIG GET appendonly appendfsync`.
pub(crate) fn question() -> redis::Cmd {
    let mut config = redis::cmd("CONFIG");
    config.arg("GET").arg("appendonly").arg("appendfsync");
    config
}

/// What the node's reply to [`question`] says.
pub(crate) fn answer(reply: RedisResult<Value>) -> Persistence {
    match reply {
        Ok(value) => read(&value),
        Err(err) => Persistence::Unknown(format!("CONFIG GET failed: {err}; grant +config|get to check")),
    }
}

/// Reads `CONFIG GET`'s reply: a flat array of names and values (RESP2) or a map (RESP3).
fn read(value: &Value) -> Persistence {
    let pairs: Vec<(String, String)> = match value {
        Value::Array(items) => items
            .chunks(2)
            .filter_map(|pair| Some((text(pair.first()?)?, text(pair.get(1)?)?)))
            .collect(),
        Value::Map(items) => items
            .iter()
            .filter_map(|(name, value)| Some((text(name)?, text(value)?)))
            .collect(),
        other => return Persistence::Unknown(format!("unexpected CONFIG GET reply {other:?}")),
    };
    let setting = |name: &str| pairs.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
    match (setting("appendonly").as_deref(), setting("appendfsync")) {
        (Some("yes"), Some(fsync)) => Persistence::Aof(fsync),
        (Some("no"), _) => Persistence::Off,
        _ => Persistence::Unknown(format!("unexpected CONFIG GET reply {value:?}")),
    }
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn reads_config_get_replies() {
        let reply = |aof: &str, fsync: &str| {
            Value::Array(vec![
                bulk("appendonly"),
                bulk(aof),
                bulk("appendfsync"),
                bulk(fsync),
            ])
        };
        assert_eq!(read(&reply("yes", "always")), Persistence::Aof("always".into()));
        assert_eq!(read(&reply("no", "everysec")), Persistence::Off);
        assert!(matches!(read(&Value::Nil), Persistence::Unknown(_)));
        let map = Value::Map(vec![
            (bulk("appendonly"), bulk("yes")),
            (bulk("appendfsync"), bulk("everysec")),
        ]);
        assert_eq!(read(&map), Persistence::Aof("everysec".into()));
    }

    #[test]
    fn a_strict_client_refuses_what_a_lenient_one_only_warns_about() {
        let (lenient, strict) = (PersistencePolicy::new(false), PersistencePolicy::new(true));
        for persistence in [Persistence::Off, Persistence::Unknown("no right".into())] {
            assert!(lenient.judge("n", &persistence).is_ok());
            let refusal = strict.judge("n", &persistence).unwrap_err();
            assert_eq!(refusal.kind, ErrorKind::Config);
        }
        assert!(strict.judge("n", &Persistence::Aof("always".into())).is_ok());
        assert!(strict.judge("n", &Persistence::Aof("everysec".into())).is_ok());
    }
}

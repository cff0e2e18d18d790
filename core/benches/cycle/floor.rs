//! The floor: the bare protocol through the redis crate.

use std::sync::Arc;

use futures_util::future::join_all;
use redis::Value;
use redis::aio::MultiplexedConnection;

use crate::measure::{CYCLE_TTL, CycleResult};

/// The compare-and-delete release of the floor (the same script as fencelock's;
/// [`protocol_sha`] checks the copy).
const RELEASE_SCRIPT: &str = r#"
local current = redis.call('GET', KEYS[1])
if current == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
if current == false then return -1 end
return 0
"#;

/// fencelock's acquire script (`core/src/scripts.rs`), run by the fenced floor
/// ([`protocol_sha`] checks the copy).
const ACQUIRE_SCRIPT: &str = r#"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return 0
"#;

/// How a bare-protocol client takes the lock.
#[derive(Clone, Copy, PartialEq)]
pub enum FloorAcquire {
    /// `SET key token NX PX ttl`: the floor the issue sets.
    Set,
    /// fencelock's acquire script: the same `SET` and the fencing `INCR`.
    FencingScript,
}

/// One multiplexed connection per node and the scripts' SHAs.
pub struct Floor {
    connections: Vec<MultiplexedConnection>,
    acquire: FloorAcquire,
    acquire_sha: String,
    release_sha: String,
}

impl Floor {
    pub async fn connect(urls: &[String], acquire: FloorAcquire) -> Arc<Floor> {
        let mut connections = Vec::new();
        let (mut acquire_sha, mut release_sha) = (String::new(), String::new());
        for url in urls {
            let client = redis::Client::open(url.as_str()).expect("a valid node URL");
            let mut connection = client
                .get_multiplexed_async_connection()
                .await
                .expect("connect the floor to a node");
            acquire_sha = load_script(&mut connection, ACQUIRE_SCRIPT, "ACQUIRE").await;
            release_sha = load_script(&mut connection, RELEASE_SCRIPT, "RELEASE").await;
            connections.push(connection);
        }
        Arc::new(Floor {
            connections,
            acquire,
            acquire_sha,
            release_sha,
        })
    }

    /// Acquire on every node, then compare-and-delete on every node.
    pub async fn cycle(&self, key: &str, seq: u64) -> CycleResult {
        let token = format!("{seq:032x}");
        let ttl_ms = CYCLE_TTL.as_millis().to_string();
        let key = match self.acquire {
            FloorAcquire::Set => {
                let key = format!("floor:{key}");
                let set = redis::cmd("SET")
                    .arg(&key)
                    .arg(&token)
                    .arg("NX")
                    .arg("PX")
                    .arg(&ttl_ms)
                    .clone();
                self.everywhere(&set, |reply| matches!(reply, Value::Okay))
                    .await?;
                key
            }
            FloorAcquire::FencingScript => {
                let key = format!("fenced-floor:{{{key}}}");
                let acquire = redis::cmd("EVALSHA")
                    .arg(&self.acquire_sha)
                    .arg(2)
                    .arg(&key)
                    .arg(format!("{key}:fence"))
                    .arg(&token)
                    .arg(&ttl_ms)
                    .clone();
                self.everywhere(&acquire, |reply| matches!(reply, Value::Int(n) if *n >= 1))
                    .await?;
                key
            }
        };
        let release = redis::cmd("EVALSHA")
            .arg(&self.release_sha)
            .arg(1)
            .arg(&key)
            .arg(&token)
            .clone();
        self.everywhere(&release, |reply| matches!(reply, Value::Int(1)))
            .await
    }

    /// Sends `cmd` to every node in parallel and waits for all the replies.
    async fn everywhere(&self, cmd: &redis::Cmd, ok: impl Fn(&Value) -> bool) -> CycleResult {
        let replies = join_all(self.connections.iter().map(|connection| {
            let mut connection = connection.clone();
            async move { cmd.query_async::<Value>(&mut connection).await }
        }))
        .await;
        for reply in replies {
            match reply {
                Ok(value) if ok(&value) => {}
                Ok(value) => return Err(format!("unexpected reply {value:?}")),
                Err(err) => return Err(err.to_string()),
            }
        }
        Ok(())
    }
}

/// Loads the floor's copy of protocol script `name`; refuses a copy that is
/// no longer the protocol's, which would measure something else.
async fn load_script(connection: &mut MultiplexedConnection, script: &str, name: &str) -> String {
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(script)
        .query_async(connection)
        .await
        .expect("SCRIPT LOAD");
    assert_eq!(
        sha,
        protocol_sha(name),
        "the bench's copy of {name} differs from tests/vectors/protocol.json: copy it from core/src/scripts.rs"
    );
    sha
}

/// The SHA1 that `tests/vectors/protocol.json` gives protocol script `name`.
fn protocol_sha(name: &str) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/vectors/protocol.json");
    let text = std::fs::read_to_string(path).expect("read tests/vectors/protocol.json");
    let vectors: serde_json::Value = serde_json::from_str(&text).expect("protocol.json is JSON");
    vectors["scripts"][name]
        .as_str()
        .unwrap_or_else(|| panic!("protocol.json has no script {name}"))
        .to_owned()
}

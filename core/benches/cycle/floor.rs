//! The floor: the bare protocol through the redis crate.

use std::sync::Arc;

use futures_util::future::join_all;
use redis::Value;
use redis::aio::MultiplexedConnection;

use crate::measure::{CYCLE_TTL, CycleResult};

/// The bare floor's release: a compare-and-delete and nothing else.
const BARE_RELEASE: &str = r#"
local current = redis.call('GET', KEYS[1])
if current == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
if current == false then return -1 end
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
            let mut connection = connect(&client).await;
            (acquire_sha, release_sha) = match acquire {
                FloorAcquire::Set => (String::new(), load(&mut connection, BARE_RELEASE).await),
                FloorAcquire::FencingScript => (
                    load_protocol_script(&mut connection, "3.1 ACQUIRE", "ACQUIRE").await,
                    load_protocol_script(&mut connection, "3.2 RELEASE", "RELEASE").await,
                ),
            };
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
                // ACQUIRE as a try (no waiter): KEYS lock, fence, queue, leases.
                let acquire = redis::cmd("EVALSHA")
                    .arg(&self.acquire_sha)
                    .arg(4)
                    .arg(&key)
                    .arg(format!("{key}:fence"))
                    .arg(format!("{key}:queue"))
                    .arg(format!("{key}:leases"))
                    .arg(&token)
                    .arg(&ttl_ms)
                    .arg("")
                    .arg("0")
                    .arg("1000")
                    .arg("0")
                    .clone();
                self.everywhere(&acquire, |reply| matches!(reply, Value::Int(n) if *n >= 1))
                    .await?;
                key
            }
        };
        let release = match self.acquire {
            FloorAcquire::Set => redis::cmd("EVALSHA")
                .arg(&self.release_sha)
                .arg(1)
                .arg(&key)
                .arg(&token)
                .clone(),
            // RELEASE with a hand-off, as a holder's: KEYS lock, queue, leases.
            FloorAcquire::FencingScript => redis::cmd("EVALSHA")
                .arg(&self.release_sha)
                .arg(3)
                .arg(&key)
                .arg(format!("{key}:queue"))
                .arg(format!("{key}:leases"))
                .arg(&token)
                .arg("200")
                .arg("1")
                .clone(),
        };
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

/// A multiplexed connection for a floor.
pub async fn connect(client: &redis::Client) -> MultiplexedConnection {
    client
        .get_multiplexed_async_connection()
        .await
        .expect("connect the floor to a node")
}

/// Loads `script`; returns its SHA1.
pub async fn load(connection: &mut MultiplexedConnection, script: &str) -> String {
    redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(script)
        .query_async(connection)
        .await
        .expect("SCRIPT LOAD")
}

/// Loads protocol script `name` as docs/protocol.md prints it under
/// `heading` (the document core's tests hold to the code), and checks its
/// SHA1 against tests/vectors/protocol.json: the fenced floor runs exactly
/// the protocol's scripts, with no copy here to fall behind.
async fn load_protocol_script(connection: &mut MultiplexedConnection, heading: &str, name: &str) -> String {
    let doc = include_str!("../../../docs/protocol.md");
    let section = &doc[doc
        .find(&format!("### {heading}"))
        .unwrap_or_else(|| panic!("docs/protocol.md has no section {heading}"))..];
    let start = section.find("```lua").expect("a lua block") + "```lua".len();
    let end = start + section[start..].find("```").expect("the end of the lua block");
    let sha = load(connection, &section[start..end]).await;
    assert_eq!(
        sha,
        protocol_sha(name),
        "docs/protocol.md's {name} differs from the vectors"
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

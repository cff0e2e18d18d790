//! A Redis Cluster of three masters on loopback.

use std::time::{Duration, Instant};

use crate::process::{NodeOptions, RedisNode};

/// Redis Cluster's slot count.
const SLOTS: u16 = 16384;

/// Three (or more) cluster-enabled masters sharing the slots, no replicas.
pub struct RedisCluster {
    nodes: Vec<RedisNode>,
}

impl RedisCluster {
    /// Starts `masters` nodes, splits the slots among them and joins them,
    /// then waits until every node reports `cluster_state:ok`.
    pub fn start(masters: usize) -> RedisCluster {
        let options = NodeOptions {
            cluster: true,
            ..NodeOptions::default()
        };
        let nodes = RedisNode::start_many(masters, &options);
        let per_node = SLOTS / masters as u16;
        for (i, node) in nodes.iter().enumerate() {
            let first = per_node * i as u16;
            let last = if i + 1 == masters {
                SLOTS - 1
            } else {
                first + per_node - 1
            };
            node.command(&["CLUSTER", "ADDSLOTSRANGE", &first.to_string(), &last.to_string()]);
        }
        for node in &nodes[1..] {
            node.command(&["CLUSTER", "MEET", "127.0.0.1", &nodes[0].port().to_string()]);
        }
        let cluster = RedisCluster { nodes };
        cluster.wait_ok();
        cluster
    }

    fn wait_ok(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            let all_ok = self.nodes.iter().all(|node| {
                let info: String = redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query(&mut node.connection())
                    .unwrap_or_default();
                info.contains("cluster_state:ok")
                    && info.contains(&format!("cluster_known_nodes:{}", self.nodes.len()))
            });
            if all_ok {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the Redis Cluster did not reach cluster_state:ok within 20 s");
    }

    /// `redis+cluster://127.0.0.1:PORT` of the first master, as fencelock takes it.
    pub fn url(&self) -> String {
        format!("redis+cluster://127.0.0.1:{}", self.nodes[0].port())
    }

    /// The masters.
    pub fn nodes(&self) -> &[RedisNode] {
        &self.nodes
    }
}

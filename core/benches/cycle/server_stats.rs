//! The nodes' counters, read through a plain connection ("probe") per node
//! with `INFO stats`, `commandstats`, `errorstats` and `clients`.

use std::collections::{BTreeMap, HashMap};

use redis::aio::MultiplexedConnection;

/// Counters from one node's `INFO stats`, `commandstats`, `errorstats` and `clients`.
#[derive(Clone, Default)]
pub struct ServerStats {
    /// Calls per command (`cmdstat_<name>`); commands run inside scripts count too.
    pub calls: Counters,
    /// Calls per command that ended in an error reply.
    pub failed: Counters,
    /// Error replies per error code (`errorstat_<CODE>`), e.g. `NOSCRIPT`.
    pub errors: Counters,
    pub commands: u64,
    pub reads: u64,
    pub net_input_bytes: u64,
    pub connected_clients: u64,
}

pub type Counters = BTreeMap<String, u64>;

impl ServerStats {
    pub async fn read(probe: &mut MultiplexedConnection) -> ServerStats {
        let info: String = redis::cmd("INFO")
            .arg("stats")
            .arg("commandstats")
            .arg("errorstats")
            .arg("clients")
            .query_async(probe)
            .await
            .expect("INFO from the node");
        let fields: HashMap<&str, &str> = info
            .lines()
            .filter_map(|line| line.trim_end().split_once(':'))
            .collect();
        let number = |name: &str| fields.get(name).and_then(|v| v.parse().ok()).unwrap_or(0);
        ServerStats {
            calls: counters(&fields, "cmdstat_", "calls"),
            failed: counters(&fields, "cmdstat_", "failed_calls"),
            errors: counters(&fields, "errorstat_", "count"),
            commands: number("total_commands_processed"),
            reads: number("total_reads_processed"),
            net_input_bytes: number("total_net_input_bytes"),
            connected_clients: number("connected_clients"),
        }
    }

    pub fn since(&self, earlier: &ServerStats) -> ServerStats {
        ServerStats {
            calls: counters_since(&self.calls, &earlier.calls),
            failed: counters_since(&self.failed, &earlier.failed),
            errors: counters_since(&self.errors, &earlier.errors),
            commands: self.commands - earlier.commands,
            reads: self.reads - earlier.reads,
            net_input_bytes: self.net_input_bytes - earlier.net_input_bytes,
            connected_clients: self.connected_clients,
        }
    }

    pub fn calls_of(&self, command: &str) -> u64 {
        self.calls.get(command).copied().unwrap_or(0)
    }

    /// Calls of `command` that did not end in an error.
    pub fn succeeded(&self, command: &str) -> u64 {
        self.calls_of(command) - self.failed.get(command).copied().unwrap_or(0)
    }
}

/// `name -> value of key` for the INFO lines `<prefix>name:key=value,...`.
fn counters(fields: &HashMap<&str, &str>, prefix: &str, key: &str) -> Counters {
    fields
        .iter()
        .filter_map(|(name, value)| {
            let name = name.strip_prefix(prefix)?;
            let n = value
                .split(',')
                .find_map(|pair| pair.strip_prefix(key)?.strip_prefix('='))?
                .parse()
                .ok()?;
            Some((name.to_owned(), n))
        })
        .collect()
}

/// The growth of each counter, leaving out those that did not move.
fn counters_since(now: &Counters, earlier: &Counters) -> Counters {
    now.iter()
        .map(|(name, &n)| (name.clone(), n - earlier.get(name).copied().unwrap_or(0)))
        .filter(|&(_, n)| n > 0)
        .collect()
}

/// (socket reads, commands processed) summed over the nodes behind `probes`.
pub async fn servers_stats(probes: &[MultiplexedConnection]) -> (u64, u64) {
    let mut total = (0, 0);
    for probe in probes {
        let stats = ServerStats::read(&mut probe.clone()).await;
        total.0 += stats.reads;
        total.1 += stats.commands;
    }
    total
}

pub async fn connect_probes(urls: &[String]) -> Vec<MultiplexedConnection> {
    let mut probes = Vec::new();
    for url in urls {
        let client = redis::Client::open(url.as_str()).expect("a valid node URL");
        probes.push(
            client
                .get_multiplexed_async_connection()
                .await
                .expect("connect the INFO probe"),
        );
    }
    probes
}

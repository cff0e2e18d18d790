//! `fencelock inspect` (alias `status`): each node's view of a lock, never
//! the owner's token.

use std::process::ExitCode;
use std::time::Duration;

use fencelock::{Client, NodeLockState};
use serde::Serialize;

use crate::args::InspectArgs;
use crate::exit;

#[derive(Serialize)]
struct Report<'a> {
    resource: &'a str,
    quorum: usize,
    /// Held on at least a quorum of nodes.
    held: bool,
    nodes: Vec<NodeRow>,
}

#[derive(Serialize)]
struct NodeRow {
    node: String,
    held: bool,
    ttl_ms: Option<u64>,
    fencing_counter: u64,
    waiters: u64,
    error: Option<String>,
}

impl From<NodeLockState> for NodeRow {
    fn from(state: NodeLockState) -> Self {
        NodeRow {
            node: state.node,
            held: state.held,
            ttl_ms: state.ttl_ms,
            fencing_counter: state.fencing_counter,
            waiters: state.waiters,
            error: state.error,
        }
    }
}

/// Prints the report; exit code 69 when fewer than a quorum of nodes answered.
pub async fn inspect(client: &Client, args: &InspectArgs) -> ExitCode {
    let states = match client.inspect(&args.resource).await {
        Ok(states) => states,
        Err(e) => {
            eprintln!("fencelock: {e}");
            return exit::for_error(e.kind());
        }
    };
    let quorum = client.quorum();
    let nodes: Vec<NodeRow> = states.into_iter().map(NodeRow::from).collect();
    let answered = nodes.iter().filter(|n| n.error.is_none()).count();
    let report = Report {
        resource: &args.resource,
        quorum,
        held: nodes.iter().filter(|n| n.held).count() >= quorum,
        nodes,
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("plain data serializes")
        );
    } else {
        print_table(&report);
    }
    if answered >= quorum {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(exit::UNAVAILABLE)
    }
}

fn print_table(report: &Report<'_>) {
    let held_on = report.nodes.iter().filter(|n| n.held).count();
    println!(
        "lock '{}': {} (held on {held_on} of {} nodes, quorum {})",
        report.resource,
        if report.held { "HELD" } else { "free" },
        report.nodes.len(),
        report.quorum
    );
    let width = report
        .nodes
        .iter()
        .map(|n| n.node.len())
        .max()
        .unwrap_or(4)
        .max(4);
    println!(
        "{:width$}  {:4}  {:>9}  {:>15}  {:>7}",
        "NODE", "HELD", "TTL", "FENCING COUNTER", "WAITERS"
    );
    for node in &report.nodes {
        let ttl = node.ttl_ms.map_or("-".to_owned(), |ms| {
            format!("{:.1}s", Duration::from_millis(ms).as_secs_f64())
        });
        let held = if node.held { "yes" } else { "no" };
        match &node.error {
            None => println!(
                "{:width$}  {held:4}  {ttl:>9}  {:>15}  {:>7}",
                node.node, node.fencing_counter, node.waiters
            ),
            Some(error) => println!(
                "{:width$}  {:4}  {:>9}  {:>15}  {:>7}  error: {error}",
                node.node, "?", "?", "?", "?"
            ),
        }
    }
}

//! `redis-nodes`: the shared harness for tests written in other languages.
//!
//! Python, Node, C and .NET tests need the same real Redis nodes the Rust
//! tests get from [`fencelock_harness::RedisNode`]. Rather than each language
//! re-implementing "free port, start, wait for PING, kill by PID", they run
//! this program as a child:
//!
//! ```text
//! redis-nodes [--nodes N] [--aof]
//! ```
//!
//! The first line on stdout is JSON: `{"nodes":["redis://127.0.0.1:PORT",…]}`.
//! Then it reads one command per line on stdin and answers `ok` or
//! `error: …` on stdout:
//!
//! | command      | effect                                      |
//! |--------------|---------------------------------------------|
//! | `kill I`     | SIGKILL node I (0-based): a crash           |
//! | `restart I`  | start node I again on the same port         |
//! | `pause I`    | SIGSTOP: the node keeps its socket, answers nothing |
//! | `resume I`   | SIGCONT after `pause`                       |
//!
//! End of stdin (the parent exited or closed the pipe) stops every node.
//! The nodes also die with this process (PDEATHSIG), so a crashed test
//! leaves nothing running.

use std::io::{BufRead, Write};

use fencelock_harness::{NodeOptions, RedisNode};

fn main() {
    let (count, options) = match parse_args(std::env::args().skip(1)) {
        Ok(parsed) => parsed,
        Err(message) => {
            eprintln!("redis-nodes: {message}\nusage: redis-nodes [--nodes N] [--aof]");
            std::process::exit(2);
        }
    };
    let nodes = RedisNode::start_many(count, &options);
    let urls: Vec<String> = nodes.iter().map(|node| format!("\"{}\"", node.url())).collect();
    let mut out = std::io::stdout().lock();
    writeln!(out, "{{\"nodes\":[{}]}}", urls.join(",")).expect("write to stdout");
    out.flush().expect("flush stdout");

    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let reply = match run_command(&nodes, line.trim()) {
            Ok(()) => "ok".to_owned(),
            Err(message) => format!("error: {message}"),
        };
        if writeln!(out, "{reply}").and_then(|()| out.flush()).is_err() {
            break;
        }
    }
    // Dropping `nodes` kills each server and removes its directory.
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<(usize, NodeOptions), String> {
    let mut count = 1;
    let mut options = NodeOptions::default();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--nodes" => {
                let value = args.next().ok_or("--nodes needs a number")?;
                count = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=64).contains(n))
                    .ok_or_else(|| format!("--nodes takes 1..=64, got {value:?}"))?;
            }
            "--aof" => options.aof = true,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok((count, options))
}

fn run_command(nodes: &[RedisNode], line: &str) -> Result<(), String> {
    let (verb, index) = line
        .split_once(' ')
        .ok_or("expected `VERB INDEX`, e.g. `kill 0`")?;
    let node = index
        .trim()
        .parse::<usize>()
        .ok()
        .and_then(|i| nodes.get(i))
        .ok_or_else(|| format!("no node {index:?}; there are {} (0-based)", nodes.len()))?;
    match verb {
        "kill" => node.kill(),
        "restart" => node.restart(),
        "pause" => node.pause(),
        "resume" => node.resume(),
        other => {
            return Err(format!(
                "unknown command {other:?}; use kill, restart, pause or resume"
            ));
        }
    }
    Ok(())
}

//! `redis-nodes`: the shared harness for tests written in other languages.
//!
//! Python, Node, C and .NET tests need the same real Redis nodes the Rust
//! tests get from [`fencelock_harness::RedisNode`]. Rather than each language
//! re-implementing "free port, start, wait for PING, kill by PID", they run
//! this program as a child:
//!
//! ```text
//! redis-nodes [--nodes N] [--aof] [--server PATH]
//! redis-nodes --postgres
//! ```
//!
//! The first line on stdout is JSON: `{"nodes":["redis://127.0.0.1:PORT",…]}`
//! (with `--postgres`: one PostgreSQL server, `{"nodes":["postgresql://…"]}`;
//! without PostgreSQL installed it exits with status 77, the one failure the
//! fronts' tests skip on).
//! Then it reads one command per line on stdin and answers `ok` or
//! `error: …` on stdout:
//!
//! | command      | effect                                      |
//! |--------------|---------------------------------------------|
//! | `kill I`     | SIGKILL node I (0-based): a crash           |
//! | `restart I`  | start node I again on the same port         |
//! | `pause I`    | SIGSTOP: the node keeps its socket, answers nothing |
//! | `resume I`   | SIGCONT after `pause`                       |
//! | `call I ARG…`| run one Redis command on node I; the reply follows `ok ` (integers as digits, nil as `nil`, arrays space-separated) |
//! | `sql STATEMENT…` | `--postgres` only, and its only command: run the rest of the line as SQL, as the superuser (psql); `ok ` then what it printed (one row per line joined by spaces, `\|` between columns), or `error: ` and the server's message |
//!
//! `--server` runs another program than `redis-server` that takes its
//! arguments, such as a `valkey-server` (scripts/valkey-server.sh).
//!
//! End of stdin (the parent exited or closed the pipe) stops every node.
//! The nodes also die with this process (PDEATHSIG), so a crashed test
//! leaves nothing running.

use std::io::{BufRead, Write};

use fencelock_harness::{NodeOptions, PostgresNode, RedisNode, postgres_installed};

/// The exit status of `--postgres` when PostgreSQL is not installed: the
/// one failure the fronts' tests skip on (77, automake's "skipped"). Any
/// other failure to start fails them.
const POSTGRES_MISSING: i32 = 77;

fn main() {
    if std::env::args().skip(1).eq(["--postgres"]) {
        return serve_postgres();
    }
    let (count, options) = match parse_args(std::env::args().skip(1)) {
        Ok(parsed) => parsed,
        Err(message) => {
            eprintln!(
                "redis-nodes: {message}\nusage: redis-nodes [--nodes N] [--aof] | redis-nodes --postgres"
            );
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
            Ok(reply) => format!("ok{reply}"),
            Err(message) => format!("error: {message}"),
        };
        if writeln!(out, "{reply}").and_then(|()| out.flush()).is_err() {
            break;
        }
    }
    // Dropping `nodes` kills each server and removes its directory.
}

/// One PostgreSQL server until stdin ends; it takes `sql STATEMENT…` only.
fn serve_postgres() {
    if !postgres_installed() {
        eprintln!(
            "redis-nodes: PostgreSQL is not installed (no initdb in /usr/lib/postgresql/*/bin \
             or on PATH); install it: apt-get install postgresql"
        );
        std::process::exit(POSTGRES_MISSING);
    }
    let node = PostgresNode::start();
    let mut out = std::io::stdout().lock();
    writeln!(out, "{{\"nodes\":[\"{}\"]}}", node.url()).expect("write to stdout");
    out.flush().expect("flush stdout");
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let reply = match postgres_command(&node, line.trim()) {
            Ok(reply) => format!("ok{reply}"),
            Err(message) => format!("error: {message}"),
        };
        if writeln!(out, "{reply}").and_then(|()| out.flush()).is_err() {
            break;
        }
    }
}

/// Runs one line in `--postgres` mode; `Ok` holds what follows `ok`, on one line.
fn postgres_command(node: &PostgresNode, line: &str) -> Result<String, String> {
    let one_line = |text: &str| text.trim().lines().map(str::trim).collect::<Vec<_>>().join(" ");
    match line.split_once(char::is_whitespace) {
        Some(("sql", statement)) if !statement.trim().is_empty() => node
            .try_sql(statement.trim())
            .map(|output| match one_line(&output) {
                rows if rows.is_empty() => rows,
                rows => format!(" {rows}"),
            })
            .map_err(|message| one_line(&message)),
        _ => Err("a PostgreSQL server takes one command: `sql STATEMENT…`".to_owned()),
    }
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
            "--server" => {
                let path = args.next().ok_or("--server needs a program's path")?;
                options.server = Some(path.into());
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok((count, options))
}

/// Runs one line; `Ok` holds what follows `ok` in the answer.
fn run_command(nodes: &[RedisNode], line: &str) -> Result<String, String> {
    let mut words = line.split_whitespace();
    let (Some(verb), Some(index)) = (words.next(), words.next()) else {
        return Err("expected `VERB INDEX [ARG…]`, e.g. `kill 0`".to_owned());
    };
    let node = index
        .parse::<usize>()
        .ok()
        .and_then(|i| nodes.get(i))
        .ok_or_else(|| format!("no node {index:?}; there are {} (0-based)", nodes.len()))?;
    match verb {
        "kill" => node.kill(),
        "restart" => node.restart(),
        "pause" => node.pause(),
        "resume" => node.resume(),
        "call" => return call(node, words.collect()),
        other => {
            return Err(format!(
                "unknown command {other:?}; use kill, restart, pause, resume or call"
            ));
        }
    }
    Ok(String::new())
}

fn call(node: &RedisNode, args: Vec<&str>) -> Result<String, String> {
    let (name, rest) = args
        .split_first()
        .ok_or("`call I` needs a Redis command, e.g. `call 0 DEL key`")?;
    let mut command = redis::cmd(name);
    for arg in rest {
        command.arg(*arg);
    }
    let mut connection = redis::Client::open(node.url())
        .and_then(|client| client.get_connection_with_timeout(std::time::Duration::from_secs(2)))
        .map_err(|e| format!("cannot connect to {}: {e}", node.url()))?;
    let reply: redis::Value = command.query(&mut connection).map_err(|e| e.to_string())?;
    Ok(format!(" {}", plain(&reply)))
}

/// A reply as one line of text.
fn plain(value: &redis::Value) -> String {
    use redis::Value;
    match value {
        Value::Nil => "nil".to_owned(),
        Value::Int(n) => n.to_string(),
        Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Value::SimpleString(text) => text.clone(),
        Value::Okay => "OK".to_owned(),
        Value::Array(items) | Value::Set(items) => items.iter().map(plain).collect::<Vec<_>>().join(" "),
        other => format!("{other:?}"),
    }
}

//! Helpers shared by the CLI test files. Each test file is its own crate and
//! uses only some of them, hence the `dead_code` allowance.
#![allow(dead_code)]

use std::io::Read;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use fencelock_harness::RedisNode;

pub mod pty;

/// The `fencelock` binary under test, with no FENCELOCK_* variable inherited
/// from the environment the tests run in.
pub fn bare_fencelock() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_fencelock"));
    for name in [
        "FENCELOCK_NODES",
        "FENCELOCK_USERNAME",
        "FENCELOCK_PASSWORD",
        "FENCELOCK_PASSWORD_FILE",
    ] {
        command.env_remove(name);
    }
    command
}

/// `fencelock --node URL… ARGS…`.
pub fn fencelock(nodes: &[&RedisNode], args: &[&str]) -> Command {
    let mut command = bare_fencelock();
    for node in nodes {
        command.arg("--node").arg(node.url());
    }
    command.args(args);
    command
}

/// The exit code; fails if fencelock died of a signal.
pub fn code(output: &Output) -> i32 {
    output.status.code().expect("fencelock exits, it is not killed")
}

/// Bytes as text, for assertions.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Whether the lock key of `resource` exists on `node`.
pub fn key_exists(node: &RedisNode, resource: &str) -> bool {
    node.command(&["EXISTS", &format!("fencelock:{{{resource}}}")]) == redis::Value::Int(1)
}

/// Polls `condition` every 10 ms until it holds or `limit` passes; returns
/// whether it held. For things that must happen "promptly": the limit is a
/// generous bound, never a measurement.
pub fn eventually(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Spawns with stdout and stderr piped.
pub fn spawn(command: &mut Command) -> Child {
    command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn fencelock")
}

/// Waits for a child, killing it (and failing) if it hangs.
pub fn finish(mut child: Child) -> Output {
    let exited = eventually(Duration::from_secs(30), || {
        child.try_wait().expect("poll child").is_some()
    });
    if !exited {
        let _ = child.kill();
        panic!("fencelock did not exit within 30 s");
    }
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    child.stdout.take().map(|mut s| s.read_to_end(&mut stdout));
    child.stderr.take().map(|mut s| s.read_to_end(&mut stderr));
    Output {
        status: child.wait().expect("reap"),
        stdout,
        stderr,
    }
}

/// Whether process `pid` exists (a zombie counts as gone: it runs no code).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => process_state(&stat) != Some('Z'),
        Err(_) => false,
    }
}

/// The state letter of a `/proc/PID/stat` line: `R`, `S`, `T` (stopped), `Z`…
pub fn process_state(stat: &str) -> Option<char> {
    stat_fields(stat)?.first()?.chars().next()
}

/// The fields of a `/proc/PID/stat` line after the command name: state,
/// ppid, pgrp, session, tty_nr, tpgid, …
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    // The command name is in parentheses and may itself contain spaces or ')'.
    Some(stat[stat.rfind(')')? + 1..].split_whitespace().collect())
}

/// The state letter of process `pid`, if it exists.
pub fn state_of(pid: i32) -> Option<char> {
    process_state(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// A numeric field of process `pid`'s stat line (1 = ppid, 2 = pgrp, 5 = the
/// terminal's foreground process group), if the process exists.
fn stat_number(pid: i32, field: usize) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat_fields(&stat)?.get(field)?.parse().ok()
}

/// The parent of process `pid`.
pub fn parent_of(pid: i32) -> Option<i32> {
    stat_number(pid, 1)
}

/// The process group of process `pid`.
pub fn group_of(pid: i32) -> Option<i32> {
    stat_number(pid, 2)
}

/// The foreground process group of process `pid`'s controlling terminal.
pub fn terminal_foreground_of(pid: i32) -> Option<i32> {
    stat_number(pid, 5)
}

/// Whether process `pid` is stopped (`T`).
pub fn stopped(pid: i32) -> bool {
    state_of(pid) == Some('T')
}

/// Sends `signal` to `pid`, a process this test started (directly or
/// through the fencelock it started).
pub fn signal(pid: i32, signal: i32) {
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe { libc::kill(pid, signal) };
}

/// Kills the processes a test learned about, if still there: no orphan outlives a test.
pub struct Reap(pub Vec<i32>);

impl Drop for Reap {
    fn drop(&mut self) {
        for &pid in &self.0 {
            if alive(pid) {
                signal(pid, libc::SIGKILL);
            }
        }
    }
}

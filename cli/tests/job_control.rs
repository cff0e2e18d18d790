//! Issue #15, item 11: `fencelock run` behaves like the job a shell user
//! thinks it is. Ctrl-Z stops fencelock and its command together and `fg`
//! resumes both, the command can read the terminal, signals reach it once,
//! and `kill -9` of fencelock does not leave it running unlocked.
//!
//! Most tests type into an interactive bash on a pseudo-terminal, as a
//! person would.

mod common;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use common::pty::{CTRL_BACKSLASH, CTRL_C, CTRL_Z, PROMPTLY, Terminal};
use common::{
    Reap, alive, eventually, group_of, key_exists, parent_of, signal, stopped, terminal_foreground_of,
};
use fencelock_harness::{NodeOptions, RedisNode};

/// Traps every forwarded signal and says so; counts INTs; with `reads`,
/// echoes each line read from stdin (exit 7 after "done"), otherwise just
/// runs. Prints `child=PID` first. bash, because its `read` resumes after a
/// trap where dash's returns as if at end of input.
fn command_script(name: &str, reads: bool) -> PathBuf {
    let body = if reads {
        r#"while read -r line; do
  echo "read: $line (INTs: $n)"
  [ "$line" = done ] && exit 7
done
echo "end of input"; exit 9"#
    } else {
        "while :; do sleep 0.05; done"
    };
    let script = format!(
        r#"ulimit -c 0
n=0
trap 'n=$((n+1)); echo "got INT $n"' INT
trap 'echo "got QUIT"' QUIT
trap 'echo "got USR1"' USR1
trap 'echo "got USR2"' USR2
trap 'echo "got TERM"; exit 0' TERM
echo "child=$$ ready"
{body}
"#
    );
    let path = std::env::temp_dir().join(format!("fencelock-jc-{}-{name}.sh", std::process::id()));
    std::fs::write(&path, script).expect("write the command's script");
    path
}

/// A shell on a pty whose FENCELOCK_NODES names `node`.
fn terminal_for(node: &RedisNode) -> Terminal {
    Terminal::shell(&[("FENCELOCK_NODES", &node.url())])
}

/// Types `fencelock run ARGS RESOURCE -- bash SCRIPT` and returns the
/// command's PID and fencelock's, once the command has started.
fn start(terminal: &mut Terminal, args: &str, resource: &str, script: &Path) -> (i32, i32) {
    let fencelock = env!("CARGO_BIN_EXE_fencelock");
    terminal.type_line(&format!(
        "{fencelock} run {args} {resource} -- bash {}",
        script.display()
    ));
    let command = terminal.expect_number_after("child=");
    terminal.expect("ready");
    let fencelock = parent_of(command).expect("the command's parent");
    (command, fencelock)
}

/// The PID in the first line (`child=PID ready`) of the command fencelock
/// `child` runs, without a terminal, and the rest of its output: keep it
/// open, or the command's next line dies of SIGPIPE.
fn command_pid(child: &mut std::process::Child) -> (i32, std::io::BufReader<std::process::ChildStdout>) {
    let mut line = String::new();
    let mut stdout = std::io::BufReader::new(child.stdout.take().expect("piped stdout"));
    std::io::BufRead::read_line(&mut stdout, &mut line).expect("the command's first line");
    let pid = line
        .trim()
        .strip_prefix("child=")
        .and_then(|rest| rest.strip_suffix(" ready"))
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
    (pid, stdout)
}

#[test]
fn ctrl_z_stops_fencelock_and_the_command_and_fg_resumes_both() {
    let node = RedisNode::start(&NodeOptions::default());
    let mut terminal = terminal_for(&node);
    let script = command_script("ctrl-z", false);
    let (command, fencelock) = start(&mut terminal, "", "ctrl-z", &script);
    let _reap = Reap(vec![command, fencelock]);

    terminal.send(CTRL_Z);
    terminal.expect("Stopped");
    assert!(
        eventually(PROMPTLY, || stopped(command) && stopped(fencelock)),
        "after Ctrl-Z: command stopped {}, fencelock stopped {}",
        stopped(command),
        stopped(fencelock)
    );
    assert!(key_exists(&node, "ctrl-z"));

    terminal.type_line("fg");
    assert!(
        eventually(PROMPTLY, || !stopped(command) && !stopped(fencelock)),
        "after fg: command stopped {}, fencelock stopped {}",
        stopped(command),
        stopped(fencelock)
    );
    // Both run on, and the command owns the terminal again: Ctrl-C reaches it.
    terminal.send(CTRL_C);
    terminal.expect("got INT 1");

    // Stopped again, then resumed by a plain SIGCONT to fencelock (`kill -CONT`).
    terminal.send(CTRL_Z);
    terminal.expect("Stopped");
    assert!(eventually(PROMPTLY, || stopped(command) && stopped(fencelock)));
    signal(fencelock, libc::SIGCONT);
    assert!(
        eventually(PROMPTLY, || !stopped(command) && !stopped(fencelock)),
        "after SIGCONT: command stopped {}, fencelock stopped {}",
        stopped(command),
        stopped(fencelock)
    );
    signal(fencelock, libc::SIGTERM);
    terminal.expect("got TERM");
    terminal.type_line("wait");
    assert!(eventually(PROMPTLY, || !alive(fencelock) && !alive(command)));
    assert!(!key_exists(&node, "ctrl-z"), "released after the command exited");
}

#[test]
fn a_lock_lost_while_stopped_stops_the_command_after_fg() {
    let node = RedisNode::start(&NodeOptions::default());
    lost_while_stopped(&node, "lost-while-stopped", "stopped-loss", || {
        // Someone takes the lock away while both are stopped.
        node.command(&["DEL", "fencelock:{stopped-loss}"]);
    });
}

#[test]
fn a_lock_that_expired_while_stopped_is_not_resumed() {
    let node = RedisNode::start(&NodeOptions::default());
    lost_while_stopped(&node, "expired-while-stopped", "stopped-expiry", || {
        // Stopped for longer than the ttl: no renewal, the key expires.
        assert!(eventually(PROMPTLY, || !key_exists(&node, "stopped-expiry")));
    });
}

/// Ctrl-Z stops the command and fencelock (ttl 1 s); `meanwhile` takes the
/// lock away; after `fg` the loss is reported, the command gets TERM and
/// fencelock exits 76.
fn lost_while_stopped(node: &RedisNode, name: &str, resource: &str, meanwhile: impl FnOnce()) {
    let mut terminal = terminal_for(node);
    let script = command_script(name, false);
    let (command, fencelock) = start(&mut terminal, "--ttl 1s", resource, &script);
    let _reap = Reap(vec![command, fencelock]);

    terminal.send(CTRL_Z);
    terminal.expect("Stopped");
    assert!(eventually(PROMPTLY, || stopped(command) && stopped(fencelock)));
    meanwhile();
    terminal.type_line("fg");
    terminal.expect(&format!("lost the lock '{resource}'"));
    terminal.expect("got TERM");
    terminal.expect("PROMPT> ");
    assert_eq!(terminal.last_status(), 76, "{}", terminal.screen());
    assert!(eventually(PROMPTLY, || !alive(command)));
}

#[test]
fn an_interactive_command_reads_the_terminal_and_gets_each_signal_once() {
    let node = RedisNode::start(&NodeOptions::default());
    let mut terminal = terminal_for(&node);
    let script = command_script("interactive", true);
    let (command, fencelock) = start(&mut terminal, "", "interactive", &script);
    let _reap = Reap(vec![command, fencelock]);

    terminal.type_line("hello there");
    terminal.expect("read: hello there (INTs: 0)");
    // The command's process group owns the terminal, fencelock's does not.
    assert_eq!(terminal_foreground_of(fencelock), group_of(command));

    // From the keyboard: to the foreground group, so once, not again through fencelock.
    terminal.send(CTRL_C);
    terminal.expect("got INT 1");
    terminal.send(CTRL_BACKSLASH);
    terminal.expect("got QUIT");
    // Sent to fencelock: forwarded.
    for (number, name) in [
        (libc::SIGQUIT, "QUIT"),
        (libc::SIGUSR1, "USR1"),
        (libc::SIGUSR2, "USR2"),
        (libc::SIGINT, "INT 2"),
    ] {
        signal(fencelock, number);
        terminal.expect(&format!("got {name}"));
    }
    terminal.type_line("again");
    terminal.expect("read: again (INTs: 2)");
    assert!(!terminal.screen().contains("got INT 3"), "{}", terminal.screen());

    terminal.type_line("done");
    terminal.expect("PROMPT> ");
    assert_eq!(terminal.last_status(), 7, "{}", terminal.screen());
    assert!(
        !key_exists(&node, "interactive"),
        "released after the command exited"
    );
    // fencelock gave the terminal back: the shell reads it again.
    terminal.type_line("echo 'shell reads: ok'");
    terminal.expect("shell reads: ok");
}

#[test]
fn kill_9_of_fencelock_kills_the_command_promptly() {
    let node = RedisNode::start(&NodeOptions::default());
    let mut terminal = terminal_for(&node);
    let script = command_script("kill-9", false);
    let (command, fencelock) = start(&mut terminal, "", "kill-9", &script);
    let _reap = Reap(vec![command, fencelock]);

    signal(fencelock, libc::SIGKILL);
    assert!(
        eventually(PROMPTLY, || !alive(command)),
        "the command {command} outlived fencelock {fencelock}, running unlocked"
    );
    // Without a terminal too (cron).
    let mut child = common::spawn(
        common::bare_fencelock()
            .args(["--node", &node.url(), "run", "kill-9-cron", "--", "bash"])
            .arg(&script),
    );
    let (command, _output) = command_pid(&mut child);
    let _reap_cron = Reap(vec![command]);
    child.kill().expect("kill -9 fencelock");
    child.wait().expect("reap fencelock");
    assert!(
        eventually(PROMPTLY, || !alive(command)),
        "without a terminal, the command {command} outlived fencelock"
    );
}

#[test]
fn without_a_terminal_tstp_and_cont_stop_and_resume_both() {
    let node = RedisNode::start(&NodeOptions::default());
    let script = command_script("cron", false);
    // In a process group of its own, as a shell runs a job: a group whose
    // parents are all outside the session (this test run under setsid, or
    // left behind by its shell) is orphaned, and the kernel ignores
    // SIGTSTP's stop there, for fencelock as for any program.
    let mut child = common::spawn(
        common::bare_fencelock()
            .process_group(0)
            .args([
                "--node",
                &node.url(),
                "run",
                "--ttl",
                "1s",
                "tstp-cron",
                "--",
                "bash",
            ])
            .arg(&script),
    );
    let fencelock = child.id() as i32;
    let (command, _output) = command_pid(&mut child);
    let _reap = Reap(vec![command, fencelock]);

    // Stopping the command alone (an operator's kill -STOP) does not stop
    // fencelock: it goes on renewing the lock while its command exists.
    signal(command, libc::SIGSTOP);
    assert!(eventually(PROMPTLY, || stopped(command)));
    // Renewals go as EVAL (docs/protocol.md §3).
    let renewals = node.command_calls("eval");
    assert!(
        eventually(PROMPTLY, || node.command_calls("eval") >= renewals + 2),
        "no renewal while the command was stopped"
    );
    assert!(!stopped(fencelock));
    signal(command, libc::SIGCONT);
    assert!(eventually(PROMPTLY, || !stopped(command)));

    signal(fencelock, libc::SIGTSTP);
    assert!(
        eventually(PROMPTLY, || stopped(command) && stopped(fencelock)),
        "after SIGTSTP: command stopped {}, fencelock stopped {}",
        stopped(command),
        stopped(fencelock)
    );
    signal(fencelock, libc::SIGCONT);
    assert!(
        eventually(PROMPTLY, || !stopped(command) && !stopped(fencelock)),
        "after SIGCONT: command stopped {}, fencelock stopped {}",
        stopped(command),
        stopped(fencelock)
    );
    signal(fencelock, libc::SIGTERM);
    let status = child.wait().expect("reap fencelock");
    assert_eq!(status.code(), Some(0), "the command's TERM trap exits 0");
}

/// `nohup fencelock run …`: a signal ignored when fencelock starts is
/// neither caught nor forwarded, and the command inherits it ignored.
#[test]
fn a_signal_ignored_at_start_stays_ignored_for_the_command() {
    let node = RedisNode::start(&NodeOptions::default());
    let mut command = common::bare_fencelock();
    command.args([
        "--node",
        &node.url(),
        "run",
        "nohup",
        "--",
        "grep",
        "SigIgn",
        "/proc/self/status",
    ]);
    // SAFETY: signal(2) is async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGHUP, libc::SIG_IGN);
            Ok(())
        });
    }
    let output = command.output().expect("run fencelock");
    assert_eq!(common::code(&output), 0, "{}", common::text(&output.stderr));
    let line = common::text(&output.stdout);
    let mask = u64::from_str_radix(line.trim().trim_start_matches("SigIgn:").trim(), 16)
        .unwrap_or_else(|_| panic!("unexpected {line:?}"));
    assert_ne!(
        mask & (1 << (libc::SIGHUP - 1)),
        0,
        "SIGHUP is not ignored by the command: {line}"
    );
}

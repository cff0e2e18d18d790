//! A small pseudo-terminal driver: an interactive `bash` with job control on
//! the slave side, the test on the master side, typing and reading like a
//! person at a terminal. libc's `openpty` and a reader thread; nothing else.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::eventually;

/// How long anything a person would see "at once" may take on a busy machine.
pub const PROMPTLY: Duration = Duration::from_secs(20);

/// Ctrl-C, Ctrl-Z and Ctrl-\ as the terminal receives them.
pub const CTRL_C: &[u8] = b"\x03";
/// Suspends the foreground job.
pub const CTRL_Z: &[u8] = b"\x1a";
/// SIGQUIT to the foreground job.
pub const CTRL_BACKSLASH: &[u8] = b"\x1c";

/// An interactive shell in a new session whose controlling terminal is a pty.
pub struct Terminal {
    master: File,
    /// Everything the terminal showed so far.
    screen: Arc<Mutex<String>>,
    /// Where the next [`Terminal::expect`] starts looking.
    cursor: usize,
    shell: Child,
}

impl Terminal {
    /// Starts `bash -i` (no rc files, no line editing) with the prompt `PROMPT> `
    /// and `env` added to its environment, and waits for its first prompt.
    pub fn shell(env: &[(&str, &str)]) -> Terminal {
        let (master, slave) = open_pty();
        let stdio = |fd: &OwnedFd| Stdio::from(fd.try_clone().expect("dup the pty slave"));
        let mut command = Command::new("bash");
        command
            .args(["--norc", "--noprofile", "--noediting", "-i"])
            .env("PS1", "PROMPT> ")
            .env("TERM", "dumb")
            .envs(env.iter().copied())
            .stdin(stdio(&slave))
            .stdout(stdio(&slave))
            .stderr(stdio(&slave));
        // SAFETY: setsid and ioctl are async-signal-safe system calls.
        unsafe {
            command.pre_exec(|| {
                // A session of its own, with the pty (now its stdin) as its
                // controlling terminal: bash then turns on job control.
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let shell = command.spawn().expect("start bash on the pty");
        drop(slave);
        let master = File::from(master);
        let screen = Arc::new(Mutex::new(String::new()));
        let mut reader = master.try_clone().expect("dup the pty master");
        let seen = screen.clone();
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            // Ends with EIO once every slave descriptor is closed.
            while let Ok(n @ 1..) = reader.read(&mut buffer) {
                seen.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buffer[..n]));
            }
        });
        let mut terminal = Terminal {
            master,
            screen,
            cursor: 0,
            shell,
        };
        terminal.expect("PROMPT> ");
        terminal
    }

    /// Types `line` and Enter.
    pub fn type_line(&mut self, line: &str) {
        self.send(format!("{line}\n").as_bytes());
    }

    /// Sends raw bytes, e.g. [`CTRL_Z`].
    pub fn send(&mut self, bytes: &[u8]) {
        self.master.write_all(bytes).expect("write to the pty");
    }

    /// Waits (up to [`PROMPTLY`]) until `text` appears after the cursor, moves
    /// the cursor past it and returns what came before it.
    pub fn expect(&mut self, text: &str) -> String {
        let mut found = None;
        let appeared = eventually(PROMPTLY, || {
            let screen = self.screen.lock().unwrap();
            found = screen[self.cursor..].find(text).map(|at| {
                (
                    screen[self.cursor..self.cursor + at].to_owned(),
                    self.cursor + at + text.len(),
                )
            });
            found.is_some()
        });
        let Some((before, end)) = found.filter(|_| appeared) else {
            panic!("the terminal never showed {text:?}; it shows:\n{}", self.screen());
        };
        self.cursor = end;
        before
    }

    /// Waits for `prefix` followed by a number, and returns the number.
    pub fn expect_number_after(&mut self, prefix: &str) -> i32 {
        self.expect(prefix);
        let mut digits = String::new();
        assert!(
            eventually(PROMPTLY, || {
                let screen = self.screen.lock().unwrap();
                digits = screen[self.cursor..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                screen.len() > self.cursor + digits.len()
            }),
            "no number after {prefix:?}"
        );
        self.cursor += digits.len();
        digits
            .parse()
            .unwrap_or_else(|_| panic!("no number after {prefix:?}: {}", self.screen()))
    }

    /// Runs `echo` of the last command's status at the prompt and returns it.
    pub fn last_status(&mut self) -> i32 {
        // Split, so that the echo of the typed line does not match.
        self.type_line("echo \"st\"\"atus=[$?]\"");
        self.expect("status=[");
        let status = self.expect("]");
        status.parse().unwrap_or_else(|_| panic!("bad status {status:?}"))
    }

    /// Everything shown so far, for failure messages.
    pub fn screen(&self) -> String {
        self.screen.lock().unwrap().clone()
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        // Only the shell we started, by PID. Its jobs get SIGHUP from bash or
        // from the kernel when the terminal goes; the tests kill the PIDs
        // they know themselves.
        let _ = self.shell.kill();
        let _ = self.shell.wait();
    }
}

fn open_pty() -> (OwnedFd, OwnedFd) {
    let (mut master, mut slave) = (-1, -1);
    // Wide, so typed command lines never wrap.
    let size = libc::winsize {
        ws_row: 50,
        ws_col: 400,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two descriptors into the integers given; null
    // name and termios pointers ask for defaults.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    for fd in [master, slave] {
        // Not inherited by the shell and its jobs: they get dups on 0, 1 and 2.
        // SAFETY: fcntl on a descriptor we own.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    // SAFETY: both descriptors were just opened and are owned by nobody else.
    unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) }
}

//! Holder child processes: the lock holder runs in another process so the
//! test can `kill -9` it, SIGSTOP it, or run it under an LD_PRELOAD shim.
//!
//! The child is this same test binary, re-run with `--ignored --exact
//! child_entry` and `FENCELOCK_CHILD=1`; each `faults_*.rs` file that uses
//! children declares that entry test. Parent and child talk in lines: the
//! parent writes a command on the child's stdin, the child answers with one
//! line starting `FAULTS ` on stdout (libtest's own lines are skipped).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fencelock::LockOptions;

const ANSWER: &str = "FAULTS ";

/// A holder process seen from the test.
pub struct Holder {
    child: Child,
    stdin: ChildStdin,
    answers: mpsc::Receiver<String>,
}

/// What `status` reports.
#[derive(Clone, Copy, Debug)]
pub struct HolderStatus {
    pub held: bool,
    pub remaining: Duration,
    pub renewals: u32,
    /// The child's wall clock (ms since the Unix epoch), to see a clock shim at work.
    pub wall_ms: u128,
}

impl Holder {
    /// Starts a holder of `resource` on `urls`, with extra environment (e.g. LD_PRELOAD).
    pub fn spawn(urls: &[String], resource: &str, ttl: Duration, env: &[(&str, String)]) -> Holder {
        let mut command = Command::new(std::env::current_exe().expect("test binary path"));
        command
            .args([
                "child_entry",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("FENCELOCK_CHILD", "1")
            .env("FENCELOCK_CHILD_NODES", urls.join(","))
            .env("FENCELOCK_CHILD_RESOURCE", resource)
            .env("FENCELOCK_CHILD_TTL_MS", ttl.as_millis().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("start the holder child");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, answers) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(std::io::Result::ok) {
                // libtest may print "test child_entry ... " before the first answer.
                if let Some(at) = line.find(ANSWER)
                    && tx.send(line[at + ANSWER.len()..].to_owned()).is_err()
                {
                    return;
                }
            }
        });
        Holder {
            child,
            stdin,
            answers,
        }
    }

    /// Sends one command and waits (at most 10 s) for its answer.
    pub fn ask(&mut self, command: &str) -> String {
        writeln!(self.stdin, "{command}").expect("write to the holder");
        self.stdin.flush().unwrap();
        self.answers
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("holder did not answer '{command}'"))
    }

    /// Acquires; returns the fencing token.
    pub fn acquire(&mut self) -> u64 {
        let answer = self.ask("acquire");
        answer
            .strip_prefix("acquired ")
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("holder failed to acquire: {answer}"))
    }

    pub fn status(&mut self) -> HolderStatus {
        let answer = self.ask("status");
        let fields: Vec<&str> = answer.split_whitespace().collect();
        assert_eq!(fields.first(), Some(&"status"), "{answer}");
        HolderStatus {
            held: fields[1] == "1",
            remaining: Duration::from_millis(fields[2].parse().unwrap()),
            renewals: fields[3].parse().unwrap(),
            wall_ms: fields[4].parse().unwrap(),
        }
    }

    pub fn pid(&self) -> libc::pid_t {
        self.child.id() as libc::pid_t
    }

    pub fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill(2) on our own child, not yet reaped.
        unsafe {
            libc::kill(self.pid(), signal);
        }
    }

    /// `kill -9`, and reap.
    pub fn kill(&mut self) {
        self.signal(libc::SIGKILL);
        let _ = self.child.wait();
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        self.signal(libc::SIGCONT);
        self.kill();
    }
}

/// The child's side: runs only under `FENCELOCK_CHILD=1`.
pub fn run_child() {
    if std::env::var("FENCELOCK_CHILD").is_err() {
        eprintln!("child_entry is the holder child process of other tests; nothing to do on its own");
        return;
    }
    let env = |key: &str| std::env::var(key).unwrap_or_else(|_| panic!("{key} not set"));
    let urls: Vec<String> = env("FENCELOCK_CHILD_NODES")
        .split(',')
        .map(str::to_owned)
        .collect();
    let resource = env("FENCELOCK_CHILD_RESOURCE");
    let ttl = Duration::from_millis(env("FENCELOCK_CHILD_TTL_MS").parse().unwrap());
    // With FENCELOCK_CHILD_PERMITS=k, "acquire" takes a permit of the
    // semaphore `resource` of k permits instead of the lock.
    let permits: Option<u32> = std::env::var("FENCELOCK_CHILD_PERMITS")
        .ok()
        .map(|k| k.parse().unwrap());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = super::builder_for(urls).build().await.expect("child client");
        let mut lock = None;
        for line in std::io::stdin().lock().lines().map_while(std::io::Result::ok) {
            let mut words = line.split_whitespace();
            let answer = match words.next() {
                Some("acquire") => {
                    let options = LockOptions::new(ttl).wait(Duration::from_secs(5));
                    let taken = match permits {
                        Some(k) => {
                            client
                                .semaphore(&resource, k)
                                .expect("a semaphore")
                                .acquire(options)
                                .await
                        }
                        None => client.acquire(&resource, options).await,
                    };
                    match taken {
                        Ok(l) => {
                            let token = l.fencing_token();
                            lock = Some(l);
                            format!("acquired {token}")
                        }
                        Err(e) => format!("error {}", e.kind()),
                    }
                }
                Some("status") => status_line(lock.as_ref()),
                Some("write") => {
                    let (key, value) = (words.next().unwrap(), words.next().unwrap());
                    // The user-visible check first, as an application would do.
                    let held = lock.as_ref().is_some_and(fencelock::Lock::is_held);
                    let token = lock.as_ref().map_or(0, fencelock::Lock::fencing_token);
                    match client.fenced_set(key, value, token).await {
                        Ok(()) => format!("write ok held={held}"),
                        Err(e) => format!("write {} held={held}", e.kind()),
                    }
                }
                Some("release") => match lock.as_ref().expect("no lock").release().await {
                    Ok(()) => "release ok".to_owned(),
                    Err(e) => format!("release {}", e.kind()),
                },
                _ => return,
            };
            println!("{ANSWER}{answer}");
        }
    });
}

fn status_line(lock: Option<&fencelock::Lock>) -> String {
    let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let (held, remaining, renewals) = lock.map_or((false, Duration::ZERO, 0), |l| {
        (l.is_held(), l.remaining(), l.renewals())
    });
    format!(
        "status {} {} {renewals} {}",
        u8::from(held),
        remaining.as_millis(),
        wall.as_millis()
    )
}

/// Waits until `f` is true or `limit` passes; returns whether it became true.
pub fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    f()
}

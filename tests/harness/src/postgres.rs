//! One PostgreSQL server child process, from Debian's packages.
//!
//! `initdb` runs once per test process into a template directory, which each
//! server copies (initdb is the slow part). The server is `postgres` itself,
//! run as our child (so it stops by its PID, and dies with us), on a free
//! loopback port with no Unix socket. PostgreSQL refuses to run as root, so
//! when the tests run as root both initdb and the server run as `nobody`.

use std::net::{Ipv4Addr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::process::{TlsFiles, free_port, signal};

/// The superuser's name and password in every harness server.
pub(crate) const SUPERUSER: &str = "postgres";
pub(crate) const SUPERUSER_PASSWORD: &str = "harness-superuser";

/// The directory with `initdb`, `postgres`, `psql` and `pg_isready`: the
/// newest `/usr/lib/postgresql/<version>/bin` (where Debian puts them), or
/// the directory of `initdb` on `PATH`. Panics with the install command.
pub fn postgres_bin_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let debian = std::fs::read_dir("/usr/lib/postgresql")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| {
                let version: u32 = entry.file_name().to_str()?.parse().ok()?;
                let bin = entry.path().join("bin");
                bin.join("initdb").is_file().then_some((version, bin))
            })
            .max()
            .map(|(_, bin)| bin);
        let on_path = || {
            std::env::var_os("PATH")
                .into_iter()
                .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
                .find(|dir| dir.join("initdb").is_file() && dir.join("postgres").is_file())
        };
        debian.or_else(on_path).unwrap_or_else(|| {
            panic!(
                "PostgreSQL is not installed. The tests run a real server: install it with \
                 `sudo apt-get install -y postgresql` (Debian/Ubuntu) or run ./scripts/test.sh, which does it for you."
            )
        })
    })
    .clone()
}

/// Whether PostgreSQL's server programs are installed, for tests that skip
/// (saying why) rather than fail without them.
pub fn postgres_installed() -> bool {
    std::panic::catch_unwind(postgres_bin_dir).is_ok()
}

/// The user and group the server runs as: ours, or `nobody` when we are root.
fn server_identity() -> Option<(u32, u32)> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    // SAFETY: getpwnam with a NUL-terminated name; the entry is read at once.
    let entry = unsafe { libc::getpwnam(c"nobody".as_ptr()) };
    assert!(
        !entry.is_null(),
        "running as root, and there is no user 'nobody' to run PostgreSQL as"
    );
    // SAFETY: non-NULL entry from getpwnam.
    Some(unsafe { ((*entry).pw_uid, (*entry).pw_gid) })
}

pub(crate) fn as_server_user(command: &mut Command) -> &mut Command {
    if let Some((uid, gid)) = server_identity() {
        command.uid(uid).gid(gid);
    }
    command
}

/// Makes `path` and everything in it the server user's.
pub(crate) fn hand_over(path: &Path) {
    if let Some((uid, gid)) = server_identity() {
        let status = Command::new("chown")
            .arg("-R")
            .arg(format!("{uid}:{gid}"))
            .arg(path)
            .status()
            .expect("run chown");
        assert!(status.success(), "chown -R {uid}:{gid} {}", path.display());
    }
}

static NEXT_DIR: AtomicU64 = AtomicU64::new(0);

pub(crate) fn scratch_dir(what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "fencelock-pg-{what}-{}-{}",
        std::process::id(),
        NEXT_DIR.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("create a temporary directory for PostgreSQL");
    // Traversable by `nobody` when we are root.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    dir
}

/// The directory of this process's template cluster, once made.
static TEMPLATE: OnceLock<PathBuf> = OnceLock::new();

/// The directory holding the cluster (`data`) initdb made once for this
/// process. It is removed when the process exits; one left by a process that was killed is
/// removed by the next process that makes its own.
fn template() -> &'static Path {
    TEMPLATE.get_or_init(|| {
        remove_dirs_of_gone_processes();
        // SAFETY: atexit with a function that only removes files.
        unsafe {
            libc::atexit(remove_template);
        }
        let dir = scratch_dir("template");
        let password_file = dir.join("pwfile");
        std::fs::write(&password_file, SUPERUSER_PASSWORD).expect("write the password file");
        let data = dir.join("data");
        hand_over(&dir);
        let output = as_server_user(&mut Command::new(postgres_bin_dir().join("initdb")))
            .arg("-D")
            .arg(&data)
            .args([
                "-U",
                SUPERUSER,
                "--auth-host=scram-sha-256",
                "--auth-local=scram-sha-256",
            ])
            .args(["--encoding=UTF8", "--locale=C", "--no-sync"])
            .arg(format!("--pwfile={}", password_file.display()))
            .current_dir(&dir)
            .output()
            .expect("run initdb");
        assert!(
            output.status.success(),
            "initdb failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        dir
    })
}

extern "C" fn remove_template() {
    if let Some(dir) = TEMPLATE.get() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Removes the scratch directories (templates, servers) of processes that
/// no longer run: killed before they could clean up.
fn remove_dirs_of_gone_processes() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("fencelock-pg-")) else {
            continue;
        };
        let pid = rest
            .split('-')
            .nth(1)
            .and_then(|pid| pid.parse::<libc::pid_t>().ok());
        // SAFETY: kill with signal 0 only asks whether the process exists.
        let gone = pid.is_some_and(|pid| {
            let asked = unsafe { libc::kill(pid, 0) };
            asked != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
        });
        if gone {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A running (or stopped) PostgreSQL server owned by this process.
pub struct PostgresNode {
    port: u16,
    dir: PathBuf,
    child: Mutex<Option<Child>>,
    /// `-c name=value` settings beyond the defaults, kept across restarts.
    settings: Vec<String>,
}

impl PostgresNode {
    /// Starts a server (a copy of the template cluster) and waits until it
    /// accepts connections.
    pub fn start() -> PostgresNode {
        PostgresNode::start_with(Vec::new(), |_| {})
    }

    /// A server that accepts TLS (and plaintext) with `files`' certificate
    /// and key; clients verify it against `files.ca`.
    pub fn start_tls(files: &TlsFiles) -> PostgresNode {
        let settings = vec![
            "ssl=on".to_owned(),
            "ssl_cert_file=server.crt".to_owned(),
            "ssl_key_file=server.key".to_owned(),
        ];
        PostgresNode::start_with(settings, |data| {
            std::fs::copy(&files.cert, data.join("server.crt")).expect("copy the certificate");
            let key = data.join("server.key");
            std::fs::copy(&files.key, &key).expect("copy the key");
            // PostgreSQL refuses a key that others may read.
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        })
    }

    fn start_with(settings: Vec<String>, prepare: impl FnOnce(&Path)) -> PostgresNode {
        let dir = scratch_dir("node");
        let status = Command::new("cp")
            .arg("-a")
            .arg(template().join("data"))
            .arg(dir.join("data"))
            .status()
            .expect("run cp");
        assert!(status.success(), "copying the template cluster failed");
        prepare(&dir.join("data"));
        hand_over(&dir);
        let node = PostgresNode {
            port: free_port(),
            dir,
            child: Mutex::new(None),
            settings,
        };
        node.launch();
        node.wait_ready();
        node
    }

    fn launch(&self) {
        let mut command = Command::new(postgres_bin_dir().join("postgres"));
        as_server_user(&mut command)
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-p", &self.port.to_string(), "-h", "127.0.0.1"])
            // No Unix socket (its default directory may not exist or be ours).
            .args(["-c", "unix_socket_directories="])
            // Tests restart servers on purpose; durability is not what they test.
            .args(["-c", "fsync=off", "-c", "full_page_writes=off"])
            .args(["-c", "max_connections=200", "-c", "shared_buffers=16MB"])
            .args(["-c", "logging_collector=off", "-c", "log_min_messages=warning"])
            .args(self.settings.iter().flat_map(|setting| ["-c", setting]))
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(
                std::fs::File::create(self.dir.join("postgres.log"))
                    .map(Stdio::from)
                    .unwrap_or_else(|_| Stdio::null()),
            );
        // If this process dies without running destructors, take the server with it.
        // SAFETY: only async-signal-safe prctl is called between fork and exec.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start postgres: {e}"));
        *self.child.lock().unwrap() = Some(child);
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if TcpStream::connect((Ipv4Addr::LOCALHOST, self.port)).is_ok() && self.accepts_queries() {
                return;
            }
            if let Some(status) = self
                .child
                .lock()
                .unwrap()
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!(
                    "postgres on port {} exited at start ({status}); log:\n{}",
                    self.port,
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "postgres on port {} did not accept connections within 30 s; log:\n{}",
            self.port,
            self.log()
        );
    }

    fn accepts_queries(&self) -> bool {
        self.psql("SELECT 1").is_ok_and(|out| out.status.success())
    }

    /// The server's log so far, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("postgres.log")).unwrap_or_default()
    }

    /// The loopback port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `postgresql://postgres:PASSWORD@127.0.0.1:PORT/postgres`: the superuser.
    pub fn url(&self) -> String {
        self.url_for(SUPERUSER, SUPERUSER_PASSWORD)
    }

    /// The superuser's URL through another loopback port, such as a
    /// [`crate::FaultProxy`] in front of this server.
    pub fn url_via(&self, port: u16) -> String {
        format!("postgresql://{SUPERUSER}:{SUPERUSER_PASSWORD}@127.0.0.1:{port}/postgres")
    }

    /// The URL of another role of this server (see [`PostgresNode::sql`] to make one).
    pub fn url_for(&self, user: &str, password: &str) -> String {
        format!("postgresql://{user}:{password}@127.0.0.1:{}/postgres", self.port)
    }

    /// The process id, while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.lock().unwrap().as_ref().map(Child::id)
    }

    fn psql(&self, sql: &str) -> std::io::Result<Output> {
        Command::new(postgres_bin_dir().join("psql"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                SUPERUSER,
                "-d",
                "postgres",
            ])
            .args(["-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1", "-c", sql])
            .env("PGPASSWORD", SUPERUSER_PASSWORD)
            .env("PGCONNECT_TIMEOUT", "5")
            // psql's own lines (notifications) in English, as tests read them.
            .env_remove("LC_ALL")
            .env("LC_MESSAGES", "C")
            .stdin(Stdio::null())
            .output()
    }

    /// Runs `sql` as the superuser and returns what it printed (unaligned,
    /// tuples only: one row per line, `|` between columns). Panics with the
    /// server's message on failure.
    pub fn sql(&self, sql: &str) -> String {
        let output = self.psql(sql).unwrap_or_else(|e| panic!("cannot run psql: {e}"));
        assert!(
            output.status.success(),
            "{sql:?} on port {} failed: {}",
            self.port,
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim_end().to_owned()
    }

    /// Runs `sql` as the superuser; the server's error message on failure.
    pub fn try_sql(&self, sql: &str) -> Result<String, String> {
        let output = self.psql(sql).map_err(|e| e.to_string())?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).trim_end().to_owned())
        } else {
            Err(String::from_utf8_lossy(&output.stderr).into_owned())
        }
    }

    /// Sends SIGKILL and reaps the process: a crash (the server recovers
    /// from its WAL at the next start).
    pub fn kill(&self) {
        if let Some(mut child) = self.child.lock().unwrap().take() {
            signal(&child, libc::SIGCONT);
            let _ = child.kill();
            let _ = child.wait();
            // The postmaster's children notice its death and exit on their own.
        }
    }

    /// A fast shutdown (SIGINT: sessions are ended, the WAL flushed), then
    /// a start on the same port and data directory.
    pub fn restart(&self) {
        if let Some(mut child) = self.child.lock().unwrap().take() {
            signal(&child, libc::SIGINT);
            let _ = child.wait();
        }
        self.launch();
        self.wait_ready();
    }

    /// SIGSTOP to the postmaster only: new connections hang; sessions
    /// already open (their own backends) still answer.
    pub fn pause(&self) {
        if let Some(child) = self.child.lock().unwrap().as_ref() {
            signal(child, libc::SIGSTOP);
        }
    }

    /// SIGCONT after [`PostgresNode::pause`].
    pub fn resume(&self) {
        if let Some(child) = self.child.lock().unwrap().as_ref() {
            signal(child, libc::SIGCONT);
        }
    }
}

impl Drop for PostgresNode {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl std::fmt::Debug for PostgresNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresNode")
            .field("port", &self.port)
            .field("pid", &self.pid())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_starts_answers_restarts_and_stops_by_pid() {
        let node = PostgresNode::start();
        let other = PostgresNode::start();
        assert_ne!(node.port(), other.port());
        node.sql("CREATE TABLE t (v int); INSERT INTO t VALUES (41)");
        assert_eq!(node.sql("SELECT v + 1 FROM t"), "42");
        assert!(
            other
                .try_sql("SELECT v FROM t")
                .unwrap_err()
                .contains("does not exist")
        );
        node.restart();
        assert_eq!(
            node.sql("SELECT v FROM t"),
            "41",
            "committed rows survive a restart"
        );
        let pid = node.pid().unwrap();
        node.kill();
        // SAFETY: kill with signal 0 only checks that the process exists.
        assert_ne!(
            unsafe { libc::kill(pid as libc::pid_t, 0) },
            0,
            "the postmaster is gone"
        );
        assert!(node.try_sql("SELECT 1").is_err());
    }
}

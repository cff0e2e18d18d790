//! One `redis-server` child process.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How a node is started.
#[derive(Clone, Debug, Default)]
pub struct NodeOptions {
    /// Append-only file with `appendfsync always`: keys and fencing counters survive a restart.
    pub aof: bool,
    /// Extra `redis-server` arguments, e.g. `["--maxmemory", "4mb"]`. They
    /// come last, so they override the harness's own settings (e.g.
    /// `["--tls-auth-clients", "yes"]` or `["--tls-protocols", "TLSv1.3"]`).
    pub extra_args: Vec<String>,
    /// Run with `cluster-enabled yes` (used by [`crate::RedisCluster`]).
    pub cluster: bool,
    /// Also listen with TLS on a second port ([`RedisNode::tls_port`]); the
    /// plain port stays for the harness's own readiness checks.
    pub tls: Option<TlsFiles>,
    /// The server program: `redis-server` when `None`, or another that
    /// takes its arguments, such as [`valkey_server_path`]'s.
    pub server: Option<PathBuf>,
}

/// The variable that names a `valkey-server` for the tests of what only
/// servers with `SET … IFEQ` do (scripts/valkey-server.sh builds one).
pub const VALKEY_SERVER_VAR: &str = "FENCELOCK_VALKEY_SERVER";

/// The `valkey-server` that [`VALKEY_SERVER_VAR`] names, else the one on
/// PATH, if it has `SET … IFEQ` (8.1 or later); otherwise why not (for a
/// skipped test to print). A server the variable names that is not one
/// panics instead: scripts/test.sh sets it, and its tests must not skip.
pub fn valkey_server_path() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(VALKEY_SERVER_VAR) {
        let path = PathBuf::from(path);
        return Ok(valkey_with_ifeq(&path)
            .map(|()| path)
            .unwrap_or_else(|why| panic!("{VALKEY_SERVER_VAR}: {why}")));
    }
    let path = program_on_path("valkey-server").ok_or_else(|| {
        format!(
            "no valkey-server: set {VALKEY_SERVER_VAR} or put one on PATH \
             (scripts/valkey-server.sh builds one; scripts/test.sh does it for you)"
        )
    })?;
    valkey_with_ifeq(&path).map(|()| path)
}

/// Whether the program at `path` says it is Valkey 8.1 or later.
fn valkey_with_ifeq(path: &Path) -> Result<(), String> {
    let said = Command::new(path)
        .arg("--version")
        .output()
        .map_err(|e| format!("{} --version: {e}", path.display()))?;
    let said = String::from_utf8_lossy(&said.stdout);
    match server_version(&said) {
        Some(version) if version >= (8, 1) => Ok(()),
        _ => Err(format!(
            "{} is not Valkey 8.1 or later (it says {:?}); SET … IFEQ came in 8.1",
            path.display(),
            said.trim()
        )),
    }
}

/// `(major, minor)` from `valkey-server --version` (`… v=8.1.1 …`).
fn server_version(said: &str) -> Option<(u32, u32)> {
    let version = said.split_whitespace().find_map(|word| word.strip_prefix("v="))?;
    let mut parts = version.split('.').map(str::parse::<u32>);
    Some((parts.next()?.ok()?, parts.next()?.ok()?))
}

fn program_on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// PEM files for a TLS listener.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// The server certificate.
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
    /// The CA that signed client certificates (not required unless
    /// [`NodeOptions::extra_args`] say `--tls-auth-clients yes`).
    pub ca: PathBuf,
}

/// A running (or stopped) `redis-server` owned by this process.
pub struct RedisNode {
    port: u16,
    tls_port: Option<u16>,
    dir: PathBuf,
    options: NodeOptions,
    child: Mutex<Option<Child>>,
}

static NEXT_DIR: AtomicU64 = AtomicU64::new(0);

/// Where `redis-server` is, or a panic that says how to install it.
pub fn redis_server_path() -> PathBuf {
    program_on_path("redis-server").unwrap_or_else(|| {
        panic!(
            "redis-server is not on PATH. The tests run real Redis nodes: install them with \
             `sudo apt-get install -y redis-server` (Debian/Ubuntu) or run ./scripts/test.sh, \
             which does it for you."
        )
    })
}

impl RedisNode {
    /// Starts one node and waits until it answers PING.
    pub fn start(options: &NodeOptions) -> RedisNode {
        let node = RedisNode::spawn(options.clone());
        node.wait_ready();
        node
    }

    /// Starts `n` nodes at once (processes spawned together, then awaited),
    /// which is much faster than starting them one by one.
    pub fn start_many(n: usize, options: &NodeOptions) -> Vec<RedisNode> {
        let nodes: Vec<RedisNode> = (0..n).map(|_| RedisNode::spawn(options.clone())).collect();
        for node in &nodes {
            node.wait_ready();
        }
        nodes
    }

    /// Starts one node per entry of `options`, all at once like
    /// [`RedisNode::start_many`]. Spawned from the calling thread on purpose:
    /// a node dies with the thread that spawned it (`PR_SET_PDEATHSIG`), so
    /// do not start nodes from short-lived threads.
    pub fn start_each(options: &[NodeOptions]) -> Vec<RedisNode> {
        let nodes: Vec<RedisNode> = options.iter().cloned().map(RedisNode::spawn).collect();
        for node in &nodes {
            node.wait_ready();
        }
        nodes
    }

    fn spawn(options: NodeOptions) -> RedisNode {
        let dir = std::env::temp_dir().join(format!(
            "fencelock-redis-{}-{}",
            std::process::id(),
            NEXT_DIR.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("create a temporary directory for redis-server");
        let node = RedisNode {
            port: free_port(),
            tls_port: options.tls.as_ref().map(|_| free_port()),
            dir,
            options,
            child: Mutex::new(None),
        };
        node.launch();
        node
    }

    fn launch(&self) {
        let program = self.options.server.clone().unwrap_or_else(redis_server_path);
        let mut command = Command::new(program);
        command
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--daemonize", "no", "--protected-mode", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .arg("--logfile")
            .arg(self.dir.join("redis.log"))
            .args(if self.options.aof {
                ["--appendonly", "yes", "--appendfsync", "always"]
            } else {
                ["--appendonly", "no", "--appendfsync", "everysec"]
            })
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let (Some(tls), Some(port)) = (&self.options.tls, self.tls_port) {
            command
                .args(["--tls-port", &port.to_string(), "--tls-auth-clients", "no"])
                .arg("--tls-cert-file")
                .arg(&tls.cert)
                .arg("--tls-key-file")
                .arg(&tls.key)
                .arg("--tls-ca-cert-file")
                .arg(&tls.ca);
        }
        if self.options.cluster {
            command
                .args(["--cluster-enabled", "yes", "--cluster-node-timeout", "5000"])
                .arg("--cluster-config-file")
                .arg(self.dir.join("nodes.conf"));
        }
        // Last: a later directive overrides an earlier one.
        command.args(&self.options.extra_args);
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
            .unwrap_or_else(|e| panic!("cannot start redis-server: {e}"));
        *self.child.lock().unwrap() = Some(child);
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.ping() {
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
                    "redis-server on port {} exited at start ({status}); log:\n{}",
                    self.port,
                    std::fs::read_to_string(self.dir.join("redis.log")).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        panic!(
            "redis-server on port {} did not answer PING within 10 s",
            self.port
        );
    }

    fn ping(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect((Ipv4Addr::LOCALHOST, self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
        let mut reply = [0u8; 7];
        stream.write_all(b"PING\r\n").is_ok()
            && stream.read_exact(&mut reply).is_ok()
            && &reply == b"+PONG\r\n"
    }

    /// The loopback port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The TLS port, when started with [`NodeOptions::tls`].
    pub fn tls_port(&self) -> Option<u16> {
        self.tls_port
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The process id, while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.lock().unwrap().as_ref().map(Child::id)
    }

    /// The node's data directory (AOF, log).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Sends SIGKILL and reaps the process: a crash.
    pub fn kill(&self) {
        if let Some(mut child) = self.child.lock().unwrap().take() {
            // SIGCONT first: a stopped process still dies on SIGKILL, but be explicit.
            signal(&child, libc::SIGCONT);
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port and directory (with AOF, keys survive).
    pub fn restart(&self) {
        self.kill();
        self.launch();
        self.wait_ready();
    }

    /// SIGSTOP: the node keeps its sockets but answers nothing.
    pub fn pause(&self) {
        if let Some(child) = self.child.lock().unwrap().as_ref() {
            signal(child, libc::SIGSTOP);
        }
    }

    /// SIGCONT after [`RedisNode::pause`].
    pub fn resume(&self) {
        if let Some(child) = self.child.lock().unwrap().as_ref() {
            signal(child, libc::SIGCONT);
        }
    }

    /// A plain synchronous connection, for assertions and fault injection.
    pub fn connection(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
            .unwrap_or_else(|e| panic!("cannot connect to {}: {e}", self.url()))
    }

    /// Runs one command and returns its reply.
    pub fn command(&self, args: &[&str]) -> redis::Value {
        let mut cmd = redis::cmd(args[0]);
        for arg in &args[1..] {
            cmd.arg(*arg);
        }
        cmd.query(&mut self.connection())
            .unwrap_or_else(|e| panic!("{args:?} on {} failed: {e}", self.url()))
    }

    /// Calls from `INFO commandstats` for one command, e.g. `"pexpire"`.
    pub fn command_calls(&self, command: &str) -> u64 {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut self.connection())
            .expect("INFO commandstats");
        command_calls_in(&info, command)
    }
}

/// The calls of one command (e.g. `"publish"`) in the text of an
/// `INFO commandstats` reply; 0 when it was never called.
pub fn command_calls_in(info: &str, command: &str) -> u64 {
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

pub(crate) fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: kill(2) on the PID of a child we spawned and have not reaped.
    unsafe {
        libc::kill(child.id() as libc::pid_t, sig);
    }
}

/// A port the kernel just handed out on 127.0.0.1, never one this process
/// handed out before: the listener is closed before redis-server binds the
/// port, so the kernel may offer it again, and two nodes started together
/// would then share it (one answering for both). Another process could take
/// it meanwhile; `wait_ready` then fails loudly rather than talking to a
/// stranger, since the child would have exited.
pub(crate) fn free_port() -> u16 {
    static HANDED_OUT: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|listener| listener.local_addr())
            .map(|addr| addr.port())
            .expect("bind an ephemeral loopback port");
        if !handed_out.contains(&port) {
            handed_out.push(port);
            return port;
        }
    }
}

impl Drop for RedisNode {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl std::fmt::Debug for RedisNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisNode")
            .field("port", &self.port)
            .field("pid", &self.pid())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::server_version;

    #[test]
    fn a_server_version_is_read_from_its_version_line() {
        let said = "Valkey server v=8.1.1 sha=00000000:0 malloc=libc bits=64 build=a40f79e074907b06";
        assert_eq!(server_version(said), Some((8, 1)));
        assert_eq!(server_version("Valkey server v=10.0.2 sha=0"), Some((10, 0)));
        assert_eq!(server_version("no version here"), None);
        assert_eq!(server_version("v=x.1"), None);
    }
}

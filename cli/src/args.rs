//! The command line, as clap parses it.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// The variable naming the nodes (its URLs may carry passwords).
pub const NODES_VAR: &str = "FENCELOCK_NODES";
/// The variable with the ACL user name.
pub const USERNAME_VAR: &str = "FENCELOCK_USERNAME";
/// The variable with the ACL password.
pub const PASSWORD_VAR: &str = "FENCELOCK_PASSWORD";
/// The variable naming the password file.
pub const PASSWORD_FILE_VAR: &str = "FENCELOCK_PASSWORD_FILE";

/// Every connection setting fencelock reads from the environment. None of
/// them is passed on to the command: they carry credentials (or say where
/// they are), and the command has no business with fencelock's own.
pub const CONNECTION_VARS: [&str; 4] = [NODES_VAR, USERNAME_VAR, PASSWORD_VAR, PASSWORD_FILE_VAR];

/// Run a command while holding a distributed lock over Redis or while leading an election,
/// follow an election, or inspect a lock.
///
/// Every `fencelock` — and every program using the fencelock libraries for
/// Rust, C, Python, Node or .NET — that names the same RESOURCE on the same
/// Redis nodes contends for the same lock.
#[derive(Debug, Parser)]
#[command(
    name = "fencelock",
    version,
    after_help = "EXAMPLES:\n  \
      # run the nightly report on one machine only, whichever gets there first\n  \
      */5 * * * * fencelock --node redis://10.0.0.5:6379 run --wait 0 nightly-report -- ./report.sh\n\n  \
      # Redlock over three independent masters, waiting up to 30s for the lock\n  \
      FENCELOCK_NODES=redis://a:6379,redis://b:6379,redis://c:6379 fencelock run --wait 30s db-migrate -- ./migrate\n\n  \
      # run the scheduler on the elected leader only; its replacement starts ~10s after it dies\n  \
      fencelock --node redis://127.0.0.1:6379 elect --ttl 10s --value \"$(hostname)\" scheduler -- ./scheduler\n\n  \
      # who leads, now and from now on?\n  \
      fencelock --node redis://127.0.0.1:6379 observe scheduler\n\n  \
      # who holds it, and who waits?\n  \
      fencelock --node redis://127.0.0.1:6379 inspect nightly-report\n\n  \
      # the busiest locks of the prefix, live\n  \
      fencelock --node redis://127.0.0.1:6379 top --match 'jobs:*'\n\n\
      EXIT CODES (run, elect):\n  \
      the command's own exit code, or 128+N if it died of signal N (or if fencelock\n  \
      got INT, TERM, HUP or QUIT while waiting for the lock: the command was not run)\n  \
      2    bad arguments or configuration\n  \
      69   Redis unavailable: too few nodes answered, or they refused our credentials/TLS\n  \
      75   not acquired: another owner held the lock (or led) for all of --wait\n  \
      76   lock or leadership lost while the command ran: the command was sent SIGTERM (SIGKILL after --grace)\n  \
      126  the command could not be executed\n  \
      127  the command was not found\n\n\
      ENVIRONMENT:\n  \
      FENCELOCK_WORKER_THREADS  worker threads of fencelock's runtime (default 1, at most 64)"
)]
pub struct Cli {
    #[command(flatten)]
    pub connection: Connection,

    /// More logging on stderr: -v for each lock event, -vv for every Redis round trip.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,

    #[command(subcommand)]
    pub command: Command,
}

/// Where the Redis nodes are and how to reach them.
#[derive(Debug, Args)]
pub struct Connection {
    /// A Redis node: redis://[user@]host:port[/db], rediss:// for TLS. Repeat for Redlock (use
    /// 3 or 5 independent masters). A password in the URL (user:password@) is visible to other
    /// users in `ps`: use --password-file, or give the URLs in FENCELOCK_NODES.
    #[arg(
        long = "node",
        value_name = "URL",
        env = NODES_VAR,
        // Its URLs may carry passwords: `--help` must not print them.
        hide_env_values = true,
        value_delimiter = ',',
        value_parser = node_url,
        global = true
    )]
    pub nodes: Vec<NodeUrl>,

    /// Prefix of every key this lock uses; every program sharing the lock must use the same.
    #[arg(long, value_name = "PREFIX", default_value = fencelock::DEFAULT_PREFIX, global = true)]
    pub key_prefix: String,

    /// Hard limit on each request to one node.
    #[arg(long, value_name = "DURATION", default_value = "100ms", value_parser = duration, global = true)]
    pub node_timeout: Duration,

    /// Limit on opening a connection to a node (TCP, TLS, authentication, script preload);
    /// raise it for slow links.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = duration, global = true)]
    pub connect_timeout: Duration,

    /// Refuse nodes that do not run AOF (appendonly yes): without it a restarted node forgets
    /// its fencing counters and tokens may repeat. Such nodes are otherwise only warned about.
    #[arg(long, global = true)]
    pub require_aof: bool,

    /// ACL user name (overrides the URL's).
    #[arg(long, value_name = "USER", env = USERNAME_VAR, global = true)]
    pub username: Option<String>,

    /// ACL password (overrides the URL's). On the command line it is visible to other users in
    /// `ps`: prefer --password-file or the environment variable.
    #[arg(
        long,
        value_name = "PASSWORD",
        env = PASSWORD_VAR,
        hide_env_values = true,
        value_parser = secret,
        global = true
    )]
    pub password: Option<Secret>,

    /// Read the ACL password from the first line of FILE (overrides the URL's).
    #[arg(
        long,
        value_name = "FILE",
        env = PASSWORD_FILE_VAR,
        conflicts_with = "password",
        global = true
    )]
    pub password_file: Option<PathBuf>,

    /// PEM file of the CA that signed the nodes' TLS certificates (default: the Mozilla roots).
    #[arg(long, value_name = "FILE", global = true)]
    pub tls_ca: Option<PathBuf>,

    /// PEM client certificate (chain), for nodes that require one; needs --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key", global = true)]
    pub tls_cert: Option<PathBuf>,

    /// PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert", global = true)]
    pub tls_key: Option<PathBuf>,

    /// Oldest TLS version accepted from rediss:// nodes (TLS 1.0 and 1.1 are never spoken).
    #[arg(
        long,
        value_name = "VERSION",
        value_enum,
        default_value = "1.2",
        global = true
    )]
    pub tls_min_version: TlsMinVersion,
}

/// A `--tls-min-version` value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TlsMinVersion {
    /// TLS 1.2 and 1.3.
    #[value(name = "1.2")]
    V1_2,
    /// TLS 1.3 only.
    #[value(name = "1.3")]
    V1_3,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Acquire the lock, run CMD while keeping it renewed, release it when CMD exits.
    ///
    /// CMD gets FENCELOCK_RESOURCE, FENCELOCK_TOKEN (the fencing token: pass it
    /// to the storage you write, so a stale holder's writes can be refused) and
    /// FENCELOCK_FENCE (token:holder, the token with this grant's holder id, for
    /// storage that must tell two holders of an equal token apart), with --permits
    /// FENCELOCK_PERMIT (which permit, from 0), and
    /// none of fencelock's connection variables (FENCELOCK_NODES, FENCELOCK_USERNAME,
    /// FENCELOCK_PASSWORD, FENCELOCK_PASSWORD_FILE).
    ///
    /// Signals: INT, TERM, HUP, QUIT, USR1 and USR2 sent to fencelock are forwarded to
    /// CMD's process group (while waiting for the lock, INT, TERM, HUP and QUIT cancel
    /// the wait; USR1 and USR2 are delivered once CMD starts). A signal ignored when
    /// fencelock starts (nohup) stays ignored, for CMD too.
    ///
    /// Job control: run from a terminal's foreground, CMD gets the foreground, so it can
    /// read the terminal and gets Ctrl-C, Ctrl-\ and Ctrl-Z directly, once. When CMD
    /// stops (Ctrl-Z, SIGTSTP to fencelock), fencelock stops with it and renewals stop;
    /// `fg`, `bg` or SIGCONT resume both. If the lock's validity ran out meanwhile, or
    /// a renewal finds the lock gone, CMD is stopped as for any loss (exit code 76).
    ///
    /// On Linux, CMD is killed (SIGKILL) if fencelock dies without stopping it, even of
    /// SIGKILL, so it never runs on unlocked. This reaches CMD's first process only: a
    /// script should `exec` its last command. Other systems have no such signal.
    Run(RunArgs),
    /// Campaign to lead the election NAME, run CMD only while leader, resign when it exits.
    ///
    /// Waits in line until elected (or for --wait), announces --value to observers,
    /// then runs CMD exactly as `run` does: FENCELOCK_TOKEN is the leader's epoch (larger
    /// than every earlier leader's: pass it to what the leader writes), the leadership is
    /// renewed while CMD runs, and CMD is stopped (exit 76) if leadership is lost. When CMD
    /// exits, fencelock resigns and the next candidate in line leads at once.
    Elect(ElectArgs),
    /// Print the leader of the election NAME, then each new one, as `EPOCH VALUE` lines.
    ///
    /// New leaders arrive by push; runs until it is interrupted or killed.
    Observe(ObserveArgs),
    /// Show, per node, whether the lock is held, its remaining ttl, its fencing counter and
    /// its waiters.
    ///
    /// Exits 0 when a quorum of nodes answered, 69 otherwise. Never shows the owner's token.
    #[command(visible_alias = "status")]
    Inspect(InspectArgs),
    /// A refreshing view of the busiest locks under the prefix: held or not, ttl, waiters,
    /// grants per second.
    ///
    /// On a terminal it redraws every --interval until q, Esc or Ctrl-C; otherwise (or with
    /// --iterations) it prints one frame after another. Lists the locks with SCAN (the ACL
    /// user needs +scan), which a Redis Cluster node cannot answer: name the locks to watch
    /// there. Semaphores and read-write locks are not listed.
    Top(TopArgs),
    /// Install or upgrade fencelock's tables and functions on a PostgreSQL node.
    ///
    /// Run it with a role that may create them (CREATE on the database, or on the schema
    /// named by the URL's fencelock_schema parameter); the applications' role then needs only
    /// the privileges in docs/postgres-store.md. A client also installs them on first use when
    /// they are missing. Redis nodes have nothing to install.
    Migrate,
}

/// `fencelock elect`.
#[derive(Debug, Args)]
pub struct ElectArgs {
    /// The leader's lease on Redis; renewed every ttl/3 while CMD runs. A leader that dies
    /// is replaced about one ttl later.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = duration)]
    pub ttl: Duration,

    /// How long to wait to be elected (default: until elected).
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub wait: Option<Duration>,

    /// What observers learn about this leader (an address, an id).
    #[arg(long, value_name = "TEXT", default_value = "")]
    pub value: String,

    /// After leadership is lost: how long CMD has between SIGTERM and SIGKILL.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration)]
    pub grace: Duration,

    /// The name of the election.
    pub name: String,

    /// The command to run while leader, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// `fencelock observe`.
#[derive(Debug, Args)]
pub struct ObserveArgs {
    /// The name of the election.
    pub name: String,
}

/// `fencelock run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// How long the lock lives on Redis without renewal; it is renewed every ttl/3 while CMD runs.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = duration)]
    pub ttl: Duration,

    /// How long to wait for the lock while someone else holds it (0: one attempt).
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = duration)]
    pub wait: Duration,

    /// Wait in line: never take the lock ahead of an earlier waiter, even when it is free
    /// at the moment fencelock asks (without it, waiters are still woken in arrival order,
    /// but a newcomer may take a free lock).
    #[arg(long)]
    pub fair: bool,

    /// Take one of N permits of the semaphore RESOURCE instead of its lock, so that up to
    /// N commands run at once (every run of RESOURCE must give the same N; 1 to 256). CMD
    /// gets the permit's number, from 0, in FENCELOCK_PERMIT.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=i64::from(fencelock::MAX_PERMITS)))]
    pub permits: Option<u32>,

    /// Take the read-write lock RESOURCE for reading: any number of --read runs of
    /// RESOURCE run at once, but none beside a --write run (a --write run waiting keeps
    /// later --read runs out, so writers are not starved).
    #[arg(long, conflicts_with_all = ["permits", "write"])]
    pub read: bool,

    /// Take the read-write lock RESOURCE for writing: alone, with no --read or other
    /// --write run of RESOURCE.
    #[arg(long, conflicts_with = "permits")]
    pub write: bool,

    /// Serve this client's metrics (acquisitions, failures, losses, renewals, held,
    /// waiting, acquire latency) in the Prometheus text format at
    /// http://HOST:PORT/metrics while fencelock runs; port 0 picks a free port (the
    /// address is printed on stderr).
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_addr: Option<String>,

    /// After the lock is lost: how long CMD has between SIGTERM and SIGKILL.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration)]
    pub grace: Duration,

    /// The name of the lock.
    pub resource: String,

    /// The command to run, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// `fencelock top`.
#[derive(Debug, Args)]
pub struct TopArgs {
    /// Show the locks whose name matches this Redis glob (`*`, `?`, `[abc]`, `\\` escapes).
    #[arg(long = "match", value_name = "GLOB", default_value = "*")]
    pub matching: String,

    /// Redraw every DURATION (at least 100ms).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = refresh_interval)]
    pub interval: Duration,

    /// Show at most N locks, the busiest first.
    #[arg(long, value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u16).range(1..))]
    pub limit: u16,

    /// Print N frames one after another, without redrawing, then exit.
    #[arg(long, short = 'n', value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub iterations: Option<u64>,

    /// Watch these locks instead of listing the prefix's (on a Redis Cluster node, name them).
    #[arg(value_name = "RESOURCE")]
    pub resources: Vec<String>,
}

/// `fencelock inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,

    /// The name of the lock.
    pub resource: String,
}

/// A password: never shown by `Debug`, so it cannot reach a log or message
/// through a derived `Debug` of the command line.
#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    /// Wraps a password.
    pub fn new(value: String) -> Secret {
        Secret(value)
    }

    /// The password itself, for the client builder only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

fn secret(text: &str) -> Result<Secret, String> {
    Ok(Secret(text.to_owned()))
}

/// A node URL as given. `Debug` shows it without its password.
#[derive(Clone)]
pub struct NodeUrl(String);

impl NodeUrl {
    /// The URL as given, password included, for the client builder only.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the URL carries a password (`scheme://user:password@host`).
    pub fn has_password(&self) -> bool {
        userinfo(&self.0).is_some_and(|userinfo| userinfo.contains(':'))
    }

    /// The URL with everything between `://` and `@` replaced by `***`.
    pub fn redacted(&self) -> String {
        match userinfo(&self.0) {
            Some(userinfo) => self.0.replacen(userinfo, "***", 1),
            None => self.0.clone(),
        }
    }
}

/// The `user:password` part of a URL, if it has one. Done by hand rather than
/// with a URL parser, so that a URL too broken to parse is still redacted.
fn userinfo(url: &str) -> Option<&str> {
    let rest = &url[url.find("://")? + 3..];
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    Some(&authority[..authority.rfind('@')?])
}

impl fmt::Debug for NodeUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.redacted())
    }
}

fn node_url(text: &str) -> Result<NodeUrl, String> {
    Ok(NodeUrl(text.trim().to_owned()))
}

/// Parses `10s`, `500ms`, `2m`, `1h30m`; a bare number is seconds.
/// `top --interval`: a duration of at least 100 ms, so top cannot flood the nodes.
fn refresh_interval(text: &str) -> Result<Duration, String> {
    let interval = duration(text)?;
    if interval < Duration::from_millis(100) {
        return Err(format!("{text:?} is too short: refresh at most every 100ms"));
    }
    Ok(interval)
}

fn duration(text: &str) -> Result<Duration, String> {
    if let Ok(seconds) = text.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds)
            .map_err(|_| format!("{text:?} is not a valid number of seconds"));
    }
    humantime::parse_duration(text)
        .map_err(|e| format!("{text:?} is not a duration ({e}); write e.g. 10s, 500ms, 2m"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn debug_output_never_shows_a_password() {
        let cli = Cli::try_parse_from([
            "fencelock",
            "--node",
            "redis://alice:hunter2@127.0.0.1:1",
            "--node",
            "redis://:pw@broken@host:1/0",
            "--password",
            "correct-horse",
            "status",
            "x",
        ])
        .expect("valid arguments");
        let shown = format!("{cli:?}");
        for secret in ["hunter2", "correct-horse", ":pw"] {
            assert!(!shown.contains(secret), "{shown}");
        }
        assert!(shown.contains("127.0.0.1:1"), "{shown}");
    }

    #[test]
    fn passwords_in_urls_are_found() {
        let url = |s: &str| NodeUrl(s.to_owned());
        assert!(url("redis://alice:pw@h:1").has_password());
        assert!(url("rediss://:pw@h:1/2").has_password());
        assert!(!url("redis://alice@h:1").has_password());
        assert!(!url("redis://h:1/0?x=a@b").has_password());
        assert_eq!(url("redis://a:b@c@h:1/0").redacted(), "redis://***@h:1/0");
    }

    #[test]
    fn durations_read_like_people_write_them() {
        assert_eq!(duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(duration("1.5"), Ok(Duration::from_millis(1500)));
        assert!(duration("-1").is_err());
        assert!(duration("soon").unwrap_err().contains("10s"));
    }
}

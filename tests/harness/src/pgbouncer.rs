//! PgBouncer in transaction pooling mode, in front of a harness PostgreSQL
//! server: the pooler production deployments put between applications and
//! the database, for the PostgreSQL store's tests.

use std::net::{Ipv4Addr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::postgres::{PostgresNode, SUPERUSER, SUPERUSER_PASSWORD, as_server_user, hand_over, scratch_dir};
use crate::process::free_port;

/// A PgBouncer in transaction pooling mode in front of a [`PostgresNode`]:
/// every transaction may run on a different server session, as behind the
/// poolers production deployments use.
pub struct PgBouncer {
    port: u16,
    dir: PathBuf,
    child: Mutex<Option<Child>>,
}

/// Where `pgbouncer` is (Debian puts it in /usr/sbin), if installed.
pub fn pgbouncer_path() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join("pgbouncer"));
    on_path
        .chain([PathBuf::from("/usr/sbin/pgbouncer")])
        .find(|candidate| candidate.is_file())
}

impl PgBouncer {
    /// Starts PgBouncer (transaction pooling) in front of `server` for its
    /// superuser; `None` when PgBouncer is not installed.
    pub fn start(server: &PostgresNode) -> Option<PgBouncer> {
        let program = pgbouncer_path()?;
        let dir = scratch_dir("pgbouncer");
        let port = free_port();
        std::fs::write(
            dir.join("userlist.txt"),
            format!("\"{SUPERUSER}\" \"{SUPERUSER_PASSWORD}\"\n"),
        )
        .expect("write the user list");
        std::fs::write(
            dir.join("pgbouncer.ini"),
            format!(
                "[databases]\npostgres = host=127.0.0.1 port={} dbname=postgres\n\n\
                 [pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n\
                 auth_type = scram-sha-256\nauth_file = {}\npool_mode = transaction\n\
                 default_pool_size = 4\nmax_client_conn = 200\nlogfile = {}\npidfile =\n\
                 ignore_startup_parameters = extra_float_digits,application_name\n",
                server.port(),
                dir.join("userlist.txt").display(),
                dir.join("pgbouncer.log").display(),
            ),
        )
        .expect("write pgbouncer.ini");
        hand_over(&dir);
        let mut command = Command::new(program);
        as_server_user(&mut command)
            .arg(dir.join("pgbouncer.ini"))
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: only async-signal-safe prctl is called between fork and exec.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = command.spawn().expect("start pgbouncer");
        let bouncer = PgBouncer {
            port,
            dir,
            child: Mutex::new(Some(child)),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "pgbouncer did not listen within 10 s; log:\n{}",
                std::fs::read_to_string(bouncer.dir.join("pgbouncer.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(bouncer)
    }

    /// The superuser's URL through the pooler.
    pub fn url(&self) -> String {
        format!(
            "postgresql://{SUPERUSER}:{SUPERUSER_PASSWORD}@127.0.0.1:{}/postgres",
            self.port
        )
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.lock().unwrap().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

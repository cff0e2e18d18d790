//! TLS through rustls: a private CA, host-name verification, no plaintext
//! fallback, client certificates, TLS versions (T24 of docs/reliability.md).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use common::*;
use fencelock::{Client, ClientBuilder, ErrorKind, LockOptions, TlsVersion};
use fencelock_harness::{PostgresNode, TlsFiles};

/// Makes the CA `ca` (once per directory) and a certificate `name` for `san`
/// signed by it (a server's or a client's), and returns the files. None when
/// the openssl command is missing (the caller prints why it skips).
fn make_certs(dir: &Path, name: &str, san: &str, ca: &str) -> Option<TlsFiles> {
    let run = |args: &[&str]| {
        let status = Command::new("openssl").args(args).current_dir(dir).output();
        match status {
            Ok(out) if out.status.success() => Some(()),
            Ok(out) => panic!(
                "openssl {args:?} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ),
            Err(_) => None,
        }
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    if !dir.join(format!("{ca}.crt")).exists() {
        let (key, crt, subj) = (format!("{ca}.key"), format!("{ca}.crt"), format!("/CN={ca}"));
        let mut args = vec![
            "req", "-x509", "-days", "2", "-subj", &subj, "-keyout", &key, "-out", &crt,
        ];
        args.extend(ec);
        run(&args)?;
    }
    let (key, csr, crt) = (
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.crt"),
    );
    let mut args = vec!["req", "-subj", "/CN=redis-test", "-keyout", &key, "-out", &csr];
    args.extend(ec);
    run(&args)?;
    std::fs::write(dir.join(format!("{name}.ext")), format!("subjectAltName={san}\n")).unwrap();
    let (ca_crt, ca_key, ext) = (format!("{ca}.crt"), format!("{ca}.key"), format!("{name}.ext"));
    run(&[
        "x509",
        "-req",
        "-days",
        "2",
        "-in",
        &csr,
        "-CA",
        &ca_crt,
        "-CAkey",
        &ca_key,
        "-CAcreateserial",
        "-out",
        &crt,
        "-extfile",
        &ext,
    ])?;
    Some(TlsFiles {
        cert: dir.join(crt),
        key: dir.join(key),
        ca: dir.join(ca_crt),
    })
}

#[tokio::test]
async fn tls_verifies_the_ca_and_the_host_name_and_never_falls_back() {
    let dir = temp_dir("verify");
    let Some(good) = make_certs(&dir, "server", "DNS:localhost,IP:127.0.0.1", "ca") else {
        println!("SKIPPED: the openssl command is not installed (apt-get install openssl)");
        return;
    };
    let wrong_host = make_certs(&dir, "wrong", "DNS:wrong.example", "ca").unwrap();
    make_certs(&dir, "evil-server", "DNS:localhost", "evil-ca").unwrap();
    let ca_pem = std::fs::read(&good.ca).unwrap();
    let evil_ca_pem = std::fs::read(dir.join("evil-ca.crt")).unwrap();
    let nodes = RedisNode::start_each(&[tls_options(&good, &[]), tls_options(&wrong_host, &[])]);
    let (node, mismatched) = (&nodes[0], &nodes[1]);
    let url = |node: &RedisNode, host: &str| format!("rediss://{host}:{}", node.tls_port().unwrap());
    let tls_client = |url: String, ca: &[u8]| {
        Client::builder()
            .node(url)
            .tls_ca_pem(ca.to_vec())
            .node_timeout(GENEROUS_NODE_TIMEOUT)
            .connect_timeout(GENEROUS_NODE_TIMEOUT)
    };

    // Trusted CA, matching host name (DNS and IP SAN): works.
    for host in ["localhost", "127.0.0.1"] {
        let client = tls_client(url(node, host), &ca_pem).build().await.unwrap();
        let lock = client.acquire("tls", LockOptions::new(ms(1000))).await.unwrap();
        lock.release().await.unwrap();
    }
    // A CA we do not trust: refused, as a TLS error.
    let err = tls_client(url(node, "localhost"), &evil_ca_pem)
        .build()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Tls, "{err}");
    // Trusted CA but the certificate names another host: refused.
    let err = tls_client(url(mismatched, "localhost"), &ca_pem)
        .build()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Tls, "{err}");
    // Plaintext against the TLS port: the node counts as unreachable (the
    // build does not fail for that), no lock is taken over plaintext, and
    // the refusal comes within the timeouts, not after a hang.
    let started = Instant::now();
    let plain = Client::builder()
        .node(format!("redis://127.0.0.1:{}", node.tls_port().unwrap()))
        .node_timeout(ms(300))
        .connect_timeout(ms(500))
        .build()
        .await
        .unwrap();
    let err = plain
        .try_acquire("tls", LockOptions::new(ms(1000)))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    println!(
        "plaintext against the TLS port refused after {:?}: {err}",
        started.elapsed()
    );
    assert!(
        started.elapsed() < ms(500 + 300 + 2000),
        "{:?}",
        started.elapsed()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn tls_options(files: &TlsFiles, extra: &[&str]) -> NodeOptions {
    NodeOptions {
        tls: Some(files.clone()),
        extra_args: extra.iter().map(|s| s.to_string()).collect(),
        ..NodeOptions::default()
    }
}

/// A fresh directory for one test's certificates (tests may run in parallel).
fn temp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fencelock-tls-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn read_pem(files: &TlsFiles) -> (Vec<u8>, Vec<u8>) {
    (
        std::fs::read(&files.cert).unwrap(),
        std::fs::read(&files.key).unwrap(),
    )
}

/// A TLS client of one node, trusting `ca`, with generous timeouts: these
/// tests are about refusals, which come at once, not about timeouts.
fn client_of(node: &RedisNode, ca: &[u8]) -> ClientBuilder {
    Client::builder()
        .node(format!("rediss://127.0.0.1:{}", node.tls_port().unwrap()))
        .tls_ca_pem(ca.to_vec())
        .node_timeout(GENEROUS_NODE_TIMEOUT)
        .connect_timeout(GENEROUS_NODE_TIMEOUT)
}

async fn lock_and_release(client: ClientBuilder) {
    let client = client.build().await.expect("TLS client builds");
    let lock = client
        .acquire("tls", LockOptions::new(ms(1000)))
        .await
        .expect("acquire over TLS");
    lock.release().await.expect("release over TLS");
}

/// What a client that must be refused gets: the error of `build`, or (if the
/// build went through) of the first lock. Printed, with how long it took.
async fn refusal(client: ClientBuilder) -> fencelock::Error {
    let started = Instant::now();
    let err = match client.build().await {
        Err(err) => err,
        Ok(client) => client
            .try_acquire("tls", LockOptions::new(ms(1000)))
            .await
            .expect_err("a lock taken over a connection that should be refused"),
    };
    println!("refused after {:?} ({}): {err}", started.elapsed(), err.kind());
    // A refusal, not a hang until the (generous) timeouts.
    assert!(
        started.elapsed() < GENEROUS_NODE_TIMEOUT,
        "{:?}",
        started.elapsed()
    );
    err
}

/// T24, client certificates: a node with `tls-auth-clients yes` takes locks
/// from a client with a certificate signed by its CA, and refuses one without
/// a certificate (TLS 1.3: alert `CertificateRequired`; TLS 1.2: alert
/// `HandshakeFailure`) or with a certificate from another CA (`UnknownCA`),
/// as an `ErrorKind::Tls` error whose message names the client certificate.
/// With `tls-auth-clients optional`, a certificate is not needed.
#[tokio::test]
async fn tls_client_certificates_when_the_node_requires_them() {
    let dir = temp_dir("mtls");
    let Some(server) = make_certs(&dir, "server", "DNS:localhost,IP:127.0.0.1", "ca") else {
        println!("SKIPPED: the openssl command is not installed (apt-get install openssl)");
        return;
    };
    let (cert, key) = read_pem(&make_certs(&dir, "client", "DNS:fencelock-client", "ca").unwrap());
    let (evil_cert, evil_key) =
        read_pem(&make_certs(&dir, "evil-client", "DNS:fencelock-client", "evil-ca").unwrap());
    let ca_pem = std::fs::read(&server.ca).unwrap();
    let nodes = RedisNode::start_each(&[
        tls_options(&server, &["--tls-auth-clients", "yes"]),
        tls_options(
            &server,
            &["--tls-auth-clients", "yes", "--tls-protocols", "TLSv1.2"],
        ),
        tls_options(&server, &["--tls-auth-clients", "optional"]),
    ]);
    let (required, required_tls12, optional) = (&nodes[0], &nodes[1], &nodes[2]);

    for node in [required, required_tls12] {
        // With a certificate signed by the node's CA: locks work.
        lock_and_release(client_of(node, &ca_pem).tls_client_cert_pem(cert.clone(), key.clone())).await;
        // Without one, or with one from a CA the node does not trust: refused,
        // and the message says the client certificate is the problem.
        for client in [
            client_of(node, &ca_pem),
            client_of(node, &ca_pem).tls_client_cert_pem(evil_cert.clone(), evil_key.clone()),
        ] {
            let err = refusal(client).await;
            assert_eq!(err.kind(), ErrorKind::Tls, "{err}");
            assert!(err.to_string().contains("client certificate"), "{err}");
        }
    }
    // `tls-auth-clients optional`: with or without a certificate.
    lock_and_release(client_of(optional, &ca_pem)).await;
    lock_and_release(client_of(optional, &ca_pem).tls_client_cert_pem(cert, key)).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// T24, TLS versions: the client speaks TLS 1.3 and 1.2 by default (rustls
/// implements nothing older), so a TLS 1.3-only and a TLS 1.2-only node both
/// work, and a node limited to TLS 1.1 refuses the handshake (alert
/// `ProtocolVersion`): an `ErrorKind::Tls` error that names the node's
/// `tls-protocols`, not a node reported as unavailable. Raising the client's
/// minimum is `tls_min_version_1_3_refuses_a_tls_1_2_node`.
#[tokio::test]
async fn tls_versions_1_3_and_1_2_work_and_1_1_is_never_negotiated() {
    let dir = temp_dir("versions");
    let Some(server) = make_certs(&dir, "server", "DNS:localhost,IP:127.0.0.1", "ca") else {
        println!("SKIPPED: the openssl command is not installed (apt-get install openssl)");
        return;
    };
    let ca_pem = std::fs::read(&server.ca).unwrap();
    // TLS 1.1 needs the server's OpenSSL at security level 0 (OpenSSL 3 allows
    // it at no higher level); without that the node would refuse every
    // handshake itself and prove nothing about the client.
    let tls11 = [
        "--tls-protocols",
        "TLSv1.1",
        "--tls-ciphers",
        "DEFAULT:@SECLEVEL=0",
    ];
    let versions = [
        tls_options(&server, &["--tls-protocols", "TLSv1.3"]),
        tls_options(&server, &["--tls-protocols", "TLSv1.2"]),
        tls_options(&server, &tls11),
    ];
    let started = std::panic::catch_unwind(|| RedisNode::start_each(&versions));
    let nodes = started.unwrap_or_else(|_| {
        println!(
            "SKIPPED the TLS 1.1 part: redis-server would not start with {tls11:?} (see the panic above)"
        );
        RedisNode::start_each(&versions[..2])
    });

    // TLS 1.3 only, then TLS 1.2 only: both work.
    lock_and_release(client_of(&nodes[0], &ca_pem)).await;
    lock_and_release(client_of(&nodes[1], &ca_pem)).await;

    if let Some(node) = nodes.get(2) {
        // The node does speak TLS 1.1 (to OpenSSL's own client, when it can)...
        match openssl_ping_with_tls_1_1(node, &server.ca) {
            Ok(()) => println!("the TLS 1.1-only node answers OpenSSL's TLS 1.1 client"),
            Err(why) => println!("not checked that the node speaks TLS 1.1: {why}"),
        }
        // ...but fencelock never does: refused, as a TLS error.
        let err = refusal(client_of(node, &ca_pem)).await;
        assert_eq!(err.kind(), ErrorKind::Tls, "{err}");
        assert!(err.to_string().contains("tls-protocols"), "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `PING` over TLS 1.1 with `openssl s_client` (security level 0).
fn openssl_ping_with_tls_1_1(node: &RedisNode, ca: &Path) -> Result<(), String> {
    use std::io::Write;
    let mut child = Command::new("timeout")
        .args(["5", "openssl", "s_client", "-brief", "-ign_eof", "-tls1_1"])
        .args(["-cipher", "DEFAULT:@SECLEVEL=0", "-CAfile"])
        .arg(ca)
        .args(["-connect", &format!("127.0.0.1:{}", node.tls_port().unwrap())])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run openssl s_client: {e}"))?;
    let _ = child.stdin.take().unwrap().write_all(b"PING\r\nQUIT\r\n");
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    if stdout.contains("+PONG") && stderr.contains("Protocol version: TLSv1.1") {
        Ok(())
    } else {
        Err(format!("openssl s_client -tls1_1 said: {stdout} {stderr}"))
    }
}

/// T24, TLS 1.3 as the client's minimum (`ClientBuilder::tls_min_version`):
/// fencelock then does the handshake itself (redis-rs cannot be told the
/// versions) and must keep every promise redis-rs's TLS keeps: a TLS 1.3
/// node works, with a password and with a client certificate; a TLS
/// 1.2-only node, a host-name mismatch, an untrusted CA and a missing
/// client certificate are refused as `Tls`; a wrong password is `Auth`; and
/// a Redis Cluster node, whose TLS redis-rs owns, is a configuration error.
#[tokio::test]
async fn tls_min_version_1_3_refuses_a_tls_1_2_node() {
    let dir = temp_dir("min-version");
    let Some(server) = make_certs(&dir, "server", "DNS:localhost,IP:127.0.0.1", "ca") else {
        println!("SKIPPED: the openssl command is not installed (apt-get install openssl)");
        return;
    };
    let wrong_name = make_certs(&dir, "wrong", "DNS:wrong.example", "ca").unwrap();
    let (cert, key) = read_pem(&make_certs(&dir, "client", "DNS:fencelock-client", "ca").unwrap());
    let evil = make_certs(&dir, "evil", "DNS:localhost,IP:127.0.0.1", "evil-ca").unwrap();
    let ca_pem = std::fs::read(&server.ca).unwrap();
    let evil_ca_pem = std::fs::read(&evil.ca).unwrap();
    let nodes = RedisNode::start_each(&[
        tls_options(
            &server,
            // An ACL user (the default user stays open for the harness's PING).
            &[
                "--tls-protocols",
                "TLSv1.3",
                "--user",
                "tls-user",
                "on",
                ">tls-pass",
                "~*",
                "+@all",
            ],
        ),
        tls_options(&server, &["--tls-protocols", "TLSv1.2"]),
        tls_options(&server, &["--tls-auth-clients", "yes"]),
        tls_options(&wrong_name, &[]),
    ]);
    let (tls13, tls12, mutual, misnamed) = (&nodes[0], &nodes[1], &nodes[2], &nodes[3]);
    let strict = |node: &RedisNode, ca: &[u8]| client_of(node, ca).tls_min_version(TlsVersion::V1_3);

    let user = |password: &str| strict(tls13, &ca_pem).username("tls-user").password(password);
    lock_and_release(user("tls-pass")).await;
    let err = refusal(user("not-the-password")).await;
    assert_eq!(err.kind(), ErrorKind::Auth, "{err}");
    assert!(!err.to_string().contains("not-the-password"), "{err}");

    let err = refusal(strict(tls12, &ca_pem)).await;
    assert_eq!(err.kind(), ErrorKind::Tls, "{err}");
    assert!(err.to_string().contains("tls-protocols"), "{err}");
    // The same node is fine for a client with the default minimum.
    lock_and_release(client_of(tls12, &ca_pem)).await;

    lock_and_release(strict(mutual, &ca_pem).tls_client_cert_pem(cert, key)).await;
    let err = refusal(strict(mutual, &ca_pem)).await;
    assert_eq!(err.kind(), ErrorKind::Tls, "{err}");
    assert!(err.to_string().contains("client certificate"), "{err}");

    for (what, client) in [
        ("host-name mismatch", strict(misnamed, &ca_pem)),
        ("untrusted CA", strict(mutual, &evil_ca_pem)),
    ] {
        let err = refusal(client).await;
        assert_eq!(err.kind(), ErrorKind::Tls, "{what}: {err}");
    }

    let err = Client::builder()
        .node("rediss+cluster://127.0.0.1:1")
        .tls_min_version(TlsVersion::V1_3)
        .build()
        .await
        .expect_err("a cluster node cannot take a TLS minimum");
    assert_eq!(err.kind(), ErrorKind::Config, "{err}");
    assert!(err.to_string().contains("tls-protocols"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A node that cannot be set up fails the first poll of `build()`, before
/// any I/O: fronts that poll it once in a constructor (Node) report the
/// error there rather than from a later call.
#[test]
fn a_node_that_cannot_be_set_up_fails_the_first_poll_of_build() {
    use futures_util::FutureExt;
    let first_poll = Client::builder()
        .node("rediss+cluster://127.0.0.1:1")
        .tls_min_version(TlsVersion::V1_3)
        .build()
        .now_or_never();
    match first_poll {
        Some(Err(err)) => assert_eq!(err.kind(), ErrorKind::Config, "{err}"),
        Some(Ok(_)) => panic!("a cluster node took a TLS minimum"),
        None => panic!("the configuration error was not reported on the first poll"),
    }
}

/// T28 over TLS: one node behind a link with 30 ms each way, per-request
/// timeout 100 ms; a reconnect (TCP, TLS handshake, HELLO, script preload)
/// cannot fit in one request. After every connection is reset the node must
/// come back in the background and the held lock stay held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t28_tls_node_behind_a_slow_link_comes_back_after_a_disconnect() {
    let dir = temp_dir("slow-link");
    let Some(files) = make_certs(&dir, "server", "DNS:localhost,IP:127.0.0.1", "ca") else {
        println!("SKIPPED: the openssl command is not installed (apt-get install openssl)");
        return;
    };
    let node = RedisNode::start(&tls_options(&files, &[]));
    let proxy = FaultProxy::start(node.tls_port().unwrap());
    proxy.set(Mode::Delay {
        each_way: ms(30),
        jitter: std::time::Duration::ZERO,
    });
    for min_version in [TlsVersion::V1_2, TlsVersion::V1_3] {
        let client = Client::builder()
            .node(format!("rediss://localhost:{}", proxy.port()))
            .tls_ca_pem(std::fs::read(&files.ca).unwrap())
            .tls_min_version(min_version)
            .node_timeout(NODE_TIMEOUT)
            .connect_timeout(ms(3000))
            .build()
            .await
            .unwrap();
        lock_survives_a_disconnect(&client, &proxy, &format!("t28-tls-{min_version:?}")).await;
    }
}

/// P12, TLS to PostgreSQL: `sslmode=require` (and libpq's `verify-full`,
/// which means the same here) verifies the CA, given by `sslrootcert` in the
/// URL or the client's CA bundle, and the host name; a session that is not
/// TLS is never used; a server without TLS is refused with `require`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_over_tls_verifies_the_ca_and_the_host_name() {
    let dir = temp_dir("postgres");
    let Some(good) = make_certs(&dir, "server", "DNS:localhost,IP:127.0.0.1", "ca") else {
        println!("SKIPPED: the openssl command is not installed (apt-get install openssl)");
        return;
    };
    let wrong_host = make_certs(&dir, "wrong", "DNS:wrong.example", "ca").unwrap();
    make_certs(&dir, "evil-server", "DNS:localhost", "evil-ca").unwrap();
    let ca_pem = std::fs::read(&good.ca).unwrap();
    let evil_ca = dir.join("evil-ca.crt");
    let (node, mismatched, plain) = (
        PostgresNode::start_tls(&good),
        PostgresNode::start_tls(&wrong_host),
        PostgresNode::start(),
    );
    let url = |node: &PostgresNode, host: &str, query: &str| node.url().replace("127.0.0.1", host) + query;
    let build = |url: String| {
        Client::builder()
            .node(url)
            .node_timeout(GENEROUS_NODE_TIMEOUT)
            .connect_timeout(GENEROUS_NODE_TIMEOUT)
    };
    let tls_sessions = || {
        node.sql(
            "SELECT count(*) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) \
             WHERE ssl AND application_name = 'fencelock'",
        )
    };

    // The CA from the URL or from the client; DNS and IP names.
    let root = format!("&sslrootcert={}", good.ca.display());
    for host in ["localhost", "127.0.0.1"] {
        lock_and_release(build(url(&node, host, &format!("?sslmode=require{root}")))).await;
        lock_and_release(build(url(&node, host, "?sslmode=verify-full")).tls_ca_pem(ca_pem.clone())).await;
    }
    let client = build(url(&node, "localhost", "?sslmode=verify-ca"))
        .tls_ca_pem(ca_pem.clone())
        .build()
        .await
        .unwrap();
    let lock = client.acquire("tls", LockOptions::new(ms(5000))).await.unwrap();
    assert_ne!(tls_sessions(), "0", "the client's session is TLS");
    lock.release().await.unwrap();

    // A CA we do not trust, a certificate for another host, a server
    // without TLS: each refused as a TLS error that says what to do.
    let untrusted = format!("?sslmode=require&sslrootcert={}", evil_ca.display());
    let err = refusal(build(url(&node, "localhost", &untrusted))).await;
    assert_eq!(err.kind(), ErrorKind::Tls, "{err}");
    assert!(
        err.to_string().contains("sslrootcert"),
        "the error says what to do: {err}"
    );
    let err = refusal(build(url(
        &mismatched,
        "localhost",
        &format!("?sslmode=require{root}"),
    )))
    .await;
    assert_eq!(err.kind(), ErrorKind::Tls, "{err}");
    let err = refusal(build(url(&plain, "127.0.0.1", "?sslmode=require")).tls_ca_pem(ca_pem.clone())).await;
    assert_eq!(err.kind(), ErrorKind::Tls, "{err}");
    assert!(err.to_string().contains("does not support TLS"), "{err}");

    // A file that is not there is a configuration error naming it.
    let err = build(url(
        &node,
        "localhost",
        "?sslmode=require&sslrootcert=/nonexistent/ca.pem",
    ))
    .build()
    .await
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config, "{err}");
    assert!(err.to_string().contains("/nonexistent/ca.pem"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

//! TLS through rustls: a private CA, host-name verification, no plaintext fallback.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;
use fencelock::{Client, ErrorKind, LockOptions};
use fencelock_harness::TlsFiles;

/// Makes a CA, a server certificate for `san`, and returns the files. None
/// (with the reason printed) when the openssl command is missing.
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

fn tls_node(files: TlsFiles) -> RedisNode {
    RedisNode::start(&NodeOptions {
        tls: Some(files),
        ..NodeOptions::default()
    })
}

#[tokio::test]
async fn tls_verifies_the_ca_and_the_host_name_and_never_falls_back() {
    let dir = std::env::temp_dir().join(format!("fencelock-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let Some(good) = make_certs(&dir, "server", "DNS:localhost,IP:127.0.0.1", "ca") else {
        println!("SKIPPED: the openssl command is not installed (apt-get install openssl)");
        return;
    };
    let wrong_host = make_certs(&dir, "wrong", "DNS:wrong.example", "ca").unwrap();
    make_certs(&dir, "evil-server", "DNS:localhost", "evil-ca").unwrap();
    let ca_pem = std::fs::read(&good.ca).unwrap();
    let evil_ca_pem = std::fs::read(dir.join("evil-ca.crt")).unwrap();
    let node = tls_node(good);
    let mismatched = tls_node(wrong_host);
    let url = |node: &RedisNode, host: &str| format!("rediss://{host}:{}", node.tls_port().unwrap());
    let tls_client = |url: String, ca: &[u8]| {
        Client::builder()
            .node(url)
            .tls_ca_pem(ca.to_vec())
            .node_timeout(ms(500))
            .connect_timeout(ms(1000))
    };

    // Trusted CA, matching host name (DNS and IP SAN): works.
    for host in ["localhost", "127.0.0.1"] {
        let client = tls_client(url(&node, host), &ca_pem).build().await.unwrap();
        let lock = client.acquire("tls", LockOptions::new(ms(1000))).await.unwrap();
        lock.release().await.unwrap();
    }
    // A CA we do not trust: refused, as a TLS error.
    let err = tls_client(url(&node, "localhost"), &evil_ca_pem)
        .build()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Tls, "{err}");
    // Trusted CA but the certificate names another host: refused.
    let err = tls_client(url(&mismatched, "localhost"), &ca_pem)
        .build()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Tls, "{err}");
    // Plaintext against the TLS port: the node counts as unreachable (the
    // build does not fail for that), and no lock is taken over plaintext.
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
    let _ = std::fs::remove_dir_all(&dir);
}

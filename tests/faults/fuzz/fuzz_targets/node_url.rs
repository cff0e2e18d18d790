//! Node URLs through the builder: `Ok`, or a configuration/TLS/auth error,
//! never a panic. The host is pinned to 127.0.0.1 (no `@`, `\` or `/` can
//! move it) so a fuzzed URL never sends traffic off the machine.
#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use fencelock::{Client, ErrorKind};
use libfuzzer_sys::fuzz_target;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    })
}

fuzz_target!(|data: &[u8]| {
    let tail: String = String::from_utf8_lossy(data)
        .chars()
        .filter(|c| !matches!(c, '@' | '\\' | '/'))
        .collect();
    let scheme = if data.first().is_some_and(|b| b & 1 == 1) { "rediss" } else { "redis" };
    let url = format!("{scheme}://127.0.0.1:{tail}");
    let built = runtime().block_on(
        Client::builder()
            .node(url.clone())
            .connect_timeout(Duration::from_millis(5))
            .node_timeout(Duration::from_millis(5))
            .build(),
    );
    if let Err(error) = built {
        assert!(
            matches!(error.kind(), ErrorKind::Config | ErrorKind::Tls | ErrorKind::Auth | ErrorKind::Unavailable),
            "{url}: {error}"
        );
    }
});

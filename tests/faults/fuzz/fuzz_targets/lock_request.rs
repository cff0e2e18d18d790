//! Resource names and durations from raw bytes through `check_request`:
//! `Ok`, or `InvalidArgument`, never a panic.
#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use fencelock::{Client, ErrorKind, LockOptions};
use libfuzzer_sys::fuzz_target;

/// One client for every input. Its node is never reached: `check_request`
/// only validates (port 1 on loopback refuses at once if it were).
fn client() -> &'static Client {
    static CLIENT: OnceLock<(tokio::runtime::Runtime, Client)> = OnceLock::new();
    let (_, client) = CLIENT.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let client = runtime
            .block_on(Client::builder().node("redis://127.0.0.1:1").build())
            .expect("a client with an unreachable node still builds");
        (runtime, client)
    });
    client
}

fn duration(bytes: &[u8]) -> Duration {
    let mut raw = [0u8; 12];
    raw[..bytes.len().min(12)].copy_from_slice(&bytes[..bytes.len().min(12)]);
    let secs = u64::from_le_bytes(raw[..8].try_into().unwrap());
    let nanos = u32::from_le_bytes(raw[8..].try_into().unwrap()) % 1_000_000_000;
    Duration::new(secs, nanos)
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 24 {
        return;
    }
    let (ttl, rest) = data.split_at(12);
    let (wait, resource) = rest.split_at(12);
    let resource = String::from_utf8_lossy(resource);
    let options = LockOptions::new(duration(ttl)).wait(duration(wait));
    if let Err(error) = client().check_request(&resource, &options) {
        assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
    }
});

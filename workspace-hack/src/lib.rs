//! No code: this crate only depends on the third-party crates that the
//! workspace's crates use with different features, with the union of those
//! features, and every workspace crate depends on it. So every build (the
//! tests, the C ABI, each front, debug or release) asks for one feature set,
//! and cargo compiles tokio, redis, rustls and the core once per profile
//! instead of once per front. `cargo hakari generate` writes its Cargo.toml
//! (configured in .config/hakari.toml); see scripts/test.sh for the check.

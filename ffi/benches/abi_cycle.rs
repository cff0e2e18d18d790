//! What the C ABI costs: one blocking acquire + release through
//! `libfencelock` (from a C program) against the same cycle through the
//! Rust blocking API, on the same Redis node, in the same run.
//!
//! `cargo bench -p fencelock-ffi --bench abi_cycle`
//!
//! Prints the mean per cycle of each, best of several alternating rounds,
//! and the ratio C / Rust (1.00 = the boundary costs nothing measurable).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use fencelock::{ClientBuilder, LockOptions, blocking};
use fencelock_harness::{NodeOptions, RedisNode};

const CYCLES: u32 = 2000;
const ROUNDS: usize = 5;

fn main() {
    let node = RedisNode::start(&NodeOptions::default());
    let program = build_c_program();
    let client = blocking::Client::connect(ClientBuilder::default().node(node.url())).expect("connect");
    let (mut rust, mut c) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        rust.push(rust_cycle_ns(&client, &format!("bench-rust-{round}")));
        c.push(c_cycle_ns(&program, &node.url(), &format!("bench-c-{round}")));
    }
    let best = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    let (rust, c) = (best(&rust), best(&c));
    println!("blocking acquire+release, 1 node, {CYCLES} cycles x {ROUNDS} rounds (best round):");
    println!("  Rust blocking API : {:>8.1} µs/cycle", rust / 1000.0);
    println!("  C ABI (gcc -O2)   : {:>8.1} µs/cycle", c / 1000.0);
    println!("  ratio C / Rust    : {:>8.2}", c / rust);
}

fn rust_cycle_ns(client: &blocking::Client, resource: &str) -> f64 {
    let options = LockOptions::new(Duration::from_secs(10)).wait(Duration::ZERO);
    let cycle = || {
        let lock = client.acquire(resource, options.clone()).expect("acquire");
        lock.release().expect("release");
    };
    (0..CYCLES / 10).for_each(|_| cycle());
    let start = Instant::now();
    (0..CYCLES).for_each(|_| cycle());
    start.elapsed().as_nanos() as f64 / f64::from(CYCLES)
}

fn c_cycle_ns(program: &Path, url: &str, resource: &str) -> f64 {
    let out = Command::new(program)
        .args([url, resource, &CYCLES.to_string()])
        .output()
        .expect("run the C benchmark");
    assert!(out.status.success(), "C benchmark failed: {out:?}");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("ns per cycle")
}

/// Builds libfencelock (release) and the C driver against it.
fn build_c_program() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let status = Command::new(env!("CARGO"))
        .args(["build", "-q", "--release", "-p", "fencelock-ffi"])
        .current_dir(&root)
        .status()
        .expect("run cargo");
    assert!(status.success(), "cargo build --release -p fencelock-ffi failed");
    let libdir = root.join("target/release");
    let program = libdir.join("abi_cycle_c");
    let status = Command::new("gcc")
        .args(["-O2", "-std=c11", "-I"])
        .arg(root.join("include"))
        .arg(root.join("ffi/benches/abi_cycle.c"))
        .arg("-L")
        .arg(&libdir)
        .arg(format!("-Wl,-rpath,{}", libdir.display()))
        .args(["-lfencelock", "-o"])
        .arg(&program)
        .status()
        .expect("run gcc (apt-get install gcc)");
    assert!(status.success(), "gcc failed to build the C benchmark");
    program
}

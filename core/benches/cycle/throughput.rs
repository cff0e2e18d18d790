//! Section 1: throughput against the floor.

use crate::measure::{Comparison, MEASURED, Measurement, ROUNDS, TASKS, WARM_UP};
use crate::target::{Target, print_ratio};
use crate::util::{micros, ratio};

pub fn print_throughput(comparisons: &[Comparison]) {
    println!(
        "\n1. Acquire+release cycle, {TASKS} concurrent tasks on distinct keys \
         ({ROUNDS} alternating rounds of {WARM_UP:?} warm-up + {MEASURED:?} measured per side)"
    );
    println!(
        "   {:>5}  {:<12}  {:>8}  {:>7}  {:>7}  {:>9}  {:>6}  {:>18}  {:>18}  {:>10}  {:>9}",
        "nodes",
        "client",
        "cycles",
        "p50 µs",
        "p99 µs",
        "cycles/s",
        "errors",
        "client CPU µs/cyc",
        "redis CPU µs/cyc",
        "reads/cyc",
        "cmds/cyc"
    );
    for c in comparisons {
        print_measurement_row(c.nodes, "floor", &c.floor);
        print_measurement_row(c.nodes, "fenced floor", &c.fenced_floor);
        print_measurement_row(c.nodes, "fencelock", &c.ours);
    }
    println!(
        "\n   {:<33}  {:>7}  {:>8}  result",
        "ratio (fencelock / floor)", "value", "target"
    );
    for c in comparisons {
        let p50_target = if c.nodes == 1 { 1.15 } else { 1.3 };
        let p50 = ratio(micros(c.ours.p50()), micros(c.floor.p50()));
        let rate = ratio(c.ours.per_second(), c.floor.per_second());
        let nodes = nodes_label(c.nodes);
        print_ratio(&format!("{nodes}: p50 latency"), p50, Target::AtMost(p50_target));
        print_ratio(&format!("{nodes}: throughput"), rate, Target::AtLeast(0.85));
    }
    println!(
        "   (with {TASKS} tasks in a closed loop, p50 tracks {TASKS} / throughput: both ratios mostly say \
         the same thing)"
    );
    println!(
        "\n   {:<33}  {:>7}  {:>20}",
        "where the gap is", "value", "fenced floor / floor"
    );
    for c in comparisons {
        let nodes = nodes_label(c.nodes);
        let ours = ratio(c.ours.per_second(), c.fenced_floor.per_second());
        let protocol = ratio(c.fenced_floor.per_second(), c.floor.per_second());
        println!(
            "   {:<33}  {ours:>6.2}×  {protocol:>19.2}×",
            format!("{nodes}: throughput / fenced floor")
        );
    }
    println!(
        "   (fenced floor / floor: what the atomic fencing INCR costs any client; fencelock / fenced floor: \
         what our client adds)"
    );
    for (nodes, m) in comparisons.iter().flat_map(|c| {
        [
            (c.nodes, &c.floor),
            (c.nodes, &c.fenced_floor),
            (c.nodes, &c.ours),
        ]
    }) {
        if let Some(err) = &m.first_error {
            println!("   note: {nodes}-node run had {} errors, first: {err}", m.errors);
        }
    }
}

fn nodes_label(nodes: usize) -> String {
    format!("{nodes} node{}", if nodes == 1 { "" } else { "s" })
}

fn print_measurement_row(nodes: usize, client: &str, m: &Measurement) {
    let (client_cpu, server_cpu) = m.cpu_per_cycle();
    let (reads, commands) = m.server_work_per_cycle();
    println!(
        "   {:>5}  {:<12}  {:>8}  {:>7.0}  {:>7.0}  {:>9.0}  {:>6}  {:>18.1}  {:>18.1}  {:>10.2}  {:>9.2}",
        nodes,
        client,
        m.samples.len(),
        micros(m.p50()),
        micros(m.p99()),
        m.per_second(),
        m.errors,
        client_cpu,
        server_cpu,
        reads,
        commands
    );
}

//! Section 2: scaling with the number of nodes.

use crate::measure::Comparison;
use crate::proc::cores;
use crate::target::{Target, print_ratio};
use crate::util::{micros, ratio};

pub fn print_scaling(rows: &[Comparison]) {
    println!("\n2. Scaling: one task, sequential acquire+release cycles (same rounds as above)");
    println!(
        "   {:>5}  {:>14}  {:>14}  {:>14}  {:>14}  {:>12}",
        "nodes", "fencelock p50", "fencelock p99", "floor p50", "floor p99", "p50 vs floor"
    );
    for row in rows {
        println!(
            "   {:>5}  {:>11.0} µs  {:>11.0} µs  {:>11.0} µs  {:>11.0} µs  {:>11.2}×",
            row.nodes,
            micros(row.ours.p50()),
            micros(row.ours.p99()),
            micros(row.floor.p50()),
            micros(row.floor.p99()),
            ratio(micros(row.ours.p50()), micros(row.floor.p50()))
        );
    }
    let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
        return;
    };
    let ours = ratio(micros(last.ours.p50()), micros(first.ours.p50()));
    let floor = ratio(micros(last.floor.p50()), micros(first.floor.p50()));
    println!();
    print_ratio(
        &format!("fencelock p50 {}n / {}n", last.nodes, first.nodes),
        ours,
        Target::AtMost(1.4),
    );
    println!(
        "   {:<33}  {:>6.2}×  (for reference)",
        format!("floor p50 {}n / {}n", last.nodes, first.nodes),
        floor
    );
    println!(
        "   ({} redis-servers and this process share {} cores here: the floor's own growth shows how much \
         of the ratio is the machine)",
        last.nodes,
        cores()
    );
}

//! The targets printed beside the results as PASS/MISS (a miss never fails the run).

/// A target ratio from the issue.
#[derive(Clone, Copy)]
pub enum Target {
    AtMost(f64),
    AtLeast(f64),
}

pub fn print_ratio(what: &str, value: f64, target: Target) {
    let (relation, bound, pass) = match target {
        Target::AtMost(bound) => ("≤", bound, value <= bound),
        Target::AtLeast(bound) => ("≥", bound, value >= bound),
    };
    println!(
        "   {what:<33}  {value:>6.2}×  {relation} {bound:.2}×  {}",
        verdict(pass)
    );
}

pub fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "MISS" }
}

//! Unit conversions and ratios for the printed figures.

use std::time::Duration;

/// The `q` quantile (0..=1) of `sorted`; zero when it is empty.
pub fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

pub fn mb(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

pub fn ratio(ours: f64, floor: f64) -> f64 {
    if floor > 0.0 { ours / floor } else { f64::NAN }
}

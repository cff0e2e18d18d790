//! Readers of /proc (and the core count): RSS, CPU time, load average.

use std::time::Duration;

/// This process's resident set size in kB, from /proc/self/status.
pub fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmRSS:"))
                .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// CPU time (user + system, all threads) used so far by process `pid`, or
/// `"self"`, from /proc/PID/stat. Linux reports it in USER_HZ = 100 ticks per second.
pub fn cpu_time(pid: &str) -> Duration {
    const TICK: Duration = Duration::from_millis(10);
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return Duration::ZERO;
    };
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let ticks: u32 = after_name
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|field| field.parse::<u32>().ok())
        .sum();
    TICK * ticks
}

pub fn servers_cpu_time(pids: &[u32]) -> Duration {
    pids.iter().map(|pid| cpu_time(&pid.to_string())).sum()
}

pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get())
}

pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_owned())
}

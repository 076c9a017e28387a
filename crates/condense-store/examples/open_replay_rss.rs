//! Opens and replays a session file in a fresh process and prints the
//! process's peak memory (`VmHWM` of /proc/self/status) against the file's
//! size: the memory half of "open + replay" in docs/benchmarks.md.
//!
//! ```text
//! cargo run --release -p condense-store --example open_replay_rss -- SESSION.jsonl
//! ```

use std::time::Instant;

use condense_store::context::branch_messages;
use condense_store::replay::replay_branch;
use condense_store::session::Session;

/// A `Vm*` line of /proc/self/status, in KiB.
fn status_kib(key: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find(|l| l.starts_with(key))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: open_replay_rss SESSION.jsonl");
        std::process::exit(1);
    };
    let file_bytes = std::fs::metadata(&path).expect("session file").len();
    let baseline = status_kib("VmHWM:").unwrap_or(0);

    let start = Instant::now();
    let session = Session::open(&path).expect("open");
    let branch = session.branch(None);
    let messages = branch_messages(&branch);
    let (state, problems) = replay_branch(&branch);
    let elapsed = start.elapsed();
    let peak = status_kib("VmHWM:").unwrap_or(0);
    let rss = status_kib("VmRSS:").unwrap_or(0);

    println!("file:            {path}");
    println!(
        "file size:       {file_bytes} bytes ({:.2} MiB)",
        file_bytes as f64 / 1048576.0
    );
    println!(
        "entries:         {} ({} on the branch), {} messages, {} indexed, {} problems",
        session.entries.len(),
        branch.len(),
        messages.len(),
        state.indexed_count(),
        session.problems.len() + problems.len()
    );
    println!("open+replay:     {:.2} ms", elapsed.as_secs_f64() * 1000.0);
    println!("VmHWM before:    {baseline} KiB");
    println!("VmHWM after:     {peak} KiB (VmRSS now {rss} KiB)");
    println!(
        "peak / file:     {:.2} (whole process), {:.2} (above the baseline)",
        peak as f64 * 1024.0 / file_bytes as f64,
        peak.saturating_sub(baseline) as f64 * 1024.0 / file_bytes as f64
    );
}

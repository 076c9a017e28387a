//! `condense gen` writes sessions the rest of the CLI reads.

mod support;

use std::process::Output;

use support::{condense, temp_dir};

fn ok(out: &Output) {
    assert!(
        out.status.success(),
        "status {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn generated_session_renders_and_answers_queries() {
    let dir = temp_dir("gen", "render");
    let file = dir.join("s.jsonl");
    let f = file.to_str().unwrap();
    ok(&condense(
        &dir,
        &[
            "gen",
            "--tokens",
            "60000",
            "--shape",
            "realistic",
            "--pruned",
            "--seed",
            "3",
            "-o",
            f,
        ],
    ));

    // The file reads cleanly: render prints the model's view as a JSON array
    // and reports no problems.
    let out = condense(&dir, &["render", "--json", f]);
    ok(&out);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rendered: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let messages = rendered.as_array().expect("an array of messages");
    assert!(messages.len() > 10);
    // Pruned: some result was replaced by a stub that names its ref.
    assert!(String::from_utf8_lossy(&out.stdout).contains("context_tree_query"));

    // The first summarized output can be paged back in.
    let out = condense(&dir, &["query", f, "t1"]);
    ok(&out);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("## toolRef: t1"));

    // The oversized output was spilled beside the session.
    let blobs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with("-blobs"))
        .collect();
    assert_eq!(blobs.len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn stdout_and_file_are_the_same_bytes_and_seeded() {
    let dir = temp_dir("gen", "stdout");
    let file = dir.join("t.jsonl");
    let args = [
        "gen",
        "--tokens",
        "20000",
        "--shape",
        "tool-turns",
        "--pruned",
    ];
    let out = condense(&dir, &args);
    ok(&out);
    let mut with_file = args.to_vec();
    with_file.extend(["-o", file.to_str().unwrap()]);
    ok(&condense(&dir, &with_file));
    assert_eq!(out.stdout, std::fs::read(&file).unwrap());

    let mut other_seed = args.to_vec();
    other_seed.extend(["--seed", "2"]);
    let other = condense(&dir, &other_seed);
    ok(&other);
    assert_ne!(out.stdout, other.stdout);

    let first = String::from_utf8(out.stdout).unwrap();
    let header: serde_json::Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
    assert_eq!(header["type"], "session");
    assert_eq!(header["version"], 3);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unpruned_session_renders_unchanged() {
    let dir = temp_dir("gen", "plain");
    let file = dir.join("p.jsonl");
    let f = file.to_str().unwrap();
    ok(&condense(
        &dir,
        &["gen", "--tokens", "20000", "--shape", "tasks", "-o", f],
    ));
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains("context-prune-"));
    let out = condense(&dir, &["render", "--json", f]);
    ok(&out);
    let rendered: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    // Every message entry is sent as is.
    let messages = text
        .lines()
        .filter(|l| l.contains(r#""type":"message""#))
        .count();
    assert_eq!(rendered.len(), messages);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_shape_is_a_usage_error() {
    let dir = temp_dir("gen", "usage");
    let out = condense(&dir, &["gen", "--shape", "spiral"]);
    assert_eq!(out.status.code(), Some(1));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--miss-rates`: the usage reports calls that read nothing of the prefix
/// cached, about as often as drawn, and nothing else changes (the misses
/// have their own seeded stream).
#[test]
fn miss_rates_change_only_what_the_usage_reads() {
    let dir = temp_dir("gen", "misses");
    let args = ["gen", "--tokens", "150000", "--shape", "tasks"];
    let plain = condense(&dir, &args);
    ok(&plain);
    let mut missing = args.to_vec();
    missing.extend(["--miss-rates", "0.5"]);
    let missed = condense(&dir, &missing);
    ok(&missed);
    let lines = |out: &Output| -> Vec<serde_json::Value> {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let (plain, missed) = (lines(&plain), lines(&missed));
    assert_eq!(plain.len(), missed.len());
    let (mut calls, mut misses) = (0, 0);
    for (a, b) in plain.iter().zip(&missed) {
        let (Some(ua), Some(ub)) = (a["message"].get("usage"), b["message"].get("usage")) else {
            assert_eq!(a, b);
            continue;
        };
        let without_usage = |v: &serde_json::Value| {
            let mut v = v.clone();
            v["message"]["usage"] = serde_json::Value::Null;
            v
        };
        assert_eq!(without_usage(a), without_usage(b));
        assert_eq!(ua["output"], ub["output"]);
        if ua["cacheRead"].as_u64().unwrap() > 0 {
            calls += 1;
            if ub["cacheRead"] == 0 {
                misses += 1;
            }
        }
    }
    assert!(calls > 100, "{calls} calls read the cache");
    let share = f64::from(misses) / f64::from(calls);
    assert!((0.35..0.65).contains(&share), "{misses} misses of {calls}");

    let mut bad = args.to_vec();
    bad.extend(["--miss-rates", "1.5"]);
    let out = condense(&dir, &bad);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--miss-rates"));
    let _ = std::fs::remove_dir_all(&dir);
}

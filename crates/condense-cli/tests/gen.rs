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

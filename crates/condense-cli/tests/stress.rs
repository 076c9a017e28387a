//! The stress shapes of `condense gen` (one message of a thousand calls,
//! deeply nested arguments, one output read a hundred times, a run that
//! never replies) through every command that reads a session: each
//! finishes, and what it renders and simulates keeps the invariants.

mod support;

use std::collections::HashSet;
use std::path::Path;
use std::process::Output;

use serde_json::Value;

use support::{condense, json_of, temp_dir};

fn ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: status {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Generates `shape` at `tokens` into `dir`, with what a live pi-condense
/// would have written when `pruned`, and returns the file.
fn generate(dir: &Path, shape: &str, tokens: u64, pruned: bool) -> String {
    let file = dir.join(format!("{shape}-{pruned}.jsonl"));
    let f = file.to_str().unwrap().to_owned();
    let tokens = tokens.to_string();
    let mut args = vec!["gen", "--shape", shape, "--tokens", &tokens, "-o", &f];
    if pruned {
        args.push("--pruned");
    }
    ok(&condense(dir, &args), "gen");
    f
}

/// Every tool result in the rendered context answers a call made before it.
fn assert_no_orphan_results(messages: &[Value], shape: &str) {
    let mut called = HashSet::new();
    for m in messages {
        match m["role"].as_str() {
            Some("assistant") => {
                for block in m["content"].as_array().into_iter().flatten() {
                    if block["type"] == "toolCall" {
                        called.insert(block["id"].as_str().unwrap().to_owned());
                    }
                }
            }
            Some("toolResult") => {
                let id = m["toolCallId"].as_str().unwrap();
                assert!(called.contains(id), "{shape}: orphan result {id}");
            }
            _ => {}
        }
    }
}

/// `summarized`: whether the shape's replies flush, so the pruned file
/// renders stubs.
fn check(shape: &str, tokens: u64, summarized: bool) {
    let dir = temp_dir("stress", shape);
    let pruned = generate(&dir, shape, tokens, true);
    let out = condense(&dir, &["render", "--json", &pruned]);
    ok(&out, "render");
    let rendered: Value = serde_json::from_slice(&out.stdout).unwrap();
    let messages = rendered.as_array().expect("an array of messages");
    assert_no_orphan_results(messages, shape);
    let stubs = String::from_utf8_lossy(&out.stdout).contains("context_tree_query");
    assert_eq!(stubs, summarized, "{shape}");
    let status = json_of(&condense(&dir, &["status", "--json", &pruned]));
    assert!(status.is_object(), "{shape}: {status}");

    let f = generate(&dir, shape, tokens, false);
    let dry = json_of(&condense(&dir, &["compact", &f, "--dry-run", "--json"]));
    assert!(dry.is_object(), "{shape}: {dry}");
    let sim = json_of(&condense(&dir, &["simulate", "--json", &f]));
    let policies = &sim["sessions"][0]["policies"];
    let none = policies["none"]["billed_input_units"].as_f64().unwrap();
    for name in ["none", "reference", "cache-aware"] {
        let p = &policies[name];
        assert!(p["tool_outputs"].as_u64().unwrap() > 0, "{shape} {name}");
        assert_eq!(
            p["outputs_recoverable"], p["tool_outputs"],
            "{shape} {name}"
        );
        if name != "none" {
            assert_eq!(p["reload_renders_the_same"], true, "{shape} {name}");
        }
    }
    let default = policies["cache-aware"]["billed_input_units"]
        .as_f64()
        .unwrap();
    assert!(default <= none, "{shape}: {default} > {none}");
}

#[test]
fn one_message_of_many_calls() {
    check("wide", 60_000, true);
}

#[test]
fn deeply_nested_arguments_of_failed_calls() {
    check("deep", 60_000, true);
}

#[test]
fn one_output_read_again_and_again() {
    check("dups", 100_000, true);
}

#[test]
fn a_run_that_never_replies() {
    check("long", 60_000, false);
}

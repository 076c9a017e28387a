//! `condense simulate` compacts where pi would: generated sessions that pass
//! the compaction threshold of a small context window, under every policy
//! (docs/economy.md, "pi's compaction").

mod support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use support::{condense, generate, json_of, temp_dir, Generated};

const RESERVE: u64 = 16_384;

/// A generated session of `tokens`, `shape`, idle gaps before 30% of the
/// prompts.
fn generated(dir: &Path, shape: &str, seed: u64, tokens: u64) -> PathBuf {
    let file = dir.join(format!("{shape}-{seed}-{tokens}.jsonl"));
    generate(
        dir,
        &file,
        &Generated {
            tokens,
            seed,
            idle_gaps: 30,
            shape: Some(shape),
            miss_rates: None,
        },
    );
    file
}

fn simulate(dir: &Path, file: &Path, window: u64, extra: &[&str]) -> Value {
    let window = window.to_string();
    let mut args = vec![
        "simulate",
        file.to_str().unwrap(),
        "--context-window",
        &window,
        "--json",
        "--per-call",
    ];
    args.extend_from_slice(extra);
    json_of(&condense(dir, &args))
}

fn u(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("not an unsigned integer: {v}"))
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

/// The role of each entry's message in a session file, by entry id.
fn roles(file: &Path) -> HashMap<String, String> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| {
            let id = v["id"].as_str()?.to_owned();
            let role = v["message"]["role"].as_str().unwrap_or("").to_owned();
            Some((id, role))
        })
        .collect()
}

/// Every synthesized compaction of a run is where and as pi makes it.
fn check_compactions(run: &Value, file: &Path, window: u64, overhead: u64, what: &str) -> u64 {
    let calls = run["calls_detail"].as_array().unwrap();
    let roles = roles(file);
    let mut input = 0;
    let mut n = 0;
    for (k, call) in calls.iter().enumerate() {
        let Some(c) = call["compaction"].as_object() else {
            continue;
        };
        n += 1;
        let at = format!("{what}, call {k}");
        match c["reason"].as_str() {
            Some("threshold") => {
                // pi compacts after a run whose last call's prompt and
                // output passed the window less the reserve.
                let before = &calls[k - 1];
                let usage = u(&before["prompt_tokens"]) + u(&before["output_tokens"]);
                assert!(usage > window - RESERVE, "{at}: {usage}");
                assert_eq!(u(&c["tokens_before"]), usage, "{at}");
            }
            Some("overflow") => {
                // The provider refused a prompt longer than the window.
                assert!(u(&c["tokens_before"]) > window, "{at}");
            }
            other => panic!("{at}: reason {other:?}"),
        }
        // The prompt drops, and is written from the summary on: only the
        // fixed overhead is read from the cache.
        assert!(
            u(&call["prompt_tokens"]) < u(&calls[k - 1]["prompt_tokens"]),
            "{at}"
        );
        assert_eq!(u(&call["shared_prefix_tokens"]), overhead, "{at}");
        // Never cut at a tool result.
        let kept = c["first_kept_entry_id"].as_str().unwrap();
        let role = roles.get(kept).unwrap_or_else(|| panic!("{at}: {kept}"));
        assert_ne!(role, "toolResult", "{at}");
        // The summary call is counted in the call's summarizer work.
        assert!(u(&c["input_tokens"]) > 0, "{at}");
        assert!(u(&call["summarizer_input_tokens"]) >= u(&c["input_tokens"]));
        assert!(u(&call["summarizer_output_tokens"]) >= u(&c["output_tokens"]));
        input += u(&c["input_tokens"]);
    }
    // pi also compacts after the session's last run when that passed the
    // threshold; no call carries that one.
    let total = u(&run["compactions"]);
    assert!(total == n || total == n + 1, "{what}: {total} {n}");
    assert!(u(&run["compaction_input_tokens"]) >= input, "{what}");
    n
}

/// (shape, tokens, seed, context window): sessions that pass the threshold
/// of a small window (several runs each), and one autonomous run that
/// only pi's overflow path can compact.
const CASES: &[(&str, u64, u64, u64)] = &[
    ("realistic", 150_000, 11, 60_000),
    ("tasks", 150_000, 11, 60_000),
    ("tasks", 150_000, 11, 80_000),
    ("tool-turns", 150_000, 11, 60_000),
];

#[test]
fn no_pruning_compacts_where_pi_would_and_pays_for_the_summary() {
    let dir = temp_dir("simulate-compaction", "none");
    for &(shape, tokens, seed, window) in CASES {
        let what = format!("{shape} {tokens} seed {seed}, window {window}");
        let file = generated(&dir, shape, seed, tokens);
        let v = simulate(&dir, &file, window, &["--policy", "none"]);
        let overhead = u(&v["token_model"]["overhead_tokens"]);
        let none = &v["sessions"][0]["policies"]["none"];
        let made = check_compactions(none, &file, window, overhead, &what);
        assert!(made > 0, "{what}");
        // Under no pruning, the summary calls are all the summarizer does.
        assert_eq!(
            none["summarizer_input_tokens"], none["compaction_input_tokens"],
            "{what}"
        );
        assert!(u(&none["peak_prompt_tokens"]) <= window, "{what}");
        if shape == "tool-turns" {
            // One agent run: pi checks the threshold only after it.
            let reasons: Vec<&str> = none["calls_detail"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|c| c["compaction"]["reason"].as_str())
                .collect();
            assert!(reasons.iter().all(|r| *r == "overflow"), "{reasons:?}");
        }

        // The summary calls are billed input, at the session model's
        // price (pi compacts with it), whatever condense's summarizer costs.
        let input = f(&none["compaction_input_tokens"]);
        let output = f(&none["compaction_output_tokens"]);
        let output_price = f(&v["profile"]["output"]);
        assert!(
            (f(&none["summarizer_units"]) - (input + output * output_price)).abs() < 1e-6 * input,
            "{what}: {} for {input} in and {output} out",
            none["summarizer_units"]
        );
        let dearer = simulate(
            &dir,
            &file,
            window,
            &["--policy", "none", "--summarizer-price", "5"],
        );
        let dearer = &dearer["sessions"][0]["policies"]["none"];
        for field in ["billed_input_units", "summarizer_units", "total_units"] {
            assert_eq!(dearer[field], none[field], "{what}: {field}");
        }

        // Without compaction, the prompts grow past the window.
        let old = simulate(
            &dir,
            &file,
            window,
            &["--policy", "none", "--no-compaction"],
        );
        let old = &old["sessions"][0]["policies"]["none"];
        assert_eq!(u(&old["compactions"]), 0);
        assert_eq!(u(&old["summarizer_input_tokens"]), 0);
        assert!(u(&old["peak_prompt_tokens"]) > window, "{what}");
        assert!(
            u(&old["prompt_tokens"]) > u(&none["prompt_tokens"]),
            "{what}"
        );
    }
}

#[test]
fn a_session_far_from_the_window_is_priced_as_without_compaction() {
    let dir = temp_dir("simulate-compaction", "far");
    let file = generated(&dir, "realistic", 5, 60_000);
    let with = simulate(&dir, &file, 200_000, &[]);
    let without = simulate(&dir, &file, 200_000, &["--no-compaction"]);
    assert_eq!(with["totals"], without["totals"]);
    for p in with["sessions"][0]["policies"]
        .as_object()
        .unwrap()
        .values()
    {
        assert_eq!(u(&p["compactions"]), 0);
    }
}

#[test]
fn the_engine_sees_a_synthesized_compaction_as_a_recorded_one() {
    let dir = temp_dir("simulate-compaction", "engine");
    // (shape, seed, window, the policies that compact there)
    let cases: &[(&str, u64, u64, &[&str])] = &[
        ("tasks", 11, 50_000, &["reference", "cache-aware"]),
        ("tool-turns", 11, 60_000, &["reference", "cache-aware"]),
    ];
    for &(shape, seed, window, compacting) in cases {
        let file = generated(&dir, shape, seed, 150_000);
        let v = simulate(&dir, &file, window, &["--policy", "reference,cache-aware"]);
        let overhead = u(&v["token_model"]["overhead_tokens"]);
        for &name in compacting {
            let what = format!("{shape} seed {seed}, window {window}, {name}");
            let run = &v["sessions"][0]["policies"][name];
            assert!(
                check_compactions(run, &file, window, overhead, &what) > 0,
                "{what}"
            );
            assert_eq!(run["reload_renders_the_same"], true, "{what}: {run:#}");
            assert_eq!(run["outputs_recoverable"], run["tool_outputs"], "{what}");
            assert!(u(&run["peak_prompt_tokens"]) <= window, "{what}");
        }
    }
}

#[test]
fn compaction_options_are_checked() {
    let dir = temp_dir("simulate-compaction", "usage");
    let file = generated(&dir, "realistic", 5, 20_000);
    let out = condense(
        &dir,
        &[
            "simulate",
            file.to_str().unwrap(),
            "--context-window",
            "10000",
            "--reserve-tokens",
            "10000",
        ],
    );
    assert!(!out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--reserve-tokens"));
}

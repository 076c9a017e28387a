//! `condense simulate` with the engine-driven policies: `reference`,
//! `cache-aware` and a settings file side by side with `none`, on generated
//! sessions with idle gaps.

mod support;

use std::path::{Path, PathBuf};

use serde_json::Value;

use support::{condense, generate, json_of, temp_dir, Generated};

/// A generated session of `tokens` with idle gaps before a third of the
/// prompts.
fn generated(dir: &Path, seed: u64, tokens: u64) -> PathBuf {
    let file = dir.join(format!("gen-{seed}.jsonl"));
    generate(
        dir,
        &file,
        &Generated {
            tokens,
            seed,
            idle_gaps: 33,
            shape: None,
            miss_rates: None,
        },
    );
    file
}

fn f64_of(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

#[test]
fn the_policies_run_side_by_side_through_the_engine() {
    let dir = temp_dir("simulate-policies", "side");
    let file = generated(&dir, 7, 80_000);
    let v = json_of(&condense(
        &dir,
        &[
            "simulate",
            file.to_str().unwrap(),
            "--policy",
            "none,reference",
            "--policy",
            "cache-aware",
            "--json",
        ],
    ));
    let policies = &v["sessions"][0]["policies"];
    let names: Vec<&String> = policies.as_object().unwrap().keys().collect();
    assert_eq!(names.len(), 3, "{names:?}");
    let (none, reference, aware) = (
        &policies["none"],
        &policies["reference"],
        &policies["cache-aware"],
    );
    for p in [none, reference, aware] {
        assert_eq!(p["calls"], none["calls"]);
        // Every output a prompt left out is read back whole through the index.
        assert_eq!(p["outputs_recoverable"], p["tool_outputs"]);
    }
    assert!(u64::try_from(f64_of(&reference["flushes"]) as i64).unwrap() > 0);
    assert!(f64_of(&reference["summarizer_input_tokens"]) > 0.0);
    assert!(f64_of(&reference["prompt_tokens"]) < f64_of(&none["prompt_tokens"]));
    assert_eq!(none["summarizer_input_tokens"], 0);
    assert_eq!(reference["switches"], 0);
    // On this session (80k tokens, idle gaps) pruning pays: billed input,
    // summarizer included, below no pruning's. (Not on every session, nor
    // always at most the reference policy's: docs/economy.md.)
    let billed = |p: &Value| f64_of(&p["billed_input_units"]);
    assert!(
        billed(aware) < billed(none),
        "{} >= {}",
        billed(aware),
        billed(none)
    );
    assert!(billed(reference) < billed(none));
    assert!(f64_of(&aware["peak_prompt_tokens"]) < 0.8 * 200_000.0);

    // The text report has a row per policy.
    let out = condense(&dir, &["simulate", file.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    for name in ["none ", "reference ", "cache-aware "] {
        assert!(text.lines().any(|l| l.starts_with(name)), "{text}");
    }
}

#[test]
fn a_settings_file_selects_the_behaviour() {
    let dir = temp_dir("simulate-policies", "settings");
    let file = generated(&dir, 11, 50_000);
    let run = |settings: &str| -> Value {
        let path = dir.join("settings.json");
        std::fs::write(&path, settings).unwrap();
        json_of(&condense(
            &dir,
            &[
                "simulate",
                file.to_str().unwrap(),
                "--settings",
                path.to_str().unwrap(),
                "--json",
            ],
        ))
    };
    let same = |a: &Value, b: &Value| {
        for key in [
            "prompt_tokens",
            "billed_input_units",
            "summarizer_input_tokens",
        ] {
            assert_eq!(a[key], b[key], "{key}");
        }
    };
    let v = run(r#"{"contextPrune": {"enabled": false}}"#);
    let p = &v["sessions"][0]["policies"];
    same(&p["settings"], &p["none"]);
    let v = run(
        r#"{"theme": "dark", "contextPrune": {"enabled": true, "economy": {"policy": "cache-aware"}}}"#,
    );
    let p = &v["sessions"][0]["policies"];
    same(&p["settings"], &p["cache-aware"]);
    // The default is the cache-aware column's policy.
    let v = run(r#"{"contextPrune": {"enabled": true}}"#);
    let p = &v["sessions"][0]["policies"];
    same(&p["settings"], &p["cache-aware"]);
    let v = run(r#"{"contextPrune": {"enabled": true, "economy": {"policy": "reference"}}}"#);
    let p = &v["sessions"][0]["policies"];
    same(&p["settings"], &p["reference"]);
}

#[test]
fn an_llm_sized_summarizer_writes_longer_summaries() {
    let dir = temp_dir("simulate-policies", "llm");
    let file = generated(&dir, 5, 50_000);
    let run = |summarizer: &str| -> Value {
        let v = json_of(&condense(
            &dir,
            &[
                "simulate",
                file.to_str().unwrap(),
                "--policy",
                "reference",
                "--summarizer",
                summarizer,
                "--json",
            ],
        ));
        v["sessions"][0]["policies"]["reference"].clone()
    };
    let extractive = run("extractive");
    let llm = run("llm:400");
    // Longer summaries are also longer input to the range fusions.
    assert!(
        f64_of(&llm["summarizer_input_tokens"]) >= f64_of(&extractive["summarizer_input_tokens"])
    );
    assert!(
        f64_of(&llm["summarizer_output_tokens"]) > f64_of(&extractive["summarizer_output_tokens"])
    );
    assert!(f64_of(&llm["prompt_tokens"]) > f64_of(&extractive["prompt_tokens"]));
}

#[test]
fn bad_policy_options_are_usage_errors() {
    let dir = temp_dir("simulate-policies", "usage");
    let file = generated(&dir, 1, 20_000);
    let f = file.to_str().unwrap();
    for args in [
        vec!["simulate", f, "--policy", "settings"],
        vec!["simulate", f, "--policy", "none,aggressive"],
        vec!["simulate", f, "--summarizer", "llm:0"],
        vec!["simulate", f, "--summarizer", "gpt"],
        vec!["simulate", f, "--context-window", "0"],
    ] {
        let out = condense(&dir, &args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
    }
    let missing = dir.join("missing.json");
    let out = condense(
        &dir,
        &["simulate", f, "--settings", missing.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(2));
}

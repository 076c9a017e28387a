//! Properties of the engine-driven policies over generated sessions with
//! random idle gaps (`condense gen --idle-gaps`), checked through
//! `condense simulate --json`: every output a prompt left out is read back
//! whole, and a reload of the session the run would have left renders what
//! the run rendered.
//!
//! One of the properties cannot hold for any policy that decides
//! as the session goes, and is kept here, ignored, with the smallest
//! counterexample proptest found (the argument and figures in
//! docs/economy.md): `cache-aware` billing at most no pruning's (a short
//! session whose summaries are not repaid).

mod support;

use std::path::PathBuf;

use proptest::prelude::*;
use serde_json::Value;

use support::{condense, generate, Generated};

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "condense-simulate-properties-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn simulate(seed: u64, tokens: u64, gaps: u64, shape: &str) -> Value {
    let dir = dir();
    let file = dir.join(format!("s{seed}-{tokens}-{gaps}-{shape}.jsonl"));
    generate(
        &dir,
        &file,
        &Generated {
            tokens,
            seed,
            idle_gaps: gaps,
            shape: Some(shape),
        },
    );
    let out = condense(&dir, &["simulate", file.to_str().unwrap(), "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_file(&file);
    serde_json::from_slice(&out.stdout).unwrap()
}

fn shape() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["realistic", "tasks"])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    #[test]
    fn every_output_left_out_is_recoverable_and_a_reload_renders_the_same(
        seed in 1u64..10_000,
        tokens in 15_000u64..90_000,
        gaps in 0u64..70,
        shape in shape(),
    ) {
        let v = simulate(seed, tokens, gaps, shape);
        let p = &v["sessions"][0]["policies"];
        for name in ["reference", "cache-aware"] {
            prop_assert_eq!(&p[name]["outputs_recoverable"], &p[name]["tool_outputs"], "{}", name);
            prop_assert_eq!(&p[name]["reload_renders_the_same"], &Value::Bool(true), "{}", name);
        }
    }

    #[test]
    #[ignore = "not possible for a policy that decides online (docs/economy.md, the issue's targets): seed 8888, 15,000 tokens, no gaps, tasks bills 68,640 under cache-aware (77,260 under reference) against 65,533 without pruning"]
    fn cache_aware_never_bills_more_than_no_pruning(
        seed in 1u64..10_000,
        tokens in 15_000u64..90_000,
        gaps in 0u64..70,
        shape in shape(),
    ) {
        let v = simulate(seed, tokens, gaps, shape);
        let p = &v["sessions"][0]["policies"];
        let billed = |name: &str| p[name]["billed_input_units"].as_f64().unwrap_or(f64::NAN);
        prop_assert!(
            billed("cache-aware") <= billed("none"),
            "cache-aware {} > none {}", billed("cache-aware"), billed("none")
        );
    }
}

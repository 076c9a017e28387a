//! The typed effects across both sides of the protocol: a sample of every
//! `Effect` variant, serialized by Rust, must equal the checked-in
//! `extension/protocol.samples.json` (regenerate it with
//! `CONDENSE_BLESS=1`), read back into the same values, and come back
//! unchanged after the shim's types read and re-emit it (`node --test
//! extension/protocol.test.ts`). A field renamed on either side fails here.

mod support;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use condense_engine::{Delivery, Effect, Level, Placement};
use serde_json::json;
use support::pi_env::{require_pi, run_bounded};

/// One sample of every variant (and of each optional field both ways).
fn samples() -> Vec<Effect> {
    vec![
        Effect::Append {
            custom_type: "context-prune-frontier".into(),
            data: json!({"lastAttemptedToolCallId": "call_1", "attemptedBatchCount": 1}),
            delivery: Delivery::Session,
        },
        Effect::AppendMessage {
            custom_type: "context-prune-summary".into(),
            content: json!("- `t1` read f.txt"),
            display: false,
            details: json!({"toolCallRefs": [{"ref": "t1", "toolCallId": "call_1"}], "turnIndex": 2}),
            delivery: Delivery::Runtime,
        },
        Effect::Notify {
            level: Level::Warning,
            text: "pruner: 1 turn(s) queued".into(),
        },
        Effect::Status {
            text: Some("│ prune: ON".into()),
        },
        Effect::Status { text: None },
        Effect::Widget {
            key: "pruner-boot".into(),
            lines: Some(vec!["pruner loaded — pruning ON | model: default".into()]),
            placement: Placement::BelowEditor,
            ttl_ms: Some(10_000),
        },
        Effect::Widget {
            key: "context-prune-progress".into(),
            lines: None,
            placement: Placement::AboveEditor,
            ttl_ms: None,
        },
        Effect::SaveSettings {
            context_prune: json!({"enabled": true, "someFutureKey": 7}),
        },
        Effect::Cost {
            total_cost: 0.0031,
            input_tokens: 12_345,
            output_tokens: 250,
        },
        Effect::Select {
            title: "Prune on".into(),
            options: vec!["agent-message".into(), "on-demand".into()],
            values: vec!["agent-message".into(), "on-demand".into()],
            then: "prune-on".into(),
        },
        Effect::Input {
            title: "Protected tools".into(),
            placeholder: "todo, read".into(),
            then: "protected-tools --input".into(),
        },
    ]
}

/// Which variant: a new variant does not compile until it has a sample.
fn variant(e: &Effect) -> usize {
    match e {
        Effect::Append { .. } => 0,
        Effect::AppendMessage { .. } => 1,
        Effect::Notify { .. } => 2,
        Effect::Status { .. } => 3,
        Effect::Widget { .. } => 4,
        Effect::SaveSettings { .. } => 5,
        Effect::Cost { .. } => 6,
        Effect::Select { .. } => 7,
        Effect::Input { .. } => 8,
    }
}
const VARIANTS: usize = 9;

fn extension() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("extension")
}

fn samples_json() -> String {
    let text = serde_json::to_string_pretty(&json!({ "effects": samples() })).expect("json");
    format!("{text}\n")
}

#[test]
fn the_samples_cover_every_variant_and_the_checked_in_file_is_current() {
    let mut seen = [false; VARIANTS];
    for e in samples() {
        seen[variant(&e)] = true;
    }
    assert!(seen.iter().all(|s| *s), "a variant has no sample: {seen:?}");
    let file = extension().join("protocol.samples.json");
    let fresh = samples_json();
    if std::env::var("CONDENSE_BLESS").as_deref() == Ok("1") {
        std::fs::write(&file, &fresh).expect("write the samples");
    }
    let checked_in = std::fs::read_to_string(&file).unwrap_or_default();
    assert!(
        checked_in == fresh,
        "{} is stale: the Rust effects changed. Regenerate it with \
         CONDENSE_BLESS=1 cargo test -p condense-host-pi --test protocol_roundtrip, \
         then update extension/protocol.ts to match",
        file.display()
    );
    let back: Vec<Effect> = serde_json::from_value(
        serde_json::from_str::<serde_json::Value>(&checked_in).unwrap()["effects"].clone(),
    )
    .expect("the samples read back");
    assert_eq!(back, samples());
}

#[test]
fn every_effect_round_trips_through_the_typescript_types() {
    let Some(install) = require_pi() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let input = dir.path().join("samples.json");
    let output = dir.path().join("out.json");
    std::fs::write(&input, samples_json()).expect("write");
    let mut cmd = Command::new(&install.node);
    cmd.arg("--experimental-strip-types")
        .arg("--no-warnings")
        .arg("--test")
        .arg("protocol.test.ts")
        .env("CONDENSE_PROTOCOL_SAMPLES", &input)
        .env("CONDENSE_PROTOCOL_OUT", &output)
        .current_dir(extension());
    let out = run_bounded(&mut cmd, Duration::from_secs(120)).expect("run node --test");
    let report = format!("stdout:\n{}\nstderr:\n{}", out.stdout, out.stderr);
    assert!(out.success() && report.contains("# fail 0"), "{report}");
    let text = std::fs::read_to_string(&output).expect("the shim wrote its re-emitted effects");
    let v: serde_json::Value = serde_json::from_str(&text).expect("json");
    let back: Vec<Effect> = serde_json::from_value(v["effects"].clone())
        .unwrap_or_else(|e| panic!("the shim's effects do not read as Rust's: {e}\n{text}"));
    assert_eq!(back, samples());
}

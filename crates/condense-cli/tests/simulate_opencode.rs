//! `condense simulate` of OpenCode sessions as `opencode export` prints
//! them: alone, among a directory's files, and malformed. (Against real
//! OpenCode: condense-host-opencode's `tests/e2e_simulate.rs`.)

mod support;

use std::path::{Path, PathBuf};

use support::{condense, fixture, json_of, pi_mono_dir, temp_dir};

fn export_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../condense-host-opencode/tests/fixtures/export.json")
}

#[test]
fn an_export_is_simulated_call_for_call() {
    let dir = temp_dir("simulate-opencode", "one");
    let f = export_fixture();
    let report = json_of(&condense(
        &dir,
        &["simulate", "--json", f.to_str().unwrap()],
    ));
    let session = &report["sessions"][0];
    assert_eq!(session["problems"], serde_json::json!([]), "{session:#}");
    let none = &session["policies"]["none"];
    // Four assistant messages, three finished tool parts (the running one
    // has no result yet).
    assert_eq!(none["calls"], 4, "{none:#}");
    assert_eq!(none["tool_outputs"], 3, "{none:#}");
    // The recorded tokens of the three calls that have them.
    assert_eq!(session["recorded"]["calls"], 3, "{session:#}");
}

#[test]
fn a_directory_simulates_its_exports_beside_its_sessions() {
    let dir = temp_dir("simulate-opencode", "dir");
    let corpus = dir.join("corpus");
    std::fs::create_dir_all(&corpus).unwrap();
    std::fs::copy(export_fixture(), corpus.join("ses_fixture01.json")).unwrap();
    std::fs::copy(fixture(), corpus.join("pi.jsonl")).unwrap();
    std::fs::write(corpus.join("settings.json"), r#"{"contextPrune": {}}"#).unwrap();
    let report = json_of(&condense(
        &dir,
        &["simulate", "--json", corpus.to_str().unwrap()],
    ));
    let paths: Vec<&str> = report["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths.len(), 2, "{paths:?}");
    assert!(paths[0].ends_with("pi.jsonl") && paths[1].ends_with("ses_fixture01.json"));
    assert_eq!(report["unreadable"], serde_json::json!([]), "{report:#}");
}

#[test]
fn a_malformed_export_is_refused_with_what_is_missing() {
    let dir = temp_dir("simulate-opencode", "bad");
    let f = dir.join("bad.json");
    std::fs::write(&f, r#"{"info": {"id": "ses_1"}}"#).unwrap();
    let out = condense(&dir, &["simulate", f.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("an OpenCode export, but no `messages` array"),
        "{err}"
    );
}

#[test]
fn a_replay_far_from_the_recorded_prompts_suggests_calibrating() {
    let dir = temp_dir("simulate-opencode", "far");
    let out = condense(
        &dir,
        &[
            "simulate",
            "--policy",
            "none",
            export_fixture().to_str().unwrap(),
        ],
    );
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    // OpenCode's fixed part is several times what pi's sessions fitted.
    assert!(
        text.contains("none vs recorded prompts: 3 calls, total -8"),
        "{text}"
    );
    assert!(
        text.contains("`--calibrate` fits the token model"),
        "{text}"
    );

    // pi's own sessions are what the coefficients were fitted on.
    let large = pi_mono_dir().join("large-session.jsonl");
    let out = condense(
        &dir,
        &["simulate", "--policy", "none", large.to_str().unwrap()],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("none vs recorded prompts:"), "{text}");
    assert!(!text.contains("--calibrate"), "{text}");
}

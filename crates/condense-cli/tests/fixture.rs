//! The binary on the pi-condense 2.9.1 fixture: `render --json` must give the
//! same JSON value pi-condense's own render gave, and `query t2` the same
//! bytes its `context_tree_query` returned.

mod support;

use std::process::Output;

use support::{fixture, fixtures_dir, process_dir};

/// Runs `condense` with an empty agent dir so no user settings leak in.
fn condense(args: &[&str]) -> Output {
    support::condense(&process_dir("fixture"), args)
}

#[test]
fn render_json_matches_pi_condense() {
    let out = condense(&["render", "--json", fixture().to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ours: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let theirs: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures_dir().join("pi-condense-2.9.1.render.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(ours, theirs);
}

#[test]
fn query_matches_pi_condense_byte_for_byte() {
    let out = condense(&["query", fixture().to_str().unwrap(), "t2"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected = std::fs::read(fixtures_dir().join("pi-condense-2.9.1.query-t2.txt")).unwrap();
    assert_eq!(out.stdout, expected);
}

#[test]
fn unknown_ref_is_a_data_problem() {
    let out = condense(&["query", fixture().to_str().unwrap(), "t999"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stdout).contains("(not found in index"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no record for t999"));
}

#[test]
fn missing_session_and_bad_usage_exit_codes() {
    let out = condense(&["render", "/no/such/session.jsonl"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).lines().count(),
        1,
        "one-line error"
    );
    let out = condense(&["query", fixture().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let out = condense(&["frobnicate"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn malformed_settings_is_a_clear_error() {
    let dir = std::env::temp_dir().join(format!("condense-cli-settings-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let settings = dir.join("settings.json");
    std::fs::write(&settings, "{ not json").unwrap();
    let out = condense(&[
        "render",
        "--settings",
        settings.to_str().unwrap(),
        fixture().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("malformed settings"));
    assert!(out.stdout.is_empty(), "nothing printed on error");
}

#[test]
fn settings_change_the_render() {
    // Chain compression off: the compressed chains render raw (their results stubbed).
    let dir = std::env::temp_dir().join(format!("condense-cli-cc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let settings = dir.join("settings.json");
    std::fs::write(
        &settings,
        r#"{"contextPrune":{"chainCompression":{"enabled":false}}}"#,
    )
    .unwrap();
    let out = condense(&[
        "render",
        "--settings",
        settings.to_str().unwrap(),
        fixture().to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("<compressed-chain"));
    assert!(text.contains("[Summarized in pruner summary, ref `t1`."));
}

#[test]
fn diff_reports_totals() {
    let out = condense(&["render", "--diff", fixture().to_str().unwrap()]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("total: 48016 -> 18153 chars"), "{text}");
}

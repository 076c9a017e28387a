//! `condense demo`: runs in a fresh temporary directory, and every mechanism
//! it lists reclaimed something.

mod support;

use std::path::Path;

use serde_json::Value;

use support::{condense, json_of, temp_dir};

const MECHANISMS: [&str; 5] = [
    "stubReplace",
    "contentDedup",
    "spill",
    "errorPurge",
    "chainCompression",
];

#[test]
fn every_mechanism_reclaims_and_the_sizes_add_up() {
    let dir = temp_dir("demo-test", "json");
    let r = json_of(&condense(&dir, &["demo", "--json"]));
    let n = |v: &Value| v.as_i64().unwrap();
    for m in MECHANISMS {
        let b = &r["mechanisms"][m];
        assert!(n(&b["count"]) > 0, "{m}: {b}");
        assert!(n(&b["reclaimedChars"]) > 0, "{m}: {b}");
    }
    assert!(n(&r["protection"]["count"]) >= 1);
    assert!(n(&r["protection"]["keptChars"]) > 0);
    assert!(n(&r["summariesAdded"]["count"]) > 0);
    // before + summaries added - everything reclaimed = after, in chars.
    let reclaimed: i64 = r["mechanisms"]
        .as_object()
        .unwrap()
        .values()
        .map(|b| n(&b["reclaimedChars"]))
        .sum();
    assert_eq!(
        n(&r["before"]["chars"]) + n(&r["summariesAdded"]["chars"]) - reclaimed,
        n(&r["after"]["chars"])
    );
    assert!(n(&r["after"]["chars"]) * 3 < n(&r["before"]["chars"]));
    // The counts agree with what the compactions wrote.
    assert_eq!(
        r["state"]["dedupAliases"],
        r["mechanisms"]["contentDedup"]["count"]
    );
    assert_eq!(
        r["state"]["spilledOutputs"],
        r["mechanisms"]["spill"]["count"]
    );
    assert_eq!(
        r["state"]["chainsCompressed"],
        r["mechanisms"]["chainCompression"]["count"]
    );
    assert_eq!(r["compact"]["compactions"], r["prompts"]);
    // The temporary session is gone.
    assert_eq!(r["session"], Value::Null);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn kept_session_renders_to_the_reported_size() {
    let dir = temp_dir("demo-test", "keep");
    let keep = dir.join("demo");
    let r = json_of(&condense(
        &dir,
        &["demo", "--json", "--dir", keep.to_str().unwrap()],
    ));
    let session = r["session"].as_str().unwrap().to_owned();
    assert!(Path::new(&session).exists());
    let settings = keep.join("settings.json");
    let status = json_of(&condense(
        &dir,
        &[
            "status",
            "--json",
            "--settings",
            settings.to_str().unwrap(),
            &session,
        ],
    ));
    assert_eq!(
        status["totals"]["liveReclaim"]["afterChars"],
        r["after"]["chars"]
    );
    assert_eq!(
        status["totals"]["chainsCompressed"],
        r["state"]["chainsCompressed"]
    );
    // The session reads cleanly.
    let out = condense(
        &dir,
        &["render", "--settings", settings.to_str().unwrap(), &session],
    );
    assert!(out.status.success() && out.stderr.is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn readable_report_fits_a_terminal() {
    let dir = temp_dir("demo-test", "text");
    let out = condense(&dir, &["demo"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for row in [
        "stub-replace",
        "content dedup",
        "spill",
        "error purge",
        "chain compression",
        "summaries added",
        "protection",
    ] {
        assert!(text.contains(row), "{row}: {text}");
    }
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
    for tasks in ["0", "201", "18446744073709551615"] {
        let out = condense(&dir, &["demo", "--tasks", tasks]);
        assert_eq!(out.status.code(), Some(1), "{tasks}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_directory_holding_settings_is_left_as_it_was() {
    let dir = temp_dir("demo-test", "occupied");
    let agent = dir.join("agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(agent.join("settings.json"), r#"{"keep": 1}"#).unwrap();
    let out = condense(&dir, &["demo", "--dir", agent.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("settings.json"));
    assert_eq!(
        std::fs::read_to_string(agent.join("settings.json")).unwrap(),
        r#"{"keep": 1}"#
    );
    assert_eq!(std::fs::read_dir(&agent).unwrap().count(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

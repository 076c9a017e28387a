//! `condense compact` on a copy of a real session with every condense entry
//! removed: it must find the work, write whole entries pi-condense's way,
//! leave the session renderable and idempotent, and refuse sessions in use.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use support::{condense, json_of, raw_fixture_text, temp_dir};

fn raw_session(dir: &Path) -> PathBuf {
    let path = dir.join("raw.jsonl");
    std::fs::write(&path, raw_fixture_text()).unwrap();
    path
}

#[test]
fn compacts_once_and_then_finds_nothing() {
    let dir = temp_dir("compact", "once");
    let s = raw_session(&dir);
    let before = std::fs::read_to_string(&s).unwrap();
    let p = s.to_str().unwrap();

    let dry = json_of(&condense(&dir, &["compact", p, "--dry-run", "--json"]));
    assert_eq!(
        std::fs::read_to_string(&s).unwrap(),
        before,
        "dry run writes nothing"
    );
    assert!(dry["entries"].as_u64().unwrap() > 0);

    let r = json_of(&condense(&dir, &["compact", p, "--window", "3", "--json"]));
    assert_eq!(r["summarizedBatches"], 6);
    assert_eq!(r["chainsCompressed"], 3);
    assert_eq!(r["written"], true);
    assert!(r["afterTokens"].as_u64().unwrap() < r["beforeTokens"].as_u64().unwrap() / 2);

    // Whole lines, chained onto the old leaf, all condense's.
    let after = std::fs::read_to_string(&s).unwrap();
    assert!(after.starts_with(&before));
    let new: Vec<Value> = after[before.len()..]
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(new.len() as u64, r["entries"].as_u64().unwrap());
    assert!(new.iter().all(|e| e["customType"]
        .as_str()
        .unwrap()
        .starts_with("context-prune-")));
    let kinds: Vec<&str> = new
        .iter()
        .map(|e| e["customType"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"context-prune-summary") && kinds.contains(&"context-prune-chain"));

    // The model now sees stubs and compressed chains; the originals answer queries.
    let rendered = condense(&dir, &["render", p]);
    let text = String::from_utf8_lossy(&rendered.stdout);
    assert!(text.contains("<compressed-chain id=\\\"b1\\\""));
    let q = condense(&dir, &["query", p, "t1"]);
    assert!(String::from_utf8_lossy(&q.stdout).contains("class Model0:"));

    // Nothing is left to do.
    let again = json_of(&condense(&dir, &["compact", p, "--window", "3", "--json"]));
    assert_eq!(again["entries"], 0);
    assert_eq!(again["written"], false);
}

#[test]
fn refuses_a_session_another_process_holds() {
    let dir = temp_dir("compact", "held");
    let s = raw_session(&dir);
    let p = s.to_str().unwrap().to_owned();
    let mut holder = Command::new("sh")
        .arg("-c")
        .arg(format!("exec 3<'{p}'; sleep 20"))
        .spawn()
        .unwrap();
    // Give the shell a moment to open the file.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut out = condense(&dir, &["compact", &p]);
    while out.status.success() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
        out = condense(&dir, &["compact", &p]);
    }
    let _ = holder.kill();
    let _ = holder.wait();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("--force"));
}

/// A session condense gated under the default policy (it holds the start
/// switch): what `compact` writes is shown at once, by a `user` switch
/// after its entries, as `/pruner compact` shows it live.
#[test]
fn on_a_gated_session_the_compaction_is_shown_by_a_user_switch() {
    let dir = temp_dir("compact", "gated");
    let raw = raw_fixture_text();
    let last: Value = serde_json::from_str(raw.lines().last().unwrap()).unwrap();
    let start = serde_json::json!({"type": "custom", "customType": "context-prune-switch",
        "data": {"reason": "start", "messageCount": 1}, "id": "5a5a5a5a",
        "parentId": last["id"], "timestamp": last["timestamp"]});
    let s = dir.join("gated.jsonl");
    std::fs::write(&s, format!("{}{start}\n", raw)).unwrap();
    let p = s.to_str().unwrap();
    let before = std::fs::read_to_string(&s).unwrap();

    let r = json_of(&condense(&dir, &["compact", p, "--window", "3", "--json"]));
    assert!(r["afterTokens"].as_u64().unwrap() < r["beforeTokens"].as_u64().unwrap() / 2);
    let after = std::fs::read_to_string(&s).unwrap();
    let new: Vec<Value> = after[before.len()..]
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(new.len() as u64, r["entries"].as_u64().unwrap());
    let last = new.last().unwrap();
    assert_eq!(last["customType"], "context-prune-switch");
    assert_eq!(last["data"]["reason"], "user");
    let rendered = condense(&dir, &["render", p]);
    assert!(String::from_utf8_lossy(&rendered.stdout).contains("<compressed-chain id=\\\"b1\\\""));
}

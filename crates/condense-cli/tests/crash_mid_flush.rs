//! A flush cut short at every line it appends: the next flush completes
//! what the cut one left (a summary whose index entry never came is
//! adopted) and summarizes no output a second time.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn condense(args: &[&str], dir: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_condense"))
        .args(args)
        .env("PI_CODING_AGENT_DIR", dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "condense {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// For each tool-call occurrence, the refs of the summaries that cover it.
fn summary_refs(text: &str) -> HashMap<String, Vec<String>> {
    let mut out: HashMap<String, Vec<String>> = HashMap::new();
    for line in text.lines() {
        let Ok(e) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if e["type"] != "custom_message" || e["customType"] != "context-prune-summary" {
            continue;
        }
        for r in e["details"]["toolCallRefs"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let key = format!("{}@{}", r["toolCallId"], r["resultTimestamp"]);
            out.entry(key)
                .or_default()
                .push(r["shortId"].as_str().unwrap_or("").to_owned());
        }
    }
    out
}

/// How many index records each occurrence has.
fn indexed(text: &str) -> HashMap<String, usize> {
    let mut out: HashMap<String, usize> = HashMap::new();
    for line in text.lines() {
        let Ok(e) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if e["type"] != "custom" || e["customType"] != "context-prune-index" {
            continue;
        }
        for r in e["data"]["toolCalls"].as_array().into_iter().flatten() {
            let key = format!("{}@{}", r["toolCallId"], r["resultTimestamp"]);
            *out.entry(key).or_default() += 1;
        }
    }
    out
}

#[test]
fn a_flush_cut_at_any_line_is_completed_not_repeated() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.jsonl");
    let base_s = base.to_str().unwrap();
    condense(
        &["gen", "--tokens", "40000", "--seed", "7", "-o", base_s],
        dir.path(),
    );
    let original = std::fs::read_to_string(&base).unwrap();
    let whole = dir.path().join("whole.jsonl");
    std::fs::write(&whole, &original).unwrap();
    condense(&["compact", whole.to_str().unwrap()], dir.path());
    let flushed = std::fs::read_to_string(&whole).unwrap();
    let appended: Vec<&str> = flushed[original.len()..].lines().collect();
    let summaries = summary_refs(&flushed);
    assert!(
        appended
            .iter()
            .filter(|l| l.contains("context-prune-summary"))
            .count()
            >= 2,
        "the flush writes several summaries"
    );
    for cut in 0..appended.len() {
        let file = dir.path().join(format!("cut{cut}.jsonl"));
        let mut text = original.clone();
        for line in &appended[..cut] {
            text.push_str(line);
            text.push('\n');
        }
        std::fs::write(&file, &text).unwrap();
        condense(&["compact", file.to_str().unwrap()], dir.path());
        let after = std::fs::read_to_string(&file).unwrap();
        for (key, refs) in summary_refs(&after) {
            assert_eq!(refs.len(), 1, "cut {cut}: {key} is summarized as {refs:?}");
        }
        // Every output the uncut flush summarized is indexed, once.
        let index = indexed(&after);
        for key in summaries.keys() {
            assert_eq!(index.get(key), Some(&1), "cut {cut}: {key} is indexed once");
        }
    }
}

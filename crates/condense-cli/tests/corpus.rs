//! `condense corpus` over a directory of sessions with known properties:
//! generated ones (with and without condense entries), hand-written ones
//! re-querying `context_tree_query` refs at known user-turn-group gaps, one
//! with a malformed line and one that cannot be read at all.

mod support;

use std::path::{Path, PathBuf};

use condense_gen::{Shape, SynthOptions, SynthStats};
use serde_json::{json, Value};

use support::{condense, json_of, temp_dir};

/// A hand-written pi session: one branch of `message` entries.
struct Hand {
    lines: Vec<String>,
    n: usize,
    ts: i64,
}

enum Step<'a> {
    /// A user prompt (starts a user-turn group).
    User,
    /// An assistant calling `context_tree_query` with these ids, and its result.
    Query(&'a [&'a str]),
    /// A `bash` call and its result.
    Bash,
    /// A text-only assistant reply.
    Reply,
}

impl Hand {
    fn new(id: &str) -> Hand {
        Hand {
            lines: vec![json!({"type":"session","version":3,"id":id,"timestamp":"2026-01-05T10:00:00.000Z","cwd":"/home/dev/project"}).to_string()],
            n: 0,
            ts: 1_767_607_200_000,
        }
    }

    fn entry(&mut self, message: Value) {
        self.n += 1;
        let parent = if self.n == 1 {
            Value::Null
        } else {
            json!(format!("e{:07}", self.n - 1))
        };
        self.ts += 1000;
        let mut message = message;
        message["timestamp"] = json!(self.ts);
        self.lines.push(
            json!({
                "type": "message",
                "id": format!("e{:07}", self.n),
                "parentId": parent,
                "timestamp": "2026-01-05T10:00:00.000Z",
                "message": message,
            })
            .to_string(),
        );
    }

    fn assistant(&mut self, content: Value) {
        self.entry(json!({"role":"assistant","content":content,"api":"anthropic-messages","provider":"anthropic","model":"claude","stopReason":"toolUse"}));
    }

    fn result(&mut self, id: &str, tool: &str, text: &str) {
        self.entry(json!({"role":"toolResult","toolCallId":id,"toolName":tool,"content":[{"type":"text","text":text}],"isError":false}));
    }

    fn steps(mut self, steps: &[Step]) -> Hand {
        for (i, s) in steps.iter().enumerate() {
            match s {
                Step::User => self.entry(
                    json!({"role":"user","content":[{"type":"text","text":format!("prompt {i}")}]}),
                ),
                Step::Query(ids) => {
                    let id = format!("q{i}");
                    self.assistant(json!([{"type":"toolCall","id":id,"name":"context_tree_query","arguments":{"toolCallIds":ids}}]));
                    // Non-ASCII on purpose: chars are UTF-16 units.
                    self.result(
                        &id,
                        "context_tree_query",
                        &format!("## toolRef: {ids:?}\n(résumé ✓ 🚀)"),
                    );
                }
                Step::Bash => {
                    let id = format!("b{i}");
                    self.assistant(json!([{"type":"toolCall","id":id,"name":"bash","arguments":{"command":"ls"}}]));
                    self.result(&id, "bash", "Cargo.toml\nsrc\n");
                }
                Step::Reply => self.entry(json!({"role":"assistant","content":[{"type":"text","text":"Done."}],"stopReason":"stop"})),
            }
        }
        self
    }

    fn write(&self, path: &Path) {
        std::fs::write(path, self.lines.join("\n") + "\n").unwrap();
    }
}

/// Independently of condense: the tool results' text (text blocks joined by
/// `\n`), in UTF-16 units, over every readable line of a file.
fn tool_output_chars(path: &Path) -> (u64, u64) {
    let (mut n, mut chars) = (0, 0);
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let Ok(e) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if e["type"] != "message" || e["message"]["role"] != "toolResult" {
            continue;
        }
        n += 1;
        let texts: Vec<&str> = e["message"]["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["type"] == "text")
            .map(|b| b["text"].as_str().unwrap())
            .collect();
        chars += texts.join("\n").encode_utf16().count() as u64;
    }
    (n, chars)
}

/// The nearest-rank median.
fn median(mut xs: Vec<u64>) -> u64 {
    xs.sort_unstable();
    xs[xs.len().div_ceil(2) - 1]
}

#[test]
fn corpus_report_over_twenty_sessions() {
    let dir = temp_dir("corpus", "twenty");
    let root = dir.join("sessions");
    let nested = root.join("--home-dev-project--").join("older");
    std::fs::create_dir_all(&nested).unwrap();
    std::fs::write(root.join("notes.txt"), "not a session").unwrap();

    // 14 generated sessions of ~20k tokens: 4 without condense, 10 with.
    let mut generated: Vec<(PathBuf, SynthStats, bool)> = Vec::new();
    let kinds: [(&str, bool, u64); 4] = [
        ("tasks", false, 4),
        ("tasks", true, 4),
        ("tool-turns", true, 3),
        ("realistic", true, 3),
    ];
    for (shape, pruned, count) in kinds {
        for seed in 1..=count {
            let opts = SynthOptions {
                seed,
                tokens: Some(20_000),
                shape: Shape::from_name(shape).unwrap(),
                pruned,
                // Tool-turns: flush all but the last 5 turns.
                verbatim_tail: 5,
                ..SynthOptions::default()
            };
            let stats = condense_gen::generate_session(&opts).stats;
            let at = if pruned { &nested } else { &root };
            let path = at.join(format!("{shape}-{pruned}-{seed}.jsonl"));
            condense_gen::write(&path, &opts).unwrap();
            generated.push((path, stats, pruned));
        }
    }

    // 5 hand-written sessions. Re-query gaps, in user-turn groups:
    // a: t1 at groups 1, 3, 4 -> 2, 1; b: t2 at 1 and 4 -> 3 (t1 once, plus
    // an empty call); c: x twice in group 1 -> 0; d: t1 at 1 and 7 -> 6;
    // e: no query, and a malformed line.
    use Step::*;
    let hand: Vec<(&str, Hand, u64)> = vec![
        (
            "a",
            Hand::new("a").steps(&[
                User,
                Query(&["t1"]),
                Reply,
                User,
                User,
                Query(&["t1"]),
                Reply,
                User,
                Query(&["t1"]),
                Reply,
            ]),
            4,
        ),
        (
            "b",
            Hand::new("b").steps(&[
                User,
                Query(&["t1", "t2"]),
                Reply,
                User,
                User,
                User,
                Query(&["t2"]),
                Query(&[]),
                Reply,
            ]),
            4,
        ),
        (
            "c",
            Hand::new("c").steps(&[User, Query(&["x"]), Query(&["x", "x"]), Reply]),
            1,
        ),
        (
            "d",
            Hand::new("d").steps(&[
                User,
                Query(&["t1"]),
                Reply,
                User,
                User,
                User,
                User,
                User,
                User,
                Query(&["t1"]),
                Reply,
            ]),
            7,
        ),
        ("e", Hand::new("e").steps(&[User, Bash, Reply]), 1),
    ];
    let mut hand_paths = Vec::new();
    for (name, mut h, _) in hand {
        if name == "e" {
            h.lines.insert(2, "{ this line is not JSON".into());
        }
        let p = root.join(format!("hand-{name}.jsonl"));
        h.write(&p);
        hand_paths.push(p);
    }
    let hand_lengths = [4u64, 4, 1, 7, 1];
    // And one that cannot be read.
    let dangling = root.join("gone.jsonl");
    std::os::unix::fs::symlink(dir.join("no-such-file"), &dangling).unwrap();

    let out = condense(&dir, &["corpus", "--json", root.to_str().unwrap()]);
    let r = json_of(&out);

    // Sessions: 20 files; one unreadable, one read with a problem.
    assert_eq!(r["sessions"]["found"], 20);
    assert_eq!(r["sessions"]["unreadable"], 1);
    assert_eq!(r["sessions"]["withProblems"], 1);
    assert_eq!(r["sessions"]["readOk"], 18);
    assert_eq!(r["sessions"]["condenseActive"], 10);
    let problems = r["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 2);
    assert_eq!(problems[0]["path"], dangling.to_str().unwrap());
    assert_eq!(problems[0]["unreadable"], true);
    assert_eq!(problems[1]["path"], hand_paths[4].to_str().unwrap());
    assert_eq!(problems[1]["unreadable"], false);
    assert!(problems[1]["first"].as_str().unwrap().starts_with("line 3"));

    // Tool output: every tool result of the readable files.
    let (mut results, mut chars) = (0, 0);
    for p in generated.iter().map(|g| &g.0).chain(&hand_paths) {
        let (n, c) = tool_output_chars(p);
        results += n;
        chars += c;
    }
    let synth_calls: usize = generated.iter().map(|g| g.1.tool_calls).sum();
    assert_eq!(results, synth_calls as u64 + 11);
    assert_eq!(r["toolOutput"]["results"], results);
    assert_eq!(r["toolOutput"]["chars"], chars);

    // Re-queries: gaps 2, 1, 3, 0, 6.
    let q = &r["requery"];
    assert_eq!(q["ctqSessions"], 4);
    assert_eq!(q["ctqCalls"], 10);
    assert_eq!(q["emptyCalls"], 1);
    assert_eq!(q["sessionsWithRequery"], 4);
    assert_eq!(q["events"], 5);
    assert_eq!(q["gapMedian"], 2);
    assert_eq!(q["gapLe1Share"], 0.4);
    assert_eq!(q["gapLe2Share"], 0.6);
    assert_eq!(q["gapLe3Share"], 0.8);
    assert_eq!(q["gapLe5Share"], 0.8);
    assert_eq!(q["gapEq0"], 1);

    // Session length in user-turn groups: the generator's prompts, and the
    // hand-written sessions' user messages.
    let mut all: Vec<u64> = generated.iter().map(|g| g.1.prompts as u64).collect();
    all.extend(hand_lengths);
    let active: Vec<u64> = generated
        .iter()
        .filter(|g| g.2)
        .map(|g| g.1.prompts as u64)
        .collect();
    let le3 = |xs: &[u64]| xs.iter().filter(|&&n| n <= 3).count() as f64 / xs.len() as f64;
    let len = &r["sessionLength"];
    assert_eq!(len["all"]["sessions"], 19);
    assert_eq!(len["all"]["median"], median(all.clone()));
    assert_eq!(len["all"]["le3Share"], le3(&all));
    assert_eq!(len["condenseActive"]["sessions"], 10);
    assert_eq!(len["condenseActive"]["median"], median(active.clone()));
    assert_eq!(len["condenseActive"]["le3Share"], le3(&active));

    // Reclaim: sessions without condense entries render unchanged (ratio 1),
    // those with them shrink.
    let all_r = &r["reclaim"]["all"]["ratio"];
    assert_eq!(r["reclaim"]["all"]["sessions"], 19);
    assert_eq!(all_r["max"], 1.0);
    let active_r = &r["reclaim"]["condenseActive"]["ratio"];
    assert_eq!(r["reclaim"]["condenseActive"]["sessions"], 10);
    assert!(active_r["max"].as_f64().unwrap() < 1.0, "{active_r}");
    let f = |v: &Value| v.as_f64().unwrap();
    assert!(f(&active_r["min"]) > 0.0);
    for w in ["min", "p25", "median", "p75", "max"].windows(2) {
        assert!(f(&active_r[w[0]]) <= f(&active_r[w[1]]), "{active_r}");
        assert!(f(&all_r[w[0]]) <= f(&all_r[w[1]]), "{all_r}");
    }
    assert!(
        r["reclaim"]["condenseActive"]["afterChars"]
            .as_u64()
            .unwrap()
            < r["reclaim"]["condenseActive"]["beforeChars"]
                .as_u64()
                .unwrap()
    );

    // Metrics: the tool-turns sessions never close a chain, so their open
    // segment is the whole branch.
    assert_eq!(r["metrics"]["largestChainSharePct"]["max"], 100);
    for m in [
        "largestChainSharePct",
        "openCycleThinkingTokens",
        "frontierGapTokens",
    ] {
        let b = &r["metrics"][m];
        assert!(b["median"].as_u64().unwrap() <= b["p90"].as_u64().unwrap());
        assert!(b["p90"].as_u64().unwrap() <= b["max"].as_u64().unwrap());
    }

    // The readable report names the same figures and the problem files.
    let out = condense(&dir, &["corpus", root.to_str().unwrap()]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("sessions: 20 (18 read ok, 1 with problems, 1 unreadable)"));
    assert!(
        text.contains("re-queries of the same ref: 5 in 4 sessions\n  gap in user-turn groups: median 2  <=1 40.0%  <=2 60.0%  <=3 80.0%  <=5 80.0%  ==0: 1\n"),
        "{text}"
    );
    assert!(text.contains(&format!("{}: unreadable:", dangling.display())));
    // Fits a terminal (the problem lines are as long as their paths).
    assert!(
        text.lines()
            .take_while(|l| *l != "problems:")
            .all(|l| l.chars().count() <= 100),
        "{text}"
    );
    assert!(out.stderr.is_empty(), "no progress bar off a terminal");

    // One worker gives the same report.
    let one = json_of(&condense(
        &dir,
        &["corpus", "--json", "--jobs", "1", root.to_str().unwrap()],
    ));
    assert_eq!(one, r);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_single_session_agrees_with_status() {
    let dir = temp_dir("corpus", "single");
    let root = dir.join("s");
    std::fs::create_dir_all(&root).unwrap();
    let path = root.join("one.jsonl");
    let opts = SynthOptions {
        seed: 5,
        tokens: Some(30_000),
        shape: Shape::from_name("tool-turns").unwrap(),
        pruned: true,
        verbatim_tail: 5,
        ..SynthOptions::default()
    };
    condense_gen::write(&path, &opts).unwrap();
    let status = json_of(&condense(
        &dir,
        &["status", "--json", path.to_str().unwrap()],
    ));
    let r = json_of(&condense(
        &dir,
        &["corpus", "--json", root.to_str().unwrap()],
    ));
    let live = &status["totals"]["liveReclaim"];
    let block = &r["reclaim"]["all"];
    assert_eq!(block["beforeChars"], live["beforeChars"]);
    assert_eq!(block["afterChars"], live["afterChars"]);
    let ratio = live["afterChars"].as_f64().unwrap() / live["beforeChars"].as_f64().unwrap();
    for p in ["min", "p25", "median", "p75", "max"] {
        assert_eq!(block["ratio"][p], ratio);
    }
    for (ours, theirs) in [
        ("largestChainSharePct", "largestChainSharePct"),
        ("openCycleThinkingTokens", "openCycleThinkingTokens"),
        ("frontierGapTokens", "frontierGapTokens"),
    ] {
        for p in ["median", "p90", "max"] {
            assert_eq!(r["metrics"][ours][p], status["context"][theirs], "{ours}");
        }
    }
    assert!(
        status["context"]["openCycleThinkingTokens"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert!(status["context"]["frontierGapTokens"].as_u64().unwrap() > 0);
    assert_eq!(r["sessionLength"]["all"]["median"], 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_missing_directory_is_a_data_problem_and_an_empty_one_is_not() {
    let dir = temp_dir("corpus", "missing");
    let out = condense(&dir, &["corpus", dir.join("nope").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let r = json_of(&condense(
        &dir,
        &["corpus", "--json", empty.to_str().unwrap()],
    ));
    assert_eq!(r["sessions"]["found"], 0);
    assert_eq!(r["reclaim"]["all"]["ratio"]["median"], Value::Null);
    assert_eq!(r["requery"]["gapMedian"], Value::Null);
    let out = condense(&dir, &["corpus", "--jobs", "0", empty.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_jsonl_that_is_no_session_is_listed_not_measured() {
    let dir = temp_dir("corpus", "not-a-session");
    let root = dir.join("sessions");
    std::fs::create_dir_all(&root).unwrap();
    let mut h = Hand::new("one");
    h.entry(json!({"role": "user", "content": "go", "timestamp": 1}));
    h.write(&root.join("one.jsonl"));
    std::fs::write(root.join("log.jsonl"), "{\"level\":\"info\"}\nnot json\n").unwrap();
    let r = json_of(&condense(
        &dir,
        &["corpus", "--json", root.to_str().unwrap()],
    ));
    assert_eq!(r["sessions"]["found"], 2);
    assert_eq!(r["sessions"]["unreadable"], 1);
    assert_eq!(r["sessions"]["readOk"], 1);
    // Only the session counts in the per-session figures.
    assert_eq!(
        r["sessionLength"]["all"]["sessions"], 1,
        "{}",
        r["sessionLength"]
    );
    let problems = r["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0]["unreadable"], true);
    assert_eq!(
        problems[0]["first"],
        "not a pi session (no session header, no entry)"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

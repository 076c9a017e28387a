//! The CLI under hostile file systems and concurrency: symlink cycles in the
//! sessions directory, special files where sessions should be, a blob
//! directory that is a symlink, two compacts at once, and config warnings
//! from `protectedPaths`. Every run is bounded: a hang fails the test.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{fixture, raw_fixture_text};

const LIMIT: Duration = Duration::from_secs(60);

/// Runs `condense` with `agent` as the agent directory, killing it after
/// [`LIMIT`] (then the output says so and the test fails on it).
fn condense(agent: &Path, args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_condense"))
        .args(args)
        .env("PI_CODING_AGENT_DIR", agent)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("condense runs");
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "condense {args:?} still running after {LIMIT:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn json_of(out: &Output) -> Value {
    assert!(out.status.success(), "{}", stderr(out));
    serde_json::from_slice(&out.stdout).expect("json")
}

#[test]
fn session_lookup_survives_symlink_cycles() {
    let root = tempfile::tempdir().expect("tempdir");
    let agent = root.path().join("agent");
    let project = agent.join("sessions").join("--w--");
    std::fs::create_dir_all(&project).expect("dirs");
    let id = "0190f5a1-0000-7000-8000-00000000beef";
    std::fs::copy(fixture(), project.join(format!("2026-01-01_{id}.jsonl"))).expect("copy");
    // Two links back up the tree: a walk that follows them never ends.
    std::os::unix::fs::symlink("..", project.join("up")).expect("symlink");
    std::os::unix::fs::symlink("../..", project.join("upup")).expect("symlink");

    let by_latest = json_of(&condense(&agent, &["status", "--latest", "--json"]));
    let by_id = json_of(&condense(&agent, &["status", id, "--json"]));
    assert_eq!(by_latest["session"], by_id["session"]);
    assert!(by_id["session"]
        .as_str()
        .is_some_and(|s| s.ends_with(&format!("_{id}.jsonl"))));
}

#[test]
fn special_files_are_refused_and_a_corpus_scan_goes_on() {
    let root = tempfile::tempdir().expect("tempdir");
    let agent = root.path().join("agent");
    let corpus = root.path().join("corpus");
    std::fs::create_dir_all(&corpus).expect("dirs");
    std::fs::copy(fixture(), corpus.join("good.jsonl")).expect("copy");
    let made = Command::new("mkfifo")
        .arg(corpus.join("fifo.jsonl"))
        .status()
        .expect("mkfifo");
    assert!(made.success());
    std::os::unix::fs::symlink("/dev/zero", corpus.join("zero.jsonl")).expect("symlink");

    let report = json_of(&condense(
        &agent,
        &["corpus", corpus.to_str().expect("utf-8"), "--json"],
    ));
    assert_eq!(report["sessions"]["found"], 3);
    assert_eq!(report["sessions"]["unreadable"], 2);
    assert_eq!(
        report["sessions"]["readOk"].as_u64().unwrap_or(0)
            + report["sessions"]["withProblems"].as_u64().unwrap_or(0),
        1,
        "the good session is still measured: {report}"
    );
    let problems = report["problems"].as_array().expect("problems");
    for name in ["fifo.jsonl", "zero.jsonl"] {
        let p = problems
            .iter()
            .find(|p| p["path"].as_str().is_some_and(|s| s.ends_with(name)))
            .unwrap_or_else(|| panic!("{name} named: {report}"));
        assert_eq!(p["unreadable"], true);
        assert!(
            p["first"]
                .as_str()
                .is_some_and(|s| s.contains("not a regular file")),
            "{p}"
        );
    }

    for target in [
        "/dev/zero",
        corpus.join("fifo.jsonl").to_str().expect("utf-8"),
    ] {
        for cmd in ["render", "status", "compact"] {
            let out = condense(&agent, &[cmd, target]);
            assert_eq!(
                out.status.code(),
                Some(2),
                "{cmd} {target}: {}",
                stderr(&out)
            );
            assert!(
                stderr(&out).contains("not a regular file"),
                "{cmd} {target}: {}",
                stderr(&out)
            );
        }
    }
    // A directory replay passes them by too: it read each file's head to
    // tell a Codex rollout, and waited on the FIFO for a writer.
    let report = json_of(&condense(
        &agent,
        &[
            "simulate",
            corpus.to_str().expect("utf-8"),
            "--json",
            "--policy",
            "none",
        ],
    ));
    assert_eq!(report["sessions"].as_array().map(Vec::len), Some(1));
    let unreadable = report["unreadable"].as_array().expect("unreadable");
    for name in ["fifo.jsonl", "zero.jsonl"] {
        assert!(
            unreadable.iter().any(|u| u
                .as_str()
                .is_some_and(|s| s.contains(name) && s.contains("not a regular file"))),
            "{name}: {report}"
        );
    }
    let good = corpus.join("good.jsonl");
    let good = good.to_str().expect("utf-8");
    for target in [
        "/dev/zero",
        corpus.join("fifo.jsonl").to_str().expect("utf-8"),
    ] {
        // Each would block or never end the read (`simulate` read its
        // `--settings` whole, and hung on both).
        for args in [
            vec!["status", "--settings", target, "good"],
            vec!["simulate", good, "--settings", target],
            vec!["simulate", target],
        ] {
            let out = condense(&agent, &args);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
            assert!(
                stderr(&out).contains("not a regular file"),
                "{args:?}: {}",
                stderr(&out)
            );
        }
    }
}

/// A session whose index records one spill at `spill_path`.
fn session_with_spill(dir: &Path, id: &str, spill_path: &str) -> PathBuf {
    let path = dir.join(format!("{id}.jsonl"));
    let header = json!({"type": "session", "version": 3, "id": id,
        "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"});
    let record = json!({"toolCallId": "call_1", "toolName": "bash", "args": {"command": "cat"},
        "resultText": "", "isError": false, "turnIndex": 0, "timestamp": 1, "resultTimestamp": 2,
        "spillPath": spill_path, "spillBytes": 99, "resultPreview": "PREVIEW ONLY"});
    let index = json!({"type": "custom", "customType": "context-prune-index",
        "data": {"toolCalls": [record]}, "id": "0000aaaa", "parentId": null,
        "timestamp": "2026-01-01T00:00:01.000Z"});
    std::fs::write(&path, format!("{header}\n{index}\n")).expect("session");
    path
}

#[test]
fn query_never_reads_through_a_symlinked_blob_directory() {
    let root = tempfile::tempdir().expect("tempdir");
    let agent = root.path().join("agent");
    let id = "0190f5a1-0000-7000-8000-00000000c0de";
    let path = session_with_spill(root.path(), id, "/etc/passwd");
    std::os::unix::fs::symlink("/", root.path().join(format!("{id}-blobs"))).expect("symlink");
    let out = condense(&agent, &["query", path.to_str().expect("utf-8"), "call_1"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!text.contains("root:"), "/etc/passwd leaked: {text}");
    assert!(text.trim_end().ends_with("PREVIEW ONLY"), "{text}");
}

/// A session with one pending tool output over the spill threshold.
fn session_with_big_output(dir: &Path, id: &str, cwd: &Path, bytes: usize) -> PathBuf {
    let path = dir.join(format!("{id}.jsonl"));
    let big: String = "line of a long build log\n".repeat(bytes / 25 + 1);
    let lines = [
        json!({"type": "session", "version": 3, "id": id,
            "timestamp": "2026-01-01T00:00:00.000Z", "cwd": cwd}),
        json!({"type": "message", "id": "00000001", "parentId": null, "timestamp": "2026-01-01T00:00:01.000Z",
            "message": {"role": "user", "content": "build it", "timestamp": 1}}),
        json!({"type": "message", "id": "00000002", "parentId": "00000001", "timestamp": "2026-01-01T00:00:02.000Z",
            "message": {"role": "assistant", "content": [{"type": "toolCall", "id": "call_1", "name": "bash",
                "arguments": {"command": "make"}}], "stopReason": "toolUse", "timestamp": 2}}),
        json!({"type": "message", "id": "00000003", "parentId": "00000002", "timestamp": "2026-01-01T00:00:03.000Z",
            "message": {"role": "toolResult", "toolCallId": "call_1", "toolName": "bash",
                "content": [{"type": "text", "text": big}], "isError": false, "timestamp": 3}}),
        json!({"type": "message", "id": "00000004", "parentId": "00000003", "timestamp": "2026-01-01T00:00:04.000Z",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "Built."}],
                "stopReason": "stop", "timestamp": 4}}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, text).expect("session");
    path
}

#[test]
fn compact_never_writes_through_a_symlinked_blob_directory() {
    let root = tempfile::tempdir().expect("tempdir");
    let agent = root.path().join("agent");
    let outside = root.path().join("outside");
    std::fs::create_dir_all(&outside).expect("outside");
    let id = "0190f5a1-0000-7000-8000-00000000f00d";
    let path = session_with_big_output(root.path(), id, Path::new("/w"), 200_000);
    std::os::unix::fs::symlink(&outside, root.path().join(format!("{id}-blobs"))).expect("link");
    let report = json_of(&condense(
        &agent,
        &["compact", path.to_str().expect("utf-8"), "--json"],
    ));
    assert_eq!(report["spilledOutputs"], 0, "{report}");
    assert!(
        report["notices"].as_array().is_some_and(|n| n
            .iter()
            .any(|n| n.as_str().is_some_and(|s| s.contains("symlink")))),
        "{report}"
    );
    assert_eq!(
        std::fs::read_dir(&outside).expect("outside").count(),
        0,
        "nothing written through the link"
    );
}

#[test]
fn a_session_id_too_long_for_a_file_name_still_spills() {
    let root = tempfile::tempdir().expect("tempdir");
    let agent = root.path().join("agent");
    let id = "i".repeat(250);
    let path = session_with_big_output(root.path(), "long", Path::new("/w"), 200_000);
    // The file name is short; the header's id is the long one.
    let text = std::fs::read_to_string(&path).expect("session").replacen(
        r#""id":"long""#,
        &format!(r#""id":"{id}""#),
        1,
    );
    std::fs::write(&path, text).expect("session");
    let p = path.to_str().expect("utf-8");
    let report = json_of(&condense(&agent, &["compact", p, "--json"]));
    assert_eq!(report["spilledOutputs"], 1, "{report}");
    let out = condense(&agent, &["query", p, "call_1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("line of a long build log\nline of a long build log"),
        "the spilled output reads back"
    );
}

/// Counts of what a session's condense entries record, to find anything
/// written twice.
fn written_twice(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).expect("session");
    let mut seen = std::collections::HashMap::<String, usize>::new();
    for line in text.lines() {
        let Ok(e) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        match e["customType"].as_str() {
            Some("context-prune-index") => {
                for r in e["data"]["toolCalls"].as_array().into_iter().flatten() {
                    let key = format!(
                        "index {}@{}",
                        r["toolCallId"].as_str().unwrap_or(""),
                        r["resultTimestamp"]
                    );
                    *seen.entry(key).or_default() += 1;
                }
            }
            Some("context-prune-chain") => {
                let key = format!("chain {}", e["data"]["startUserTimestamp"]);
                *seen.entry(key).or_default() += 1;
            }
            _ => {}
        }
    }
    seen.into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(k, n)| format!("{k} x{n}"))
        .collect()
}

/// [`raw_fixture_text`] with a large user message first, so reading and
/// parsing the file takes long enough for a second compact to start while
/// the first one runs.
fn padded_session_text() -> String {
    let raw = raw_fixture_text();
    let mut lines: Vec<String> = raw.lines().map(str::to_owned).collect();
    let mut first: Value = serde_json::from_str(&lines[1]).expect("entry");
    let pad = json!({"type": "message", "id": "0pad0pad", "parentId": null,
        "timestamp": first["timestamp"],
        "message": {"role": "user", "content": "padding line\n".repeat(200_000), "timestamp": 1}});
    first["parentId"] = json!("0pad0pad");
    lines[1] = first.to_string();
    lines.insert(1, pad.to_string());
    lines.join("\n") + "\n"
}

#[test]
fn two_compacts_at_once_write_the_work_once() {
    let root = tempfile::tempdir().expect("tempdir");
    let agent = root.path().join("agent");
    let raw = padded_session_text();
    // The second compact starts at staggered points of the first one's run
    // (measured by a read of the same file), from together to well after.
    let probe = root.path().join("probe.jsonl");
    std::fs::write(&probe, &raw).expect("probe");
    let start = Instant::now();
    json_of(&condense(
        &agent,
        &["status", probe.to_str().expect("utf-8"), "--json"],
    ));
    let read_ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(1000);
    for round in 0..12u64 {
        let path = root.path().join(format!("round{round}.jsonl"));
        std::fs::write(&path, &raw).expect("session");
        let p = path.to_str().expect("utf-8").to_owned();
        let spawn = |delay_ms: u64| {
            let (agent, p) = (agent.clone(), p.clone());
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(delay_ms));
                condense(&agent, &["compact", &p, "--force", "--json"])
            })
        };
        let a = spawn(0);
        let b = spawn(read_ms * round / 4);
        let outs = [a.join().expect("a"), b.join().expect("b")];
        let mut written = 0;
        for out in &outs {
            if out.status.success() {
                let r: Value = serde_json::from_slice(&out.stdout).expect("json");
                written += usize::from(r["written"] == true);
            } else {
                // Only the lock may turn one away.
                let err = stderr(out);
                assert!(
                    err.contains("locked") || err.contains("another condense process"),
                    "{err}"
                );
            }
        }
        assert_eq!(written, 1, "round {round}: exactly one compact wrote");
        let twice = written_twice(&path);
        assert!(twice.is_empty(), "round {round}: written twice: {twice:?}");
    }
}

#[test]
fn compact_refuses_a_session_whose_directory_a_pi_works_in() {
    let root = tempfile::tempdir().expect("tempdir");
    let agent = root.path().join("agent");
    let cwd = root.path().join("project");
    std::fs::create_dir_all(&cwd).expect("cwd");
    let path = session_with_big_output(root.path(), "s-pi", &cwd, 100);
    let before = std::fs::read(&path).expect("session");
    // A stand-in process named `pi`, running in the session's directory
    // (the way pi 1.6 runs: no descriptor of the session stays open).
    let bin = root.path().join("bin");
    std::fs::create_dir_all(&bin).expect("bin");
    std::os::unix::fs::symlink("/bin/sleep", bin.join("pi")).expect("pi link");
    let mut pi = Command::new(bin.join("pi"))
        .arg("30")
        .current_dir(&cwd)
        .spawn()
        .expect("stand-in pi");
    std::thread::sleep(Duration::from_millis(200));
    let p = path.to_str().expect("utf-8");
    let out = condense(&agent, &["compact", p]);
    let forced = condense(&agent, &["compact", p, "--dry-run", "--force", "--json"]);
    let _ = pi.kill();
    let _ = pi.wait();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("pi (process"), "{}", stderr(&out));
    assert_eq!(
        std::fs::read(&path).expect("session"),
        before,
        "file intact"
    );
    assert!(forced.status.success(), "{}", stderr(&forced));
}

#[test]
fn protected_path_warnings_are_printed() {
    let root = tempfile::tempdir().expect("tempdir");
    let agent = root.path().join("agent");
    std::fs::create_dir_all(&agent).expect("agent");
    std::fs::write(
        agent.join("settings.json"),
        json!({"contextPrune": {"protectedPaths": ["docs\\runbooks\\**", "**/skills/**/*.md"]}})
            .to_string(),
    )
    .expect("settings");
    let session = fixture();
    let s = session.to_str().expect("utf-8");
    for args in [vec!["status", s], vec!["render", s]] {
        let out = condense(&agent, &args);
        assert!(out.status.success(), "{}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("condense: warning: contextPrune.protectedPaths: pattern \"docs\\\\runbooks\\\\**\" contains `\\`"),
            "{args:?}: {err}"
        );
    }
    let corpus = root.path().join("corpus");
    std::fs::create_dir_all(&corpus).expect("corpus");
    std::fs::copy(&session, corpus.join("s.jsonl")).expect("copy");
    let out = condense(
        &agent,
        &["corpus", corpus.to_str().expect("utf-8"), "--json"],
    );
    assert!(
        stderr(&out).contains("condense: warning: contextPrune.protectedPaths: pattern"),
        "{}",
        stderr(&out)
    );
}

/// `condense COMMAND <the fixture>` with `settings.json` holding `text`.
fn with_settings(text: &str, command: &[&str]) -> Output {
    let root = tempfile::tempdir().expect("tempdir");
    let agent = root.path().join("agent");
    std::fs::create_dir_all(&agent).expect("agent");
    std::fs::write(agent.join("settings.json"), text).expect("settings");
    let session = fixture();
    let mut args = command.to_vec();
    args.push(session.to_str().expect("utf-8"));
    condense(&agent, &args)
}

#[test]
fn settings_with_a_lone_surrogate_read_as_pi_reads_them() {
    // Half an emoji, as `JSON.stringify` writes it; serde alone refuses it.
    let text = r#"{"contextPrune": {"protectedPaths": ["notes\ud83d\\**"]}}"#;
    for command in ["status", "render"] {
        let out = with_settings(text, &[command]);
        assert!(out.status.success(), "{command}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("pattern \"notes\u{FFFD}\\\\**\" contains `\\`"),
            "{command}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn a_number_past_f64_in_settings_reads_as_the_null_pi_sends() {
    // `JSON.parse` reads it as Infinity and the shim's `JSON.stringify`
    // sends `null`; serde alone refuses the whole file.
    let out = with_settings(
        r#"{"contextPrune": {"minBatchChars": 1e400, "spillThreshold": 5000}}"#,
        &["status", "--json"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("contextPrune.minBatchChars: invalid value null; using 1000"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn settings_that_are_no_object_read_as_defaults_with_a_warning() {
    for text in [r#"[{"contextPrune": {"enabled": false}}]"#, "42", "null"] {
        let out = with_settings(text, &["status"]);
        assert!(out.status.success(), "{text}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("the settings are not a JSON object; using the defaults"),
            "{text}: {}",
            stderr(&out)
        );
    }
    // An object without the block is pi's ordinary case: no warning.
    let out = with_settings(r#"{"theme": "dark"}"#, &["status"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
}

/// The largest `VmHWM` (peak resident set) seen while `condense` runs.
fn peak_rss_kib(agent: &Path, args: &[&str]) -> (Output, u64) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_condense"))
        .args(args)
        .env("PI_CODING_AGENT_DIR", agent)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("condense runs");
    let status = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        let hwm = std::fs::read_to_string(&status)
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmHWM:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            })
            .unwrap_or(0);
        peak = peak.max(hwm);
        assert!(start.elapsed() < LIMIT * 5, "compact still running");
        std::thread::sleep(Duration::from_millis(5));
    }
    (child.wait_with_output().expect("output"), peak)
}

/// A compact holds a giant output about twice (the file, which messages
/// share, and the output's text to spill), not seven times.
#[test]
fn compacting_a_giant_output_keeps_memory_bounded() {
    let root = tempfile::tempdir().expect("tempdir");
    let agent = root.path().join("agent");
    let path = session_with_big_output(root.path(), "giant", Path::new("/w"), 24 << 20);
    let file_kib = std::fs::metadata(&path).expect("session").len() / 1024;
    let (out, peak) = peak_rss_kib(
        &agent,
        &["compact", path.to_str().expect("utf-8"), "--json"],
    );
    let report = json_of(&out);
    assert_eq!(report["spilledOutputs"], 1, "{report}");
    // Twice the file, plus the process's own few MB, plus slack.
    let bound = file_kib * 3;
    assert!(
        peak > 0 && peak < bound,
        "peak RSS {peak} KiB for a {file_kib} KiB session (bound {bound} KiB)"
    );
}

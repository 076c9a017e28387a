//! Absurd numbers on the command line: a clear usage error, or a
//! documented cap, never a hang or an out-of-memory.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `condense ARGS`, killed after a minute (a hang fails the test).
fn condense(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_condense"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("condense {args:?} did not end within a minute");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn session(dir: &std::path::Path) -> String {
    let path = dir.join("s.jsonl");
    let out = condense(&[
        "gen",
        "--tokens",
        "8000",
        "--seed",
        "3",
        "-o",
        path.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    path.to_str().unwrap().to_owned()
}

#[test]
fn prices_past_the_cap_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let s = session(dir.path());
    for flag in [
        "--write-price",
        "--output-price",
        "--summarizer-price",
        "--usd-per-mtok",
    ] {
        let out = condense(&[
            "simulate",
            &s,
            flag,
            "1e308",
            "--svg",
            dir.path().join("c.svg").to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(1), "{flag}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("from 0 to 1000000"),
            "{flag}"
        );
    }
}

#[test]
fn an_llm_summary_size_past_the_cap_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let s = session(dir.path());
    let out = condense(&["simulate", &s, "--summarizer", "llm:18446744073709551615"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("1 to 100000"));
    assert!(
        condense(&["simulate", &s, "--summarizer", "llm:100000", "--json"])
            .status
            .success()
    );
}

#[test]
fn token_coefficients_out_of_range_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let s = session(dir.path());
    for args in [
        ["--tokens-per-message", "-100000"],
        ["--tokens-per-message", "1e300"],
        ["--tokens-per-char", "1e308"],
    ] {
        let mut all = vec!["simulate", &s];
        all.extend(args);
        assert_eq!(condense(&all).status.code(), Some(1), "{args:?}");
    }
}

#[test]
fn jobs_are_capped_by_the_files_and_the_cores() {
    let dir = tempfile::tempdir().unwrap();
    let s = session(dir.path());
    let out = condense(&["simulate", &s, "--jobs", "1000000000", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = condense(&[
        "corpus",
        dir.path().to_str().unwrap(),
        "--jobs",
        "1000000000",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn calibration_on_absurd_recorded_usage_ends() {
    let dir = tempfile::tempdir().unwrap();
    let s = session(dir.path());
    let text = std::fs::read_to_string(&s).unwrap();
    for huge in ["1000000000", "18446744073709551"] {
        let file = dir.path().join(format!("huge{huge}.jsonl"));
        std::fs::write(
            &file,
            text.replace("\"input\":", &format!("\"input\":{huge}")),
        )
        .unwrap();
        let out = condense(&["simulate", file.to_str().unwrap(), "--calibrate"]);
        assert!(
            out.status.success() || out.status.code() == Some(2),
            "{huge}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn a_generated_session_past_the_cap_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = condense(&[
        "gen",
        "--tokens",
        "1000000000000",
        "-o",
        dir.path().join("g.jsonl").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("20000000"));
}

#[test]
fn u64_sized_usage_does_not_wrap_the_status_figures() {
    let dir = tempfile::tempdir().unwrap();
    let s = session(dir.path());
    let text = std::fs::read_to_string(&s).unwrap();
    let file = dir.path().join("u64.jsonl");
    let mut out = String::new();
    for line in text.lines() {
        out.push_str(&line.replace("\"input\":", "\"input\":18446744073709551"));
        out.push('\n');
    }
    std::fs::write(&file, out).unwrap();
    let status = Command::new(env!("CARGO_BIN_EXE_condense"))
        .args(["status", file.to_str().unwrap()])
        .env("PI_CODING_AGENT_DIR", dir.path())
        .output()
        .unwrap();
    assert!(status.status.success());
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(!text.contains("18446744073709"), "{text}");
    assert!(!text.contains("saved -"), "{text}");
    // Left out, and said so: not silently.
    let problems = String::from_utf8_lossy(&status.stderr);
    assert!(
        problems.contains("call(s) left out of the economics"),
        "{problems}"
    );
    let clean = Command::new(env!("CARGO_BIN_EXE_condense"))
        .args(["status", &s])
        .env("PI_CODING_AGENT_DIR", dir.path())
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&clean.stderr).contains("left out of the economics"),
        "{}",
        String::from_utf8_lossy(&clean.stderr)
    );
}

#[test]
fn a_settings_file_past_the_bounds_is_warned_about_by_key() {
    let dir = tempfile::tempdir().unwrap();
    let s = session(dir.path());
    let settings = dir.path().join("settings.json");
    std::fs::write(
        &settings,
        r#"{"contextPrune": {"enabled": true, "economy": {"maxExcess": 1e308, "summarizerPrice": 1e308, "minCacheableTokens": 2.7}}}"#,
    )
    .unwrap();
    let out = condense(&[
        "simulate",
        &s,
        "--settings",
        settings.to_str().unwrap(),
        "--policy",
        "settings",
    ]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    for key in ["maxExcess", "summarizerPrice", "minCacheableTokens"] {
        assert!(
            err.contains(&format!("economy.{key}")),
            "{key} not named: {err}"
        );
    }
}

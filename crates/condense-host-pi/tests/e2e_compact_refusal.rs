//! `condense compact` beside a real pi that is in the middle of a session.
//!
//! pi 1.6 appends with `appendFileSync` (open, write, close): no descriptor
//! of the session stays open and pi takes no lock, so a compact that only
//! looked for open descriptors wrote behind pi's back, and pi's next entry
//! (parented on pi's in-memory leaf) left every condense entry off the
//! branch. With condense loaded, its sidecar holds a shared lock on the
//! session file for as long as pi runs it; without condense, the CLI refuses
//! a session whose directory a pi process works in.
//!
//! Needs Node 22 and pi (`support::pi_env::require_pi`), and the `condense`
//! binary (built by `cargo test --workspace`; skipped with a message if it
//! is missing). `CONDENSE_SKIP_E2E=1` skips it.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::json;
use support::fake_llm::{FakeLlm, Reply};
use support::pi_env::{require_pi, PiEnv};
use support::scenario::{condense_settings, extension_dir, sidecar_bin};

/// How long the fake LLM holds pi's second call: pi is mid-turn meanwhile.
const HELD: Duration = Duration::from_secs(12);

/// The `condense` CLI next to the sidecar, if it was built.
fn condense_bin() -> Option<PathBuf> {
    let bin = sidecar_bin().with_file_name(format!("condense{}", std::env::consts::EXE_SUFFIX));
    if bin.is_file() {
        Some(bin)
    } else {
        eprintln!(
            "skipped: {} is not built (cargo test --workspace builds it)",
            bin.display()
        );
        None
    }
}

fn compact(bin: &Path, pi: &PiEnv, session: &Path, extra: &[&str]) -> Output {
    Command::new(bin)
        .arg("compact")
        .arg(session)
        .args(extra)
        .env("PI_CODING_AGENT_DIR", &pi.agent_dir)
        .output()
        .expect("condense runs")
}

/// Waits until pi has persisted the first tool turn and is waiting for the
/// held second LLM answer; returns the session file.
fn wait_mid_turn(pi: &PiEnv, llm: &FakeLlm) -> PathBuf {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let file = pi.session_files().into_iter().next();
        if let Some(file) = file {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            if text.contains("\"toolResult\"") && llm.main_requests().len() >= 2 {
                return file;
            }
        }
        assert!(
            Instant::now() < deadline,
            "pi never reached its second call"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn script() -> FakeLlm {
    FakeLlm::start([
        Reply::tool_call("call_a", "read", json!({"path": "a.txt"})).with_text("Reading a."),
        Reply::text("Done.").with_delay(HELD),
    ])
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn compact_refuses_a_session_a_running_pi_with_condense_holds() {
    let Some(install) = require_pi() else {
        return;
    };
    let Some(bin) = condense_bin() else {
        return;
    };
    let llm = script();
    let pi = PiEnv::new(install, &llm.base_url())
        .with_settings(condense_settings())
        .with_extension(extension_dir())
        .with_env("CONDENSE_BIN", sidecar_bin().to_string_lossy());
    std::fs::write(pi.work_dir.join("a.txt"), "alpha\n".repeat(2000)).expect("a.txt");

    std::thread::scope(|scope| {
        let run = scope.spawn(|| pi.prompt("Read a.txt."));
        let session = wait_mid_turn(&pi, &llm);
        let before = std::fs::read(&session).expect("session");

        let refused = compact(&bin, &pi, &session, &["--json"]);
        // `--force` skips the process checks, never the sidecar's lock.
        let forced = compact(&bin, &pi, &session, &["--force", "--json"]);
        let during = std::fs::read(&session).expect("session");

        let run = run.join().expect("pi thread");
        run.assert_success();
        assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
        assert_eq!(forced.status.code(), Some(2), "{}", stderr(&forced));
        assert!(stderr(&forced).contains("locked"), "{}", stderr(&forced));
        assert_eq!(during, before, "compact wrote nothing while pi ran");
        let after = std::fs::read(&session).expect("session");
        assert!(after.starts_with(&before), "pi only appended after it");
    });

    // Once pi has exited, the session is free.
    let session = pi.session_files().into_iter().next().expect("session");
    let out = compact(&bin, &pi, &session, &["--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn compact_refuses_a_session_whose_directory_a_running_pi_works_in() {
    let Some(install) = require_pi() else {
        return;
    };
    let Some(bin) = condense_bin() else {
        return;
    };
    let llm = script();
    // No condense extension: nothing holds the file, no descriptor stays open.
    let pi = PiEnv::new(install, &llm.base_url());
    std::fs::write(pi.work_dir.join("a.txt"), "alpha\n".repeat(2000)).expect("a.txt");

    std::thread::scope(|scope| {
        let run = scope.spawn(|| pi.prompt("Read a.txt."));
        let session = wait_mid_turn(&pi, &llm);
        let before = std::fs::read(&session).expect("session");
        let refused = compact(&bin, &pi, &session, &["--json"]);
        let during = std::fs::read(&session).expect("session");
        let run = run.join().expect("pi thread");
        run.assert_success();
        assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
        assert!(
            stderr(&refused).contains("pi (process"),
            "{}",
            stderr(&refused)
        );
        assert_eq!(during, before, "compact wrote nothing while pi ran");
    });
}

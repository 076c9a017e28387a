//! Playing the session: the scripted server, pi with or without the
//! extension, the two runs; and `condense simulate` on the file pi wrote,
//! priced with the same profile.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use condense_core::{PriceProfile, ProfileOverrides};
use condense_summarizer::Extractive;
use serde_json::{json, Value};

use crate::support::cli::simulate_json;
use crate::support::fake_llm::{message_text, FakeLlm, Reply};
use crate::support::pi_env::{require_pi, PiEnv};
use crate::support::scenario::{big_file, extension_dir, sidecar_bin};
use crate::{IDLE, PER_CHAR, PER_MESSAGE, TTL_S};

pub use crate::support::cli::condense_bin;

/// `condense simulate --json` on `session` under `policy`, with `extra`
/// options: its billing fields for that policy.
pub fn simulate_with(session: &Path, policy: &str, overhead: u64, extra: &[&str]) -> Value {
    let mut args: Vec<OsString> = ["--per-call", "--policy", policy, "--ttl"]
        .iter()
        .map(OsString::from)
        .collect();
    args.push(TTL_S.to_string().into());
    args.push("--tokens-per-char".into());
    args.push(PER_CHAR.to_string().into());
    args.push("--tokens-per-message".into());
    args.push(PER_MESSAGE.to_string().into());
    args.push("--overhead".into());
    args.push(overhead.to_string().into());
    args.extend(extra.iter().map(OsString::from));
    args.push(session.into());
    let report = simulate_json(&condense_bin(), args);
    report["sessions"][0]["policies"][policy].clone()
}

/// A pi environment on `llm` with `settings`, the extension loaded when
/// `condense` is true.
pub fn pi_env(llm: &FakeLlm, settings: Value, condense: bool) -> Option<PiEnv> {
    let install = require_pi()?;
    let pi = PiEnv::new(install, &llm.base_url()).with_settings(settings);
    Some(if condense {
        pi.with_extension(extension_dir())
            .with_env("CONDENSE_BIN", sidecar_bin().to_string_lossy())
    } else {
        pi
    })
}

/// Two runs in one session, [`crate::IDLE`] apart: three calls reading two files,
/// then two reading a third. Returns the session file.
pub fn play(pi: &PiEnv, llm: &FakeLlm) -> PathBuf {
    for (name, marker) in [("a.txt", "ALPHA"), ("b.txt", "BRAVO"), ("c.txt", "CHARLIE")] {
        std::fs::write(pi.work_dir.join(name), big_file(marker, 6000)).expect("write");
    }
    let run = pi.prompt("Read a.txt and b.txt.");
    run.assert_success();
    let session = pi.session_file(&run);
    std::thread::sleep(IDLE);
    let run = pi.prompt_in_session(&session, "Now read c.txt.");
    run.assert_success();
    llm.assert_script_consumed();
    session
}

pub fn script() -> Vec<Reply> {
    vec![
        Reply::tool_call("call_a", "read", json!({"path": "a.txt"})),
        Reply::tool_call("call_b", "read", json!({"path": "b.txt"})),
        Reply::text("Read both."),
        Reply::tool_call("call_c", "read", json!({"path": "c.txt"})),
        Reply::text("Read it."),
    ]
}

/// The scripted server of [`script`], answering summaries as the extractive
/// summarizer does.
pub fn server() -> FakeLlm {
    let llm = FakeLlm::start(script());
    llm.set_summary_responder(|body| {
        let user: String = body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["role"] == "user")
            .map(message_text)
            .collect();
        Reply::text(Extractive::answer(&user))
    });
    llm
}

/// The pricing profile: `anthropic-5m` with the test's TTL.
pub fn profile() -> PriceProfile {
    PriceProfile::named("anthropic-5m")
        .and_then(|p| {
            p.with_overrides(&ProfileOverrides {
                ttl_seconds: Some(TTL_S as f64),
                ..ProfileOverrides::default()
            })
        })
        .expect("the profile")
}

//! The simulator agrees with reality (issue 12): a session played through
//! real pi against the scripted LLM server, then `condense simulate` on the
//! session file pi persisted, under the policy the run used. The server
//! records every prompt it received and when; the test prices those prompts
//! with the simulator's token model and core's `bill_call` (the prefix
//! shared with the previous prompt is a cache read if within the TTL, the
//! rest a write), and the simulator's billed figures must be the same.
//!
//! Time: pi stamps each call when it starts the request (what `simulate`
//! reads), the server when it reads it. Both are real time, so the session
//! is played with an idle pause between two runs, and priced with a TTL
//! ([`TTL_S`]) far from every real gap: the calls inside a run are a
//! fraction of a second apart (warm), the pause ([`IDLE`]) is longer than
//! the TTL (cold). The test checks that separation before comparing, so the
//! milliseconds between pi's stamp and the server's read cannot decide a
//! call.
//!
//! The prompts are counted as the simulator counts a session's messages:
//! the content that reaches the model (texts, tool-call names and
//! arguments, tool output) at [`PER_CHAR`] tokens per UTF-16 unit plus
//! [`PER_MESSAGE`] per message, rounded per message; the fixed overhead is
//! the system prompt and the tool definitions the server received, passed
//! to `simulate` as `--overhead` (the session file does not hold them).
//!
//! `condense` is the CLI binary next to this crate's sidecar in the target
//! directory: `cargo build -p condense-cli` before running these tests alone
//! (`cargo test --workspace` builds it).

#[path = "../support/mod.rs"]
mod support;

mod compare;
mod pricing;
mod runs;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};
use support::fake_llm::{message_text, RecordedRequest};
use support::pi_env::PiEnv;
use support::scenario::big_file;

use compare::{assert_agrees, check_the_run};
use pricing::{conversation, overhead_tokens, price_received, Received};
use runs::{condense_bin, pi_env, play, profile, server, simulate_with};

/// The cache's time to live the session is priced with (seconds).
const TTL_S: i64 = 6;
/// The pause between the two runs: longer than the TTL.
const IDLE: Duration = Duration::from_secs(8);
/// Calls closer than this are warm, farther than [`COLD_AFTER_MS`] cold;
/// nothing may fall in between (see the module docs).
const WARM_WITHIN_MS: i64 = 3_000;
const COLD_AFTER_MS: i64 = 7_000;
/// The token model (`simulate`'s calibrated defaults, passed explicitly).
const MODEL: support::fake_llm::measure::TokenModel =
    support::fake_llm::measure::TokenModel::SIMULATE_DEFAULTS;
const PER_CHAR: f64 = MODEL.per_char;
const PER_MESSAGE: f64 = MODEL.per_message;

/// Plays the session under `settings` (the extension loaded when `condense`
/// is true; summaries answered by the extractive summarizer, which is what
/// `simulate` summarizes with), then compares `simulate --policy policy`
/// (with `extra` arguments) with the received prompts. Returns the received
/// totals.
fn agree(
    policy: &str,
    settings: Value,
    condense: bool,
    extra: &[&str],
    check_session: impl FnOnce(&PiEnv, &Path),
) -> Option<Received> {
    let llm = server();
    let pi = pi_env(&llm, settings, condense)?;
    let session = play(&pi, &llm);
    check_session(&pi, &session);
    let requests = llm.requests();
    let main: Vec<RecordedRequest> = llm.main_requests();
    assert_eq!(main.len(), 5);
    assert_eq!(
        check_the_run(&main),
        1,
        "the pause makes exactly one cold call"
    );
    let overhead = overhead_tokens(&main[0]);
    let profile = profile();
    let received = price_received(&requests, &profile, overhead);
    // Both warm and cold calls are exercised.
    let t = &received.totals;
    assert!(t.cache_read > 0 && t.cache_write > t.prompt_tokens / 5);
    assert_agrees(
        policy,
        &simulate_with(&session, policy, overhead, extra),
        &received,
        &profile,
    );
    Some(received)
}

/// No pruning: pi without the extension.
#[test]
fn simulate_none_agrees_with_what_the_server_received() {
    agree(
        "none",
        json!({"compaction": {"enabled": false}}),
        false,
        &[],
        |_, _| {},
    );
}

/// pi-condense's behaviour: the extension with its default trigger (a
/// flush at the final reply), the summaries shown at once.
#[test]
fn simulate_reference_agrees_with_what_the_server_received() {
    let settings = json!({"contextPrune": {"enabled": true, "economy": {"policy": "reference"}}, "compaction": {"enabled": false}});
    if let Some(received) = agree("reference", settings, true, &[], |_, _| {}) {
        assert!(received.totals.summarizer_input > 0, "the run summarized");
    }
}

/// The unbounded cache-aware policy: summaries shown at the switches it
/// decides (the second run's first call, a resume within the time to live
/// the policy plans with, is as warm as the simulator sees it), simulated
/// from a copy of pi's settings.
#[test]
fn simulate_cache_aware_agrees_with_what_the_server_received() {
    let file = std::env::temp_dir().join(format!(
        "condense-e2e-unbounded-settings-{}.json",
        std::process::id()
    ));
    std::fs::write(&file, cache_aware().to_string()).expect("write the settings");
    let path = file.to_string_lossy().into_owned();
    let played = agree(
        "settings",
        cache_aware(),
        true,
        &["--settings", &path],
        status_shows_the_resume_switch,
    );
    let _ = std::fs::remove_file(&file);
    if let Some(received) = played {
        assert!(received.totals.summarizer_input > 0, "the run summarized");
    }
}

/// The default policy, cache-aware bounded against no pruning, across two
/// pi processes: the second run is a resume 8 seconds after the first run's
/// last call, which the provider's cache still holds by the terms the
/// engine plans with (the default five minutes; pi's system prompt carries
/// no clock), so nothing saved pays for the first run's flush and it is
/// held, as the simulator, which sees no process boundary, holds it. The
/// bill is priced at the test's short TTL, so pi's own settings file is
/// simulated (`settings`): the built-in `cache-aware` would plan at that
/// TTL, as condense configured for it would.
#[test]
fn simulate_the_default_agrees_with_what_the_server_received_across_a_resume() {
    let settings = json!({"contextPrune": {"enabled": true}, "compaction": {"enabled": false}});
    let file = std::env::temp_dir().join(format!(
        "condense-e2e-default-settings-{}.json",
        std::process::id()
    ));
    std::fs::write(&file, settings.to_string()).expect("write the settings");
    let path = file.to_string_lossy().into_owned();
    let played = agree(
        "settings",
        settings,
        true,
        &["--settings", &path],
        learned_misses_survive_the_resume,
    );
    let _ = std::fs::remove_file(&file);
    if let Some(received) = played {
        assert_eq!(received.totals.summarizer_input, 0, "the flush was held");
    }
}

/// The default learns the provider's misses from the usage pi records and
/// keeps them in pi's agent directory, where every project's sessions
/// share them (none beside the session): the scripted server reports no cached
/// read, so each of the four calls the engine expected to read a cached
/// prefix (two a run; the first call of each run has none to read, or is
/// priced against the call the branch records) is a miss, and the second
/// pi process went on counting from the first's file.
fn learned_misses_survive_the_resume(env: &PiEnv, session: &Path) {
    let beside = condense_store::misses::misses_dir_in(session.parent().expect("a directory"));
    assert!(!beside.exists(), "{}", beside.display());
    let dir = condense_store::misses::misses_dir_in(&env.agent_dir);
    let history = condense_store::misses::read_history(&dir, "another session");
    assert!(history.skipped.is_empty(), "{:?}", history.skipped);
    let mut seen = condense_core::MissCounts::default();
    for counts in history.others.values() {
        seen.add(counts);
    }
    let misses: u32 = seen.buckets.iter().map(|b| b.1).sum();
    assert_eq!((seen.calls(), u64::from(misses)), (4, 4), "{history:?}");
}

/// `condense status` on the session pi wrote under the cache-aware policy:
/// the second run is a resume seconds after the first run's last call, so
/// its first call is warm, and it switched because showing the first run's
/// summaries there pays (the reads sit near the prompt's end, so the switch
/// rewrites little); its five calls' recorded usage is there, and the last
/// flush waits for a switch.
fn status_shows_the_resume_switch(pi: &PiEnv, session: &Path) {
    let settings = pi.work_dir.join("status-settings.json");
    std::fs::write(&settings, pi.settings().to_string()).expect("write settings");
    let out = Command::new(condense_bin())
        .args(["status", "--json", "--settings"])
        .arg(&settings)
        .arg(session)
        .output()
        .expect("condense status runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status: Value = serde_json::from_slice(&out.stdout).expect("status --json");
    let e = &status["economy"];
    assert_eq!(e["policy"], "cache-aware", "{e}");
    assert_eq!(e["switches"], 1, "{e}");
    assert_eq!(e["switchReasons"], json!({"pays": 1}), "{e}");
    assert_eq!(e["calls"], 5, "{e}");
    // The second run's final reply left its flush (the read of c.txt) to a
    // next run; none came, so nothing was summarized for nothing.
    assert_eq!(e["pending"], 0, "{e}");
}

/// pi's settings for the unbounded cache-aware policy.
fn cache_aware() -> Value {
    json!({
        "contextPrune": {"enabled": true, "economy": {"policy": "cache-aware", "maxExcess": null}},
        "compaction": {"enabled": false},
    })
}

/// The status of the cache-aware session, on its own (the comparison above
/// waits for the simulator).
#[test]
fn status_of_a_cache_aware_session_played_through_pi() {
    let llm = server();
    let Some(pi) = pi_env(&llm, cache_aware(), true) else {
        return;
    };
    let session = play(&pi, &llm);
    status_shows_the_resume_switch(&pi, &session);
}

/// Both runs in one pi process (print mode takes several prompts), so the
/// second run's first call is warm, and pi's agent never reads back what a
/// flush wrote to the session file: the model sees a summary only because
/// condense shows it. Under the cache-aware policy the first run's reply
/// leaves its flush to the second run's start (pi's `before_agent_start`,
/// which pi awaits before it persists the prompt); under the reference
/// policy the reply flushes at once and its summaries are written to the
/// file. The simulator must agree with what the server received. `extra`
/// goes to `simulate`. Returns the received totals, the summarizer's
/// requests and the main ones.
fn agree_in_one_process(
    policy: &str,
    settings: Value,
    extra: &[&str],
) -> Option<(Received, usize, Vec<RecordedRequest>)> {
    let llm = server();
    let pi = pi_env(&llm, settings, true)?.with_args(["Read a.txt and b.txt."]);
    for (name, marker) in [("a.txt", "ALPHA"), ("b.txt", "BRAVO"), ("c.txt", "CHARLIE")] {
        std::fs::write(pi.work_dir.join(name), big_file(marker, 6000)).expect("write");
    }
    let run = pi.prompt("Now read c.txt.");
    run.assert_success();
    llm.assert_script_consumed();
    let session = pi.session_file(&run);
    let requests = llm.requests();
    let main: Vec<RecordedRequest> = llm.main_requests();
    assert_eq!(main.len(), 5);
    assert_eq!(check_the_run(&main), 0, "every call is warm");
    let overhead = overhead_tokens(&main[0]);
    let profile = profile();
    let received = price_received(&requests, &profile, overhead);
    assert_agrees(
        policy,
        &simulate_with(&session, policy, overhead, extra),
        &received,
        &profile,
    );
    Some((received, requests.len() - main.len(), main))
}

/// [`agree_in_one_process`] for pi's `settings`, simulated as the
/// `settings` policy from a copy of them (`name` tells the copies apart),
/// with `extra` arguments to `simulate`.
fn agree_with_settings(
    name: &str,
    settings: Value,
    extra: &[&str],
) -> Option<(Received, usize, Vec<RecordedRequest>)> {
    let file = std::env::temp_dir().join(format!(
        "condense-e2e-{name}-settings-{}.json",
        std::process::id()
    ));
    std::fs::write(&file, settings.to_string()).expect("write the settings");
    let path = file.to_string_lossy().into_owned();
    let mut args = vec!["--settings", path.as_str()];
    args.extend_from_slice(extra);
    let played = agree_in_one_process("settings", settings, &args);
    let _ = std::fs::remove_file(&file);
    played
}

/// Whether a request showed the model a condense summary (a custom
/// message, which pi sends as user text).
fn shows_a_summary(request: &RecordedRequest) -> bool {
    conversation(request)
        .iter()
        .any(|m| m["role"] == "user" && message_text(m).contains("**Summarized tool refs**"))
}

#[test]
fn a_replys_flush_at_the_next_runs_start_agrees_with_what_the_server_received() {
    let Some((received, summary_requests, _)) =
        agree_with_settings("cache-aware", cache_aware(), &[])
    else {
        return;
    };
    // The first run's two reads (one batch each), summarized at the second
    // run's start; the last reply starts no run, so the read of c.txt is
    // never summarized.
    assert!(received.totals.summarizer_input > 0);
    assert_eq!(summary_requests, 2);
}

/// The reference policy in one process: the first run's reply flushes at
/// once and its summaries go to the session file, which pi's agent does not
/// read back; the second run's calls show them all the same (condense does),
/// as a reload would, and the simulator agrees.
#[test]
fn a_replys_flush_written_to_the_file_is_shown_in_the_same_process() {
    let settings = json!({"contextPrune": {"enabled": true, "economy": {"policy": "reference"}}, "compaction": {"enabled": false}});
    let Some((received, summary_requests, main)) = agree_in_one_process("reference", settings, &[])
    else {
        return;
    };
    assert!(received.totals.summarizer_input > 0);
    assert!(
        summary_requests >= 2,
        "the first run's reads were summarized"
    );
    assert!(
        !shows_a_summary(&main[2]),
        "nothing flushed before the reply"
    );
    assert!(shows_a_summary(&main[3]) && shows_a_summary(&main[4]));
}

/// A budget flush at a turn's end, mid-run (a low `autoBudgetThreshold`
/// against the model's 32,000-token window): its summary goes to the
/// session file, and the run's next call shows it.
#[test]
fn a_turn_ends_budget_flush_is_shown_at_the_next_call() {
    let settings = json!({
        "contextPrune": {"enabled": true, "autoBudgetThreshold": 0.05, "economy": {"policy": "reference"}},
        "compaction": {"enabled": false},
    });
    // Simulated with the same settings (the budget trigger is off by default).
    let played = agree_with_settings(
        "budget",
        settings,
        &["--context-window", "32000", "--no-compaction"],
    );
    let Some((_, summary_requests, main)) = played else {
        return;
    };
    assert!(summary_requests >= 1);
    assert!(!shows_a_summary(&main[0]));
    // The read of a.txt was summarized at its turn's end: the next call,
    // still in the first run, shows its summary.
    assert!(
        shows_a_summary(&main[1]),
        "the budget flush's summary is shown"
    );
}

/// The default policy, cache-aware bounded against no pruning with its 2%
/// allowance, both runs in one process: the second run's start is warm,
/// nothing has been saved yet, and 2% of five calls covers no summary, so
/// the first run's flush would be a bet the session cannot cover. It is held: no summarizer call, no summary
/// shown, and the simulator agrees with what the server received.
#[test]
fn the_default_bounded_policy_holds_a_flush_nothing_saved_can_pay_for() {
    let settings = json!({"contextPrune": {"enabled": true}, "compaction": {"enabled": false}});
    let played = agree_with_settings("bounded", settings, &[]);
    let Some((received, summary_requests, main)) = played else {
        return;
    };
    assert_eq!(summary_requests, 0);
    assert_eq!(received.totals.summarizer_input, 0);
    assert!(main.iter().all(|r| !shows_a_summary(r)));
}

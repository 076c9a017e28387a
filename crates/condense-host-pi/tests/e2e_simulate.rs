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
//! directory: `cargo build -p condense-cli` before running this file alone
//! (`cargo test --workspace` builds it).

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use condense_core::{
    bill_call, BillTotals, CallTokens, PreviousCall, PriceProfile, ProfileOverrides,
};
use condense_summarizer::Extractive;
use serde_json::{json, Value};
use support::fake_llm::{message_text, FakeLlm, RecordedRequest, Reply, RequestKind};
use support::pi_env::{require_pi, PiEnv};
use support::scenario::{big_file, extension_dir, sidecar_bin};

/// The cache's time to live the session is priced with (seconds).
const TTL_S: i64 = 6;
/// The pause between the two runs: longer than the TTL.
const IDLE: Duration = Duration::from_secs(8);
/// Calls closer than this are warm, farther than [`COLD_AFTER_MS`] cold;
/// nothing may fall in between (see the module docs).
const WARM_WITHIN_MS: i64 = 3_000;
const COLD_AFTER_MS: i64 = 7_000;
/// The token model (`simulate`'s calibrated defaults, passed explicitly).
const PER_CHAR: f64 = 0.3085;
const PER_MESSAGE: f64 = 34.51;

/// The `condense` binary cargo built next to the sidecar.
fn condense_bin() -> PathBuf {
    let sidecar = sidecar_bin();
    let bin = sidecar
        .parent()
        .map(|d| d.join(format!("condense{}", std::env::consts::EXE_SUFFIX)))
        .unwrap_or_default();
    assert!(
        bin.is_file(),
        "the condense CLI is not built next to the sidecar ({}): run `cargo build -p condense-cli` first",
        bin.display()
    );
    bin
}

fn js_len(text: &str) -> u64 {
    text.encode_utf16().count() as u64
}

/// A chat message's `content`: a string, or parts whose `text` counts.
fn content_units(content: &Value) -> u64 {
    match content {
        Value::String(s) => js_len(s),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .map(js_len)
            .sum(),
        _ => 0,
    }
}

/// What of a received message reaches the model as the simulator measures a
/// session message: its content, and each tool call's name and arguments.
fn message_units(message: &Value) -> u64 {
    let calls: u64 = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            let f = &c["function"];
            js_len(f["name"].as_str().unwrap_or("")) + js_len(f["arguments"].as_str().unwrap_or(""))
        })
        .sum();
    content_units(&message["content"]) + calls
}

fn message_tokens(message: &Value) -> u64 {
    (PER_CHAR * message_units(message) as f64 + PER_MESSAGE)
        .max(0.0)
        .round() as u64
}

fn is_system(message: &Value) -> bool {
    matches!(message["role"].as_str(), Some("system" | "developer"))
}

/// The conversation of a request (the system prompt is the overhead).
fn conversation(request: &RecordedRequest) -> Vec<&Value> {
    request
        .messages()
        .iter()
        .filter(|m| !is_system(m))
        .collect()
}

/// The system prompt and the tool definitions of a request, as sent.
fn fixed_part(request: &RecordedRequest) -> (Vec<&Value>, Value) {
    let system = request.messages().iter().filter(|m| is_system(m)).collect();
    (
        system,
        request.body.get("tools").cloned().unwrap_or(Value::Null),
    )
}

/// Their tokens: the overhead `simulate` is told.
fn overhead_tokens(request: &RecordedRequest) -> u64 {
    let (system, tools) = fixed_part(request);
    let units: u64 = system
        .iter()
        .map(|m| content_units(&m["content"]))
        .sum::<u64>()
        + if tools.is_null() {
            0
        } else {
            js_len(&tools.to_string())
        };
    (PER_CHAR * units as f64).round() as u64
}

/// A text's tokens as the simulator counts a summarizer prompt or answer.
fn text_tokens(text: &str) -> u64 {
    (PER_CHAR * js_len(text) as f64).max(0.0).round() as u64
}

/// What the summarizer was sent (its system and user texts) and answered:
/// the answer is the extractive summarizer's for the user text, as the
/// server's responder gave it.
fn summarizer_work(request: &RecordedRequest) -> (u64, u64) {
    let mut input = 0;
    let mut user = String::new();
    for m in request.messages() {
        let text = message_text(m);
        input += text_tokens(&text);
        if m["role"] == "user" {
            user.push_str(&text);
        }
    }
    (input, text_tokens(&Extractive::answer(&user)))
}

/// The received prompts priced call by call: the shared prefix is the
/// overhead plus the leading messages equal to the previous prompt's; the
/// summarizer's prompts at the profile's summarizer ratio, never cached.
fn price_received(requests: &[RecordedRequest], profile: &PriceProfile, overhead: u64) -> Received {
    let mut totals = BillTotals::default();
    let mut calls = Vec::new();
    for request in requests.iter().filter(|r| r.kind == RequestKind::Summary) {
        let (input, output) = summarizer_work(request);
        totals.add_summarizer(profile, input, output);
    }
    let requests: Vec<&RecordedRequest> = requests
        .iter()
        .filter(|r| r.kind == RequestKind::Main)
        .collect();
    let mut previous: Option<(i64, Vec<&Value>)> = None;
    for request in requests {
        let messages = conversation(request);
        let tokens: Vec<u64> = messages.iter().map(|m| message_tokens(m)).collect();
        let prompt = overhead + tokens.iter().sum::<u64>();
        let shared_prefix = previous.as_ref().map_or(0, |(_, before)| {
            let shared = before
                .iter()
                .zip(&messages)
                .take_while(|(a, b)| a == b)
                .count();
            overhead + tokens[..shared].iter().sum::<u64>()
        });
        let bill = bill_call(
            profile,
            previous
                .as_ref()
                .map(|(at, _)| PreviousCall { at_ms: Some(*at) }),
            CallTokens {
                at_ms: Some(request.received_ms),
                prompt,
                shared_prefix,
                output: 0,
            },
        );
        totals.add_call(prompt, &bill);
        calls.push(ReceivedCall {
            prompt,
            shared_prefix,
            messages: messages
                .iter()
                .zip(&tokens)
                .map(|(m, t)| format!("{} {t}", m["role"].as_str().unwrap_or("?")))
                .collect(),
        });
        previous = Some((request.received_ms, messages));
    }
    Received { totals, calls }
}

/// One received prompt: its tokens, the prefix shared with the previous
/// one, and each message's role and tokens (for a mismatch's report).
struct ReceivedCall {
    prompt: u64,
    shared_prefix: u64,
    messages: Vec<String>,
}

/// The received prompts, priced.
struct Received {
    totals: BillTotals,
    calls: Vec<ReceivedCall>,
}

/// `condense simulate --json` on `session` under `policy`: its billing
/// fields for that policy.
fn simulate(session: &Path, policy: &str, overhead: u64) -> Value {
    simulate_with(session, policy, overhead, &[])
}

/// [`simulate`] with more options.
fn simulate_with(session: &Path, policy: &str, overhead: u64, extra: &[&str]) -> Value {
    let out = Command::new(condense_bin())
        .args([
            "simulate",
            "--json",
            "--per-call",
            "--policy",
            policy,
            "--ttl",
        ])
        .arg(TTL_S.to_string())
        .arg("--tokens-per-char")
        .arg(PER_CHAR.to_string())
        .arg("--tokens-per-message")
        .arg(PER_MESSAGE.to_string())
        .arg("--overhead")
        .arg(overhead.to_string())
        .args(extra)
        .arg(session)
        .output()
        .expect("condense simulate runs");
    assert!(
        out.status.success(),
        "condense simulate failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("simulate --json");
    report["sessions"][0]["policies"][policy].clone()
}

/// A pi environment on `llm` with `settings`, the extension loaded when
/// `condense` is true.
fn pi_env(llm: &FakeLlm, settings: Value, condense: bool) -> Option<PiEnv> {
    let install = require_pi()?;
    let pi = PiEnv::new(install, &llm.base_url()).with_settings(settings);
    Some(if condense {
        pi.with_extension(extension_dir())
            .with_env("CONDENSE_PI_BIN", sidecar_bin().to_string_lossy())
    } else {
        pi
    })
}

/// Two runs in one session, [`IDLE`] apart: three calls reading two files,
/// then two reading a third. Returns the session file.
fn play(pi: &PiEnv, llm: &FakeLlm) -> PathBuf {
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

fn script() -> Vec<Reply> {
    vec![
        Reply::tool_call("call_a", "read", json!({"path": "a.txt"})),
        Reply::tool_call("call_b", "read", json!({"path": "b.txt"})),
        Reply::text("Read both."),
        Reply::tool_call("call_c", "read", json!({"path": "c.txt"})),
        Reply::text("Read it."),
    ]
}

/// The preconditions the comparison rests on: one fixed part for every
/// call, and no gap near the TTL. Returns the number of cold calls after
/// the first.
fn check_the_run(requests: &[RecordedRequest]) -> usize {
    let first = fixed_part(&requests[0]);
    for r in requests {
        assert_eq!(
            fixed_part(r),
            first,
            "the system prompt or tools changed between calls"
        );
    }
    let mut cold = 0;
    for pair in requests.windows(2) {
        let gap = pair[1].received_ms - pair[0].received_ms;
        assert!(
            gap <= WARM_WITHIN_MS || gap >= COLD_AFTER_MS,
            "a gap of {gap} ms is too close to the {TTL_S} s TTL to compare"
        );
        cold += usize::from(gap >= COLD_AFTER_MS);
    }
    cold
}

/// Asserts the simulator's billing of `policy` equals the received prompts
/// priced the same way. Token counts are integers computed the same way on
/// both sides and must be equal; units are sums of the same products in the
/// same order, compared to 1e-6.
fn assert_agrees(policy: &str, simulated: &Value, received: &Received, profile: &PriceProfile) {
    eprintln!(
        "{policy}: simulated prompt {} (read {}, written {}), summarizer {} in / {} out, billed input {}; received prompt {} (read {}, written {}), summarizer {} in / {} out, billed input {:.1}",
        simulated["prompt_tokens"],
        simulated["cache_read_tokens"],
        simulated["cache_write_tokens"],
        simulated["summarizer_input_tokens"],
        simulated["summarizer_output_tokens"],
        simulated["billed_input_units"],
        received.totals.prompt_tokens,
        received.totals.cache_read,
        received.totals.cache_write,
        received.totals.summarizer_input,
        received.totals.summarizer_output,
        received.totals.billed_input_units(profile),
    );
    // Call by call first, so a mismatch names the call and what it held.
    let detail = simulated["calls_detail"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for (i, (sim, got)) in detail.iter().zip(&received.calls).enumerate() {
        let pair = |v: &Value| {
            (
                v["prompt_tokens"].as_u64(),
                v["shared_prefix_tokens"].as_u64(),
            )
        };
        assert_eq!(
            pair(sim),
            (Some(got.prompt), Some(got.shared_prefix)),
            "{policy}: call {i}: simulated (left) vs received (right) prompt and shared prefix; \
             simulated {} messages, received (role tokens): {:?}",
            sim["messages"],
            got.messages
        );
    }
    let received = &received.totals;
    let field = |k: &str| {
        simulated[k]
            .as_u64()
            .unwrap_or_else(|| panic!("{k} in {simulated}"))
    };
    assert_eq!(
        [
            field("calls"),
            field("prompt_tokens"),
            field("peak_prompt_tokens"),
            field("cache_read_tokens"),
            field("cache_write_tokens"),
            field("uncached_tokens"),
        ],
        [
            received.calls,
            received.prompt_tokens,
            received.peak_prompt,
            received.cache_read,
            received.cache_write,
            received.uncached,
        ],
        "{policy}: simulated (left) vs received (right): calls, prompt, peak, read, write, uncached"
    );
    assert_eq!(
        [
            field("summarizer_input_tokens"),
            field("summarizer_output_tokens")
        ],
        [received.summarizer_input, received.summarizer_output],
        "{policy}: summarizer input and output, simulated (left) vs received (right)"
    );
    let units = simulated["input_units"].as_f64().expect("input_units");
    assert!(
        (units - received.input_units).abs() < 1e-6,
        "{policy}: input units simulated {units} vs received {}",
        received.input_units
    );
    let billed = simulated["billed_input_units"]
        .as_f64()
        .expect("billed_input_units");
    assert!(
        (billed - received.billed_input_units(profile)).abs() < 1e-6,
        "{policy}: billed input simulated {billed} vs received {}",
        received.billed_input_units(profile)
    );
    eprintln!(
        "{policy}: {} calls, {} prompt tokens (read {}, written {}, uncached {}), summarizer {} in / {} out, billed input {:.1} units: simulated = received",
        received.calls,
        received.prompt_tokens,
        received.cache_read,
        received.cache_write,
        received.uncached,
        received.summarizer_input,
        received.summarizer_output,
        received.billed_input_units(profile)
    );
}

/// The pricing profile: `anthropic-5m` with the test's TTL.
fn profile() -> PriceProfile {
    PriceProfile::named("anthropic-5m")
        .and_then(|p| {
            p.with_overrides(&ProfileOverrides {
                ttl_seconds: Some(TTL_S as f64),
                ..ProfileOverrides::default()
            })
        })
        .expect("the profile")
}

/// The scripted server of [`script`], answering summaries as the extractive
/// summarizer does.
fn server() -> FakeLlm {
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

/// Plays the session under `settings` (the extension loaded when `condense`
/// is true; summaries answered by the extractive summarizer, which is what
/// `simulate` summarizes with), then compares `simulate --policy policy`
/// with the received prompts. Returns the received totals.
fn agree(
    policy: &str,
    settings: Value,
    condense: bool,
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
        &simulate(&session, policy, overhead),
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
        |_, _| {},
    );
}

/// pi-condense's behaviour: the extension with its default trigger (a
/// flush at the final reply), the summaries shown at once.
#[test]
fn simulate_reference_agrees_with_what_the_server_received() {
    let settings = json!({"contextPrune": {"enabled": true}, "compaction": {"enabled": false}});
    if let Some(received) = agree("reference", settings, true, |_, _| {}) {
        assert!(received.totals.summarizer_input > 0, "the run summarized");
    }
}

/// The cache-aware policy: summaries shown at the switches it decides (the
/// second run is a resume, so its first call may switch for free).
#[test]
fn simulate_cache_aware_agrees_with_what_the_server_received() {
    let settings = cache_aware();
    if let Some(received) = agree(
        "cache-aware",
        settings,
        true,
        status_shows_the_resume_switch,
    ) {
        assert!(received.totals.summarizer_input > 0, "the run summarized");
    }
}

/// `condense status` on the session pi wrote under the cache-aware policy:
/// the second run is a resume, so its first call switched (the summaries of
/// the first run's flush shown then), its five calls' recorded usage is
/// there, and the last flush waits for a switch.
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
    assert_eq!(e["switchReasons"], json!({"resume": 1}), "{e}");
    assert_eq!(e["calls"], 5, "{e}");
    // The second run's final reply left its flush (the read of c.txt) to a
    // next run; none came, so nothing was summarized for nothing.
    assert_eq!(e["pending"], 0, "{e}");
}

fn cache_aware() -> Value {
    json!({
        "contextPrune": {"enabled": true, "economy": {"policy": "cache-aware"}},
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
        agree_in_one_process("cache-aware", cache_aware(), &[])
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
    let settings = json!({"contextPrune": {"enabled": true}, "compaction": {"enabled": false}});
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
        "contextPrune": {"enabled": true, "autoBudgetThreshold": 0.05},
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

/// The cache-aware policy bounded against no pruning (`maxExcess: 0`), both
/// runs in one process: the second run's start is warm and nothing has
/// been saved yet, so the first run's flush would be a bet the session
/// cannot cover. It is held: no summarizer call, no summary shown, and the
/// simulator agrees with what the server received.
#[test]
fn a_bounded_policy_holds_a_flush_nothing_saved_can_pay_for() {
    let settings = json!({
        "contextPrune": {"enabled": true, "economy": {"policy": "cache-aware", "maxExcess": 0}},
        "compaction": {"enabled": false},
    });
    let played = agree_with_settings("bounded", settings, &[]);
    let Some((received, summary_requests, main)) = played else {
        return;
    };
    assert_eq!(summary_requests, 0);
    assert_eq!(received.totals.summarizer_input, 0);
    assert!(main.iter().all(|r| !shows_a_summary(r)));
}

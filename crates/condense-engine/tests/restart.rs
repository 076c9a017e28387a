//! A sidecar restarted mid-session (a new engine started from the session
//! file the run has left so far, as after a crash or a resume) carries on
//! through further calls, flushes and switches, and sends what the
//! uninterrupted engine sends, byte for byte, under `reference` and under
//! `cache-aware`: the provider's cache knows no process, so neither does
//! the policy (docs/decisions.md).

use condense_engine::drive::{Driver, SummarizerTokens};
use condense_engine::Effect;
use condense_store::entries::CUSTOM_TYPE_SWITCH;
use condense_store::session::{Entry, Session};

mod support;
use support::*;

/// The sessions played: a dedup alias of an eager spill, an eager spill
/// with a long prompt after it, a compaction, long runs without a reply, a
/// failed call's arguments, and short tasks warm and cold.
fn sessions() -> Vec<(&'static str, Session)> {
    vec![
        ("dedup alias", session_with_a_duplicate_giant_output()),
        ("eager spill", session_with_an_eager_spill()),
        ("compacted", a_run_compacted_away()),
        ("long run", long_run(30)),
        ("two runs", two_runs()),
        ("failed write", session_with_a_failed_write()),
        ("warm", session(MIN)),
        ("cold", session(10 * MIN)),
    ]
}

/// Where a run restarts the engine: before one call, or before every call.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Restart {
    Never,
    Before(usize),
    BeforeEvery,
}

/// What a played run sent and left.
struct Played {
    /// Each call's prompt, as JSON texts, the spill directory's path (which
    /// spill stubs name) written `<dir>`: each run spills to its own.
    prompts: Vec<Vec<String>>,
    /// The switch entries written: the call's time and the reason.
    switches: Vec<(i64, String)>,
    flushes: u64,
    summarizer: SummarizerTokens,
    unrecoverable: u64,
    reload: Result<(), String>,
}

fn play_restarting(policy: &str, branch: &[&Entry], restart: Restart) -> Played {
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut d = driver_in(policy, dir.path());
    let prompts = play_watching(&mut d, branch, |d, sent| match restart {
        Restart::Before(k) if sent.len() == k => d.restart(),
        Restart::BeforeEvery if !sent.is_empty() => d.restart(),
        _ => {}
    });
    let path = dir.path().to_str().expect("a UTF-8 temp dir");
    Played {
        prompts: prompts
            .iter()
            .map(|p| p.iter().map(|m| m.json().replace(path, "<dir>")).collect())
            .collect(),
        switches: switches(&d),
        flushes: d.flushes(),
        summarizer: d.summarizer_tokens(),
        unrecoverable: d.unrecoverable(),
        reload: d.reload_renders_the_same(),
    }
}

fn switches(d: &Driver) -> Vec<(i64, String)> {
    d.written()
        .iter()
        .filter_map(|w| match &w.effect {
            Effect::Append {
                custom_type, data, ..
            } if custom_type == CUSTOM_TYPE_SWITCH => Some((
                data["ts"].as_i64().expect("a switch's time"),
                data["reason"]
                    .as_str()
                    .expect("a switch's reason")
                    .to_owned(),
            )),
            _ => None,
        })
        .collect()
}

/// The restarts tried on a branch of `calls` calls: before every call, and
/// before each call (the first has no earlier one to restart after), or
/// eight spread over a long branch.
fn restarts(calls: usize) -> Vec<Restart> {
    let step = if calls > 20 { calls.div_ceil(8) } else { 1 };
    let mut out: Vec<Restart> = (1..calls).step_by(step).map(Restart::Before).collect();
    out.push(Restart::BeforeEvery);
    out
}

/// What every restarted run keeps whatever the policy: the same flushes and
/// summarizer work, every output left out readable, a reload that renders
/// what it sent.
fn assert_same_work(name: &str, at: Restart, got: &Played, want: &Played) {
    assert_eq!(got.flushes, want.flushes, "{name}, {at:?}: flushes");
    assert_eq!(
        got.summarizer, want.summarizer,
        "{name}, {at:?}: summarizer"
    );
    assert_eq!(
        got.unrecoverable, 0,
        "{name}, {at:?}: unrecoverable outputs"
    );
    assert_eq!(got.reload, Ok(()), "{name}, {at:?}: reload");
}

#[test]
fn a_restarted_engine_sends_what_the_uninterrupted_one_sends_under_reference() {
    for (name, s) in sessions() {
        let branch = s.branch(None);
        let want = play_restarting("reference", &branch, Restart::Never);
        assert!(want.flushes > 0 || name == "long run", "{name}: flushes");
        for at in restarts(want.prompts.len()) {
            let got = play_restarting("reference", &branch, at);
            assert_same_work(name, at, &got, &want);
            let differ: Vec<usize> = (0..want.prompts.len())
                .filter(|&n| got.prompts[n] != want.prompts[n])
                .collect();
            assert_eq!(
                differ,
                Vec::<usize>::new(),
                "{name}, {at:?}: calls sent differently"
            );
        }
    }
}

/// Under `cache-aware` (unbounded: a restart starts the bound from nothing
/// saved) a restarted engine prices its first call against the call the
/// branch records, warm or cold by the time since it, as the provider does:
/// the same switches at the same calls for the same reasons, the same bytes.
#[test]
fn a_restarted_engine_sends_what_the_uninterrupted_one_sends_under_cache_aware() {
    for (name, s) in sessions() {
        let branch = s.branch(None);
        let want = play_restarting("cache-aware", &branch, Restart::Never);
        assert!(!want.switches.is_empty(), "{name}: switches");
        for at in restarts(want.prompts.len()) {
            let got = play_restarting("cache-aware", &branch, at);
            assert_same_work(name, at, &got, &want);
            assert_eq!(got.switches, want.switches, "{name}, {at:?}: switches");
            let differ: Vec<usize> = (0..want.prompts.len())
                .filter(|&n| got.prompts[n] != want.prompts[n])
                .collect();
            assert_eq!(
                differ,
                Vec::<usize>::new(),
                "{name}, {at:?}: calls sent differently"
            );
        }
    }
}

//! The engine driven through a recorded session as the live sidecar would
//! (`condense_engine::drive`): the final reply flushes (under `reference`
//! at once, under `cache-aware` when the next run starts), the next call's
//! prompt shows the summary, the summarizer's tokens are
//! counted, every output left out can be read back, and a reload of the
//! session the run would have left renders the same.

use std::sync::Arc;

use condense_core::{chars_to_tokens, prompt_units, Message, PriceProfile, PromptShape, Role};
use condense_engine::drive::{Driver, DriverOptions};
use condense_store::session::Entry;
use condense_summarizer::Extractive;
use serde_json::json;

mod support;
use support::*;

fn shows_output(prompt: &[Message]) -> bool {
    prompt.iter().any(|m| m.json().contains("line 299: ok"))
}

#[test]
fn reference_shows_the_summary_at_the_call_after_the_reply() {
    let s = session(MIN);
    let branch = s.branch(None);
    let mut d = driver("reference");
    let prompts = play(&mut d, &branch);
    assert_eq!(prompts.len(), 4);
    assert!(
        shows_output(&prompts[1]),
        "the output is shown until the flush"
    );
    assert!(
        !shows_output(&prompts[2]),
        "the final reply's flush stubs it"
    );
    assert!(prompts[2]
        .iter()
        .any(|m| m.json().contains("Summarized in pruner summary")));
    // Every final reply flushes (the later two find nothing to summarize).
    assert_eq!(d.flushes(), 3);
    assert_eq!(d.switches(), 0);
    let work = d.summarizer_tokens();
    assert!(work.input > 0 && work.output > 0, "{work:?}");
    assert_eq!(d.removed_outputs(), 1);
    assert_eq!(d.unrecoverable(), 0);
    d.reload_renders_the_same().expect("same render");
}

#[test]
fn cache_aware_summarizes_a_reply_when_the_next_run_starts() {
    for gap in [MIN, 10 * MIN] {
        let s = session(gap);
        let branch = s.branch(None);
        let mut d = driver("cache-aware");
        let prompts = play(&mut d, &branch);
        // The reply's flush runs before the next run's first call, which
        // shows it: the rewrite is the output alone (the long prompt after it
        // is new to this call either way), warm or cold.
        assert!(shows_output(&prompts[1]));
        assert!(!shows_output(&prompts[2]) && !shows_output(&prompts[3]));
        // Its summary comes where pi puts a message added at
        // `before_agent_start`: after the reply, before the new prompt.
        let at = |needle: &str| prompts[2].iter().position(|m| m.json().contains(needle));
        let summary = at("Summarized tool refs").expect("the summary is in the prompt");
        assert_eq!(at("Done."), Some(summary - 1));
        assert_eq!(at("next next"), Some(summary + 1));
        let mut r = driver("reference");
        play(&mut r, &branch);
        // The last reply starts no run: it is never summarized (reference
        // flushes at each of the three replies).
        assert_eq!((d.flushes(), d.switches()), (2, 1));
        assert_eq!(r.flushes(), 3);
        assert_eq!(d.summarizer_tokens(), r.summarizer_tokens());
        assert_eq!(d.unrecoverable(), 0);
        d.reload_renders_the_same().expect("same render");
    }
}

#[test]
fn pruning_off_sends_the_context_as_is_and_writes_nothing() {
    let s = session(MIN);
    let branch = s.branch(None);
    let mut d = Driver::new(DriverOptions {
        settings: json!({"contextPrune": {"enabled": false}}),
        summarizer: Arc::new(Extractive::new()),
        tokens: Arc::new(|t: &str| t.len() as u64),
        session_dir: None,
        miss_prior: None,
    })
    .expect("a driver");
    let prompts = play(&mut d, &branch);
    assert!(prompts.iter().skip(1).all(|p| shows_output(p)));
    assert!(d.written().is_empty());
    assert_eq!(d.summarizer_tokens().input, 0);
}

#[test]
fn a_failed_calls_arguments_are_purged_at_the_cold_call_under_cache_aware() {
    let s = session_with_a_failed_write();
    let branch = s.branch(None);
    let mut reference = driver("reference");
    let by_reference = play(&mut reference, &branch);
    let mut aware = driver("cache-aware");
    let by_aware = play(&mut aware, &branch);
    let last = by_reference.len() - 1;
    let purged = |p: &[Message]| p.iter().any(|m| m.json().contains("purged-errored-args"));
    assert!(purged(&by_reference[last]));
    // Nothing was summarized to make it pending, but the cold call is the
    // free moment to show the purge too.
    assert!(purged(&by_aware[last]), "{:?}", aware.written());
    assert_eq!(by_aware[last], by_reference[last]);
    assert_eq!(aware.switches(), 1);
    aware.reload_renders_the_same().expect("same render");
}

#[test]
fn a_long_run_that_never_replies_is_summarized_at_turn_ends_under_cache_aware() {
    let s = long_run(30);
    let branch = s.branch(None);
    let shows = |p: &[Message], n: usize| {
        p.iter()
            .any(|m| m.json().contains(&format!("f{n} line 0399")))
    };
    // Reference waits for a reply that never comes.
    let mut r = driver("reference");
    let prompts = play(&mut r, &branch);
    assert!(shows(&prompts[29], 0));
    assert_eq!(r.flushes(), 0);
    // Cache-aware flushes from the tenth turn on, when summarizing pays,
    // and shows it at the next call.
    let mut d = driver("cache-aware");
    let prompts = play(&mut d, &branch);
    assert!(shows(&prompts[10], 0), "turns before the tenth wait");
    assert!(!shows(&prompts[29], 0) && !shows(&prompts[29], 20));
    assert!(d.flushes() > 0 && d.switches() > 0);
    assert_eq!(d.unrecoverable(), 0);
    d.reload_renders_the_same().expect("same render");
}

#[test]
fn a_later_runs_turns_queue_at_their_turn_ends_whatever_the_earlier_runs_length() {
    // pi numbers turns within a run; the frontier counts them over the
    // branch. Run 1's 25 turns put the frontier at turn 24: run 2's turns
    // must still queue from its first, so its long run is summarized from
    // its tenth turn as run 1's was.
    let s = two_runs();
    let branch = s.branch(None);
    let mut d = driver("cache-aware");
    let prompts = play(&mut d, &branch);
    // Calls 0..=25 are run 1's (25 tool turns and the reply), 26.. run 2's.
    assert_eq!(prompts.len(), 46);
    assert!(!shows_read(&prompts[26], "a0"), "run 1 is summarized");
    assert!(
        shows_read(&prompts[26 + 5], "b0"),
        "run 2's first turns wait"
    );
    assert!(
        !shows_read(&prompts[45], "b0") && !shows_read(&prompts[45], "b10"),
        "run 2's long run is summarized at its turn ends"
    );
    assert_eq!(d.unrecoverable(), 0);
    d.reload_renders_the_same().expect("same render");
}

#[test]
fn turns_after_pis_compaction_are_captured_and_summarized() {
    // Run 1 (six reads, a reply) is summarized; pi then compacts all of it
    // away. Run 2's read is the context's first assistant, but the branch's
    // seventh: numbered from the context, it would sit below the frontier
    // (turn 5) and never be summarized.
    let s = a_run_compacted_away();
    let branch = s.branch(None);
    for policy in ["reference", "cache-aware"] {
        let mut d = driver(policy);
        let prompts = play(&mut d, &branch);
        // Calls: run 1's six reads and reply, run 2's read and reply, run 3's reply.
        assert_eq!(prompts.len(), 10, "{policy}");
        assert!(
            shows_read(&prompts[8], "b0"),
            "{policy}: shown until its reply"
        );
        assert!(
            !shows_read(&prompts[9], "b0"),
            "{policy}: run 2's read is summarized after the compaction"
        );
        assert_eq!(d.unrecoverable(), 0, "{policy}");
        d.reload_renders_the_same()
            .unwrap_or_else(|e| panic!("{policy}: {e}"));
    }
}

#[test]
fn a_resumed_compacted_session_finds_the_work_after_the_compaction() {
    // The frontier (turn 5, written before pi compacted run 1 away) is
    // numbered over the branch: run 2's unsummarized read is turn 6 there,
    // not the context's turn 0, so a resume finds it pending.
    let mut messages = run("a", 6, T0, true);
    messages.push(
        json!({"type": "custom", "customType": "context-prune-frontier",
        "data": {"lastAttemptedToolCallId": "a5", "lastAttemptedToolName": "read",
            "lastAttemptedTurnIndex": 5, "lastAttemptedTimestamp": T0 + 12_000,
            "attemptedBatchCount": 1, "attemptedToolCallCount": 6, "rawCharCount": 1,
            "summaryCharCount": 1, "outcome": "summarized"}}),
    );
    messages.push(json!({"type": "compaction", "summary": "earlier work",
        "firstKeptEntryId": null, "tokensBefore": 50_000}));
    messages.extend(run("b", 1, T0 + 10 * MIN, true));
    let s = session_of("k", "w", messages);
    let branch: Vec<String> = s.entries.iter().map(|e| e.raw().to_owned()).collect();
    let mut e = condense_engine::Engine::default();
    e.start(condense_engine::StartParams {
        settings: json!({"contextPrune": {"enabled": true}}),
        session_id: "k".into(),
        session_dir: None,
        misses_dir: None,
        session_file: None,
        branch: branch.join("\n"),
        tree: false,
    });
    assert_eq!(e.messages().len(), 5, "the summary and run 2");
    assert_eq!(
        e.state().frontier().map(|f| f.last_attempted_turn_index),
        Some(5)
    );
    assert!(e.is_rearmed(), "run 2's read is pending");
}

/// Plays the branch as [`play`] does and returns the prompts and the
/// calls before which the state, without a switch, no longer renders what
/// the previous call sent (on a branch without a compaction): under
/// `cache-aware` such a change rewrites the cached prompt from there for
/// nothing, and (as what the call writes anyway) pulls a switch forward
/// (docs/economy.md, rules 6 and 7).
fn play_checking_sent_prefix(d: &mut Driver, branch: &[&Entry]) -> (Vec<Vec<Message>>, Vec<usize>) {
    let mut changed = Vec::new();
    let prompts = play_watching(d, branch, |d, prompts| {
        let Some(previous) = prompts.last() else {
            return;
        };
        let engine = d.engine();
        let settings = condense_core::RenderSettings {
            config: engine.config(),
            protection: engine.protection(),
        };
        let messages = engine.messages();
        let now = condense_core::render(messages, engine.state(), &settings).messages(messages);
        if now.get(..previous.len()) != Some(&previous[..]) {
            changed.push(prompts.len());
        }
    });
    (prompts, changed)
}

#[test]
fn an_eager_spills_stub_changes_only_at_a_switch_under_cache_aware() {
    // A task whose first read is too large to keep (spilled at its turn's
    // end, its stub naming the raw id), then short tasks a minute apart:
    // the rolling window compresses the first task's chain, whose backfill
    // gives the spilled output a ref of its own.
    let s = session_with_an_eager_spill();
    let branch = s.branch(None);
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut d = driver_in("cache-aware", dir.path());
    let (prompts, changed) = play_checking_sent_prefix(&mut d, &branch);
    let spill_stub = |p: &[Message]| {
        p.iter()
            .any(|m| m.json().contains("Oversized output spilled"))
    };
    assert!(
        prompts.iter().any(|p| spill_stub(p)),
        "the spill's stub is shown"
    );
    assert!(
        prompts
            .last()
            .is_some_and(|p| p.iter().any(|m| m.json().contains("<compressed-chain"))),
        "the first task's chain is compressed"
    );
    assert_eq!(
        changed,
        Vec::<usize>::new(),
        "calls before which the prompt sent changed without a switch"
    );
    assert_eq!(d.unrecoverable(), 0);
    d.reload_renders_the_same().expect("same render");
}

#[test]
fn a_dedup_alias_of_an_eager_spill_renders_the_same_after_a_reload_at_every_call() {
    // `g2` duplicates `g0`, spilled at its turn's end without a ref: `g2`
    // is aliased to it with no ref to share (its stub names `g2`). The
    // rolling window then compresses `g0`'s chain, whose backfill gives
    // `g0` a ref; `g2`'s stub was shown naming `g2`, and a reload must
    // render it so until `g2`'s own chain is compressed.
    let s = session_with_a_duplicate_giant_output();
    let branch = s.branch(None);
    for policy in ["reference", "cache-aware"] {
        let dir = tempfile::tempdir().expect("a temp dir");
        let mut d = driver_in(policy, dir.path());
        let mut differ = Vec::new();
        let prompts = play_watching(&mut d, &branch, |d, prompts| {
            if let Err(e) = d.reload_renders_the_same() {
                differ.push((prompts.len(), e));
            }
        });
        let alias_stub_beside_a_chain = prompts.iter().any(|p| {
            p.iter().any(|m| m.json().contains("<compressed-chain"))
                && p.iter().any(|m| m.json().contains("ref `g2`"))
        });
        assert!(
            alias_stub_beside_a_chain,
            "{policy}: the alias's stub is shown beside the original's compressed chain"
        );
        assert_eq!(
            differ,
            Vec::new(),
            "{policy}: calls a reload renders differently"
        );
        assert_eq!(d.unrecoverable(), 0);
        d.reload_renders_the_same().expect("same render");
    }
}

#[test]
fn a_dedup_alias_of_an_eager_spill_keeps_its_stub_until_a_switch_under_cache_aware() {
    // After the original's chain, the rolling window compresses the
    // alias's own chain, whose backfill gives `g2` a record and a ref of
    // its own: its stub, shown naming `g2`, keeps naming it until a switch
    // shows that chain (naming the original's later ref would rewrite the
    // cached prompt from there without a switch).
    let s = session_with_a_duplicate_giant_output();
    let branch = s.branch(None);
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut d = driver_in("cache-aware", dir.path());
    let (prompts, changed) = play_checking_sent_prefix(&mut d, &branch);
    let chains = |p: &[Message]| {
        p.iter()
            .filter(|m| m.json().contains("<compressed-chain"))
            .count()
    };
    assert!(
        prompts.last().is_some_and(|p| chains(p) >= 2),
        "both giant tasks' chains are compressed"
    );
    assert_eq!(
        changed,
        Vec::<usize>::new(),
        "calls before which the prompt sent changed without a switch"
    );
    assert_eq!(d.unrecoverable(), 0);
    d.reload_renders_the_same().expect("same render");
}

/// What `prompts`, sent at `times`, bill as input at Anthropic's 5-minute
/// cache terms: each call reads the prefix it shares with the previous
/// prompt (whole equal messages) and writes the rest.
fn billed(prompts: &[Vec<Message>], times: &[i64]) -> f64 {
    let profile = PriceProfile::named("anthropic-5m").expect("a profile");
    let tokens = |ms: &[Message]| ms.iter().map(|m| chars_to_tokens(m.size())).sum::<u64>();
    let mut total = 0.0;
    for (n, prompt) in prompts.iter().enumerate() {
        let shared = n.checked_sub(1).map_or(0, |p| {
            let same = prompts[p]
                .iter()
                .zip(prompt)
                .take_while(|(a, b)| a == b)
                .count();
            tokens(&prompt[..same])
        });
        let previous = n.checked_sub(1).map(|p| Some(times[p]));
        total += prompt_units(
            &profile,
            previous,
            Some(times[n]),
            PromptShape {
                tokens: tokens(prompt),
                shared_prefix: shared,
            },
        );
    }
    total
}

/// pi compacts after a run that ended in a reply; no prompt follows. The
/// kept reads' summaries would pay at the next call, which waits for the
/// user: the flush waits with it, so a session that ends there summarized
/// nothing (run at the compaction, it billed the summarizer beyond no
/// pruning). The test below has the next run, where the flush runs.
#[test]
fn a_compaction_after_the_last_reply_runs_no_flush() {
    let mut messages = run("a", 8, T0, true);
    messages.push(json!({"type": "compaction", "summary": "earlier work",
        "firstKeptEntryId": "z0009", "tokensBefore": 50_000, "timestamp": T0 + 18_000}));
    let s = session_of("k", "z", messages);
    let branch = s.branch(None);
    for economy in [
        json!({"policy": "cache-aware", "maxExcess": 0}),
        json!({"policy": "cache-aware", "maxExcess": null}),
    ] {
        let mut d = driver_with(economy.clone());
        let prompts = play(&mut d, &branch);
        assert_eq!(prompts.len(), 9, "{economy}");
        assert_eq!(d.flushes(), 0, "{economy}");
        assert_eq!(d.summarizer_tokens().input, 0, "{economy}");
        assert_eq!(d.unrecoverable(), 0, "{economy}");
        d.reload_renders_the_same()
            .unwrap_or_else(|e| panic!("{economy}: {e}"));
    }
}

#[test]
fn the_call_after_pis_compaction_shows_what_it_kept_summarized_within_the_bound() {
    let s = a_run_compacted_at_its_end();
    let branch = s.branch(None);
    let times: Vec<i64> = branch
        .iter()
        .filter_map(|e| e.message.as_ref())
        .filter(|m| m.is(&Role::Assistant))
        .filter_map(Message::timestamp)
        .collect();
    let mut none = Driver::new(DriverOptions {
        settings: json!({"contextPrune": {"enabled": false}}),
        summarizer: Arc::new(Extractive::new()),
        tokens: Arc::new(|t: &str| t.len() as u64 / 4),
        session_dir: None,
        miss_prior: None,
    })
    .expect("a driver");
    let unpruned = play(&mut none, &branch);
    let none_bill = billed(&unpruned, &times);
    // Calls: run 1's eight reads and reply, run 2's read and reply, run 3's reply.
    assert_eq!(unpruned.len(), 12);
    let after = 9;
    assert!(shows_read(&unpruned[after], "a4"));
    for economy in [
        json!({"policy": "cache-aware", "maxExcess": 0}),
        json!({"policy": "cache-aware", "maxExcess": null}),
    ] {
        let mut d = driver_with(economy.clone());
        let prompts = play(&mut d, &branch);
        // Every call before the compaction is warm and nothing was saved:
        // under the bound no flush ran, and run 1's reads went out raw.
        assert!(shows_read(&prompts[8], "a7"), "{economy}");
        // pi's compaction makes the next call write its whole prompt: the
        // kept reads' summaries, flushed at the compaction, are shown there
        // by a switch that costs nothing.
        for read in ["a4", "a5", "a6", "a7"] {
            assert!(!shows_read(&prompts[after], read), "{economy}: {read}");
        }
        let reasons = switch_reasons(&d);
        assert_eq!(reasons.first().map(String::as_str), Some("start"));
        assert_eq!(
            reasons.get(1).map(String::as_str),
            Some("compaction"),
            "{economy}"
        );
        let bill = billed(&prompts, &times) + d.summarizer_tokens().input as f64;
        if economy["maxExcess"].is_number() {
            assert!(bill <= none_bill, "{economy}: {bill} > {none_bill}");
            let saved = d
                .engine()
                .economy_report()
                .against_no_pruning
                .expect("the bound's estimate")
                .saved_units;
            assert!(saved >= 0.0, "{economy}: {saved}");
        }
        assert_eq!(d.unrecoverable(), 0, "{economy}");
        d.reload_renders_the_same()
            .unwrap_or_else(|e| panic!("{economy}: {e}"));
    }
}

//! Properties of the render pipeline over generated branches.
//!
//! Each case is a random pi branch (user prompts; assistants with thinking,
//! text and tool calls; tool results with errors, reused provider ids,
//! missing and duplicated results; per-batch summary messages; third-party
//! custom messages, `!bash` executions, compaction and branch summaries,
//! unknown roles; stray results), a state built the way flushes and the chain
//! compressor build it (random turns indexed with `t<N>` refs and summary
//! bodies, legacy bare records, eager spills, dedup aliases, chains compressed
//! from the branch's real closed chains with backfill and protected ids, plus
//! spanning and unresolvable entries), and random config knobs.
//!
//! The properties:
//! - (a) every tool result of the output answers a call of the assistant
//!   right before its run of results, and each call is answered at most once;
//! - (b) protected outputs survive verbatim, as the original message or inside
//!   a `<protected-output>` block of a `<compressed-chain>` synthetic;
//! - (c) rendering twice gives the same plan, diagnostics and bytes;
//! - (d) nothing is lost: a tool result that is gone or changed is summarized
//!   (indexed itself, or a dedup alias whose original's record holds the
//!   same text, or its spill file), relocated verbatim in a
//!   `<protected-output>` block, or was an orphan (see [`oracles::orphans`]). Chains
//!   here backfill neither protected results nor aliases, so both must be
//!   recoverable as they are;
//! - (e) `before_chars`/`after_chars` are the UTF-16 lengths of the JSON arrays;
//! - (f) with nothing indexed, no chains, no orphans, no purgeable errors and
//!   no thinking strip, the plan is `None`.

#[path = "../support/mod.rs"]
mod support;

mod build;
mod case_model;
mod oracles;

use std::collections::HashSet;

use build::build;
use case_model::case;
use condense_core::Branch as PruningBranch;
use condense_core::Config;
use condense_core::Protection;
use condense_core::{render, RenderSettings};
use condense_core::{Message, Role};
use oracles::{orphans, output_of, relocated, synthetic_texts};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use serde_json::{json, Value};
use support::{compress_chain, Branch, Call, Kind};

fn config() -> ProptestConfig {
    // 256 cases unless PROPTEST_CASES says otherwise. Failures persist in
    // `main.proptest-regressions` beside this file: proptest's default, for a
    // `main.rs`, is a `tests/proptest-regressions/main.txt` every test
    // directory's `main.rs` would share.
    ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..ProptestConfig::default()
    }
}

// ---- properties ---------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    /// (a) Every output tool result answers a call of the assistant message
    /// that opens its run of results (no other non-toolResult message in
    /// between), and no call is answered twice.
    #[test]
    fn a_tool_results_answer_an_open_call(case in case(false)) {
        let built = build(&case);
        let r = built.render();
        let (out, _) = output_of(&built, &r);
        let mut open: Option<(usize, HashSet<String>)> = None;
        let mut answered: HashSet<String> = HashSet::new();
        for (i, m) in out.iter().enumerate() {
            match m.role() {
                Some(Role::Assistant) => {
                    open = Some((i, m.skeleton().tool_calls.iter().map(|c| c.id.clone()).collect()));
                    answered.clear();
                }
                Some(Role::ToolResult) => {
                    let id = m.skeleton().tool_call_id.clone().unwrap_or_default();
                    let Some((at, calls)) = &open else {
                        return Err(TestCaseError::fail(format!("output[{i}] result {id} follows no assistant")));
                    };
                    prop_assert!(calls.contains(&id), "output[{i}] result {id} answers no call of output[{at}]");
                    prop_assert!(answered.insert(id.clone()), "output[{i}] answers {id} a second time");
                }
                _ => open = None,
            }
        }
    }

    /// (b) A protected output that has a call to answer is in the output
    /// verbatim: the original message, or a `<protected-output>` block of a
    /// synthetic when its chain was compressed (chain entries list every
    /// protected result of their range, as the compressor writes them).
    #[test]
    fn b_protected_outputs_survive_verbatim(case in case(false)) {
        let built = build(&case);
        let r = built.render();
        let (out, jsons) = output_of(&built, &r);
        let synthetics = synthetic_texts(&out);
        let orphan = orphans(&built.branch);
        for (i, m) in built.branch.meta.iter().enumerate() {
            if m.kind != Kind::ToolResult || orphan[i] || !built.protected(m) {
                continue;
            }
            let verbatim = jsons.contains(&*built.messages[i].json());
            prop_assert!(
                verbatim || relocated(&synthetics, m),
                "protected result input[{i}] ({} {}) is neither kept nor relocated",
                m.tool_name, m.call_id
            );
        }
    }

    /// (c) The same inputs render to the same plan, diagnostics and bytes.
    #[test]
    fn c_render_is_deterministic(case in case(false)) {
        let built = build(&case);
        let first = built.render();
        let state_copy = built.state.clone();
        let second = built.render_with(&state_copy);
        prop_assert_eq!(&first.plan, &second.plan);
        prop_assert_eq!(&first.diagnostics, &second.diagnostics);
        let a: Vec<String> = first.messages(&built.messages).iter().map(|m| m.json().to_string()).collect();
        let b: Vec<String> = second.messages(&built.messages).iter().map(|m| m.json().to_string()).collect();
        prop_assert_eq!(a, b);
    }

    /// (d) Nothing is lost. A tool result of the input that is absent from
    /// the output, or whose content changed, is
    /// - summarized (`is_summarized(id, ts)`: indexed, or a dedup alias; or
    ///   the legacy bare fallback), and then the record it is looked up under
    ///   (an alias's is its original's) holds its text (or a spill file); or
    /// - relocated verbatim in a `<protected-output>` block; or
    /// - an orphan of the input (see [`orphans`]): it had no open call.
    #[test]
    fn d_nothing_is_lost(case in case(false)) {
        let built = build(&case);
        let r = built.render();
        let (out, jsons) = output_of(&built, &r);
        let synthetics = synthetic_texts(&out);
        let orphan = orphans(&built.branch);
        let state = &built.state;
        for (i, m) in built.branch.meta.iter().enumerate() {
            if m.kind != Kind::ToolResult || jsons.contains(&*built.messages[i].json()) {
                continue;
            }
            if let Some(ts) = state.lookup_key_for_result(&m.call_id, Some(m.ts)) {
                let record = state.record_for(&m.call_id, ts);
                prop_assert!(
                    record.is_some_and(|r| r.result_text == m.text || r.spill_path.is_some()),
                    "input[{i}] {} is stubbed under a record that lost its text: {:?}", m.call_id, record
                );
                continue;
            }
            prop_assert!(
                relocated(&synthetics, m) || orphan[i],
                "input[{i}] result {} ({}) vanished: not summarized, not relocated, not an orphan",
                m.call_id, m.tool_name
            );
        }
    }

    /// (e) The plan's sizes are `JSON.stringify(array).length` of input and output.
    #[test]
    fn e_sizes_are_utf16_lengths(case in case(false)) {
        let built = build(&case);
        let r = built.render();
        if let Some(plan) = &r.plan {
            let out = plan.apply(&built.messages);
            prop_assert_eq!(plan.before_chars, support::array_utf16_len(&built.messages));
            prop_assert_eq!(plan.after_chars, support::array_utf16_len(&out));
        }
    }

    /// (f) Nothing indexed, no chains, no orphans, no purgeable errors and no
    /// thinking strip: the render is a no-op.
    #[test]
    fn f_noop_without_work(case in case(true)) {
        let mut built = build(&case);
        built.config.thinking_strip.enabled = false;
        let has_errors = built.branch.meta.iter().any(|m| m.kind == Kind::ToolResult && m.is_error);
        if has_errors {
            built.config.purge_errors.enabled = false;
        }
        prop_assert!(!orphans(&built.branch).contains(&true), "clean case with an orphan");
        let r = built.render_with(&PruningBranch::new());
        prop_assert!(r.plan.is_none(), "plan for an untouched branch: {:?}", r.plan);
        prop_assert!(r.diagnostics.is_empty());
    }
}

/// The generator produces what the properties need, often enough.
#[test]
fn generator_covers_the_interesting_cases() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = case(false);
    let (mut stubbed, mut chained, mut relocated_n, mut swept, mut purged) = (0, 0, 0, 0, 0);
    let mut kinds = std::collections::BTreeMap::new();
    for _ in 0..256 {
        let built = build(&strategy.new_tree(&mut runner).unwrap().current());
        let r = built.render();
        let out = r.messages(&built.messages);
        let synthetics = synthetic_texts(&out);
        stubbed += out
            .iter()
            .filter(|m| m.json().contains("[Summarized in pruner summary"))
            .count()
            .min(1);
        chained += usize::from(!synthetics.is_empty());
        relocated_n += usize::from(synthetics.iter().any(|s| s.contains("<protected-output")));
        swept += usize::from(orphans(&built.branch).contains(&true));
        purged += usize::from(out.iter().any(|m| m.json().contains("purged-errored-args")));
        for d in &r.diagnostics {
            let k = if d.key.starts_with("overlap:") {
                "overlap"
            } else {
                d.kind.as_str()
            };
            *kinds.entry(k).or_insert(0usize) += 1;
        }
    }
    assert!(stubbed > 50, "stubbed in {stubbed} cases");
    assert!(chained > 30, "chains in {chained} cases");
    assert!(relocated_n > 5, "relocations in {relocated_n} cases");
    assert!(swept > 30, "orphans in {swept} cases");
    assert!(purged > 5, "purges in {purged} cases");
    for kind in [
        "orphan-sweep",
        "overlap",
        "range-id-mismatch",
        "unresolved-range",
    ] {
        assert!(
            kinds.get(kind).copied().unwrap_or(0) > 3,
            "{kind}: {kinds:?}"
        );
    }
}

// ---- regressions: defects of pi-condense 2.9.1 that condense fixes ----

proptest! {
    #![proptest_config(config())]

    /// (g) Only the arguments of a call that failed are purged: a call's
    /// arguments change only if the result answering it (in the run of
    /// results right after its assistant message) has `isError`.
    #[test]
    fn g_purge_touches_only_failed_calls(case in case(false)) {
        let built = build(&case);
        let r = built.render();
        let out = r.messages(&built.messages);
        let by_ts: std::collections::HashMap<i64, &Message> = out
            .iter()
            .filter(|m| m.is(&Role::Assistant))
            .filter_map(|m| m.timestamp().map(|t| (t, m)))
            .collect();
        let meta = &built.branch.meta;
        for (i, m) in meta.iter().enumerate() {
            if m.kind != Kind::Assistant || m.calls.is_empty() {
                continue;
            }
            let Some(o) = by_ts.get(&m.ts) else { continue };
            let value = o.to_value().unwrap();
            let blocks: Vec<&Value> = value["content"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|b| b["type"] == "toolCall")
                .collect();
            for (call, block) in m.calls.iter().zip(blocks) {
                if block["arguments"] == call.args {
                    continue;
                }
                let failed = meta[i + 1..]
                    .iter()
                    .take_while(|x| x.kind == Kind::ToolResult)
                    .find(|x| x.call_id == call.id)
                    .is_some_and(|x| x.is_error);
                prop_assert!(failed, "input[{i}] call {} succeeded but its arguments were purged", call.id);
            }
        }
    }
}

/// `b` rendered under the default settings with nothing indexed.
fn rendered_by_default(b: &Branch) -> Vec<Message> {
    let config = Config::default();
    let protection = Protection::new(&config);
    let messages = b.messages();
    render(
        &messages,
        &PruningBranch::new(),
        &RenderSettings {
            config: &config,
            protection: &protection,
        },
    )
    .messages(&messages)
}

/// One assistant of more calls than the purge scans (its ids are hashed):
/// exactly the failed calls' arguments are purged, and an error result
/// whose id the assistant never called purges nothing.
#[test]
fn a_turn_of_many_calls_purges_exactly_its_failed_calls() {
    let mut b = Branch::new();
    b.user("go");
    let calls: Vec<Call> = (0..40)
        .map(|i| Call {
            id: format!("c{i}"),
            name: "write".into(),
            args: json!({"path": format!("f{i}"), "content": "x".repeat(600)}),
        })
        .collect();
    b.assistant(None, None, calls.clone());
    let failed = [5, 33, 39];
    for i in 0..40 {
        let err = failed.contains(&i);
        b.tool_result(
            &format!("c{i}"),
            "write",
            &[if err { "EACCES" } else { "ok" }],
            err,
        );
    }
    b.tool_result("zz", "write", &["EACCES"], true);
    for _ in 0..3 {
        b.assistant(None, Some("…"), vec![]);
    }
    let out = rendered_by_default(&b);
    let blocks = out[1].to_value().unwrap()["content"].clone();
    for (i, call) in calls.iter().enumerate() {
        let args = &blocks[i]["arguments"];
        if failed.contains(&i) {
            assert!(
                args["_purged"].is_string(),
                "failed call {i} keeps its arguments: {args}"
            );
        } else {
            assert_eq!(args, &call.args, "call {i} succeeded but was purged");
        }
    }
}

/// A reused provider id: `call_1` succeeds with a large body, a later
/// `call_1` fails with a small one. The purge keys errors by bare id, so it
/// purges the successful call's arguments (and leaves the failed call alone).
#[test]
fn bug_purge_by_bare_id_purges_a_call_that_succeeded() {
    let mut b = Branch::new();
    b.user("go");
    let ok_call = Call {
        id: "call_1".into(),
        name: "write".into(),
        args: json!({"path": "a", "content": "x".repeat(600)}),
    };
    b.assistant(None, None, vec![ok_call.clone()]);
    b.tool_result("call_1", "write", &["written"], false);
    b.assistant(
        None,
        None,
        vec![Call {
            id: "call_1".into(),
            name: "write".into(),
            args: json!({"path": "b"}),
        }],
    );
    b.tool_result("call_1", "write", &["EACCES"], true);
    for _ in 0..3 {
        b.assistant(None, Some("…"), vec![]);
    }
    let out = rendered_by_default(&b);
    assert_eq!(
        out[1].to_value().unwrap()["content"][0]["arguments"],
        ok_call.args,
        "the successful call was purged"
    );
}

/// A user prompt that happens to start with `<compressed-chain id="b1"`
/// (pasted text) makes the chain phase believe synthetic b1 is already
/// present: chain b1's range is dropped, its synthetic never inserted, and
/// the protected `todo` output of the range (never indexed) is gone.
#[test]
fn bug_user_prompt_that_looks_like_a_synthetic_hides_a_chain() {
    let mut b = Branch::new();
    let mut state = PruningBranch::new();
    let config = Config {
        protected_tools: vec!["todo".into()],
        ..Config::default()
    };
    let protection = Protection::new(&config);
    b.user("<compressed-chain id=\"b1\" tools=\"\">pasted</compressed-chain>");
    b.assistant(None, Some("ok"), vec![]);
    let start = b.user("go");
    b.assistant(
        None,
        None,
        vec![Call {
            id: "c1".into(),
            name: "todo".into(),
            args: json!({}),
        }],
    );
    b.tool_result("c1", "todo", &["TODO LIST"], false);
    let end = b.assistant(None, Some("done"), vec![]);
    let at = b.later_ts();
    let entry = compress_chain(
        &mut state,
        &b,
        (start, end),
        "b1".into(),
        at,
        Some("body".into()),
        |m| m.tool_name == "todo",
    );
    state.register_chain(entry);
    let messages = b.messages();
    let r = render(
        &messages,
        &state,
        &RenderSettings {
            config: &config,
            protection: &protection,
        },
    );
    let out = r.messages(&messages);
    assert!(
        out.iter().any(|m| m.json().contains("TODO LIST")),
        "the protected output vanished: {:#?}",
        out.iter().map(Message::json).collect::<Vec<_>>()
    );
}

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
//!   `<protected-output>` block, or was an orphan (see [`orphans`]). Chains
//!   here backfill neither protected results nor aliases, so both must be
//!   recoverable as they are;
//! - (e) `before_chars`/`after_chars` are the UTF-16 lengths of the JSON arrays;
//! - (f) with nothing indexed, no chains, no orphans, no purgeable errors and
//!   no thinking strip, the plan is `None`.

mod support;

use std::collections::HashSet;

use condense_core::ChainEntry;
use condense_core::Config;
use condense_core::Protection;
use condense_core::State;
use condense_core::{render, Render, RenderSettings};
use condense_core::{Message, Role};
use proptest::prelude::*;
use serde_json::{json, Map, Value};
use support::{compress_chain, index_batch, spilled_record, Branch, Call, Kind, Meta};

const TOOLS: &[&str] = &[
    "bash",
    "read",
    "write",
    "edit",
    "todo",
    "grep",
    "context_tree_query",
];

const TEXTS: &[&str] = &[
    "ok",
    "total 0\nfile.txt",
    "héllo wörld ✓",
    "emoji 😀 line\n\"quoted\" \\ backslash",
    "<tag> & </tag>\u{2028}tail",
    "",
];

const PROMPTS: &[&str] = &[
    "fix the build",
    "Explique-moi ce module, s'il te plaît.",
    "run the tests 🧪",
    "what does `render` do?",
];

// ---- the case model -----------------------------------------------------------

#[derive(Debug, Clone)]
struct CallSpec {
    tool: usize,
    /// `Some(k)`: the reused provider id `call_k`; `None`: a fresh id.
    pooled: Option<u8>,
    /// 0..=3 small arguments, 4 a large body, 5 a protected path.
    args: u8,
    /// Below `TEXTS.len()`: that text; else a fresh one.
    text: u8,
    error: bool,
    missing: bool,
    duplicate: bool,
    spill: bool,
    alias: bool,
}

#[derive(Debug, Clone)]
struct TurnSpec {
    thinking: bool,
    text: bool,
    calls: Vec<CallSpec>,
    /// A message between the assistant and its results (orphans them).
    barrier: Option<u8>,
    reverse: bool,
    index: bool,
    legacy: bool,
    summary_message: bool,
    index_protected: bool,
    two_blocks: bool,
}

#[derive(Debug, Clone)]
enum Event {
    Prompt(u8),
    Turn(TurnSpec),
    Reply { thinking: bool },
    Extra(u8),
}

#[derive(Debug, Clone)]
struct ChainSpec {
    /// 0..=3 compress, 4 compress a span up to the next closed chain,
    /// 5 an unresolvable entry, else leave the chain alone.
    action: u8,
    /// Range summary (0 none, 1 text, 2 text with `{bN}` refs) or bogus kind.
    body: u8,
}

#[derive(Debug, Clone)]
struct Knobs {
    grace: u32,
    purge: bool,
    cooldown: u32,
    min_arg: u64,
    chains: bool,
    strip_final: bool,
    thinking_strip: bool,
    keep_last: u32,
    protected: Vec<bool>,
    path_globs: bool,
    mismatch: bool,
}

#[derive(Debug, Clone)]
struct Case {
    events: Vec<Event>,
    chains: Vec<ChainSpec>,
    knobs: Knobs,
}

fn call_spec(clean: bool) -> impl Strategy<Value = CallSpec> {
    (
        0..TOOLS.len(),
        prop::option::weighted(0.5, 0u8..4),
        0u8..6,
        0u8..10,
        prop::bool::weighted(0.15),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.05),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.3),
    )
        .prop_map(
            move |(tool, pooled, args, text, error, missing, duplicate, spill, alias)| CallSpec {
                tool,
                pooled,
                args,
                text,
                error,
                missing,
                duplicate: duplicate && !clean,
                spill,
                alias,
            },
        )
}

fn turn_spec(clean: bool) -> impl Strategy<Value = TurnSpec> {
    (
        any::<bool>(),
        any::<bool>(),
        prop::collection::vec(call_spec(clean), 1..=3),
        prop::option::weighted(0.1, 0u8..5),
        any::<bool>(),
        prop::bool::weighted(0.6),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.7),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.1),
    )
        .prop_map(
            move |(
                thinking,
                text,
                calls,
                barrier,
                reverse,
                index,
                legacy,
                summary_message,
                index_protected,
                two_blocks,
            )| {
                TurnSpec {
                    thinking,
                    text,
                    calls,
                    barrier: barrier.filter(|_| !clean),
                    reverse,
                    index,
                    legacy,
                    summary_message,
                    index_protected,
                    two_blocks,
                }
            },
        )
}

fn event(clean: bool) -> impl Strategy<Value = Event> {
    let extras = if clean { 5u8 } else { 6u8 };
    prop_oneof![
        2 => (0u8..PROMPTS.len() as u8).prop_map(Event::Prompt),
        6 => turn_spec(clean).prop_map(Event::Turn),
        2 => any::<bool>().prop_map(|thinking| Event::Reply { thinking }),
        1 => (0..extras).prop_map(Event::Extra),
    ]
}

fn knobs() -> impl Strategy<Value = Knobs> {
    (
        0u32..=4,
        any::<bool>(),
        1u32..=3,
        prop::sample::select(vec![0u64, 100, 500, 1000]),
        prop::bool::weighted(0.8),
        any::<bool>(),
        prop::bool::weighted(0.25),
        1u32..=4,
        prop::collection::vec(prop::bool::weighted(0.3), TOOLS.len()),
        any::<bool>(),
        prop::bool::weighted(0.2),
    )
        .prop_map(
            |(
                grace,
                purge,
                cooldown,
                min_arg,
                chains,
                strip_final,
                thinking_strip,
                keep_last,
                protected,
                path_globs,
                mismatch,
            )| {
                Knobs {
                    grace,
                    purge,
                    cooldown,
                    min_arg,
                    chains,
                    strip_final,
                    thinking_strip,
                    keep_last,
                    protected,
                    path_globs,
                    mismatch,
                }
            },
        )
}

fn case(clean: bool) -> impl Strategy<Value = Case> {
    (
        prop::collection::vec(event(clean), 1..40),
        prop::collection::vec(
            (0u8..8, 0u8..5).prop_map(|(action, body)| ChainSpec { action, body }),
            1..8,
        ),
        knobs(),
    )
        .prop_map(|(events, chains, knobs)| Case {
            events,
            chains,
            knobs,
        })
}

// ---- building a case ------------------------------------------------------------

struct Built {
    branch: Branch,
    messages: Vec<Message>,
    state: State,
    config: Config,
    protection: Protection,
}

impl Built {
    fn render(&self) -> Render {
        self.render_with(&self.state)
    }

    fn render_with(&self, state: &State) -> Render {
        let settings = RenderSettings {
            config: &self.config,
            protection: &self.protection,
        };
        render(&self.messages, state, &settings)
    }

    fn protected(&self, m: &Meta) -> bool {
        self.protection.is_protected(&m.tool_name, &m.args)
    }
}

fn config_of(k: &Knobs) -> Config {
    let mut c = Config {
        recovery_grace_turns: k.grace,
        protected_tools: TOOLS
            .iter()
            .zip(&k.protected)
            .filter(|(_, p)| **p)
            .map(|(t, _)| (*t).to_owned())
            .collect(),
        protected_paths: if k.path_globs {
            Config::default().protected_paths
        } else {
            Vec::new()
        },
        ..Config::default()
    };
    c.purge_errors.enabled = k.purge;
    c.purge_errors.cooldown_turns = k.cooldown;
    c.purge_errors.min_arg_chars = k.min_arg;
    c.chain_compression.enabled = k.chains;
    c.chain_compression.strip_final_assistant_thinking = k.strip_final;
    c.thinking_strip.enabled = k.thinking_strip;
    c.thinking_strip.keep_last_turns = k.keep_last;
    c
}

fn args_for(kind: u8, n: usize) -> Value {
    match kind {
        0 => json!({"command": format!("ls -la dir{n}")}),
        1 => json!({"path": format!("src/file{n}.rs")}),
        2 => json!({"pattern": "fn main", "path": "src"}),
        3 => json!({}),
        4 => json!({"path": format!("src/big{n}.rs"), "content": "é".repeat(300 + n % 7 * 150)}),
        _ => json!({"path": format!("repo/skills/demo{n}/SKILL.md")}),
    }
}

fn extra(b: &mut Branch, kind: u8, n: usize) {
    match kind {
        0 => {
            b.custom(&format!("note {n} from another extension ✓"));
        }
        1 => {
            b.bash("git status", &format!("On branch main {n}"));
        }
        2 => {
            b.compaction(&format!("## Goal\nsummary {n}"));
        }
        3 => {
            b.branch_summary(&format!("left branch {n}"));
        }
        4 => {
            b.unknown(&format!("unknown role {n}"));
        }
        _ => {
            let id = if n & 1 == 0 {
                format!("call_{}", n % 4)
            } else {
                format!("stray_{n}")
            };
            b.tool_result(&id, "bash", &[&format!("stray output {n}")], false);
        }
    }
}

fn build(case: &Case) -> Built {
    let config = config_of(&case.knobs);
    let protection = Protection::new(&config);
    let is_protected = |m: &Meta| protection.is_protected(&m.tool_name, &m.args);
    let mut b = Branch::new();
    let mut state = State::new();
    let mut n = 0usize;
    let mut events = case.events.clone();
    if !matches!(events.first(), Some(Event::Prompt(_))) {
        events.insert(0, Event::Prompt(0));
    }
    for ev in &events {
        n += 1;
        match ev {
            Event::Prompt(p) => {
                b.user(PROMPTS[*p as usize % PROMPTS.len()]);
            }
            Event::Reply { thinking } => {
                let t = thinking.then(|| format!("final thoughts {n}"));
                b.assistant(t.as_deref(), Some("Done. ✓"), vec![]);
            }
            Event::Extra(k) => extra(&mut b, *k, n),
            Event::Turn(t) => {
                // Calls; the same id twice in one message only by accident of the pool.
                let mut calls = Vec::new();
                let mut fresh_ids = true;
                for (j, c) in t.calls.iter().enumerate() {
                    let id = match c.pooled {
                        Some(k) => {
                            fresh_ids = false;
                            format!("call_{k}")
                        }
                        None => format!("fresh_{n}_{j}"),
                    };
                    let id = if calls.iter().any(|x: &Call| x.id == id) && !c.duplicate {
                        format!("fresh_{n}_{j}")
                    } else {
                        id
                    };
                    calls.push(Call {
                        id,
                        name: TOOLS[c.tool].to_owned(),
                        args: args_for(c.args, n + j),
                    });
                }
                let thinking = t.thinking.then(|| format!("thinking about step {n} — ok"));
                let text = t.text.then(|| format!("Running {} tool(s).", calls.len()));
                b.assistant(thinking.as_deref(), text.as_deref(), calls.clone());
                if let Some(k) = t.barrier {
                    extra(&mut b, k, n);
                }
                let mut order: Vec<usize> = (0..calls.len()).collect();
                if t.reverse {
                    order.reverse();
                }
                let mut results = Vec::new();
                for &j in &order {
                    let c = &t.calls[j];
                    if c.missing {
                        continue;
                    }
                    let text = match TEXTS.get(c.text as usize) {
                        Some(s) => (*s).to_owned(),
                        None => format!("output {n}.{j}: ✓ done\nline two 😀"),
                    };
                    let blocks: Vec<&str> = if t.two_blocks {
                        vec![&text, "(end)"]
                    } else {
                        vec![&text]
                    };
                    let reps = if c.duplicate { 2 } else { 1 };
                    for _ in 0..reps {
                        results.push((
                            b.tool_result(&calls[j].id, &calls[j].name, &blocks, c.error),
                            c,
                        ));
                    }
                }
                // Index the turn as a flush would: protected results are
                // filtered out (unless the protection changed since), some are
                // spilled eagerly (no short ref), the rest form one batch.
                let mut batch = Vec::new();
                if t.index {
                    for &(i, c) in &results {
                        let m = &b.meta[i];
                        if is_protected(m) && !t.index_protected {
                            continue;
                        }
                        if state.is_summarized(&m.call_id, Some(m.ts)) {
                            continue;
                        }
                        if c.spill {
                            state.add_record(spilled_record(m, m.turn), true);
                        } else {
                            batch.push(i);
                        }
                    }
                }
                if !batch.is_empty() {
                    let legacy = t.legacy && fresh_ids;
                    let refs = index_batch(
                        &mut state,
                        &b,
                        &batch,
                        legacy,
                        &format!("- batch {n}: ran tools ✓"),
                    );
                    if t.summary_message {
                        let names: Vec<String> =
                            batch.iter().map(|&i| b.meta[i].tool_name.clone()).collect();
                        b.summary_message(&refs, &names, &format!("Summary of batch {n} ✓"));
                    }
                }
                // Dedup: an unindexed result identical to an indexed one.
                for &(i, c) in &results {
                    let m = &b.meta[i];
                    if !c.alias || is_protected(m) || state.is_summarized(&m.call_id, Some(m.ts)) {
                        continue;
                    }
                    let original = state
                        .records()
                        .iter()
                        .find(|r| {
                            r.tool_name == m.tool_name
                                && r.result_text == m.text
                                && r.spill_path.is_none()
                                && r.result_timestamp.is_some()
                        })
                        .map(|r| r.key());
                    if let Some(orig) = original {
                        state.register_dedup_alias(&m.key(), &orig);
                    }
                }
            }
        }
    }
    add_chains(&mut b, &mut state, case, &is_protected);
    let messages = b.messages();
    Built {
        branch: b,
        messages,
        state,
        config,
        protection,
    }
}

fn add_chains(
    b: &mut Branch,
    state: &mut State,
    case: &Case,
    is_protected: &dyn Fn(&Meta) -> bool,
) {
    let closed = b.chains.clone();
    let mut mismatch = case.knobs.mismatch;
    for (ci, &(start, end)) in closed.iter().enumerate() {
        let spec = &case.chains[ci % case.chains.len()];
        let block = state.allocate_block_id();
        let at = b.later_ts();
        let body = match spec.body % 3 {
            0 => None,
            1 => Some(format!("Range {block}: read, edited and tested ✓")),
            _ => Some(format!("Continues {{b1}} then {{{block}}} and {{b99}} — ✓")),
        };
        match spec.action {
            0..=4 => {
                let end = match (spec.action, closed.get(ci + 1)) {
                    (4, Some(&(_, next_end))) => next_end,
                    _ => end,
                };
                let mut entry =
                    compress_chain(state, b, (start, end), block, at, body, is_protected);
                if mismatch {
                    entry.dropped_tool_call_ids.push("not_in_range".into());
                    mismatch = false;
                }
                state.register_chain(entry);
            }
            5 => {
                let (s, f) = match spec.body {
                    0 => (support::T0 - 5, Some(b.meta[end].ts)),
                    1 => (b.meta[start].ts, None),
                    2 => (b.meta[start].ts, Some(b.meta[start].ts)),
                    3 => match ci.checked_sub(1).map(|p| closed[p]) {
                        Some((_, prev_end)) => (b.meta[start].ts, Some(b.meta[prev_end].ts)),
                        None => (b.meta[start].ts, Some(support::T0 - 7)),
                    },
                    _ => (b.meta[end].ts, Some(b.meta[end].ts)),
                };
                state.register_chain(ChainEntry {
                    block_id: block,
                    start_user_timestamp: s,
                    dropped_tool_call_ids: vec!["bogus".into()],
                    final_assistant_timestamp: f,
                    tool_refs: vec![],
                    compressed_at: at,
                    range_summary_text: Some("bogus".into()),
                    dropped_occurrence_keys: None,
                    protected_tool_call_ids: None,
                    body_source: None,
                    extra: Map::new(),
                });
            }
            _ => {}
        }
    }
}

// ---- oracles --------------------------------------------------------------------

/// The orphan rule, on the input: walking forward, an assistant message opens
/// the set of its tool-call ids, a tool result consumes its id from the open
/// set, and any other message empties it. A tool result whose id is not open
/// when it is reached is an orphan (no open call answers to it).
fn orphans(branch: &Branch) -> Vec<bool> {
    let mut open: HashSet<&str> = HashSet::new();
    branch
        .meta
        .iter()
        .map(|m| match m.kind {
            Kind::Assistant => {
                open = m.calls.iter().map(|c| c.id.as_str()).collect();
                false
            }
            Kind::ToolResult => !open.remove(m.call_id.as_str()),
            _ => {
                open.clear();
                false
            }
        })
        .collect()
}

/// The texts of the `<compressed-chain>` synthetics of an output.
fn synthetic_texts(output: &[Message]) -> Vec<String> {
    output
        .iter()
        .filter(|m| m.is(&Role::User) && m.skeleton().is_synthetic_chain)
        .filter_map(|m| {
            m.to_value().unwrap()["content"][0]["text"]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}

fn relocated(synthetics: &[String], m: &Meta) -> bool {
    let block = format!(
        "<protected-output tool=\"{}\">\n{}\n</protected-output>",
        m.tool_name.replace('"', "&quot;"),
        condense_core::neutralize_closing_tags(&m.text)
    );
    synthetics.iter().any(|s| s.contains(&block))
}

fn output_of(built: &Built, r: &Render) -> (Vec<Message>, HashSet<String>) {
    let out = r.messages(&built.messages);
    let jsons = out.iter().map(|m| m.json().to_owned()).collect();
    (out, jsons)
}

fn config() -> ProptestConfig {
    // 256 cases unless PROPTEST_CASES says otherwise.
    ProptestConfig::default()
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
            let verbatim = jsons.contains(built.messages[i].json());
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
        let a: Vec<String> = first.messages(&built.messages).iter().map(|m| m.json().to_owned()).collect();
        let b: Vec<String> = second.messages(&built.messages).iter().map(|m| m.json().to_owned()).collect();
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
            if m.kind != Kind::ToolResult || jsons.contains(built.messages[i].json()) {
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
        let r = built.render_with(&State::new());
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
    let config = Config::default();
    let protection = Protection::new(&config);
    let messages = b.messages();
    let r = render(
        &messages,
        &State::new(),
        &RenderSettings {
            config: &config,
            protection: &protection,
        },
    );
    let out = r.messages(&messages);
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
    let mut state = State::new();
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

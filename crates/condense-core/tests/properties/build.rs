//! Building a case: the pi branch, the state a flush and the chain
//! compressor would have written for it, and the config its knobs give.

use condense_core::Branch as PruningBranch;
use condense_core::ChainEntry;
use condense_core::Config;
use condense_core::Message;
use condense_core::Protection;
use condense_core::{render, Render, RenderSettings};
use serde_json::{json, Map, Value};

use crate::case_model::{Case, Event, Knobs, PROMPTS, TEXTS, TOOLS};
use crate::support;
use crate::support::{compress_chain, index_batch, spilled_record, Branch, Call, Meta};

pub struct Built {
    pub branch: Branch,
    pub messages: Vec<Message>,
    pub state: PruningBranch,
    pub config: Config,
    pub protection: Protection,
}

impl Built {
    pub fn render(&self) -> Render {
        self.render_with(&self.state)
    }

    pub fn render_with(&self, state: &PruningBranch) -> Render {
        let settings = RenderSettings {
            config: &self.config,
            protection: &self.protection,
        };
        render(&self.messages, state, &settings)
    }

    pub fn protected(&self, m: &Meta) -> bool {
        self.protection.is_protected(&m.tool_name, &m.args)
    }
}

pub fn config_of(k: &Knobs) -> Config {
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

pub fn args_for(kind: u8, n: usize) -> Value {
    match kind {
        0 => json!({"command": format!("ls -la dir{n}")}),
        1 => json!({"path": format!("src/file{n}.rs")}),
        2 => json!({"pattern": "fn main", "path": "src"}),
        3 => json!({}),
        4 => json!({"path": format!("src/big{n}.rs"), "content": "é".repeat(300 + n % 7 * 150)}),
        _ => json!({"path": format!("repo/skills/demo{n}/SKILL.md")}),
    }
}

pub fn extra(b: &mut Branch, kind: u8, n: usize) {
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

pub fn build(case: &Case) -> Built {
    let config = config_of(&case.knobs);
    let protection = Protection::new(&config);
    let is_protected = |m: &Meta| protection.is_protected(&m.tool_name, &m.args);
    let mut b = Branch::new();
    let mut state = PruningBranch::new();
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

pub fn add_chains(
    b: &mut Branch,
    state: &mut PruningBranch,
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

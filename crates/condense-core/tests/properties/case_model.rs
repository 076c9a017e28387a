//! The case model: what a generated case is made of (prompts, tool turns
//! with their calls, replies, third-party messages; what to do with each
//! closed chain; the config knobs), and the strategies that generate it.

use proptest::prelude::*;

pub const TOOLS: &[&str] = &[
    "bash",
    "read",
    "write",
    "edit",
    "todo",
    "grep",
    "context_tree_query",
];

pub const TEXTS: &[&str] = &[
    "ok",
    "total 0\nfile.txt",
    "héllo wörld ✓",
    "emoji 😀 line\n\"quoted\" \\ backslash",
    "<tag> & </tag>\u{2028}tail",
    "",
];

pub const PROMPTS: &[&str] = &[
    "fix the build",
    "Explique-moi ce module, s'il te plaît.",
    "run the tests 🧪",
    "what does `render` do?",
];

#[derive(Debug, Clone)]
pub struct CallSpec {
    pub tool: usize,
    /// `Some(k)`: the reused provider id `call_k`; `None`: a fresh id.
    pub pooled: Option<u8>,
    /// 0..=3 small arguments, 4 a large body, 5 a protected path.
    pub args: u8,
    /// Below `TEXTS.len()`: that text; else a fresh one.
    pub text: u8,
    pub error: bool,
    pub missing: bool,
    pub duplicate: bool,
    pub spill: bool,
    pub alias: bool,
}

#[derive(Debug, Clone)]
pub struct TurnSpec {
    pub thinking: bool,
    pub text: bool,
    pub calls: Vec<CallSpec>,
    /// A message between the assistant and its results (orphans them).
    pub barrier: Option<u8>,
    pub reverse: bool,
    pub index: bool,
    pub legacy: bool,
    pub summary_message: bool,
    pub index_protected: bool,
    pub two_blocks: bool,
}

#[derive(Debug, Clone)]
pub enum Event {
    Prompt(u8),
    Turn(TurnSpec),
    Reply { thinking: bool },
    Extra(u8),
}

#[derive(Debug, Clone)]
pub struct ChainSpec {
    /// 0..=3 compress, 4 compress a span up to the next closed chain,
    /// 5 an unresolvable entry, else leave the chain alone.
    pub action: u8,
    /// Range summary (0 none, 1 text, 2 text with `{bN}` refs) or bogus kind.
    pub body: u8,
}

#[derive(Debug, Clone)]
pub struct Knobs {
    pub grace: u32,
    pub purge: bool,
    pub cooldown: u32,
    pub min_arg: u64,
    pub chains: bool,
    pub strip_final: bool,
    pub thinking_strip: bool,
    pub keep_last: u32,
    pub protected: Vec<bool>,
    pub path_globs: bool,
    pub mismatch: bool,
}

#[derive(Debug, Clone)]
pub struct Case {
    pub events: Vec<Event>,
    pub chains: Vec<ChainSpec>,
    pub knobs: Knobs,
}

pub fn call_spec(clean: bool) -> impl Strategy<Value = CallSpec> {
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

pub fn turn_spec(clean: bool) -> impl Strategy<Value = TurnSpec> {
    (
        any::<bool>(),
        any::<bool>(),
        // Now and then a turn of more calls than the render's id sets and
        // capture's result lookup scan before they hash.
        prop_oneof![
            19 => prop::collection::vec(call_spec(clean), 1..=3),
            1 => prop::collection::vec(call_spec(clean), 30..=40),
        ],
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

pub fn event(clean: bool) -> impl Strategy<Value = Event> {
    let extras = if clean { 5u8 } else { 6u8 };
    prop_oneof![
        2 => (0u8..PROMPTS.len() as u8).prop_map(Event::Prompt),
        6 => turn_spec(clean).prop_map(Event::Turn),
        2 => any::<bool>().prop_map(|thinking| Event::Reply { thinking }),
        1 => (0..extras).prop_map(Event::Extra),
    ]
}

pub fn knobs() -> impl Strategy<Value = Knobs> {
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

pub fn case(clean: bool) -> impl Strategy<Value = Case> {
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

//! pi's auto-compaction, as the replay synthesizes it.
//!
//! A real pi session cannot send a prompt past its model's context window:
//! pi compacts first (`_checkCompaction` in pi's `agent-session`). It checks
//! after each agent run (and again before the next prompt, which sees the
//! same state), compacting when the last call's prompt and output exceed
//! the window minus `reserveTokens`; and when the provider refuses a prompt
//! longer than the window, it compacts and retries the call once. A
//! compaction keeps the newest messages worth about `keepRecentTokens`
//! (pi's chars/4 estimate, walking back from the newest entry), never
//! cutting at a tool result, and replaces the rest by a summary that the
//! session's model writes from the serialized conversation. The replay
//! ([`super::replay`]) decides where; this module computes the cut point, the
//! summary call's tokens and the `compaction` entry, as pi's
//! `prepareCompaction` and `compact` do. Figures and rules: docs/economy.md,
//! "pi's compaction".

use condense_core::{Message, Role};
use condense_store::context::build_context;
use condense_store::session::{Entry, EntryType, Session};
use serde_json::json;

use super::policy::SummarizerWork;
use super::tokens::{content_size, Chars, TokenCount};

/// pi's `compaction` settings and the modelled summary size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionSettings {
    /// The model's context window.
    pub context_window: u64,
    /// `reserveTokens` (pi's default 16,384).
    pub reserve_tokens: u64,
    /// `keepRecentTokens` (pi's default 20,000).
    pub keep_recent_tokens: u64,
    /// Tokens a summary call answers (capped as pi caps `maxTokens`).
    pub summary_tokens: u64,
}

/// pi's defaults.
pub const DEFAULT_RESERVE_TOKENS: u64 = condense_core::COMPACTION_RESERVE_TOKENS;
/// pi's default.
pub const DEFAULT_KEEP_RECENT_TOKENS: u64 = condense_core::COMPACTION_KEEP_RECENT_TOKENS;
/// The summary a compaction writes, in tokens.
pub const DEFAULT_SUMMARY_TOKENS: u64 = condense_core::COMPACTION_SUMMARY_TOKENS;

impl CompactionSettings {
    /// pi's threshold check: the last call's prompt and output (`usage`)
    /// exceed the window less the reserve.
    pub fn over_threshold(&self, usage: u64) -> bool {
        usage > self.context_window.saturating_sub(self.reserve_tokens)
    }

    /// The provider refuses a prompt longer than the window.
    pub fn overflows(&self, prompt: u64) -> bool {
        prompt > self.context_window
    }
}

/// The latest compaction on the path: where the next one starts summarizing
/// from, and the summary it updates.
#[derive(Debug, Clone, Default)]
pub struct Boundary {
    /// The index (into the recorded branch) of its first kept entry.
    pub first_kept: usize,
    /// Its summary, for the next summary's `<previous-summary>`.
    pub previous_summary_chars: Option<usize>,
    /// Where synthesized compactions stand (before these recorded entries):
    /// pi's cut-point scan stops at a compaction.
    pub marks: Vec<usize>,
}

impl Boundary {
    /// After a recorded compaction at `at` in `branch`.
    pub fn recorded(&mut self, branch: &[&Entry], at: usize) {
        let Some(entry) = branch.get(at) else {
            return;
        };
        let first_kept = entry
            .raw_field("firstKeptEntryId")
            .and_then(|raw| serde_json::from_str::<String>(raw).ok())
            .and_then(|id| branch[..at].iter().position(|e| e.id == id))
            .unwrap_or(at + 1);
        let summary = entry
            .raw_field("summary")
            .and_then(|raw| serde_json::from_str::<String>(raw).ok());
        self.first_kept = first_kept;
        self.previous_summary_chars = summary.map(|s| condense_core::js_len(&s));
    }
}

/// A compaction the replay inserts before the recorded entry `at`.
pub struct Synthesized {
    /// The recorded entry it goes before.
    pub at: usize,
    /// Its first kept entry (an index into the branch).
    pub first_kept: usize,
    /// That entry's id.
    pub first_kept_id: String,
    /// The `compaction` entry.
    pub entry: Entry,
    /// Its summary calls.
    pub work: SummarizerWork,
    /// Its summary's length in characters.
    pub summary_chars: usize,
}

/// pi's `SUMMARIZATION_SYSTEM_PROMPT`, `SUMMARIZATION_PROMPT`,
/// `UPDATE_SUMMARIZATION_PROMPT` and `TURN_PREFIX_SUMMARIZATION_PROMPT`
/// (pi 0.83), by length: only their size reaches the bill.
const SYSTEM_PROMPT_CHARS: usize = 310;
const SUMMARY_PROMPT_CHARS: usize = 879;
const UPDATE_PROMPT_CHARS: usize = 1_257;
const TURN_PREFIX_PROMPT_CHARS: usize = 440;
/// `<conversation>\n` … `\n</conversation>\n\n`.
const CONVERSATION_TAGS_CHARS: usize = 33;
/// `<previous-summary>\n` … `\n</previous-summary>\n\n`.
const PREVIOUS_SUMMARY_TAGS_CHARS: usize = 41;
/// pi truncates each tool result to this many characters when it
/// serializes the conversation, and says how many it left out.
const TOOL_RESULT_MAX_CHARS: u64 = 2_000;
const TRUNCATION_MARKER_CHARS: u64 = 40;
/// pi's estimate counts an image as this many characters.
const IMAGE_CHARS: u64 = 4_800;

/// pi's `estimateTokens` of a message: its text, chars/4, rounded up.
fn estimate(message: &Message) -> u64 {
    let size = content_size(message, &Chars).unwrap_or_default();
    (size.units + IMAGE_CHARS * size.images).div_ceil(4)
}

/// The messages an entry adds to pi's context (none for a compaction).
fn entry_messages(entry: &Entry) -> Vec<Message> {
    if entry.kind == EntryType::Compaction {
        return Vec::new();
    }
    build_context(&[entry]).messages
}

fn is_cut_point(m: &Message) -> bool {
    !m.is(&Role::ToolResult) && (m.is(&Role::Assistant) || starts_turn(m))
}

fn starts_turn(m: &Message) -> bool {
    [
        Role::User,
        Role::BashExecution,
        Role::Custom,
        Role::BranchSummary,
        Role::CompactionSummary,
    ]
    .iter()
    .any(|r| m.is(r))
}

/// pi's `findCutPoint` over `branch[start..end]`: the first kept entry and,
/// when the cut splits a turn, the entry that started it.
fn cut_point(
    branch: &[&Entry],
    start: usize,
    end: usize,
    keep_recent: u64,
    marks: &[usize],
) -> Option<(usize, Option<usize>)> {
    let valid = |i: usize| entry_messages(branch[i]).iter().any(is_cut_point);
    let first_valid = (start..end).find(|&i| valid(i))?;
    let mut cut = first_valid;
    let mut kept = 0u64;
    for i in (start..end).rev() {
        let tokens: u64 = entry_messages(branch[i]).iter().map(estimate).sum();
        if tokens == 0 {
            continue;
        }
        kept += tokens;
        if kept >= keep_recent {
            cut = (i..end).find(|&c| valid(c)).unwrap_or(first_valid);
            break;
        }
    }
    // Entries before the cut that add nothing to the context stay with it,
    // up to a compaction.
    while cut > start && !marks.contains(&cut) {
        let previous = branch[cut - 1];
        if previous.kind == EntryType::Compaction || !entry_messages(previous).is_empty() {
            break;
        }
        cut -= 1;
    }
    let starts = entry_messages(branch[cut]).iter().any(starts_turn);
    let turn_start = if starts {
        None
    } else {
        (start..=cut)
            .rev()
            .find(|&i| entry_messages(branch[i]).iter().any(starts_turn))
    };
    Some((cut, turn_start))
}

/// The length of pi's `serializeConversation` of these entries' messages
/// (each entry's first message, as `getMessageFromEntryForCompaction`).
fn serialized_chars(entries: &[&Entry]) -> usize {
    let mut chars = 0u64;
    let mut parts = 0u64;
    for entry in entries {
        let Some(m) = entry_messages(entry).into_iter().next() else {
            continue;
        };
        let size = content_size(&m, &Chars).unwrap_or_default();
        let (label, text) = if m.is(&Role::ToolResult) {
            let text = if size.units > TOOL_RESULT_MAX_CHARS {
                TOOL_RESULT_MAX_CHARS + TRUNCATION_MARKER_CHARS
            } else {
                size.units
            };
            ("[Tool result]: ".len(), text)
        } else if m.is(&Role::Assistant) {
            ("[Assistant]: ".len(), size.units)
        } else {
            ("[User]: ".len(), size.units)
        };
        if text == 0 {
            continue;
        }
        chars += label as u64 + text;
        parts += 1;
    }
    // Parts are joined by a blank line.
    (chars + 2 * parts.saturating_sub(1)) as usize
}

/// Everything [`synthesize`] needs about the replay's state.
pub struct Moment<'a> {
    /// The recorded branch.
    pub branch: &'a [&'a Entry],
    /// The compaction goes before this recorded entry.
    pub at: usize,
    /// pi's estimate of the context's tokens before it (`tokensBefore`).
    pub tokens_before: u64,
    /// The entry's time (ISO 8601).
    pub timestamp: &'a str,
    /// A number unique within the replay, for the entry's id.
    pub serial: usize,
}

/// The compaction pi would make at `moment`, or `None` where pi makes none
/// (nothing before the cut point to summarize).
pub fn synthesize(
    settings: &CompactionSettings,
    boundary: &Boundary,
    moment: &Moment<'_>,
    tokens: &dyn TokenCount,
) -> Option<Synthesized> {
    let branch = moment.branch;
    let start = boundary.first_kept.min(moment.at);
    let (first_kept, turn_start) = cut_point(
        branch,
        start,
        moment.at,
        settings.keep_recent_tokens,
        &boundary.marks,
    )?;
    let history_end = turn_start.unwrap_or(first_kept);
    let history = &branch[start..history_end];
    let prefix = turn_start.map(|t| &branch[t..first_kept]);
    let history_chars = serialized_chars(history);
    let prefix_chars = prefix.map(serialized_chars).unwrap_or(0);
    if history_chars == 0 && prefix_chars == 0 {
        return None;
    }
    let count = |chars: usize| tokens.chars(chars);
    let mut work = SummarizerWork::default();
    let mut summary_tokens = 0;
    // The history is summarized unless the cut splits the first turn (pi
    // then writes "No prior history." without a call).
    if history_chars > 0 || prefix.is_none() {
        let prompt = match boundary.previous_summary_chars {
            Some(previous) => UPDATE_PROMPT_CHARS + PREVIOUS_SUMMARY_TAGS_CHARS + previous,
            None => SUMMARY_PROMPT_CHARS,
        };
        work.input += count(SYSTEM_PROMPT_CHARS + CONVERSATION_TAGS_CHARS + history_chars + prompt);
        let out = settings
            .summary_tokens
            .min(settings.reserve_tokens * 8 / 10);
        work.output += out;
        summary_tokens += out;
    }
    if prefix.is_some() {
        work.input += count(
            SYSTEM_PROMPT_CHARS + CONVERSATION_TAGS_CHARS + prefix_chars + TURN_PREFIX_PROMPT_CHARS,
        );
        let out = settings.summary_tokens.min(settings.reserve_tokens / 2);
        work.output += out;
        summary_tokens += out;
    }
    let first_kept_id = &branch.get(first_kept)?.id;
    let summary = summary_text(summary_tokens, tokens);
    let summary_chars = summary.len();
    let line = json!({
        "type": "compaction",
        "id": format!("simcompaction{:05}", moment.serial),
        "parentId": null,
        "timestamp": moment.timestamp,
        "summary": summary,
        "firstKeptEntryId": first_kept_id,
        "tokensBefore": moment.tokens_before,
    });
    let header = r#"{"type":"session","version":3,"id":"simulated","timestamp":"","cwd":""}"#;
    let entry = Session::parse(&format!("{header}\n{line}"))
        .entries
        .into_iter()
        .next()?;
    Some(Synthesized {
        at: moment.at,
        first_kept,
        first_kept_id: first_kept_id.clone(),
        entry,
        work,
        summary_chars,
    })
}

/// Text of about `want` tokens by the token model (a summary only has to
/// have a size).
fn summary_text(want: u64, tokens: &dyn TokenCount) -> String {
    const PROSE: &str = "## Progress\n- the session read and changed the files it names; ";
    let mut chars = 0;
    while tokens.chars(chars) < want && chars < 1 << 24 {
        chars += PROSE.len();
    }
    PROSE.repeat(chars / PROSE.len())
}

/// The context pi rebuilds after a synthesized compaction (the summary,
/// then the kept entries' messages up to it).
pub fn context_after(branch: &[&Entry], synthesized: &Synthesized) -> Vec<Message> {
    let mut entries: Vec<&Entry> = branch[synthesized.first_kept..synthesized.at].to_vec();
    entries.push(&synthesized.entry);
    build_context(&entries).messages
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate::tokens::{Coefficients, TokenModel};
    use proptest::prelude::*;

    /// A session from a short script: `u` user, `a` assistant with a tool
    /// call, `r` its reply (text only), `t` a tool result, `m` a model
    /// change (no message); each with its content's characters.
    fn session(script: &[(char, usize)]) -> Session {
        let mut lines =
            vec![r#"{"type":"session","version":3,"id":"s","timestamp":"","cwd":""}"#.to_owned()];
        for (n, &(kind, chars)) in script.iter().enumerate() {
            let text = "x".repeat(chars);
            let (id, parent, ts) = (
                format!("e{n}"),
                if n == 0 {
                    serde_json::Value::Null
                } else {
                    json!(format!("e{}", n - 1))
                },
                "2025-01-01T00:00:00.000Z",
            );
            let message = match kind {
                'u' => json!({"role": "user", "content": text}),
                'a' => json!({"role": "assistant", "content": [
                    {"type": "toolCall", "id": format!("c{n}"), "name": "read", "arguments": {"p": text}}]}),
                'r' => json!({"role": "assistant", "content": [{"type": "text", "text": text}]}),
                't' => {
                    json!({"role": "toolResult", "toolCallId": format!("c{}", n.saturating_sub(1)),
                    "toolName": "read", "content": [{"type": "text", "text": text}]})
                }
                _ => {
                    lines.push(
                        json!({"type": "model_change", "id": id, "parentId": parent,
                        "timestamp": ts, "provider": "p", "modelId": "m"})
                        .to_string(),
                    );
                    continue;
                }
            };
            lines.push(
                json!({"type": "message", "id": id, "parentId": parent, "timestamp": ts, "message": message})
                    .to_string(),
            );
        }
        Session::parse(&lines.join("\n"))
    }

    fn model() -> TokenModel<Chars> {
        TokenModel {
            measure: Chars,
            coefficients: Coefficients {
                per_unit: 0.25,
                per_message: 0.0,
                overhead: 0,
            },
        }
    }

    /// (script, keepRecentTokens, first kept entry, the turn start when the
    /// cut splits one), worked out by hand from pi's `findCutPoint` with
    /// chars/4 estimates. An assistant's estimate is its tool name (4) and
    /// arguments (`{"p":"…"}`, 8 + its characters).
    type CutCase = (
        &'static [(char, usize)],
        u64,
        Option<(usize, Option<usize>)>,
    );
    const CUTS: &[CutCase] = &[
        // Everything fits: kept from the first entry, nothing to summarize.
        (
            &[('u', 400), ('a', 100), ('t', 400), ('r', 40)],
            1_000,
            Some((0, None)),
        ),
        // The walk reaches the budget in the second turn's tool result
        // (3 + 400 + 25 + 28 tokens); the cut moves forward to the reply
        // after it, which splits the second turn (it started at e3).
        (
            &[
                ('u', 400),
                ('r', 40),
                ('u', 40),
                ('a', 100),
                ('t', 1600),
                ('r', 100),
                ('u', 10),
            ],
            420,
            Some((5, Some(2))),
        ),
        // Reached at a user message: the cut is there, no split.
        (
            &[
                ('u', 400),
                ('r', 40),
                ('u', 4000),
                ('a', 100),
                ('t', 40),
                ('r', 40),
            ],
            200,
            Some((2, None)),
        ),
        // A model change before the cut stays with the kept part; pi then
        // takes the cut (the model change) for a split of the turn before.
        (
            &[('u', 400), ('r', 40), ('m', 0), ('u', 4000), ('r', 40)],
            200,
            Some((2, Some(0))),
        ),
        // Only tool results after the budget is reached: the cut falls back
        // to the first cut point, as pi's does.
        (
            &[('u', 40), ('a', 40), ('t', 8000), ('t', 8000)],
            100,
            Some((0, None)),
        ),
        // No valid cut point at all.
        (&[('t', 400), ('t', 400)], 10, None),
    ];

    #[test]
    fn the_cut_point_is_pis() {
        for (n, (script, keep, want)) in CUTS.iter().enumerate() {
            let s = session(script);
            let branch: Vec<&Entry> = s.entries.iter().collect();
            let got = cut_point(&branch, 0, branch.len(), *keep, &[]);
            assert_eq!(got, *want, "case {n}");
        }
    }

    #[test]
    fn a_compaction_summarizes_what_it_cuts_and_prices_the_calls() {
        let settings = CompactionSettings {
            context_window: 100_000,
            reserve_tokens: 16_384,
            keep_recent_tokens: 420,
            summary_tokens: 500,
        };
        let s = session(&[
            ('u', 400),
            ('r', 40),
            ('u', 40),
            ('a', 100),
            ('t', 1600),
            ('r', 100),
            ('u', 10),
        ]);
        let branch: Vec<&Entry> = s.entries.iter().collect();
        let moment = Moment {
            branch: &branch,
            at: branch.len(),
            tokens_before: 900,
            timestamp: "2025-01-01T00:00:00.000Z",
            serial: 0,
        };
        let c = synthesize(&settings, &Boundary::default(), &moment, &model()).unwrap();
        assert_eq!((c.first_kept, c.first_kept_id.as_str()), (5, "e5"));
        // History: e0, e1 ("[User]: " + 400, "[Assistant]: " + 40, a blank
        // line between); turn prefix: e2..e4 (the tool result cut at 2,000
        // characters does not apply to 1,600).
        let history = 8 + 400 + 2 + 13 + 40;
        let prefix = 8 + 40 + 2 + 13 + (4 + 8 + 100) + 2 + 15 + 1600;
        let calls = |chars: usize| (0.25 * chars as f64).round() as u64;
        assert_eq!(
            c.work.input,
            calls(SYSTEM_PROMPT_CHARS + CONVERSATION_TAGS_CHARS + history + SUMMARY_PROMPT_CHARS)
                + calls(
                    SYSTEM_PROMPT_CHARS
                        + CONVERSATION_TAGS_CHARS
                        + prefix
                        + TURN_PREFIX_PROMPT_CHARS
                )
        );
        // Two summaries of 500 tokens: the history's and the turn prefix's.
        assert_eq!(c.work.output, 1_000);
        assert!(model().chars(c.summary_chars) >= 1_000);
        // The entry is a compaction pi's context builder reads: the
        // summary, then the kept entries.
        let context = context_after(&branch, &c);
        assert!(context[0].is(&Role::CompactionSummary));
        assert_eq!(context.len(), 1 + 2);
        assert_eq!(c.entry.raw_field("tokensBefore"), Some("900"));
    }

    #[test]
    fn a_later_compaction_updates_the_previous_summary() {
        let settings = CompactionSettings {
            context_window: 100_000,
            reserve_tokens: 16_384,
            keep_recent_tokens: 100,
            summary_tokens: 50_000,
        };
        let s = session(&[('u', 400), ('r', 400), ('u', 400), ('r', 400), ('u', 400)]);
        let branch: Vec<&Entry> = s.entries.iter().collect();
        let boundary = Boundary {
            first_kept: 2,
            previous_summary_chars: Some(1_000),
            marks: vec![2],
        };
        let moment = Moment {
            branch: &branch,
            at: 5,
            tokens_before: 0,
            timestamp: "",
            serial: 1,
        };
        let c = synthesize(&settings, &boundary, &moment, &model()).unwrap();
        assert_eq!(c.first_kept, 4);
        let history = 8 + 400 + 2 + 13 + 400;
        let prompt = UPDATE_PROMPT_CHARS + PREVIOUS_SUMMARY_TAGS_CHARS + 1_000;
        assert_eq!(
            c.work.input,
            (0.25 * (SYSTEM_PROMPT_CHARS + CONVERSATION_TAGS_CHARS + history + prompt) as f64)
                .round() as u64
        );
        // pi caps the summary at 0.8 of the reserve.
        assert_eq!(c.work.output, 16_384 * 8 / 10);
    }

    fn script() -> impl Strategy<Value = Vec<(char, usize)>> {
        // Turns: a user prompt, tool calls with their results, a reply.
        let turn = (
            1usize..3000,
            prop::collection::vec((1usize..300, 1usize..9000), 0..5),
            1usize..600,
        )
            .prop_map(|(u, calls, r)| {
                let mut t = vec![('u', u)];
                for (a, out) in calls {
                    t.push(('a', a));
                    t.push(('t', out));
                }
                t.push(('r', r));
                t
            });
        prop::collection::vec(turn, 1..8).prop_map(|ts| ts.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn a_cut_is_never_at_a_tool_result_and_keeps_the_budget(
            script in script(),
            keep in 100u64..6000,
        ) {
            let s = session(&script);
            let branch: Vec<&Entry> = s.entries.iter().collect();
            let Some((cut, turn_start)) = cut_point(&branch, 0, branch.len(), keep, &[]) else {
                return Ok(());
            };
            prop_assert!(script[cut].0 != 't');
            // The kept part reaches the budget, unless everything is kept or
            // the budget was reached at tool results the cut moved past.
            let kept: u64 = branch[cut..]
                .iter()
                .flat_map(|e| entry_messages(e))
                .map(|m| estimate(&m))
                .sum();
            prop_assert!(
                cut == 0 || kept >= keep || script[cut - 1].0 == 't',
                "cut {cut} keeps {kept}"
            );
            // A split names the user prompt of the cut's turn.
            if let Some(t) = turn_start {
                prop_assert_eq!(script[t].0, 'u');
                prop_assert!(script[t + 1..=cut].iter().all(|(k, _)| *k != 'u'));
            }
        }
    }
}

//! Capture: which completed tool calls are waiting to be summarized.
//!
//! Two ways in, as in pi-condense:
//! - [`capture_turn`]: a live turn (the assistant message and the tool
//!   results of `turn_end`);
//! - [`capture_branch`]: a rescan of the whole branch (what every flush does,
//!   so the work survives reloads). Results are paired only within their
//!   assistant's own turn (the results after it, before the next assistant),
//!   the first matching result wins, the turn counter counts every assistant
//!   message, and every user message starts a new user-turn group.
//!
//! Then [`trim_to_pending`] drops what the frontier says was already
//! attempted, and [`group_by_mode`] merges a user-turn group's batches in
//! `agent-message` batching.

use std::ops::Range;
use std::sync::Arc;

use rustc_hash::FxHashMap;
use serde_json::Value;

use crate::config::BatchingMode;
use crate::message::{Message, Role};
use crate::occurrence::OccurrenceKey;
use crate::protect::Protection;
use crate::records::Frontier;
use crate::state::State;
use crate::text::SharedText;

mod memo;
mod read;

pub(crate) use memo::CaptureMemo;
use memo::{CallRead, TurnRead};
use read::{assistant_parts, call_from};

/// Result text of a call whose result never arrived.
pub const NO_RESULT: &str = "(no result)";

/// One tool call and its result.
#[derive(Debug, Clone, PartialEq)]
pub struct CapturedCall {
    /// The provider's tool-call id.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The arguments (`input`, `args` or `arguments` of the block), shared:
    /// a rescan hands the pending calls out again at every ask.
    pub args: Arc<Value>,
    /// The result's text blocks joined by `\n`: a window on the result
    /// message's JSON where it is one literal there.
    pub result_text: SharedText,
    /// Whether the result was an error.
    pub is_error: bool,
    /// The result message's timestamp.
    pub result_timestamp: Option<i64>,
}

impl CapturedCall {
    /// The occurrence this call's result is.
    pub fn key(&self) -> OccurrenceKey {
        OccurrenceKey::new(self.tool_call_id.clone(), self.result_timestamp)
    }

    /// The index record of this call, summarized in the batch of turn
    /// `turn_index` captured at `timestamp`.
    pub fn record(&self, turn_index: i64, timestamp: i64) -> crate::records::ToolCallRecord {
        crate::records::ToolCallRecord {
            tool_call_id: self.tool_call_id.clone(),
            tool_name: self.tool_name.clone(),
            args: Value::clone(&self.args),
            result_text: self.result_text.clone(),
            is_error: self.is_error,
            turn_index,
            timestamp,
            result_timestamp: self.result_timestamp,
            spill_path: None,
            spill_bytes: None,
            result_preview: None,
            content_hash: None,
            extra: Default::default(),
        }
    }
}

/// The calls of one assistant turn (or of a merged user-turn group).
#[derive(Debug, Clone, PartialEq)]
pub struct CapturedBatch {
    /// The assistant turn counter (the last turn's, when merged).
    pub turn_index: i64,
    /// When the batch was captured (the entry's timestamp on a rescan).
    pub timestamp: i64,
    /// The assistant's prose in that turn.
    pub assistant_text: String,
    /// The calls, in block order.
    pub calls: Vec<CapturedCall>,
    /// The user-turn group (rescans only).
    pub user_turn_group: Option<u32>,
}

impl CapturedBatch {
    /// Sum of the calls' result lengths (UTF-16 units).
    pub fn raw_chars(&self) -> usize {
        self.calls.iter().map(|c| c.result_text.js_len()).sum()
    }
}

/// A turn's tool results by call id, each id answered by its first result
/// (what a forward `find` picks). A turn answers a handful of calls, where
/// scanning beats hashing; past [`SCAN_LIMIT`] results the ids are hashed,
/// so a message of thousands of calls is captured in linear time.
struct FirstResults<'m> {
    results: Vec<&'m Message>,
    by_id: Option<FxHashMap<&'m str, &'m Message>>,
}

/// Results scanned before [`FirstResults`] hashes.
const SCAN_LIMIT: usize = crate::ID_SCAN_LIMIT;

impl<'m> FirstResults<'m> {
    fn new(results: impl IntoIterator<Item = &'m Message>) -> Self {
        let results: Vec<&Message> = results.into_iter().collect();
        let by_id = (results.len() > SCAN_LIMIT).then(|| {
            let mut map = FxHashMap::default();
            for r in &results {
                if let Some(id) = r.skeleton().tool_call_id.as_deref() {
                    map.entry(id).or_insert(*r);
                }
            }
            map
        });
        FirstResults { results, by_id }
    }

    fn get(&self, id: &str) -> Option<&'m Message> {
        match &self.by_id {
            Some(map) => map.get(id).copied(),
            None => self
                .results
                .iter()
                .find(|r| r.skeleton().tool_call_id.as_deref() == Some(id))
                .copied(),
        }
    }
}

/// Captures a live turn: every tool call of `assistant` with the first of
/// `results` answering it.
pub fn capture_turn(
    assistant: &Message,
    results: &[Message],
    turn_index: i64,
    timestamp: i64,
) -> CapturedBatch {
    // An assistant a `Value` cannot hold (a number out of range) yields no
    // calls: its results are not captured and stay verbatim.
    let (assistant_text, calls) = assistant_parts(&assistant.to_value().unwrap_or_default());
    let results = FirstResults::new(results);
    let calls = calls
        .into_iter()
        .map(|(id, name, args)| {
            let result = results.get(&id);
            call_from(id, name, args, result)
        })
        .collect();
    CapturedBatch {
        turn_index,
        timestamp,
        assistant_text,
        calls,
        user_turn_group: None,
    }
}

/// Drops protected calls (by tool name or `args.path`).
pub fn without_protected(mut batch: CapturedBatch, protection: &Protection) -> CapturedBatch {
    batch
        .calls
        .retain(|c| !protection.is_protected(&c.tool_name, &c.args));
    batch
}

/// What a rescan checks calls against: the state (what is summarized
/// already) and the memo of the turns it read before.
#[derive(Clone, Copy)]
pub(crate) struct Known<'a> {
    pub(crate) state: &'a State,
    pub(crate) turns: &'a CaptureMemo,
}

/// [`crate::capture_branch`], with the state and its memo apart.
pub(crate) fn capture_branch(
    messages: &[Message],
    entry_timestamps: &[Option<i64>],
    known: Known<'_>,
    protection: &Protection,
    now: i64,
) -> Vec<CapturedBatch> {
    capture_from_turn(messages, entry_timestamps, 0, known, protection, now, 0)
}

/// [`capture_branch`] without the batches of turns before `first_turn`
/// (turns and user-turn groups are still counted from the branch's start):
/// the frontier trim drops those, and a flush's frontier sits near the end
/// of the branch, so a flush does not read the settled history. The first
/// assistant of `messages` is turn `turns_before`.
fn capture_from_turn(
    messages: &[Message],
    entry_timestamps: &[Option<i64>],
    turns_before: i64,
    known: Known<'_>,
    protection: &Protection,
    now: i64,
    first_turn: i64,
) -> Vec<CapturedBatch> {
    let Known { state, turns: memo } = known;
    let mut batches = Vec::new();
    let mut turn_counter: i64 = turns_before;
    let mut group: u32 = 0;
    let mut i = 0;
    while i < messages.len() {
        let m = &messages[i];
        if m.is(&Role::User) {
            group += 1;
            i += 1;
            continue;
        }
        if !m.is(&Role::Assistant) {
            i += 1;
            continue;
        }
        let turn_index = turn_counter;
        turn_counter += 1;
        if turn_index < first_turn {
            i += 1;
            continue;
        }
        // The assistant's own turn: everything up to the next assistant.
        let end = messages[i + 1..]
            .iter()
            .position(|x| x.is(&Role::Assistant))
            .map_or(messages.len(), |p| i + 1 + p);
        if !m.skeleton().tool_calls.is_empty() {
            let turn_results = FirstResults::new(
                messages[i + 1..end]
                    .iter()
                    .filter(|x| x.is(&Role::ToolResult)),
            );
            if all_calls_settled(m, &turn_results, state) {
                memo.forget(m);
                i += 1;
                continue;
            }
            let turn =
                memo.get_or_read(m, |id| turn_results.get(id), || read_turn(m, &turn_results));
            let ready: Vec<CapturedCall> = turn
                .calls
                .iter()
                .filter_map(|c| c.answered.as_ref())
                .filter(|(result, call)| {
                    !state.is_summarized(&call.tool_call_id, result.timestamp())
                        && !protection.is_protected(&call.tool_name, &call.args)
                })
                .map(|(result, call)| memo::captured(result, call))
                .collect();
            if !ready.is_empty() {
                let timestamp = entry_timestamps
                    .get(i)
                    .copied()
                    .flatten()
                    .or(m.timestamp())
                    .unwrap_or(now);
                batches.push(CapturedBatch {
                    turn_index,
                    timestamp,
                    assistant_text: turn.text.clone(),
                    calls: ready,
                    user_turn_group: Some(group),
                });
            }
        }
        i += 1;
    }
    batches
}

/// `assistant`'s turn as capture reads it before any filter: its prose, and
/// each call with the first of `results` answering it.
fn read_turn(assistant: &Message, results: &FirstResults<'_>) -> TurnRead {
    // An assistant a `Value` cannot hold (a number out of range) yields no
    // calls: its results are not captured and stay verbatim.
    let (text, calls) = assistant_parts(&assistant.to_value().unwrap_or_default());
    let calls = calls
        .into_iter()
        .map(|(id, name, args)| {
            let answered = results.get(&id).map(|r| {
                let text = memo::kept_text(r);
                (
                    r.clone(),
                    read::answered_call(id.clone(), name, args, r, text),
                )
            });
            CallRead { id, answered }
        })
        .collect();
    TurnRead {
        assistant: assistant.clone(),
        text,
        calls,
    }
}

/// True when no call of `assistant` can be captured: each is unanswered in
/// its turn or already summarized. Every flush rescans the whole branch,
/// and nearly all of it is settled, so this skips parsing the assistant's
/// JSON. It answers from the skeleton's ids, which are the parse's ids
/// unless an id carries an escape the skeleton cannot read (a lone
/// surrogate); a message with any `\u` escape is therefore parsed.
fn all_calls_settled(assistant: &Message, turn_results: &FirstResults<'_>, state: &State) -> bool {
    !assistant.json().contains("\\u")
        && assistant.skeleton().tool_calls.iter().all(|c| {
            turn_results
                .get(&c.id)
                .is_none_or(|r| state.is_summarized(&c.id, r.timestamp()))
        })
}

/// Keeps what lies past the frontier: drops summarized calls; with no
/// frontier keeps everything; a batch before the frontier's turn is dropped,
/// one after it kept; in the frontier's own turn only calls after the last
/// attempted one are kept (all, if that call is not in the batch).
pub fn trim_to_pending(
    batch: CapturedBatch,
    state: &State,
    frontier: Option<&Frontier>,
) -> Option<CapturedBatch> {
    let mut batch = batch;
    batch
        .calls
        .retain(|c| !state.is_summarized(&c.tool_call_id, c.result_timestamp));
    if let Some(f) = frontier {
        if batch.turn_index < f.last_attempted_turn_index {
            return None;
        }
        if batch.turn_index == f.last_attempted_turn_index {
            if let Some(p) = batch
                .calls
                .iter()
                .position(|c| c.tool_call_id == f.last_attempted_tool_call_id)
            {
                batch.calls.drain(..=p);
            }
        }
    }
    (!batch.calls.is_empty()).then_some(batch)
}

/// `agent-message` batching merges consecutive batches of one user-turn
/// group (texts joined by a blank line, calls concatenated, the last turn's
/// index and timestamp); `turn` batching keeps them apart. Batches without a
/// group (live captures) always stand alone.
pub fn group_by_mode(batches: Vec<CapturedBatch>, mode: BatchingMode) -> Vec<CapturedBatch> {
    if mode != BatchingMode::AgentMessage {
        return batches;
    }
    merge_runs(batches, usize::MAX, 0)
}

/// Merges consecutive batches of one user-turn group as `agent-message`
/// batching does, but stops a merged batch at `max_calls` calls (a batch
/// that already holds more stays as it is), and leaves a batch of fewer
/// than `min_chars` result characters on its own: a flush keeps such a
/// batch raw (`minBatchChars`), and merged it would be summarized. One
/// summarizer prompt then covers several turns of a run, and its fixed
/// instructions are paid once for them, not once a turn; the cap keeps a
/// prompt within what a summarizer model reads well.
pub fn merge_runs(
    batches: Vec<CapturedBatch>,
    max_calls: usize,
    min_chars: u64,
) -> Vec<CapturedBatch> {
    let groups = run_groups(&batches, max_calls, min_chars);
    let mut batches = batches.into_iter();
    let mut out = Vec::with_capacity(groups.len());
    for group in groups {
        let Some(mut cur) = batches.next() else {
            break;
        };
        for b in batches.by_ref().take(group.len() - 1) {
            let texts: Vec<&str> = [cur.assistant_text.as_str(), b.assistant_text.as_str()]
                .into_iter()
                .filter(|t| !t.is_empty())
                .collect();
            cur.assistant_text = texts.join("\n\n");
            cur.calls.extend(b.calls);
            cur.turn_index = b.turn_index;
            cur.timestamp = b.timestamp;
        }
        out.push(cur);
    }
    out
}

/// Where [`merge_runs`] would merge `batches`: the index range of each
/// batch it returns, in order, so the merged batches can be weighed without
/// being built.
pub fn run_groups(
    batches: &[CapturedBatch],
    max_calls: usize,
    min_chars: u64,
) -> Vec<Range<usize>> {
    let mut groups: Vec<Range<usize>> = Vec::new();
    // The open group's user-turn group, calls and result characters; a
    // batch without a group opens none.
    let mut open: Option<(u32, usize, usize)> = None;
    for (i, b) in batches.iter().enumerate() {
        let raw = b.raw_chars();
        let small = |chars: usize| (chars as u64) < min_chars;
        match (&mut open, groups.last_mut()) {
            (Some((group, calls, chars)), Some(cur))
                if b.user_turn_group == Some(*group)
                    && !small(*chars)
                    && !small(raw)
                    && calls.saturating_add(b.calls.len()) <= max_calls =>
            {
                cur.end = i + 1;
                *calls += b.calls.len();
                *chars += raw;
            }
            _ => {
                open = b.user_turn_group.map(|g| (g, b.calls.len(), raw));
                groups.push(i..i + 1);
            }
        }
    }
    groups
}

/// [`crate::capture_pending`], with the state and its memo apart.
pub(crate) fn capture_pending(
    messages: &[Message],
    entry_timestamps: &[Option<i64>],
    turns_before: i64,
    known: Known<'_>,
    protection: &Protection,
    mode: BatchingMode,
    now: i64,
) -> Vec<CapturedBatch> {
    let frontier = known.state.frontier();
    let first_turn = frontier.map_or(0, |f| f.last_attempted_turn_index);
    let batches = capture_from_turn(
        messages,
        entry_timestamps,
        turns_before,
        known,
        protection,
        now,
        first_turn,
    )
    .into_iter()
    .filter_map(|b| trim_to_pending(b, known.state, frontier))
    .collect();
    group_by_mode(batches, mode)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::branch::{capture_branch, capture_pending, Branch};
    use serde_json::json;

    fn msg(v: Value) -> Message {
        Message::from_value(&v).unwrap()
    }

    fn call(id: &str) -> CapturedCall {
        CapturedCall {
            tool_call_id: id.into(),
            tool_name: "bash".into(),
            args: json!({}).into(),
            result_text: "x".into(),
            is_error: false,
            result_timestamp: Some(1),
        }
    }

    fn batch(turn: i64, group: Option<u32>, ids: &[&str]) -> CapturedBatch {
        CapturedBatch {
            turn_index: turn,
            timestamp: turn * 10,
            assistant_text: format!("t{turn}"),
            calls: ids.iter().map(|i| call(i)).collect(),
            user_turn_group: group,
        }
    }

    /// Parking a message moves its JSON out of memory for every handle:
    /// the message and the texts captured from it read back the same,
    /// and a source that fails reads as a message saying so, never a panic.
    #[test]
    fn a_parked_message_and_the_texts_read_from_it_read_back_the_same() {
        use crate::parked::tests::Fixed;
        let a = msg(json!({"role":"assistant","timestamp":1,"content":[
            {"type":"toolCall","id":"c1","name":"bash","arguments":{}},
            {"type":"toolCall","id":"c2","name":"bash","arguments":{}}]}));
        let result = |id: &str, text: &str| {
            msg(
                json!({"role":"toolResult","toolCallId":id,"toolName":"bash",
                "content":[{"type":"text","text":text}],"isError":false,"timestamp":2}),
            )
        };
        let (r1, r2) = (result("c1", "one\ttwo \"q\"\n"), result("c2", "plain"));
        let state = Branch::new();
        let protection = Protection::new(&crate::config::Config::default());
        let branch = [a, r1.clone(), r2.clone()];
        let batches = capture_branch(&branch, &[None; 3], &state, &protection, 9);
        let texts: Vec<SharedText> = batches[0]
            .calls
            .iter()
            .map(|c| c.result_text.clone())
            .collect();
        let before: Vec<String> = texts.iter().map(ToString::to_string).collect();
        let (j1, j2) = (r1.json().to_string(), r2.json().to_string());

        r1.park(Arc::new(Fixed(Ok(j1.clone())))).unwrap();
        assert!(r1.is_parked() && branch[1].is_parked() && texts[0].is_parked());
        assert_eq!(branch[1].json(), j1);
        assert_eq!(texts[0].to_string(), before[0]);
        assert_eq!(texts[0].js_len(), before[0].encode_utf16().count());
        assert_eq!(branch[1].result_text(), before[0]);
        // A source that does not give the bytes back parks nothing.
        assert!(r2.park(Arc::new(Fixed(Ok(j1.clone())))).is_err());
        assert!(!r2.is_parked());

        // A source that fails once parked: a clear text in place, no panic.
        #[derive(Debug)]
        struct Once(std::sync::Mutex<Option<String>>);
        impl crate::ParkedText for Once {
            fn read(&self) -> Result<String, String> {
                self.0
                    .lock()
                    .unwrap()
                    .take()
                    .ok_or_else(|| "the log is gone".to_owned())
            }
        }
        r2.park(Arc::new(Once(std::sync::Mutex::new(Some(j2.clone())))))
            .unwrap();
        let lost: Value = serde_json::from_str(&r2.json()).unwrap();
        assert_eq!(lost["role"], "toolResult");
        assert_eq!(lost["toolCallId"], "c2");
        let said = lost["content"][0]["text"].as_str().unwrap();
        assert!(
            said.contains("cannot be read back: the log is gone"),
            "{said}"
        );
        assert!(texts[1].to_string().contains("the log is gone"));
        // Its skeleton and size are still the message's own.
        assert_eq!(r2.size(), j2.len());
        assert_eq!(r2.skeleton().tool_call_id.as_deref(), Some("c2"));
    }

    #[test]
    fn an_output_that_is_one_literal_is_held_by_its_message_alone() {
        let a = msg(json!({"role":"assistant","timestamp":1,"content":[
            {"type":"toolCall","id":"c1","name":"bash","arguments":{}},
            {"type":"toolCall","id":"c2","name":"bash","arguments":{}},
            {"type":"toolCall","id":"c3","name":"bash","arguments":{}}]}));
        let result = |id: &str, content: Value| {
            msg(
                json!({"role":"toolResult","toolCallId":id,"toolName":"bash",
                "content":content,"isError":false,"timestamp":2}),
            )
        };
        let one_block = result(
            "c1",
            json!([{"type":"image"},{"type":"text","text":"a\n\"b\""}]),
        );
        let string = result("c2", json!("plain"));
        let two_blocks = result(
            "c3",
            json!([{"type":"text","text":"x"},{"type":"text","text":"y"}]),
        );
        let state = Branch::new();
        let protection = Protection::new(&crate::config::Config::default());
        let branch = [a, one_block, string, two_blocks];
        let batches = capture_branch(&branch, &[None; 4], &state, &protection, 9);
        let calls = &batches[0].calls;
        let held: Vec<(String, bool)> = calls
            .iter()
            .map(|c| (c.result_text.to_string(), c.result_text.is_shared()))
            .collect();
        assert_eq!(
            held,
            [
                ("a\n\"b\"".to_owned(), true),
                ("plain".to_owned(), true),
                ("x\ny".to_owned(), false)
            ]
        );
        // The window is on the message's own buffer: no copy of the text.
        let buf = branch[1].own_json_buffer().unwrap();
        let before = Arc::strong_count(buf);
        let again = calls[0].result_text.clone();
        assert_eq!(Arc::strong_count(buf), before + 1);
        drop(again);

        // A message that is a window on a larger buffer (a loaded session
        // file) is copied from: a kept text must not keep the file alive.
        let file = Arc::new(format!("{}\n{}\n", branch[0].json(), branch[2].json()));
        let at = branch[0].json().len() + 1;
        let string = Message::from_shared(&file, at..file.len() - 1).unwrap();
        let branch = [branch[0].clone(), string];
        let batches = capture_branch(&branch, &[None; 2], &state, &protection, 9);
        let text = &batches[0].calls[0].result_text;
        assert_eq!(
            (text.to_string(), text.is_shared()),
            ("plain".to_owned(), false)
        );
    }

    #[test]
    fn a_rescan_reads_a_turn_again_only_when_its_messages_change() {
        let a = msg(json!({"role":"assistant","timestamp":1,"content":[
            {"type":"toolCall","id":"c1","name":"bash","arguments":{"command":"ls"}},
            {"type":"toolCall","id":"c2","name":"bash","arguments":{"command":"pwd"}}]}));
        let result = |id: &str, text: &str| {
            msg(
                json!({"role":"toolResult","toolCallId":id,"toolName":"bash",
                "content":[{"type":"text","text":text}],"isError":false,"timestamp":2}),
            )
        };
        let (r1, r2) = (result("c1", "one"), result("c2", "two"));
        let state = Branch::new();
        let protection = Protection::new(&crate::config::Config::default());
        let texts = |branch: &[Message]| -> Vec<String> {
            let stamps = vec![None; branch.len()];
            capture_branch(branch, &stamps, &state, &protection, 9)
                .iter()
                .flat_map(|b| b.calls.iter().map(|c| c.result_text.to_string()))
                .collect()
        };
        // c2 not answered yet, then answered: the turn is read again.
        assert_eq!(texts(&[a.clone(), r1.clone()]), ["one"]);
        assert_eq!(texts(&[a.clone(), r1.clone(), r2.clone()]), ["one", "two"]);
        assert_eq!(state.capture_memo().len(), 1);
        // The very same messages: the same batch, from the memo.
        assert_eq!(texts(&[a.clone(), r1.clone(), r2]), ["one", "two"]);
        // An equal-looking turn whose result is another message.
        assert_eq!(
            texts(&[a.clone(), r1.clone(), result("c2", "TWO")]),
            ["one", "TWO"]
        );
        // A copy of the assistant is another turn to the memo.
        let copy = Message::from_json(&a.json()).unwrap();
        assert_eq!(texts(&[copy, r1.clone(), result("c2", "2")]), ["one", "2"]);
        assert_eq!(state.capture_memo().len(), 2);
        // A large output's text is not kept, and read whole at each use.
        let large = "x".repeat(memo::KEPT_TEXT_BYTES + 1);
        let branch = [a.clone(), r1, result("c2", &large)];
        for _ in 0..2 {
            assert_eq!(texts(&branch), ["one", large.as_str()]);
        }
    }

    #[test]
    fn the_memo_forgets_a_turn_once_it_is_settled() {
        let a = msg(json!({"role":"assistant","timestamp":1,"content":[
            {"type":"toolCall","id":"c1","name":"bash","arguments":{"command":"ls"}}]}));
        let r1 = msg(
            json!({"role":"toolResult","toolCallId":"c1","toolName":"bash",
            "content":[{"type":"text","text":"one"}],"isError":false,"timestamp":2}),
        );
        let b = msg(json!({"role":"assistant","timestamp":3,"content":[
            {"type":"toolCall","id":"c2","name":"bash","arguments":{"command":"pwd"}}]}));
        let r2 = msg(
            json!({"role":"toolResult","toolCallId":"c2","toolName":"bash",
            "content":[{"type":"text","text":"two"}],"isError":false,"timestamp":4}),
        );
        let branch = [a, r1, b, r2];
        let stamps = [None; 4];
        let mut state = Branch::new();
        let protection = Protection::new(&crate::config::Config::default());
        let batches = capture_branch(&branch, &stamps, &state, &protection, 9);
        assert_eq!(state.capture_memo().len(), 2);
        // The first turn's call is summarized: the next rescan forgets that
        // turn and keeps the pending one.
        let c = &batches[0].calls[0];
        state.add_record(c.record(batches[0].turn_index, batches[0].timestamp), true);
        let pending = capture_branch(&branch, &stamps, &state, &protection, 9);
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].calls[0].tool_call_id, "c2");
        assert_eq!(
            state.capture_memo().len(),
            1,
            "the settled turn is forgotten"
        );
    }

    #[test]
    fn a_turn_of_many_calls_pairs_each_with_its_first_result() {
        // More results than `FirstResults` scans: the ids are hashed, and the
        // first result of an id must still win, live and on a rescan.
        let n = SCAN_LIMIT * 2;
        let blocks: Vec<Value> = (0..n)
            .map(|i| json!({"type":"toolCall","id":format!("c{i}"),"name":"bash","arguments":{}}))
            .collect();
        let a = msg(json!({"role":"assistant","content":blocks,"timestamp":1}));
        let result = |i: usize, text: &str| {
            msg(
                json!({"role":"toolResult","toolCallId":format!("c{i}"),"toolName":"bash",
                "content":[{"type":"text","text":text}],"isError":false,"timestamp":2}),
            )
        };
        // Answered in reverse, c3 twice, c7 never.
        let mut results: Vec<Message> = (0..n)
            .rev()
            .filter(|&i| i != 7)
            .map(|i| result(i, &format!("out {i}")))
            .collect();
        results.push(result(3, "LATER"));
        let texts = |b: &CapturedBatch| -> Vec<String> {
            b.calls.iter().map(|c| c.result_text.to_string()).collect()
        };
        let expected: Vec<String> = (0..n)
            .map(|i| match i {
                7 => NO_RESULT.to_owned(),
                _ => format!("out {i}"),
            })
            .collect();
        assert_eq!(texts(&capture_turn(&a, &results, 0, 1)), expected);

        let mut branch = vec![a];
        branch.extend(results);
        let stamps = vec![None; branch.len()];
        let protection = Protection::new(&crate::config::Config::default());
        let rescan = capture_branch(&branch, &stamps, &Branch::new(), &protection, 9);
        let [batch] = rescan.as_slice() else {
            panic!("one batch: {rescan:?}");
        };
        let answered: Vec<String> = expected.into_iter().filter(|t| t != NO_RESULT).collect();
        assert_eq!(texts(batch), answered, "a rescan skips the unanswered call");
    }

    #[test]
    fn live_turn_pairs_first_result_and_marks_missing() {
        let a = msg(json!({"role":"assistant","content":[
            {"type":"text","text":"  reading  "},
            {"type":"toolCall","id":"c1","name":"read","arguments":{"path":"a"}},
            {"type":"toolCall","id":"c2","name":"bash","input":{"command":"ls"}}],"timestamp":5}));
        let r1 = msg(
            json!({"role":"toolResult","toolCallId":"c1","toolName":"read","content":[{"type":"text","text":"A"},{"type":"image","data":""},{"type":"text","text":"B"}],"isError":true,"timestamp":6}),
        );
        let r1b = msg(
            json!({"role":"toolResult","toolCallId":"c1","toolName":"read","content":[{"type":"text","text":"LATER"}],"isError":false,"timestamp":7}),
        );
        let b = capture_turn(&a, &[r1, r1b], 3, 99);
        assert_eq!(b.assistant_text, "reading");
        assert_eq!(b.calls[0].result_text, "A\nB");
        assert!(b.calls[0].is_error);
        assert_eq!(b.calls[0].result_timestamp, Some(6));
        assert_eq!(b.calls[1].result_text, NO_RESULT);
        assert_eq!(*b.calls[1].args, json!({"command":"ls"}));
    }

    #[test]
    fn frontier_trim() {
        let state = Branch::new();
        let f: Frontier = serde_json::from_value(json!({
            "lastAttemptedToolCallId":"b","lastAttemptedTurnIndex":2}))
        .unwrap();
        assert!(trim_to_pending(batch(1, None, &["a"]), &state, Some(&f)).is_none());
        assert_eq!(
            trim_to_pending(batch(3, None, &["a"]), &state, Some(&f))
                .unwrap()
                .calls
                .len(),
            1
        );
        let same = trim_to_pending(batch(2, None, &["a", "b", "c"]), &state, Some(&f)).unwrap();
        assert_eq!(
            same.calls
                .iter()
                .map(|c| c.tool_call_id.as_str())
                .collect::<Vec<_>>(),
            ["c"]
        );
        let missing = trim_to_pending(batch(2, None, &["x", "y"]), &state, Some(&f)).unwrap();
        assert_eq!(missing.calls.len(), 2);
        assert!(trim_to_pending(batch(2, None, &["a", "b"]), &state, Some(&f)).is_none());
        assert_eq!(
            trim_to_pending(batch(0, None, &["a"]), &state, None)
                .unwrap()
                .calls
                .len(),
            1
        );
    }

    #[test]
    fn agent_message_grouping() {
        let out = group_by_mode(
            vec![
                batch(0, Some(1), &["a"]),
                batch(1, Some(1), &["b"]),
                batch(2, None, &["c"]),
                batch(3, Some(1), &["d"]),
                batch(4, Some(2), &["e"]),
            ],
            BatchingMode::AgentMessage,
        );
        assert_eq!(out.len(), 4);
        assert_eq!(out[0].calls.len(), 2);
        assert_eq!(out[0].assistant_text, "t0\n\nt1");
        assert_eq!(out[0].turn_index, 1);
        assert_eq!(out[0].timestamp, 10);
        assert_eq!(
            group_by_mode(
                vec![batch(0, Some(1), &["a"]), batch(1, Some(1), &["b"])],
                BatchingMode::Turn
            )
            .len(),
            2
        );
    }

    #[test]
    fn merged_runs_stop_at_the_call_cap_and_at_each_run() {
        let out = merge_runs(
            vec![
                batch(0, Some(1), &["a", "b"]),
                batch(1, Some(1), &["c"]),
                batch(2, Some(1), &["d"]),
                batch(3, Some(2), &["e"]),
                batch(4, None, &["f"]),
                batch(5, None, &["g"]),
                batch(6, Some(3), &["h", "i", "j", "k"]),
            ],
            3,
            0,
        );
        let calls: Vec<Vec<&str>> = out
            .iter()
            .map(|b| b.calls.iter().map(|c| c.tool_call_id.as_str()).collect())
            .collect();
        assert_eq!(
            calls,
            [
                vec!["a", "b", "c"],
                vec!["d"],
                vec!["e"],
                vec!["f"],
                vec!["g"],
                vec!["h", "i", "j", "k"],
            ]
        );
        assert_eq!(out[0].turn_index, 1);
        assert_eq!(out[0].assistant_text, "t0\n\nt1");
    }

    #[test]
    fn a_batch_a_flush_would_keep_raw_is_never_merged() {
        let sized = |turn: i64, id: &str, chars: usize| {
            let mut b = batch(turn, Some(1), &[id]);
            b.calls[0].result_text = "x".repeat(chars).into();
            b
        };
        let out = merge_runs(
            vec![
                sized(0, "a", 2_000),
                sized(1, "b", 2_000),
                sized(2, "c", 10),
                sized(3, "d", 2_000),
                sized(4, "e", 2_000),
            ],
            16,
            1_000,
        );
        let calls: Vec<usize> = out.iter().map(|b| b.calls.len()).collect();
        assert_eq!(calls, [2, 1, 2]);
    }

    /// Skipping the turns before the frontier's changes nothing: for every
    /// frontier on a branch of several groups, the pending capture is the
    /// whole branch's capture trimmed to the frontier and grouped.
    #[test]
    fn pending_capture_equals_the_trimmed_whole_branch() {
        let mut messages = Vec::new();
        let mut ts = 0i64;
        let mut next = || {
            ts += 1;
            ts
        };
        for group in 0..3 {
            messages.push(msg(
                json!({"role":"user","content":"go","timestamp":next()}),
            ));
            for turn in 0..3 {
                let ids: Vec<String> = (0..2).map(|k| format!("g{group}t{turn}c{k}")).collect();
                messages.push(msg(
                    json!({"role":"assistant","timestamp":next(),"content":[
                    {"type":"text","text":format!("turn {group}.{turn}")},
                    {"type":"toolCall","id":ids[0],"name":"bash","arguments":{"command":"ls"}},
                    {"type":"toolCall","id":ids[1],"name":"read","arguments":{"path":"a.rs"}}]}),
                ));
                for id in &ids {
                    messages.push(msg(json!({"role":"toolResult","toolCallId":id,"toolName":"bash",
                        "content":[{"type":"text","text":"out"}],"isError":false,"timestamp":next()})));
                }
            }
            messages.push(msg(json!({"role":"assistant","timestamp":next(),
                "content":[{"type":"text","text":"done"}]})));
        }
        let stamps = vec![None; messages.len()];
        let protection = Protection::new(&crate::config::Config::default());
        let mut frontiers: Vec<Option<Frontier>> = vec![None];
        for turn in -1..14 {
            for id in ["g0t0c0", "g1t1c1", "g2t0c0", "nowhere"] {
                frontiers.push(Some(
                    serde_json::from_value(json!({
                        "lastAttemptedToolCallId": id, "lastAttemptedTurnIndex": turn}))
                    .unwrap(),
                ));
            }
        }
        for frontier in frontiers {
            let mut state = Branch::new();
            if let Some(f) = &frontier {
                state.set_frontier(f.clone());
            }
            for mode in [BatchingMode::Turn, BatchingMode::AgentMessage] {
                let whole: Vec<CapturedBatch> =
                    capture_branch(&messages, &stamps, &state, &protection, 7)
                        .into_iter()
                        .filter_map(|b| trim_to_pending(b, &state, frontier.as_ref()))
                        .collect();
                assert_eq!(
                    capture_pending(&messages, &stamps, 0, &state, &protection, mode, 7),
                    group_by_mode(whole, mode),
                    "{frontier:?} {mode:?}"
                );
            }
        }
    }
}

//! Replay: fold a branch's condense entries into core's
//! [`State`](condense_core::State), returned as a [`Branch`].
//!
//! This is what pi-condense's `session_start` does, in the same order:
//! 1. `context-prune-index`: each record is indexed; records that are not
//!    backfilled seed the dedup hash map (first seen wins); a backfilled
//!    entry's `refs` register short refs;
//! 2. `context-prune-summary` messages: their refs register short refs (the
//!    next `t<N>` continues after the highest seen) and their text becomes a
//!    summary body keyed by the refs' occurrences;
//! 3. `context-prune-chain`: chains by start timestamp, last wins; block ids
//!    continue after the highest;
//! 4. `context-prune-dedup-alias`: applied after the walk, so an alias reuses
//!    its original's short ref whatever the append order;
//! 5. `context-prune-frontier` and `context-prune-stats`: last wins (a
//!    frontier without `lastAttemptedToolCallId` is ignored);
//! 6. `context-prune-switch` (condense only): positional, so what was
//!    appended before the last switch is shown under the cache-aware policy
//!    and what came after is pending; its `messageCount` bounds the error
//!    purge.
//!
//! Malformed payloads are skipped and reported, never fatal.

use condense_core::OccurrenceKey;

use crate::entries::{
    CUSTOM_TYPE_CHAIN, CUSTOM_TYPE_DEDUP_ALIAS, CUSTOM_TYPE_FRONTIER, CUSTOM_TYPE_INDEX,
    CUSTOM_TYPE_STATS, CUSTOM_TYPE_SUMMARY, CUSTOM_TYPE_SWITCH,
};
use condense_core::{Branch, StateBuilder};
use condense_core::{ChainEntry, Frontier, SummarizerStats, SummaryRef, ToolCallRecord};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

/// One branch entry, as replay needs to see it.
#[derive(Debug, Clone, Copy)]
pub enum ReplayEntry<'a> {
    /// A `custom` entry.
    Custom {
        /// Its `customType`.
        custom_type: &'a str,
        /// Its `data` (`Value::Null` when absent).
        data: &'a Value,
    },
    /// A `custom_message` entry.
    CustomMessage {
        /// Its `customType`.
        custom_type: &'a str,
        /// Its `content` (a string or text blocks).
        content: &'a Value,
        /// Its `details` (`Value::Null` when absent).
        details: &'a Value,
    },
}

/// A payload replay could not use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayProblem {
    /// Position of the entry among those replayed ([`replay`]), or its line
    /// in the session file ([`replay_branch`]).
    pub position: usize,
    /// The entry's custom type.
    pub custom_type: String,
    /// What was wrong.
    pub message: String,
}

// Lenient views of the payloads in `entries`: replay keeps every readable
// record of an entry and reports the rest, where the strict wire types would
// reject the whole entry for one bad record.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct IndexData {
    #[serde(default)]
    tool_calls: Vec<Value>,
    #[serde(default)]
    backfilled: Option<bool>,
    #[serde(default)]
    refs: Option<Vec<Value>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DedupData {
    #[serde(default)]
    new_tool_call_id: Option<String>,
    #[serde(default)]
    original_tool_call_id: Option<String>,
    #[serde(default)]
    new_result_timestamp: Option<i64>,
    #[serde(default)]
    original_result_timestamp: Option<i64>,
}

/// Summary refs from a summary message's details: `toolCallRefs`, or the
/// legacy `toolCallIds` (each id its own short id).
pub fn summary_refs_of(details: &Value) -> Vec<SummaryRef> {
    if let Some(refs) = details.get("toolCallRefs").and_then(Value::as_array) {
        return refs
            .iter()
            .filter_map(|r| serde_json::from_value::<SummaryRef>(r.clone()).ok())
            .collect();
    }
    details
        .get("toolCallIds")
        .and_then(Value::as_array)
        .map(|ids| {
            ids.iter()
                .filter_map(Value::as_str)
                .map(|id| SummaryRef {
                    short_id: id.to_owned(),
                    tool_call_id: id.to_owned(),
                    result_timestamp: None,
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A summary message's text: the string content, or its text blocks joined by `\n`.
pub fn summary_text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The fold both entry points share: the state being built (core's
/// [`StateBuilder`] applies each piece in replay's order) and what was
/// skipped.
struct Fold {
    state: StateBuilder,
    problems: Vec<ReplayProblem>,
}

impl Fold {
    fn new() -> Self {
        Fold {
            state: StateBuilder::new(),
            problems: Vec::new(),
        }
    }

    fn problem(&mut self, position: usize, custom_type: &str, message: String) {
        self.problems.push(ReplayProblem {
            position,
            custom_type: custom_type.to_owned(),
            message,
        });
    }

    /// One record of an index entry (seeding dedup unless backfilled).
    fn record(
        &mut self,
        position: usize,
        custom_type: &str,
        record: Result<ToolCallRecord, serde_json::Error>,
        backfilled: bool,
    ) {
        match record {
            Ok(r) => {
                self.state.record(r, backfilled);
            }
            Err(e) => self.problem(position, custom_type, format!("bad tool call record: {e}")),
        }
    }

    /// A `custom` entry's payload.
    fn custom(&mut self, position: usize, custom_type: &str, data: &Value) {
        match custom_type {
            CUSTOM_TYPE_INDEX => match IndexData::deserialize(data) {
                Ok(d) => {
                    let backfilled = d.backfilled == Some(true);
                    for tc in d.tool_calls {
                        let record = serde_json::from_value::<ToolCallRecord>(tc);
                        self.record(position, custom_type, record, backfilled);
                    }
                    if backfilled {
                        let refs: Vec<SummaryRef> = d
                            .refs
                            .unwrap_or_default()
                            .into_iter()
                            .filter_map(|r| serde_json::from_value(r).ok())
                            .collect();
                        self.state.backfill_refs(&refs);
                    }
                }
                Err(e) => self.problem(position, custom_type, format!("bad index payload: {e}")),
            },
            CUSTOM_TYPE_CHAIN => match ChainEntry::deserialize(data) {
                Ok(c) if !c.block_id.is_empty() => {
                    self.state.chain(c);
                }
                Ok(_) => self.problem(position, custom_type, "chain entry without blockId".into()),
                Err(e) => self.problem(position, custom_type, format!("bad chain payload: {e}")),
            },
            CUSTOM_TYPE_DEDUP_ALIAS => match DedupData::deserialize(data) {
                Ok(DedupData {
                    new_tool_call_id: Some(new),
                    original_tool_call_id: Some(orig),
                    new_result_timestamp,
                    original_result_timestamp,
                }) if !new.is_empty() && !orig.is_empty() => {
                    self.state.dedup_alias(
                        OccurrenceKey::new(new, new_result_timestamp),
                        OccurrenceKey::new(orig, original_result_timestamp),
                    );
                }
                Ok(_) => self.problem(position, custom_type, "dedup alias without ids".into()),
                Err(e) => self.problem(
                    position,
                    custom_type,
                    format!("bad dedup alias payload: {e}"),
                ),
            },
            // A frontier without `lastAttemptedToolCallId` is ignored.
            CUSTOM_TYPE_FRONTIER
                if data
                    .get("lastAttemptedToolCallId")
                    .and_then(Value::as_str)
                    .is_some() =>
            {
                match Frontier::deserialize(data) {
                    Ok(f) => {
                        self.state.frontier(f);
                    }
                    Err(e) => {
                        self.problem(position, custom_type, format!("bad frontier payload: {e}"))
                    }
                }
            }
            CUSTOM_TYPE_SWITCH => match data.get("messageCount").and_then(Value::as_u64) {
                Some(n) => {
                    self.state.switch(usize::try_from(n).unwrap_or(usize::MAX));
                }
                None => self.problem(
                    position,
                    custom_type,
                    match data.get("messageCount") {
                        None | Some(Value::Null) => "switch entry without a messageCount".into(),
                        Some(v) => format!(
                            "switch entry whose messageCount {v} is not a count of messages"
                        ),
                    },
                ),
            },
            CUSTOM_TYPE_STATS => match SummarizerStats::deserialize(data) {
                Ok(s) => {
                    self.state.stats(s);
                }
                Err(e) => self.problem(position, custom_type, format!("bad stats payload: {e}")),
            },
            _ => {}
        }
    }

    /// A `context-prune-summary` custom message.
    fn summary(&mut self, content: &Value, details: &Value) {
        let refs = summary_refs_of(details);
        self.state.summary(&refs, summary_text_of(content));
    }

    fn finish(self) -> (Branch, Vec<ReplayProblem>) {
        (Branch::from(self.state.build()), self.problems)
    }
}

/// Folds entries into a fresh state. Returns it as a branch ready to
/// render (its memos empty), and what was skipped.
pub fn replay<'a, I>(entries: I) -> (Branch, Vec<ReplayProblem>)
where
    I: IntoIterator<Item = ReplayEntry<'a>>,
{
    let mut fold = Fold::new();
    for (pos, entry) in entries.into_iter().enumerate() {
        match entry {
            ReplayEntry::Custom { custom_type, data } => fold.custom(pos, custom_type, data),
            ReplayEntry::CustomMessage {
                custom_type,
                content,
                details,
            } => {
                if custom_type == CUSTOM_TYPE_SUMMARY {
                    fold.summary(content, details);
                }
            }
        }
    }
    fold.finish()
}

/// An index entry's payload with its records left as raw JSON, so each is
/// read straight into a [`ToolCallRecord`] (the bulk of a long session's
/// bytes) instead of through a `serde_json::Value`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawIndexData<'a> {
    #[serde(borrow, default)]
    tool_calls: Vec<&'a RawValue>,
    #[serde(default)]
    backfilled: Option<bool>,
    #[serde(borrow, default)]
    refs: Option<Vec<&'a RawValue>>,
}

/// Reads a value from raw JSON; on failure, through a `Value` (which, unlike
/// a struct, tolerates duplicate keys: the last one wins, as in `JSON.parse`).
fn from_raw<T: serde::de::DeserializeOwned>(raw: &str) -> Result<T, serde_json::Error> {
    serde_json::from_str(raw).or_else(|_| from_value_of(raw))
}

/// Reads a value through a `Value`, for [`from_raw`]'s fallback.
fn from_value_of<T: serde::de::DeserializeOwned>(raw: &str) -> Result<T, serde_json::Error> {
    serde_json::from_str::<Value>(raw).and_then(serde_json::from_value)
}

/// An index record read from `entry`'s line, its result text left in the
/// session's buffer (most are never read again; see `SharedText`), with
/// [`from_raw`]'s fallback.
fn record_of(
    entry: &crate::session::Entry,
    raw: &str,
) -> Result<ToolCallRecord, serde_json::Error> {
    match entry.shared_span(raw) {
        Some((buf, range)) => {
            ToolCallRecord::from_shared(buf, range).or_else(|_| from_value_of(raw))
        }
        None => from_raw(raw),
    }
}

/// Replays the condense entries of a session branch (root first).
///
/// Entries are read one at a time from their raw lines (no payload is kept
/// once folded); index records go straight from their JSON text into
/// records whose result texts stay in the session's buffer. Problems carry
/// the entry's line in the session file.
pub fn replay_branch(branch: &[&crate::session::Entry]) -> (Branch, Vec<ReplayProblem>) {
    use crate::session::EntryType;
    const READ: [&str; 7] = [
        CUSTOM_TYPE_INDEX,
        CUSTOM_TYPE_SUMMARY,
        CUSTOM_TYPE_FRONTIER,
        CUSTOM_TYPE_DEDUP_ALIAS,
        CUSTOM_TYPE_CHAIN,
        CUSTOM_TYPE_STATS,
        CUSTOM_TYPE_SWITCH,
    ];
    let mut fold = Fold::new();
    let mut unreadable = Vec::new();
    for e in branch {
        let Some(ct) = e.custom_type.as_deref().filter(|ct| READ.contains(ct)) else {
            continue;
        };
        let line = e.line;
        // The hot path: an index entry, read record by record.
        if e.kind == EntryType::Custom && ct == CUSTOM_TYPE_INDEX {
            if let Some(Ok(d)) = e.payload_raw().map(serde_json::from_str::<RawIndexData>) {
                let backfilled = d.backfilled == Some(true);
                for tc in d.tool_calls {
                    fold.record(line, ct, record_of(e, tc.get()), backfilled);
                }
                if backfilled {
                    let refs: Vec<SummaryRef> = d
                        .refs
                        .unwrap_or_default()
                        .into_iter()
                        .filter_map(|r| from_raw(r.get()).ok())
                        .collect();
                    fold.state.backfill_refs(&refs);
                }
                continue;
            }
        }
        let payload = match e.payload::<Value>() {
            None => Value::Null,
            Some(Ok(v)) => v,
            Some(Err(err)) => {
                unreadable.push(ReplayProblem {
                    position: line,
                    custom_type: ct.to_owned(),
                    message: format!("unreadable payload: {err}"),
                });
                continue;
            }
        };
        match e.kind {
            EntryType::Custom => fold.custom(line, ct, &payload),
            EntryType::CustomMessage if ct == CUSTOM_TYPE_SUMMARY => {
                let content = e.custom_message_fields()[1]
                    .and_then(|raw| serde_json::from_str(raw).ok())
                    .unwrap_or(Value::Null);
                fold.summary(&content, &payload);
            }
            _ => {}
        }
    }
    let (state, mut problems) = fold.finish();
    problems.extend(unreadable);
    (state, problems)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::Session;

    const HEADER: &str = r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#;

    fn index_line(id: &str, parent: &str, tool_calls: &str) -> String {
        format!(
            r#"{{"type":"custom","customType":"context-prune-index","data":{{"toolCalls":[{tool_calls}]}},"id":"{id}","parentId":"{parent}","timestamp":"2026-01-01T00:00:01.000Z"}}"#
        )
    }

    #[test]
    fn replayed_records_keep_their_text_in_the_session_buffer() {
        let text = format!(
            "{HEADER}\n{}\n{}\n",
            index_line(
                "a1",
                "null",
                r#"{"toolCallId":"c1","toolName":"bash","resultText":"line 1\nline \"2\"","resultTimestamp":5},{"toolCallId":"c2","toolName":"read","resultText":"plain","resultTimestamp":6}"#
            )
            .replace(r#""parentId":"null""#, r#""parentId":null"#),
            // A record whose text cannot be shared (duplicate keys: read
            // through a `Value`, the last one winning) and one that cannot
            // be read at all.
            index_line(
                "a2",
                "a1",
                r#"{"toolCallId":"c3","toolName":"bash","resultText":"x","resultText":"y","resultTimestamp":7},{"toolCallId":"c4","toolName":"bash","resultText":null}"#
            ),
        );
        let session = Session::parse(&text);
        assert!(session.problems.is_empty(), "{:?}", session.problems);
        let (state, problems) = replay_branch(&session.branch(None));
        let texts: Vec<_> = state
            .records()
            .iter()
            .map(|r| {
                (
                    r.tool_call_id.as_str(),
                    r.result_text.to_string(),
                    r.result_text.is_shared(),
                )
            })
            .collect();
        assert_eq!(
            texts,
            [
                ("c1", "line 1\nline \"2\"".to_owned(), true),
                ("c2", "plain".to_owned(), true),
                ("c3", "y".to_owned(), false),
            ]
        );
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].position, 3);
        assert!(
            problems[0]
                .message
                .starts_with("bad tool call record: invalid type: null"),
            "{}",
            problems[0].message
        );
        // The Value-based fold reads the same records.
        let payloads: Vec<Value> = session
            .entries
            .iter()
            .map(|e| e.payload::<Value>().unwrap().unwrap())
            .collect();
        let (owned, _) = replay(payloads.iter().map(|data| ReplayEntry::Custom {
            custom_type: CUSTOM_TYPE_INDEX,
            data,
        }));
        assert_eq!(owned.records(), state.records());
    }
}

//! The line reader: turns each line into an [`Entry`] (a fast path for
//! plain `message` lines, a general one for the rest), reads the header and
//! records every problem instead of failing.

use std::ops::Range;
use std::sync::Arc;

use condense_core::{Message, MessageError};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::entry::*;
use super::problem::*;
use super::CURRENT_SESSION_VERSION;

/// The fields the reader parses from every entry line. Everything is taken as
/// raw JSON so a field of an unexpected type never makes the line unreadable.
#[derive(Deserialize)]
pub(super) struct EntryFields<'a> {
    #[serde(borrow, default, rename = "type")]
    kind: Option<&'a RawValue>,
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "parentId")]
    parent_id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    timestamp: Option<&'a RawValue>,
    #[serde(borrow, default)]
    message: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "customType", deserialize_with = "keep_null")]
    pub(super) custom_type: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "keep_null")]
    pub(super) data: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "keep_null")]
    pub(super) details: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "keep_null")]
    pub(super) content: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "keep_null")]
    pub(super) display: Option<&'a RawValue>,
}

/// A present field as raw JSON, `null` included (`None` only when absent).
pub(super) fn keep_null<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// A raw JSON value as a string, if it is one.
pub(super) fn raw_string(raw: Option<&RawValue>) -> Option<String> {
    let text = raw?.get();
    if !text.starts_with('"') {
        return None;
    }
    if !text.contains('\\') {
        return Some(text[1..text.len() - 1].to_owned());
    }
    serde_json::from_str(text).ok()
}

/// A message whose JSON `body` lies in `buf` (a slice of a line read from
/// it), sharing the buffer instead of copying the body; copied otherwise.
pub(super) fn shared_message(buf: &Arc<String>, body: &str) -> Result<Message, MessageError> {
    let (base, at) = (buf.as_ptr() as usize, body.as_ptr() as usize);
    if at >= base && at + body.len() <= base + buf.len() {
        Message::from_shared(buf, at - base..at - base + body.len())
    } else {
        Message::from_json(body)
    }
}

/// The fast path for the commonest line, a `message` entry exactly as pi
/// writes it: `{"type":"message","id":"…","parentId":null|"…",
/// "timestamp":"…","message":{…}}`. The message is the last field, so its
/// text is the rest of the line and only [`Message::from_json`] has to scan
/// it (and validate it: a body that is not exactly one JSON object fails
/// there). Anything unexpected returns `None` and the general path reads the
/// line.
pub(super) fn fast_message_entry(
    line_no: usize,
    line: &str,
    buf: &Arc<String>,
    range: &Range<usize>,
) -> Option<Entry> {
    /// A JSON string without escapes at the start of `s`: (contents, rest).
    fn plain_string(s: &str) -> Option<(&str, &str)> {
        let s = s.strip_prefix('"')?;
        let end = s.find(['"', '\\'])?;
        (s.as_bytes()[end] == b'"').then(|| (&s[..end], &s[end + 1..]))
    }
    let rest = line.strip_prefix(r#"{"type":"message","id":"#)?;
    let (id, rest) = plain_string(rest)?;
    let rest = rest.strip_prefix(r#","parentId":"#)?;
    let (parent_id, rest) = match rest.strip_prefix("null") {
        Some(rest) => (None, rest),
        None => {
            let (p, rest) = plain_string(rest)?;
            (Some(p.to_owned()), rest)
        }
    };
    let rest = rest.strip_prefix(r#","timestamp":"#)?;
    let (timestamp, rest) = plain_string(rest)?;
    let body = rest.strip_prefix(r#","message":"#)?.strip_suffix('}')?;
    if !body.starts_with('{') {
        return None;
    }
    // Share the file's buffer when the body lies in it (it always does for a
    // line read from the file); copy otherwise.
    let message = shared_message(buf, body).ok()?;
    Some(Entry {
        line: line_no,
        kind: EntryType::Message,
        id: id.to_owned(),
        parent_id,
        timestamp: timestamp.to_owned(),
        custom_type: None,
        message: Some(message),
        raw: RawLine {
            buf: Arc::clone(buf),
            range: range.clone(),
        },
        spans: Spans::default(),
    })
}

/// Byte range of `inner` (a sub-slice of `outer`) within `outer`.
pub(super) fn span_in(outer: &str, inner: &str) -> Range<usize> {
    let start = inner.as_ptr() as usize - outer.as_ptr() as usize;
    start..start + inner.len()
}

/// A session read line by line, before the index is built.
pub(super) struct Reader {
    buf: Arc<String>,
    pub(super) header: Option<SessionHeader>,
    pub(super) entries: Vec<Entry>,
    pub(super) problems: Vec<ReadProblem>,
    pub(super) unknown_types: Vec<(String, usize, usize)>, // (type, first line, count)
    /// Position of each entry among the file's parsed lines (header = 0),
    /// which a v1 compaction's `firstKeptEntryIndex` counts in.
    pub(super) positions: Vec<usize>,
    parsed_lines: usize,
    seen_first_line: bool,
}

impl Reader {
    pub(super) fn new(buf: Arc<String>, problems: Vec<ReadProblem>) -> Reader {
        Reader {
            entries: Vec::with_capacity(buf.len() / 2048 + 16),
            buf,
            header: None,
            problems,
            unknown_types: Vec::new(),
            positions: Vec::new(),
            parsed_lines: 0,
            seen_first_line: false,
        }
    }

    pub(super) fn problem(&mut self, line: usize, kind: ProblemKind, message: impl Into<String>) {
        self.problems.push(ReadProblem {
            line,
            kind,
            message: message.into(),
        });
    }

    fn version(&self) -> u32 {
        self.header
            .as_ref()
            .map_or(CURRENT_SESSION_VERSION, |h| h.version)
    }

    pub(super) fn read_line(
        &mut self,
        line_no: usize,
        range: Range<usize>,
        is_last_unterminated: bool,
    ) {
        let buf = Arc::clone(&self.buf);
        let line = &buf[range.clone()];
        let first_line = !self.seen_first_line;
        self.seen_first_line = true;

        if !first_line && self.version() >= 2 {
            if let Some(entry) = fast_message_entry(line_no, line, &buf, &range) {
                self.entries.push(entry);
                self.positions.push(self.parsed_lines);
                self.parsed_lines += 1;
                return;
            }
        }
        self.read_line_general(line_no, range, is_last_unterminated, first_line);
    }

    /// Reads any line: the fields every entry has are taken as raw JSON.
    pub(super) fn read_line_general(
        &mut self,
        line_no: usize,
        range: Range<usize>,
        is_last_unterminated: bool,
        first_line: bool,
    ) {
        let buf = Arc::clone(&self.buf);
        let line = &buf[range.clone()];

        let parsed = if line.trim_start().starts_with('{') {
            serde_json::from_str::<EntryFields>(line).map_err(|e| e.to_string())
        } else {
            Err("not a JSON object".to_owned())
        };
        let fields = match parsed {
            Ok(fields) => fields,
            Err(err) => {
                if is_last_unterminated {
                    self.problem(
                        line_no,
                        ProblemKind::TornLastLine,
                        format!("torn last line ({} bytes, no newline): {err}", line.len()),
                    );
                } else {
                    self.problem(
                        line_no,
                        ProblemKind::Malformed,
                        format!("malformed line: {err}"),
                    );
                }
                if first_line {
                    self.problem(line_no, ProblemKind::MissingHeader, "no session header");
                }
                return;
            }
        };
        let Some(kind) = raw_string(fields.kind) else {
            self.problem(line_no, ProblemKind::Malformed, "line has no string `type`");
            if first_line {
                self.problem(line_no, ProblemKind::MissingHeader, "no session header");
            }
            return;
        };

        if kind == "session" {
            if first_line {
                self.read_header(line_no, line);
                self.parsed_lines += 1;
            } else {
                self.problem(
                    line_no,
                    ProblemKind::StrayHeader,
                    "a second session header; skipped",
                );
            }
            return;
        }
        if first_line {
            self.problem(
                line_no,
                ProblemKind::MissingHeader,
                "no session header; reading entries anyway",
            );
        }

        let id = match raw_string(fields.id) {
            Some(id) => id,
            // v1 entries have no ids; the migration assigns them.
            None if self.version() < 2 => String::new(),
            None => {
                self.problem(
                    line_no,
                    ProblemKind::MissingId,
                    format!("`{kind}` entry without an id; skipped"),
                );
                return;
            }
        };
        let kind = EntryType::from_name(&kind);
        if let EntryType::Unknown(name) = &kind {
            match self.unknown_types.iter_mut().find(|(n, _, _)| n == name) {
                Some((_, _, count)) => *count += 1,
                None => self.unknown_types.push((name.clone(), line_no, 1)),
            }
        }

        let mut message = None;
        if kind == EntryType::Message {
            match fields.message {
                Some(raw) => match shared_message(&buf, raw.get()) {
                    Ok(m) => message = Some(m),
                    Err(err) => self.problem(
                        line_no,
                        ProblemKind::BadMessage,
                        format!("unreadable message: {err}"),
                    ),
                },
                None => self.problem(
                    line_no,
                    ProblemKind::BadMessage,
                    "`message` entry without a message",
                ),
            }
        }
        let spans = Spans::of(&kind, line, &fields);
        let custom_type = match kind {
            EntryType::Custom | EntryType::CustomMessage => raw_string(fields.custom_type),
            _ => None,
        };

        let entry = Entry {
            line: line_no,
            kind,
            id,
            parent_id: raw_string(fields.parent_id),
            timestamp: raw_string(fields.timestamp).unwrap_or_default(),
            custom_type,
            message,
            spans,
            raw: RawLine {
                buf: Arc::clone(&buf),
                range,
            },
        };
        self.entries.push(entry);
        self.positions.push(self.parsed_lines);
        self.parsed_lines += 1;
    }

    fn read_header(&mut self, line_no: usize, line: &str) {
        let map: Map<String, Value> = match serde_json::from_str(line) {
            Ok(map) => map,
            Err(err) => {
                // EntryFields accepted it, so this is rare (e.g. a huge number).
                self.problem(
                    line_no,
                    ProblemKind::MissingHeader,
                    format!("unreadable session header: {err}"),
                );
                return;
            }
        };
        let text = |key: &str| map.get(key).and_then(Value::as_str).map(str::to_owned);
        let version = match map.get("version") {
            None | Some(Value::Null) => 1,
            Some(v) => v
                .as_u64()
                .map_or(1, |v| u32::try_from(v).unwrap_or(u32::MAX)),
        };
        if version > CURRENT_SESSION_VERSION {
            self.problem(
                line_no,
                ProblemKind::UnsupportedVersion,
                format!("session format version {version} is newer than {CURRENT_SESSION_VERSION}; reading it as {CURRENT_SESSION_VERSION}"),
            );
        }
        if text("id").is_none() {
            self.problem(
                line_no,
                ProblemKind::MissingHeader,
                "session header without a string id",
            );
        }
        self.header = Some(SessionHeader {
            version,
            id: text("id").unwrap_or_default(),
            timestamp: text("timestamp").unwrap_or_default(),
            cwd: text("cwd").unwrap_or_default(),
            parent_session: text("parentSession"),
            raw: line.to_owned(),
        });
    }
}

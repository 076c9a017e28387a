//! Reading pi session files (JSONL).
//!
//! A session file is a header line (`{"type":"session","version":3,…}`) and
//! then one entry per line. Entries form a tree through `id` / `parentId`;
//! the branch the agent is on is the path from the *leaf* (the last entry of
//! the file, as pi's `_buildIndex` decides on load) up to the root.
//!
//! [`Session`] keeps the file's text once and every [`Entry`] as a window on
//! its line plus the few base fields every caller needs (`type`, `id`,
//! `parentId`, `timestamp`). A `message` entry also carries its
//! [`Message`], built from the raw `message` field without a detour through
//! `serde_json::Value`; a `custom` / `custom_message` entry remembers where
//! its `data` / `details` payload lies. Nothing else is parsed, so unknown
//! fields survive untouched and opening a large session costs one pass over
//! its bytes.
//!
//! Reading never fails on content. A torn last line (a crash mid-append),
//! malformed lines, unknown entry types, a missing header, duplicate ids and
//! dangling parents are all recorded as [`ReadProblem`]s and the rest of the
//! file is read as pi would read it. Only I/O errors are errors.
//!
//! Files of format versions 1 and 2 are migrated on read the way pi migrates
//! them (v1 → v2 gives every entry an id and chains `parentId` in file
//! order, turning a compaction's `firstKeptEntryIndex` into
//! `firstKeptEntryId`; v2 → v3 renames the message role `hookMessage` to
//! `custom`). Migrated entries' raw lines are the migrated text, so
//! [`Session::to_jsonl`] gives what pi would write back.

use std::collections::hash_map::Entry as MapEntry;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};
use std::num::NonZeroU32;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use condense_core::{Message, MessageError, Role};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// The session format version pi writes today.
pub const CURRENT_SESSION_VERSION: u32 = 3;

/// The kind of a session entry (its `type` field).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum EntryType {
    /// `message`: an agent message (user, assistant, tool result, …).
    Message,
    /// `model_change`
    ModelChange,
    /// `thinking_level_change`
    ThinkingLevelChange,
    /// `compaction`: pi's built-in compaction summary.
    Compaction,
    /// `branch_summary`: summary of a branch the user navigated away from.
    BranchSummary,
    /// `custom`: extension state, never sent to the model.
    Custom,
    /// `custom_message`: an extension message that is sent to the model.
    CustomMessage,
    /// `label`
    Label,
    /// `session_info`
    SessionInfo,
    /// A type this version of condense does not know; kept as is.
    Unknown(String),
}

impl EntryType {
    /// The type for a `type` field value.
    pub fn from_name(name: &str) -> EntryType {
        match name {
            "message" => EntryType::Message,
            "model_change" => EntryType::ModelChange,
            "thinking_level_change" => EntryType::ThinkingLevelChange,
            "compaction" => EntryType::Compaction,
            "branch_summary" => EntryType::BranchSummary,
            "custom" => EntryType::Custom,
            "custom_message" => EntryType::CustomMessage,
            "label" => EntryType::Label,
            "session_info" => EntryType::SessionInfo,
            other => EntryType::Unknown(other.to_owned()),
        }
    }

    /// The wire name (the `type` field value).
    pub fn as_str(&self) -> &str {
        match self {
            EntryType::Message => "message",
            EntryType::ModelChange => "model_change",
            EntryType::ThinkingLevelChange => "thinking_level_change",
            EntryType::Compaction => "compaction",
            EntryType::BranchSummary => "branch_summary",
            EntryType::Custom => "custom",
            EntryType::CustomMessage => "custom_message",
            EntryType::Label => "label",
            EntryType::SessionInfo => "session_info",
            EntryType::Unknown(name) => name,
        }
    }
}

impl fmt::Display for EntryType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What was wrong with a part of a session file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProblemKind {
    /// The file is not valid UTF-8; invalid bytes were replaced by U+FFFD.
    InvalidUtf8,
    /// The last line has no newline and is not valid JSON: an append was cut
    /// short. The line is skipped.
    TornLastLine,
    /// A line that is not a JSON object with a string `type`. Skipped.
    Malformed,
    /// The first line is not a session header. Entries are still read.
    MissingHeader,
    /// A second `type: "session"` line. Skipped.
    StrayHeader,
    /// The header's version is newer than this reader knows; read as v3.
    UnsupportedVersion,
    /// An entry type this reader does not know. Kept (reported once per type).
    UnknownEntryType,
    /// An entry without a string `id` in a v2+ file. Skipped.
    MissingId,
    /// An id used by an earlier entry too; the later entry wins the lookup.
    DuplicateId,
    /// A `parentId` that names no entry of the file (or the entry itself):
    /// branches through this entry stop here.
    MissingParent,
    /// A `message` entry whose `message` is missing or not an object. Kept,
    /// without a message.
    BadMessage,
}

/// One thing the reader tolerated, with where it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadProblem {
    /// 1-based line number in the file; 0 for the file as a whole.
    pub line: usize,
    /// What kind of problem.
    pub kind: ProblemKind,
    /// A human-readable description.
    pub message: String,
}

impl fmt::Display for ReadProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.message)
        } else {
            write!(f, "line {}: {}", self.line, self.message)
        }
    }
}

/// A line's text: a window on a shared buffer (the file, or a migrated line).
#[derive(Clone)]
struct RawLine {
    buf: Arc<String>,
    range: Range<usize>,
}

impl RawLine {
    fn get(&self) -> &str {
        &self.buf[self.range.clone()]
    }
}

/// The session header (the file's first line).
#[derive(Clone)]
pub struct SessionHeader {
    /// Format version the file was written with (1 when the field is absent).
    /// After a migration the raw line says 3; this keeps the original.
    pub version: u32,
    /// The session id (a UUID).
    pub id: String,
    /// Creation time, ISO string.
    pub timestamp: String,
    /// The working directory the session was started in ("" if absent).
    pub cwd: String,
    /// Path of the session this one was forked from.
    pub parent_session: Option<String>,
    raw: String,
}

impl SessionHeader {
    /// The header line's JSON text (migrated to v3 when the file was older).
    pub fn raw(&self) -> &str {
        &self.raw
    }
}

impl fmt::Debug for SessionHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionHeader")
            .field("version", &self.version)
            .field("id", &self.id)
            .field("timestamp", &self.timestamp)
            .field("cwd", &self.cwd)
            .field("parent_session", &self.parent_session)
            .finish()
    }
}

/// One entry of a session file: its raw line and its parsed base fields.
#[derive(Clone)]
pub struct Entry {
    /// 1-based line number in the file.
    pub line: usize,
    /// The entry's `type`.
    pub kind: EntryType,
    /// The entry's id (8 hex chars when pi wrote it).
    pub id: String,
    /// The parent entry's id; `None` for a root.
    pub parent_id: Option<String>,
    /// The entry's ISO timestamp string ("" if absent or not a string).
    pub timestamp: String,
    /// `customType` of `custom` and `custom_message` entries.
    pub custom_type: Option<String>,
    /// The message of a `message` entry (`None` if it could not be read).
    pub message: Option<Message>,
    raw: RawLine,
    spans: Spans,
}

/// Where some top-level fields lie in an entry's line (`null` included).
#[derive(Clone, Default)]
struct Spans {
    /// `data` of a `custom` entry, `details` of a `custom_message` entry.
    payload: Option<Span>,
    /// `customType`, `content` and `display` of a `custom_message` entry.
    custom_type: Option<Span>,
    content: Option<Span>,
    display: Option<Span>,
}

/// A field's byte range in its line, in 8 bytes with `Option` (a
/// `Range<usize>` takes 24, and every entry carries four). A value's end is
/// never 0 (at least `{"":` comes before it), which gives `Option` its
/// niche. A line of 4 GiB or more (pi cannot write one: JavaScript strings
/// stop at 1 GiB) keeps no spans.
#[derive(Clone, Copy)]
struct Span {
    start: u32,
    end: NonZeroU32,
}

impl Span {
    fn new(range: Range<usize>) -> Option<Span> {
        Some(Span {
            start: u32::try_from(range.start).ok()?,
            end: NonZeroU32::new(u32::try_from(range.end).ok()?)?,
        })
    }

    fn range(self) -> Range<usize> {
        self.start as usize..self.end.get() as usize
    }
}

impl Spans {
    fn of(kind: &EntryType, line: &str, fields: &EntryFields<'_>) -> Spans {
        let span = |raw: Option<&RawValue>| raw.and_then(|r| Span::new(span_in(line, r.get())));
        match kind {
            EntryType::Custom => Spans {
                payload: span(fields.data),
                ..Spans::default()
            },
            EntryType::CustomMessage => Spans {
                payload: span(fields.details),
                custom_type: span(fields.custom_type),
                content: span(fields.content),
                display: span(fields.display),
            },
            _ => Spans::default(),
        }
    }
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("line", &self.line)
            .field("kind", &self.kind)
            .field("id", &self.id)
            .field("parent_id", &self.parent_id)
            .field("timestamp", &self.timestamp)
            .field("custom_type", &self.custom_type)
            .finish_non_exhaustive()
    }
}

impl Entry {
    /// The entry's JSON line, exactly as in the file (without the newline),
    /// or as migrated for a v1/v2 file.
    pub fn raw(&self) -> &str {
        self.raw.get()
    }

    /// The raw JSON of the payload: `data` of a `custom` entry, `details` of
    /// a `custom_message` entry. `None` when absent or `null`.
    pub fn payload_raw(&self) -> Option<&str> {
        self.span(&self.spans.payload).filter(|raw| *raw != "null")
    }

    /// Where `part` (a slice of this entry's line, such as a value inside
    /// [`Entry::payload_raw`]) lies in the buffer the line is a window on,
    /// for readers that share that buffer instead of copying from it.
    pub(crate) fn shared_span(&self, part: &str) -> Option<(&Arc<String>, Range<usize>)> {
        let line = self.raw.get();
        let (base, at) = (line.as_ptr() as usize, part.as_ptr() as usize);
        (at >= base && at + part.len() <= base + line.len()).then(|| {
            let start = self.raw.range.start + (at - base);
            (&self.raw.buf, start..start + part.len())
        })
    }

    fn span(&self, span: &Option<Span>) -> Option<&str> {
        span.map(|s| &self.raw()[s.range()])
    }

    /// For a `custom_message` entry, the raw JSON of `customType`, `content`,
    /// `display` and `details`, each `None` when the line lacks the key
    /// (`null` is kept as `"null"`): what pi copies into the custom message.
    pub fn custom_message_fields(&self) -> [Option<&str>; 4] {
        [
            self.span(&self.spans.custom_type),
            self.span(&self.spans.content),
            self.span(&self.spans.display),
            self.span(&self.spans.payload),
        ]
    }

    /// The payload (see [`Entry::payload_raw`]) deserialized as `T`.
    pub fn payload<T: DeserializeOwned>(&self) -> Option<Result<T, serde_json::Error>> {
        self.payload_raw().map(serde_json::from_str)
    }

    /// True for a `custom` or `custom_message` entry of the given `customType`.
    pub fn is_custom(&self, custom_type: &str) -> bool {
        matches!(self.kind, EntryType::Custom | EntryType::CustomMessage)
            && self.custom_type.as_deref() == Some(custom_type)
    }

    /// The raw JSON of one top-level field of the line (`null` included),
    /// found by re-scanning the line. Meant for the rare fields the reader
    /// does not keep (a compaction's `summary`, a custom message's `content`).
    pub fn raw_field(&self, name: &str) -> Option<&str> {
        let fields: BTreeMap<String, &RawValue> = serde_json::from_str(self.raw()).ok()?;
        fields.get(name).map(|raw| raw.get())
    }
}

/// A pi session file, read.
#[derive(Clone)]
pub struct Session {
    /// The header; `None` when the first line is not one (see
    /// [`ProblemKind::MissingHeader`]).
    pub header: Option<SessionHeader>,
    /// Every entry, in file order.
    pub entries: Vec<Entry>,
    /// What the reader tolerated, in line order.
    pub problems: Vec<ReadProblem>,
    /// The version the file was migrated from, if it was older than v3.
    pub migrated_from: Option<u32>,
    ends_with_newline: bool,
    by_id: IdIndex,
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("header", &self.header)
            .field("entries", &self.entries.len())
            .field("problems", &self.problems)
            .field("migrated_from", &self.migrated_from)
            .finish()
    }
}

/// A map key that is already a keyed hash (the `IdIndex`'s), used as its
/// own hash: hashing it again would only cost time.
#[derive(Default)]
struct KeyedHash(u64);

impl Hasher for KeyedHash {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// Entry ids to positions in [`Session::entries`], without a second copy of
/// the ids: a map from each id's hash to the last entry with that id, the
/// entry's own `id` confirming a match. A map keyed by the ids cost ~100
/// bytes an entry (the copy, its allocation, a wider slot), ~0.04× of a
/// long session's file. The hash is keyed per session, so ids cannot be
/// chosen to collide; two ids that do collide anyway go to `collided`.
#[derive(Clone)]
struct IdIndex<S = RandomState> {
    hasher: S,
    /// Hash → the last entry whose id is the first id seen with that hash.
    by_hash: HashMap<u64, usize, BuildHasherDefault<KeyedHash>>,
    /// Ids whose hash an earlier, different id took (practically never).
    collided: HashMap<String, usize>,
}

impl IdIndex {
    /// The index, and each entry whose id an earlier entry already has, with
    /// the nearest such earlier entry.
    fn build(entries: &[Entry]) -> (IdIndex, Vec<(usize, usize)>) {
        IdIndex::build_with(entries, RandomState::new())
    }
}

impl<S: BuildHasher> IdIndex<S> {
    fn build_with(entries: &[Entry], hasher: S) -> (IdIndex<S>, Vec<(usize, usize)>) {
        let mut index = IdIndex {
            hasher,
            by_hash: HashMap::with_capacity_and_hasher(entries.len(), Default::default()),
            collided: HashMap::new(),
        };
        let mut duplicates = Vec::new();
        for (i, entry) in entries.iter().enumerate() {
            let id = entry.id.as_str();
            let previous = match index.by_hash.entry(index.hasher.hash_one(id)) {
                MapEntry::Vacant(slot) => {
                    slot.insert(i);
                    None
                }
                MapEntry::Occupied(mut slot) if entries[*slot.get()].id == id => {
                    Some(slot.insert(i))
                }
                MapEntry::Occupied(_) => index.collided.insert(id.to_owned(), i),
            };
            if let Some(previous) = previous {
                duplicates.push((i, previous));
            }
        }
        (index, duplicates)
    }

    /// The position of the last entry with this id.
    fn get(&self, entries: &[Entry], id: &str) -> Option<usize> {
        match self.by_hash.get(&self.hasher.hash_one(id)) {
            Some(&i) if entries[i].id == id => Some(i),
            _ if self.collided.is_empty() => None,
            _ => self.collided.get(id).copied(),
        }
    }
}

/// The fields the reader parses from every entry line. Everything is taken as
/// raw JSON so a field of an unexpected type never makes the line unreadable.
#[derive(Deserialize)]
struct EntryFields<'a> {
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
    custom_type: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "keep_null")]
    data: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "keep_null")]
    details: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "keep_null")]
    content: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "keep_null")]
    display: Option<&'a RawValue>,
}

/// A present field as raw JSON, `null` included (`None` only when absent).
fn keep_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// A raw JSON value as a string, if it is one.
fn raw_string(raw: Option<&RawValue>) -> Option<String> {
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
fn shared_message(buf: &Arc<String>, body: &str) -> Result<Message, MessageError> {
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
fn fast_message_entry(
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
fn span_in(outer: &str, inner: &str) -> Range<usize> {
    let start = inner.as_ptr() as usize - outer.as_ptr() as usize;
    start..start + inner.len()
}

/// A session read line by line, before the index is built.
struct Reader {
    buf: Arc<String>,
    header: Option<SessionHeader>,
    entries: Vec<Entry>,
    problems: Vec<ReadProblem>,
    unknown_types: Vec<(String, usize, usize)>, // (type, first line, count)
    /// Position of each entry among the file's parsed lines (header = 0),
    /// which a v1 compaction's `firstKeptEntryIndex` counts in.
    positions: Vec<usize>,
    parsed_lines: usize,
    seen_first_line: bool,
}

impl Reader {
    fn new(buf: Arc<String>, problems: Vec<ReadProblem>) -> Reader {
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

    fn problem(&mut self, line: usize, kind: ProblemKind, message: impl Into<String>) {
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

    fn read_line(&mut self, line_no: usize, range: Range<usize>, is_last_unterminated: bool) {
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
    fn read_line_general(
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

/// Deterministic 8-hex ids for the v1 → v2 migration (not persisted unless
/// the caller writes [`Session::to_jsonl`] back).
fn migration_ids() -> impl FnMut(&HashSet<String>) -> String {
    let mut state: u64 = 0x5eed_c0de_0000_0001;
    move |taken| loop {
        // splitmix64
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let id = format!("{:08x}", z as u32);
        if !taken.contains(&id) {
            return id;
        }
    }
}

/// The error for a path that is not a regular file.
pub fn not_a_regular_file(what: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("not a regular file ({what}); refusing to read it"),
    )
}

fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    if meta.is_dir() {
        "a directory"
    } else {
        "a FIFO, socket or device"
    }
}

/// Reads a whole file, refusing anything but a regular file: opening a FIFO
/// blocks until a writer comes and a device such as `/dev/zero` never ends,
/// so both are checked before the open (by the path, symlinks followed) and
/// again on the opened handle.
pub fn read_regular_file(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(not_a_regular_file(kind_of(&meta)));
    }
    let mut file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(not_a_regular_file(kind_of(&meta)));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

impl Session {
    /// Reads and parses a session file. Only I/O errors are errors; content
    /// problems are in [`Session::problems`].
    /// Only regular files are read ([`read_regular_file`]): a FIFO or a
    /// device named `*.jsonl` is an error, not a hang.
    pub fn open(path: impl AsRef<Path>) -> std::io::Result<Session> {
        let bytes = read_regular_file(path.as_ref())?;
        Ok(Session::from_bytes(bytes))
    }

    /// Parses a session file's text.
    pub fn parse(text: &str) -> Session {
        Session::from_string(text.to_owned(), Vec::new())
    }

    /// Parses a session file's bytes (invalid UTF-8 is replaced and reported).
    pub fn from_bytes(bytes: Vec<u8>) -> Session {
        match String::from_utf8(bytes) {
            Ok(text) => Session::from_string(text, Vec::new()),
            Err(err) => {
                let text = String::from_utf8_lossy(err.as_bytes()).into_owned();
                let problem = ReadProblem {
                    line: 0,
                    kind: ProblemKind::InvalidUtf8,
                    message: "file is not valid UTF-8; invalid bytes replaced with U+FFFD".into(),
                };
                Session::from_string(text, vec![problem])
            }
        }
    }

    fn from_string(text: String, problems: Vec<ReadProblem>) -> Session {
        let ends_with_newline = text.is_empty() || text.ends_with('\n');
        let buf = Arc::new(text);
        let mut reader = Reader::new(Arc::clone(&buf), problems);

        let mut start = 0;
        let mut line_no = 0;
        let len = buf.len();
        while start < len {
            line_no += 1;
            let (end, next, terminated) = match buf[start..].find('\n') {
                Some(i) => (start + i, start + i + 1, true),
                None => (len, len, false),
            };
            let mut line_end = end;
            if buf[start..line_end].ends_with('\r') {
                line_end -= 1;
            }
            if !buf[start..line_end].trim().is_empty() {
                reader.read_line(line_no, start..line_end, !terminated);
            }
            start = next;
        }

        for (name, line, count) in std::mem::take(&mut reader.unknown_types) {
            let times = if count == 1 {
                String::new()
            } else {
                format!(" ({count} entries)")
            };
            reader.problem(
                line,
                ProblemKind::UnknownEntryType,
                format!("unknown entry type `{name}`{times}; kept as is"),
            );
        }

        let mut migrated_from = None;
        if let Some(version) = reader.header.as_ref().map(|h| h.version) {
            if version < CURRENT_SESSION_VERSION {
                migrate(&mut reader, version);
                migrated_from = Some(version);
            }
        }

        let Reader {
            header,
            entries,
            mut problems,
            ..
        } = reader;
        let (by_id, duplicates) = IdIndex::build(&entries);
        for (i, previous) in duplicates {
            let entry = &entries[i];
            problems.push(ReadProblem {
                line: entry.line,
                kind: ProblemKind::DuplicateId,
                message: format!(
                    "id {} already used on line {}",
                    entry.id, entries[previous].line
                ),
            });
        }
        for entry in &entries {
            if let Some(parent) = &entry.parent_id {
                if parent == &entry.id || by_id.get(&entries, parent).is_none() {
                    problems.push(ReadProblem {
                        line: entry.line,
                        kind: ProblemKind::MissingParent,
                        message: format!("parentId {parent} names no other entry"),
                    });
                }
            }
        }
        problems.sort_by_key(|p| p.line);

        Session {
            header,
            entries,
            problems,
            migrated_from,
            ends_with_newline,
            by_id,
        }
    }

    /// The leaf: the last entry of the file (pi's `_buildIndex`).
    pub fn leaf(&self) -> Option<&Entry> {
        self.entries.last()
    }

    /// The entry with this id (the last one, if the id is duplicated).
    pub fn entry(&self, id: &str) -> Option<&Entry> {
        self.index_of(id).map(|i| &self.entries[i])
    }

    /// Index of the entry with this id in [`Session::entries`].
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.by_id.get(&self.entries, id)
    }

    /// The branch ending at `leaf_id` (or at [`Session::leaf`] when `None`),
    /// root first, following `parentId`. The walk stops at a root, at a
    /// parent that does not exist, or where it would revisit an entry (a
    /// cycle). An unknown `leaf_id` gives an empty branch, as pi's
    /// `getBranch` does.
    pub fn branch(&self, leaf_id: Option<&str>) -> Vec<&Entry> {
        let start = match leaf_id {
            Some(id) => self.index_of(id),
            None => self.entries.len().checked_sub(1),
        };
        let mut path = Vec::new();
        let mut visited = vec![false; self.entries.len()];
        let mut current = start;
        while let Some(i) = current {
            if std::mem::replace(&mut visited[i], true) {
                break;
            }
            let entry = &self.entries[i];
            path.push(entry);
            current = entry.parent_id.as_deref().and_then(|p| self.index_of(p));
        }
        path.reverse();
        path
    }

    /// True when the file is empty or ends with a newline. When false, an
    /// append must start with a newline to make its entry a whole line.
    pub fn ends_with_newline(&self) -> bool {
        self.ends_with_newline
    }

    /// The session as a JSONL text: the header and every readable entry, one
    /// line each, each ending in a newline. For a v1/v2 file this is the
    /// migrated file pi would write back; lines the reader skipped are
    /// dropped, as pi drops them.
    pub fn to_jsonl(&self) -> String {
        let mut out = String::new();
        if let Some(header) = &self.header {
            out.push_str(header.raw());
            out.push('\n');
        }
        for entry in &self.entries {
            out.push_str(entry.raw());
            out.push('\n');
        }
        out
    }
}

/// Re-serializes a migrated line into its own buffer.
fn replace_line(entry: &mut Entry, map: &Map<String, Value>) {
    let text = crate::json::to_string(map).expect("a JSON map always serializes");
    let len = text.len();
    entry.raw = RawLine {
        buf: Arc::new(text),
        range: 0..len,
    };
    // Point the spans at the same fields of the new text.
    let line = entry.raw();
    entry.spans = serde_json::from_str::<EntryFields>(line)
        .map(|fields| Spans::of(&entry.kind, line, &fields))
        .unwrap_or_default();
}

/// Brings v1/v2 entries to v3 as pi's `migrateToCurrentVersion` does.
fn migrate(reader: &mut Reader, version: u32) {
    if let Some(header) = &mut reader.header {
        if let Ok(mut map) = serde_json::from_str::<Map<String, Value>>(&header.raw) {
            map.insert("version".into(), Value::from(CURRENT_SESSION_VERSION));
            header.raw = crate::json::to_string(&map).expect("a JSON map always serializes");
        }
    }

    let mut new_ids = migration_ids();
    let mut taken: HashSet<String> = HashSet::new();
    if version < 2 {
        // Position (among parsed lines) → entry index, for firstKeptEntryIndex.
        let by_position: HashMap<usize, usize> = reader
            .positions
            .iter()
            .enumerate()
            .map(|(i, &p)| (p, i))
            .collect();
        let mut previous: Option<String> = None;
        for i in 0..reader.entries.len() {
            let id = new_ids(&taken);
            taken.insert(id.clone());
            let Ok(mut map) = serde_json::from_str::<Map<String, Value>>(reader.entries[i].raw())
            else {
                continue;
            };
            let parent = previous.replace(id.clone());
            map.insert("id".into(), Value::String(id.clone()));
            map.insert(
                "parentId".into(),
                parent.clone().map_or(Value::Null, Value::String),
            );
            if reader.entries[i].kind == EntryType::Compaction {
                if let Some(index) = map.get("firstKeptEntryIndex").and_then(Value::as_f64) {
                    // Only entries up to this one have ids yet, as in pi.
                    let target = (index >= 0.0 && index.fract() == 0.0)
                        .then(|| by_position.get(&(index as usize)).copied())
                        .flatten()
                        .filter(|&t| t <= i);
                    if let Some(t) = target {
                        let target_id = if t == i {
                            id.clone()
                        } else {
                            reader.entries[t].id.clone()
                        };
                        map.insert("firstKeptEntryId".into(), Value::String(target_id));
                    }
                    map.shift_remove("firstKeptEntryIndex");
                }
            }
            let entry = &mut reader.entries[i];
            entry.id = id;
            entry.parent_id = parent;
            if entry.kind == EntryType::Message {
                rename_hook_message(entry, &mut map);
            }
            replace_line(entry, &map);
        }
    } else {
        for entry in &mut reader.entries {
            let is_hook = entry.message.as_ref().and_then(Message::role)
                == Some(&Role::Other("hookMessage".into()));
            if !is_hook {
                continue;
            }
            let Ok(mut map) = serde_json::from_str::<Map<String, Value>>(entry.raw()) else {
                continue;
            };
            rename_hook_message(entry, &mut map);
            replace_line(entry, &map);
        }
    }
}

/// v2 → v3: a message of role `hookMessage` becomes role `custom`.
fn rename_hook_message(entry: &mut Entry, map: &mut Map<String, Value>) {
    let Some(Value::Object(message)) = map.get_mut("message") else {
        return;
    };
    if message.get("role").and_then(Value::as_str) != Some("hookMessage") {
        return;
    }
    message.insert("role".into(), Value::String("custom".into()));
    let text = crate::json::to_string(message).expect("a JSON map always serializes");
    entry.message = Message::from_json(&text).ok();
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#;

    #[test]
    fn reads_base_fields_and_payload_spans() {
        let text = format!(
            "{HEADER}\n{}\n{}\n",
            r#"{"type":"message","id":"a1","parentId":null,"timestamp":"t1","message":{"role":"user","content":"hi","timestamp":1}}"#,
            r#"{"type":"custom","customType":"x","data":{"k":[1,2]},"id":"a2","parentId":"a1","timestamp":"t2","extra":true}"#,
        );
        let s = Session::parse(&text);
        assert!(s.problems.is_empty(), "{:?}", s.problems);
        assert_eq!(s.entries.len(), 2);
        let m = &s.entries[0];
        assert_eq!(m.kind, EntryType::Message);
        assert_eq!(m.parent_id, None);
        assert_eq!(
            m.message.as_ref().unwrap().json(),
            r#"{"role":"user","content":"hi","timestamp":1}"#
        );
        let c = &s.entries[1];
        assert_eq!(c.custom_type.as_deref(), Some("x"));
        assert_eq!(c.payload_raw(), Some(r#"{"k":[1,2]}"#));
        assert_eq!(c.raw_field("extra"), Some("true"));
        assert!(c.is_custom("x"));
        assert_eq!(s.leaf().unwrap().id, "a2");
        assert_eq!(s.to_jsonl(), text);
    }

    #[test]
    fn fast_and_general_paths_agree() {
        let lines = [
            r#"{"type":"message","id":"a1","parentId":null,"timestamp":"t","message":{"role":"user","content":"}","timestamp":1}}"#,
            r#"{"type":"message","id":"a2","parentId":"a1","timestamp":"t","message":{"role":"user","content":"x","timestamp":2}}"#,
            r#"{"type":"message","id":"a\u0033","parentId":"a2","timestamp":"t","message":{"role":"user","content":"x","timestamp":3}}"#,
            r#"{"type":"message","id":"a4","parentId":"a3","timestamp":"t","message":{"role":"user","content":"x","timestamp":4},"later":1}"#,
            r#"{"type":"message","id":"a5","parentId":"a4","timestamp":"t","message":{"role":"user"},"x":{}}"#,
            r#"{"type":"message", "id":"a6","parentId":"a5","timestamp":"t","message":{"role":"user"}}"#,
        ];
        let buf = Arc::new(lines.join("\n"));
        let mut start = 0;
        for (i, line) in lines.iter().enumerate() {
            let range = start..start + line.len();
            start = range.end + 1;
            let fast = fast_message_entry(i + 2, line, &buf, &range);
            assert_eq!(fast.is_some(), i < 2, "line {i}");
            let mut reader = Reader::new(Arc::clone(&buf), Vec::new());
            reader.read_line_general(i + 2, range, false, false);
            assert!(reader.problems.is_empty(), "{:?}", reader.problems);
            let general = &reader.entries[0];
            if let Some(fast) = fast {
                assert_eq!(fast.id, general.id);
                assert_eq!(fast.parent_id, general.parent_id);
                assert_eq!(fast.timestamp, general.timestamp);
                assert_eq!(fast.message, general.message);
                assert_eq!(fast.raw(), general.raw());
            }
            assert_eq!(general.id, format!("a{}", i + 1));
        }
    }

    #[test]
    fn crlf_and_blank_lines_are_tolerated() {
        let text = format!(
            "{HEADER}\r\n\r\n{}\r\n",
            r#"{"type":"label","id":"a1","parentId":null,"timestamp":"t","targetId":"a1","label":"x"}"#
        );
        let s = Session::parse(&text);
        assert_eq!(s.entries.len(), 1);
        assert!(
            s.problems
                .iter()
                .all(|p| p.kind == ProblemKind::MissingParent)
                || s.problems.is_empty()
        );
        assert_eq!(s.entries[0].line, 3);
    }

    #[test]
    fn dangling_parent_and_self_parent_are_reported() {
        let text = format!(
            "{HEADER}\n{}\n{}\n",
            r#"{"type":"label","id":"a1","parentId":"zz","timestamp":"t"}"#,
            r#"{"type":"label","id":"a2","parentId":"a2","timestamp":"t"}"#,
        );
        let s = Session::parse(&text);
        let kinds: Vec<_> = s.problems.iter().map(|p| (p.line, p.kind)).collect();
        assert_eq!(
            kinds,
            vec![
                (2, ProblemKind::MissingParent),
                (3, ProblemKind::MissingParent)
            ]
        );
        assert_eq!(s.branch(None).len(), 1);
        assert_eq!(s.branch(Some("a1")).len(), 1);
    }

    #[test]
    fn id_lookup_takes_the_last_entry_and_reports_each_repeat() {
        let label = |id: &str, parent: &str| {
            format!(r#"{{"type":"label","id":"{id}","parentId":"{parent}","timestamp":"t"}}"#)
        };
        let mut lines = vec![HEADER.to_owned(), label("r", "r")];
        lines.extend((0..300).map(|i| label(&format!("e{i}"), "r")));
        lines.push(label("e7", "r")); // line 303
        lines.push(label("x", "e7")); // line 304
        lines.push(label("e7", "x")); // line 305
        let s = Session::parse(&(lines.join("\n") + "\n"));
        let duplicates: Vec<_> = s
            .problems
            .iter()
            .filter(|p| p.kind == ProblemKind::DuplicateId)
            .map(|p| (p.line, p.message.as_str()))
            .collect();
        assert_eq!(
            duplicates,
            [
                (303, "id e7 already used on line 10"),
                (305, "id e7 already used on line 303")
            ]
        );
        for i in 0..300 {
            let id = format!("e{i}");
            let want = if i == 7 { 305 } else { i + 3 };
            assert_eq!(s.entry(&id).map(|e| e.line), Some(want), "{id}");
            assert_eq!(s.index_of(&id), Some(want - 2));
        }
        assert!(s.entry("e300").is_none() && s.entry("").is_none());
        // The branch from the leaf follows the last `e7`, then `x`, then the
        // `e7` the parent id names (the last one again: a cycle, so it stops).
        let branch: Vec<_> = s.branch(None).iter().map(|e| e.line).collect();
        assert_eq!(branch, [304, 305]);

        // Ids that all hash alike read the same (the `collided` side).
        let same = std::hash::BuildHasherDefault::<Constant>::default();
        let (colliding, repeats) = IdIndex::build_with(&s.entries, same);
        let (plain, plain_repeats) = IdIndex::build(&s.entries);
        assert_eq!(repeats, plain_repeats);
        assert_eq!(repeats, [(301, 8), (303, 301)]);
        for id in ["r", "e0", "e7", "e299", "x", "e300", ""] {
            assert_eq!(
                colliding.get(&s.entries, id),
                plain.get(&s.entries, id),
                "{id}"
            );
        }
    }

    /// A hasher under which every id collides.
    #[derive(Default)]
    struct Constant;

    impl std::hash::Hasher for Constant {
        fn write(&mut self, _: &[u8]) {}
        fn finish(&self) -> u64 {
            7
        }
    }
}

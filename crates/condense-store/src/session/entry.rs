//! One entry as the reader keeps it: a window on its raw line plus the base
//! fields every caller needs, and where its payload lies, so nothing else
//! is parsed and unknown fields survive untouched. Also the header line.

use std::collections::BTreeMap;
use std::fmt;
use std::num::NonZeroU32;
use std::ops::Range;
use std::sync::Arc;

use condense_core::Message;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

use super::reader::*;

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

/// A line's text: a window on a shared buffer (the file, or a migrated line).
#[derive(Clone)]
pub(super) struct RawLine {
    pub(super) buf: Arc<String>,
    pub(super) range: Range<usize>,
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
    pub(super) raw: String,
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
    pub(super) raw: RawLine,
    pub(super) spans: Spans,
}

/// Where some top-level fields lie in an entry's line (`null` included).
#[derive(Clone, Default)]
pub(super) struct Spans {
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
pub(super) struct Span {
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
    pub(super) fn of(kind: &EntryType, line: &str, fields: &EntryFields<'_>) -> Spans {
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

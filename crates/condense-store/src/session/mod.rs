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
//!
//! [`Message`]: condense_core::Message

mod entry;
mod file;
mod id_index;
mod migrate;
mod problem;
mod reader;

pub use entry::{Entry, EntryType, SessionHeader};
pub use file::{not_a_regular_file, read_regular_file};
pub use problem::{ProblemKind, ReadProblem};

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use id_index::IdIndex;
use migrate::migrate;
use reader::Reader;

/// The session format version pi writes today.
pub const CURRENT_SESSION_VERSION: u32 = 3;

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

/// The line of the entry where the leaf's `parentId` chain comes back on
/// itself, if it does (the walk [`Session::branch`] stops at).
fn leaf_cycle(entries: &[Entry], by_id: &IdIndex) -> Option<usize> {
    let mut visited = vec![false; entries.len()];
    let mut current = entries.len().checked_sub(1);
    while let Some(i) = current {
        if std::mem::replace(&mut visited[i], true) {
            return Some(entries[i].line);
        }
        current = entries[i]
            .parent_id
            .as_deref()
            .filter(|p| *p != entries[i].id)
            .and_then(|p| by_id.get(entries, p));
    }
    None
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
                    "id {} already used on line {}; this later entry is the one the id names",
                    entry.id, entries[previous].line
                ),
            });
        }
        if let Some(line) = leaf_cycle(&entries, &by_id) {
            problems.push(ReadProblem {
                line,
                kind: ProblemKind::ParentCycle,
                message:
                    "the leaf's parentId chain cycles back to this entry; its branch stops here"
                        .into(),
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

#[cfg(test)]
mod tests {
    use super::reader::fast_message_entry;
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
                (
                    303,
                    "id e7 already used on line 10; this later entry is the one the id names"
                ),
                (
                    305,
                    "id e7 already used on line 303; this later entry is the one the id names"
                )
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

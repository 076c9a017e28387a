//! What the reader tolerated: each content problem it recorded instead of
//! failing, so a caller can report it and the rest of the file still reads.

use std::fmt;

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
    /// The leaf's `parentId` chain comes back to an entry it passed: the
    /// branch stops there, without the entries before the cycle.
    ParentCycle,
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

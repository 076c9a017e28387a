//! Spill sidecars: giant tool outputs live in
//! `<sessionDir>/<sessionId>-blobs/<key>.txt`.
//!
//! A spill path read from a session entry is untrusted: a crafted session
//! must not make `context_tree_query` read arbitrary files. Only files inside
//! the session's own blob directory are read; a recorded path outside it is
//! retried by file name inside the blob directory (a session moved together
//! with its blobs keeps working), and refused otherwise.

use std::path::{Path, PathBuf};

use condense_core::records::ToolCallRecord;

/// The blob directory of a session file with the given session id.
pub fn blob_dir(session_file: &Path, session_id: &str) -> PathBuf {
    let dir = session_file.parent().unwrap_or(Path::new("."));
    dir.join(format!("{session_id}-blobs"))
}

/// Turns a tool-call key into a safe file name: anything but ASCII
/// alphanumerics, `-`, `_`, `.` and `@` becomes `_`, and leading dots are
/// replaced so the name can never be `.` or `..` or hidden.
pub fn sanitize_file_stem(key: &str) -> String {
    let mut s: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@') {
                c
            } else {
                '_'
            }
        })
        .collect();
    while s.starts_with('.') {
        s.replace_range(0..1, "_");
    }
    if s.is_empty() {
        s.push('_');
    }
    s
}

/// The path a record's spill may be read from, if it lies inside `blobs`.
pub fn trusted_spill_path(blobs: &Path, record: &ToolCallRecord) -> Option<PathBuf> {
    let recorded = PathBuf::from(record.spill_path.as_deref()?);
    let root = blobs.canonicalize().ok()?;
    let inside = |p: &Path| {
        p.canonicalize()
            .ok()
            .filter(|c| c.starts_with(&root) && c.is_file())
    };
    inside(&recorded).or_else(|| inside(&root.join(recorded.file_name()?)))
}

/// Reads a record's spilled output from the session's blob directory.
pub fn read_spill(blobs: &Path, record: &ToolCallRecord) -> Option<String> {
    let path = trusted_spill_path(blobs, record)?;
    std::fs::read(path)
        .ok()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitizes_ids_into_file_names() {
        assert_eq!(sanitize_file_stem("call_1@17"), "call_1@17");
        assert_eq!(sanitize_file_stem("../../etc/passwd"), "_._.._etc_passwd");
        assert_eq!(sanitize_file_stem(".."), "_.");
        assert_eq!(sanitize_file_stem(""), "_");
        assert_eq!(sanitize_file_stem("a/b\\c:d"), "a_b_c_d");
    }
}

//! Spill sidecars: giant tool outputs live in
//! `<sessionDir>/<sessionId>-blobs/<key>.txt`.
//!
//! A spill path read from a session entry is untrusted: a crafted session
//! must not make `context_tree_query` read arbitrary files. Only files inside
//! the session's own blob directory are read; a recorded path outside it is
//! retried by file name inside the blob directory (a session moved together
//! with its blobs keeps working), and refused otherwise.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use condense_core::OccurrenceKey;
use condense_core::ToolCallRecord;
use condense_core::WrittenSpill;

/// The blob directory of a session file with the given session id.
///
/// The id comes from the file's header, which a crafted session controls, so
/// it is sanitized like a file name: the directory is always beside the
/// session file (a UUID, as pi writes, is kept as is).
pub fn blob_dir(session_file: &Path, session_id: &str) -> PathBuf {
    let dir = session_file.parent().unwrap_or(Path::new("."));
    dir.join(format!("{}-blobs", sanitize_file_stem(session_id)))
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

/// Longest blob file stem kept as is; a longer one is cut and hashed (file
/// names are limited to 255 bytes, and the temporary name adds ~40).
const MAX_STEM: usize = 160;

/// The file stem of a key's blob: [`sanitize_file_stem`] of the key, and,
/// when sanitizing changed it or it is too long, a `~` and a 128-bit hash of
/// the key. No sanitized name contains `~`, and different keys that sanitize
/// alike (`w/1`, `w:1`, `w_1`) get different hashes, so two occurrences never
/// share a blob file. Keys of plain characters (every provider's usual ids)
/// keep their plain names.
pub fn blob_stem(key: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut stem = sanitize_file_stem(key);
    if stem == key && stem.len() <= MAX_STEM {
        return stem;
    }
    let half = |salt: &str| {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        salt.hash(&mut h);
        key.hash(&mut h);
        h.finish()
    };
    stem.truncate(MAX_STEM - 40);
    format!(
        "{stem}~{:016x}{:016x}",
        half("condense-blob-1"),
        half("condense-blob-2")
    )
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

/// A blob [`write_blob`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenBlob {
    /// The blob's absolute path.
    pub path: PathBuf,
    /// Its size in bytes (the output's UTF-8 length).
    pub bytes: u64,
}

impl WrittenBlob {
    /// The blob as core's [`WrittenSpill`] for call `call` of a batch.
    pub fn to_spill(&self, call: usize) -> WrittenSpill {
        WrittenSpill {
            call,
            path: self.path.to_string_lossy().into_owned(),
            bytes: self.bytes,
        }
    }
}

/// Writes a spilled output to `<blob_dir>/<`[`blob_stem`]` of the key>.txt`,
/// creating the directory when needed.
///
/// The text goes to a temporary file in the same directory, is synced, and
/// is then renamed into place, so the blob is either absent or whole: a
/// failed write returns the error and leaves no blob (and no temporary file)
/// behind. Returns the blob's absolute path and byte length.
pub fn write_blob(
    blob_dir: &Path,
    key: &OccurrenceKey,
    text: &str,
) -> std::io::Result<WrittenBlob> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    std::fs::create_dir_all(blob_dir)?;
    let dir = blob_dir.canonicalize()?;
    let stem = blob_stem(&key.to_string());
    let path = dir.join(format!("{stem}.txt"));
    let tmp = dir.join(format!(
        ".{stem}.{}.{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, &path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(WrittenBlob {
        path,
        bytes: text.len() as u64,
    })
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

    #[test]
    fn blob_stems_are_plain_or_hashed_never_shared() {
        assert_eq!(blob_stem("toolu_01Ab@17"), "toolu_01Ab@17");
        let a = blob_stem("w/1@5");
        let b = blob_stem("w:1@5");
        assert!(
            a.starts_with("w_1@5~") && b.starts_with("w_1@5~"),
            "{a} {b}"
        );
        assert_ne!(a, b);
        assert_ne!(a, blob_stem("w_1@5"));
        let long = blob_stem(&"x".repeat(400));
        assert!(long.len() <= MAX_STEM && long.contains('~'), "{long}");
        assert_eq!(
            blob_dir(Path::new("/s/a.jsonl"), "/etc/x"),
            Path::new("/s/_etc_x-blobs")
        );
    }
}

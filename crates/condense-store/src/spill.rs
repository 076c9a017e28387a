//! Spill sidecars: giant tool outputs live in
//! `<sessionDir>/<sessionId>-blobs/<key>.txt`.
//!
//! A spill path read from a session entry is untrusted: a crafted session
//! must not make `context_tree_query` read arbitrary files. Only files inside
//! the session's own blob directory are read; a recorded path outside it is
//! retried by file name inside the blob directory (a session moved together
//! with its blobs keeps working), and refused otherwise.
//!
//! The blob directory itself is untrusted too: a shared or unpacked session
//! folder can hold `<id>-blobs` as a symlink to `/`. It is used (read or
//! written) only when it is a real directory whose canonical path is the
//! expected one beside the session file ([`checked_blob_dir`]).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use condense_core::OccurrenceKey;
use condense_core::ToolCallRecord;
use condense_core::WrittenSpill;
use sha1::{Digest, Sha1};

/// The blob directory of a session file with the given session id.
///
/// The id comes from the file's header, which a crafted session controls, so
/// it is named like a key's blob ([`blob_stem`]): the directory is always
/// beside the session file, a long id is cut and hashed so the name stays
/// within the file-name limit, and two ids never share a directory (a UUID,
/// as pi writes, is kept as is).
pub fn blob_dir(session_file: &Path, session_id: &str) -> PathBuf {
    let dir = session_file.parent().unwrap_or(Path::new("."));
    blob_dir_in(dir, session_id)
}

/// The blob directory of session `session_id` in the session directory `dir`
/// (the sidecar knows the directory, not the file).
pub fn blob_dir_in(dir: &Path, session_id: &str) -> PathBuf {
    dir.join(format!("{}-blobs", blob_stem(session_id)))
}

/// The canonical path of a blob directory, if it may be used: it must be a
/// real directory (not a symlink) whose canonical path is its parent's
/// canonical path joined with its name. A blob directory that is a symlink,
/// or a path whose last component is `..`, is refused, so neither reads nor
/// writes follow it out of the session directory.
pub fn checked_blob_dir(blob_dir: &Path) -> std::io::Result<PathBuf> {
    checked_dir(blob_dir, BLOB_DIR)
}

const BLOB_DIR: &str = "blob directory";

/// `dir`, made if missing (its parents too), once it passes
/// [`checked_dir`].
pub(crate) fn created_dir(dir: &Path, what: &str) -> std::io::Result<PathBuf> {
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    // `create_dir` (not `create_dir_all`): an existing symlink is an error
    // for the check to report, never something to accept.
    match std::fs::create_dir(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    checked_dir(dir, what)
}

/// [`checked_blob_dir`] for any directory condense keeps its files in,
/// named `what` in the error.
pub(crate) fn checked_dir(dir: &Path, what: &str) -> std::io::Result<PathBuf> {
    let refused = |why: &str| {
        std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("{}: {what} {why}", dir.display()),
        )
    };
    let name = dir.file_name().ok_or_else(|| refused("has no name"))?;
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let expected = parent.canonicalize()?.join(name);
    let meta = std::fs::symlink_metadata(&expected)?;
    if meta.file_type().is_symlink() {
        return Err(refused("is a symlink; refusing to follow it"));
    }
    if !meta.is_dir() {
        return Err(refused("is not a directory"));
    }
    if expected.canonicalize()? != expected {
        return Err(refused("does not resolve to itself"));
    }
    Ok(expected)
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
/// the key (the first half of its SHA-1, a fixed function, so the name is the
/// same in every build and the reader finds what the writer wrote). No
/// sanitized name contains `~`, and different keys that sanitize alike (`w/1`,
/// `w:1`, `w_1`) get different hashes, so two occurrences never share a blob
/// file. Keys of plain characters (every provider's usual ids) keep their
/// plain names.
pub fn blob_stem(key: &str) -> String {
    let mut stem = sanitize_file_stem(key);
    if stem == key && stem.len() <= MAX_STEM {
        return stem;
    }
    let digest = Sha1::digest(key.as_bytes());
    let hash: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    // Sanitized stems are ASCII, so any cut is a character boundary.
    stem.truncate(MAX_STEM - 40);
    format!("{stem}~{hash}")
}

/// The path a record's spill may be read from, if it lies inside `blobs`.
pub fn trusted_spill_path(blobs: &Path, record: &ToolCallRecord) -> Option<PathBuf> {
    let recorded = PathBuf::from(record.spill_path.as_deref()?);
    let root = checked_blob_dir(blobs).ok()?;
    let inside = |p: &Path| {
        p.canonicalize()
            .ok()
            .filter(|c| c.starts_with(&root) && c.is_file())
    };
    inside(&recorded).or_else(|| inside(&root.join(recorded.file_name()?)))
}

/// How many times its recorded size a blob may be: condense records the
/// UTF-8 bytes, a writer counting UTF-16 units records at least a third
/// of them.
const SPILL_SIZE_SLACK: u64 = 3;

/// Reads a record's spilled output from the session's blob directory.
/// A file more than three times the size the record gives is not the
/// blob that was written (`None`): read, it could cost any memory.
pub fn read_spill(blobs: &Path, record: &ToolCallRecord) -> Option<String> {
    use std::io::Read as _;
    let path = trusted_spill_path(blobs, record)?;
    let file = std::fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    if record
        .spill_bytes
        .is_some_and(|recorded| len > recorded.saturating_mul(SPILL_SIZE_SLACK))
    {
        return None;
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).ok()?);
    file.take(len).read_to_end(&mut bytes).ok()?;
    Some(
        String::from_utf8(bytes)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
    )
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
/// behind. Temporary files a crashed writer left are removed first
/// ([`remove_stale_temps`]). The directory must pass [`checked_blob_dir`]:
/// a blob directory that is a symlink is never written through. Returns the
/// blob's absolute path and byte length.
pub fn write_blob(
    blob_dir: &Path,
    key: &OccurrenceKey,
    text: &str,
) -> std::io::Result<WrittenBlob> {
    let dir = created_dir(blob_dir, BLOB_DIR)?;
    remove_stale_temps(&dir, SystemTime::now());
    let stem = blob_stem(&key.to_string());
    let path = replace_file(&dir, &stem, "txt", text.as_bytes(), true)?;
    Ok(WrittenBlob {
        path,
        bytes: text.len() as u64,
    })
}

/// Writes `<dir>/<stem>.<ext>` whole or not at all: through a temporary
/// file beside it (`.<stem>.<pid>.<n>.tmp`, which [`remove_stale_temps`]
/// knows), synced first when `sync`, then renamed over the old one. On an
/// error the temporary file is removed and the old file, if any, stands.
pub(crate) fn replace_file(
    dir: &Path,
    stem: &str,
    ext: &str,
    bytes: &[u8],
    sync: bool,
) -> std::io::Result<PathBuf> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let path = dir.join(format!("{stem}.{ext}"));
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
        file.write_all(bytes)?;
        if sync {
            file.sync_all()?;
        }
        drop(file);
        std::fs::rename(&tmp, &path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(path)
}

/// A temporary blob file is `.<stem>.<pid>.<n>.tmp`; its writer's pid.
fn temp_writer_pid(name: &str) -> Option<u32> {
    let inner = name.strip_prefix('.')?.strip_suffix(".tmp")?;
    let mut parts = inner.rsplitn(3, '.');
    let _counter: u64 = parts.next()?.parse().ok()?;
    let pid = parts.next()?.parse().ok()?;
    parts.next().filter(|stem| !stem.is_empty())?;
    Some(pid)
}

/// Whether a process with this pid runs (Linux: `/proc/<pid>` exists).
/// Without `/proc` every writer counts as alive.
fn process_alive(pid: u32) -> bool {
    let proc_root = Path::new("/proc");
    !proc_root.join("self").exists() || proc_root.join(pid.to_string()).exists()
}

/// A temporary file whose writer is gone is removed once it is this old
/// (a writer in another pid namespace looks gone; a minute without a write
/// means it is not writing any more).
pub const STALE_TEMP_DEAD_WRITER: Duration = Duration::from_secs(60);
/// Any temporary file this old is removed (its pid may have been reused; no
/// blob write lasts a day).
pub const STALE_TEMP_ANY: Duration = Duration::from_secs(24 * 60 * 60);

/// Removes the temporary files crashed blob writers left in `dir`, and
/// returns how many. A temporary file is removed when it was last modified
/// [`STALE_TEMP_DEAD_WRITER`] ago and its writer's process is gone, or
/// [`STALE_TEMP_ANY`] ago whatever its pid; this process's own temporary
/// files are never touched (another thread may be writing one). Only names of
/// the temporary-file form are considered, and only regular files.
pub fn remove_stale_temps(dir: &Path, now: SystemTime) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let me = std::process::id();
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(temp_writer_pid) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        if !meta.file_type().is_file() {
            continue;
        }
        let age = meta
            .modified()
            .ok()
            .and_then(|m| now.duration_since(m).ok())
            .unwrap_or_default();
        let stale = age >= STALE_TEMP_ANY || (age >= STALE_TEMP_DEAD_WRITER && !process_alive(pid));
        if stale && std::fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
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
        let crafted = blob_dir(Path::new("/s/a.jsonl"), "/etc/x");
        assert_eq!(crafted.parent(), Some(Path::new("/s")));
        let name = crafted.file_name().and_then(|n| n.to_str()).unwrap_or("");
        assert!(
            name.starts_with("_etc_x~") && name.ends_with("-blobs"),
            "{name}"
        );
        assert_eq!(
            blob_dir(
                Path::new("/s/a.jsonl"),
                "0190f5a1-0000-7000-8000-00000000c0de"
            ),
            Path::new("/s/0190f5a1-0000-7000-8000-00000000c0de-blobs")
        );
    }

    #[test]
    fn temporary_names_give_their_writer() {
        assert_eq!(temp_writer_pid(".call_1@17.4242.3.tmp"), Some(4242));
        assert_eq!(temp_writer_pid(".a.b.c.77.0.tmp"), Some(77));
        assert_eq!(temp_writer_pid("call_1@17.txt"), None);
        assert_eq!(temp_writer_pid("..1.2.tmp"), None);
        assert_eq!(temp_writer_pid(".x.pid.2.tmp"), None);
    }
}

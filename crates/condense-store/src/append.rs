//! Appending entries to a pi session file the way pi's `SessionManager` does.
//!
//! Each new entry gets a fresh 8-hex-char id that no entry of the file uses,
//! `parentId` = the current leaf (the last entry of the file, or the entry
//! chosen with [`Appender::set_leaf`]), and an ISO timestamp with
//! milliseconds and `Z`. It is serialized as one JSON line, with keys in the
//! order pi writes them, and written with a single `write_all` of
//! `line + "\n"` on a file opened for appending, then `fsync`ed. If the file
//! does not end in a newline (a torn last line), the first append starts with
//! one, so the new entry is always a whole line and a later read skips the
//! torn fragment as a malformed line instead of gluing it to the new entry.
//!
//! # Locking rule
//!
//! An [`Appender`] holds an advisory exclusive lock (`flock`) on the session
//! file from [`Appender::open`] until it is dropped, and reads the file
//! *after* taking the lock. So two condense processes never interleave their
//! appends, and the leaf an appender chains onto is the file's real leaf, not
//! a stale one. Read, decide and append under the same appender.
//!
//! pi itself takes no lock: it keeps the leaf in memory and appends with
//! `appendFileSync` (open, write, close), so no descriptor stays open while
//! it runs. Appending to the file of a running pi would fork its tree behind
//! its back (pi's next entry takes pi's in-memory leaf as parent), so inside
//! pi condense never writes the file (the host adapter asks pi to append),
//! and the condense sidecar keeps a [`SessionHold`] on the session it serves:
//! a shared lock on the file for as long as pi runs that session. An
//! [`Appender`] (exclusive) cannot be had meanwhile, so the CLI refuses it.

use std::collections::hash_map::RandomState;
use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use condense_core::Message;
use serde::Serialize;
use serde_json::value::RawValue;

use crate::session::{Session, CURRENT_SESSION_VERSION};
use crate::time::format_iso;

/// How [`Appender::open`] takes the file lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    /// Block until the lock is free.
    Wait,
    /// Fail with [`AppendError::Locked`] if another process holds it.
    Try,
}

/// Why an append could not be done.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    /// Reading, writing, locking or syncing the file failed.
    #[error("{path}: {source}")]
    Io {
        /// The session file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// Another process holds the file's lock ([`LockMode::Try`]).
    #[error(
        "{0}: locked by another process: a running pi (its condense sidecar holds the session) or another condense writing it"
    )]
    Locked(PathBuf),
    /// The file has no session header: not a pi session, or a damaged one.
    #[error("{0}: no session header; refusing to append")]
    NoHeader(PathBuf),
    /// The file uses an older format; pi rewrites such a file when it loads
    /// it, and appending v3 entries to it would mix formats.
    #[error("{path}: session format v{version} needs migrating to v3 first (open it in pi once)")]
    NeedsMigration {
        /// The session file.
        path: PathBuf,
        /// Its format version.
        version: u32,
    },
    /// The file uses a format newer than this condense knows.
    #[error("{path}: session format v{version} is newer than v3; refusing to append")]
    NewerVersion {
        /// The session file.
        path: PathBuf,
        /// Its format version.
        version: u32,
    },
    /// [`Appender::set_leaf`] named an entry the file does not have.
    #[error("no entry with id {0}")]
    UnknownEntry(String),
    /// The id source kept producing ids already in use.
    #[error("could not find an unused entry id after {0} tries")]
    IdsExhausted(usize),
    /// The entry could not be serialized.
    #[error("could not serialize the entry: {0}")]
    Json(#[from] serde_json::Error),
}

/// The base fields of an entry being written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryBase<'a> {
    /// The new entry's id.
    pub id: &'a str,
    /// Its parent (the leaf), `None` for a root.
    pub parent_id: Option<&'a str>,
    /// Its ISO timestamp.
    pub timestamp: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CustomLine<'a, T: ?Sized> {
    #[serde(rename = "type")]
    kind: &'static str,
    custom_type: &'a str,
    data: &'a T,
    id: &'a str,
    parent_id: Option<&'a str>,
    timestamp: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CustomMessageLine<'a, C: ?Sized, D: ?Sized> {
    #[serde(rename = "type")]
    kind: &'static str,
    custom_type: &'a str,
    content: &'a C,
    display: bool,
    details: &'a D,
    id: &'a str,
    parent_id: Option<&'a str>,
    timestamp: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct MessageLine<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    id: &'a str,
    parent_id: Option<&'a str>,
    timestamp: &'a str,
    message: &'a RawValue,
}

/// A `custom` entry line, as pi's `appendCustomEntry` writes it:
/// `{"type":"custom","customType":…,"data":…,"id":…,"parentId":…,"timestamp":…}`.
pub fn custom_entry_line<T: Serialize + ?Sized>(
    custom_type: &str,
    data: &T,
    base: &EntryBase<'_>,
) -> serde_json::Result<String> {
    crate::json::to_string(&CustomLine {
        kind: "custom",
        custom_type,
        data,
        id: base.id,
        parent_id: base.parent_id,
        timestamp: base.timestamp,
    })
}

/// A `custom_message` entry line, as pi's `appendCustomMessageEntry` writes
/// it: `{"type":"custom_message","customType","content","display","details","id","parentId","timestamp"}`.
pub fn custom_message_entry_line<C: Serialize + ?Sized, D: Serialize + ?Sized>(
    custom_type: &str,
    content: &C,
    display: bool,
    details: &D,
    base: &EntryBase<'_>,
) -> serde_json::Result<String> {
    crate::json::to_string(&CustomMessageLine {
        kind: "custom_message",
        custom_type,
        content,
        display,
        details,
        id: base.id,
        parent_id: base.parent_id,
        timestamp: base.timestamp,
    })
}

/// A `message` entry line, as pi's `appendMessage` writes it:
/// `{"type":"message","id","parentId","timestamp","message"}`, with the
/// message's JSON embedded as is.
pub fn message_entry_line(message: &Message, base: &EntryBase<'_>) -> serde_json::Result<String> {
    let json = message.json();
    let raw: &RawValue = serde_json::from_str(&json)?;
    crate::json::to_string(&MessageLine {
        kind: "message",
        id: base.id,
        parent_id: base.parent_id,
        timestamp: base.timestamp,
        message: raw,
    })
}

/// A source of random `u64`s for entry ids.
pub type IdSource = Box<dyn FnMut() -> u64 + Send>;

/// The default id source: std's randomly keyed hasher over the clock, the
/// process id and a counter (no `rand` dependency).
pub fn default_id_source() -> IdSource {
    let keys = RandomState::new();
    let pid = std::process::id();
    let mut counter: u64 = 0;
    Box::new(move || {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let mut h = keys.build_hasher();
        h.write_u32(pid);
        h.write_u128(nanos);
        h.write_u64(counter);
        counter = counter.wrapping_add(1);
        h.finish()
    })
}

const ID_TRIES: usize = 100;

/// The ids of a file's entries. The ids condense and pi make are eight
/// hex digits, held as a `u32` each; any other id as its text.
#[derive(Default)]
struct IdSet {
    hex: HashSet<u32>,
    other: HashSet<Box<str>>,
}

impl IdSet {
    fn hex(id: &str) -> Option<u32> {
        let lower = id.len() == 8 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        lower.then(|| u32::from_str_radix(id, 16).ok()).flatten()
    }

    fn insert(&mut self, id: &str) {
        match IdSet::hex(id) {
            Some(n) => self.hex.insert(n),
            None => self.other.insert(id.into()),
        };
    }

    fn contains(&self, id: &str) -> bool {
        match IdSet::hex(id) {
            Some(n) => self.hex.contains(&n),
            None => self.other.contains(id),
        }
    }
}

/// Appends entries to one session file under an exclusive lock.
///
/// Dropping the appender closes the file and releases the lock.
pub struct Appender {
    path: PathBuf,
    file: File,
    leaf: Option<String>,
    ids: IdSet,
    needs_newline: bool,
    id_source: IdSource,
    /// Each append is synced to disk before it returns.
    sync_each: bool,
}

impl std::fmt::Debug for Appender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Appender")
            .field("path", &self.path)
            .field("leaf", &self.leaf)
            .field("needs_newline", &self.needs_newline)
            .finish_non_exhaustive()
    }
}

impl Appender {
    /// Opens an existing session file for appending: takes the exclusive
    /// lock, then reads the file. Refuses files without a header and files
    /// of another format version than 3. The session read is not kept (a
    /// long-lived appender must not hold the file it writes):
    /// [`Appender::open_reading`] returns it.
    pub fn open(path: impl AsRef<Path>, mode: LockMode) -> Result<Appender, AppendError> {
        Appender::open_reading(path, mode).map(|(appender, _)| appender)
    }

    /// [`Appender::open`], with the session as read under the lock (entries
    /// appended since are not in it).
    pub fn open_reading(
        path: impl AsRef<Path>,
        mode: LockMode,
    ) -> Result<(Appender, Session), AppendError> {
        let path = path.as_ref().to_path_buf();
        let io_err = |source| AppendError::Io {
            path: path.clone(),
            source,
        };
        // A FIFO or device would block the open or never end the read.
        let regular = |meta: std::fs::Metadata| {
            if meta.is_file() {
                Ok(())
            } else {
                Err(crate::session::not_a_regular_file(
                    "a directory, FIFO, socket or device",
                ))
            }
        };
        std::fs::metadata(&path).and_then(regular).map_err(io_err)?;
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&path)
            .map_err(io_err)?;
        file.metadata().and_then(regular).map_err(io_err)?;
        match mode {
            LockMode::Wait => fs4::FileExt::lock(&file).map_err(io_err)?,
            LockMode::Try => match fs4::FileExt::try_lock(&file) {
                Ok(()) => {}
                Err(fs4::TryLockError::WouldBlock) => return Err(AppendError::Locked(path)),
                Err(fs4::TryLockError::Error(e)) => return Err(io_err(e)),
            },
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io_err)?;
        let session = Session::from_bytes(bytes);

        let Some(header) = &session.header else {
            return Err(AppendError::NoHeader(path));
        };
        if header.version < CURRENT_SESSION_VERSION {
            return Err(AppendError::NeedsMigration {
                path,
                version: header.version,
            });
        }
        if header.version > CURRENT_SESSION_VERSION {
            return Err(AppendError::NewerVersion {
                path,
                version: header.version,
            });
        }

        let mut ids = IdSet::default();
        for e in &session.entries {
            ids.insert(&e.id);
        }
        let leaf = session.leaf().map(|e| e.id.clone());
        let needs_newline = !session.ends_with_newline();
        let appender = Appender {
            path,
            file,
            leaf,
            ids,
            needs_newline,
            id_source: default_id_source(),
            sync_each: true,
        };
        Ok((appender, session))
    }

    /// Appends no longer wait for the disk; the caller syncs with
    /// [`Appender::sync`] when it chooses (a process killed mid-way loses
    /// nothing written; only a machine that stops before the sync does).
    pub fn without_sync_each(mut self) -> Appender {
        self.sync_each = false;
        self
    }

    /// Syncs what was appended to disk.
    pub fn sync(&self) -> Result<(), AppendError> {
        self.file.sync_data().map_err(|source| AppendError::Io {
            path: self.path.clone(),
            source,
        })
    }

    /// Replaces the id source (tests pass a deterministic one).
    pub fn with_id_source(mut self, source: impl FnMut() -> u64 + Send + 'static) -> Appender {
        self.id_source = Box::new(source);
        self
    }

    /// The session file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The id new entries chain onto.
    pub fn leaf_id(&self) -> Option<&str> {
        self.leaf.as_deref()
    }

    /// Moves the leaf (pi's `branch()`; `None` is pi's `resetLeaf()`): the
    /// next entry becomes a child of `id`, starting a new branch.
    pub fn set_leaf(&mut self, id: Option<&str>) -> Result<(), AppendError> {
        match id {
            Some(id) if !self.ids.contains(id) => Err(AppendError::UnknownEntry(id.to_owned())),
            _ => {
                self.leaf = id.map(str::to_owned);
                Ok(())
            }
        }
    }

    /// A fresh id no entry of the file uses.
    fn new_id(&mut self) -> Result<String, AppendError> {
        for _ in 0..ID_TRIES {
            let id = format!("{:08x}", (self.id_source)() >> 32);
            if !self.ids.contains(&id) {
                return Ok(id);
            }
        }
        Err(AppendError::IdsExhausted(ID_TRIES))
    }

    /// Appends one entry whose line `build` makes from its base fields
    /// (use the `*_entry_line` helpers, or write the line yourself: it must
    /// be one line of JSON). `now_ms` is the clock in epoch ms. Returns the
    /// new entry's id, which becomes the leaf.
    pub fn append_with(
        &mut self,
        now_ms: i64,
        build: impl FnOnce(&EntryBase<'_>) -> serde_json::Result<String>,
    ) -> Result<String, AppendError> {
        self.append_line(now_ms, |base| build(base).map(|line| (line, ())))
            .map(|(id, _, ())| id)
    }

    /// [`Appender::append_with`], where `build` also gives a range of its
    /// line: returned as where those bytes now are in the file.
    fn append_line<T>(
        &mut self,
        now_ms: i64,
        build: impl FnOnce(&EntryBase<'_>) -> serde_json::Result<(String, T)>,
    ) -> Result<(String, u64, T), AppendError> {
        let id = self.new_id()?;
        let timestamp = format_iso(now_ms);
        let (line, extra) = build(&EntryBase {
            id: &id,
            parent_id: self.leaf.as_deref(),
            timestamp: &timestamp,
        })?;
        debug_assert!(!line.contains('\n'), "an entry must be a single line");
        // The lock keeps every other writer out, so the end of the file is
        // where this line goes (after the newline a torn line needs).
        let end = self.file.metadata().map_err(|source| AppendError::Io {
            path: self.path.clone(),
            source,
        })?;
        let line_at = end.len() + u64::from(self.needs_newline);

        let mut bytes = Vec::with_capacity(line.len() + 2);
        if self.needs_newline {
            bytes.push(b'\n');
        }
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        let sync_each = self.sync_each;
        let written = (&self.file).write_all(&bytes).and_then(|()| {
            if sync_each {
                self.file.sync_data()
            } else {
                Ok(())
            }
        });
        if let Err(source) = written {
            // A partial write may have left a torn line: start the next
            // append on a fresh line (a blank line is harmless).
            self.needs_newline = true;
            return Err(AppendError::Io {
                path: self.path.clone(),
                source,
            });
        }
        self.needs_newline = false;
        self.ids.insert(&id);
        self.leaf = Some(id.clone());
        Ok((id, line_at, extra))
    }

    /// Appends a `custom` entry (pi's `appendCustomEntry`).
    pub fn append_custom<T: Serialize + ?Sized>(
        &mut self,
        custom_type: &str,
        data: &T,
        now_ms: i64,
    ) -> Result<String, AppendError> {
        self.append_with(now_ms, |base| custom_entry_line(custom_type, data, base))
    }

    /// Appends a `custom_message` entry (pi's `appendCustomMessageEntry`).
    pub fn append_custom_message<C: Serialize + ?Sized, D: Serialize + ?Sized>(
        &mut self,
        custom_type: &str,
        content: &C,
        display: bool,
        details: &D,
        now_ms: i64,
    ) -> Result<String, AppendError> {
        self.append_with(now_ms, |base| {
            custom_message_entry_line(custom_type, content, display, details, base)
        })
    }

    /// Appends a `message` entry (pi's `appendMessage`).
    pub fn append_message(
        &mut self,
        message: &Message,
        now_ms: i64,
    ) -> Result<String, AppendError> {
        self.append_with(now_ms, |base| message_entry_line(message, base))
    }

    /// [`Appender::append_message`], also giving where the message's JSON
    /// is in the file, byte for byte: what a host that parks the message
    /// ([`Message::park`]) reads back. `None` in place of the range if the
    /// line does not end with the message as it is (it always does).
    pub fn append_message_at(
        &mut self,
        message: &Message,
        now_ms: i64,
    ) -> Result<(String, Option<std::ops::Range<u64>>), AppendError> {
        let json = message.json();
        let (id, line_at, within) = self.append_line(now_ms, |base| {
            let line = message_entry_line(message, base)?;
            // The message is the line's last field, embedded as is.
            let at = line.len().saturating_sub(json.len() + 1);
            let within = line.get(at..at + json.len()) == Some(&*json);
            Ok((line, within.then_some(at)))
        })?;
        let range = within.map(|at| {
            let start = line_at + at as u64;
            start..start + json.len() as u64
        });
        Ok((id, range))
    }

    /// A second handle on the file appended to (opened for reading too):
    /// what a host reads parked messages back from, at the ranges
    /// [`Appender::append_message_at`] gives, with positioned reads. It is
    /// the same file even if its path is renamed or removed.
    pub fn reader(&self) -> Result<File, AppendError> {
        self.file.try_clone().map_err(|source| AppendError::Io {
            path: self.path.clone(),
            source,
        })
    }
}

/// A shared advisory lock on a session file, held while a running pi works
/// on that session (the condense sidecar keeps one), so that no [`Appender`]
/// (an exclusive lock) writes behind pi's back.
///
/// pi creates a new session's file only when its first assistant message is
/// persisted, so the hold is taken when it can be: [`SessionHold::refresh`]
/// retries cheaply until it holds the file. Dropping the hold (or the
/// process ending) releases the lock.
#[derive(Debug, Default)]
pub struct SessionHold {
    path: Option<PathBuf>,
    file: Option<File>,
}

impl SessionHold {
    /// Holds `path` from now on (releasing the previous session's file),
    /// or nothing for `None`.
    pub fn set(&mut self, path: Option<PathBuf>) {
        if self.path != path {
            self.file = None;
            self.path = path;
        }
        self.refresh();
    }

    /// Takes the lock if it is not held yet and the file exists. Never
    /// blocks: if an [`Appender`] holds the file right now, the next call
    /// tries again.
    pub fn refresh(&mut self) {
        if self.file.is_some() {
            return;
        }
        let Some(path) = &self.path else {
            return;
        };
        // Only a regular file: opening a FIFO would block the caller.
        if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
            return;
        }
        let Ok(file) = File::open(path) else {
            return;
        };
        if fs4::FileExt::try_lock_shared(&file).is_ok() {
            self.file = Some(file);
        }
    }

    /// Whether the lock is held.
    pub fn is_held(&self) -> bool {
        self.file.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_helpers_use_pi_key_order() {
        let base = EntryBase {
            id: "0123abcd",
            parent_id: None,
            timestamp: "2026-01-01T00:00:00.000Z",
        };
        assert_eq!(
            custom_entry_line("k", &serde_json::json!({"a": 1.0}), &base).unwrap(),
            r#"{"type":"custom","customType":"k","data":{"a":1},"id":"0123abcd","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z"}"#
        );
        let base = EntryBase {
            parent_id: Some("ffff0000"),
            ..base
        };
        assert_eq!(
            custom_message_entry_line("k", "text", false, &serde_json::json!({}), &base).unwrap(),
            r#"{"type":"custom_message","customType":"k","content":"text","display":false,"details":{},"id":"0123abcd","parentId":"ffff0000","timestamp":"2026-01-01T00:00:00.000Z"}"#
        );
        let m = Message::from_json(r#"{"role":"user","content":"x","timestamp":1}"#).unwrap();
        assert_eq!(
            message_entry_line(&m, &base).unwrap(),
            r#"{"type":"message","id":"0123abcd","parentId":"ffff0000","timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"x","timestamp":1}}"#
        );
    }

    #[test]
    fn default_ids_differ() {
        let mut source = default_id_source();
        let a = source();
        let b = source();
        assert_ne!(a, b);
    }

    #[test]
    fn an_id_set_holds_each_id_exactly() {
        let mut ids = IdSet::default();
        for id in ["696f01c8", "00000000", "ABCDEF01", "entry-7", "abc", ""] {
            ids.insert(id);
        }
        for id in ["696f01c8", "00000000", "ABCDEF01", "entry-7", "abc", ""] {
            assert!(ids.contains(id), "{id}");
        }
        // Near misses: another case, another length, another number.
        for id in [
            "696F01C8",
            "abcdef01",
            "0696f01c8",
            "696f01c9",
            "entry-8",
            "ab",
        ] {
            assert!(!ids.contains(id), "{id}");
        }
    }
}

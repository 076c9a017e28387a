//! condense-store: pi session files, condense's custom entries, and replay.
//!
//! The only crate that knows the session file format and the payloads of the
//! entries condense writes:
//! - [`session`]: reading a pi session file (header, entries, the tree and its
//!   branches), tolerant of torn and malformed lines, migrating v1/v2 files;
//! - [`context`]: a branch → the messages pi hands to the model;
//! - [`append`]: appending entries the way pi does, under an advisory lock;
//! - [`entries`]: pi-condense's custom entry payloads, wire-compatible;
//! - [`json`]: JSON text as JavaScript's `JSON.stringify` writes it;
//! - [`time`]: ISO-8601 timestamps ↔ epoch milliseconds;
//! - [`replay`]: folding a branch's condense entries into core state;
//! - [`spill`]: spill sidecar blobs;
//! - [`misses`]: the provider's cache misses each session saw, beside the
//!   sessions;
//! - [`economy`]: a branch's recorded usage and switches, for the status.

pub mod append;
pub mod context;
pub mod economy;
pub mod entries;
pub mod json;
pub mod misses;
pub mod replay;
pub mod session;
pub mod spill;
pub mod time;

pub use append::{Appender, LockMode};
pub use context::{build_context, SessionContext};
pub use entries::CondenseEntry;
pub use session::{Entry, EntryType, ReadProblem, Session};
pub mod effects;

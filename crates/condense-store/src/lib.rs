//! condense-store: pi session files, condense's custom entries, and replay.
pub mod replay;

//! condense-host-opencode: condense inside OpenCode.
//!
//! The `condense-opencode` sidecar speaks the same protocol as pi's
//! (docs/protocol.md) with the same serving loop: OpenCode differs from pi
//! only in what the plugin in `plugin/` translates. The plugin maps
//! OpenCode's `{info, parts}` messages to core's (pi-shaped) messages and the
//! render back, keeps condense's entries in its own per-session event log
//! (OpenCode has no plugin storage), and answers `llm.complete` itself.

//! condense-host-pi: condense inside the pi coding agent.
//!
//! The `condense-pi` sidecar owns all state and logic; the TypeScript shim in
//! `extension/` translates pi's events into the requests of
//! `docs/protocol.md`. [`engine`] is the per-session state machine,
//! [`commands`] the `/pruner` command.

pub mod answer;
pub mod commands;
pub mod engine;
pub mod server;
pub mod stdio;

//! condense-host-pi: condense inside the pi coding agent.
//!
//! The `condense-pi` sidecar owns all state and logic; the TypeScript shim in
//! `extension/` translates pi's events into the requests of
//! `docs/protocol.md` and drives condense-engine's per-session state machine;
//! [`commands`] is the `/pruner` command.

pub mod answer;
pub mod commands;
pub mod server;
pub mod stdio;

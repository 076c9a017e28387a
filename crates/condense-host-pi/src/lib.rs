//! condense-host-pi: condense inside the pi coding agent.
//!
//! Not built yet. This crate will hold the `condense-pi` sidecar binary and the
//! TypeScript extension shim that pi loads. Until then it exports nothing.

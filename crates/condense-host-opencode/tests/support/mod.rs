//! Shared infrastructure for condense-host-opencode's end-to-end tests.
//!
//! * [`fake_llm`] and [`pi_env`] are condense-host-pi's test support, used
//!   from where they are (the scripted OpenAI-compatible server; the cache
//!   directory and the bounded process runner).
//! * [`opencode_env`]: installs OpenCode from the npm registry into that
//!   cache and runs it headless against the fake server, with the plugin.

#![allow(dead_code)]

#[path = "../../../condense-host-pi/tests/support/fake_llm.rs"]
pub mod fake_llm;
#[path = "../../../condense-host-pi/tests/support/pi_env.rs"]
pub mod pi_env;

pub mod opencode_env;

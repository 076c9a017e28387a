//! Support for condense-host-opencode's tests: the shared test kit
//! (condense-testkit: the scripted LLM server, the Node, OpenCode and
//! TypeScript installs), and `scenario`, what the OpenCode end-to-end tests
//! share.

#![allow(dead_code)]

#[allow(unused_imports)] // each test file uses some of them
pub use condense_testkit::{
    cli, fake_llm, node_tests, opencode_env, pi_env, process, registry, text, typescript,
};
pub mod scenario;

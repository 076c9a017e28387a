//! Support for condense-host-pi's end-to-end tests: the shared test kit
//! (condense-testkit: the scripted LLM server, the Node, pi and TypeScript
//! installs) and [`scenario`], the core condense scenario (flush, stubs,
//! recovery) with the helpers the files that run it share, and [`sidecar`],
//! the sidecar binary over its stdio.
//!
//! Each integration test pulls this in with `mod support;` (a test
//! directory's `main.rs` names its path). Not every test uses every helper,
//! hence the `dead_code` allowance.

#![allow(dead_code)]

#[allow(unused_imports)] // each test file uses some of them
pub use condense_testkit::{
    cli, fake_llm, node_tests, pi_env, process, registry, text, typescript,
};

pub mod rpc;
pub mod scenario;
pub mod sidecar;

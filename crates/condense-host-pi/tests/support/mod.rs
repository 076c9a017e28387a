//! Shared infrastructure for condense-host-pi's end-to-end tests.
//!
//! * [`fake_llm`]: a scripted OpenAI-compatible chat-completions server on
//!   127.0.0.1 that records every request.
//! * [`pi_env`]: finds or installs Node and pi (from the npm registry) and
//!   runs pi headless against the fake server in an isolated agent directory.
//! * [`typescript`]: finds or installs the TypeScript compiler (npm registry)
//!   next to the e2e installs, to type-check the shim.
//! * [`scenario`]: the core condense scenario (flush, stubs, recovery) and the
//!   helpers shared by the files that run it.
//!
//! Each integration test file pulls this in with `mod support;`. Not every
//! test uses every helper, hence the `dead_code` allowance.

#![allow(dead_code)]

pub mod fake_llm;
pub mod pi_env;
pub mod scenario;
pub mod typescript;

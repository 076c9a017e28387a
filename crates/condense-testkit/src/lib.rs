//! Test support shared by the host crates' end-to-end and unit tests
//! (dev-only, never published).
//!
//! * [`fake_llm`]: a scripted OpenAI-compatible chat-completions server on
//!   127.0.0.1 that records every request.
//! * [`cache`]: the e2e cache directory and the skip switch.
//! * [`process`]: child processes with a deadline.
//! * [`pi_env`]: finds or installs Node and pi (from the npm registry) and
//!   runs pi headless against the fake server in an isolated agent directory.
//! * [`opencode_env`]: installs OpenCode from the npm registry into the same
//!   cache and runs it headless against the fake server, with condense's
//!   plugin.
//! * [`opencode_serve`]: one OpenCode server (`opencode serve`) holding a
//!   session as the TUI does: prompts through `opencode run --attach`, the
//!   TUI's `/compact` through the server's API.
//! * [`typescript`]: finds or installs the TypeScript compiler next to the
//!   e2e installs, to type-check the shims.
//! * [`node_tests`]: runs the shims' TypeScript unit tests with that Node.
//! * [`npm_install`]: a package installed into the e2e cache once, staged
//!   and moved into place whole.
//! * [`registry`]: a real npm registry (verdaccio) on 127.0.0.1 serving the
//!   packages `cargo xtask dist` packed, for the install tests.
//! * [`text`]: the contents of the files the tests have the agent read.
//! * [`cli`]: the `condense` CLI built next to a sidecar, and its
//!   `simulate --json`.
//! * [`claude_env`]: installs Claude Code from the npm registry into the
//!   same cache and runs it headless through `condense claude`.
//! * [`relay`]: a recording relay, to see what a client sent before the
//!   proxy rewrote it.
//! * [`proxy_client`]: a Claude Code–shaped conversation posted straight
//!   to a condense proxy, and the miss counts it saved.

pub mod cache;
pub mod claude_env;
pub mod cli;
pub mod codex_env;
pub mod fake_llm;
pub mod node_tests;
pub mod npm_install;
pub mod opencode_env;
pub mod opencode_serve;
pub mod pi_env;
pub mod process;
pub mod proxy_client;
pub mod registry;
pub mod relay;
pub mod text;
pub mod typescript;

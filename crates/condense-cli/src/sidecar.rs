//! `condense sidecar`: the process the pi extension and the OpenCode plugin
//! start. It speaks docs/protocol.md on stdin/stdout and logs to stderr.
//!
//! It is condense-engine's host-neutral sidecar: which host it serves is
//! what the shim's `hello` says, so both hosts run this one binary (the
//! `condense` of the platform package), and everything host-specific is
//! the TypeScript the host loads.

use condense_engine::sidecar::{serve, BlockingStdin};

use crate::CliError;

/// Serves the protocol on stdio until the shim closes stdin.
pub fn run() -> Result<(), CliError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::Data(format!("sidecar: cannot start the async runtime: {e}")))?;
    // The serve loop runs on this thread and reads stdin blocking (stdio.rs).
    runtime.block_on(serve(BlockingStdin::new(), std::io::stdout()));
    Ok(())
}

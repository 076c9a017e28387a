//! `condense-pi`: the sidecar the pi extension shim starts. Speaks
//! docs/protocol.md on stdin/stdout; logs to stderr.
//!
//! It is condense-engine's host-neutral sidecar on stdio; everything
//! pi-specific is the TypeScript shim in `extension/`, which translates pi's
//! events into the protocol's requests and carries out the effects.

use condense_engine::sidecar::{serve, BlockingStdin};

fn main() {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("condense-pi: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    // The serve loop runs on this thread and reads stdin blocking (stdio.rs).
    runtime.block_on(serve(BlockingStdin::new(), std::io::stdout()));
}

//! `condense-opencode`: the sidecar the OpenCode plugin starts. Speaks
//! docs/protocol.md on stdin/stdout; logs to stderr.
//!
//! It is condense-engine's host-neutral sidecar, the same as pi's: OpenCode
//! differs from pi only in what the plugin in `plugin/` translates. The
//! plugin maps OpenCode's `{info, parts}` messages to core's (pi-shaped)
//! messages and the render back, keeps condense's entries in its own
//! per-session event log (OpenCode has no plugin storage), and answers
//! `llm.complete` itself.

use condense_engine::sidecar::{serve, BlockingStdin};

fn main() {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("condense-opencode: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    // The serve loop runs on this thread and reads stdin blocking (stdio.rs).
    runtime.block_on(serve(BlockingStdin::new(), std::io::stdout()));
}

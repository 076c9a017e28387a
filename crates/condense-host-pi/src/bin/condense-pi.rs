//! `condense-pi`: the sidecar the pi extension shim starts. Speaks
//! docs/protocol.md on stdin/stdout; logs to stderr.

use condense_host_pi::stdio::BlockingStdin;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    // The serve loop runs on this thread and reads stdin blocking (stdio.rs).
    runtime.block_on(condense_host_pi::server::serve(
        BlockingStdin::new(),
        std::io::stdout(),
    ));
}

//! `condense-opencode`: the sidecar the OpenCode plugin starts. Speaks
//! docs/protocol.md on stdin/stdout; logs to stderr.

use condense_host_pi::stdio::BlockingStdin;

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
    runtime.block_on(condense_host_pi::server::serve(
        BlockingStdin::new(),
        std::io::stdout(),
    ));
}

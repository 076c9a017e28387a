//! `condense-pi`: the sidecar the pi extension shim starts. Speaks
//! docs/protocol.md on stdin/stdout; logs to stderr.

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(condense_host_pi::server::serve(
        tokio::io::BufReader::new(tokio::io::stdin()),
        tokio::io::stdout(),
    ));
}

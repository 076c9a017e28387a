//! What `condense claude` and `condense codex` share: a proxy for the
//! agent's run (one already listening on the port is reused when it
//! forwards where this run would; else one runs in this process for as
//! long as the agent runs), and the binaries to start.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use condense_host_proxy::server::HEALTH_PATH;
use serde_json::Value;

use crate::proxy::ProxyOptions;
use crate::CliError;

/// What a condense proxy listening on `port` says of itself (its health
/// answer), or `None` when nothing answers as one.
fn running_proxy(port: u16) -> Option<Value> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET {HEALTH_PATH} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n"
    )
    .ok()?;
    let mut answer = Vec::new();
    s.take(64 * 1024).read_to_end(&mut answer).ok()?;
    let text = String::from_utf8_lossy(&answer);
    let body = text.split("\r\n\r\n").nth(1)?;
    let v: Value = serde_json::from_str(body.trim()).ok()?;
    (v["condense"] == "proxy").then_some(v)
}

/// The proxy an agent's run goes through.
pub struct RunProxy {
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    /// The runtime of a proxy this process runs (`None`: one reused).
    own: Option<tokio::runtime::Runtime>,
}

impl RunProxy {
    /// Reuses the proxy on `port` when `same` says its health answer
    /// forwards where `options` would, else starts one (on `port`, or any
    /// free port when something else holds it). `what` names the command
    /// in errors.
    pub fn reuse_or_start(
        port: u16,
        options: &ProxyOptions,
        same: impl Fn(&Value) -> bool,
        what: &str,
    ) -> Result<RunProxy, CliError> {
        if running_proxy(port).is_some_and(|v| same(&v)) {
            return Ok(RunProxy { port, own: None });
        }
        let fail = |e: &dyn std::fmt::Display| {
            CliError::Data(format!("{what}: the proxy cannot listen: {e}"))
        };
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, port))
            .or_else(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
            .map_err(|e| fail(&e))?;
        let port = listener.local_addr().map_err(|e| fail(&e))?.port();
        let config = options.config(true)?;
        std::fs::create_dir_all(&config.dir).map_err(|e| {
            CliError::Data(format!(
                "{what}: the proxy's directory {}: {e}",
                config.dir.display()
            ))
        })?;
        listener.set_nonblocking(true).map_err(|e| fail(&e))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| CliError::Data(format!("{what}: starting the proxy: {e}")))?;
        let listener = {
            let _guard = runtime.enter();
            tokio::net::TcpListener::from_std(listener).map_err(|e| fail(&e))?
        };
        runtime.spawn(condense_host_proxy::serve(listener, config));
        Ok(RunProxy {
            port,
            own: Some(runtime),
        })
    }

    /// Stops a proxy this process runs.
    pub fn stop(self) {
        if let Some(runtime) = self.own {
            runtime.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

/// An agent's binary: `$env` when set, else `name` on `PATH`.
pub fn agent_bin(env: &str, name: &str, install: &str) -> Result<PathBuf, CliError> {
    if let Some(bin) = std::env::var_os(env).filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(bin));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            CliError::Data(format!(
                "{name}: it is not on PATH ({install}), or set {env}"
            ))
        })
}

/// This binary (the MCP server the agent starts is `<it> mcp`).
pub fn condense_exe(what: &str) -> Result<PathBuf, CliError> {
    std::env::current_exe()
        .map_err(|e| CliError::Data(format!("{what}: finding the condense binary: {e}")))
}

#[cfg(test)]
mod tests {
    use condense_testkit::fake_llm::{FakeLlm, Reply};
    use condense_testkit::proxy_client::{post_tool_calls, saved_misses};

    use super::*;

    #[test]
    fn a_run_proxy_stopped_after_its_agent_saves_the_misses_counted() {
        const CALLS: usize = 5;
        let llm = FakeLlm::start((0..CALLS).map(|_| Reply::text("ok").with_usage(3_000, 10)));
        let dir = tempfile::tempdir().unwrap();
        let settings = dir.path().join("settings.json");
        std::fs::write(&settings, "{}").unwrap();
        let logs = dir.path().join("proxy");
        let options = ProxyOptions {
            upstream: format!("http://{}", llm.addr()),
            openai_upstream: format!("http://{}", llm.addr()),
            chatgpt_upstream: format!("http://{}", llm.addr()),
            settings: Some(settings),
            dir: Some(logs.clone()),
        };
        let proxy = RunProxy::reuse_or_start(0, &options, |_| false, "test").unwrap();
        let addr = format!("127.0.0.1:{}", proxy.port);
        for status in post_tool_calls(&addr, "s-run", CALLS) {
            assert!(status.contains(" 200"), "{status}");
        }
        assert_eq!(saved_misses(&logs), [(1, 1)], "the first report only");
        proxy.stop();
        // Every call but the first expected a cached prefix, and every
        // answer's usage but the last came back.
        let counted = CALLS as u64 - 2;
        assert_eq!(saved_misses(&logs), [(counted, counted)]);
    }
}

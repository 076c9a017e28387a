//! `condense claude [ARGS…]`: Claude Code through condense in one command.
//! It reuses a `condense proxy` already listening on the port (one that
//! says it forwards to the same upstream), or runs one in this process for
//! as long as Claude Code runs; registers `condense mcp` for the run; and
//! starts Claude Code with `ANTHROPIC_BASE_URL` pointed at the proxy and
//! the user's arguments. A proxy that cannot start is an error before
//! Claude Code starts: it never runs pointed at nothing.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use clap::Args;
use condense_host_proxy::server::HEALTH_PATH;

use crate::CliError;

/// The environment variable naming the Claude Code binary (default:
/// `claude` on `PATH`).
pub const CLAUDE_BIN_ENV: &str = "CONDENSE_CLAUDE_BIN";

/// `condense claude` arguments.
#[derive(Debug, Args)]
pub struct ClaudeArgs {
    /// The proxy's port (a running condense proxy there is reused).
    #[arg(long, default_value_t = 8787)]
    port: u16,
    #[command(flatten)]
    options: crate::proxy::ProxyOptions,
    /// Claude Code's own arguments, passed on as they are (put them after
    /// `--`).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    args: Vec<OsString>,
}

/// What listens on `port`: a condense proxy's upstream, or `None` when
/// nothing answers as a condense proxy.
fn running_proxy(port: u16) -> Option<String> {
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
    let v: serde_json::Value = serde_json::from_str(body.trim()).ok()?;
    (v["condense"] == "proxy").then(|| v["upstream"].as_str().unwrap_or("").to_owned())
}

/// The Claude Code binary.
fn claude_bin() -> Result<PathBuf, CliError> {
    if let Some(bin) = std::env::var_os(CLAUDE_BIN_ENV).filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(bin));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("claude"))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            CliError::Data(
                "claude: Claude Code is not on PATH (npm install -g @anthropic-ai/claude-code), or set CONDENSE_CLAUDE_BIN".into(),
            )
        })
}

/// The `--mcp-config` that registers `condense mcp` for the run.
fn mcp_config() -> Result<String, CliError> {
    let me = std::env::current_exe()
        .map_err(|e| CliError::Data(format!("claude: finding the condense binary: {e}")))?;
    Ok(serde_json::json!({
        "mcpServers": {"condense": {"type": "stdio", "command": me, "args": ["mcp"]}}
    })
    .to_string())
}

/// Runs Claude Code through the proxy; returns its exit code.
pub fn run(args: &ClaudeArgs) -> Result<i32, CliError> {
    let bin = claude_bin()?;
    let upstream = args.options.upstream.trim_end_matches('/').to_owned();
    let mcp = mcp_config()?;
    let reuse = running_proxy(args.port).is_some_and(|u| u == upstream);
    let mut own = None;
    let port = if reuse {
        args.port
    } else {
        // The port, or any free one when something else holds it.
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, args.port))
            .or_else(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
            .map_err(|e| CliError::Data(format!("claude: the proxy cannot listen: {e}")))?;
        let port = listener
            .local_addr()
            .map_err(|e| CliError::Data(format!("claude: the proxy cannot listen: {e}")))?
            .port();
        let config = args.options.config(true)?;
        std::fs::create_dir_all(&config.dir).map_err(|e| {
            CliError::Data(format!(
                "claude: the proxy's directory {}: {e}",
                config.dir.display()
            ))
        })?;
        listener
            .set_nonblocking(true)
            .map_err(|e| CliError::Data(format!("claude: the proxy cannot listen: {e}")))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| CliError::Data(format!("claude: starting the proxy: {e}")))?;
        let listener = {
            let _guard = runtime.enter();
            tokio::net::TcpListener::from_std(listener)
                .map_err(|e| CliError::Data(format!("claude: the proxy cannot listen: {e}")))?
        };
        runtime.spawn(condense_host_proxy::serve(listener, config));
        own = Some(runtime);
        port
    };
    let status = Command::new(&bin)
        .arg("--mcp-config")
        .arg(&mcp)
        .args(&args.args)
        .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}"))
        .status()
        .map_err(|e| CliError::Data(format!("claude: starting {}: {e}", bin.display())))?;
    if let Some(runtime) = own {
        runtime.shutdown_timeout(Duration::from_secs(1));
    }
    Ok(status.code().unwrap_or(1))
}

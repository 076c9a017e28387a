//! `condense claude [ARGS…]`: Claude Code through condense in one command.
//! It reuses a `condense proxy` already listening on the port (one that
//! says it forwards to the same upstream), or runs one in this process for
//! as long as Claude Code runs; registers `condense mcp` for the run; and
//! starts Claude Code with `ANTHROPIC_BASE_URL` pointed at the proxy and
//! the user's arguments. A proxy that cannot start is an error before
//! Claude Code starts: it never runs pointed at nothing.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

use clap::Args;

use crate::{launch, CliError};

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

/// The Claude Code binary.
fn claude_bin() -> Result<PathBuf, CliError> {
    launch::agent_bin(
        CLAUDE_BIN_ENV,
        "claude",
        "npm install -g @anthropic-ai/claude-code",
    )
}

/// The `--mcp-config` that registers `condense mcp` for the run.
fn mcp_config() -> Result<String, CliError> {
    let me = launch::condense_exe("claude")?;
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
    let proxy = launch::RunProxy::reuse_or_start(
        args.port,
        &args.options,
        |health| health["upstream"] == upstream.as_str(),
        "claude",
    )?;
    let status = Command::new(&bin)
        .arg("--mcp-config")
        .arg(&mcp)
        .args(&args.args)
        .env(
            "ANTHROPIC_BASE_URL",
            format!("http://127.0.0.1:{}", proxy.port),
        )
        .status()
        .map_err(|e| CliError::Data(format!("claude: starting {}: {e}", bin.display())))?;
    proxy.stop();
    Ok(status.code().unwrap_or(1))
}

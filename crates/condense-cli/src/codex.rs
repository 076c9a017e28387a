//! `condense codex [ARGS…]`: OpenAI's Codex CLI through condense in one
//! command. The proxy is reused or started as for `condense claude`; Codex
//! runs with `-c` overrides that keep the user's own `config.toml` and add
//! a model provider pointed at the proxy (the Responses API, the key from
//! `OPENAI_API_KEY`) and `condense mcp` as an MCP server.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

use clap::Args;

use crate::{launch, CliError};

/// The environment variable naming the Codex binary (default: `codex` on
/// `PATH`).
pub const CODEX_BIN_ENV: &str = "CONDENSE_CODEX_BIN";

/// The model provider the overrides add.
const PROVIDER: &str = "condense";

/// `condense codex` arguments.
#[derive(Debug, Args)]
pub struct CodexArgs {
    /// The proxy's port (a running condense proxy there is reused).
    #[arg(long, default_value_t = 8787)]
    port: u16,
    /// The environment variable Codex reads the API key from.
    #[arg(long, value_name = "VAR", default_value = "OPENAI_API_KEY")]
    env_key: String,
    #[command(flatten)]
    options: crate::proxy::ProxyOptions,
    /// Codex's own arguments, passed on as they are (put them after `--`).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    args: Vec<OsString>,
}

/// A TOML string (a basic string: JSON's escapes are TOML's).
fn toml_string(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

/// The `-c key=value` overrides that send Codex through the proxy on
/// `port` and register `condense mcp` (`me`).
pub fn overrides(port: u16, env_key: &str, me: &std::path::Path) -> Vec<String> {
    let p = format!("model_providers.{PROVIDER}");
    vec![
        format!("model_provider={}", toml_string(PROVIDER)),
        format!("{p}.name={}", toml_string("condense proxy")),
        format!(
            "{p}.base_url={}",
            toml_string(&format!("http://127.0.0.1:{port}/v1"))
        ),
        format!("{p}.env_key={}", toml_string(env_key)),
        format!("{p}.wire_api={}", toml_string("responses")),
        format!(
            "mcp_servers.condense.command={}",
            toml_string(&me.to_string_lossy())
        ),
        format!("mcp_servers.condense.args=[{}]", toml_string("mcp")),
    ]
}

fn codex_bin() -> Result<PathBuf, CliError> {
    launch::agent_bin(CODEX_BIN_ENV, "codex", "npm install -g @openai/codex")
}

/// Runs Codex through the proxy; returns its exit code.
pub fn run(args: &CodexArgs) -> Result<i32, CliError> {
    let bin = codex_bin()?;
    let me = launch::condense_exe("codex")?;
    let upstream = args
        .options
        .openai_upstream
        .trim_end_matches('/')
        .trim_end_matches("/v1")
        .to_owned();
    let proxy = launch::RunProxy::reuse_or_start(
        args.port,
        &args.options,
        |health| health["openaiUpstream"] == upstream.as_str(),
        "codex",
    )?;
    let mut cmd = Command::new(&bin);
    for o in overrides(proxy.port, &args.env_key, &me) {
        cmd.arg("-c").arg(o);
    }
    let status = cmd
        .args(&args.args)
        .status()
        .map_err(|e| CliError::Data(format!("codex: starting {}: {e}", bin.display())));
    proxy.stop();
    Ok(status?.code().unwrap_or(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_overrides_are_toml_that_names_the_proxy_and_the_mcp_server() {
        let o = overrides(
            9000,
            "OPENAI_API_KEY",
            std::path::Path::new("/opt/a \"b\"/condense"),
        );
        let doc = o.join("\n");
        assert_eq!(o[0], r#"model_provider="condense""#);
        assert!(doc.contains(r#"model_providers.condense.base_url="http://127.0.0.1:9000/v1""#));
        assert!(doc.contains(r#"mcp_servers.condense.command="/opt/a \"b\"/condense""#));
        assert!(doc.contains(r#"mcp_servers.condense.args=["mcp"]"#));
    }
}

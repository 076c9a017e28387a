//! `condense proxy`: the local API proxy for agents that take a base URL
//! (Claude Code's `ANTHROPIC_BASE_URL`); see docs/proxy.md.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use clap::Args;
use condense_host_proxy::server::{
    DEFAULT_CHATGPT_UPSTREAM, DEFAULT_OPENAI_UPSTREAM, DEFAULT_UPSTREAM,
};
use condense_host_proxy::view::MCP_QUERY_TOOL;
use condense_host_proxy::{ProxyConfig, Timeouts};
use serde_json::Value;

use crate::CliError;

/// What `condense proxy` and `condense claude` share: where requests go,
/// the settings, the logs.
#[derive(Debug, Args)]
pub struct ProxyOptions {
    /// Where Anthropic API requests go: the provider's API base URL.
    #[arg(long, default_value = DEFAULT_UPSTREAM)]
    pub upstream: String,
    /// Where OpenAI API requests go (Responses, Chat Completions): the
    /// base URL without `/v1`.
    #[arg(long, value_name = "URL", default_value = DEFAULT_OPENAI_UPSTREAM)]
    pub openai_upstream: String,
    /// Where Codex signed in with ChatGPT goes (`/backend-api/…` calls):
    /// the ChatGPT backend's origin.
    #[arg(long, value_name = "URL", default_value = DEFAULT_CHATGPT_UPSTREAM)]
    pub chatgpt_upstream: String,
    /// The settings file (`contextPrune` keys); default
    /// `$XDG_CONFIG_HOME/condense/settings.json`.
    #[arg(long, value_name = "FILE")]
    pub settings: Option<PathBuf>,
    /// Where the conversations' logs go; default
    /// `$XDG_DATA_HOME/condense/proxy`.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

impl ProxyOptions {
    /// The proxy's configuration (the settings read, the log directory
    /// resolved), its notices going to `proxy.log` in the log directory
    /// when `log_file` (an agent's terminal UI owns standard error), else
    /// to standard error.
    pub fn config(&self, log_file: bool) -> Result<ProxyConfig, CliError> {
        let dir = self.dir.clone().unwrap_or_else(default_dir);
        Ok(ProxyConfig {
            upstream: self.upstream.trim_end_matches('/').to_owned(),
            openai_upstream: self
                .openai_upstream
                .trim_end_matches('/')
                .trim_end_matches("/v1")
                .to_owned(),
            chatgpt_upstream: self.chatgpt_upstream.trim_end_matches('/').to_owned(),
            settings: read_settings(self.settings.as_ref())?,
            query_tool: MCP_QUERY_TOOL.to_owned(),
            log: log_file.then(|| dir.join("proxy.log")),
            dir,
            timeouts: Timeouts::default(),
        })
    }
}

/// `condense proxy` arguments.
#[derive(Debug, Args)]
pub struct ProxyArgs {
    /// The port to listen on.
    #[arg(long, default_value_t = 8787)]
    port: u16,
    /// The address to listen on. Anything but a loopback address exposes
    /// the proxy (and the credentials clients send through it) to the
    /// network: it is refused unless `--allow-remote` is given too.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    host: IpAddr,
    /// Listen on a non-loopback `--host`.
    #[arg(long)]
    allow_remote: bool,
    #[command(flatten)]
    options: ProxyOptions,
}

fn xdg(var: &str, fallback: &str) -> PathBuf {
    match std::env::var_os(var).filter(|v| !v.is_empty()) {
        Some(v) => PathBuf::from(v),
        None => std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default()
            .join(fallback),
    }
}

/// The proxy's default log directory.
pub fn default_dir() -> PathBuf {
    xdg("XDG_DATA_HOME", ".local/share").join("condense/proxy")
}

/// The proxy's default settings file.
pub fn default_settings() -> PathBuf {
    xdg("XDG_CONFIG_HOME", ".config").join("condense/settings.json")
}

/// The settings with condense on unless they say `enabled: false`: whoever
/// runs the proxy asked for condense (pi and OpenCode keep it off until
/// `/pruner on` or the setting).
fn enabled_unless_off(mut value: Value) -> Value {
    if !value.is_object() {
        value = serde_json::json!({});
    }
    let block = &mut value["contextPrune"];
    if !block.is_object() {
        *block = serde_json::json!({});
    }
    if block.get("enabled").is_none() {
        block["enabled"] = Value::Bool(true);
    }
    value
}

/// The settings file's value: a missing default file is the defaults, a
/// file given that cannot be read is an error, bad keys are warned of.
pub fn read_settings(path: Option<&PathBuf>) -> Result<Value, CliError> {
    read_settings_file(path).map(enabled_unless_off)
}

fn read_settings_file(path: Option<&PathBuf>) -> Result<Value, CliError> {
    let file = path.cloned().unwrap_or_else(default_settings);
    let bytes = match condense_store::session::read_regular_file(&file) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && path.is_none() => {
            return Ok(Value::Null);
        }
        Err(e) => return Err(CliError::Data(format!("{}: {e}", file.display()))),
    };
    let value = std::str::from_utf8(&bytes)
        .map_err(|e| e.to_string())
        .and_then(|t| condense_core::parse_json_lossy(t).map_err(|e| e.to_string()))
        .map_err(|e| CliError::Data(format!("{}: malformed settings: {e}", file.display())))?;
    let (_, warnings) = condense_core::Config::from_settings_file_value(&value);
    for w in warnings {
        eprintln!("condense: warning: {w}");
    }
    Ok(value)
}

/// Runs the proxy until it is stopped.
pub fn run(args: &ProxyArgs) -> Result<(), CliError> {
    if !args.host.is_loopback() {
        if !args.allow_remote {
            return Err(CliError::Usage(format!(
                "proxy: {} is not a loopback address; the proxy forwards the credentials clients send it, so it listens elsewhere only with --allow-remote",
                args.host
            )));
        }
        eprintln!(
            "condense: warning: listening on {}: anyone who reaches it can use the credentials sent through it",
            args.host
        );
    }
    let config = args.options.config(false)?;
    let dir = config.dir.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Data(format!("proxy: starting the runtime: {e}")))?;
    let addr = SocketAddr::new(args.host, args.port);
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| CliError::Data(format!("proxy: listening on {addr}: {e}")))?;
        let local = listener.local_addr().unwrap_or(addr);
        eprintln!(
            "condense proxy: listening on http://{local}, forwarding to {}, logs in {}",
            config.upstream,
            dir.display()
        );
        println!("http://{local}");
        tokio::select! {
            served = condense_host_proxy::serve(listener, config) => {
                served.map_err(|e| CliError::Data(format!("proxy: {e}")))
            }
            () = stop_requested() => {
                eprintln!("condense proxy: stopping");
                Ok(())
            }
        }
    })
    // The runtime drops here with every open conversation, each writing
    // what it has not yet saved (its miss counts).
}

/// Resolves once Ctrl-C or `SIGTERM` has come (looked for every 100 ms);
/// never where neither can be listened for (the proxy then runs until
/// killed). A flag the signal sets, not tokio's signal driver, which would
/// hold a socket pair in every runtime of this binary (the sidecar's too).
async fn stop_requested() {
    #[cfg(unix)]
    {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;

        let stop = Arc::new(AtomicBool::new(false));
        let mut listening = false;
        for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            listening |= signal_hook::flag::register(signal, stop.clone()).is_ok();
        }
        if listening {
            while !stop.load(Ordering::Relaxed) {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            return;
        }
    }
    std::future::pending::<()>().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_proxy_is_on_unless_the_settings_say_off() {
        let on = |v: Value| enabled_unless_off(v)["contextPrune"]["enabled"].clone();
        assert_eq!(on(Value::Null), Value::Bool(true));
        assert_eq!(
            on(serde_json::json!({"contextPrune": {"summarizerModel": "x"}})),
            Value::Bool(true)
        );
        assert_eq!(
            on(serde_json::json!({"contextPrune": {"enabled": false}})),
            Value::Bool(false)
        );
        assert_eq!(on(serde_json::json!([1])), Value::Bool(true));
    }
}

//! `condense codex [ARGS…]`: OpenAI's Codex CLI through condense in one
//! command. The proxy is reused or started as for `condense claude`; Codex
//! runs with `-c` overrides that keep the user's own `config.toml` and add
//! a model provider pointed at the proxy (the Responses API) and `condense
//! mcp` as an MCP server.
//!
//! The provider authenticates as Codex would without condense: with the
//! key in `OPENAI_API_KEY` when it is set, else with Codex's own login
//! (`requires_openai_auth`). A ChatGPT sign-in sends its calls to the
//! ChatGPT backend, so the provider's base URL is then the proxy's
//! `/backend-api/codex`, which forwards there.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

use clap::Args;

use condense_host_proxy::server;

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

/// How Codex authenticates its calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// An API key in this environment variable.
    EnvKey(String),
    /// Codex's own login, an API key it stored.
    StoredKey,
    /// Codex's own login, a ChatGPT sign-in (its calls go to the ChatGPT
    /// backend).
    ChatGpt,
}

/// How Codex authenticates: the key in `env_key` when that variable is
/// set, else what `auth.json` in `codex_home` holds.
pub fn auth(env_key: &str, codex_home: Option<&std::path::Path>) -> Auth {
    if std::env::var_os(env_key).is_some_and(|v| !v.is_empty()) {
        return Auth::EnvKey(env_key.to_owned());
    }
    let login = codex_home
        .and_then(|home| std::fs::read_to_string(home.join("auth.json")).ok())
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok());
    match login {
        Some(l) if l.get("tokens").is_some_and(|t| !t.is_null()) => Auth::ChatGpt,
        Some(_) => Auth::StoredKey,
        None => Auth::EnvKey(env_key.to_owned()),
    }
}

/// `$CODEX_HOME`, else `~/.codex`.
fn codex_home() -> Option<PathBuf> {
    std::env::var_os("CODEX_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".codex")))
}

/// The `-c key=value` overrides that send Codex through the proxy on
/// `port`, authenticated by `auth`, and register `condense mcp` (`me`).
pub fn overrides(port: u16, auth: &Auth, me: &std::path::Path) -> Vec<String> {
    let p = format!("model_providers.{PROVIDER}");
    let path = match auth {
        Auth::ChatGpt => server::CHATGPT_CODEX_BASE,
        Auth::EnvKey(_) | Auth::StoredKey => "/v1",
    };
    let key = match auth {
        Auth::EnvKey(var) => format!("{p}.env_key={}", toml_string(var)),
        Auth::StoredKey | Auth::ChatGpt => format!("{p}.requires_openai_auth=true"),
    };
    vec![
        format!("model_provider={}", toml_string(PROVIDER)),
        format!("{p}.name={}", toml_string("condense proxy")),
        format!(
            "{p}.base_url={}",
            toml_string(&format!("http://127.0.0.1:{port}{path}"))
        ),
        key,
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
    let chatgpt = args
        .options
        .chatgpt_upstream
        .trim_end_matches('/')
        .to_owned();
    let auth = auth(&args.env_key, codex_home().as_deref());
    if auth == Auth::ChatGpt {
        eprintln!(
            "condense codex: signed in with ChatGPT: calls go to {chatgpt} through the proxy, \
             and summaries are extractive (the sign-in is for ChatGPT alone)"
        );
    }
    let proxy = launch::RunProxy::reuse_or_start(
        args.port,
        &args.options,
        |health| {
            health["openaiUpstream"] == upstream.as_str()
                && health["chatgptUpstream"] == chatgpt.as_str()
        },
        "codex",
    )?;
    let mut cmd = Command::new(&bin);
    for o in overrides(proxy.port, &auth, &me) {
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
            &Auth::EnvKey("OPENAI_API_KEY".into()),
            std::path::Path::new("/opt/a \"b\"/condense"),
        );
        let doc = o.join("\n");
        assert_eq!(o[0], r#"model_provider="condense""#);
        assert!(doc.contains(r#"model_providers.condense.base_url="http://127.0.0.1:9000/v1""#));
        assert!(doc.contains(r#"model_providers.condense.env_key="OPENAI_API_KEY""#));
        assert!(doc.contains(r#"mcp_servers.condense.command="/opt/a \"b\"/condense""#));
        assert!(doc.contains(r#"mcp_servers.condense.args=["mcp"]"#));
    }

    #[test]
    fn codexs_own_login_is_used_where_no_key_is_set() {
        let home = tempfile::tempdir().unwrap();
        let unset = "CONDENSE_TEST_UNSET_KEY";
        assert_eq!(auth(unset, Some(home.path())), Auth::EnvKey(unset.into()));
        std::fs::write(
            home.path().join("auth.json"),
            r#"{"OPENAI_API_KEY":"sk-x","tokens":null}"#,
        )
        .unwrap();
        assert_eq!(auth(unset, Some(home.path())), Auth::StoredKey);
        std::fs::write(
            home.path().join("auth.json"),
            r#"{"OPENAI_API_KEY":null,"tokens":{"access_token":"t"}}"#,
        )
        .unwrap();
        assert_eq!(auth(unset, Some(home.path())), Auth::ChatGpt);
        let doc = overrides(9000, &Auth::ChatGpt, std::path::Path::new("condense")).join("\n");
        assert!(doc.contains(
            r#"model_providers.condense.base_url="http://127.0.0.1:9000/backend-api/codex""#
        ));
        assert!(doc.contains("model_providers.condense.requires_openai_auth=true"));
        assert!(!doc.contains("env_key"));
        // A key in the environment wins over the login, as in Codex.
        assert_eq!(auth("PATH", Some(home.path())), Auth::EnvKey("PATH".into()));
    }
}

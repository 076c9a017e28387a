//! Finding a session, its settings, and rebuilding what condense knows of it.

use std::path::PathBuf;

use condense_core::Branch;
use condense_core::Config;
use condense_core::Message;
use condense_core::Protection;
use condense_core::SessionEconomy;

use crate::{CliError, SessionArg};

/// A session read from disk with its condense state rebuilt.
pub struct Loaded {
    /// The session file.
    pub path: PathBuf,
    /// The session's spill blob directory.
    pub blob_dir: PathBuf,
    /// The branch's messages as pi hands them to `context`.
    pub messages: Vec<Message>,
    /// The branch's assistant messages before them (what a compaction
    /// left out): the first of `messages` is turn `turns_before`.
    pub turns_before: i64,
    /// The pruning state folded from the branch's entries.
    pub state: Branch,
    /// The normalized config.
    pub config: Config,
    /// Its protection predicate.
    pub protection: Protection,
    /// The branch's recorded usage and switches.
    pub economy: SessionEconomy,
}

/// `$PI_CODING_AGENT_DIR`, else `~/.pi/agent`.
pub fn agent_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("PI_CODING_AGENT_DIR") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    home.join(".pi").join("agent")
}

/// Resolves a session argument to a file.
pub fn resolve(arg: &SessionArg) -> Result<PathBuf, CliError> {
    let sessions = agent_dir().join("sessions");
    if arg.latest {
        return crate::files::session_files(&sessions)
            .into_iter()
            .filter_map(|p| {
                let meta = std::fs::metadata(&p).ok().filter(|m| m.is_file())?;
                Some((meta.modified().ok()?, p))
            })
            .max()
            .map(|(_, p)| p)
            .ok_or_else(|| CliError::Data(format!("no sessions under {}", sessions.display())));
    }
    let name = arg
        .session
        .as_deref()
        .ok_or_else(|| CliError::Usage("name a session or pass --latest".into()))?;
    let as_path = PathBuf::from(name);
    if let Ok(meta) = std::fs::metadata(&as_path) {
        // A FIFO would block the read and a device never end it.
        if !meta.is_file() {
            return Err(CliError::Data(format!(
                "{name}: not a regular file; refusing to read it"
            )));
        }
        return Ok(as_path);
    }
    let matches: Vec<PathBuf> = crate::files::session_files(&sessions)
        .into_iter()
        .filter(|p| {
            p.file_stem()
                .and_then(|s| s.to_str())
                .is_some_and(|s| s == name || s.ends_with(&format!("_{name}")))
        })
        .collect();
    match matches.len() {
        1 => Ok(matches.into_iter().next().expect("one match")),
        0 => Err(CliError::Data(format!(
            "{name}: no such session file or session id"
        ))),
        n => Err(CliError::Data(format!(
            "{name}: {n} sessions match; pass a path"
        ))),
    }
}

/// Reads `contextPrune` from settings.json (missing file → defaults).
pub fn load_config(arg: &SessionArg) -> Result<Config, CliError> {
    let path = arg
        .settings
        .clone()
        .unwrap_or_else(|| agent_dir().join("settings.json"));
    let bytes = match condense_store::session::read_regular_file(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && arg.settings.is_none() => {
            return Ok(Config::default())
        }
        Err(e) => return Err(CliError::Data(format!("{}: {e}", path.display()))),
    };
    // Read as pi's `JSON.parse` reads it: a lone surrogate escape is U+FFFD.
    let value = std::str::from_utf8(&bytes)
        .map_err(|e| e.to_string())
        .and_then(|text| condense_core::parse_json_lossy(text).map_err(|e| e.to_string()))
        .map_err(|e| CliError::Data(format!("{}: malformed settings: {e}", path.display())))?;
    // pi reads such a file as settings with no `contextPrune` key, silently;
    // a user who passed or edited it is told why nothing they set applies.
    if !value.is_object() {
        eprintln!(
            "condense: warning: {}: the settings are not a JSON object; using the defaults",
            path.display()
        );
    }
    let (config, warnings) = Config::from_settings_file_value(&value);
    for w in warnings {
        eprintln!("condense: warning: {w}");
    }
    Ok(config)
}

/// Compiles the config's protection rules, reporting each dropped or
/// never-matching `protectedPaths` pattern on stderr as a config warning.
pub fn protection(config: &Config) -> Protection {
    let (protection, warnings) = Protection::compile(config);
    for w in warnings {
        eprintln!("condense: warning: {w}");
    }
    protection
}

/// Loads a session: file, branch, messages, state, config.
pub fn load(arg: &SessionArg) -> Result<Loaded, CliError> {
    let config = load_config(arg)?;
    let path = resolve(arg)?;
    load_at(path, config)
}

/// Loads the session file at `path` with `config`.
pub fn load_at(path: PathBuf, config: Config) -> Result<Loaded, CliError> {
    let session = condense_store::session::Session::open(&path)
        .map_err(|e| CliError::Data(format!("{}: {e}", path.display())))?;
    Ok(rebuild(path, &session, config))
}

/// What condense knows of a session already read (`compact` reads it under
/// its lock): branch, messages, state, protection; problems on stderr.
pub fn rebuild(
    path: PathBuf,
    session: &condense_store::session::Session,
    config: Config,
) -> Loaded {
    for p in &session.problems {
        eprintln!("condense: {}: {p}", path.display());
    }
    let branch = session.branch(None);
    let context = condense_store::context::build_context(&branch);
    let (state, problems) = condense_store::replay::replay_branch(&branch);
    for p in problems {
        eprintln!(
            "condense: {}: skipped {} entry: {}",
            path.display(),
            p.custom_type,
            p.message
        );
    }
    let protection = protection(&config);
    let economy = condense_store::economy::session_economy(&branch);
    let refused = condense_store::economy::refused_usage(&branch);
    if let Some(p) = condense_store::economy::refused_usage_problem(&refused) {
        eprintln!("condense: {}: {p}", path.display());
    }
    let session_id = session
        .header
        .as_ref()
        .map(|h| h.id.clone())
        .unwrap_or_default();
    Loaded {
        blob_dir: condense_store::spill::blob_dir(&path, &session_id),
        path,
        messages: context.messages,
        turns_before: context.turns_before,
        state,
        config,
        protection,
        economy,
    }
}

//! `/pruner`: every subcommand of the pi command, answered as effects.
//!
//! The shim forwards the text after `/pruner` as a `command` request; [`run`]
//! answers with the effects to carry out (docs/protocol.md). Interactive
//! steps are effects too: a `select` or `input` effect names the command the
//! shim sends back with the user's answer, so every dialog is a chain of
//! ordinary `command` requests. A long command (`now`) shows its progress
//! with `ui.effects` notifications while it runs ([`CommandHost::ui`]).
//!
//! The texts follow pi-condense 2.9.1's `/pruner`. Deliberate differences:
//! - `prune-on <mode>` validates the mode (pi-condense saved any string,
//!   which `normalize` then silently turned back into the default on the
//!   next load) and confirms the change;
//! - numeric arguments must be whole non-negative integers (`12abc` is
//!   refused, where `parseInt` read 12);
//! - `settings` is a chain of pi dialogs (a list of every setting with its
//!   current value, then a list of values or a text input) instead of a
//!   custom overlay, and `tree` is a text rendering.
//!
//! Dialog plumbing (sent by the shim, also usable by hand):
//! `settings edit <key>` (the value list of one setting),
//! `settings input <key>` (a text input for it),
//! `settings pick <key> [value]` (set it, then show the settings list again),
//! `settings set <key> [value]` (set it), `protected-tools --input [list]`
//! and `protected-paths --input [list]` (an empty answer clears the list).

mod compact;
mod progress;
mod settings;
mod status;
mod tree;

#[cfg(test)]
mod tests;

use std::time::{SystemTime, UNIX_EPOCH};

use crate::flush::Cancelled;
use crate::protocol::CommandInfo;
use crate::session::{EngineFlush, EngineLock};
use crate::{run_flush, Delivery, Effect, Effects, Engine, Flush, FlushDone};
use condense_core::{Config, Notice};
use condense_summarizer::{CancelToken, ProgressEvent, RunOptions, Summarizer};

#[cfg(test)]
use status::format_cost;
use status::{stats_text, status_text};
pub use tree::tree_text;

/// What the commands need from the sidecar: the session's engine (never
/// held across an `.await`), and the rest below.
pub trait CommandHost: EngineLock + Send + Sync {
    /// A summarizer for the current config (LLM calls go through the shim).
    fn summarizer(&self) -> Summarizer;
    /// Effects to carry out now, while the command is still running (the
    /// `ui.effects` notification): widget and footer updates only.
    fn ui(&self, effects: Effects);
}

/// Facts about the user's side of the command.
#[derive(Debug, Clone, Copy, Default)]
pub struct CommandEnv {
    /// Minutes to add to UTC for the user's local time (`tree` timestamps).
    pub utc_offset_minutes: i64,
}

/// Every subcommand with a one-line description: the bare `/pruner` picker,
/// and the shim's completions (`hello` lists them, [`listed`]).
pub const SUBCOMMANDS: [(&str, &str); 18] = [
    ("settings", "change any setting"),
    ("on", "turn context pruning on"),
    ("off", "turn context pruning off"),
    ("status", "settings, summarizer usage and context metrics"),
    ("model", "show or set the summarizer model"),
    ("thinking", "show or set the summarizer's thinking level"),
    (
        "prune-on",
        "show or set when pending tool output is summarized",
    ),
    (
        "batching",
        "show or set per-turn or per-agent-message batches",
    ),
    ("stats", "summarizer calls, tokens and cost"),
    (
        "tree",
        "list the summaries and the tool calls they replaced",
    ),
    ("now", "summarize pending tool output now"),
    ("compact", "compress every eligible chain now"),
    ("protected-tools", "show or set the tools never pruned"),
    ("protected-paths", "show or set the path globs never pruned"),
    (
        "min-batch-chars",
        "show or set the smallest batch worth summarizing",
    ),
    (
        "recovery-grace",
        "show or set how long recovered output stays verbatim",
    ),
    ("dedup", "show or toggle content-hash deduplication"),
    ("help", "how to use /pruner"),
];

/// [`SUBCOMMANDS`] as `hello` lists them: the shim completes `/pruner <sub>`
/// from this, so the list exists once.
pub(crate) fn listed() -> Vec<CommandInfo> {
    SUBCOMMANDS
        .iter()
        .map(|(name, description)| CommandInfo {
            name: (*name).to_owned(),
            description: (*description).to_owned(),
        })
        .collect()
}

const HELP: &str = "pruner — condense keeps the context lean by replacing old tool output with short summaries.

Commands:
  /pruner                          pick a subcommand from a list
  /pruner settings                 change any setting (a list, then its values)
  /pruner on | off                 turn pruning on or off
  /pruner status                   settings, summarizer usage and context metrics
  /pruner stats                    summarizer calls, tokens and cost so far
  /pruner model [id[:thinking]]    show or set the summarizer model (\"default\" = the session's model,
                                   else provider/id, e.g. anthropic/claude-haiku-4-5:low)
  /pruner thinking [level]         show or set its thinking: default, off, minimal, low, medium, high, xhigh
  /pruner prune-on [mode]          when pending output is summarized:
                                     agent-message  when the agent answers with text only (default)
                                     on-demand      only on /pruner now or a budget trigger
  /pruner batching [mode]          turn (one summary per tool turn, default) or agent-message
                                   (one summary per user request)
  /pruner now                      summarize everything pending now, with progress above the editor
  /pruner compact                  compress every closed chain now (ignores the rolling window and
                                   chainCompression.enabled)
  /pruner tree                     the summaries and the tool calls each one replaced
  /pruner protected-tools [names]  tools whose output is never pruned (comma or space separated;
                                   none or clear empties the list; no argument asks)
  /pruner protected-paths [globs]  the same for file paths read by tools (default **/skills/**/*.md)
  /pruner min-batch-chars [n]      batches with fewer raw chars are not sent to the summarizer (0: all are)
  /pruner recovery-grace [n]       user turns a context_tree_query result stays verbatim (0: none)
  /pruner dedup [on|off|status]    reuse an earlier summary for a byte-identical output
  /pruner help                     this text

Pruned outputs stay recoverable: stubs and summaries carry refs like `t12` that the model passes to
context_tree_query. Settings live under \"contextPrune\" in <agent-dir>/settings.json
(<agent-dir> is $PI_CODING_AGENT_DIR or ~/.pi/agent); every change here is saved there.";

// ---- shared helpers ---------------------------------------------------------------

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// `s` when `n` is not 1.
fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The first word and the rest (trimmed).
fn split_word(s: &str) -> (&str, &str) {
    let s = s.trim();
    match s.split_once(char::is_whitespace) {
        Some((a, b)) => (a, b.trim()),
        None => (s, ""),
    }
}

/// Replaces the config and answers with `confirmation` between the
/// `saveSettings` effect and the footer.
fn change(e: &mut Engine, config: Config, confirmation: Effect) -> Effects {
    let save = e.set_config(config);
    vec![save, confirmation, e.footer()]
}

/// A `select` effect: the shim shows `options` and sends `command` with
/// `values[i]`, prefixed by `then`.
fn select(title: &str, options: Vec<String>, values: Vec<String>, then: &str) -> Effect {
    Effect::Select {
        title: title.to_owned(),
        options,
        values,
        then: then.to_owned(),
    }
}

/// An `input` effect: the shim asks for a line of text and sends `command`
/// with `then` + " " + the text (also when it is empty).
fn input(title: &str, placeholder: &str, then: &str) -> Effect {
    Effect::Input {
        title: title.to_owned(),
        placeholder: placeholder.to_owned(),
        then: then.to_owned(),
    }
}

/// Runs a command's flush (`now`, `compact`) through the engine's flush
/// driver: sequential, entries delivered at runtime, as pi-condense's
/// commands do.
async fn run_command_flush(
    host: &dyn CommandHost,
    flush: Flush,
    progress: &mut (dyn FnMut(ProgressEvent) + Send),
) -> Result<(Vec<Notice>, FlushDone), Cancelled> {
    let steps = EngineFlush {
        lock: host,
        delivery: Delivery::Runtime,
    };
    run_flush(
        &steps,
        flush,
        &host.summarizer(),
        RunOptions::sequential(),
        &CancelToken::new(),
        progress,
        &now_ms,
    )
    .await
}

/// The notices a flush returned, as effects.
fn notice_effects<'a>(notices: impl IntoIterator<Item = &'a Notice>) -> Effects {
    notices
        .into_iter()
        .map(|n| Effect::notify(n.level, n.text.clone()))
        .collect()
}

// ---- entry point ------------------------------------------------------------------

/// Runs `/pruner <args>` and returns the effects of its answer.
pub async fn run(host: &dyn CommandHost, args: &str, env: CommandEnv) -> Effects {
    let (sub, rest) = split_word(args);
    match sub {
        "" => vec![picker()],
        "now" => progress::now(host).await,
        "compact" => compact::compact(host).await,
        _ => {
            let mut e = host.engine();
            run_sync(&mut e, sub, rest, env)
        }
    }
}

/// The subcommands that need no LLM call.
fn run_sync(e: &mut Engine, sub: &str, rest: &str, env: CommandEnv) -> Effects {
    match sub {
        "settings" => settings::dialog(e, rest),
        "on" | "off" => {
            let on = sub == "on";
            let mut config = e.config().clone();
            config.enabled = on;
            let text = if on {
                "Context pruning enabled."
            } else {
                "Context pruning disabled."
            };
            change(e, config, Effect::info(text))
        }
        "status" => vec![Effect::info(status_text(e))],
        "stats" => vec![Effect::info(stats_text(e))],
        "tree" => vec![Effect::info(tree_text(e, env))],
        "help" => vec![Effect::info(HELP)],
        other => settings::subcommand(e, other, rest).unwrap_or_else(|| {
            vec![Effect::info(format!(
                "Unknown subcommand: \"{other}\". Run /pruner help for usage."
            ))]
        }),
    }
}

fn picker() -> Effect {
    let width = SUBCOMMANDS.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    select(
        "pruner — choose a subcommand",
        SUBCOMMANDS
            .iter()
            .map(|(n, d)| format!("{n:width$} — {d}"))
            .collect(),
        SUBCOMMANDS.iter().map(|(n, _)| (*n).to_owned()).collect(),
        "",
    )
}

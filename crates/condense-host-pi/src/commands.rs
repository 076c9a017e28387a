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

use std::time::{SystemTime, UNIX_EPOCH};

use condense_core::compute_context_metrics;
use condense_core::OccurrenceKey;
use condense_core::TriggerKind;
use condense_core::{format_count, BatchingMode, Config, PruneOn, ThinkingLevel};
use condense_core::{js_len, js_prefix};
use condense_core::{Frontier, FrontierOutcome};
use condense_core::{NoticeLevel, Slot};
use condense_engine::session::{EngineFlush, EngineLock};
use condense_engine::{run_flush, Delivery, Effect, Effects, Engine, Placement};
use condense_summarizer::{CancelToken, ProgressEvent, RunOptions, Summarizer};
use serde_json::Value;

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

/// The footer key pi-condense's progress widget uses.
pub const PROGRESS_WIDGET: &str = "context-prune-progress";

const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
const SPINNER_MS: i64 = 120;
/// Streaming updates closer together than this are not sent.
const STREAM_UPDATE_MS: i64 = 100;
/// `tree` lists at most this many summaries (the newest).
const TREE_MAX_SUMMARIES: usize = 100;
/// `tree` cuts each argument value's JSON to this many UTF-16 units.
const TREE_ARG_UNITS: usize = 80;

/// Every subcommand with a one-line description (the bare `/pruner` picker).
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

// ---- small helpers ----------------------------------------------------------------

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn info(text: impl Into<String>) -> Effect {
    Effect::info(text)
}

fn warn(text: impl Into<String>) -> Effect {
    Effect::warning(text)
}

/// `s` when `n` is not 1.
fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// `$0.003`, or `<$0.001` for a positive amount below a tenth of a cent.
pub fn format_cost(cost: f64) -> String {
    if cost > 0.0 && cost < 0.001 {
        "<$0.001".to_owned()
    } else {
        format!("${cost:.3}")
    }
}

/// `20s`, `12.5s`, or `disabled` for 0.
fn seconds(ms: u64) -> String {
    if ms == 0 {
        "disabled".to_owned()
    } else {
        format!("{}s", ms as f64 / 1000.0)
    }
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

/// `(none)` or the items joined by `, `.
fn list_display(list: &[String]) -> String {
    if list.is_empty() {
        "(none)".to_owned()
    } else {
        list.join(", ")
    }
}

/// A list argument: split on commas and whitespace; `none`, `clear` or
/// nothing at all is the empty list.
fn parse_list(text: &str) -> Vec<String> {
    let t = text.trim();
    if t.is_empty() || t.eq_ignore_ascii_case("none") || t.eq_ignore_ascii_case("clear") {
        return Vec::new();
    }
    t.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// A whole non-negative integer.
fn parse_count(text: &str) -> Option<u64> {
    let t = text.trim();
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse().ok()
}

fn thinking_label(level: &str) -> String {
    ThinkingLevel::parse(level).map_or_else(|| level.to_owned(), |l| l.label().to_owned())
}

fn prune_on_label(m: PruneOn) -> &'static str {
    match m {
        PruneOn::AgentMessage => "On agent message",
        PruneOn::OnDemand => "On demand",
    }
}

fn batching_label(m: BatchingMode) -> &'static str {
    match m {
        BatchingMode::Turn => "Per turn",
        BatchingMode::AgentMessage => "Per agent message",
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

/// Replaces the config: the `saveSettings` effect, then the footer.
fn change(e: &mut Engine, f: impl FnOnce(&mut Config)) -> Effects {
    let mut c = e.config().clone();
    f(&mut c);
    let save = e.set_config(c);
    vec![save, e.footer()]
}

/// A `select` effect: the shim shows `options` and sends `command` with
/// `values[i]` (the option itself when `values` is absent), prefixed by `then`.
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

// ---- entry point ------------------------------------------------------------------

/// Runs `/pruner <args>` and returns the effects of its answer.
pub async fn run(host: &dyn CommandHost, args: &str, env: CommandEnv) -> Effects {
    let (sub, rest) = split_word(args);
    match sub {
        "" => vec![picker()],
        "now" => now(host).await,
        "compact" => compact(host).await,
        _ => {
            let mut e = host.engine();
            run_sync(&mut e, sub, rest, env)
        }
    }
}

/// The subcommands that need no LLM call.
fn run_sync(e: &mut Engine, sub: &str, rest: &str, env: CommandEnv) -> Effects {
    match sub {
        "settings" => settings(e, rest),
        "on" | "off" => {
            let on = sub == "on";
            let mut out = change(e, |c| c.enabled = on);
            out.insert(
                1,
                info(if on {
                    "Context pruning enabled."
                } else {
                    "Context pruning disabled."
                }),
            );
            out
        }
        "status" => vec![info(status_text(e))],
        "stats" => vec![info(stats_text(e))],
        "model" => model(e, rest),
        "thinking" => thinking(e, rest),
        "prune-on" => prune_on(e, rest),
        "batching" => batching(e, rest),
        "tree" => vec![info(tree_text(e, env))],
        "protected-tools" | "protected-paths" => protected(e, sub == "protected-tools", rest),
        "min-batch-chars" => min_batch_chars(e, rest),
        "recovery-grace" => recovery_grace(e, rest),
        "dedup" => dedup(e, rest),
        "help" => vec![info(HELP)],
        other => vec![info(format!(
            "Unknown subcommand: \"{other}\". Run /pruner help for usage."
        ))],
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

// ---- status, stats ----------------------------------------------------------------

/// `/pruner status`.
pub fn status_text(e: &Engine) -> String {
    let c = e.config();
    let mut t = format!(
        "pruner status:\n  enabled:  {}\n  model:    {}\n  thinking: {} ({})\n  idle to:  {}\n  max to:   {}\n  trigger:  {}\n  batching: {} ({})\n  dedup:    {}\n  status:   {}",
        c.enabled,
        c.summarizer_model,
        thinking_label(&c.summarizer_thinking),
        c.summarizer_thinking,
        seconds(c.summarizer_idle_timeout_ms),
        seconds(c.summarizer_max_timeout_ms),
        prune_on_label(c.prune_on),
        batching_label(c.batching_mode),
        c.batching_mode.name(),
        on_off(c.dedup_by_content_hash),
        on_off(c.show_prune_status_line),
    );
    let s = e.state().stats();
    if s.call_count > 0 {
        t.push_str(&format!(
            "\n  --- summarizer ---\n  calls:       {}\n  input:       {} tokens\n  output:      {} tokens\n  cost:        {}",
            s.call_count,
            format_count(s.total_input_tokens),
            format_count(s.total_output_tokens),
            format_cost(s.total_cost)
        ));
    } else {
        t.push_str("\n  (no summarizer calls yet)");
    }
    // Measured now, not the cached snapshot: status is rare and should be exact.
    let m = compute_context_metrics(
        e.messages(),
        e.state().frontier(),
        e.state(),
        e.protection(),
    );
    t.push_str(&format!(
        "\n  --- context ---\n  thinking:     {} tokens (open segment)\n  chain share:  {}%\n  frontier gap: {} tokens",
        format_count(m.open_cycle_thinking_tokens),
        m.largest_chain_share_pct,
        format_count(m.frontier_gap_tokens)
    ));
    if e.is_rearmed() {
        t.push_str("\n  rearmed:      yes");
    }
    t
}

/// `/pruner stats`.
pub fn stats_text(e: &Engine) -> String {
    let s = e.state().stats();
    if s.call_count == 0 && s.chains_compressed == 0 {
        return "pruner stats: no summarizer calls yet.".to_owned();
    }
    let mut t = format!(
        "pruner stats:\n  calls:       {}\n  input:       {} tokens\n  output:      {} tokens\n  cost:        {}",
        s.call_count,
        format_count(s.total_input_tokens),
        format_count(s.total_output_tokens),
        format_cost(s.total_cost)
    );
    if s.chains_compressed > 0 {
        t.push_str(&format!(
            "\n  chains:      {} compressed",
            s.chains_compressed
        ));
    }
    t
}

// ---- model, thinking, prune-on, batching ------------------------------------------

fn thinking_levels() -> String {
    ThinkingLevel::ALL.map(ThinkingLevel::as_str).join(", ")
}

fn model(e: &mut Engine, arg: &str) -> Effects {
    let (arg, _) = split_word(arg);
    if arg.is_empty() {
        let c = e.config();
        return vec![info(format!(
            "Current summarizer model: {}\nCurrent summarizer thinking: {} ({})",
            c.summarizer_model,
            thinking_label(&c.summarizer_thinking),
            c.summarizer_thinking
        ))];
    }
    let (model, thinking) = match arg.rfind(':') {
        None => (arg, None),
        Some(i) => {
            let (m, suffix) = (&arg[..i], &arg[i + 1..]);
            if m.is_empty() || ThinkingLevel::parse(suffix).is_none() {
                return vec![warn(format!(
                    "Invalid model thinking suffix: {suffix}. Use one of: {}.",
                    thinking_levels()
                ))];
            }
            (m, Some(suffix))
        }
    };
    let mut out = change(e, |c| {
        c.summarizer_model = model.to_owned();
        if let Some(t) = thinking {
            c.summarizer_thinking = t.to_owned();
        }
    });
    let with = thinking.map_or(String::new(), |t| format!(" with thinking {t}"));
    out.insert(1, info(format!("Summarizer model set to: {model}{with}")));
    out
}

fn thinking(e: &mut Engine, arg: &str) -> Effects {
    let (arg, _) = split_word(arg);
    if arg.is_empty() {
        let t = &e.config().summarizer_thinking;
        return vec![info(format!(
            "Current summarizer thinking: {} ({t})",
            thinking_label(t)
        ))];
    }
    if ThinkingLevel::parse(arg).is_none() {
        return vec![warn(format!(
            "Invalid summarizer thinking level: {arg}. Use one of: {}.",
            thinking_levels()
        ))];
    }
    let mut out = change(e, |c| c.summarizer_thinking = arg.to_owned());
    out.insert(1, info(format!("Summarizer thinking set to: {arg}")));
    out
}

fn prune_on(e: &mut Engine, arg: &str) -> Effects {
    let (arg, _) = split_word(arg);
    if arg.is_empty() {
        let current = e.config().prune_on;
        return vec![
            info(format!(
                "Current prune trigger: {} ({})",
                prune_on_label(current),
                current.name()
            )),
            select(
                "pruner — choose when to trigger summarization",
                PruneOn::ALL
                    .iter()
                    .map(|m| format!("{} — {}", m.name(), prune_on_label(*m)))
                    .collect(),
                PruneOn::ALL.iter().map(|m| m.name().to_owned()).collect(),
                "prune-on",
            ),
        ];
    }
    // Validated: pi-condense saved any string here.
    let Some(mode) = PruneOn::from_name(arg) else {
        return vec![warn(format!(
            "Invalid prune trigger: {arg}. Use one of: {}.",
            PruneOn::ALL.map(PruneOn::name).join(", ")
        ))];
    };
    let mut out = change(e, |c| c.prune_on = mode);
    out.insert(
        1,
        info(format!("Prune trigger set to: {}", prune_on_label(mode))),
    );
    out
}

fn batching(e: &mut Engine, arg: &str) -> Effects {
    let (arg, _) = split_word(arg);
    if arg.is_empty() {
        let current = e.config().batching_mode;
        return vec![
            info(format!(
                "Current batching mode: {} ({})",
                batching_label(current),
                current.name()
            )),
            select(
                "pruner — choose batching granularity",
                BatchingMode::ALL
                    .iter()
                    .map(|m| format!("{} — {}", m.name(), batching_label(*m)))
                    .collect(),
                BatchingMode::ALL
                    .iter()
                    .map(|m| m.name().to_owned())
                    .collect(),
                "batching",
            ),
        ];
    }
    let Some(mode) = BatchingMode::from_name(arg) else {
        return vec![warn(format!(
            "Invalid batching mode: {arg}. Use one of: {}.",
            BatchingMode::ALL.map(BatchingMode::name).join(", ")
        ))];
    };
    let mut out = change(e, |c| c.batching_mode = mode);
    out.insert(
        1,
        info(format!("Batching mode set to: {}", batching_label(mode))),
    );
    out
}

// ---- protected lists, numbers, dedup ----------------------------------------------

fn protected(e: &mut Engine, tools: bool, arg: &str) -> Effects {
    let (noun, key) = if tools {
        ("Protected tools", "tools")
    } else {
        ("Protected paths", "paths")
    };
    let text = match arg.strip_prefix("--input") {
        Some(answer) => answer,
        None if arg.is_empty() => {
            let current = if tools {
                &e.config().protected_tools
            } else {
                &e.config().protected_paths
            };
            let what = if tools { "tool names" } else { "path globs" };
            return vec![
                info(format!("{noun}: {}", list_display(current))),
                input(
                    &format!("{noun} (comma-separated {what}; empty or 'none' to clear)"),
                    &current.join(", "),
                    &format!("protected-{key} --input"),
                ),
            ];
        }
        None => arg,
    };
    let list = parse_list(text);
    let shown = list_display(&list);
    let mut out = change(e, |c| {
        if tools {
            c.protected_tools = list;
        } else {
            c.protected_paths = list;
        }
    });
    out.insert(1, info(format!("{noun}: {shown}")));
    out
}

fn min_batch_chars(e: &mut Engine, arg: &str) -> Effects {
    let (arg, _) = split_word(arg);
    if arg.is_empty() {
        let cur = e.config().min_batch_chars;
        let state = if cur == 0 {
            "disabled".to_owned()
        } else {
            format!("{cur} chars")
        };
        return vec![info(format!("Current minBatchChars: {state}."))];
    }
    let Some(n) = parse_count(arg) else {
        return vec![warn(format!(
            "Invalid minBatchChars: \"{arg}\". Expected a non-negative integer (0 disables)."
        ))];
    };
    let mut out = change(e, |c| c.min_batch_chars = n);
    out.insert(
        1,
        info(if n == 0 {
            "minBatchChars set to 0 — pre-flush trivial-batch skipping disabled.".to_owned()
        } else {
            format!("minBatchChars set to {n}.")
        }),
    );
    out
}

fn recovery_grace(e: &mut Engine, arg: &str) -> Effects {
    let (arg, _) = split_word(arg);
    if arg.is_empty() {
        let cur = e.config().recovery_grace_turns;
        let state = if cur == 0 {
            "disabled".to_owned()
        } else {
            format!("{cur} user turn{}", plural(cur.into()))
        };
        return vec![info(format!("Current recoveryGraceTurns: {state}."))];
    }
    let Some(n) = parse_count(arg).and_then(|n| u32::try_from(n).ok()) else {
        return vec![warn(format!(
            "Invalid recoveryGraceTurns: \"{arg}\". Expected a non-negative integer (0 disables)."
        ))];
    };
    let mut out = change(e, |c| c.recovery_grace_turns = n);
    out.insert(
        1,
        info(if n == 0 {
            "recoveryGraceTurns set to 0 — recovered outputs are prunable again at once.".to_owned()
        } else {
            format!("recoveryGraceTurns set to {n}.")
        }),
    );
    out
}

fn dedup(e: &mut Engine, arg: &str) -> Effects {
    let (arg, _) = split_word(arg);
    let arg = arg.to_ascii_lowercase();
    if arg.is_empty() || arg == "status" {
        let on = e.config().dedup_by_content_hash;
        let what = if on {
            "A tool output identical to one already summarized (same tool, same text up to line endings and trailing spaces) reuses that summary: no summarizer call."
        } else {
            "Identical outputs are summarized again like any other."
        };
        return vec![info(format!(
            "Content-hash dedup is {}. {what}",
            if on { "ON" } else { "OFF" }
        ))];
    }
    let on = match arg.as_str() {
        "on" | "true" => true,
        "off" | "false" => false,
        _ => {
            return vec![warn(format!(
                "Invalid dedup value: \"{arg}\". Expected on, off, status, true, or false."
            ))]
        }
    };
    let mut out = change(e, |c| c.dedup_by_content_hash = on);
    out.insert(
        1,
        info(format!(
            "Content-hash dedup turned {}.",
            if on { "ON" } else { "OFF" }
        )),
    );
    out
}

// ---- settings dialog --------------------------------------------------------------

/// How a setting's value is chosen.
#[derive(Clone, Copy)]
enum Kind {
    Bool,
    /// Fixed values, with labels.
    Choice(&'static [(&'static str, &'static str)]),
    /// An integer: presets (value, label), any other value by input.
    Int(&'static [(u64, &'static str)]),
    /// An integer in milliseconds (shown in seconds).
    Millis(&'static [(u64, &'static str)]),
    /// A fraction in (0, 1] or off.
    Fraction(&'static [(&'static str, &'static str)]),
    /// Free text.
    Text,
    /// A list of strings.
    List,
}

struct Setting {
    key: &'static str,
    label: &'static str,
    kind: Kind,
}

const THINKING_CHOICES: &[(&str, &str)] = &ThinkingLevel::CHOICES;
const PRUNE_ON_CHOICES: &[(&str, &str)] = &[
    ("agent-message", "On agent message"),
    ("on-demand", "On demand"),
];
const BATCHING_CHOICES: &[(&str, &str)] =
    &[("turn", "Per turn"), ("agent-message", "Per agent message")];
const MIN_BATCH_PRESETS: &[(u64, &str)] = &[
    (0, "0 (disabled)"),
    (500, "500"),
    (1000, "1000 (default)"),
    (2000, "2000"),
    (5000, "5000"),
];
const GRACE_PRESETS: &[(u64, &str)] = &[
    (0, "0 (disabled)"),
    (1, "1"),
    (3, "3 (default)"),
    (5, "5"),
    (8, "8"),
];
const IDLE_PRESETS: &[(u64, &str)] = &[
    (0, "disabled"),
    (10_000, "10s"),
    (20_000, "20s (default)"),
    (45_000, "45s"),
    (90_000, "90s"),
];
const MAX_PRESETS: &[(u64, &str)] = &[
    (0, "disabled"),
    (120_000, "120s"),
    (180_000, "180s (default)"),
    (300_000, "300s"),
    (600_000, "600s"),
];
const BUDGET_PRESETS: &[(&str, &str)] = &[
    ("off", "Off (default)"),
    ("0.6", "60%"),
    ("0.7", "70%"),
    ("0.8", "80%"),
    ("0.9", "90%"),
];
const WINDOW_PRESETS: &[(u64, &str)] =
    &[(1, "1"), (2, "2"), (3, "3 (default)"), (5, "5"), (10, "10")];
const COOLDOWN_PRESETS: &[(u64, &str)] =
    &[(1, "1"), (2, "2 (default)"), (3, "3"), (5, "5"), (10, "10")];
const MIN_ARG_PRESETS: &[(u64, &str)] = &[
    (100, "100"),
    (500, "500 (default)"),
    (1000, "1000"),
    (5000, "5000"),
];
const KEEP_TURNS_PRESETS: &[(u64, &str)] = &[(4, "4"), (8, "8"), (16, "16 (default)"), (32, "32")];

const SETTINGS: &[Setting] = &[
    Setting {
        key: "enabled",
        label: "Enabled",
        kind: Kind::Bool,
    },
    Setting {
        key: "showPruneStatusLine",
        label: "Prune status line",
        kind: Kind::Bool,
    },
    Setting {
        key: "pruneOn",
        label: "Prune trigger",
        kind: Kind::Choice(PRUNE_ON_CHOICES),
    },
    Setting {
        key: "summarizerModel",
        label: "Summarizer model",
        kind: Kind::Text,
    },
    Setting {
        key: "summarizerThinking",
        label: "Summarizer thinking",
        kind: Kind::Choice(THINKING_CHOICES),
    },
    Setting {
        key: "batchingMode",
        label: "Batching mode",
        kind: Kind::Choice(BATCHING_CHOICES),
    },
    Setting {
        key: "quietOversizedSkips",
        label: "Quiet skip notifications",
        kind: Kind::Bool,
    },
    Setting {
        key: "minBatchChars",
        label: "Min batch chars",
        kind: Kind::Int(MIN_BATCH_PRESETS),
    },
    Setting {
        key: "recoveryGraceTurns",
        label: "Recovery grace (user turns)",
        kind: Kind::Int(GRACE_PRESETS),
    },
    Setting {
        key: "summarizerIdleTimeoutMs",
        label: "Summarizer idle timeout",
        kind: Kind::Millis(IDLE_PRESETS),
    },
    Setting {
        key: "summarizerMaxTimeoutMs",
        label: "Summarizer max timeout",
        kind: Kind::Millis(MAX_PRESETS),
    },
    Setting {
        key: "autoBudgetThreshold",
        label: "Auto-flush at context %",
        kind: Kind::Fraction(BUDGET_PRESETS),
    },
    Setting {
        key: "dedupByContentHash",
        label: "Dedup by content hash",
        kind: Kind::Bool,
    },
    Setting {
        key: "chainCompression.enabled",
        label: "Chain compression",
        kind: Kind::Bool,
    },
    Setting {
        key: "chainCompression.rollingWindow",
        label: "Chain window (K)",
        kind: Kind::Int(WINDOW_PRESETS),
    },
    Setting {
        key: "chainCompression.stripFinalAssistantThinking",
        label: "Strip final thinking",
        kind: Kind::Bool,
    },
    Setting {
        key: "chainCompression.fuseRangeSummary",
        label: "Fuse range summary",
        kind: Kind::Bool,
    },
    Setting {
        key: "purgeErrors.enabled",
        label: "Error purge",
        kind: Kind::Bool,
    },
    Setting {
        key: "purgeErrors.cooldownTurns",
        label: "Error purge cooldown (turns)",
        kind: Kind::Int(COOLDOWN_PRESETS),
    },
    Setting {
        key: "purgeErrors.minArgChars",
        label: "Error purge min arg chars",
        kind: Kind::Int(MIN_ARG_PRESETS),
    },
    Setting {
        key: "thinkingStrip.enabled",
        label: "Thinking strip",
        kind: Kind::Bool,
    },
    Setting {
        key: "thinkingStrip.keepLastTurns",
        label: "Thinking strip keeps (turns)",
        kind: Kind::Int(KEEP_TURNS_PRESETS),
    },
    Setting {
        key: "protectedTools",
        label: "Protected tools",
        kind: Kind::List,
    },
    Setting {
        key: "protectedPaths",
        label: "Protected paths",
        kind: Kind::List,
    },
];

fn setting(key: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.key.eq_ignore_ascii_case(key))
}

/// The saved JSON value of a dotted key.
fn current_value(config: &Config, key: &str) -> Value {
    let block = config.to_settings_value(&Value::Null);
    let mut v = &block;
    for part in key.split('.') {
        v = v.get(part).unwrap_or(&Value::Null);
    }
    v.clone()
}

/// A setting's value for people.
fn display(s: &Setting, v: &Value) -> String {
    match (s.kind, v) {
        (Kind::Choice(choices), Value::String(x)) => choices
            .iter()
            .find(|(val, _)| val == x)
            .map_or_else(|| x.clone(), |(_, l)| (*l).to_owned()),
        (Kind::Millis(_), Value::Number(n)) => seconds(n.as_u64().unwrap_or(0)),
        (Kind::Int(_), Value::Number(n)) if n.as_u64() == Some(0) => "0 (disabled)".to_owned(),
        (Kind::Fraction(_), Value::Null) => "Off".to_owned(),
        (Kind::Fraction(_), Value::Number(n)) => {
            format!("{}%", (n.as_f64().unwrap_or(0.0) * 100.0).round())
        }
        (Kind::List, Value::Array(items)) => {
            let items: Vec<String> = items
                .iter()
                .filter_map(|i| i.as_str().map(str::to_owned))
                .collect();
            list_display(&items)
        }
        (_, Value::String(x)) => x.clone(),
        (_, other) => other.to_string(),
    }
}

/// The settings list: every setting with its current value.
fn settings_menu(e: &Engine) -> Effect {
    let width = SETTINGS
        .iter()
        .map(|s| s.label.chars().count())
        .max()
        .unwrap_or(0);
    select(
        "pruner settings",
        SETTINGS
            .iter()
            .map(|s| {
                let label = format!("{}:", s.label);
                format!(
                    "{label:w$} {}",
                    display(s, &current_value(e.config(), s.key)),
                    w = width + 1
                )
            })
            .collect(),
        SETTINGS
            .iter()
            .map(|s| format!("settings edit {}", s.key))
            .collect(),
        "",
    )
}

/// The dialog for one setting: its values, or a text input.
fn settings_edit(e: &Engine, s: &Setting) -> Effect {
    let now = display(s, &current_value(e.config(), s.key));
    let title = format!("{} (now {now})", s.label);
    let pick = |v: &str| format!("settings pick {} {v}", s.key);
    let mut options: Vec<String> = Vec::new();
    let mut values: Vec<String> = Vec::new();
    match s.kind {
        Kind::Bool => {
            for b in ["true", "false"] {
                options.push(b.to_owned());
                values.push(pick(b));
            }
        }
        Kind::Choice(choices) | Kind::Fraction(choices) => {
            for (v, l) in choices {
                options.push(format!("{v} — {l}"));
                values.push(pick(v));
            }
        }
        Kind::Int(presets) | Kind::Millis(presets) => {
            for (v, l) in presets {
                options.push((*l).to_owned());
                values.push(pick(&v.to_string()));
            }
            options.push("other value…".to_owned());
            values.push(format!("settings input {}", s.key));
        }
        Kind::Text | Kind::List => return settings_input(e, s),
    }
    select(&title, options, values, "")
}

fn settings_input(e: &Engine, s: &Setting) -> Effect {
    let v = current_value(e.config(), s.key);
    let (hint, placeholder) = match s.kind {
        Kind::Text => ("\"default\" or provider/id".to_owned(), display(s, &v)),
        Kind::List => (
            "comma-separated; empty or 'none' to clear".to_owned(),
            v.as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default(),
        ),
        Kind::Millis(_) => ("milliseconds; 0 disables".to_owned(), v.to_string()),
        Kind::Fraction(_) => ("a fraction such as 0.75, or off".to_owned(), display(s, &v)),
        _ => ("a non-negative integer".to_owned(), v.to_string()),
    };
    input(
        &format!("{} ({hint})", s.label),
        &placeholder,
        &format!("settings pick {}", s.key),
    )
}

/// Parses a typed value into the JSON the settings file holds.
fn parse_setting(s: &Setting, text: &str) -> Option<Value> {
    let t = text.trim();
    match s.kind {
        Kind::Bool => match t.to_ascii_lowercase().as_str() {
            "true" | "on" | "yes" => Some(Value::Bool(true)),
            "false" | "off" | "no" => Some(Value::Bool(false)),
            _ => None,
        },
        Kind::Choice(_) => (!t.is_empty()).then(|| Value::String(t.to_owned())),
        Kind::Int(_) | Kind::Millis(_) => parse_count(t).map(Value::from),
        Kind::Fraction(_) => {
            let lower = t.to_ascii_lowercase();
            if ["off", "none", "null", "0", "0%"].contains(&lower.as_str()) {
                return Some(Value::Null);
            }
            let f = match lower.strip_suffix('%') {
                Some(p) => p.trim().parse::<f64>().ok()? / 100.0,
                None => lower.parse::<f64>().ok()?,
            };
            serde_json::Number::from_f64(f).map(Value::Number)
        }
        Kind::Text => (!t.is_empty()).then(|| Value::String(t.to_owned())),
        Kind::List => Some(Value::from(parse_list(t))),
    }
}

/// Sets one setting from text; the config's own normalization decides
/// what is valid (an out-of-range value is refused, not clamped).
fn settings_set(e: &mut Engine, s: &Setting, text: &str) -> Effects {
    let invalid = || {
        vec![warn(format!(
            "Invalid value for {}: \"{}\".",
            s.key,
            text.trim()
        ))]
    };
    let Some(value) = parse_setting(s, text) else {
        return invalid();
    };
    let original = e
        .settings()
        .get("contextPrune")
        .cloned()
        .unwrap_or(Value::Null);
    let mut block = e.config().to_settings_value(&original);
    let mut slot = &mut block;
    let parts: Vec<&str> = s.key.split('.').collect();
    for part in &parts[..parts.len() - 1] {
        slot = &mut slot[*part];
    }
    slot[parts[parts.len() - 1]] = value;
    let (config, warnings) = Config::from_settings_value(&block);
    if warnings.iter().any(|w| w.key == s.key) {
        return invalid();
    }
    let shown = display(s, &current_value(&config, s.key));
    let mut out = change(e, |c| *c = config);
    out.insert(1, info(format!("{} set to: {shown}", s.label)));
    out
}

fn settings(e: &mut Engine, rest: &str) -> Effects {
    let (verb, rest) = split_word(rest);
    if verb.is_empty() {
        return vec![settings_menu(e)];
    }
    let (key, value) = split_word(rest);
    let unknown = || {
        vec![warn(format!(
            "Unknown setting: \"{key}\". Run /pruner settings for the list."
        ))]
    };
    match verb {
        "edit" | "input" | "set" | "pick" => {
            let Some(s) = setting(key) else {
                return unknown();
            };
            match verb {
                "edit" => vec![settings_edit(e, s)],
                "input" => vec![settings_input(e, s)],
                "set" => settings_set(e, s, value),
                _ => {
                    let mut out = settings_set(e, s, value);
                    out.push(settings_menu(e));
                    out
                }
            }
        }
        other => vec![warn(format!(
            "Unknown settings action: \"{other}\". Run /pruner settings, or /pruner settings set <key> <value>."
        ))],
    }
}

// ---- tree -------------------------------------------------------------------------

/// `YYYY-MM-DD HH:MM:SS` in the user's local time.
fn local_time(ms: i64, env: CommandEnv) -> String {
    let iso = condense_store::time::format_iso(ms + env.utc_offset_minutes * 60_000);
    iso.get(..19).unwrap_or(&iso).replacen('T', " ", 1)
}

fn tree_args(args: &Value) -> String {
    match args.as_object() {
        Some(m) => m
            .iter()
            .map(|(k, v)| {
                let json = v.to_string();
                if js_len(&json) > TREE_ARG_UNITS {
                    format!("{k}={}…", js_prefix(&json, TREE_ARG_UNITS))
                } else {
                    format!("{k}={json}")
                }
            })
            .collect::<Vec<_>>()
            .join(", "),
        None => String::new(),
    }
}

/// `/pruner tree` as text: each summary, then the calls it replaced.
pub fn tree_text(e: &Engine, env: CommandEnv) -> String {
    let state = e.state();
    let bodies = state.summary_bodies();
    if bodies.is_empty() {
        return "No pruned tool calls found in this session.".to_owned();
    }
    let skip = bodies.len().saturating_sub(TREE_MAX_SUMMARIES);
    let mut out = format!(
        "Pruned Tool Calls ({} summar{})",
        bodies.len(),
        if bodies.len() == 1 { "y" } else { "ies" }
    );
    if skip > 0 {
        out.push_str(&format!(
            "\n({skip} older summar{} not shown)",
            if skip == 1 { "y" } else { "ies" }
        ));
    }
    for body in &bodies[skip..] {
        let records: Vec<_> = body
            .keys
            .iter()
            .filter_map(|k| state.record_for(&k.id, k.result_timestamp))
            .collect();
        let original: u64 = records
            .iter()
            .map(|r| js_len(&r.result_text.to_str()) as u64)
            .sum();
        let n = records.len() as u64;
        let turn = records
            .first()
            .map_or_else(|| "?".to_owned(), |r| r.turn_index.to_string());
        out.push_str(&format!(
            "\n[pruner] Turn {turn} summary ({n} tool{} · {} chars · original {})",
            plural(n),
            format_count(js_len(&body.text) as u64),
            format_count(original)
        ));
        if let Some(r) = records.first() {
            out.push_str(&format!(" · {}", local_time(r.timestamp, env)));
        }
        for r in records {
            let size = match r.spill_bytes {
                Some(b) => format!("{} bytes", format_count(b)),
                None => format!(
                    "{} chars",
                    format_count(js_len(&r.result_text.to_str()) as u64)
                ),
            };
            out.push_str(&format!(
                "\n  {}({}) · {size}{}",
                r.tool_name,
                tree_args(&r.args),
                if r.is_error { " [error]" } else { "" }
            ));
        }
    }
    out
}

// ---- now --------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum RowState {
    Pending,
    Running(usize),
    Done(usize),
    Skipped,
}

struct Row {
    calls: u64,
    raw: u64,
    state: RowState,
}

fn char_progress(received: u64, raw: u64) -> String {
    format!(
        "{} summary char{} / {} raw char{}",
        format_count(received),
        plural(received),
        format_count(raw),
        plural(raw)
    )
}

fn widget_lines(rows: &[Row], now: i64) -> Vec<String> {
    let total = rows.len();
    rows.iter()
        .enumerate()
        .map(|(i, r)| {
            let label = format!("Batch {}/{total}", i + 1);
            let calls = format!("{} tool call{}", r.calls, plural(r.calls));
            match r.state {
                RowState::Pending => format!("○ {label} · {calls} · pending"),
                RowState::Running(chars) => {
                    let frame = SPINNER[(now / SPINNER_MS).rem_euclid(10) as usize];
                    if chars > 0 {
                        format!(
                            "{frame} {label} · {calls} · {}",
                            char_progress(chars as u64, r.raw)
                        )
                    } else {
                        format!("{frame} {label} · {calls}")
                    }
                }
                RowState::Done(chars) => {
                    format!(
                        "✓ {label} · {calls} · {}",
                        char_progress(chars as u64, r.raw)
                    )
                }
                RowState::Skipped => format!("⚠ {label} · {calls} · skipped"),
            }
        })
        .collect()
}

fn widget(lines: Option<Vec<String>>) -> Effect {
    Effect::Widget {
        key: PROGRESS_WIDGET.to_owned(),
        lines,
        placement: Placement::AboveEditor,
        ttl_ms: None,
    }
}

/// The text `/pruner now` ends with, from the frontier the flush wrote.
fn now_text(frontier: &Frontier, min_batch_chars: u64) -> Effect {
    let (calls, batches, raw, summary) = (
        frontier.attempted_tool_call_count,
        frontier.attempted_batch_count,
        frontier.raw_char_count,
        frontier.summary_char_count,
    );
    let tc = format!("tool call{}", plural(calls));
    match frontier.outcome {
        FrontierOutcome::SkippedOversized => warn(format!(
            "pruner: skipped pruning {calls} {tc} — summary was {summary} chars vs {raw} raw chars; frontier advanced past this range"
        )),
        FrontierOutcome::SkippedTrivial => info(format!(
            "pruner: skipped {calls} trivial {tc} — only {raw} raw chars below minBatchChars={min_batch_chars}; no LLM call made; frontier advanced past this range"
        )),
        FrontierOutcome::SkippedDeduped => info(format!(
            "pruner: deduplicated {calls} {tc} ({raw} raw chars) against earlier prunes; no LLM call made; frontier advanced past this range"
        )),
        FrontierOutcome::Summarized => info(format!(
            "pruner: pruned {calls} {tc} from {batches} batch{} — summary {summary} chars vs {raw} raw chars",
            if batches == 1 { "" } else { "es" }
        )),
    }
}

/// The summarizer's notices as effects.
fn notice_effects(notices: &[condense_core::Notice]) -> Effects {
    notices
        .iter()
        .map(|n| Effect::notify(n.level, n.text.clone()))
        .collect()
}

/// `/pruner now`: a manual flush, sequential, with a progress widget and
/// runtime delivery.
async fn now(host: &dyn CommandHost) -> Effects {
    let (flush, show_status, min_batch) = {
        let mut e = host.engine();
        if !e.config().enabled {
            return vec![warn("Context pruning is disabled. Run /pruner on first.")];
        }
        let show = e.config().show_prune_status_line;
        let min_batch = e.config().min_batch_chars;
        (
            e.begin_flush(TriggerKind::Manual, None, now_ms()),
            show,
            min_batch,
        )
    };
    let Some(flush) = flush else {
        return vec![warn("pruner: nothing flushed — already-flushing")];
    };
    let steps = EngineFlush {
        lock: host,
        delivery: Delivery::Runtime,
    };
    let summarizer = host.summarizer();
    let cancel = CancelToken::new();
    if flush.is_empty() {
        // Still run it through: its metrics entry records `empty`.
        let mut out = vec![info("pruner: nothing pending — no batches to summarize")];
        if let Ok((_, done)) = run_flush(
            &steps,
            flush,
            &summarizer,
            RunOptions::sequential(),
            &cancel,
            &mut |_| {},
            &now_ms,
        )
        .await
        {
            out.extend(done.effects);
        }
        return out;
    }

    let mut rows: Vec<Row> = flush
        .batches()
        .iter()
        .map(|b| Row {
            calls: b.captured.calls.len() as u64,
            raw: b.captured.raw_chars() as u64,
            // Deduplicated and trivial batches need no summarizer call.
            state: match b.slot {
                Slot::Summarize(_) => RowState::Pending,
                Slot::Deduped | Slot::Trivial => RowState::Skipped,
            },
        })
        .collect();
    let job_rows: Vec<usize> = {
        let mut by_job: Vec<(usize, usize)> = flush
            .batches()
            .iter()
            .enumerate()
            .filter_map(|(i, b)| match b.slot {
                Slot::Summarize(j) => Some((j, i)),
                _ => None,
            })
            .collect();
        by_job.sort_unstable();
        by_job.into_iter().map(|(_, i)| i).collect()
    };
    let mut first = vec![widget(Some(widget_lines(&rows, now_ms())))];
    if show_status && !flush.jobs().is_empty() {
        first.insert(0, Effect::status(Some("│ prune: summarizing…".to_owned())));
    }
    host.ui(first);

    let mut last_sent = now_ms();
    let mut on_progress = |event: ProgressEvent| {
        let (index, state, throttle) = match event {
            ProgressEvent::Started { index, .. } => (index, RowState::Running(0), false),
            ProgressEvent::Streaming { index, chars } => (index, RowState::Running(chars), true),
            ProgressEvent::Done {
                index,
                summary_chars,
            } => (index, RowState::Done(summary_chars), false),
            ProgressEvent::Skipped { index } => (index, RowState::Skipped, false),
        };
        let Some(row) = job_rows.get(index).and_then(|&r| rows.get_mut(r)) else {
            return;
        };
        row.state = state;
        let t = now_ms();
        if throttle && t - last_sent < STREAM_UPDATE_MS {
            return;
        }
        last_sent = t;
        host.ui(vec![widget(Some(widget_lines(&rows, t)))]);
    };
    let run = run_flush(
        &steps,
        flush,
        &summarizer,
        RunOptions::sequential(),
        &cancel,
        &mut on_progress,
        &now_ms,
    )
    .await;
    let Ok((notices, done)) = run else {
        return vec![widget(None), warn("pruner: nothing flushed — cancelled")];
    };
    let mut out = notice_effects(&notices);
    let last = match done.report.frontier() {
        Some(f) => now_text(f, min_batch),
        None => warn(format!(
            "pruner: nothing flushed — summarizer-failed{}",
            done.report
                .failure
                .as_ref()
                .map_or(String::new(), |f| format!(" ({f})"))
        )),
    };
    out.extend(done.effects);
    out.push(widget(None));
    out.push(last);
    out
}

// ---- compact ----------------------------------------------------------------------

/// `/pruner compact`: every eligible closed chain, K = 0, whether or not
/// `chainCompression.enabled`.
async fn compact(host: &dyn CommandHost) -> Effects {
    let flush = host.engine().begin_compact();
    let Some(flush) = flush else {
        return vec![warn(
            "pruner: compact failed: a flush is running; try again when it is done",
        )];
    };
    let steps = EngineFlush {
        lock: host,
        delivery: Delivery::Runtime,
    };
    let summarizer = host.summarizer();
    let run = run_flush(
        &steps,
        flush,
        &summarizer,
        RunOptions::sequential(),
        &CancelToken::new(),
        &mut |_| {},
        &now_ms,
    )
    .await;
    let Ok((notices, done)) = run else {
        return vec![warn("pruner: compact failed: cancelled")];
    };
    let mut out = notice_effects(&notices);
    out.extend(done.effects);
    let report = done.report;
    // The chain compression's own "compressed" notice is replaced by ours.
    out.extend(
        report
            .chain_notices
            .iter()
            .filter(|n| n.level != NoticeLevel::Info)
            .map(|n| Effect::notify(n.level, n.text.clone())),
    );
    let compressed = &report.compressed;
    if compressed.is_empty() {
        let skipped = report.skipped_chains;
        out.push(info(if skipped > 0 {
            format!(
                "pruner: no chains eligible for compaction ({skipped} skipped — no per-batch summary available)"
            )
        } else {
            "pruner: no chains eligible for compaction".to_owned()
        }));
        return out;
    }
    // A rough proxy, as in pi-condense: the dropped results' original sizes.
    let e = host.engine();
    let dropped: u64 = compressed
        .iter()
        .flat_map(|c| c.dropped_occurrence_keys.iter().flatten())
        .map(|k| OccurrenceKey::parse(k))
        .filter_map(|k| e.state().record_for(&k.id, k.result_timestamp))
        .map(|r| js_len(&r.result_text.to_str()) as u64)
        .sum();
    let ids: Vec<&str> = compressed.iter().map(|c| c.block_id.as_str()).collect();
    out.push(info(format!(
        "pruner: compacted {} chain{} ({}), reclaimed ~{} tokens",
        ids.len(),
        plural(ids.len() as u64),
        ids.join(", "),
        dropped.div_ceil(4)
    )));
    out
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use condense_core::ModelRef;
    use condense_store::time::format_iso;
    use condense_summarizer::{Extractive, SummarizerSettings, Target};

    use super::*;
    use condense_engine::StartParams;
    use serde_json::json;
    use std::sync::MutexGuard;

    struct TestHost {
        engine: Mutex<Engine>,
        ui: Mutex<Vec<Value>>,
    }

    impl EngineLock for TestHost {
        fn engine(&self) -> MutexGuard<'_, Engine> {
            self.engine.lock().unwrap()
        }
    }

    impl CommandHost for TestHost {
        fn summarizer(&self) -> Summarizer {
            let config = self.engine.lock().unwrap().config().clone();
            Summarizer::new(
                Target::new(
                    Arc::new(Extractive::new()),
                    ModelRef::new("test", "extractive"),
                ),
                SummarizerSettings::from_config(&config),
            )
        }
        fn ui(&self, effects: Effects) {
            self.ui
                .lock()
                .unwrap()
                .extend(effects.iter().map(|e| serde_json::to_value(e).unwrap()));
        }
    }

    const T0: i64 = 1_780_000_000_000;

    fn entry(n: usize, ts: i64, message: Value) -> Value {
        json!({
            "type": "message",
            "id": format!("{n:08x}"),
            "parentId": if n == 0 { Value::Null } else { json!(format!("{:08x}", n - 1)) },
            "timestamp": format_iso(ts),
            "message": message,
        })
    }

    /// A user prompt, `calls` tool turns reading a big file each, and a
    /// final text reply: one closed chain, nothing summarized.
    fn branch(calls: usize) -> Vec<Value> {
        let mut out = Vec::new();
        let mut ts = T0;
        let mut push = |out: &mut Vec<Value>, m: Value| {
            ts += 1000;
            let mut m = m;
            m["timestamp"] = json!(ts);
            out.push(entry(out.len(), ts, m));
        };
        push(
            &mut out,
            json!({"role": "user", "content": [{"type": "text", "text": "read the files"}]}),
        );
        for i in 0..calls {
            push(
                &mut out,
                json!({"role": "assistant", "content": [
                {"type": "toolCall", "id": format!("call_{i}"), "name": "read", "arguments": {"path": format!("f{i}.txt")}}
            ], "stopReason": "toolUse"}),
            );
            let text: String = (0..60)
                .map(|l| format!("file {i} line {l}: /src/module_{i}.rs ok\n"))
                .collect();
            push(
                &mut out,
                json!({"role": "toolResult", "toolCallId": format!("call_{i}"), "toolName": "read",
                "content": [{"type": "text", "text": text}], "isError": false}),
            );
        }
        push(
            &mut out,
            json!({"role": "assistant", "content": [{"type": "text", "text": "Done."}], "stopReason": "stop"}),
        );
        out
    }

    fn host(settings: Value, branch: Vec<Value>) -> TestHost {
        let mut e = Engine::default();
        e.start(StartParams {
            settings,
            session_id: "s1".into(),
            session_dir: None,
            branch: condense_engine::jsonl(branch.iter().map(Value::to_string)),
            tree: false,
        });
        TestHost {
            engine: Mutex::new(e),
            ui: Mutex::new(Vec::new()),
        }
    }

    fn enabled() -> Value {
        json!({"contextPrune": {"enabled": true, "someFutureKey": 7}, "theme": "dark"})
    }

    /// The effects as the shim receives them.
    fn cmd(h: &TestHost, args: &str) -> Vec<Value> {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(run(h, args, CommandEnv::default()))
            .iter()
            .map(|e| serde_json::to_value(e).unwrap())
            .collect()
    }

    fn texts(effects: &[Value]) -> Vec<String> {
        effects
            .iter()
            .filter(|e| e["kind"] == "notify")
            .map(|e| e["text"].as_str().unwrap_or("").to_owned())
            .collect()
    }

    fn saved(effects: &[Value]) -> Option<&Value> {
        effects
            .iter()
            .find(|e| e["kind"] == "saveSettings")
            .map(|e| &e["contextPrune"])
    }

    #[test]
    fn on_off_save_and_confirm() {
        let h = host(enabled(), Vec::new());
        let out = cmd(&h, "off");
        assert_eq!(texts(&out), ["Context pruning disabled."]);
        let block = saved(&out).expect("saved");
        assert_eq!(block["enabled"], false);
        assert_eq!(block["someFutureKey"], 7, "unknown keys survive");
        assert!(out
            .iter()
            .any(|e| e["kind"] == "status" && e["text"] == "│ prune: OFF"));
        let out = cmd(&h, "on");
        assert_eq!(texts(&out), ["Context pruning enabled."]);
        assert_eq!(saved(&out).unwrap()["enabled"], true);
    }

    #[test]
    fn status_has_settings_summarizer_and_context_blocks() {
        let h = host(enabled(), branch(2));
        let t = texts(&cmd(&h, "status")).remove(0);
        for line in [
            "pruner status:",
            "  enabled:  true",
            "  model:    default",
            "  thinking: Default (default)",
            "  idle to:  20s",
            "  max to:   180s",
            "  trigger:  On agent message",
            "  batching: Per turn (turn)",
            "  dedup:    on",
            "  status:   on",
            "  (no summarizer calls yet)",
            "  --- context ---",
            "  chain share:  ",
            "  rearmed:      yes",
        ] {
            assert!(t.contains(line), "{line:?} missing from\n{t}");
        }
        assert!(
            t.contains("  frontier gap: ") && t.contains(" tokens"),
            "{t}"
        );
        let idle = host(
            json!({"contextPrune": {"enabled": true, "summarizerIdleTimeoutMs": 0}}),
            Vec::new(),
        );
        let t = texts(&cmd(&idle, "status")).remove(0);
        assert!(t.contains("  idle to:  disabled"), "{t}");
        assert!(!t.contains("rearmed"), "{t}");
    }

    #[test]
    fn stats_and_cost_formatting() {
        let h = host(enabled(), Vec::new());
        assert_eq!(
            texts(&cmd(&h, "stats")),
            ["pruner stats: no summarizer calls yet."]
        );
        let h = host(
            enabled(),
            vec![json!({"type": "custom", "id": "00000000", "parentId": null,
                "timestamp": format_iso(T0), "customType": "context-prune-stats",
                "data": {"callCount": 3, "totalInputTokens": 12_345, "totalOutputTokens": 250,
                    "totalCost": 0.0031, "chainsCompressed": 2}})],
        );
        assert_eq!(
            texts(&cmd(&h, "stats")),
            ["pruner stats:\n  calls:       3\n  input:       12.3k tokens\n  output:      250 tokens\n  cost:        $0.003\n  chains:      2 compressed"]
        );
        assert_eq!(format_cost(0.0004), "<$0.001");
        assert_eq!(format_cost(0.0), "$0.000");
        assert_eq!(format_count(1250), "1.3k", "JavaScript rounds the tie up");
        assert_eq!(
            format_count(1150),
            "1.1k",
            "1.15 is below the tie in binary"
        );
        assert_eq!(format_count(2_500_000), "2.5M");
        assert_eq!(format_count(999), "999");
    }

    #[test]
    fn model_and_thinking() {
        let h = host(enabled(), Vec::new());
        assert_eq!(
            texts(&cmd(&h, "model")),
            ["Current summarizer model: default\nCurrent summarizer thinking: Default (default)"]
        );
        let out = cmd(&h, "model openai/gpt-4.1-mini:low");
        assert_eq!(
            texts(&out),
            ["Summarizer model set to: openai/gpt-4.1-mini with thinking low"]
        );
        let block = saved(&out).unwrap();
        assert_eq!(block["summarizerModel"], "openai/gpt-4.1-mini");
        assert_eq!(block["summarizerThinking"], "low");
        let out = cmd(&h, "model anthropic/claude:huge");
        assert!(saved(&out).is_none());
        assert_eq!(out[0]["level"], "warning");
        assert_eq!(
            texts(&out),
            ["Invalid model thinking suffix: huge. Use one of: default, off, minimal, low, medium, high, xhigh."]
        );
        assert_eq!(
            texts(&cmd(&h, "thinking")),
            ["Current summarizer thinking: Low (low)"]
        );
        let out = cmd(&h, "thinking xhigh");
        assert_eq!(texts(&out), ["Summarizer thinking set to: xhigh"]);
        assert_eq!(saved(&out).unwrap()["summarizerThinking"], "xhigh");
        let out = cmd(&h, "thinking lots");
        assert!(saved(&out).is_none());
        assert!(texts(&out)[0].starts_with("Invalid summarizer thinking level: lots."));
    }

    #[test]
    fn prune_on_is_validated_and_batching_too() {
        let h = host(enabled(), Vec::new());
        let out = cmd(&h, "prune-on every-turn");
        assert!(saved(&out).is_none(), "a removed mode is refused");
        assert_eq!(
            texts(&out),
            ["Invalid prune trigger: every-turn. Use one of: agent-message, on-demand."]
        );
        let out = cmd(&h, "prune-on on-demand");
        assert_eq!(saved(&out).unwrap()["pruneOn"], "on-demand");
        let out = cmd(&h, "prune-on");
        let pick = out
            .iter()
            .find(|e| e["kind"] == "select")
            .expect("a picker");
        assert_eq!(pick["then"], "prune-on");
        assert_eq!(pick["values"], json!(["agent-message", "on-demand"]));
        let out = cmd(&h, "batching agent-message");
        assert_eq!(texts(&out), ["Batching mode set to: Per agent message"]);
        assert_eq!(saved(&out).unwrap()["batchingMode"], "agent-message");
        let out = cmd(&h, "batching session");
        assert!(saved(&out).is_none());
        assert_eq!(
            texts(&out),
            ["Invalid batching mode: session. Use one of: turn, agent-message."]
        );
    }

    #[test]
    fn protected_lists() {
        let h = host(enabled(), Vec::new());
        let out = cmd(&h, "protected-tools todo, read  bash");
        assert_eq!(texts(&out), ["Protected tools: todo, read, bash"]);
        assert_eq!(
            saved(&out).unwrap()["protectedTools"],
            json!(["todo", "read", "bash"])
        );
        assert!(h.engine().protection().is_protected("todo", &json!({})));
        let out = cmd(&h, "protected-tools none");
        assert_eq!(texts(&out), ["Protected tools: (none)"]);
        assert_eq!(saved(&out).unwrap()["protectedTools"], json!([]));
        // No argument: the list, and an input whose empty answer clears.
        let out = cmd(&h, "protected-paths");
        assert_eq!(texts(&out), ["Protected paths: **/skills/**/*.md"]);
        let ask = out.iter().find(|e| e["kind"] == "input").expect("an input");
        assert_eq!(ask["then"], "protected-paths --input");
        let out = cmd(&h, "protected-paths --input");
        assert_eq!(texts(&out), ["Protected paths: (none)"]);
        assert_eq!(saved(&out).unwrap()["protectedPaths"], json!([]));
    }

    #[test]
    fn numbers_and_dedup() {
        let h = host(enabled(), Vec::new());
        assert_eq!(
            texts(&cmd(&h, "min-batch-chars")),
            ["Current minBatchChars: 1000 chars."]
        );
        let out = cmd(&h, "min-batch-chars 0");
        assert_eq!(
            texts(&out),
            ["minBatchChars set to 0 — pre-flush trivial-batch skipping disabled."]
        );
        assert_eq!(saved(&out).unwrap()["minBatchChars"], 0);
        let out = cmd(&h, "min-batch-chars 12abc");
        assert!(saved(&out).is_none());
        assert_eq!(
            texts(&out),
            ["Invalid minBatchChars: \"12abc\". Expected a non-negative integer (0 disables)."]
        );
        let out = cmd(&h, "recovery-grace 5");
        assert_eq!(texts(&out), ["recoveryGraceTurns set to 5."]);
        assert_eq!(saved(&out).unwrap()["recoveryGraceTurns"], 5);
        assert_eq!(
            texts(&cmd(&h, "recovery-grace")),
            ["Current recoveryGraceTurns: 5 user turns."]
        );
        assert!(saved(&cmd(&h, "recovery-grace -1")).is_none());
        let out = cmd(&h, "dedup off");
        assert_eq!(texts(&out), ["Content-hash dedup turned OFF."]);
        assert_eq!(saved(&out).unwrap()["dedupByContentHash"], false);
        assert_eq!(
            texts(&cmd(&h, "dedup TRUE")),
            ["Content-hash dedup turned ON."]
        );
        assert!(texts(&cmd(&h, "dedup"))
            .remove(0)
            .starts_with("Content-hash dedup is ON."));
        assert!(saved(&cmd(&h, "dedup maybe")).is_none());
    }

    #[test]
    fn help_unknown_and_picker() {
        let h = host(enabled(), Vec::new());
        let help = texts(&cmd(&h, "help")).remove(0);
        for (name, _) in SUBCOMMANDS {
            assert!(
                help.contains(&format!("/pruner {name}")) || name == "off",
                "{name}"
            );
        }
        assert_eq!(
            texts(&cmd(&h, "frobnicate now")),
            ["Unknown subcommand: \"frobnicate\". Run /pruner help for usage."]
        );
        let out = cmd(&h, "");
        assert_eq!(out[0]["kind"], "select");
        assert_eq!(out[0]["title"], "pruner — choose a subcommand");
        assert_eq!(out[0]["then"], "");
        assert_eq!(
            out[0]["values"].as_array().unwrap().len(),
            SUBCOMMANDS.len()
        );
    }

    #[test]
    fn settings_dialog_round_trip() {
        let h = host(enabled(), Vec::new());
        let out = cmd(&h, "settings");
        let menu = &out[0];
        assert_eq!(menu["kind"], "select");
        assert_eq!(menu["title"], "pruner settings");
        let options = menu["options"].as_array().unwrap();
        assert_eq!(options.len(), SETTINGS.len());
        assert!(options[0].as_str().unwrap().starts_with("Enabled:"));
        assert!(options[0].as_str().unwrap().ends_with("true"));
        assert_eq!(menu["values"][7], "settings edit minBatchChars");

        let out = cmd(&h, "settings edit minBatchChars");
        let pick = &out[0];
        assert_eq!(pick["title"], "Min batch chars (now 1000)");
        assert_eq!(pick["values"][3], "settings pick minBatchChars 2000");
        assert_eq!(
            pick["values"].as_array().unwrap().last().unwrap(),
            "settings input minBatchChars"
        );

        let out = cmd(&h, "settings pick minBatchChars 2000");
        assert_eq!(saved(&out).unwrap()["minBatchChars"], 2000);
        assert_eq!(texts(&out), ["Min batch chars set to: 2000"]);
        assert_eq!(
            out.last().unwrap()["title"],
            "pruner settings",
            "the list comes back"
        );

        let out = cmd(&h, "settings set chainCompression.rollingWindow 0");
        assert!(saved(&out).is_none(), "below the minimum is refused");
        assert_eq!(
            texts(&out),
            ["Invalid value for chainCompression.rollingWindow: \"0\"."]
        );
        let out = cmd(&h, "settings set autoBudgetThreshold 75%");
        assert_eq!(saved(&out).unwrap()["autoBudgetThreshold"], 0.75);
        assert_eq!(texts(&out), ["Auto-flush at context % set to: 75%"]);
        let out = cmd(&h, "settings set purgeErrors.enabled off");
        let block = saved(&out).unwrap();
        assert_eq!(block["purgeErrors"]["enabled"], false);
        assert_eq!(block["purgeErrors"]["cooldownTurns"], 2, "siblings kept");
        assert_eq!(block["someFutureKey"], 7);
        let out = cmd(&h, "settings edit summarizerModel");
        assert_eq!(out[0]["kind"], "input");
        assert_eq!(out[0]["then"], "settings pick summarizerModel");
        let out = cmd(&h, "settings pick protectedTools");
        assert_eq!(saved(&out).unwrap()["protectedTools"], json!([]));
        assert_eq!(
            texts(&cmd(&h, "settings set nope 1")),
            ["Unknown setting: \"nope\". Run /pruner settings for the list."]
        );
    }

    #[test]
    fn now_flushes_with_progress_and_runtime_delivery() {
        let h = host(enabled(), branch(3));
        let out = cmd(&h, "now");
        let summaries: Vec<_> = out
            .iter()
            .filter(|e| e["kind"] == "appendMessage")
            .collect();
        assert_eq!(summaries.len(), 3, "{out:#?}");
        assert!(summaries.iter().all(|e| e["delivery"] == "runtime"));
        assert!(out
            .iter()
            .any(|e| e["customType"] == "context-prune-flush-metrics"
                && e["data"]["trigger"] == "manual"));
        let last = texts(&out).pop().unwrap();
        assert!(
            last.starts_with("pruner: pruned 3 tool calls from 3 batches — summary "),
            "{last}"
        );
        assert!(last.ends_with(" raw chars"), "{last}");
        let cleared = out.iter().rev().nth(1).unwrap();
        assert_eq!(cleared["kind"], "widget");
        assert!(cleared["lines"].is_null());

        let ui = h.ui.lock().unwrap().clone();
        assert_eq!(ui[0]["text"], "│ prune: summarizing…");
        let first = &ui[1];
        assert_eq!(first["key"], "context-prune-progress");
        assert_eq!(first["placement"], "aboveEditor");
        assert_eq!(
            first["lines"][0].as_str().unwrap(),
            "○ Batch 1/3 · 1 tool call · pending"
        );
        let done = ui.last().unwrap()["lines"].as_array().unwrap().clone();
        assert_eq!(done.len(), 3);
        for line in done {
            let line = line.as_str().unwrap();
            assert!(line.starts_with("✓ Batch "), "{line}");
            assert!(
                line.contains(" summary chars / ") && line.ends_with(" raw chars"),
                "{line}"
            );
        }

        // Nothing left: the empty text.
        let out = cmd(&h, "now");
        assert_eq!(
            texts(&out)[0],
            "pruner: nothing pending — no batches to summarize"
        );
        // Disabled.
        cmd(&h, "off");
        assert_eq!(
            texts(&cmd(&h, "now")),
            ["Context pruning is disabled. Run /pruner on first."]
        );
    }

    #[test]
    fn tree_lists_summaries_and_calls() {
        let h = host(enabled(), branch(2));
        assert_eq!(
            texts(&cmd(&h, "tree")),
            ["No pruned tool calls found in this session."]
        );
        cmd(&h, "now");
        let t = tree_text(
            &h.engine(),
            CommandEnv {
                utc_offset_minutes: 60,
            },
        );
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "Pruned Tool Calls (2 summaries)");
        assert!(
            lines[1].starts_with("[pruner] Turn ") && lines[1].contains(" summary (1 tool · "),
            "{t}"
        );
        // T0 + 2 s is 20:26:42 UTC; the user is one hour ahead.
        assert!(
            lines[1].ends_with(" chars · original 2.1k) · 2026-05-28 21:26:42"),
            "{t}"
        );
        assert_eq!(lines[2], "  read(path=\"f0.txt\") · 2.1k chars", "{t}");
        assert!(!lines[2].contains("[error]"));
    }

    #[test]
    fn compact_compresses_every_closed_chain() {
        // Two closed chains; K = 3 would keep both, compact takes both.
        let mut b = branch(2);
        let mut more = branch(2);
        for (i, e) in more.iter_mut().enumerate() {
            let n = b.len() + i;
            e["id"] = json!(format!("{n:08x}"));
            e["parentId"] = json!(format!("{:08x}", n - 1));
            let ts = T0 + 100_000 + i as i64 * 1000;
            e["timestamp"] = json!(format_iso(ts));
            e["message"]["timestamp"] = json!(ts);
            if let Some(id) = e["message"]["toolCallId"].as_str() {
                e["message"]["toolCallId"] = json!(format!("{id}_b"));
            }
            if let Some(blocks) = e["message"]["content"].as_array_mut() {
                for bl in blocks {
                    if let Some(id) = bl["id"].as_str() {
                        bl["id"] = json!(format!("{id}_b"));
                    }
                }
            }
        }
        b.extend(more);
        let h = host(
            json!({"contextPrune": {"enabled": true, "chainCompression": {"enabled": false}}}),
            b,
        );
        let out = cmd(&h, "compact");
        let last = texts(&out).pop().unwrap();
        assert!(
            last.starts_with("pruner: compacted 2 chains (b1, b2), reclaimed ~"),
            "{last}\n{out:#?}"
        );
        assert!(last.ends_with(" tokens"));
        let chains: Vec<_> = out
            .iter()
            .filter(|e| e["customType"] == "context-prune-chain")
            .collect();
        assert_eq!(chains.len(), 2);
        assert!(chains.iter().all(|e| e["delivery"] == "runtime"));
        assert_eq!(
            texts(&cmd(&h, "compact")),
            ["pruner: no chains eligible for compaction"]
        );
    }
}

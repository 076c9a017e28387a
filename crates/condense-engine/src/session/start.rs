//! Start: the engine rebuilt from the branch a host hands it (replay,
//! config, the first render that warms the caches).

use std::path::PathBuf;

use condense_core::{render, Branch, Config, Message, Protection, PruneOn, RenderSettings, Role};
use condense_store::entries::CUSTOM_TYPE_SWITCH;
use condense_store::misses::misses_dir_in;
use condense_store::session::{Entry, EntryType, Session};
use serde_json::{json, Value};

use super::{Engine, ReplyFlush};
use crate::protocol::{Effect, Effects, Placement};
use crate::switch::RecordedCall;

/// JSON values as the lines of a [`StartParams::branch`].
pub fn jsonl<S: AsRef<str>>(entries: impl IntoIterator<Item = S>) -> String {
    let mut out = String::new();
    for (i, e) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(e.as_ref());
    }
    out
}

/// `session.start` / `session_tree` parameters.
#[derive(Debug, Clone)]
pub struct StartParams {
    /// The whole settings.json (or null); ignored for `session_tree`.
    pub settings: Value,
    /// The session's id (for the blob directory).
    pub session_id: String,
    /// The session's directory.
    pub session_dir: Option<PathBuf>,
    /// Where the sessions' miss counts are kept, when not in the session
    /// directory: a host whose session directory is per project names one
    /// directory for all, so a project's first session starts from the
    /// user's others (`None`: `condense-misses/` in `session_dir`).
    pub misses_dir: Option<PathBuf>,
    /// The session file the host writes the branch to (`None` for a
    /// session held in memory only): a raw id `context_tree_query` cannot
    /// find in the index or the context is looked up on its branch.
    pub session_file: Option<PathBuf>,
    /// The branch entries as `getBranch()` returns them, root first: their
    /// JSON texts, one per line, read as a session file's lines (never a
    /// `Value` tree: at 1M tokens the branch is 10 MB).
    pub branch: String,
    /// `session_tree`: keep config and fallback state.
    pub tree: bool,
}

impl Engine {
    /// Rebuilds everything from the branch (what `session_start` does).
    pub fn start(&mut self, p: StartParams) -> Effects {
        let mut out = Effects::new();
        if !p.tree {
            self.settings = p.settings;
            let (config, warnings) = Config::from_settings_file_value(&self.settings);
            for w in warnings {
                out.push(Effect::warning(format!("condense: {w}")));
            }
            let (protection, pw) = Protection::compile(&config);
            for w in pw {
                out.push(Effect::warning(format!("condense: {w}")));
            }
            self.config = config;
            self.protection = protection;
        }
        // The store reads the entries exactly as it reads a session file.
        let header = json!({"type": "session", "version": 3, "id": p.session_id, "timestamp": "", "cwd": ""});
        let mut text = header.to_string();
        if !p.branch.is_empty() {
            text.reserve(p.branch.len() + 1);
            text.push('\n');
            text.push_str(&p.branch);
        }
        let session = Session::parse(&text);
        let branch: Vec<_> = session.entries.iter().collect();
        let ctx = condense_store::context::build_context(&branch);
        let ts_of = |id: &str| {
            session
                .entry(id)
                .and_then(|e| condense_store::time::parse_iso(&e.timestamp))
        };
        self.entry_ts = ctx.entry_ids.iter().map(|id| ts_of(id)).collect();
        self.turns_before = ctx.turns_before;
        self.messages = ctx.messages;
        self.injected.clear();
        let (state, _problems) = condense_store::replay::replay_branch(&branch);
        self.state = state;
        self.economy = condense_store::economy::session_economy(&branch);
        let refused = condense_store::economy::refused_usage(&branch);
        if let Some(p) = condense_store::economy::refused_usage_problem(&refused) {
            out.push(Effect::warning(format!("condense: {p}")));
        }
        self.cost_baseline = self.state.stats().clone();
        // The id is the session's to claim: named as the CLI names it, so a
        // crafted or over-long one cannot move spills out of the session
        // directory or make every spill fail.
        let session_dir = p.session_dir;
        self.blob_dir = session_dir
            .as_ref()
            .map(|d| condense_store::spill::blob_dir_in(d, &p.session_id));
        self.session_file = p.session_file;
        self.pending.clear();
        self.budget.reset();
        // A navigation inside this process: the engine saw the last call.
        let navigated = p.tree && self.calls.knows_a_call();
        let mut recorded = None;
        self.rearmed = false;
        self.reply_flush = ReplyFlush::None;
        self.gating_started = None;
        self.user_flush = false;
        self.user_asked = false;
        self.flushing = false;
        self.reclaim = None;
        if !p.tree {
            self.diagnostics.reset();
        }
        if self.config.enabled {
            self.rearmed = !self.capture_now(0).is_empty();
            // Work a reply left for the next run before the process ended.
            // A branch that ends inside a run (its last assistant message
            // calls tools) left no reply: that run's own reply asks for the
            // flush, as it would have without the restart.
            let ended_in_a_reply = self
                .messages
                .iter()
                .rev()
                .find(|m| m.is(&Role::Assistant))
                .is_some_and(Message::is_text_only_assistant);
            if self.rearmed
                && ended_in_a_reply
                && self.config.economy.policy.gates_on_switch()
                && self.config.prune_on == PruneOn::AgentMessage
            {
                self.reply_flush = ReplyFlush::NextRun;
            }
            // A render now fills the state's stub and chain caches, so the
            // first LLM call after a resume costs what later ones do: the
            // render of what the branch's last call was sent, when the
            // policy prices calls against it, else the whole context's
            // (dropped: `context` renders what pi actually sends).
            let settings = RenderSettings {
                config: &self.config,
                protection: &self.protection,
            };
            if !navigated && self.config.economy.policy.gates_on_switch() {
                recorded = last_call_position(&self.messages, &ctx.entry_ids, &branch)
                    .and_then(|at| recorded_call(&self.messages, at, &self.state, &settings));
            }
            if recorded.is_none() {
                drop(render(&self.messages, &self.state, &settings));
            }
        }
        if navigated {
            self.calls.navigated();
        } else {
            self.calls.restart(recorded);
        }
        if !p.tree {
            let misses_dir = p
                .misses_dir
                .or_else(|| session_dir.as_deref().map(misses_dir_in));
            self.start_misses(&p.session_id, misses_dir, &mut out);
        }
        self.refresh_metrics();
        out.push(self.footer());
        if !p.tree {
            out.push(Effect::Widget {
                key: "pruner-boot".to_owned(),
                lines: Some(vec![format!(
                    "pruner loaded — pruning {} | model: {}",
                    if self.config.enabled { "ON" } else { "OFF" },
                    self.config.summarizer_model
                )]),
                placement: Placement::BelowEditor,
                ttl_ms: Some(10_000),
            });
        }
        out
    }
}

/// Where the branch's last LLM call stands in `messages` (its assistant
/// message), when nothing on the branch after it changes what the next call
/// shares with its prompt: a compaction rewrites the context, a model
/// change goes to another model's cache, and a switch may show what that
/// call was not sent. `None` leaves the next call cold.
fn last_call_position(
    messages: &[Message],
    entry_ids: &[String],
    branch: &[&Entry],
) -> Option<usize> {
    let at = messages.iter().rposition(|m| m.is(&Role::Assistant))?;
    let id = entry_ids.get(at)?;
    let entry = branch.iter().rposition(|e| e.id == *id)?;
    let rewritten = branch.get(entry + 1..).unwrap_or_default().iter().any(|e| {
        matches!(e.kind, EntryType::Compaction | EntryType::ModelChange)
            || e.custom_type.as_deref() == Some(CUSTOM_TYPE_SWITCH)
    });
    (!rewritten).then_some(at)
}

/// The call whose assistant message is `messages[at]`: its time, and the
/// prompt it was sent, rendered from the messages before it. With no switch
/// since, what flushes prepared after that call waits for one, so the
/// render shows what that call showed.
fn recorded_call(
    messages: &[Message],
    at: usize,
    state: &Branch,
    settings: &RenderSettings<'_>,
) -> Option<RecordedCall> {
    let at_ms = messages.get(at)?.timestamp()?;
    let before = messages.get(..at)?;
    let prompt = render(before, state, settings).messages(before);
    Some(RecordedCall::new(at_ms, before, prompt))
}

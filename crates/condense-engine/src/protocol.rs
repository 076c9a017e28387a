//! The effects a host carries out, typed (docs/protocol.md, "Effects").
//!
//! Every answer of the engine is a list of [`Effect`]s in order. Their JSON
//! form (`{"kind": "...", ...}`) is the sidecar protocol's wire format, so
//! the field names here are the shim's: a change is a protocol change.

use condense_core::{NoticeLevel, SummarizerModel, HOST_DEFAULT_MODEL};
use condense_store::effects::NewEntry;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What the host must do, in order.
pub type Effects = Vec<Effect>;

/// How an entry reaches the session file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Delivery {
    /// Through the session manager (`appendCustomEntry`,
    /// `appendCustomMessageEntry`): what event handlers use.
    Session,
    /// At runtime (`pi.appendEntry`, `pi.sendMessage(..., {deliverAs:
    /// "steer"})`): what `/pruner` commands use, as pi-condense does.
    Runtime,
}

/// Where a widget is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Placement {
    /// Above the editor (the progress widget).
    AboveEditor,
    /// Below the editor (the boot line).
    BelowEditor,
}

/// One thing for the host to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Effect {
    /// Append a `custom` entry.
    #[serde(rename_all = "camelCase")]
    Append {
        /// The entry's `customType`.
        custom_type: String,
        /// The entry's `data`.
        data: Value,
        /// How it is appended.
        delivery: Delivery,
    },
    /// Append a `custom_message` entry (a message the model sees).
    #[serde(rename_all = "camelCase")]
    AppendMessage {
        /// The entry's `customType`.
        custom_type: String,
        /// The message content.
        content: Value,
        /// Whether pi shows it in the transcript.
        display: bool,
        /// The entry's `details`.
        details: Value,
        /// How it is appended.
        delivery: Delivery,
    },
    /// Tell the user something.
    Notify {
        /// How loud.
        level: NoticeLevel,
        /// What to say.
        text: String,
    },
    /// Set (or clear, `null`) the footer status.
    Status {
        /// The footer text.
        text: Option<String>,
    },
    /// Draw (or clear, `lines: null`) a widget.
    #[serde(rename_all = "camelCase")]
    Widget {
        /// Which widget.
        key: String,
        /// Its lines; `None` removes it.
        lines: Option<Vec<String>>,
        /// Where it goes.
        placement: Placement,
        /// Remove it after this many milliseconds (absent: it stays).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ttl_ms: Option<u64>,
    },
    /// Write `settings.json` with this `contextPrune` block.
    #[serde(rename_all = "camelCase")]
    SaveSettings {
        /// The whole new `contextPrune` block.
        context_prune: Value,
    },
    /// Report the summarizer's cost since the session started.
    #[serde(rename_all = "camelCase")]
    Cost {
        /// Dollars.
        total_cost: f64,
        /// Input tokens.
        input_tokens: u64,
        /// Output tokens.
        output_tokens: u64,
    },
    /// Ask the user to pick one option, then run `then` with its value.
    Select {
        /// The dialog's title.
        title: String,
        /// The options shown.
        options: Vec<String>,
        /// The value sent for each option (parallel to `options`).
        values: Vec<String>,
        /// The command prefix the answer is appended to.
        then: String,
    },
    /// Ask the user for one line of text, then run `then` with it.
    Input {
        /// The dialog's title.
        title: String,
        /// A hint shown in the empty field.
        placeholder: String,
        /// The command prefix the answer is appended to.
        then: String,
    },
    /// Compact the context now, as the host's own compaction would (pi's
    /// `ctx.compact`): sent at an agent run's end, to a host that said it
    /// can (`session.start`'s `canCompact`), where no pruning would compact
    /// and running on with the longer pruned context would cost more than
    /// pruning saved.
    Compact,
}

impl Effect {
    /// The message this effect's entry adds to the context, as pi's
    /// `buildSessionContext` makes it from the entry written at `at` (ms):
    /// a custom message's, none for any other effect.
    pub fn context_message(&self, at: i64) -> Option<condense_core::Message> {
        match self {
            Effect::AppendMessage {
                custom_type,
                content,
                display,
                details,
                ..
            } => {
                condense_store::context::custom_message(custom_type, content, *display, details, at)
            }
            _ => None,
        }
    }

    /// A notification.
    pub fn notify(level: impl Into<NoticeLevel>, text: impl Into<String>) -> Effect {
        Effect::Notify {
            level: level.into(),
            text: text.into(),
        }
    }

    /// An info notification.
    pub fn info(text: impl Into<String>) -> Effect {
        Effect::notify(NoticeLevel::Info, text)
    }

    /// A warning.
    pub fn warning(text: impl Into<String>) -> Effect {
        Effect::notify(NoticeLevel::Warning, text)
    }

    /// The footer status.
    pub fn status(text: Option<String>) -> Effect {
        Effect::Status { text }
    }

    /// An entry the store built, appended with `delivery`.
    pub fn entry(entry: NewEntry, delivery: Delivery) -> Effect {
        match entry {
            NewEntry::Custom { custom_type, data } => Effect::Append {
                custom_type: custom_type.to_owned(),
                data,
                delivery,
            },
            NewEntry::CustomMessage {
                custom_type,
                content,
                display,
                details,
            } => Effect::AppendMessage {
                custom_type: custom_type.to_owned(),
                content,
                display,
                details,
                delivery,
            },
        }
    }
}

/// The protocol major version (docs/protocol.md, "Handshake").
pub const PROTOCOL_VERSION: u64 = 1;

/// `hello`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HelloResult {
    /// The protocol major version the sidecar speaks.
    pub protocol: u64,
    /// The sidecar's version.
    pub sidecar: String,
    /// `/pruner`'s subcommands, in the picker's order: the shim completes
    /// `/pruner <sub>` from them, so the list exists once, in the sidecar
    /// (absent from a sidecar older than the field: no completions).
    #[serde(default)]
    pub commands: Vec<CommandInfo>,
}

/// One `/pruner` subcommand as `hello` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandInfo {
    /// What follows `/pruner` (`status`, `now`, …).
    pub name: String,
    /// One line saying what it does (the picker's and the completion's).
    pub description: String,
}

/// The answer of `session.start`, `message.end`, `agent.end` and `command`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectsResult {
    /// What the shim carries out, in order.
    pub effects: Effects,
}

/// `turn.end`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnEndResult {
    /// What the shim carries out, in order.
    pub effects: Effects,
    /// The sidecar appended the turn's messages to its copy (the shim
    /// then keys them too).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub synced: bool,
}

/// One step of a `context` answer's render plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Step {
    /// The input messages `start..end`, unchanged.
    Keep([u64; 2]),
    /// A message the sidecar wrote.
    Message(Value),
}

/// `context`'s answer. The sidecar writes it by hand for speed
/// ([`crate::sidecar::answer`]); this is its shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextResult {
    /// `true`: the plan the shim holds still stands (no `seq`, no `steps`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unchanged: bool,
    /// The answer's number, sent back as `base`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// How many steps of the held answer come first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reuse: Option<u64>,
    /// The (rest of the) render plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<Vec<Step>>,
    /// What the shim carries out, in order.
    pub effects: Effects,
    /// The sidecar's own time for the request (asked with `timing`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub micros: Option<u64>,
}

/// `query`'s answer: the `context_tree_query` tool's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueryResult {
    /// The tool's text.
    pub text: String,
    /// The tool's details (`{results: {label: ...}}`).
    pub details: Value,
}

/// An error answer's `error`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// `internal`, `protocol-mismatch`, `unknown-method` (sidecar);
    /// `auth`, `aborted`, `transient` (shim).
    pub code: String,
    /// What went wrong.
    pub message: String,
}

/// The model an `llm.complete` asks the shim for: on the wire `"default"`
/// (the session's model) or `provider/id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum CompletionModel {
    /// The session's model (`"default"`).
    Session,
    /// `provider/id`, which the shim resolves in its model registry.
    Named(String),
}

impl From<String> for CompletionModel {
    fn from(spec: String) -> Self {
        if spec == HOST_DEFAULT_MODEL {
            CompletionModel::Session
        } else {
            CompletionModel::Named(spec)
        }
    }
}

impl From<CompletionModel> for String {
    fn from(model: CompletionModel) -> Self {
        match model {
            CompletionModel::Session => HOST_DEFAULT_MODEL.to_owned(),
            CompletionModel::Named(spec) => spec,
        }
    }
}

impl From<SummarizerModel<'_>> for CompletionModel {
    fn from(model: SummarizerModel<'_>) -> Self {
        match model {
            SummarizerModel::HostDefault => CompletionModel::Session,
            SummarizerModel::Named(spec) => CompletionModel::Named(spec.to_owned()),
        }
    }
}

/// `llm.complete` (sidecar → shim): one summarizer completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LlmCompleteParams {
    /// The model to run it on.
    pub model: CompletionModel,
    /// The effort to ask of the model, as pi-ai's `reasoningEffort`
    /// (`minimal` … `xhigh`), resolved by the sidecar from
    /// `summarizerThinking` ([`condense_core::ThinkingLevel::effort`]);
    /// `null`: send none (`default`, `off`). The shim passes it on as it is.
    #[serde(default)]
    pub reasoning_effort: Option<String>,
    /// The system prompt (`null`: none).
    pub system: Option<String>,
    /// The user prompt.
    pub user: String,
    /// The output token limit (`null`: the model's own).
    pub max_tokens: Option<u32>,
}

/// `llm.complete`'s usage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmUsage {
    /// Input tokens.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Dollars.
    pub cost: f64,
}

/// `llm.complete`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LlmCompleteResult {
    /// The completion's text.
    pub text: String,
    /// pi's stop reason (`stop`, `length`, `toolUse`, ...).
    pub stop_reason: String,
    /// Tokens and cost.
    pub usage: LlmUsage,
}

/// `llm.cancel` (sidecar → shim notification).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LlmCancelParams {
    /// The `llm.complete` request to abort.
    pub request_id: String,
}

/// `ui.effects` (sidecar → shim notification): progress while a request runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UiEffectsParams {
    /// Effects; the shim carries out `notify`, `status` and `widget` only.
    pub effects: Effects,
}

/// `protocol.error` (sidecar → shim notification): a line was lost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProtocolErrorParams {
    /// What was wrong with it.
    pub message: String,
}

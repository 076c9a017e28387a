//! The rows of the settings table: every setting `/pruner` changes, its
//! presets, and pi-condense's texts for the settings that have a
//! subcommand of their own.

use condense_core::ThinkingLevel;

use super::{label_of, list_display, names, thinking_label, Kind, Setting, Subcommand};
use crate::sidecar::commands::plural;

pub(super) const THINKING_CHOICES: &[(&str, &str)] = &ThinkingLevel::CHOICES;
pub(in crate::sidecar::commands) const PRUNE_ON_CHOICES: &[(&str, &str)] = &[
    ("agent-message", "On agent message"),
    ("on-demand", "On demand"),
];
pub(in crate::sidecar::commands) const BATCHING_CHOICES: &[(&str, &str)] =
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

const fn plain(key: &'static str, label: &'static str, kind: Kind) -> Setting {
    Setting {
        key,
        label,
        kind,
        command: None,
    }
}

/// Every setting, in the settings dialog's order.
pub(in crate::sidecar::commands) const SETTINGS: &[Setting] = &[
    plain("enabled", "Enabled", Kind::Bool),
    plain("showPruneStatusLine", "Prune status line", Kind::Bool),
    Setting {
        key: "pruneOn",
        label: "Prune trigger",
        kind: Kind::Choice(PRUNE_ON_CHOICES),
        command: Some(Subcommand {
            name: "prune-on",
            show: |c| {
                let name = c.prune_on.name();
                format!(
                    "Current prune trigger: {} ({name})",
                    label_of(PRUNE_ON_CHOICES, name)
                )
            },
            ask: Some("pruner — choose when to trigger summarization"),
            changed: |c, _| {
                format!(
                    "Prune trigger set to: {}",
                    label_of(PRUNE_ON_CHOICES, c.prune_on.name())
                )
            },
            // Validated: pi-condense saved any string here.
            invalid: |arg| {
                format!(
                    "Invalid prune trigger: {arg}. Use one of: {}.",
                    names(PRUNE_ON_CHOICES)
                )
            },
        }),
    },
    Setting {
        key: "summarizerModel",
        label: "Summarizer model",
        kind: Kind::Model,
        command: Some(Subcommand {
            name: "model",
            show: |c| {
                format!(
                    "Current summarizer model: {}\nCurrent summarizer thinking: {} ({})",
                    c.summarizer_model,
                    thinking_label(&c.summarizer_thinking),
                    c.summarizer_thinking
                )
            },
            ask: None,
            changed: |c, arg| {
                let with = if arg.contains(':') {
                    format!(" with thinking {}", c.summarizer_thinking)
                } else {
                    String::new()
                };
                format!("Summarizer model set to: {}{with}", c.summarizer_model)
            },
            invalid: |arg| {
                let suffix = arg.rsplit_once(':').map_or(arg, |(_, s)| s);
                format!(
                    "Invalid model thinking suffix: {suffix}. Use one of: {}.",
                    names(THINKING_CHOICES)
                )
            },
        }),
    },
    Setting {
        key: "summarizerThinking",
        label: "Summarizer thinking",
        kind: Kind::Choice(THINKING_CHOICES),
        command: Some(Subcommand {
            name: "thinking",
            show: |c| {
                let t = &c.summarizer_thinking;
                format!("Current summarizer thinking: {} ({t})", thinking_label(t))
            },
            ask: None,
            changed: |c, _| format!("Summarizer thinking set to: {}", c.summarizer_thinking),
            invalid: |arg| {
                format!(
                    "Invalid summarizer thinking level: {arg}. Use one of: {}.",
                    names(THINKING_CHOICES)
                )
            },
        }),
    },
    Setting {
        key: "batchingMode",
        label: "Batching mode",
        kind: Kind::Choice(BATCHING_CHOICES),
        command: Some(Subcommand {
            name: "batching",
            show: |c| {
                let name = c.batching_mode.name();
                format!(
                    "Current batching mode: {} ({name})",
                    label_of(BATCHING_CHOICES, name)
                )
            },
            ask: Some("pruner — choose batching granularity"),
            changed: |c, _| {
                format!(
                    "Batching mode set to: {}",
                    label_of(BATCHING_CHOICES, c.batching_mode.name())
                )
            },
            invalid: |arg| {
                format!(
                    "Invalid batching mode: {arg}. Use one of: {}.",
                    names(BATCHING_CHOICES)
                )
            },
        }),
    },
    plain(
        "quietOversizedSkips",
        "Quiet skip notifications",
        Kind::Bool,
    ),
    Setting {
        key: "minBatchChars",
        label: "Min batch chars",
        kind: Kind::Int(MIN_BATCH_PRESETS),
        command: Some(Subcommand {
            name: "min-batch-chars",
            show: |c| match c.min_batch_chars {
                0 => "Current minBatchChars: disabled.".to_owned(),
                n => format!("Current minBatchChars: {n} chars."),
            },
            ask: None,
            changed: |c, _| match c.min_batch_chars {
                0 => {
                    "minBatchChars set to 0 — pre-flush trivial-batch skipping disabled.".to_owned()
                }
                n => format!("minBatchChars set to {n}."),
            },
            invalid: |arg| {
                format!(
                    "Invalid minBatchChars: \"{arg}\". Expected a non-negative integer (0 disables)."
                )
            },
        }),
    },
    Setting {
        key: "recoveryGraceTurns",
        label: "Recovery grace (user turns)",
        kind: Kind::Int(GRACE_PRESETS),
        command: Some(Subcommand {
            name: "recovery-grace",
            show: |c| match c.recovery_grace_turns {
                0 => "Current recoveryGraceTurns: disabled.".to_owned(),
                n => format!(
                    "Current recoveryGraceTurns: {n} user turn{}.",
                    plural(n.into())
                ),
            },
            ask: None,
            changed: |c, _| match c.recovery_grace_turns {
                0 => "recoveryGraceTurns set to 0 — recovered outputs are prunable again at once."
                    .to_owned(),
                n => format!("recoveryGraceTurns set to {n}."),
            },
            invalid: |arg| {
                format!(
                    "Invalid recoveryGraceTurns: \"{arg}\". Expected a non-negative integer (0 disables)."
                )
            },
        }),
    },
    plain(
        "summarizerIdleTimeoutMs",
        "Summarizer idle timeout",
        Kind::Millis(IDLE_PRESETS),
    ),
    plain(
        "summarizerMaxTimeoutMs",
        "Summarizer max timeout",
        Kind::Millis(MAX_PRESETS),
    ),
    plain(
        "autoBudgetThreshold",
        "Auto-flush at context %",
        Kind::Fraction(BUDGET_PRESETS),
    ),
    Setting {
        key: "dedupByContentHash",
        label: "Dedup by content hash",
        kind: Kind::Bool,
        command: Some(Subcommand {
            name: "dedup",
            show: |c| {
                if c.dedup_by_content_hash {
                    "Content-hash dedup is ON. A tool output identical to one already summarized (same tool, same text up to line endings and trailing spaces) reuses that summary: no summarizer call.".to_owned()
                } else {
                    "Content-hash dedup is OFF. Identical outputs are summarized again like any other.".to_owned()
                }
            },
            ask: None,
            changed: |c, _| {
                let state = if c.dedup_by_content_hash { "ON" } else { "OFF" };
                format!("Content-hash dedup turned {state}.")
            },
            invalid: |arg| {
                format!("Invalid dedup value: \"{arg}\". Expected on, off, status, true, or false.")
            },
        }),
    },
    plain("chainCompression.enabled", "Chain compression", Kind::Bool),
    plain(
        "chainCompression.rollingWindow",
        "Chain window (K)",
        Kind::Int(WINDOW_PRESETS),
    ),
    plain(
        "chainCompression.stripFinalAssistantThinking",
        "Strip final thinking",
        Kind::Bool,
    ),
    plain(
        "chainCompression.fuseRangeSummary",
        "Fuse range summary",
        Kind::Bool,
    ),
    plain("purgeErrors.enabled", "Error purge", Kind::Bool),
    plain(
        "purgeErrors.cooldownTurns",
        "Error purge cooldown (turns)",
        Kind::Int(COOLDOWN_PRESETS),
    ),
    plain(
        "purgeErrors.minArgChars",
        "Error purge min arg chars",
        Kind::Int(MIN_ARG_PRESETS),
    ),
    plain("thinkingStrip.enabled", "Thinking strip", Kind::Bool),
    plain(
        "thinkingStrip.keepLastTurns",
        "Thinking strip keeps (turns)",
        Kind::Int(KEEP_TURNS_PRESETS),
    ),
    Setting {
        key: "protectedTools",
        label: "Protected tools",
        kind: Kind::List,
        command: Some(Subcommand {
            name: "protected-tools",
            show: |c| format!("Protected tools: {}", list_display(&c.protected_tools)),
            ask: Some("Protected tools (comma-separated tool names; empty or 'none' to clear)"),
            changed: |c, _| format!("Protected tools: {}", list_display(&c.protected_tools)),
            invalid: |arg| format!("Invalid protected tools: \"{arg}\"."),
        }),
    },
    Setting {
        key: "protectedPaths",
        label: "Protected paths",
        kind: Kind::List,
        command: Some(Subcommand {
            name: "protected-paths",
            show: |c| format!("Protected paths: {}", list_display(&c.protected_paths)),
            ask: Some("Protected paths (comma-separated path globs; empty or 'none' to clear)"),
            changed: |c, _| format!("Protected paths: {}", list_display(&c.protected_paths)),
            invalid: |arg| format!("Invalid protected paths: \"{arg}\"."),
        }),
    },
];

//! Turning core's [`FlushEffect`]s into session entries.
//!
//! Core says *what* a flush persists; this module says *how*: which custom
//! type, which payload fields, in pi-condense's wire format. Summaries are
//! hidden custom messages (`display: false`); everything else is a `custom`
//! entry.

use condense_core::FlushEffect;
use serde_json::{json, Map, Value};

use crate::append::{AppendError, Appender};
use crate::entries::SwitchEntryData;
use crate::entries::{
    DiagnosticEntryData, FlushMetricsEntryData, CUSTOM_TYPE_CHAIN, CUSTOM_TYPE_DEDUP_ALIAS,
    CUSTOM_TYPE_DIAGNOSTIC, CUSTOM_TYPE_FLUSH_METRICS, CUSTOM_TYPE_FRONTIER, CUSTOM_TYPE_INDEX,
    CUSTOM_TYPE_STATS, CUSTOM_TYPE_SUMMARY, CUSTOM_TYPE_SWITCH,
};

/// One entry to append.
#[derive(Debug, Clone, PartialEq)]
pub enum NewEntry {
    /// `{type: "custom", customType, data}`.
    Custom {
        /// `customType`.
        custom_type: &'static str,
        /// `data`.
        data: Value,
    },
    /// `{type: "custom_message", customType, content, display, details}`.
    CustomMessage {
        /// `customType`.
        custom_type: &'static str,
        /// `content`.
        content: Value,
        /// `display`.
        display: bool,
        /// `details`.
        details: Value,
    },
}

fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("condense's payload types always serialize")
}

/// The entry an effect is persisted as.
pub fn entry_for(effect: &FlushEffect) -> NewEntry {
    match effect {
        FlushEffect::DedupAlias { new, original } => {
            let mut m = Map::new();
            m.insert("newToolCallId".into(), json!(new.id));
            m.insert("originalToolCallId".into(), json!(original.id));
            if let Some(ts) = new.result_timestamp {
                m.insert("newResultTimestamp".into(), json!(ts));
            }
            if let Some(ts) = original.result_timestamp {
                m.insert("originalResultTimestamp".into(), json!(ts));
            }
            NewEntry::Custom {
                custom_type: CUSTOM_TYPE_DEDUP_ALIAS,
                data: Value::Object(m),
            }
        }
        FlushEffect::Summary {
            content,
            refs,
            tool_names,
            turn_index,
            timestamp,
        } => NewEntry::CustomMessage {
            custom_type: CUSTOM_TYPE_SUMMARY,
            content: Value::String(content.clone()),
            display: false,
            details: json!({
                "toolCallRefs": to_value(refs),
                "toolNames": tool_names,
                "turnIndex": turn_index,
                "timestamp": timestamp,
            }),
        },
        FlushEffect::Index {
            records,
            backfilled,
            refs,
        } => {
            let mut m = Map::new();
            m.insert("toolCalls".into(), to_value(records));
            if *backfilled {
                m.insert("backfilled".into(), Value::Bool(true));
            }
            if let Some(refs) = refs {
                m.insert("refs".into(), to_value(refs));
            }
            NewEntry::Custom {
                custom_type: CUSTOM_TYPE_INDEX,
                data: Value::Object(m),
            }
        }
        FlushEffect::Chain(c) => NewEntry::Custom {
            custom_type: CUSTOM_TYPE_CHAIN,
            data: to_value(c),
        },
        FlushEffect::Frontier(f) => NewEntry::Custom {
            custom_type: CUSTOM_TYPE_FRONTIER,
            data: to_value(f),
        },
        FlushEffect::Stats(s) => NewEntry::Custom {
            custom_type: CUSTOM_TYPE_STATS,
            data: to_value(s),
        },
    }
}

/// The entry a cache-aware switch is persisted as.
pub fn switch_entry(data: &SwitchEntryData) -> NewEntry {
    NewEntry::Custom {
        custom_type: CUSTOM_TYPE_SWITCH,
        data: to_value(data),
    }
}

/// Appends effects in order, one whole line each. Returns the new entry ids.
pub fn append_effects(
    appender: &mut Appender,
    effects: &[FlushEffect],
    now_ms: i64,
) -> Result<Vec<String>, AppendError> {
    effects
        .iter()
        .map(|e| match entry_for(e) {
            NewEntry::Custom { custom_type, data } => {
                appender.append_custom(custom_type, &data, now_ms)
            }
            NewEntry::CustomMessage {
                custom_type,
                content,
                display,
                details,
            } => appender.append_custom_message(custom_type, &content, display, &details, now_ms),
        })
        .collect()
}

/// A payload as the JSON value JavaScript would have written: whole
/// floats as integers (`37`, not `37.0`), so the host appends what
/// pi-condense would have.
fn js_value<T: serde::Serialize>(v: &T) -> Value {
    crate::json::to_string(v)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or(Value::Null)
}

/// A `context-prune-diagnostic` entry.
pub fn diagnostic_entry(diagnostic: &condense_core::Diagnostic) -> NewEntry {
    NewEntry::Custom {
        custom_type: CUSTOM_TYPE_DIAGNOSTIC,
        data: js_value(&DiagnosticEntryData {
            kind: diagnostic.kind.as_str().to_owned(),
            detail: diagnostic.detail.clone(),
            extra: Map::new(),
        }),
    }
}

/// A `context-prune-flush-metrics` entry.
pub fn flush_metrics_entry(data: &FlushMetricsEntryData) -> NewEntry {
    NewEntry::Custom {
        custom_type: CUSTOM_TYPE_FLUSH_METRICS,
        data: js_value(data),
    }
}

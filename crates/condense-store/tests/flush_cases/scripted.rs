//! A case file's values as engine types and back: scripted messages and
//! summarizer answers in, appended entries out (in the case-file shape).

use condense_core::Message;
use condense_core::{FlushEffect, JobResult, Usage};
use condense_store::effects::{entry_for, NewEntry};
use serde_json::{json, Value};

/// `JSON.stringify` text (key order kept, numbers as JavaScript prints them).
pub fn js(v: &Value) -> String {
    condense_store::json::to_string(v).expect("values serialize")
}

/// An effect as the session entry it is appended as (case-file shape).
pub fn effect_value(effect: &FlushEffect) -> Value {
    match entry_for(effect) {
        NewEntry::Custom { custom_type, data } => json!({
            "type": "custom", "customType": custom_type, "data": data
        }),
        NewEntry::CustomMessage {
            custom_type,
            content,
            display,
            details,
        } => json!({
            "type": "custom_message", "customType": custom_type,
            "content": content, "display": display, "details": details
        }),
    }
}

pub fn messages_of(values: &[Value], what: &str) -> Result<Vec<Message>, String> {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| Message::from_value(v).map_err(|e| format!("{what} {i}: {e}")))
        .collect()
}

pub fn usage_of(v: Option<&Value>) -> Usage {
    let Some(u) = v else {
        return Usage::default();
    };
    Usage {
        input_tokens: u.get("input").and_then(Value::as_u64).unwrap_or(0),
        output_tokens: u.get("output").and_then(Value::as_u64).unwrap_or(0),
        cost: u.get("cost").and_then(Value::as_f64).unwrap_or(0.0),
    }
}

pub fn job_result(v: &Value) -> Result<JobResult, String> {
    if let Some(text) = v.get("text").and_then(Value::as_str) {
        return Ok(JobResult::Summary {
            text: text.to_owned(),
            usage: usage_of(v.get("usage")),
        });
    }
    if v.get("unusable") == Some(&Value::Bool(true)) {
        return Ok(JobResult::Unusable { usage: None });
    }
    if let Some(message) = v.get("failed").and_then(Value::as_str) {
        return Ok(JobResult::Failed {
            message: message.to_owned(),
            usage: None,
        });
    }
    Err(format!("bad scripted result {v}"))
}

pub fn results_of(values: &[Value]) -> Result<Vec<JobResult>, String> {
    values.iter().map(job_result).collect()
}

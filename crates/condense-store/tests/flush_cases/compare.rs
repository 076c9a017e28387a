//! Comparing what a flush or a compression produced with what the case
//! expects; each difference is pushed as a message, so a case reports all
//! of them at once.

use condense_core::{FlushOutcome, Notice, NoticeLevel};
use serde_json::{json, Value};

use crate::scripted::js;

/// Compares appended entries with the expected ones.
pub fn check_effects(label: &str, expected: &[Value], actual: &[Value], out: &mut Vec<String>) {
    let kinds = |v: &[Value]| -> Vec<String> {
        v.iter()
            .map(|e| e["customType"].as_str().unwrap_or("?").to_owned())
            .collect()
    };
    if expected.len() != actual.len() {
        out.push(format!(
            "{label}: expected {} entries {:?}, got {} {:?}",
            expected.len(),
            kinds(expected),
            actual.len(),
            kinds(actual)
        ));
    }
    for (i, (e, a)) in expected.iter().zip(actual).enumerate() {
        if e["customType"] != a["customType"] {
            out.push(format!(
                "{label}[{i}]: expected {}, got {}",
                e["customType"], a["customType"]
            ));
            continue;
        }
        let subset = e.get("subset") == Some(&Value::Bool(true));
        let fields: &[&str] = if a["type"] == "custom_message" {
            &["content", "details"]
        } else {
            &["data"]
        };
        for f in fields {
            let (Some(ev), Some(av)) = (e.get(*f), a.get(*f)) else {
                if e.get(*f).is_some() || !subset {
                    out.push(format!("{label}[{i}] {}: `{f}` missing", e["customType"]));
                }
                continue;
            };
            let av = match (subset, ev, av) {
                (true, Value::Object(em), Value::Object(am)) => Value::Object(
                    am.iter()
                        .filter(|(k, _)| em.contains_key(*k))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                ),
                _ => av.clone(),
            };
            let (es, as_) = (js(ev), js(&av));
            if es != as_ {
                let note = if *ev == av {
                    " (same JSON value: key order differs)"
                } else {
                    ""
                };
                out.push(format!(
                    "{label}[{i}] {} `{f}` differs{note}\n  expected: {es}\n  actual:   {as_}",
                    e["customType"]
                ));
            }
        }
    }
}

pub fn check_notices(label: &str, expected: &[Value], actual: &[Notice], out: &mut Vec<String>) {
    let ok = expected.len() == actual.len()
        && expected.iter().zip(actual).all(|(e, a)| {
            e["level"].as_str() == Some(NoticeLevel::as_str(a.level))
                && e.get("text")
                    .and_then(Value::as_str)
                    .filter(|t| *t != a.text)
                    .is_none()
                && e.get("prefix")
                    .and_then(Value::as_str)
                    .filter(|p| !a.text.starts_with(p))
                    .is_none()
        });
    if !ok {
        let actual: Vec<Value> = actual
            .iter()
            .map(|n| json!({"level": NoticeLevel::as_str(n.level), "text": n.text}))
            .collect();
        out.push(format!(
            "{label}: notices differ\n  expected: {}\n  actual:   {}",
            js(&Value::Array(expected.to_vec())),
            js(&Value::Array(actual))
        ));
    }
}

pub fn outcome_name(o: &FlushOutcome) -> String {
    match o {
        FlushOutcome::Empty => "empty".into(),
        FlushOutcome::Processed(f) => f.as_str().into(),
        FlushOutcome::SummarizerFailed(_) => "summarizer-failed".into(),
    }
}

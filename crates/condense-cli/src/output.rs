//! What the commands print.

use condense_core::PageRequest;
use condense_core::{render as render_branch, RenderSettings};
use condense_core::{Message, Role};

use crate::load::Loaded;
use crate::stdout::write_all;
use crate::CliError;

/// How `render` prints.
#[derive(Debug, Clone, Copy)]
pub enum RenderMode {
    /// The message array as pi message JSON.
    Json,
    /// One readable line per message.
    Pretty,
    /// Per-message sizes before and after.
    Diff,
}

fn excerpt(m: &Message) -> String {
    // A message a `Value` cannot hold shows as no content.
    let v = m.to_value().unwrap_or_default();
    let text = match v.get("content") {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Array(blocks)) => blocks
            .iter()
            .map(|b| match b.get("type").and_then(|t| t.as_str()) {
                Some("text") => b
                    .get("text")
                    .and_then(|t| t.as_str())
                    .unwrap_or("")
                    .to_owned(),
                Some("thinking") => "[thinking]".to_owned(),
                Some("toolCall") => format!(
                    "[call {} {}]",
                    b.get("name").and_then(|t| t.as_str()).unwrap_or("?"),
                    b.get("id").and_then(|t| t.as_str()).unwrap_or("?")
                ),
                Some(other) => format!("[{other}]"),
                None => String::new(),
            })
            .collect::<Vec<_>>()
            .join(" "),
        _ => v
            .get("summary")
            .or_else(|| v.get("command"))
            .and_then(|t| t.as_str())
            .unwrap_or("")
            .to_owned(),
    };
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut cut: String = one_line.chars().take(100).collect();
    if cut.len() < one_line.len() {
        cut.push('…');
    }
    cut
}

/// `condense render`.
pub fn render(loaded: &Loaded, mode: RenderMode) -> Result<(), CliError> {
    let settings = RenderSettings {
        config: &loaded.config,
        protection: &loaded.protection,
    };
    let r = render_branch(&loaded.messages, &loaded.state, &settings);
    let output = r.messages(&loaded.messages);
    match mode {
        RenderMode::Json => {
            let mut text =
                String::with_capacity(output.iter().map(|m| m.size() + 1).sum::<usize>() + 2);
            text.push('[');
            for (i, m) in output.iter().enumerate() {
                if i > 0 {
                    text.push(',');
                }
                text.push_str(&m.json());
            }
            text.push_str("]\n");
            write_all(&text)
        }
        RenderMode::Pretty => {
            let mut text = String::new();
            for (i, m) in output.iter().enumerate() {
                let role = m.role().map_or("?", Role::as_str);
                text.push_str(&format!(
                    "{i:>4} {role:<17} {:>7}  {}\n",
                    m.size(),
                    excerpt(m)
                ));
            }
            write_all(&text)
        }
        RenderMode::Diff => {
            let mut text = String::from("  in  out  role               before    after  change\n");
            let (before, after) = match &r.plan {
                Some(p) => (p.before_chars, p.after_chars),
                None => {
                    let n = condense_core::array_chars(loaded.messages.iter().map(Message::size));
                    (n, n)
                }
            };
            let rows = diff_rows(loaded, r.plan.as_ref());
            for row in rows {
                text.push_str(&row);
                text.push('\n');
            }
            let pct = if before > 0 {
                100.0 * (before as f64 - after as f64) / before as f64
            } else {
                0.0
            };
            text.push_str(&format!(
                "total: {before} -> {after} chars (~{} -> ~{} tokens, -{pct:.1}%)\n",
                condense_core::chars_to_tokens(before),
                condense_core::chars_to_tokens(after)
            ));
            write_all(&text)
        }
    }
}

fn diff_rows(loaded: &Loaded, plan: Option<&condense_core::RenderPlan>) -> Vec<String> {
    use condense_core::PlanStep;
    let input = &loaded.messages;
    let mut rows = Vec::new();
    let role = |m: &Message| m.role().map_or("?", Role::as_str).to_owned();
    let Some(plan) = plan else {
        for (i, m) in input.iter().enumerate() {
            rows.push(format!(
                "{i:>4} {i:>4}  {:<17} {:>7} {:>8}  =",
                role(m),
                m.size(),
                m.size()
            ));
        }
        return rows;
    };
    let mut next_in = 0usize;
    let mut out_i = 0usize;
    for step in &plan.steps {
        match step {
            PlanStep::Keep(r) => {
                for (i, m) in input.iter().enumerate().take(r.start).skip(next_in) {
                    rows.push(format!(
                        "{i:>4}    -  {:<17} {:>7} {:>8}  dropped",
                        role(m),
                        m.size(),
                        0
                    ));
                }
                for i in r.clone() {
                    let m = &input[i];
                    rows.push(format!(
                        "{i:>4} {out_i:>4}  {:<17} {:>7} {:>8}  =",
                        role(m),
                        m.size(),
                        m.size()
                    ));
                    out_i += 1;
                }
                next_in = r.end;
            }
            PlanStep::New(m) => {
                // A new message replaces the next input message of the same
                // role and tool call when there is one; otherwise it is inserted.
                let replaces = input.get(next_in).filter(|o| {
                    o.role() == m.role()
                        && o.skeleton().tool_call_id == m.skeleton().tool_call_id
                        && o.timestamp() == m.timestamp()
                });
                match replaces {
                    Some(o) => {
                        rows.push(format!(
                            "{next_in:>4} {out_i:>4}  {:<17} {:>7} {:>8}  replaced",
                            role(m),
                            o.size(),
                            m.size()
                        ));
                        next_in += 1;
                    }
                    None => rows.push(format!(
                        "   + {out_i:>4}  {:<17} {:>7} {:>8}  inserted",
                        role(m),
                        0,
                        m.size()
                    )),
                }
                out_i += 1;
            }
        }
    }
    for (i, m) in input.iter().enumerate().skip(next_in) {
        rows.push(format!(
            "{i:>4}    -  {:<17} {:>7} {:>8}  dropped",
            role(m),
            m.size(),
            0
        ));
    }
    rows
}

/// `condense query`: the index, then the session's whole branch for a raw
/// id the index does not know, as the sidecar answers it.
pub fn query(loaded: &Loaded, refs: &[String], page: PageRequest) -> Result<(), CliError> {
    let out = condense_engine::query::answer(
        &loaded.state,
        refs,
        page,
        &loaded.messages,
        Some(&loaded.path),
        &loaded.blob_dir,
    );
    if out.results.is_empty() {
        write_all(&out.text)?;
        return Err(CliError::Data(format!("no record for {}", refs.join(", "))));
    }
    write_all(&out.text)
}

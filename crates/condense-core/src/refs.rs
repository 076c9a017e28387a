//! Per-bullet refs in summaries.
//!
//! The summarizer sees each call labelled `[[N:toolname]]` and is asked to
//! start that call's first bullet with the label. [`substitute_inline_refs`]
//! turns a line-leading label into the call's short ref `` `tN` `` when `N`
//! is in range and the name matches (case-insensitively); a mismatched label
//! is stripped, and so is any label left anywhere else. Fenced code blocks
//! are left alone. [`refs_footer`] is the flat list appended to every summary.

use crate::records::SummaryRef;

/// The footer appended to a summary: every ref of the batch, and how to use them.
pub fn refs_footer(refs: &[SummaryRef]) -> String {
    let list: Vec<String> = refs.iter().map(|r| format!("`{}`", r.short_id)).collect();
    format!(
        "\n\n---\n**Summarized tool refs**: {}\nUse `context_tree_query` with these refs to retrieve the original full outputs.",
        list.join(", ")
    )
}

/// Parses a `[[N:name]]` label at the start of `s`: (N, name, label length).
fn parse_label(s: &str) -> Option<(usize, &str, usize)> {
    let rest = s.strip_prefix("[[")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || rest.as_bytes().get(digits) != Some(&b':') {
        return None;
    }
    let n: usize = rest[..digits].parse().ok()?;
    let after = &rest[digits + 1..];
    let name_len = after.find([']', '\n'])?;
    if name_len == 0 || !after[name_len..].starts_with("]]") {
        return None;
    }
    Some((n, &after[..name_len], 2 + digits + 1 + name_len + 2))
}

/// Length of the leading JavaScript-`\s` whitespace of `s`.
fn ws_len(s: &str) -> usize {
    s.len()
        - s.trim_start_matches(|c: char| c.is_whitespace() || c == '\u{feff}')
            .len()
}

/// Rewrites labels in one unfenced stretch of text.
fn substitute_segment(text: &str, refs: &[SummaryRef], tool_names: &[String]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at_line_start = true;
    let mut rest = text;
    while !rest.is_empty() {
        if at_line_start {
            // `^(\s*(?:[-*]\s+)?)` then a label.
            let mut prefix = ws_len(rest);
            let after_ws = &rest[prefix..];
            if after_ws.starts_with(['-', '*']) {
                let w = ws_len(&after_ws[1..]);
                if w > 0 {
                    prefix += 1 + w;
                }
            }
            if let Some((n, name, len)) = parse_label(&rest[prefix..]) {
                out.push_str(&rest[..prefix]);
                let valid = n >= 1
                    && n <= refs.len()
                    && tool_names
                        .get(n - 1)
                        .is_some_and(|t| t.to_lowercase() == name.to_lowercase());
                if valid {
                    out.push_str(&format!("`{}` ", refs[n - 1].short_id));
                }
                let tail = &rest[prefix + len..];
                rest = &tail[ws_len(tail)..];
                at_line_start = false;
                continue;
            }
        }
        // Anywhere else: strip a stray label (and the whitespace after it).
        if let Some((_, _, len)) = parse_label(rest) {
            let tail = &rest[len..];
            rest = &tail[ws_len(tail)..];
            continue;
        }
        let c = rest.chars().next().expect("non-empty");
        out.push(c);
        at_line_start = c == '\n';
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// Substitutes `[[N:tool]]` labels in a summary (see the module docs).
/// `tool_names[i]` is the name of the call labelled `i + 1`.
pub fn substitute_inline_refs(text: &str, refs: &[SummaryRef], tool_names: &[String]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut segment = String::new();
    let mut in_fence = false;
    for line in text.split_inclusive('\n') {
        let is_fence = line.trim_start().starts_with("```");
        if in_fence {
            out.push_str(line);
            if is_fence {
                in_fence = false;
            }
        } else if is_fence {
            out.push_str(&substitute_segment(&segment, refs, tool_names));
            segment.clear();
            out.push_str(line);
            in_fence = true;
        } else {
            segment.push_str(line);
        }
    }
    out.push_str(&substitute_segment(&segment, refs, tool_names));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(n: usize) -> Vec<SummaryRef> {
        (1..=n)
            .map(|i| SummaryRef {
                short_id: format!("t{}", i + 10),
                tool_call_id: format!("c{i}"),
                result_timestamp: Some(i as i64),
            })
            .collect()
    }

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn footer_text() {
        assert_eq!(
            refs_footer(&refs(2)),
            "\n\n---\n**Summarized tool refs**: `t11`, `t12`\nUse `context_tree_query` with these refs to retrieve the original full outputs."
        );
    }

    #[test]
    fn labels_become_refs_or_vanish() {
        let text = "- [[1:read]] read a.rs\n* [[2:BASH]]  ran ls\n  [[3:read]] out of range\n- [[2:read]] wrong name\nmid [[1:read]] stray\n[[9:x]]";
        let out = substitute_inline_refs(text, &refs(2), &names(&["read", "bash"]));
        assert_eq!(
            out,
            "- `t11` read a.rs\n* `t12` ran ls\n  out of range\n- wrong name\nmid stray\n"
        );
    }

    #[test]
    fn fenced_code_is_left_alone() {
        let text = "- [[1:read]] x\n```\n[[1:read]] literal\n```\n[[1:read]] y";
        let out = substitute_inline_refs(text, &refs(1), &names(&["read"]));
        assert_eq!(out, "- `t11` x\n```\n[[1:read]] literal\n```\n`t11` y");
    }

    #[test]
    fn not_labels_stay() {
        let text = "[[a:b]] [[1:]] [1:read] [[1:re\nad]]";
        assert_eq!(
            substitute_inline_refs(text, &refs(1), &names(&["read"])),
            text
        );
    }
}

//! A pi session file written from messages the proxy's view gives: the
//! header, then one `message` entry per message, chained by `parentId`,
//! each carrying the usage and time the agent recorded. This is how
//! `simulate` reads Claude Code's transcripts and Codex's rollouts: as the
//! pi sessions it already replays.

use condense_host_proxy::view::{self, Usage};
use condense_store::time::format_iso;
use serde_json::json;

/// One message as recorded: its view, the usage of the call that produced
/// it (assistant messages only), and when (epoch milliseconds).
pub struct Recorded<'a> {
    pub view: &'a str,
    pub usage: Option<Usage>,
    pub at: i64,
}

/// The session `session`'s file, its header stamped `started_at`.
pub fn write<'a>(
    session: &str,
    started_at: i64,
    messages: impl IntoIterator<Item = Recorded<'a>>,
) -> Result<String, String> {
    let header = json!({
        "type": "session",
        "version": 3,
        "id": session,
        "timestamp": format_iso(started_at),
        "cwd": "",
    });
    let mut out = vec![header.to_string()];
    let mut parent: Option<String> = None;
    for (n, m) in messages.into_iter().enumerate() {
        let message = view::with_facts(m.view, m.usage.as_ref(), m.at);
        let id = format!("{n:08x}");
        let raw = serde_json::value::RawValue::from_string(message)
            .map_err(|e| format!("converting a message: {e}"))?;
        out.push(
            json!({
                "type": "message",
                "id": id,
                "parentId": parent,
                "timestamp": format_iso(m.at),
                "message": raw,
            })
            .to_string(),
        );
        parent = Some(id);
    }
    Ok(out.join("\n") + "\n")
}

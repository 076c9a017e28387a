//! Which conversation a request belongs to, and the sessions open.
//!
//! A conversation is keyed by the client's session id (Claude Code's
//! `X-Claude-Code-Session-Id` header, else `metadata.user_id`'s
//! `session_id`) and the first message of its history, so a sub-agent,
//! which shares its parent's session id but starts from its own prompt, is
//! a conversation of its own, and so is the history Claude Code's
//! compaction starts. A client that sends no id is keyed by its system
//! prompt and first message.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde::Deserialize;
use sha1::{Digest, Sha1};

use crate::anthropic::{self, Block, WireRequest};
use crate::openai;
use crate::session::{Credentials, Prepared, ProxySession, SessionOptions};
use crate::view::Unit;

/// How many sessions stay open; past it, those no request is using are
/// closed (a later request reopens one from its log).
const MAX_OPEN: usize = 64;

/// How many conversations' heads are remembered for the fast lookup.
const MAX_HEADS: usize = 1024;

/// The open sessions, by key.
pub struct Sessions {
    dir: PathBuf,
    options: SessionOptions,
    open: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<ProxySession>>>>,
    /// Each conversation's last request through its first message: a body
    /// that starts so continues it, and is read after it without reading
    /// the whole history to find its key.
    heads: std::sync::Mutex<HashMap<String, String>>,
}

#[derive(Deserialize)]
struct Metadata {
    #[serde(default)]
    user_id: Option<String>,
}

#[derive(Deserialize)]
struct UserId {
    #[serde(default)]
    session_id: Option<String>,
}

fn hex(bytes: &[u8], n: usize) -> String {
    bytes.iter().take(n).map(|b| format!("{b:02x}")).collect()
}

/// A session id as a file name: its letters, digits, `-` and `_`, at most
/// 64 of them.
fn sanitize(id: &str) -> String {
    id.chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .take(64)
        .collect()
}

/// The client's session id: the header, else `metadata.user_id`'s.
fn client_session_id(header: Option<&str>, request: &WireRequest<'_>) -> Option<String> {
    if let Some(h) = header.map(sanitize).filter(|h| !h.is_empty()) {
        return Some(h);
    }
    let meta: Metadata = serde_json::from_str(request.metadata.as_deref()?).ok()?;
    let user: UserId = serde_json::from_str(&meta.user_id?).ok()?;
    user.session_id
        .map(|s| sanitize(&s))
        .filter(|s| !s.is_empty())
}

/// The conversation's key (a file name).
pub fn session_key(header: Option<&str>, request: &WireRequest<'_>, units: &[Unit]) -> String {
    let mut h = Sha1::new();
    let first = units.first().map_or("", |u| u.view.as_str());
    match client_session_id(header, request) {
        Some(id) => {
            h.update(first.as_bytes());
            format!("{id}-{}", hex(&h.finalize(), 6))
        }
        None => {
            h.update(request.system.as_deref().unwrap_or("").as_bytes());
            h.update([0]);
            h.update(first.as_bytes());
            format!("h-{}", hex(&h.finalize(), 10))
        }
    }
}

/// An OpenAI conversation's key (a file name): the client's id
/// (`prompt_cache_key`, else the `session-id` header) and the view of its
/// first prompts (through the first user message), or those alone.
pub fn openai_session_key(
    header: Option<&str>,
    request: &openai::ItemsRequest<'_>,
    units: &[Unit],
) -> String {
    let mut h = Sha1::new();
    let head = units.iter().position(|u| u.opens_run).map_or(1, |p| p + 1);
    for u in units.iter().take(head) {
        h.update(u.view.as_bytes());
        h.update([0]);
    }
    let id = request
        .cache_key
        .as_deref()
        .or(header)
        .map(sanitize)
        .filter(|s| !s.is_empty());
    match id {
        Some(id) => format!("oa-{id}-{}", hex(&h.finalize(), 6)),
        None => format!("oa-h-{}", hex(&h.finalize(), 10)),
    }
}

/// Whether a history holds a tool result: before the first, there is
/// nothing to prune and no session is made.
fn has_results(request: &WireRequest<'_>) -> bool {
    request.messages.iter().any(|m| {
        m.blocks
            .iter()
            .any(|(b, _)| matches!(b, Block::ToolResult { .. }))
    })
}

impl Sessions {
    /// Sessions logged under `dir`.
    pub fn new(dir: PathBuf, options: SessionOptions) -> Sessions {
        Sessions {
            dir,
            options,
            open: std::sync::Mutex::new(HashMap::new()),
            heads: std::sync::Mutex::new(HashMap::new()),
        }
    }

    /// The directory the logs are in.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    fn session(
        &self,
        key: &str,
        now_ms: i64,
    ) -> Result<Arc<tokio::sync::Mutex<ProxySession>>, String> {
        let mut open = self
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(s) = open.get(key) {
            return Ok(s.clone());
        }
        if open.len() >= MAX_OPEN {
            open.retain(|_, s| Arc::strong_count(s) > 1);
        }
        let s = ProxySession::open(&self.dir, key, self.options.clone(), now_ms)
            .map_err(|e| e.to_string())?;
        let s = Arc::new(tokio::sync::Mutex::new(s));
        open.insert(key.to_owned(), s.clone());
        Ok(s)
    }

    /// Forgets an open session (after a panic inside it: the next request
    /// reopens it from its log).
    pub fn close(&self, key: &str) {
        self.open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(key);
    }

    /// The conversation of the client's session `id` whose last request
    /// `body` continues (it starts with that request's bytes through its
    /// first message).
    fn continued(&self, prefix: &str, body: &str) -> Option<String> {
        self.heads
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .filter(|(k, h)| k.starts_with(prefix) && !h.is_empty())
            .find(|(_, h)| body.starts_with(h.as_str()))
            .map(|(k, _)| k.clone())
    }

    fn note_head(&self, key: &str, head: Option<&str>) {
        let mut heads = self
            .heads
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if heads.len() >= MAX_HEADS && !heads.contains_key(key) {
            heads.clear();
        }
        match head {
            Some(h) => {
                heads.insert(key.to_owned(), h.to_owned());
            }
            None => {
                heads.remove(key);
            }
        }
    }

    /// The conversation `body` belongs to, and the body to send upstream.
    /// Returns the key (`None` when no session applies) with the result.
    pub async fn prepare(
        &self,
        header: Option<&str>,
        credentials: &Credentials,
        body: &str,
        now_ms: i64,
    ) -> (Option<String>, Prepared) {
        // The fast way: a request continuing one this proxy prepared.
        let id = header.map(sanitize).filter(|h| !h.is_empty());
        if let Some(key) = id
            .as_deref()
            .and_then(|id| self.continued(&format!("{id}-"), body))
        {
            if let Ok(session) = self.session(&key, now_ms) {
                let mut session = session.lock().await;
                let prepared = session.prepare_text(body, credentials, now_ms).await;
                self.note_head(&key, session.head());
                return match prepared {
                    Ok(p) => (Some(key), p),
                    Err(e) => (
                        Some(key),
                        Prepared {
                            body: None,
                            notices: vec![format!("condense: request sent unchanged: {e}")],
                        },
                    ),
                };
            }
        }
        let request = match anthropic::read_request(body) {
            Ok(r) => r,
            Err(e) => {
                return (
                    None,
                    Prepared {
                        body: None,
                        notices: vec![format!("condense: request sent unchanged: {e}")],
                    },
                )
            }
        };
        let units = anthropic::units(&request);
        let key = session_key(header, &request, &units);
        let exists = self.dir.join(format!("{key}.jsonl")).exists();
        if !exists && !has_results(&request) {
            return (None, Prepared::default());
        }
        let session = match self.session(&key, now_ms) {
            Ok(s) => s,
            Err(e) => {
                return (
                    Some(key),
                    Prepared {
                        body: None,
                        notices: vec![format!("condense: request sent unchanged: {e}")],
                    },
                )
            }
        };
        let mut session = session.lock().await;
        let prepared = session.prepare(request, units, credentials, now_ms).await;
        self.note_head(&key, session.head());
        (Some(key), prepared)
    }

    /// [`Sessions::prepare`] of an OpenAI body (`format`): the conversation
    /// is keyed by the client's id (`prompt_cache_key`, else the
    /// `session-id` header) and its first prompts. A body that continues a
    /// conversation this proxy prepared (its session id, its first items)
    /// is read after that conversation's previous request.
    pub async fn prepare_openai(
        &self,
        header: Option<&str>,
        credentials: &Credentials,
        body: &str,
        format: openai::Format,
        now_ms: i64,
    ) -> (Option<String>, Prepared) {
        let unchanged = |key: Option<String>, e: &dyn std::fmt::Display| {
            (
                key,
                Prepared {
                    body: None,
                    notices: vec![format!("condense: request sent unchanged: {e}")],
                },
            )
        };
        let id = header.map(sanitize).filter(|h| !h.is_empty());
        let prefix = id.map_or_else(|| "oa-".to_owned(), |id| format!("oa-{id}-"));
        if let Some(key) = self.continued(&prefix, body) {
            if let Ok(session) = self.session(&key, now_ms) {
                let mut session = session.lock().await;
                let prepared = session
                    .prepare_items(body, format, credentials, now_ms)
                    .await;
                self.note_head(&key, session.head());
                return match prepared {
                    Ok(p) => (Some(key), p),
                    Err(e) => unchanged(Some(key), &e),
                };
            }
        }
        let request = match openai::read_request(body, format) {
            Ok(r) => r,
            Err(e) => return unchanged(None, &e),
        };
        if request.query_tool().is_none() {
            return (None, Prepared::default());
        }
        let units = openai::units(&request);
        let key = openai_session_key(header, &request, &units);
        let has_results = request.items.iter().any(|i| i.output.is_some());
        if !self.dir.join(format!("{key}.jsonl")).exists() && !has_results {
            return (None, Prepared::default());
        }
        let session = match self.session(&key, now_ms) {
            Ok(s) => s,
            Err(e) => return unchanged(Some(key), &e),
        };
        let mut session = session.lock().await;
        let prepared = session
            .prepare_read(request, units, credentials, now_ms)
            .await;
        self.note_head(&key, session.head());
        (Some(key), prepared)
    }

    /// The session `key`, if it is open (never opened for this).
    fn if_open(&self, key: &str) -> Option<Arc<tokio::sync::Mutex<ProxySession>>> {
        self.open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(key)
            .cloned()
    }

    /// Records the usage an answer in the session `key` reported, if that
    /// session is open.
    pub async fn record_usage(&self, key: &str, usage: crate::view::Usage) {
        if let Some(s) = self.if_open(key) {
            s.lock().await.record_usage(usage);
        }
    }

    /// Syncs the session `key`'s log to disk, if it is open.
    pub async fn sync(&self, key: &str) {
        if let Some(s) = self.if_open(key) {
            s.lock().await.sync_log();
        }
    }

    /// How many of the session `key`'s messages are parked in its log, of
    /// how many it holds.
    pub async fn parked(&self, key: &str, now_ms: i64) -> Result<(usize, usize), String> {
        let session = self.session(key, now_ms)?;
        let session = session.lock().await;
        Ok((session.parked(), session.messages().len()))
    }

    /// `context_tree_query` in the session `key`.
    pub async fn query(
        &self,
        key: &str,
        ids: &[String],
        page: condense_core::PageRequest,
        now_ms: i64,
    ) -> Result<serde_json::Value, String> {
        let session = self.session(key, now_ms)?;
        let session = session.lock().await;
        Ok(session.query(ids, page))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sub_agent_is_its_own_conversation() {
        let a = r#"{"messages":[{"role":"user","content":"task A"}]}"#;
        let b = r#"{"messages":[{"role":"user","content":"task B"}]}"#;
        let ra = anthropic::read_request(a).unwrap();
        let rb = anthropic::read_request(b).unwrap();
        let ka = session_key(Some("s-1"), &ra, &anthropic::units(&ra));
        let kb = session_key(Some("s-1"), &rb, &anthropic::units(&rb));
        assert!(ka.starts_with("s-1-") && kb.starts_with("s-1-"));
        assert_ne!(ka, kb);
        assert_eq!(ka, session_key(Some("s-1"), &ra, &anthropic::units(&ra)));
    }

    #[test]
    fn the_metadata_session_id_and_the_hash_fallback() {
        let body = r#"{"metadata":{"user_id":"{\"session_id\":\"abc/../x\"}"},"messages":[{"role":"user","content":"hi"}]}"#;
        let r = anthropic::read_request(body).unwrap();
        assert!(session_key(None, &r, &anthropic::units(&r)).starts_with("abcx-"));
        let body = r#"{"system":"s","messages":[{"role":"user","content":"hi"}]}"#;
        let r = anthropic::read_request(body).unwrap();
        assert!(session_key(None, &r, &anthropic::units(&r)).starts_with("h-"));
    }
}

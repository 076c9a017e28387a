//! The protocol's lines: reading one within the size limit, the id of a
//! request serde cannot read, and the error answers a failed request gets.

use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// The longest line accepted (64 MiB).
pub const MAX_LINE: usize = 64 << 20;
/// An error answer to the request whose id is the JSON text `id`.
pub(crate) fn error_line(id: &str, message: &str) -> String {
    format!(
        r#"{{"id":{id},"error":{{"code":"internal","message":{}}}}}"#,
        Value::String(message.to_owned())
    )
}

/// The error code of a request the sidecar's copy of the context cannot
/// honour (a `keep` past the messages it holds, a message it cannot read):
/// the host sends its whole list next time and passes this call's messages
/// unchanged.
pub const OUT_OF_SYNC: &str = "out-of-sync";

/// An `out-of-sync` error answer to the request whose id is `id`.
pub(crate) fn out_of_sync_line(id: &str, message: &str) -> String {
    format!(
        r#"{{"id":{id},"error":{{"code":"{OUT_OF_SYNC}","message":{}}}}}"#,
        Value::String(message.to_owned())
    )
}

/// Reads every message of a request, or says which one is not a message.
pub(crate) fn read_messages(
    raw: &[Box<serde_json::value::RawValue>],
    what: &str,
) -> Result<Vec<condense_core::Message>, String> {
    raw.iter()
        .enumerate()
        .map(|(i, m)| {
            condense_core::Message::from_json(m.get())
                .map_err(|e| format!("{what}[{i}] is not a message ({e}); send the whole context"))
        })
        .collect()
}

/// What a panic said.
pub(crate) fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown failure".to_owned())
}

/// Why a request's task ended without an answer.
pub(crate) fn failure_text(e: tokio::task::JoinError) -> String {
    match e.try_into_panic() {
        Ok(panic) => format!("the request failed: {}", panic_text(&*panic)),
        Err(_) => "the request was cancelled".to_owned(),
    }
}

/// The `id` of a request line serde cannot read, as its JSON text: the
/// shim writes it first (`{"id":12,...` or `{"id":"s3",...`). A number or
/// a string literal, read without decoding its escapes.
pub(crate) fn request_id(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix('{')?.trim_start();
    let rest = rest
        .strip_prefix(r#""id""#)?
        .trim_start()
        .strip_prefix(':')?;
    let rest = rest.trim_start();
    let len = if let Some(body) = rest.strip_prefix('"') {
        let mut escaped = false;
        let end = body.char_indices().find_map(|(i, c)| {
            let end = !escaped && c == '"';
            escaped = !escaped && c == '\\';
            end.then_some(i)
        })?;
        if body[..end].chars().any(char::is_control) {
            return None;
        }
        end + 2
    } else {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | 'e' | 'E')))
            .unwrap_or(rest.len());
        serde_json::from_str::<serde_json::Number>(&rest[..n]).ok()?;
        n
    };
    let id = &rest[..len];
    let after = rest[len..].trim_start();
    (after.starts_with(',') || after.starts_with('}')).then_some(id)
}

/// Reads one line of at most `MAX_LINE` bytes. Returns `Ok(None)` at end of
/// input, `Ok(Some(Err(())))` for an over-long line (discarded, without
/// buffering more than the limit).
pub(crate) async fn read_line<R: AsyncBufRead + Unpin>(
    r: &mut R,
) -> std::io::Result<Option<Result<String, ()>>> {
    let mut buf: Vec<u8> = Vec::new();
    let mut too_long = false;
    loop {
        let chunk = r.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(if buf.is_empty() && !too_long {
                None
            } else if too_long {
                Some(Err(()))
            } else {
                Some(Ok(String::from_utf8_lossy(&buf).into_owned()))
            });
        }
        let (take, done) = match chunk.iter().position(|b| *b == b'\n') {
            Some(p) => (p + 1, true),
            None => (chunk.len(), false),
        };
        if !too_long {
            if buf.len() + take > MAX_LINE + 1 {
                too_long = true;
                buf = Vec::new();
            } else {
                buf.extend_from_slice(&chunk[..take]);
            }
        }
        r.consume(take);
        if done {
            if too_long {
                return Ok(Some(Err(())));
            }
            if buf.last() == Some(&b'\n') {
                buf.pop();
            }
            return Ok(Some(Ok(String::from_utf8_lossy(&buf).into_owned())));
        }
    }
}

//! The HTTP/1.1 side: one request a connection, each read and written
//! within a timeout and a size bound, answered from the scripts.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use serde_json::{json, Value};

use super::wire::{
    anthropic_message, completion_object, response_object, write_anthropic_sse,
    write_responses_sse, write_sse,
};
use super::{is_summary_request, lock, RecordedRequest, Reply, RequestKind, State, EXHAUSTED_TEXT};

/// Read and write timeout of every connection.
const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the accept loop sleeps when no connection is pending.
const ACCEPT_POLL: Duration = Duration::from_millis(5);

const MAX_HEAD_BYTES: u64 = 64 * 1024;

const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

pub(super) fn accept_loop(
    listener: &TcpListener,
    state: &Arc<Mutex<State>>,
    shutdown: &AtomicBool,
) {
    while !shutdown.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                let state = Arc::clone(state);
                // Connection threads are detached; the I/O timeouts bound them.
                let spawned =
                    thread::Builder::new()
                        .name("fake-llm-conn".into())
                        .spawn(move || {
                            if let Err(err) = serve_connection(stream, &state) {
                                eprintln!("fake LLM: connection error: {err}");
                            }
                        });
                if let Err(err) = spawned {
                    eprintln!("fake LLM: could not spawn a connection thread: {err}");
                }
            }
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => thread::sleep(ACCEPT_POLL),
            Err(err) => {
                eprintln!("fake LLM: accept failed: {err}");
                thread::sleep(ACCEPT_POLL);
            }
        }
    }
}

struct Head {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
}

impl Head {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

fn serve_connection(stream: TcpStream, state: &Mutex<State>) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    stream.set_nodelay(true)?;
    let mut out = stream.try_clone()?;
    let mut reader = BufReader::new(stream);

    let Some(head) = read_head(&mut reader)? else {
        return Ok(()); // the client closed without sending a request
    };
    let received_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    if head
        .header("expect")
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
    {
        out.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
    }
    let body = read_body(&mut reader, &head)?;
    let body_json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);

    let path = head.path.split('?').next().unwrap_or("");
    // Anthropic's Messages API (`POST …/messages`) and OpenAI's Responses
    // API (`POST …/responses`), streamed or not.
    let anthropic = head.method == "POST" && path.ends_with("/messages");
    let responses = head.method == "POST" && path.ends_with("/responses");
    let is_chat = head.method == "POST"
        && (path.ends_with("/chat/completions") || anthropic || responses)
        && body_json.is_object();
    let (kind, reply, exhausted) = if !is_chat {
        (RequestKind::Other, None, false)
    } else if is_summary_request(&body_json) {
        let (queued, responder, default) = {
            let mut st = lock(state);
            let queued = st.summaries.pop_front();
            (
                queued,
                st.summary_responder.clone(),
                st.default_summary.clone(),
            )
        };
        // The responder runs outside the lock: it may take a while.
        let reply = queued
            .or_else(|| responder.map(|answer| answer(&body_json)))
            .unwrap_or(default);
        (RequestKind::Summary, Some(reply), false)
    } else {
        match lock(state).main.pop_front() {
            Some(reply) => (RequestKind::Main, Some(reply), false),
            None => (RequestKind::Main, Some(Reply::text(EXHAUSTED_TEXT)), true),
        }
    };
    let streaming = body_json.get("stream").and_then(Value::as_bool) == Some(true);
    let model = body_json
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("fake-1")
        .to_owned();
    let seq = {
        let mut st = lock(state);
        let seq = st.requests.len();
        st.requests.push(RecordedRequest {
            seq,
            method: head.method.clone(),
            path: head.path.clone(),
            headers: head.headers.clone(),
            kind,
            body: body_json,
            raw_body: body.clone(),
            exhausted,
            received_ms,
        });
        seq
    };

    let Some(reply) = reply else {
        let status = if head.method == "POST" && head.path.contains("/chat/completions") {
            400
        } else {
            404
        };
        return write_json(
            &mut out,
            status,
            &error_body("fake LLM: unsupported request"),
        );
    };
    if !reply.delay.is_zero() {
        thread::sleep(reply.delay);
    }
    if let Some((status, message)) = &reply.http_error {
        return write_json(&mut out, *status, &error_body(message));
    }
    let id = format!("chatcmpl-fake-{seq}");
    if responses {
        let id = format!("resp_fake_{seq}");
        if streaming {
            return write_responses_sse(&mut out, &reply, &id, &model, body.len());
        }
        return write_json(
            &mut out,
            200,
            &response_object(&reply, &id, &model, body.len()),
        );
    }
    if anthropic {
        if streaming {
            return write_anthropic_sse(&mut out, &reply, &id, &model, body.len());
        }
        return write_json(
            &mut out,
            200,
            &anthropic_message(&reply, &id, &model, body.len()),
        );
    }
    if streaming {
        write_sse(&mut out, &reply, &id, &model, body.len())
    } else {
        write_json(
            &mut out,
            200,
            &completion_object(&reply, &id, &model, body.len()),
        )
    }
}

/// Reads the request line and headers; `None` if the peer closed first.
fn read_head(reader: &mut BufReader<TcpStream>) -> io::Result<Option<Head>> {
    let mut limited = reader.take(MAX_HEAD_BYTES);
    let mut line = String::new();
    if limited.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let (Some(method), Some(path)) = (parts.next(), parts.next()) else {
        return Err(invalid(format!("bad request line {line:?}")));
    };
    let mut head = Head {
        method: method.to_owned(),
        path: path.to_owned(),
        headers: Vec::new(),
    };
    loop {
        line.clear();
        if limited.read_line(&mut line)? == 0 {
            return Err(invalid("request head truncated or too large"));
        }
        let trimmed = line.trim_end_matches(['\r', '\n']);
        if trimmed.is_empty() {
            return Ok(Some(head));
        }
        if let Some((name, value)) = trimmed.split_once(':') {
            head.headers
                .push((name.trim().to_owned(), value.trim().to_owned()));
        }
    }
}

/// Reads a `Content-Length` or `Transfer-Encoding: chunked` body.
fn read_body(reader: &mut BufReader<TcpStream>, head: &Head) -> io::Result<Vec<u8>> {
    let chunked = head
        .header("transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    if !chunked {
        let len: usize = match head.header("content-length") {
            Some(v) => v
                .parse()
                .map_err(|_| invalid(format!("bad content-length {v:?}")))?,
            None => 0,
        };
        if len > MAX_BODY_BYTES {
            return Err(invalid(format!("body of {len} bytes is too large")));
        }
        let mut body = vec![0; len];
        reader.read_exact(&mut body)?;
        return Ok(body);
    }
    let mut body = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        reader.take(1024).read_line(&mut line)?;
        let size_text = line.trim().split(';').next().unwrap_or("");
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| invalid(format!("bad chunk size {line:?}")))?;
        if size == 0 {
            // Skip any trailers up to the empty line.
            loop {
                line.clear();
                if reader.take(MAX_HEAD_BYTES).read_line(&mut line)? == 0 || line.trim().is_empty()
                {
                    return Ok(body);
                }
            }
        }
        if body.len() + size > MAX_BODY_BYTES {
            return Err(invalid("chunked body is too large"));
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..])?;
        let mut crlf = [0; 2];
        reader.read_exact(&mut crlf)?;
    }
}

fn invalid(message: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.into())
}

fn error_body(message: &str) -> Value {
    json!({"error": {"message": message, "type": "fake_llm_error", "code": null}})
}

fn status_text(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

fn write_json(out: &mut TcpStream, status: u16, body: &Value) -> io::Result<()> {
    let body = body.to_string();
    write!(
        out,
        "HTTP/1.1 {status} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        status_text(status),
        body.len()
    )?;
    out.flush()?;
    let _ = out.shutdown(std::net::Shutdown::Write);
    Ok(())
}

//! The proxy over HTTP against a scripted upstream on 127.0.0.1: what the
//! upstream receives, what the client gets back and when.

mod support;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use condense_host_proxy::view::MCP_QUERY_TOOL;
use condense_host_proxy::{ProxyConfig, Timeouts};
use futures_util::StreamExt;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::Notify;

/// One request as the upstream received it.
#[derive(Debug, Clone)]
struct Received {
    path: String,
    api_key: Option<String>,
    authorization: Option<String>,
    body: Bytes,
}

/// A scripted upstream: records requests; answers a Messages call with an
/// event stream whose second half waits for `release`; `count_tokens`
/// with JSON; a request with `x-fail` with a 529.
struct Upstream {
    addr: std::net::SocketAddr,
    received: Arc<Mutex<Vec<Received>>>,
    release: Arc<Notify>,
}

const FIRST: &str = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n";
const SECOND: &str = "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":9}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

const JSON_ANSWER: &str = r#"{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":9}}"#;

async fn upstream() -> Upstream {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let received: Arc<Mutex<Vec<Received>>> = Arc::default();
    let release = Arc::new(Notify::new());
    let (rec, rel) = (received.clone(), release.clone());
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let (rec, rel) = (rec.clone(), rel.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(
                    move |req: Request<hyper::body::Incoming>| {
                        let (rec, rel) = (rec.clone(), rel.clone());
                        async move {
                            let path = req.uri().to_string();
                            let api_key = req
                                .headers()
                                .get("x-api-key")
                                .map(|v| v.to_str().unwrap().to_owned());
                            let authorization = req
                                .headers()
                                .get("authorization")
                                .map(|v| v.to_str().unwrap().to_owned());
                            let fail = req.headers().contains_key("x-fail");
                            let json = req.headers().contains_key("x-json");
                            let body = req.into_body().collect().await.unwrap().to_bytes();
                            rec.lock().unwrap().push(Received {
                                path: path.clone(),
                                api_key,
                                authorization,
                                body,
                            });
                            type B = http_body_util::combinators::BoxBody<Bytes, Infallible>;
                            let r: Response<B> = if fail {
                                Response::builder()
                                .status(529)
                                .body(
                                    Full::new(Bytes::from_static(
                                        br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
                                    ))
                                    .boxed(),
                                )
                                .unwrap()
                            } else if json {
                                // A whole body, sized: hyper sends its
                                // `content-length`.
                                Response::builder()
                                    .header("content-type", "application/json")
                                    .body(
                                        Full::new(Bytes::from_static(JSON_ANSWER.as_bytes()))
                                            .boxed(),
                                    )
                                    .unwrap()
                            } else if path.contains("count_tokens") {
                                Response::new(
                                    Full::new(Bytes::from_static(br#"{"input_tokens":42}"#))
                                        .boxed(),
                                )
                            } else {
                                let chunks = futures_util::stream::iter([0, 1]).then(move |i| {
                                    let rel = rel.clone();
                                    async move {
                                        if i == 1 {
                                            rel.notified().await;
                                        }
                                        Ok::<_, Infallible>(Frame::data(Bytes::from_static(
                                            if i == 0 { FIRST } else { SECOND }.as_bytes(),
                                        )))
                                    }
                                });
                                Response::builder()
                                    .header("content-type", "text/event-stream")
                                    .body(BodyExt::boxed(StreamBody::new(chunks)))
                                    .unwrap()
                            };
                            Ok::<_, Infallible>(r)
                        }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Upstream {
        addr,
        received,
        release,
    }
}

/// A proxy on 127.0.0.1 in front of `upstream`; its address.
async fn proxy(upstream: &str, dir: &std::path::Path) -> String {
    proxy_with(upstream, upstream, dir).await
}

/// A proxy with an OpenAI upstream of its own.
async fn proxy_with(upstream: &str, openai: &str, dir: &std::path::Path) -> String {
    proxy_with_chatgpt(upstream, openai, upstream, dir).await
}

/// A proxy with OpenAI and ChatGPT upstreams of their own.
async fn proxy_with_chatgpt(
    upstream: &str,
    openai: &str,
    chatgpt: &str,
    dir: &std::path::Path,
) -> String {
    start(ProxyConfig {
        upstream: upstream.to_owned(),
        openai_upstream: openai.to_owned(),
        chatgpt_upstream: chatgpt.to_owned(),
        dir: dir.to_path_buf(),
        settings: support::settings("reference"),
        query_tool: MCP_QUERY_TOOL.to_owned(),
        log: None,
        timeouts: Timeouts::default(),
    })
    .await
}

/// A proxy serving `config` on 127.0.0.1; its address.
async fn start(config: ProxyConfig) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(condense_host_proxy::serve(listener, config));
    format!("http://{addr}")
}

/// The message of the error the proxy answers a Messages call with
/// itself, with `status`, in the API's error shape.
async fn proxys_own_error(base: &str, status: u16) -> String {
    let r = reqwest::Client::new()
        .post(format!("{base}/v1/messages"))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), status);
    let v: serde_json::Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
    assert_eq!(v["type"], "error");
    v["error"]["message"].as_str().unwrap().to_owned()
}

/// A proxy in front of `upstream` that gives a quiet peer a fifth of a
/// second.
async fn impatient_proxy(upstream: &str, dir: &std::path::Path) -> String {
    let short = Duration::from_millis(200);
    start(ProxyConfig {
        upstream: upstream.to_owned(),
        openai_upstream: upstream.to_owned(),
        chatgpt_upstream: upstream.to_owned(),
        dir: dir.to_path_buf(),
        settings: support::settings("reference"),
        query_tool: MCP_QUERY_TOOL.to_owned(),
        log: None,
        timeouts: Timeouts {
            client_headers: short,
            client_body_gap: short,
            upstream_connect: short,
            upstream_gap: short,
        },
    })
    .await
}

/// Everything a raw connection to `base` gets after sending `bytes` and
/// going quiet, until the proxy closes it (a guard fails the test if it
/// never does).
async fn after_going_quiet(base: &str, bytes: &[u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut socket = tokio::net::TcpStream::connect(base.trim_start_matches("http://"))
        .await
        .unwrap();
    socket.write_all(bytes).await.unwrap();
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), socket.read_to_end(&mut got))
        .await
        .expect("the proxy gives up on a quiet client")
        .ok();
    String::from_utf8_lossy(&got).into_owned()
}

#[tokio::test]
async fn a_client_that_goes_quiet_is_given_up_and_the_proxy_serves_on() {
    let up = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let base = impatient_proxy(&format!("http://{}", up.addr), dir.path()).await;
    // Headers that never end: the connection is closed, nothing sent on.
    let got = after_going_quiet(&base, b"POST /v1/messages HTTP/1.1\r\nhost: x\r\n").await;
    assert!(!got.contains("200"), "{got}");
    // A body that stops short of its length: 408, in the API's shape.
    let got = after_going_quiet(
        &base,
        b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-length: 1000\r\n\r\n{\"model\"",
    )
    .await;
    assert!(got.starts_with("HTTP/1.1 408"), "{got}");
    assert!(got.contains("stopped arriving"), "{got}");
    assert!(
        up.received.lock().unwrap().is_empty(),
        "nothing went upstream"
    );
    let health = reqwest::get(format!("{base}/condense/health"))
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
}

#[tokio::test]
async fn an_upstream_that_goes_quiet_is_given_up() {
    // One upstream never answers; the other sends its headers and a first
    // event, then nothing.
    let silent = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_addr = silent.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            held.push(stream);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let base = impatient_proxy(&format!("http://{silent_addr}"), dir.path()).await;
    let said = proxys_own_error(&base, 504).await;
    assert!(said.contains("did not answer"), "{said}");

    // The scripted upstream holds its second event until released: never.
    let up = upstream().await;
    let base = impatient_proxy(&format!("http://{}", up.addr), dir.path()).await;
    let mut c = support::Convo::default();
    c.prompt("hello");
    c.tools(1, 3000);
    let answer = reqwest::Client::new()
        .post(format!("{base}/v1/messages"))
        .body(c.body("s-quiet"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let mut stream = answer.bytes_stream();
    let mut ended_in_error = false;
    tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(chunk) = stream.next().await {
            if chunk.is_err() {
                ended_in_error = true;
            }
        }
    })
    .await
    .expect("the answer is cut short, not held open");
    assert!(ended_in_error, "a cut answer does not end as a whole one");
}

#[tokio::test]
async fn a_call_goes_upstream_as_sent_and_streams_back_as_it_arrives() {
    let up = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let base = proxy(&format!("http://{}", up.addr), dir.path()).await;
    let mut c = support::Convo::default();
    c.prompt("hello");
    c.tools(1, 3000);
    let body = c.body("s1");
    let client = reqwest::Client::new();
    let answer = client
        .post(format!("{base}/v1/messages?beta=true"))
        .header("x-api-key", "sk-test")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let mut stream = answer.bytes_stream();
    // The first event arrives while the upstream still holds the rest.
    let first = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("the first chunk is not held back")
        .unwrap()
        .unwrap();
    assert_eq!(first, FIRST.as_bytes());
    up.release.notify_one();
    let mut rest = Vec::new();
    while let Some(chunk) = stream.next().await {
        rest.extend_from_slice(&chunk.unwrap());
    }
    assert_eq!(rest, SECOND.as_bytes());
    let received = up.received.lock().unwrap().clone();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].path, "/v1/messages?beta=true");
    assert_eq!(received[0].api_key.as_deref(), Some("sk-test"));
    assert_eq!(
        received[0].body,
        body.as_bytes(),
        "an unchanged history goes byte for byte"
    );
}

#[tokio::test]
async fn other_paths_garbage_and_upstream_errors_pass_through() {
    let up = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let base = proxy(&format!("http://{}", up.addr), dir.path()).await;
    let client = reqwest::Client::new();
    // count_tokens, byte for byte both ways.
    let body = r#"{"model":"m","messages":[{"role":"user","content":"x"}]}"#;
    let r = client
        .post(format!("{base}/v1/messages/count_tokens"))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.text().await.unwrap(), r#"{"input_tokens":42}"#);
    // A body that is not a Messages request goes as it is.
    let garbage = "{\"messages\": [1, 2";
    up.release.notify_one();
    let r = client
        .post(format!("{base}/v1/messages"))
        .body(garbage)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // The upstream's error comes back as the upstream gave it.
    let r = client
        .post(format!("{base}/v1/messages"))
        .header("x-fail", "1")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 529);
    assert!(r.text().await.unwrap().contains("overloaded_error"));
    let received = up.received.lock().unwrap().clone();
    assert_eq!(received[0].body, body.as_bytes());
    assert_eq!(received[1].body, garbage.as_bytes());
}

#[tokio::test]
async fn an_upstream_that_cannot_be_reached_is_a_502_in_the_apis_shape() {
    // A port nothing listens on: bind one, then free it.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let dir = tempfile::tempdir().unwrap();
    let base = proxy(&format!("http://127.0.0.1:{port}"), dir.path()).await;
    let said = proxys_own_error(&base, 502).await;
    assert!(said.contains("condense proxy"), "{said}");
}

/// Two calls of one conversation through a proxy in front of `up`, each
/// sent with `header` once the previous answer is read (the scripted
/// upstream's held second half released first); each answer's
/// `content-length` and text, and the proxy's log directory.
async fn two_calls(
    up: &Upstream,
    session: &str,
    header: (&str, &str),
) -> (tempfile::TempDir, Vec<(Option<String>, String)>) {
    let dir = tempfile::tempdir().unwrap();
    let base = proxy(&format!("http://{}", up.addr), dir.path()).await;
    let client = reqwest::Client::new();
    let mut c = support::Convo::default();
    c.prompt("hello");
    c.tools(1, 3000);
    let mut answers = Vec::new();
    for _ in 0..2 {
        up.release.notify_one();
        let r = client
            .post(format!("{base}/v1/messages"))
            .header("x-api-key", "sk-test")
            .header(header.0, header.1)
            .body(c.body(session))
            .send()
            .await
            .unwrap();
        let length = r
            .headers()
            .get("content-length")
            .map(|v| v.to_str().unwrap().to_owned());
        answers.push((length, r.text().await.unwrap()));
        // The answer the upstream gave comes back in the next history.
        c.tools(1, 3000);
    }
    (dir, answers)
}

#[tokio::test]
async fn the_usage_an_answer_reports_is_logged_with_the_message_it_was() {
    let up = upstream().await;
    let (dir, answers) = two_calls(&up, "s2", ("accept-encoding", "gzip")).await;
    for (_, text) in &answers {
        assert_eq!(text, &format!("{FIRST}{SECOND}"));
    }
    let text = assert_second_call_logged_with_its_usage(dir.path());
    assert!(!text.contains("sk-test"), "no secret is written");
}

#[tokio::test]
async fn the_usage_of_an_answer_sent_whole_is_logged_too() {
    // The next request follows at once, on the same connection.
    let up = upstream().await;
    let (dir, answers) = two_calls(&up, "s3", ("x-json", "1")).await;
    for (length, text) in &answers {
        assert_eq!(
            length.as_deref(),
            Some(JSON_ANSWER.len().to_string().as_str())
        );
        assert_eq!(text, JSON_ANSWER);
    }
    assert_second_call_logged_with_its_usage(dir.path());
}

/// The log in `dir` holds the second call's assistant message with the
/// usage the scripted upstream reports; the log's text.
fn assert_second_call_logged_with_its_usage(dir: &std::path::Path) -> String {
    let log = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .unwrap();
    let text = std::fs::read_to_string(log).unwrap();
    let assistant = text
        .lines()
        .find(|l| l.contains("toolu_0002") && l.contains("\"role\":\"assistant\""))
        .expect("the second call's assistant message is logged");
    assert!(
        assistant.contains(
            r#""usage":{"input":10,"output":9,"cacheRead":0,"cacheWrite":0,"totalTokens":19}"#
        ),
        "{assistant}"
    );
    text
}

#[tokio::test]
async fn openai_paths_go_to_the_openai_upstream_and_stream_back() {
    let anthropic = upstream().await;
    let openai = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let base = proxy_with(
        &format!("http://{}", anthropic.addr),
        &format!("http://{}", openai.addr),
        dir.path(),
    )
    .await;
    let client = reqwest::Client::new();
    let body = serde_json::json!({
        "model": "gpt-5-codex",
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
        "tools": [{"type": "tool_search", "execution": "client"}],
        "stream": true,
        "prompt_cache_key": "th-1",
    })
    .to_string();
    openai.release.notify_one();
    let r = client
        .post(format!("{base}/v1/responses"))
        .header("authorization", "Bearer sk-oa")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    assert_eq!(text, format!("{FIRST}{SECOND}"), "the answer, as it came");
    // `/v1/models` goes where its headers say.
    openai.release.notify_one();
    client
        .get(format!("{base}/v1/models"))
        .header("authorization", "Bearer sk-oa")
        .send()
        .await
        .unwrap();
    anthropic.release.notify_one();
    client
        .get(format!("{base}/v1/models"))
        .header("anthropic-version", "2023-06-01")
        .send()
        .await
        .unwrap();
    let to_openai = openai.received.lock().unwrap().clone();
    let to_anthropic = anthropic.received.lock().unwrap().clone();
    let paths = |r: &[Received]| r.iter().map(|r| r.path.clone()).collect::<Vec<_>>();
    assert_eq!(paths(&to_openai), ["/v1/responses", "/v1/models"]);
    assert_eq!(paths(&to_anthropic), ["/v1/models"]);
    assert_eq!(
        to_openai[0].body,
        body.as_bytes(),
        "a history with no results goes as sent"
    );
}

/// Codex signed in with ChatGPT calls `/backend-api/codex/…` with its
/// ChatGPT token: those calls go to the ChatGPT upstream with the token
/// untouched, and its Responses call is rendered like any other.
#[tokio::test]
async fn chatgpt_backend_paths_go_to_the_chatgpt_upstream_and_are_rendered() {
    let openai = upstream().await;
    let chatgpt = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let base = proxy_with_chatgpt(
        &format!("http://{}", openai.addr),
        &format!("http://{}", openai.addr),
        &format!("http://{}", chatgpt.addr),
        dir.path(),
    )
    .await;
    let client = reqwest::Client::new();
    let body = serde_json::json!({
        "model": "gpt-5.5",
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "read a"}]},
            {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{\"cmd\":\"cat a\"}"},
            {"type": "function_call_output", "call_id": "c1", "output": "A"},
        ],
        "tools": [{"type": "tool_search", "execution": "client"}],
        "stream": true,
        "prompt_cache_key": "th-cg",
    })
    .to_string();
    chatgpt.release.notify_one();
    let r = client
        .post(format!("{base}/backend-api/codex/responses"))
        .header("authorization", "Bearer chatgpt-token")
        .header("chatgpt-account-id", "acct-1")
        .header("session-id", "th-cg")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.text().await.unwrap(), format!("{FIRST}{SECOND}"));
    chatgpt.release.notify_one();
    client
        .get(format!("{base}/backend-api/codex/models?client_version=1"))
        .header("authorization", "Bearer chatgpt-token")
        .send()
        .await
        .unwrap();
    let got = chatgpt.received.lock().unwrap().clone();
    let paths: Vec<&str> = got.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/backend-api/codex/responses",
            "/backend-api/codex/models?client_version=1"
        ]
    );
    assert!(got
        .iter()
        .all(|r| r.authorization.as_deref() == Some("Bearer chatgpt-token")));
    assert_eq!(
        got[0].body,
        body.as_bytes(),
        "an unchanged history goes as sent"
    );
    assert!(openai.received.lock().unwrap().is_empty());
    // The call was read into a conversation, as a Responses call is.
    let logs: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("oa-th-cg-"))
        .collect();
    assert_eq!(logs.len(), 1, "{logs:?}");
}

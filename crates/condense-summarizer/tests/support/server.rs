//! A scripted HTTP/1.1 server on 127.0.0.1 for the HTTP providers.
//!
//! Connection `i` gets reply `i` (a 500 once the script runs out); every
//! reply closes its connection. Streamed replies use chunked encoding and
//! end cleanly, stall (until the client hangs up), or are cut without the
//! terminating chunk.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// How a streamed reply ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The terminating chunk, then close.
    Finish,
    /// Nothing more: wait for the client to hang up.
    Stall,
    /// Close without the terminating chunk.
    Cut,
}

/// A reply body.
#[derive(Debug, Clone)]
pub enum Body {
    /// With a content length.
    Full(String),
    /// Chunked, one write per chunk.
    Chunks(Vec<String>, End),
}

/// One scripted reply.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Body,
}

impl Reply {
    /// A 200 event stream of these chunks.
    pub fn sse<S: AsRef<str>>(chunks: &[S], end: End) -> Reply {
        Reply {
            status: 200,
            content_type: "text/event-stream",
            body: Body::Chunks(chunks.iter().map(|c| c.as_ref().to_owned()).collect(), end),
        }
    }

    /// A JSON reply with this status.
    pub fn json(status: u16, body: &str) -> Reply {
        Reply {
            status,
            content_type: "application/json",
            body: Body::Full(body.to_owned()),
        }
    }
}

/// One `data:` event.
pub fn data(json: &str) -> String {
    format!("data: {json}\n\n")
}

/// One named event.
pub fn event(name: &str, json: &str) -> String {
    format!("event: {name}\ndata: {json}\n\n")
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Recorded {
    /// A header's value (names compared case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).expect("request body is JSON")
    }
}

/// The running server.
pub struct ScriptedServer {
    pub addr: SocketAddr,
    requests: Arc<Mutex<Vec<Recorded>>>,
    stalled: watch::Receiver<usize>,
    hung_up: watch::Receiver<usize>,
}

impl ScriptedServer {
    /// Starts serving `replies` on an ephemeral port.
    pub async fn start(replies: Vec<Reply>) -> ScriptedServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (stalled_tx, stalled) = watch::channel(0usize);
        let (hung_up_tx, hung_up) = watch::channel(0usize);
        let stalled_tx = Arc::new(stalled_tx);
        let hung_up_tx = Arc::new(hung_up_tx);
        let recorded = requests.clone();
        tokio::spawn(async move {
            let mut replies = replies.into_iter();
            while let Ok((socket, _)) = listener.accept().await {
                let reply = replies.next().unwrap_or_else(|| {
                    Reply::json(500, r#"{"error":{"message":"script exhausted"}}"#)
                });
                let recorded = recorded.clone();
                let stalled_tx = stalled_tx.clone();
                let hung_up_tx = hung_up_tx.clone();
                tokio::spawn(async move {
                    serve(socket, reply, recorded, &stalled_tx, &hung_up_tx).await;
                });
            }
        });
        ScriptedServer {
            addr,
            requests,
            stalled,
            hung_up,
        }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    /// Waits until a stalled reply has sent everything it will send.
    pub async fn wait_stalled(&self) {
        let mut rx = self.stalled.clone();
        rx.wait_for(|n| *n > 0).await.unwrap();
    }

    /// Waits until the client hung up on a stalled reply.
    pub async fn wait_hung_up(&self) {
        let mut rx = self.hung_up.clone();
        rx.wait_for(|n| *n > 0).await.unwrap();
    }

    /// Whether the client hung up on a stalled reply.
    pub fn hung_up(&self) -> bool {
        *self.hung_up.borrow() > 0
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        529 => "Overloaded",
        _ => "Status",
    }
}

async fn read_request(socket: &mut TcpStream) -> Option<Recorded> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_owned();
    let path = request_line.next()?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Recorded {
        method,
        path,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

async fn serve(
    mut socket: TcpStream,
    reply: Reply,
    recorded: Arc<Mutex<Vec<Recorded>>>,
    stalled: &watch::Sender<usize>,
    hung_up: &watch::Sender<usize>,
) {
    let Some(request) = read_request(&mut socket).await else {
        return;
    };
    recorded.lock().unwrap().push(request);
    let head = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: {}\r\nconnection: close\r\n",
        reply.status,
        reason(reply.status),
        reply.content_type
    );
    match reply.body {
        Body::Full(body) => {
            let out = format!("{head}content-length: {}\r\n\r\n{body}", body.len());
            let _ = socket.write_all(out.as_bytes()).await;
            let _ = socket.shutdown().await;
        }
        Body::Chunks(chunks, end) => {
            if socket
                .write_all(format!("{head}transfer-encoding: chunked\r\n\r\n").as_bytes())
                .await
                .is_err()
            {
                return;
            }
            for c in chunks {
                let framed = format!("{:x}\r\n{c}\r\n", c.len());
                if socket.write_all(framed.as_bytes()).await.is_err() {
                    return;
                }
                let _ = socket.flush().await;
            }
            match end {
                End::Finish => {
                    let _ = socket.write_all(b"0\r\n\r\n").await;
                    let _ = socket.shutdown().await;
                }
                End::Cut => {
                    let _ = socket.shutdown().await;
                }
                End::Stall => {
                    stalled.send_modify(|n| *n += 1);
                    let mut sink = [0u8; 1024];
                    while let Ok(n) = socket.read(&mut sink).await {
                        if n == 0 {
                            break;
                        }
                    }
                    hung_up.send_modify(|n| *n += 1);
                }
            }
        }
    }
}

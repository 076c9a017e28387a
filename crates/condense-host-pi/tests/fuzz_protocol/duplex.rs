//! `serve` in memory: a duplex whose client side answers the sidecar's
//! `llm.complete` requests and collects every answer, and the drive that
//! feeds it lines and checks each request was answered.

use std::sync::OnceLock;
use std::time::Duration;

use condense_engine::sidecar::serve;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::inputs::expected_answer;

/// `llm.complete` requests the fuzzed sidecars made (so a run shows it
/// reached flushes), and answers checked.
pub static LLM_CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
pub static ANSWERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime")
    })
}

/// A `std::io::Write` that hands its bytes to a channel.
pub struct ChannelWrite(mpsc::UnboundedSender<Vec<u8>>);

impl std::io::Write for ChannelWrite {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .send(buf.to_vec())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A `serve` over a duplex; the client side answers the sidecar's
/// `llm.complete` requests and collects every answer it gets.
pub struct Duplex {
    tx: mpsc::UnboundedSender<Vec<u8>>,
    answers: mpsc::UnboundedReceiver<Result<Value, String>>,
    served: tokio::task::JoinHandle<()>,
}

impl Duplex {
    pub fn start() -> Duplex {
        let (client, server) = tokio::io::duplex(1 << 16);
        let (server_r, server_w) = tokio::io::split(server);
        // `serve` writes with `std::io::Write`: bytes go through a channel to
        // a task that writes them into the duplex.
        let (out_tx, mut out_rx) = mpsc::unbounded_channel::<Vec<u8>>();
        let mut server_w = server_w;
        tokio::spawn(async move {
            while let Some(bytes) = out_rx.recv().await {
                if server_w.write_all(&bytes).await.is_err() {
                    break;
                }
            }
        });
        let served = tokio::spawn(serve(
            tokio::io::BufReader::new(server_r),
            ChannelWrite(out_tx),
        ));
        let (client_r, mut client_w) = tokio::io::split(client);
        let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
        tokio::spawn(async move {
            while let Some(line) = rx.recv().await {
                if client_w.write_all(&line).await.is_err()
                    || client_w.write_all(b"\n").await.is_err()
                {
                    break;
                }
            }
        });
        let (answers_tx, answers) = mpsc::unbounded_channel();
        let llm = tx.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(client_r).lines();
            while let Ok(Some(l)) = lines.next_line().await {
                let v: Value = match serde_json::from_str(&l) {
                    Ok(v @ Value::Object(_)) => v,
                    _ => {
                        let _ = answers_tx.send(Err(format!(
                            "the sidecar wrote a non-object line: {l:.200}"
                        )));
                        continue;
                    }
                };
                if v["method"] == "llm.complete" {
                    LLM_CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let reply = json!({"id": v["id"], "result": {"text": "- [[1:bash]] ran", "stopReason": "stop",
                        "usage": {"input": 10, "output": 5, "cost": 0.0}}});
                    let _ = llm.send(reply.to_string().into_bytes());
                } else if v.get("id").is_some() && v.get("method").is_none() {
                    let _ = answers_tx.send(Ok(v));
                }
            }
        });
        Duplex {
            tx,
            answers,
            served,
        }
    }

    pub fn send(&self, line: Vec<u8>) {
        let _ = self.tx.send(line);
    }

    /// Waits for the answer with this id, collecting the others.
    pub async fn wait_for(&mut self, id: &Value, got: &mut Vec<Value>) -> Result<Value, String> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let next = tokio::time::timeout_at(deadline, self.answers.recv())
                .await
                .map_err(|_| format!("no answer to {id} within 30 s"))?
                .ok_or("the sidecar closed its output")??;
            if &next["id"] == id {
                return Ok(next);
            }
            got.push(next);
        }
    }
}

/// Feeds the lines, then `hello`; checks the answers.
pub async fn drive(lines: Vec<Vec<u8>>) -> Result<(), String> {
    let mut d = Duplex::start();
    let mut expected: Vec<Value> = Vec::new();
    for l in &lines {
        if let Some(id) = expected_answer(l) {
            expected.push(id);
        }
        d.send(l.clone());
    }
    let final_id = json!("final-hello");
    d.send(
        json!({"id": final_id, "method": "hello", "params": {"protocol": 1}})
            .to_string()
            .into_bytes(),
    );
    let mut got = Vec::new();
    let hello = d.wait_for(&final_id, &mut got).await?;
    if hello["result"]["protocol"] != 1 {
        return Err(format!("the final hello was answered with {hello}"));
    }
    // Every request gets its answer (a handler that panicked never answers).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let mut missing = expected.clone();
        for a in &got {
            if let Some(i) = missing.iter().position(|id| *id == a["id"]) {
                missing.remove(i);
            }
        }
        if missing.is_empty() {
            ANSWERS.fetch_add(expected.len() as u64, std::sync::atomic::Ordering::Relaxed);
            break;
        }
        match tokio::time::timeout_at(deadline, d.answers.recv()).await {
            Ok(Some(Ok(a))) => got.push(a),
            Ok(Some(Err(e))) => return Err(e),
            _ => return Err(format!("requests never answered: {missing:?}")),
        }
    }
    d.send(
        json!({"id": "bye", "method": "shutdown"})
            .to_string()
            .into_bytes(),
    );
    d.wait_for(&json!("bye"), &mut got).await?;
    match tokio::time::timeout(Duration::from_secs(10), d.served).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(format!("serve panicked: {e}")),
        Err(_) => Err("serve did not stop after shutdown".into()),
    }
}

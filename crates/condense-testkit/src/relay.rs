//! A recording relay: what a client sends, recorded byte for byte on its
//! way to the real server (the tests put it between Claude Code and the
//! condense proxy, to compare what the proxy received with what it sent
//! upstream). One request a connection (`connection: close` both ways);
//! bodies must carry a `content-length`; bounded by read timeouts and a
//! body cap; the accept loop stops when the relay is dropped.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

const IO_TIMEOUT: Duration = Duration::from_secs(120);
const MAX_BODY: usize = 64 << 20;

/// One request as the client sent it.
#[derive(Debug, Clone)]
pub struct Relayed {
    pub method: String,
    pub path: String,
    pub body: Vec<u8>,
}

/// The relay (see the module docs).
pub struct Relay {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Relayed>>>,
    stop: Arc<AtomicBool>,
}

impl Relay {
    /// A relay on 127.0.0.1 to `target` (`host:port`).
    pub fn start(target: SocketAddr) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the relay");
        let addr = listener.local_addr().expect("relay address");
        listener.set_nonblocking(true).expect("nonblocking");
        let seen: Arc<Mutex<Vec<Relayed>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (seen.clone(), stop.clone());
        thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let s = s.clone();
                        thread::spawn(move || {
                            let _ = relay_one(client, target, &s);
                        });
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        thread::sleep(Duration::from_millis(5));
                    }
                    Err(_) => return,
                }
            }
        });
        Relay { addr, seen, stop }
    }

    /// The relay's base URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// What clients sent, in order of arrival.
    pub fn requests(&self) -> Vec<Relayed> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn relay_one(client: TcpStream, target: SocketAddr, seen: &Mutex<Vec<Relayed>>) -> io::Result<()> {
    client.set_nonblocking(false)?;
    client.set_read_timeout(Some(IO_TIMEOUT))?;
    let mut out = client.try_clone()?;
    let mut reader = BufReader::new(client);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (method, path) = (
        parts.next().unwrap_or("").to_owned(),
        parts.next().unwrap_or("").to_owned(),
    );
    let mut head = format!("{method} {path} HTTP/1.1\r\n");
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" || h == "\n" {
            break;
        }
        let lower = h.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        if lower.starts_with("connection:") || lower.starts_with("keep-alive:") {
            continue;
        }
        head.push_str(&h);
    }
    head.push_str("connection: close\r\n\r\n");
    let mut body = vec![0; length.min(MAX_BODY)];
    reader.read_exact(&mut body)?;
    seen.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Relayed {
            method,
            path,
            body: body.clone(),
        });
    let mut upstream = TcpStream::connect(target)?;
    upstream.set_read_timeout(Some(IO_TIMEOUT))?;
    upstream.write_all(head.as_bytes())?;
    upstream.write_all(&body)?;
    io::copy(&mut upstream, &mut out)?;
    out.flush()?;
    let _ = out.shutdown(std::net::Shutdown::Both);
    Ok(())
}

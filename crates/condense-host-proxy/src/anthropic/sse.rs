//! The usage a streamed (or whole) Messages API answer reports, read from
//! the bytes as they pass through to the client, never holding them back.

use serde::Deserialize;

/// What one call billed, as the provider reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Input tokens not read from or written to the cache.
    pub input: u64,
    /// Input tokens read from the cache.
    pub cache_read: u64,
    /// Input tokens written to the cache.
    pub cache_write: u64,
    /// Output tokens.
    pub output: u64,
}

#[derive(Deserialize, Default)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct Event {
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    message: Option<EventMessage>,
}

#[derive(Deserialize)]
struct EventMessage {
    #[serde(default)]
    usage: Option<WireUsage>,
}

impl Usage {
    fn merge(&mut self, u: &WireUsage) {
        if let Some(n) = u.input_tokens {
            self.input = n;
        }
        if let Some(n) = u.cache_read_input_tokens {
            self.cache_read = n;
        }
        if let Some(n) = u.cache_creation_input_tokens {
            self.cache_write = n;
        }
        if let Some(n) = u.output_tokens {
            self.output = n;
        }
    }
}

/// The longest event line the tee reads; a longer one is skipped (its
/// bytes still reach the client).
const MAX_LINE: usize = 1 << 20;

/// Reads usage out of an answer's bytes as they pass: server-sent events
/// (`message_start`'s and `message_delta`'s `usage`) or one JSON body.
#[derive(Debug, Default)]
pub struct UsageTee {
    line: Vec<u8>,
    skipping: bool,
    whole: Vec<u8>,
    usage: Usage,
    seen: bool,
}

impl UsageTee {
    /// Feeds a chunk of the answer.
    pub fn feed(&mut self, chunk: &[u8]) {
        if self.whole.len() < MAX_LINE {
            let room = MAX_LINE - self.whole.len();
            self.whole
                .extend_from_slice(&chunk[..chunk.len().min(room)]);
        }
        for &b in chunk {
            if b == b'\n' {
                if !self.skipping {
                    let line = std::mem::take(&mut self.line);
                    self.event_line(&line);
                }
                self.line.clear();
                self.skipping = false;
            } else if !self.skipping {
                if self.line.len() >= MAX_LINE {
                    self.skipping = true;
                    self.line.clear();
                } else {
                    self.line.push(b);
                }
            }
        }
    }

    fn event_line(&mut self, line: &[u8]) {
        let Some(data) = line.strip_prefix(b"data:") else {
            return;
        };
        self.event(data);
    }

    fn event(&mut self, data: &[u8]) {
        let Ok(e) = serde_json::from_slice::<Event>(data) else {
            return;
        };
        if let Some(u) = e.message.and_then(|m| m.usage) {
            self.usage.merge(&u);
            self.seen = true;
        }
        if let Some(u) = e.usage {
            self.usage.merge(&u);
            self.seen = true;
        }
    }

    /// The usage reported, once the answer has ended.
    pub fn finish(mut self) -> Option<Usage> {
        if !self.seen {
            let whole = std::mem::take(&mut self.whole);
            self.event(&whole);
        }
        self.seen.then_some(self.usage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_comes_from_the_stream_split_anywhere() {
        let stream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":12,\"cache_read_input_tokens\":3000,\"cache_creation_input_tokens\":40,\"output_tokens\":1}}}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":77}}\n\n";
        for cut in 0..stream.len() {
            let mut tee = UsageTee::default();
            tee.feed(&stream.as_bytes()[..cut]);
            tee.feed(&stream.as_bytes()[cut..]);
            assert_eq!(
                tee.finish(),
                Some(Usage {
                    input: 12,
                    cache_read: 3000,
                    cache_write: 40,
                    output: 77
                })
            );
        }
    }

    #[test]
    fn a_whole_json_answer_reports_its_usage() {
        let mut tee = UsageTee::default();
        tee.feed(br#"{"id":"m","usage":{"input_tokens":5,"output_tokens":6}}"#);
        assert_eq!(
            tee.finish(),
            Some(Usage {
                input: 5,
                output: 6,
                ..Usage::default()
            })
        );
    }
}

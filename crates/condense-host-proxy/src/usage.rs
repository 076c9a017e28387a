//! The usage a streamed (or whole) answer reports, read from the bytes as
//! they pass through to the client, never holding them back: a Messages
//! API answer, or an OpenAI one (Responses, Chat Completions), whose input
//! count includes the cached tokens it reports apart.

use serde::Deserialize;

pub use crate::view::Usage;

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
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    input_tokens_details: Option<Details>,
    #[serde(default)]
    prompt_tokens_details: Option<Details>,
}

#[derive(Deserialize, Default)]
struct Details {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct Event {
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    message: Option<EventMessage>,
    /// A Responses event's response (`response.completed`).
    #[serde(default)]
    response: Option<EventMessage>,
}

#[derive(Deserialize)]
struct EventMessage {
    #[serde(default)]
    usage: Option<WireUsage>,
}

/// Merges what one event reports into `usage`.
fn merge(usage: &mut Usage, u: &WireUsage, openai: bool) {
    if openai {
        let input = u.input_tokens.or(u.prompt_tokens);
        let cached = u
            .input_tokens_details
            .as_ref()
            .or(u.prompt_tokens_details.as_ref())
            .and_then(|d| d.cached_tokens)
            .unwrap_or(0);
        if let Some(n) = input {
            usage.input = n.saturating_sub(cached);
            usage.cache_read = cached.min(n);
        }
        if let Some(n) = u.output_tokens.or(u.completion_tokens) {
            usage.output = n;
        }
        return;
    }
    usage.merge(u);
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
    openai: bool,
}

impl UsageTee {
    /// A tee for an OpenAI answer.
    pub fn openai() -> UsageTee {
        UsageTee {
            openai: true,
            ..UsageTee::default()
        }
    }

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
        for u in [
            e.message.and_then(|m| m.usage),
            e.response.and_then(|m| m.usage),
            e.usage,
        ]
        .into_iter()
        .flatten()
        {
            merge(&mut self.usage, &u, self.openai);
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
    fn openai_usage_counts_cached_tokens_apart() {
        let stream = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"usage\":null}}\n\nevent: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":1000,\"input_tokens_details\":{\"cached_tokens\":800},\"output_tokens\":20,\"total_tokens\":1020}}}\n\n";
        let mut tee = UsageTee::openai();
        tee.feed(stream.as_bytes());
        let want = Usage {
            input: 200,
            cache_read: 800,
            cache_write: 0,
            output: 20,
        };
        assert_eq!(tee.finish(), Some(want));
        let mut tee = UsageTee::openai();
        tee.feed(b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1000,\"completion_tokens\":20,\"prompt_tokens_details\":{\"cached_tokens\":800}}}\n\ndata: [DONE]\n\n");
        assert_eq!(tee.finish(), Some(want));
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

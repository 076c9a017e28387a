//! A small incremental parser for server-sent events.
//!
//! Bytes go in as they arrive; an event comes out at each blank line. Only
//! the `event` and `data` fields matter here (`id`, `retry` and comments are
//! ignored). Lines may end in `\n` or `\r\n`. An event still open when the
//! body ends is dropped, as the SSE standard says.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The `data:` lines joined by `\n`.
    pub data: String,
}

#[derive(Debug, Default)]
pub(crate) struct SseParser {
    pending: Vec<u8>,
    event: Option<String>,
    data: Option<String>,
}

impl SseParser {
    pub(crate) fn new() -> SseParser {
        SseParser::default()
    }

    /// Feeds `bytes`, appending every completed event to `out`.
    pub(crate) fn push(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) {
        self.pending.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(offset) = self.pending[start..].iter().position(|b| *b == b'\n') {
            let end = start + offset;
            let mut line = &self.pending[start..end];
            if let [rest @ .., b'\r'] = line {
                line = rest;
            }
            let line = String::from_utf8_lossy(line).into_owned();
            self.line(&line, out);
            start = end + 1;
        }
        self.pending.drain(..start);
    }

    fn line(&mut self, line: &str, out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            let event = self.event.take();
            if let Some(data) = self.data.take() {
                out.push(SseEvent { event, data });
            }
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = Some(value.to_owned()),
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in_pieces(input: &str, piece: usize) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        for chunk in input.as_bytes().chunks(piece) {
            parser.push(chunk, &mut out);
        }
        out
    }

    #[test]
    fn events_survive_any_chunking() {
        let input = ": comment\r\nevent: message_start\r\ndata: {\"a\":1}\r\n\r\ndata: x\ndata: y\nid: 7\n\ndata:no-space\n\nevent: lonely\n\ndata: open";
        let expected = vec![
            SseEvent {
                event: Some("message_start".into()),
                data: "{\"a\":1}".into(),
            },
            SseEvent {
                event: None,
                data: "x\ny".into(),
            },
            SseEvent {
                event: None,
                data: "no-space".into(),
            },
        ];
        for piece in [1, 2, 3, 7, 1000] {
            assert_eq!(parse_in_pieces(input, piece), expected, "piece {piece}");
        }
    }

    #[test]
    fn multibyte_text_split_across_chunks() {
        let input = "data: h\u{e9}llo \u{1f600}\n\n";
        assert_eq!(parse_in_pieces(input, 1)[0].data, "h\u{e9}llo \u{1f600}");
    }
}

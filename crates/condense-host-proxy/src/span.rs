//! Reading and rewriting a body in place, whatever its format: where a
//! slice of it sits, the values of a JSON array read one at a time from
//! where the part a conversation's previous request shares ends, and the
//! body written back with that array changed.

use std::ops::Range;

use serde_json::value::RawValue;

/// Why a body was not read (the proxy then forwards it unchanged).
#[derive(Debug, PartialEq, Eq)]
pub struct WireError(pub String);

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WireError {}

pub(crate) fn wire_error(what: impl std::fmt::Display) -> WireError {
    WireError(what.to_string())
}

/// Where `inner` (a slice of `outer`) sits in it.
pub(crate) fn span_of(outer: &str, inner: &str) -> Range<usize> {
    let start = inner.as_ptr() as usize - outer.as_ptr() as usize;
    start..start + inner.len()
}

/// The values of a JSON array from `pos` (just after a value of it) to its
/// end: each value, and where the array's `]` is. `what` names the array
/// in errors.
pub(crate) fn rest_of_array<'a>(
    body: &'a str,
    mut pos: usize,
    what: &str,
) -> Result<(Vec<&'a RawValue>, usize), String> {
    let bytes = body.as_bytes();
    let skip_ws = |mut p: usize| {
        while p < bytes.len() && bytes[p].is_ascii_whitespace() {
            p += 1;
        }
        p
    };
    let mut values = Vec::new();
    loop {
        pos = skip_ws(pos);
        match bytes.get(pos) {
            Some(b']') => return Ok((values, pos)),
            Some(b',') => pos = skip_ws(pos + 1),
            _ => return Err(format!("{what}: expected `,` or `]`")),
        }
        let mut stream = serde_json::Deserializer::from_str(&body[pos..]).into_iter::<&RawValue>();
        let raw = match stream.next() {
            Some(Ok(raw)) => raw,
            Some(Err(e)) => return Err(e.to_string()),
            None => return Err(format!("{what}: a value expected")),
        };
        pos = span_of(body, raw.get()).end;
        values.push(raw);
    }
}

/// The object's fields after an array that ends at `end` (its `]`), as a
/// JSON object of their own.
pub(crate) fn fields_after(body: &str, end: usize, what: &str) -> Result<String, String> {
    let rest = body[end + 1..].trim_start();
    match rest.strip_prefix(',') {
        Some(fields) => Ok(format!("{{{fields}")),
        None if rest.trim_end() == "}" => Ok("{}".to_owned()),
        None => Err(format!("a field or `}}` expected after {what}")),
    }
}

/// A body as condense sends it: stretches of the client's body and text
/// condense wrote, in order. A memo of what was sent (a retry is sent the
/// same bytes) costs the text condense wrote, not another body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Spliced {
    pieces: Vec<Piece>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Body(Range<usize>),
    Own(String),
}

impl Spliced {
    /// Appends the body's bytes at `range`.
    pub(crate) fn copy(&mut self, range: Range<usize>) {
        if range.is_empty() {
            return;
        }
        if let Some(Piece::Body(last)) = self.pieces.last_mut() {
            if last.end == range.start {
                last.end = range.end;
                return;
            }
        }
        self.pieces.push(Piece::Body(range));
    }

    /// Appends text of condense's own.
    pub(crate) fn text(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        if let Some(Piece::Own(last)) = self.pieces.last_mut() {
            last.push_str(text);
            return;
        }
        self.pieces.push(Piece::Own(text.to_owned()));
    }

    /// The bytes, cut from `body` (the body the pieces were cut from, or
    /// one byte-identical to it); `None` when a stretch is not in `body`.
    pub fn write(&self, body: &str) -> Option<String> {
        let len = self
            .pieces
            .iter()
            .map(|p| match p {
                Piece::Body(r) => r.len(),
                Piece::Own(t) => t.len(),
            })
            .sum();
        let mut out = String::with_capacity(len);
        for p in &self.pieces {
            match p {
                Piece::Body(r) => out.push_str(body.get(r.clone())?),
                Piece::Own(t) => out.push_str(t),
            }
        }
        Some(out)
    }
}

/// A body written again with one of its JSON arrays changed: the bytes
/// before and after the array are the client's, and values kept as they
/// were in their order are copied as one slice, separators included, so an
/// untouched stretch costs one copy however many values it holds.
pub(crate) struct ArrayWriter {
    array_end: usize,
    body_len: usize,
    out: Spliced,
    first: bool,
    /// The kept values not yet written: the last one's index and the bytes
    /// from the first one's start to the last one's end.
    run: Option<(usize, Range<usize>)>,
}

impl ArrayWriter {
    /// `array` is the array's span in `body`, its brackets included.
    pub(crate) fn new(body: &str, array: Range<usize>) -> Self {
        let mut out = Spliced::default();
        out.copy(0..array.start);
        out.text("[");
        ArrayWriter {
            array_end: array.end,
            body_len: body.len(),
            out,
            first: true,
            run: None,
        }
    }

    /// Keep the array's value number `index`, at `span`, as it is.
    pub(crate) fn keep(&mut self, index: usize, span: Range<usize>) {
        match &mut self.run {
            Some((last, run)) if *last + 1 == index => {
                *last = index;
                run.end = span.end;
            }
            _ => {
                self.flush();
                self.run = Some((index, span));
            }
        }
    }

    /// Starts a value of condense's own, or a changed one: it is written
    /// piece by piece onto what this returns.
    pub(crate) fn value(&mut self) -> &mut Spliced {
        self.flush();
        self.separate();
        &mut self.out
    }

    /// The body as it is to be sent.
    pub(crate) fn finish(mut self) -> Spliced {
        self.flush();
        self.out.text("]");
        self.out.copy(self.array_end..self.body_len);
        self.out
    }

    fn flush(&mut self) {
        if let Some((_, run)) = self.run.take() {
            self.separate();
            self.out.copy(run);
        }
    }

    fn separate(&mut self) {
        if !std::mem::take(&mut self.first) {
            self.out.text(",");
        }
    }
}

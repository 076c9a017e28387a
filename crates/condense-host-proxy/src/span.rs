//! Reading and rewriting a body in place, whatever its format: where a
//! slice of it sits, how much of it a conversation's previous request
//! shares, the values of a JSON array read one at a time from where the
//! shared part ends, and the body written back with that array changed.

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

/// The length of the bytes `a` and `b` start with alike.
pub(crate) fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    const CHUNK: usize = 4096;
    let n = a.len().min(b.len());
    let mut at = 0;
    while at + CHUNK <= n && a[at..at + CHUNK] == b[at..at + CHUNK] {
        at += CHUNK;
    }
    at + a[at..n]
        .iter()
        .zip(&b[at..n])
        .take_while(|(x, y)| x == y)
        .count()
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

/// A body written again with one of its JSON arrays changed: the bytes
/// before and after the array are the client's, and values kept as they
/// were in their order are copied as one slice, separators included, so an
/// untouched stretch costs one copy however many values it holds.
pub(crate) struct ArrayWriter<'a> {
    body: &'a str,
    array_end: usize,
    out: String,
    first: bool,
    /// The kept values not yet written: the last one's index and the bytes
    /// from the first one's start to the last one's end.
    run: Option<(usize, Range<usize>)>,
}

impl<'a> ArrayWriter<'a> {
    /// `array` is the array's span in `body`, its brackets included.
    pub(crate) fn new(body: &'a str, array: Range<usize>) -> Self {
        let mut out = String::with_capacity(body.len() + 1024);
        out.push_str(&body[..array.start]);
        out.push('[');
        ArrayWriter {
            body,
            array_end: array.end,
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

    /// Write a value of condense's own, or a changed one.
    pub(crate) fn push(&mut self, value: &str) {
        self.flush();
        self.separate();
        self.out.push_str(value);
    }

    /// The body as it is to be sent.
    pub(crate) fn finish(mut self) -> String {
        self.flush();
        self.out.push(']');
        self.out.push_str(&self.body[self.array_end..]);
        self.out
    }

    fn flush(&mut self) {
        if let Some((_, run)) = self.run.take() {
            self.separate();
            self.out.push_str(&self.body[run]);
        }
    }

    fn separate(&mut self) {
        if !std::mem::take(&mut self.first) {
            self.out.push(',');
        }
    }
}

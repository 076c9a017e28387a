//! Reading a body in place, whatever its format: where a slice of it sits,
//! how much of it a conversation's previous request shares, and the values
//! of a JSON array read one at a time from where the shared part ends.

use std::ops::Range;

use serde_json::value::RawValue;

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

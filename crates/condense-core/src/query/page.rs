//! Pages of a recovered output, so every byte of it is reachable.
//!
//! A page holds at most [`MAX_LINES`] lines and [`MAX_BYTES`] bytes, as pi's
//! tools cut their output. Lines are numbered from 1 as pi's `read` tool
//! numbers them, except that a line longer than [`SPLIT_BYTES`] is numbered
//! as consecutive parts of at most [`SPLIT_BYTES`] bytes each, cut on a
//! character boundary, and the rest of the line is the next "line". A part
//! fits a page even after up to `MAX_LINES - 1` blank lines, so a page that
//! can show text never comes back empty. A page is a contiguous slice of the
//! output.

use super::{MAX_BYTES, MAX_LINES};

/// Lines longer than this are paged in parts of at most this many bytes
/// (48 KiB: a page's 50 KiB less room for the line breaks of 2,000 lines).
pub const SPLIT_BYTES: usize = MAX_BYTES - 2048;

/// What part of an output to show: `offset` is the first line (1-based),
/// `limit` the most lines (at most [`MAX_LINES`] either way).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageRequest {
    /// First line to show, 1-based; `None` is line 1.
    pub offset: Option<u64>,
    /// Most lines to show; `None` is [`MAX_LINES`].
    pub limit: Option<u64>,
}

impl PageRequest {
    /// True when the caller named neither parameter (the tool's old call).
    pub fn is_default(&self) -> bool {
        self.offset.is_none() && self.limit.is_none()
    }
}

/// One page of an output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<'a> {
    /// The page's text: a slice of the output.
    pub text: &'a str,
    /// First line shown (1-based): the offset asked for.
    pub first: u64,
    /// Last line shown (1-based); `first - 1` when nothing is shown.
    pub last: u64,
    /// Lines in the whole output.
    pub total: u64,
    /// True when the last line shown is a part of a longer line (the next
    /// line continues it with no line break in between).
    pub splits_a_line: bool,
}

impl Page<'_> {
    /// True when lines follow the page.
    pub fn has_more(&self) -> bool {
        self.last < self.total
    }
}

/// A paging line: the byte range of a line or line part, and whether a line
/// break ends it in the output.
#[derive(Debug, Clone, Copy)]
struct Unit {
    start: usize,
    end: usize,
    ends_line: bool,
}

/// The paging lines of `text`, in order.
fn units(text: &str) -> impl Iterator<Item = Unit> + '_ {
    let mut start = 0;
    let mut done = false;
    // The end of the line `start` is in, found once for all its parts: a
    // search from each part would make a long line quadratic.
    let mut current_line_end = None;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        let line_end = *current_line_end
            .get_or_insert_with(|| text[start..].find('\n').map_or(text.len(), |p| start + p));
        if line_end - start > SPLIT_BYTES {
            let end = floor_char_boundary(text, start + SPLIT_BYTES);
            let unit = Unit {
                start,
                end,
                ends_line: false,
            };
            start = end;
            return Some(unit);
        }
        let ends_line = line_end < text.len();
        let unit = Unit {
            start,
            end: line_end,
            ends_line,
        };
        if ends_line {
            start = line_end + 1;
            current_line_end = None;
        } else {
            done = true;
        }
        Some(unit)
    })
}

/// The largest char boundary of `text` at or below `at` (a char is at most
/// 4 bytes, so this goes back at most 3 bytes and a part is never empty).
fn floor_char_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// True when pi's truncation would leave `text` whole.
fn fits_one_page(text: &str) -> bool {
    text.len() <= MAX_BYTES && text.bytes().filter(|&b| b == b'\n').count() < MAX_LINES
}

/// The page of `text` that `request` asks for.
pub fn page(text: &str, request: PageRequest) -> Page<'_> {
    let offset = request.offset.unwrap_or(1).max(1);
    let limit = request
        .limit
        .unwrap_or(MAX_LINES as u64)
        .clamp(1, MAX_LINES as u64);
    if request.is_default() && fits_one_page(text) {
        // pi's tools show such an output whole, counting its lines as
        // they are (no line of it is split).
        let total = text.split('\n').count() as u64;
        return Page {
            text,
            first: 1,
            last: total,
            total,
            splits_a_line: false,
        };
    }
    let mut total = 0u64;
    // The first and last units shown, and how many.
    let mut shown: Option<(Unit, Unit, u64)> = None;
    let mut full = false;
    for unit in units(text) {
        total += 1;
        if total < offset || full {
            continue;
        }
        match &mut shown {
            // A unit is at most MAX_BYTES, so the first always fits.
            None => shown = Some((unit, unit, 1)),
            Some((first, last, count)) => {
                if *count >= limit || unit.end - first.start > MAX_BYTES {
                    full = true;
                } else {
                    *last = unit;
                    *count += 1;
                }
            }
        }
    }
    match shown {
        Some((first, last, count)) => Page {
            text: &text[first.start..last.end],
            first: offset,
            last: offset + count - 1,
            total,
            splits_a_line: !last.ends_line && last.end < text.len(),
        },
        None => Page {
            text: "",
            first: offset,
            last: offset - 1,
            total,
            splits_a_line: false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(offset: u64, limit: u64) -> PageRequest {
        PageRequest {
            offset: Some(offset),
            limit: Some(limit),
        }
    }

    /// Every page, read in turn and joined as the notices say, gives the
    /// text back.
    fn reassemble(text: &str) -> String {
        let mut out = String::new();
        let mut offset = 1;
        loop {
            let p = page(text, req(offset, MAX_LINES as u64));
            assert!(p.first == offset && p.last >= p.first, "{p:?}");
            out.push_str(p.text);
            if !p.has_more() {
                return out;
            }
            if !p.splits_a_line {
                out.push('\n');
            }
            offset = p.last + 1;
        }
    }

    #[test]
    fn a_short_text_is_one_page() {
        let p = page("a\nb", PageRequest::default());
        assert_eq!((p.text, p.first, p.last, p.total), ("a\nb", 1, 2, 2));
        assert!(!p.has_more());
    }

    #[test]
    fn lines_are_cut_at_the_line_limit_and_resume_at_the_offset() {
        let text: String = (1..=2500).map(|i| format!("line {i}\n")).collect();
        let p = page(&text, PageRequest::default());
        assert_eq!((p.first, p.last, p.total), (1, 2000, 2501));
        assert!(p.text.ends_with("line 2000"));
        let p = page(&text, req(2001, 10));
        assert!(p.text.starts_with("line 2001\n") && p.text.ends_with("line 2010"));
        assert_eq!(reassemble(&text), text);
    }

    #[test]
    fn a_long_line_is_split_on_a_char_boundary_and_never_empty() {
        let text = format!("{}\nend", "é".repeat(40_000));
        let p = page(&text, PageRequest::default());
        assert!(!p.text.is_empty() && p.text.len() <= SPLIT_BYTES);
        assert!(p.splits_a_line);
        assert_eq!(p.total, 3);
        assert!(reassemble(&text) == text);
        let emoji = "😀".repeat(30_000);
        assert!(reassemble(&emoji) == emoji);
    }

    #[test]
    fn lines_of_many_parts_each_come_back_whole() {
        // Each line in several parts, short lines between them.
        let long = |c: &str| c.repeat(SPLIT_BYTES * 3 + 7);
        let text = format!("{}\nshort\n{}\n\n{}", long("a"), long("b"), long("c"));
        // a: units 1 to 4, short: 5, b: 6 to 9, the empty line: 10, c: 11 on.
        assert_eq!(page(&text, req(1, 1)).text.len(), SPLIT_BYTES);
        assert_eq!(page(&text, req(5, 1)).text, "short");
        assert_eq!(page(&text, req(10, 1)).text, "");
        let last = page(&text, req(14, 1));
        assert!(last.text.len() == 7 && last.text.starts_with('c') && last.total == 14);
        assert!(reassemble(&text) == text);
    }

    #[test]
    fn the_byte_limit_keeps_whole_lines() {
        let text = format!("a\n{}", "y".repeat(52_000));
        let p = page(&text, PageRequest::default());
        assert!(p.text.len() <= MAX_BYTES && p.splits_a_line && p.last == 2);
        assert!(reassemble(&text) == text);
        let text = format!("{}\n{}", "a".repeat(40_000), "b".repeat(20_000));
        let p = page(&text, PageRequest::default());
        assert!(p.text.len() == 40_000 && p.last == 1 && !p.splits_a_line);
    }

    #[test]
    fn an_offset_past_the_end_shows_nothing() {
        let p = page("a\nb", req(9, 1));
        assert_eq!((p.text, p.first, p.last, p.total), ("", 9, 8, 2));
        assert!(!p.has_more());
    }
}

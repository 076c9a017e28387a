//! Text for the files the end-to-end tests have the agent read.

/// About `bytes` of text with `marker` on every line (so any excerpt shows it).
pub fn big_file(marker: &str, bytes: usize) -> String {
    let mut out = String::new();
    let mut i = 0;
    while out.len() < bytes {
        out.push_str(&format!(
            "{marker} line {i:04}: the quick brown fox jumps over the lazy dog\n"
        ));
        i += 1;
    }
    out
}

//! Walking a directory for session files: bounded by the real tree (no
//! symlinked directory is followed), sorted by path.

use std::path::{Path, PathBuf};

/// Every `*.jsonl` below `dir`, sorted by path.
pub fn session_files(dir: &Path) -> Vec<PathBuf> {
    files_named(dir, "jsonl")
}

/// Every file below `dir` whose extension is `ext`, sorted by path.
/// Symlinked directories are not followed, so the walk is bounded by the
/// real tree: a link cycle (`loop -> ..`) cannot make it run forever.
pub fn files_named(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            if is_dir {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == ext) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Why a file with neither a session header nor an entry is not measured.
pub const NOT_A_SESSION: &str = "not a pi session (no session header, no entry)";

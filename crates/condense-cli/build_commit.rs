//! The commit `condense --version` names: shared by the build script and the
//! tests (`tests/version.rs`), so the fallback is tested where it is written.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What `--version` says when the source has no git history (a crates.io or
/// tarball build) and `CONDENSE_COMMIT` is not set.
pub const UNKNOWN_COMMIT: &str = "unknown";

/// The environment variable a packager sets to name the commit of a source
/// tree that has no `.git`.
pub const COMMIT_ENV: &str = "CONDENSE_COMMIT";

/// Runs git in `dir` with `args`; its trimmed stdout, or `None` when git is
/// missing, fails, or prints nothing.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// The short commit hash of the checkout holding `dir`, if it is one.
pub fn commit_of(dir: &Path) -> Option<String> {
    let hash = git(dir, &["rev-parse", "--short=12", "HEAD"])?;
    hash.chars().all(|c| c.is_ascii_hexdigit()).then_some(hash)
}

/// The commit to print: an explicit `CONDENSE_COMMIT`, else git's, else
/// [`UNKNOWN_COMMIT`].
pub fn describe(explicit: Option<String>, from_git: Option<String>) -> String {
    explicit
        .map(|c| c.trim().to_owned())
        .filter(|c| !c.is_empty())
        .or(from_git)
        .unwrap_or_else(|| UNKNOWN_COMMIT.to_owned())
}

/// The files whose change means another commit: `HEAD`, the branch it
/// points to, and `packed-refs` (a worktree's HEAD lives in its own git
/// directory, its branches in the common one). Only files that exist: cargo
/// reruns a build script on every build while a watched file is missing.
pub fn watched_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let git_dir = git(dir, &["rev-parse", "--absolute-git-dir"]).map(PathBuf::from);
    let common = git(dir, &["rev-parse", "--git-common-dir"]).map(|c| {
        let c = PathBuf::from(c);
        if c.is_absolute() {
            c
        } else {
            dir.join(c)
        }
    });
    if let Some(git_dir) = &git_dir {
        files.push(git_dir.join("HEAD"));
    }
    if let Some(common) = common.or(git_dir) {
        if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
            files.push(common.join(branch));
        }
        files.push(common.join("packed-refs"));
    }
    files.retain(|f| f.is_file());
    files
}

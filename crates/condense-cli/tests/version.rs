//! `condense --version`: the crate version and the commit the binary was
//! built from, with the fallbacks of build_commit.rs (the build script's own
//! code, included here).

#[allow(dead_code)]
#[path = "../build_commit.rs"]
mod build_commit;

use std::path::Path;
use std::process::Command;

use build_commit::{commit_of, describe, UNKNOWN_COMMIT};

fn version_line() -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_condense"))
        .arg("--version")
        .output()
        .expect("run condense --version");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout)
        .expect("UTF-8")
        .trim()
        .to_owned()
}

#[test]
fn version_names_the_crate_version_and_the_built_commit() {
    let line = version_line();
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let expected = describe(
        std::env::var(build_commit::COMMIT_ENV).ok(),
        commit_of(manifest),
    );
    assert_eq!(
        line,
        format!("condense {} (commit {expected})", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn a_checkout_gives_a_short_hex_commit() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let has_git = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(manifest)
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_git {
        // A source tree without history: the fallback case below covers it.
        assert_eq!(commit_of(manifest), None);
        return;
    }
    let commit = commit_of(manifest).expect("a commit in a git checkout");
    assert_eq!(commit.len(), 12, "{commit}");
    assert!(commit.chars().all(|c| c.is_ascii_hexdigit()), "{commit}");
}

#[test]
fn no_git_history_falls_back() {
    let dir = tempfile::tempdir().expect("temp dir");
    assert_eq!(commit_of(dir.path()), None);
    assert_eq!(describe(None, None), UNKNOWN_COMMIT);
    assert_eq!(describe(Some("  ".into()), None), UNKNOWN_COMMIT);
    assert_eq!(
        describe(Some("v0.1.0-src".into()), Some("abc".into())),
        "v0.1.0-src",
        "an explicit commit wins"
    );
    assert_eq!(describe(None, Some("0123456789ab".into())), "0123456789ab");
}

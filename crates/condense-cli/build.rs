//! Bakes the commit into the binary for `condense --version`
//! (`CONDENSE_BUILD_COMMIT`; see build_commit.rs).

#[path = "build_commit.rs"]
mod build_commit;

use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=build_commit.rs");
    println!("cargo:rerun-if-env-changed={}", build_commit::COMMIT_ENV);
    for file in build_commit::watched_files(&dir) {
        println!("cargo:rerun-if-changed={}", file.display());
    }
    let commit = build_commit::describe(
        std::env::var(build_commit::COMMIT_ENV).ok(),
        build_commit::commit_of(&dir),
    );
    println!("cargo:rustc-env=CONDENSE_BUILD_COMMIT={commit}");
}

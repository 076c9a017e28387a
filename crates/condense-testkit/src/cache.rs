//! Where the end-to-end installs live, and the switch that skips them.
//!
//! The cache directory is `$CONDENSE_E2E_CACHE`, or `<workspace>/.cache/pi-e2e`
//! (git-ignored): Node and pi ([`crate::pi_env`]), TypeScript
//! ([`crate::typescript`]) and OpenCode ([`crate::opencode_env`]) are
//! installed there from the npm registry, each once.

use std::path::{Path, PathBuf};

/// Set to `1` to skip end-to-end tests (developer convenience; CI never sets it).
pub const SKIP_ENV: &str = "CONDENSE_SKIP_E2E";
/// Overrides the cache directory (default `<workspace>/.cache/pi-e2e`).
pub const CACHE_ENV: &str = "CONDENSE_E2E_CACHE";

/// The workspace root (two levels above this crate's manifest, `crates/condense-testkit`).
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .and_then(Path::parent)
        .unwrap_or(manifest)
        .to_path_buf()
}

/// The cache directory: `$CONDENSE_E2E_CACHE` or `<workspace>/.cache/pi-e2e`.
pub fn cache_dir() -> PathBuf {
    match std::env::var_os(CACHE_ENV).filter(|v| !v.is_empty()) {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() {
                dir
            } else {
                std::env::current_dir().unwrap_or_default().join(dir)
            }
        }
        None => workspace_root().join(".cache").join("pi-e2e"),
    }
}

//! The `condense` CLI as the host crates' end-to-end tests run it: the
//! binary cargo built next to the crate's sidecar, and `simulate --json`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The `condense` binary cargo built next to `sidecar` (the same target
/// directory). `cargo test --workspace` builds it; a host crate's tests
/// alone need `cargo build -p condense-cli` first, which the panic says.
pub fn condense_next_to(sidecar: &Path) -> PathBuf {
    let bin = sidecar.with_file_name(format!("condense{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.is_file(),
        "the condense CLI is not built next to the sidecar ({}): run `cargo build -p condense-cli` first",
        bin.display()
    );
    bin
}

/// `condense simulate --json` with `args` (the target among them): the
/// report. A failed run panics with its stderr.
pub fn simulate_json<I, S>(bin: &Path, args: I) -> Value
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let out = Command::new(bin)
        .args(["simulate", "--json"])
        .args(args)
        .output()
        .expect("condense simulate runs");
    assert!(
        out.status.success(),
        "condense simulate failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("simulate --json")
}

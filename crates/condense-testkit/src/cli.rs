//! The `condense` binary as the host crates' tests run it: as the sidecar
//! their shims start (`condense sidecar`) and as `simulate --json`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The `condense` binary cargo built into the target directory of the
/// running test (`target/<profile>/`). `cargo test --workspace` and the
/// e2e step build it, as a package of theirs has tests; a host crate's
/// tests alone need `cargo build -p condense-cli` first, which the panic
/// says.
pub fn condense_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    // A test binary is `target/<profile>/deps/<name>-<hash>`.
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("a test binary sits in target/<profile>/deps");
    let bin = profile_dir.join(format!("condense{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.is_file(),
        "the condense binary is not built in {}: run `cargo build -p condense-cli` (with this test's profile) first",
        profile_dir.display()
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

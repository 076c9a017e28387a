//! Runs the plugin's unit tests (`plugin/*.test.ts`) with the end-to-end
//! tests' Node 22 (`node --test`; Node strips the types).
//!
//! Needs Node: `support::pi_env::require_pi` installs it into the e2e cache
//! and fails the test if it cannot. `CONDENSE_SKIP_E2E=1` skips it.

mod support;

use std::process::Command;
use std::time::Duration;

use support::pi_env::require_pi;
use support::process::run_bounded;

#[test]
fn plugin_unit_tests_pass() {
    let Some(install) = require_pi() else { return };
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("plugin");
    let mut tests: Vec<_> = std::fs::read_dir(&dir)
        .expect("plugin dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".test.ts"))
        .collect();
    tests.sort();
    assert!(!tests.is_empty(), "no *.test.ts in {}", dir.display());
    let mut cmd = Command::new(&install.node);
    cmd.arg("--experimental-strip-types")
        .arg("--no-warnings")
        .args(["--import", "./test-resolve.mjs"])
        .arg("--test")
        .args(&tests)
        .current_dir(&dir);
    let out = run_bounded(&mut cmd, Duration::from_secs(120)).expect("run node --test");
    let report = format!("stdout:\n{}\nstderr:\n{}", out.stdout, out.stderr);
    assert!(out.success(), "node --test failed:\n{report}");
    assert!(report.contains("# fail 0"), "{report}");
    assert!(!report.contains("# pass 0"), "{report}");
}

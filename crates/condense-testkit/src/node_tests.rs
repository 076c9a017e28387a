//! The shims' TypeScript unit tests (`*.test.ts`), run with the e2e
//! install's Node (`node --test`; Node strips the types).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::process::run_bounded;

/// Runs every `*.test.ts` in `dir` with `node` and fails the calling test
/// unless they ran and none failed. `node_args` go before `--test`.
pub fn assert_node_tests_pass(node: &Path, dir: &Path, node_args: &[&str]) {
    let mut tests: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".test.ts"))
        .collect();
    tests.sort();
    assert!(!tests.is_empty(), "no *.test.ts in {}", dir.display());
    let mut cmd = Command::new(node);
    cmd.arg("--experimental-strip-types")
        .arg("--no-warnings")
        .args(node_args)
        .arg("--test")
        .args(&tests)
        .current_dir(dir);
    let out = run_bounded(&mut cmd, Duration::from_secs(120)).expect("run node --test");
    let report = format!("stdout:\n{}\nstderr:\n{}", out.stdout, out.stderr);
    assert!(out.success(), "node --test failed:\n{report}");
    assert!(report.contains("# fail 0"), "{report}");
    assert!(!report.contains("# pass 0"), "{report}");
}

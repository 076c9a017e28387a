//! Type-checks the TypeScript shim (`tsc --noEmit -p extension/tsconfig.json`),
//! so a field renamed in one of `extension/protocol.ts`'s interfaces alone
//! (not in the code that builds or reads it) fails the build. pi's modules
//! are declared in `extension/types/pi.d.ts`; the compiler is installed
//! from the npm registry next to the e2e installs (`support::typescript`).
//!
//! `CONDENSE_SKIP_E2E=1` skips it, as it skips every test that needs Node.

mod support;

use std::process::Command;
use std::time::Duration;

use support::pi_env::require_pi;
use support::process::run_bounded;
use support::typescript::typescript;

#[test]
fn the_shim_type_checks() {
    let Some(install) = require_pi() else { return };
    let ts = typescript().unwrap_or_else(|e| panic!("cannot get the TypeScript compiler: {e}"));
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("extension");
    let mut cmd = Command::new(&install.node);
    cmd.arg(&ts.tsc)
        .args([
            "--noEmit",
            "--pretty",
            "false",
            "-p",
            "tsconfig.json",
            "--typeRoots",
        ])
        .arg(&ts.type_roots)
        .current_dir(&dir);
    let out = run_bounded(&mut cmd, Duration::from_secs(300)).expect("run tsc");
    assert!(
        out.success(),
        "tsc found errors in the shim ({}):\n{}{}",
        out.describe_status(),
        out.stdout,
        out.stderr
    );
}

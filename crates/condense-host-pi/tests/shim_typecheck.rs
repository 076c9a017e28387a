//! Type-checks the TypeScript shim (`tsc --noEmit -p extension/tsconfig.json`),
//! with the client modules it imports, so a field the shim reads wrong
//! from a protocol interface fails the build. pi's modules
//! are declared in `extension/types/pi.d.ts`; the compiler is installed
//! from the npm registry next to the e2e installs (`support::typescript`).
//!
//! `CONDENSE_SKIP_E2E=1` skips it, as it skips every test that needs Node.

mod support;

use support::pi_env::require_pi;
use support::typescript::typescript;

#[test]
fn the_shim_type_checks() {
    let Some(install) = require_pi() else { return };
    let ts = typescript().unwrap_or_else(|e| panic!("cannot get the TypeScript compiler: {e}"));
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("extension");
    let roots = ts.type_roots.as_os_str();
    ts.assert_clean(
        &install.node,
        &dir,
        &["--typeRoots".as_ref(), roots],
        "the shim",
    );
}

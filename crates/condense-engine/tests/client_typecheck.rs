//! Type-checks the TypeScript client (`tsc --noEmit -p client/tsconfig.json`),
//! so a field renamed in one of `client/protocol.ts`'s interfaces alone
//! (not in the code that builds or reads it) fails the build. The compiler
//! is installed from the npm registry next to the e2e installs
//! (`condense_testkit::typescript`).
//!
//! `CONDENSE_SKIP_E2E=1` skips it, as it skips every test that needs Node.

use condense_testkit::pi_env::require_pi;
use condense_testkit::typescript::typescript;

#[test]
fn the_client_type_checks() {
    let Some(install) = require_pi() else { return };
    let ts = typescript().unwrap_or_else(|e| panic!("cannot get the TypeScript compiler: {e}"));
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("client");
    let roots = ts.type_roots.as_os_str();
    ts.assert_clean(
        &install.node,
        &dir,
        &["--typeRoots".as_ref(), roots],
        "the client",
    );
}

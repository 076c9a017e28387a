//! Runs the TypeScript client's unit tests (`client/*.test.ts`) with the
//! end-to-end tests' Node 22 (`node --test`; Node strips the types).
//!
//! Needs Node: `pi_env::require_pi` installs it into the e2e cache and fails
//! the test if it cannot. `CONDENSE_SKIP_E2E=1` skips it.

use std::path::Path;

use condense_testkit::node_tests::assert_node_tests_pass;
use condense_testkit::pi_env::require_pi;

#[test]
fn client_unit_tests_pass() {
    let Some(install) = require_pi() else { return };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("client");
    assert_node_tests_pass(&install.node, &dir, &[]);
}

//! Runs the plugin's unit tests (`plugin/*.test.ts`) with the end-to-end
//! tests' Node 22 (`node --test`; Node strips the types).
//!
//! Needs Node: `support::pi_env::require_pi` installs it into the e2e cache
//! and fails the test if it cannot. `CONDENSE_SKIP_E2E=1` skips it.

mod support;

use std::path::Path;

use support::node_tests::assert_node_tests_pass;
use support::pi_env::require_pi;

#[test]
fn plugin_unit_tests_pass() {
    let Some(install) = require_pi() else { return };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("plugin");
    assert_node_tests_pass(&install.node, &dir, &[]);
}

//! Type-checks the OpenCode plugin (`tsc --noEmit`) against the
//! `@opencode-ai/plugin` types of the OpenCode the e2e tests install, and
//! the client's protocol types it imports: a hook's input read wrong, or a
//! request whose params drift from `protocol.ts`, fails the build. The
//! compiler comes from the npm registry next to the e2e installs
//! (`support::typescript`); the tsconfig is written into a temporary
//! directory, since the package's location is the install's.
//!
//! `CONDENSE_SKIP_E2E=1` skips it, as it skips every test that needs Node.

mod support;

use std::path::Path;

use serde_json::json;
use support::opencode_env::require_opencode;
use support::pi_env::require_pi;
use support::typescript::typescript;

#[test]
fn the_plugin_type_checks() {
    let Some(node) = require_pi() else { return };
    let Some(opencode) = require_opencode() else {
        return;
    };
    let ts = typescript().unwrap_or_else(|e| panic!("cannot get the TypeScript compiler: {e}"));
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<String> = ["plugin", "bench"]
        .iter()
        .flat_map(|d| std::fs::read_dir(crate_dir.join(d)).expect("a source directory"))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ts"))
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert!(files.len() >= 8, "the plugin's sources: {files:?}");
    let plugin_types = opencode
        .node_modules()
        .join("@opencode-ai/plugin/dist/index.d.ts");
    assert!(plugin_types.is_file(), "{}", plugin_types.display());
    let dir = tempfile::tempdir().expect("temp dir");
    let config = json!({
        "compilerOptions": {
            "target": "ES2022",
            "module": "ESNext",
            "moduleResolution": "bundler",
            "allowImportingTsExtensions": true,
            "noEmit": true,
            "strict": true,
            "noImplicitAny": true,
            "skipLibCheck": true,
            "types": ["node"],
            "lib": ["ES2022"],
            "typeRoots": [ts.type_roots],
            "paths": {"@opencode-ai/plugin": [plugin_types]},
        },
        "files": files,
    });
    std::fs::write(dir.path().join("tsconfig.json"), config.to_string())
        .expect("write tsconfig.json");
    ts.assert_clean(&node.node, dir.path(), &[], "the plugin");
}

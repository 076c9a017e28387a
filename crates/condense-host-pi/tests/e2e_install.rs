//! condense installed into pi the way a user does it: `pi install
//! npm:condense-pi` against a real npm registry (verdaccio on 127.0.0.1,
//! `support::registry`) serving the packages `cargo xtask dist` packed, on a
//! machine with no Rust: no `cargo` and no `target/` on `PATH`, no
//! `CONDENSE_BIN`, a temporary `HOME`. The sidecar comes from the
//! platform package npm picked; the core scenario (`support::scenario`) then
//! plays through it: summaries, stubs reaching the model, the query bringing
//! back the original.
//!
//! `without_the_platform_package_pi_carries_on` installs with npm's optional
//! dependencies omitted (what a platform without a package gets): one notice
//! naming the package to install, and pi answers unpruned.
//!
//! Needs `target/dist/*.tgz` (`cargo xtask dist`; the CI's `dist` step runs
//! it before the e2e step) and fails, never skips, without them.

mod support;

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::json;
use support::fake_llm::{FakeLlm, Reply};
use support::pi_env::{require_pi, PiEnv};
use support::process::path_without_rust;
use support::registry::{dist_tarballs, node_platform, Registry};
use support::scenario::{self, big_file, condense_settings, tool_result};

/// Every file named `name` under `dir`.
fn find_files(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        let Ok(entries) = fs::read_dir(&current) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n == name) {
                found.push(path);
            }
        }
    }
    found
}

/// A registry serving the packed packages.
fn registry_with_packages(node: &Path) -> Registry {
    let tarballs = dist_tarballs();
    let registry = Registry::start(node);
    for tarball in &tarballs {
        registry.publish(tarball);
    }
    registry
}

/// `pi` set up as on a machine without Rust, pointed at `registry`, with
/// `condense-pi` installed from it (`extra_npm_env` for that install only).
fn install_condense_pi(pi: PiEnv, registry: &Registry, extra_npm_env: &[(&str, &str)]) -> PiEnv {
    // Only the directories of `node` and `npm` and the system's.
    let node_dir: Vec<&Path> = pi.install().node.parent().into_iter().collect();
    let path = path_without_rust(&node_dir);
    let mut pi = pi
        .with_installed_packages()
        .with_env("PATH", path)
        .without_env("CONDENSE_BIN")
        .without_env("CARGO_TARGET_DIR")
        .without_env("CARGO");
    for (key, value) in registry.npm_env() {
        pi = pi.with_env(key, value);
    }
    let mut installing = pi;
    for (key, value) in extra_npm_env {
        installing = installing.with_env(*key, *value);
    }
    let installed = installing.run(["install", "npm:condense-pi"]);
    assert!(
        installed.success(),
        "pi install npm:condense-pi failed\n{}\n--- verdaccio ---\n{}",
        installed.report(),
        registry.log()
    );
    installing
}

#[test]
fn pi_install_from_a_registry_prunes() {
    let Some(install) = require_pi() else {
        return;
    };
    let registry = registry_with_packages(&install.node);
    let runs = scenario::flush_stub_and_recover_with(install, |pi: PiEnv| {
        let pi = install_condense_pi(pi, &registry, &[]);
        // The sidecar pi will run is the platform package's, inside the
        // agent directory (nothing else on this machine has one).
        let mut sidecars = find_files(&pi.agent_dir, "condense");
        sidecars.extend(find_files(&pi.home_dir, "condense"));
        assert!(
            sidecars.iter().any(|p| p
                .parent()
                .and_then(Path::file_name)
                .is_some_and(|d| d == "bin")),
            "no condense binary from the platform package under {} or {}: {sidecars:?}",
            pi.agent_dir.display(),
            pi.home_dir.display(),
        );
        pi
    });
    // The shim found its sidecar (no notice about a missing one).
    for run in [&runs.first, &runs.second] {
        assert!(
            !run.output.stderr.contains("sidecar was not found"),
            "{}",
            run.report()
        );
    }
}

#[test]
fn without_the_platform_package_pi_carries_on() {
    let Some(install) = require_pi() else {
        return;
    };
    let registry = registry_with_packages(&install.node);
    let llm = FakeLlm::start([
        Reply::tool_call("call_a", "read", json!({"path": "alpha.txt"})),
        Reply::text("Read it."),
    ]);
    let pi = PiEnv::new(install, &llm.base_url()).with_settings(condense_settings());
    let pi = install_condense_pi(pi, &registry, &[("npm_config_omit", "optional")]);
    assert!(
        find_files(&pi.agent_dir, "condense").is_empty()
            && find_files(&pi.home_dir, "condense").is_empty(),
        "the optional platform package was left out"
    );
    fs::write(pi.work_dir.join("alpha.txt"), big_file("ALPHA-0b9e", 5000)).expect("write");
    let run = pi.prompt("Read alpha.txt.");
    run.assert_success();
    llm.assert_script_consumed();
    let package = format!("install the npm package condense-{}", node_platform());
    assert_eq!(
        run.output.stderr.matches(&package).count(),
        1,
        "one notice naming the package\n{}",
        run.report()
    );
    let main = llm.main_requests();
    assert!(tool_result(&main[1], "call_a").contains("ALPHA-0b9e line 0000"));
    assert!(llm.summary_requests().is_empty());
}

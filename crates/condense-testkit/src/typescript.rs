//! The TypeScript compiler for type-checking the shim (`tsc --noEmit`).
//!
//! Installed with the system `npm` from the npm registry, as the e2e
//! tests install Node and pi: [`TYPESCRIPT_VERSION`] and Node's type
//! declarations ([`TYPES_NODE_VERSION`]) into
//! `<cache>/typescript-<version>-types-node-<version>/` (the cache of
//! [`cache_dir`]), through a staging directory renamed into place
//! once `tsc` is there. Run with the e2e install's Node.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use serde_json::json;

use crate::cache::cache_dir;
use crate::process::{run_bounded, tail, which};

/// The compiler (`npm view typescript@5 version`).
pub const TYPESCRIPT_VERSION: &str = "5.9.3";
/// Node's declarations, for the Node major the e2e tests run (`npm view @types/node@22 version`).
pub const TYPES_NODE_VERSION: &str = "22.20.7";

const INSTALL_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// An installed compiler.
pub struct TypeScript {
    /// `node_modules/typescript/bin/tsc` (a Node script).
    pub tsc: PathBuf,
    /// `node_modules/@types`, for `--typeRoots`.
    pub type_roots: PathBuf,
}

impl TypeScript {
    /// Runs `tsc --noEmit -p tsconfig.json` in `dir` with `node` and panics
    /// with the compiler's report unless it finds nothing; `extra` are more
    /// arguments (`--typeRoots`, say). `what` names the code in the report.
    pub fn assert_clean(&self, node: &Path, dir: &Path, extra: &[&std::ffi::OsStr], what: &str) {
        let mut cmd = Command::new(node);
        cmd.arg(&self.tsc)
            .args(["--noEmit", "--pretty", "false", "-p", "tsconfig.json"])
            .args(extra)
            .current_dir(dir);
        let out = run_bounded(&mut cmd, Duration::from_secs(300)).expect("run tsc");
        assert!(
            out.success(),
            "tsc found errors in {what} ({}):\n{}{}",
            out.describe_status(),
            out.stdout,
            out.stderr
        );
    }
}

/// Finds or installs the compiler once per test process; the error says why not.
pub fn typescript() -> Result<&'static TypeScript, String> {
    static INSTALL: OnceLock<Result<TypeScript, String>> = OnceLock::new();
    INSTALL
        .get_or_init(|| find_or_install(&cache_dir()))
        .as_ref()
        .map_err(Clone::clone)
}

fn installed(dir: &Path) -> Option<TypeScript> {
    let modules = dir.join("node_modules");
    let found = TypeScript {
        tsc: modules.join("typescript/bin/tsc"),
        type_roots: modules.join("@types"),
    };
    (dir.join(".complete").is_file()
        && found.tsc.is_file()
        && found.type_roots.join("node/package.json").is_file())
    .then_some(found)
}

fn find_or_install(cache: &Path) -> Result<TypeScript, String> {
    let target = cache.join(format!(
        "typescript-{TYPESCRIPT_VERSION}-types-node-{TYPES_NODE_VERSION}"
    ));
    if let Some(found) = installed(&target) {
        return Ok(found);
    }
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let staging = cache.join(format!(".staging-{}-{nanos}", std::process::id()));
    let result = install_into(&staging).and_then(|()| {
        if target.exists() && installed(&target).is_none() {
            let _ = fs::remove_dir_all(&target);
        }
        match fs::rename(&staging, &target) {
            Ok(()) => Ok(()),
            // Another process finished first; use its install.
            Err(_) if installed(&target).is_some() => Ok(()),
            Err(e) => Err(format!("cannot move {} into place: {e}", staging.display())),
        }
    });
    if staging.exists() {
        let _ = fs::remove_dir_all(&staging);
    }
    result?;
    installed(&target).ok_or_else(|| format!("{} has no tsc after install", target.display()))
}

fn install_into(dir: &Path) -> Result<(), String> {
    fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let manifest = json!({
        "name": "condense-shim-typecheck",
        "private": true,
        "description": "TypeScript for condense's shim type check (generated; safe to delete)",
        "dependencies": {"typescript": TYPESCRIPT_VERSION, "@types/node": TYPES_NODE_VERSION},
    });
    fs::write(dir.join("package.json"), manifest.to_string())
        .map_err(|e| format!("cannot write package.json: {e}"))?;
    let npm = which("npm").ok_or("`npm` is not on PATH")?;
    eprintln!(
        "e2e: installing typescript@{TYPESCRIPT_VERSION} into {} …",
        dir.display()
    );
    let mut cmd = Command::new(&npm);
    cmd.current_dir(dir)
        .args(["install", "--no-audit", "--no-fund", "--loglevel=warn"])
        .env("npm_config_update_notifier", "false");
    let out = run_bounded(&mut cmd, INSTALL_TIMEOUT)
        .map_err(|e| format!("cannot run {}: {e}", npm.display()))?;
    if !out.success() {
        return Err(format!(
            "`npm install` in {} failed ({}).\n--- stderr ---\n{}",
            dir.display(),
            out.describe_status(),
            tail(&out.stderr, 8000)
        ));
    }
    fs::write(dir.join(".complete"), TYPESCRIPT_VERSION)
        .map_err(|e| format!("cannot write the completion marker: {e}"))
}

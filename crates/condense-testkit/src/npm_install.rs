//! A package installed from the npm registry into the e2e cache, once:
//! staged beside its final directory and moved into place whole, so a
//! concurrent or killed install never leaves a half-filled directory under
//! the final name.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::process::run_bounded;

/// The install in `cache/<name>` that `verify` accepts, or a fresh one of
/// `package` (a `package.json`), `what` naming it in the progress line.
pub fn install_once<T>(
    cache: &Path,
    name: &str,
    package: &Value,
    what: &str,
    timeout: Duration,
    verify: impl Fn(&Path) -> Result<T, String>,
) -> Result<T, String> {
    let dir = cache.join(name);
    if let Ok(install) = verify(&dir) {
        return Ok(install);
    }
    fs::create_dir_all(cache).map_err(|e| format!("create {}: {e}", cache.display()))?;
    let staging = cache.join(format!(".staging-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&staging);
    fs::create_dir_all(&staging).map_err(|e| format!("create {}: {e}", staging.display()))?;
    fs::write(staging.join("package.json"), package.to_string())
        .map_err(|e| format!("write package.json: {e}"))?;
    eprintln!("e2e: installing {what} into {} …", dir.display());
    let out = run_bounded(
        Command::new("npm")
            .args(["install", "--no-audit", "--no-fund"])
            .current_dir(&staging)
            .env("npm_config_update_notifier", "false"),
        timeout,
    )
    .map_err(|e| format!("cannot run npm: {e} (CI's .ci/run installs Debian's npm)"))?;
    if !out.success() {
        return Err(format!(
            "npm install failed:\n{}\n{}",
            out.stdout, out.stderr
        ));
    }
    verify(&staging)?;
    if fs::rename(&staging, &dir).is_err() {
        // Another process won the race: use its install.
        let _ = fs::remove_dir_all(&staging);
    }
    verify(&dir)
}

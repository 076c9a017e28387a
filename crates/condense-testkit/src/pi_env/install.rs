//! Finding or installing a target in the e2e cache: staged, verified,
//! then renamed into place, at most once per test process.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Value};

use crate::cache::{cache_dir, SKIP_ENV};
use crate::process::{run_bounded, tail, which};

use super::{env_or, PiTarget, PI_VERSION, PI_VERSION_ENV};

/// Upper bound for `npm install`.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(20 * 60);

/// Upper bound for `--version` checks.
const VERSION_TIMEOUT: Duration = Duration::from_secs(60);

/// Staging directories older than this are leftovers of killed installs.
const STALE_STAGING: Duration = Duration::from_secs(6 * 60 * 60);

/// A verified Node + pi installation.
#[derive(Debug, Clone)]
pub struct PiInstall {
    /// The install directory (`<cache>/<PiTarget::dir_name>`).
    pub dir: PathBuf,
    /// The Node binary.
    pub node: PathBuf,
    /// pi's CLI entry script (from its package.json `bin.pi`).
    pub cli: PathBuf,
    /// The pi version installed.
    pub pi_version: String,
    /// What was installed.
    pub target: PiTarget,
}

/// Returns the default installation ([`PiTarget::default_target`]), or
/// `None` if `CONDENSE_SKIP_E2E=1`.
///
/// Panics with a clear message if Node or pi cannot be found or installed.
pub fn require_pi() -> Option<&'static PiInstall> {
    require_pi_target(&PiTarget::default_target())
}

/// Returns the installation of `target`, or `None` if `CONDENSE_SKIP_E2E=1`.
///
/// Panics with a clear message if Node or pi cannot be found or installed.
pub fn require_pi_target(target: &PiTarget) -> Option<&'static PiInstall> {
    if std::env::var(SKIP_ENV).is_ok_and(|v| v == "1") {
        eprintln!(
            "e2e: {SKIP_ENV}=1 is set: skipping this end-to-end test (developer convenience; \
             CI never sets it)"
        );
        return None;
    }
    match PiInstall::get_target(target) {
        Ok(install) => Some(install),
        Err(err) => panic!(
            "e2e: {target} is needed for this end-to-end test and could not be \
             installed:\n{err}\n\nFix: make `npm` available (Debian: `apt-get install -y nodejs \
             npm`) with access to the npm registry, or set {SKIP_ENV}=1 to skip end-to-end \
             tests locally."
        ),
    }
}

/// The pi version to use: `$CONDENSE_E2E_PI_VERSION` or [`PI_VERSION`].
pub fn pi_version() -> String {
    env_or(PI_VERSION_ENV, PI_VERSION)
}

/// One target's install result, computed at most once per test process.
type InstallCell = Arc<OnceLock<Result<&'static PiInstall, String>>>;

impl PiInstall {
    /// Finds or installs the default target ([`PiTarget::default_target`])
    /// once per test process.
    pub fn get() -> Result<&'static PiInstall, String> {
        Self::get_target(&PiTarget::default_target())
    }

    /// Finds or installs `target` once per test process. Tests asking for
    /// the same target at the same time wait for one install; different
    /// targets install independently.
    pub fn get_target(target: &PiTarget) -> Result<&'static PiInstall, String> {
        static INSTALLS: OnceLock<Mutex<HashMap<PiTarget, InstallCell>>> = OnceLock::new();
        let cell = {
            let mut map = INSTALLS
                .get_or_init(Default::default)
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            Arc::clone(map.entry(target.clone()).or_default())
        };
        cell.get_or_init(|| {
            let started = Instant::now();
            let result = find_or_install(&cache_dir(), target);
            if let Ok(install) = &result {
                eprintln!(
                    "e2e: {target} ready in {:.1}s at {}",
                    started.elapsed().as_secs_f64(),
                    install.dir.display()
                );
            }
            // Installs live for the whole test process.
            result.map(|install| &*Box::leak(Box::new(install)))
        })
        .clone()
    }

    /// A `Command` running pi's CLI with the install's Node binary.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(&self.node);
        cmd.arg(&self.cli);
        cmd
    }
}

fn find_or_install(cache: &Path, pi: &PiTarget) -> Result<PiInstall, String> {
    let name = pi.dir_name();
    let target = cache.join(&name);
    if target.join(".complete").is_file() {
        if let Ok(install) = verify(&target, pi) {
            return Ok(install);
        }
        eprintln!(
            "e2e: cached install at {} failed verification; reinstalling",
            target.display()
        );
    }
    fs::create_dir_all(cache).map_err(|e| format!("cannot create {}: {e}", cache.display()))?;
    remove_stale_staging(cache);

    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let staging = cache.join(format!(".staging-{}-{nanos}", std::process::id()));
    let result = install_into(&staging, pi).and_then(|_| {
        fs::write(staging.join(".complete"), format!("{name}\n"))
            .map_err(|e| format!("cannot write the completion marker: {e}"))?;
        if target.exists() && !target.join(".complete").is_file() {
            // A directory without the marker is nobody's finished install.
            let _ = fs::remove_dir_all(&target);
        }
        match fs::rename(&staging, &target) {
            Ok(()) => Ok(()),
            // Another process finished first; use its install.
            Err(_) if target.join(".complete").is_file() => Ok(()),
            Err(e) => Err(format!(
                "cannot move {} to {}: {e}",
                staging.display(),
                target.display()
            )),
        }
    });
    if staging.exists() {
        let _ = fs::remove_dir_all(&staging);
    }
    result?;
    verify(&target, pi)
}

/// Runs `npm install` for the target's packages in `dir` and verifies it.
fn install_into(dir: &Path, pi: &PiTarget) -> Result<(), String> {
    fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let manifest = json!({
        "name": "condense-pi-e2e",
        "private": true,
        "description": "Node + pi for condense's end-to-end tests (generated; safe to delete)",
        "dependencies": {
            "node": pi.node,
            pi.package.as_str(): pi.version,
        },
        // npm 11 asks for install scripts to be approved; `node` needs its
        // preinstall script to fetch the platform binary.
        "allowScripts": {"node": true},
    });
    fs::write(
        dir.join("package.json"),
        serde_json::to_string_pretty(&manifest).unwrap_or_default(),
    )
    .map_err(|e| format!("cannot write package.json: {e}"))?;

    let npm = which("npm").ok_or_else(|| {
        "`npm` is not on PATH (CI's .ci/run installs Debian's nodejs and npm when it is missing)"
            .to_owned()
    })?;
    eprintln!(
        "e2e: installing node@{} and {}@{} into {} …",
        pi.node,
        pi.package,
        pi.version,
        dir.display()
    );
    let mut cmd = Command::new(&npm);
    cmd.current_dir(dir)
        .args(["install", "--no-audit", "--no-fund", "--loglevel=warn"])
        .env("npm_config_update_notifier", "false");
    let out = run_bounded(&mut cmd, INSTALL_TIMEOUT)
        .map_err(|e| format!("cannot run {}: {e}", npm.display()))?;
    eprintln!(
        "e2e: npm install finished in {:.1}s ({})",
        out.elapsed.as_secs_f64(),
        out.describe_status()
    );
    if !out.success() {
        return Err(format!(
            "`npm install` in {} failed ({}).\n--- stdout ---\n{}\n--- stderr ---\n{}",
            dir.display(),
            out.describe_status(),
            tail(&out.stdout, 4000),
            tail(&out.stderr, 8000)
        ));
    }
    verify(dir, pi).map(|_| ())
}

/// Checks that `dir` holds a working Node and pi of the target's versions.
fn verify(dir: &Path, pi: &PiTarget) -> Result<PiInstall, String> {
    let node = dir.join("node_modules/node/bin/node");
    let out = run_bounded(Command::new(&node).arg("--version"), VERSION_TIMEOUT)
        .map_err(|e| format!("cannot run {}: {e}", node.display()))?;
    let got = out.stdout.trim();
    if !out.success() || got != format!("v{}", pi.node) {
        return Err(format!(
            "{} --version printed {got:?} ({}), expected v{}; stderr: {}",
            node.display(),
            out.describe_status(),
            pi.node,
            tail(&out.stderr, 2000)
        ));
    }

    let pkg_dir = dir.join("node_modules").join(&pi.package);
    let pkg_json = pkg_dir.join("package.json");
    let pkg: Value = fs::read_to_string(&pkg_json)
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .ok_or_else(|| format!("cannot read {}", pkg_json.display()))?;
    let bin = match pkg.get("bin") {
        Some(Value::String(path)) => Some(path.as_str()),
        Some(Value::Object(map)) => map.get("pi").and_then(Value::as_str),
        _ => None,
    }
    .ok_or_else(|| format!("{} has no `bin.pi`", pkg_json.display()))?;
    let cli = pkg_dir.join(bin);
    let install = PiInstall {
        dir: dir.to_path_buf(),
        node,
        cli,
        pi_version: pi.version.clone(),
        target: pi.clone(),
    };
    let out = run_bounded(install.command().arg("--version"), VERSION_TIMEOUT)
        .map_err(|e| format!("cannot run pi: {e}"))?;
    // pi ≥ 0.74 prints its version on stdout, 0.73 on stderr.
    let printed = match out.stdout.trim() {
        "" => out.stderr.trim(),
        stdout => stdout,
    };
    if !out.success() || printed != pi.version {
        return Err(format!(
            "`pi --version` printed {printed:?} ({}), expected {}; stderr: {}",
            out.describe_status(),
            pi.version,
            tail(&out.stderr, 2000)
        ));
    }
    Ok(install)
}

fn remove_stale_staging(cache: &Path) {
    let Ok(entries) = fs::read_dir(cache) else {
        return;
    };
    for entry in entries.flatten() {
        let stale = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > STALE_STAGING);
        if stale && entry.file_name().to_string_lossy().starts_with(".staging-") {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

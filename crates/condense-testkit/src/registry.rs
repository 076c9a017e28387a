//! A real npm registry on 127.0.0.1 for the install-from-registry tests:
//! verdaccio, installed once into the e2e cache, started per test with a
//! fresh storage, serving the packages `cargo xtask dist` packed.
//!
//! Packages named `condense-*` live only here (published by the test, never
//! looked up upstream); any other name is proxied to the public registry
//! (OpenCode's `@opencode-ai/plugin`, for instance).
//!
//! verdaccio 6.8.0 runs on the e2e tests' Node 22 (and on Node 20, where
//! later 6.x do not); its `node-fetch` is pinned to 2.7.0 with an npm
//! `overrides`, without which the install fails.

use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::cache::{cache_dir, workspace_root};
use crate::process::{run_bounded, tail, which};

/// The verdaccio release the tests pin.
pub const VERDACCIO_VERSION: &str = "6.8.0";
/// Upper bound for installing verdaccio.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(600);
/// Upper bound for verdaccio to answer its first ping.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Upper bound for one `npm publish`.
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(120);

/// The packages `cargo xtask dist` wrote, in publishing order (the platform
/// package first: the main packages depend on it).
pub fn dist_tarballs() -> Vec<PathBuf> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .filter(|v| !v.is_empty())
        .map(|d| workspace_root().join(d))
        .unwrap_or_else(|| workspace_root().join("target"));
    dist_tarballs_in(&target.join("dist"))
}

/// [`dist_tarballs`] from the directory `dist`; panics, saying in one line
/// what to run, when one is missing or stale.
fn dist_tarballs_in(dist: &Path) -> Vec<PathBuf> {
    let version = env!("CARGO_PKG_VERSION");
    let platform = node_platform();
    let tarballs: Vec<PathBuf> = [
        format!("condense-{platform}"),
        "condense-pi".to_owned(),
        "condense-opencode".to_owned(),
        "condense".to_owned(),
    ]
    .iter()
    .map(|name| dist.join(format!("{name}-{version}.tgz")))
    .collect();
    for tarball in &tarballs {
        assert!(
            tarball.is_file(),
            "{} is missing: this test installs what `cargo xtask dist` packs; run it first \
             (`cargo xtask ci` does, in its dist step)",
            tarball.display()
        );
    }
    assert_fresh(&dist.join("packages"));
    tarballs
}

/// Panics if the packed TypeScript is not the workspace's: packages left
/// from an older checkout would test old code. (The sidecars are not
/// compared: a release build of the same source differs from nothing the
/// test can see.)
fn assert_fresh(packages: &Path) {
    let root = workspace_root();
    // Each host package holds the host's sources and the client's at their
    // repository places below `crates/` (xtask's `packed_dir`).
    let sources = [
        ("condense-pi", "condense-host-pi/extension"),
        ("condense-pi", "condense-engine/client"),
        ("condense-opencode", "condense-host-opencode/plugin"),
        ("condense-opencode", "condense-engine/client"),
    ];
    for (package, place) in sources {
        let shipped = |dir: &Path| -> Vec<String> {
            let mut names: Vec<String> = fs::read_dir(dir)
                .map(|entries| {
                    entries
                        .flatten()
                        .filter_map(|e| e.file_name().into_string().ok())
                        .filter(|n| {
                            n.ends_with(".ts") && !n.ends_with(".test.ts") && !n.ends_with(".d.ts")
                        })
                        .collect()
                })
                .unwrap_or_default();
            names.sort();
            names
        };
        let source = root.join("crates").join(place);
        let packed_dir = packages.join(package).join(place);
        let names = shipped(&source);
        let stale = |why: String| -> ! {
            panic!(
                "{} is stale ({why}): run `cargo xtask dist` again",
                packed_dir.display()
            )
        };
        if shipped(&packed_dir) != names {
            stale(format!("its files differ from {}", source.display()));
        }
        for name in names {
            let read = |p: &Path| fs::read_to_string(p).unwrap_or_default();
            if read(&packed_dir.join(&name)) != read(&source.join(&name)) {
                stale(format!("{name} differs from the workspace's"));
            }
        }
    }
    let launcher = "bin/condense.js";
    let read = |p: &Path| fs::read_to_string(p).unwrap_or_default();
    if read(&packages.join("condense").join(launcher))
        != read(&root.join("crates/condense-cli/npm").join(launcher))
    {
        panic!(
            "{} is stale: run `cargo xtask dist` again",
            packages.join("condense").display()
        );
    }
}

/// Node's `<platform>-<arch>` for this machine: the platform package's
/// suffix (`condense-linux-x64`).
pub fn node_platform() -> &'static str {
    match (std::env::consts::OS, std::env::consts::ARCH) {
        ("linux", "x86_64") => "linux-x64",
        ("linux", "aarch64") => "linux-arm64",
        ("macos", "x86_64") => "darwin-x64",
        ("macos", "aarch64") => "darwin-arm64",
        (os, arch) => panic!("no condense platform package for {os}-{arch}"),
    }
}

/// The verdaccio install in the cache (`<cache>/verdaccio-<version>`).
fn verdaccio_main(node: &Path) -> &'static Path {
    static INSTALL: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match INSTALL.get_or_init(|| find_or_install(&cache_dir(), node)) {
        Ok(main) => main,
        Err(e) => panic!("verdaccio {VERDACCIO_VERSION} could not be installed:\n{e}"),
    }
}

fn find_or_install(cache: &Path, node: &Path) -> Result<PathBuf, String> {
    let dir = cache.join(format!("verdaccio-{VERDACCIO_VERSION}"));
    let main = |dir: &Path| dir.join("node_modules/verdaccio/bin/verdaccio");
    if dir.join(".complete").is_file() && main(&dir).is_file() {
        return Ok(main(&dir));
    }
    fs::create_dir_all(cache).map_err(|e| format!("create {}: {e}", cache.display()))?;
    // Installed beside, moved into place whole (as the pi and OpenCode installs).
    let staging = cache.join(format!(
        ".staging-verdaccio-{}-{VERDACCIO_VERSION}",
        std::process::id()
    ));
    let _ = fs::remove_dir_all(&staging);
    fs::create_dir_all(&staging).map_err(|e| format!("create {}: {e}", staging.display()))?;
    let manifest = json!({
        "name": "condense-e2e-verdaccio",
        "private": true,
        "description": "the npm registry of condense's install tests (generated; safe to delete)",
        "dependencies": {"verdaccio": VERDACCIO_VERSION},
        "overrides": {"node-fetch": "2.7.0"},
    });
    fs::write(staging.join("package.json"), manifest.to_string())
        .map_err(|e| format!("write package.json: {e}"))?;
    let npm = which("npm").ok_or("`npm` is not on PATH (CI's .ci/run installs it)")?;
    eprintln!(
        "e2e: installing verdaccio@{VERDACCIO_VERSION} into {} …",
        dir.display()
    );
    let out = run_bounded(
        Command::new(&npm)
            .args(["install", "--no-audit", "--no-fund", "--loglevel=warn"])
            .current_dir(&staging)
            .env("npm_config_update_notifier", "false"),
        INSTALL_TIMEOUT,
    )
    .map_err(|e| format!("cannot run {}: {e}", npm.display()))?;
    if !out.success() {
        let _ = fs::remove_dir_all(&staging);
        return Err(format!(
            "npm install verdaccio failed ({}):\n{}\n{}",
            out.describe_status(),
            tail(&out.stdout, 4000),
            tail(&out.stderr, 8000)
        ));
    }
    let version = run_bounded(
        Command::new(node).arg(main(&staging)).arg("--version"),
        Duration::from_secs(60),
    )
    .map_err(|e| format!("cannot run verdaccio: {e}"))?;
    if !version.stdout.contains(VERDACCIO_VERSION) {
        let _ = fs::remove_dir_all(&staging);
        return Err(format!(
            "verdaccio --version printed {:?}, expected {VERDACCIO_VERSION}; stderr: {}",
            version.stdout.trim(),
            tail(&version.stderr, 2000)
        ));
    }
    fs::write(staging.join(".complete"), "verdaccio\n")
        .map_err(|e| format!("write the completion marker: {e}"))?;
    if fs::rename(&staging, &dir).is_err() {
        // Another process won the race: use its install.
        let _ = fs::remove_dir_all(&staging);
    }
    if main(&dir).is_file() {
        Ok(main(&dir))
    } else {
        Err(format!("{} has no verdaccio", dir.display()))
    }
}

/// A running verdaccio with its own storage; stopped on drop.
pub struct Registry {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Registry {
    /// Starts verdaccio with `node` on a free port of 127.0.0.1 and waits
    /// until it answers. Panics (with its log) if it does not.
    pub fn start(node: &Path) -> Registry {
        let main = verdaccio_main(node);
        let dir = tempfile::Builder::new()
            .prefix("condense-registry-")
            .tempdir()
            .expect("a temp dir for the registry");
        let config = "storage: ./storage\n\
             auth:\n  htpasswd:\n    file: ./htpasswd\n    max_users: -1\n\
             uplinks:\n  npmjs:\n    url: https://registry.npmjs.org/\n\
             packages:\n  'condense-*':\n    access: $all\n    publish: $anonymous\n\
             \x20 'condense':\n    access: $all\n    publish: $anonymous\n\
             \x20 '**':\n    access: $all\n    proxy: npmjs\n\
             max_body_size: 200mb\n\
             log: { type: stdout, format: pretty, level: warn }\n";
        fs::write(dir.path().join("config.yaml"), config).expect("write config.yaml");
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let log = fs::File::create(dir.path().join("verdaccio.log")).expect("create the log");
        let child = Command::new(node)
            .arg(main)
            .arg("--config")
            .arg(dir.path().join("config.yaml"))
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone the log handle"))
            .stderr(log)
            .process_group(0)
            .spawn()
            .expect("start verdaccio");
        let mut registry = Registry { child, port, dir };
        let started = Instant::now();
        while !registry.ping() {
            if let Ok(Some(status)) = registry.child.try_wait() {
                panic!("verdaccio exited ({status})\n{}", registry.log());
            }
            if started.elapsed() > START_TIMEOUT {
                panic!(
                    "verdaccio did not answer within {START_TIMEOUT:?}\n{}",
                    registry.log()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!(
            "e2e: verdaccio {VERDACCIO_VERSION} up at {} in {:.1}s",
            registry.url(),
            started.elapsed().as_secs_f64()
        );
        registry
    }

    /// `http://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// What verdaccio wrote (for failure reports).
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("verdaccio.log")).unwrap_or_default()
    }

    /// True once `GET /-/ping` answers 200.
    fn ping(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
        let request = format!(
            "GET /-/ping HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n",
            self.port
        );
        if stream.write_all(request.as_bytes()).is_err() {
            return false;
        }
        let mut head = [0u8; 12];
        stream.read_exact(&mut head).is_ok() && head.ends_with(b"200")
    }

    /// The npm settings that point at this registry, for any npm (or
    /// npm-compatible installer) started with them in its environment.
    pub fn npm_env(&self) -> Vec<(String, String)> {
        vec![
            ("npm_config_registry".to_owned(), self.url()),
            (
                "npm_config_userconfig".to_owned(),
                self.dir.path().join("npmrc").to_string_lossy().into_owned(),
            ),
            ("npm_config_update_notifier".to_owned(), "false".to_owned()),
            ("npm_config_audit".to_owned(), "false".to_owned()),
            ("npm_config_fund".to_owned(), "false".to_owned()),
        ]
    }

    /// Publishes a packed tarball with the system npm. The token only
    /// satisfies npm's check for a login: publishing `condense-*` is open.
    pub fn publish(&self, tarball: &Path) {
        let npm = which("npm").expect("`npm` on PATH");
        let mut cmd = Command::new(&npm);
        cmd.arg("publish")
            .arg(tarball)
            .arg("--registry")
            .arg(self.url())
            .arg(format!(
                "--//127.0.0.1:{}/:_authToken=condense-e2e",
                self.port
            ))
            .env("npm_config_userconfig", self.dir.path().join("npmrc"))
            .env("npm_config_cache", self.dir.path().join("npm-cache"))
            .env("npm_config_update_notifier", "false")
            .current_dir(self.dir.path());
        let out = run_bounded(&mut cmd, PUBLISH_TIMEOUT).expect("run npm publish");
        assert!(
            out.success(),
            "npm publish {} failed ({}):\n{}\n{}\n--- verdaccio ---\n{}",
            tarball.display(),
            out.describe_status(),
            tail(&out.stdout, 4000),
            tail(&out.stderr, 4000),
            tail(&self.log(), 4000)
        );
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkout_without_packages_is_told_what_to_run() {
        let empty = tempfile::tempdir().unwrap();
        let message =
            std::panic::catch_unwind(|| dist_tarballs_in(empty.path())).expect_err("no packages");
        let message = message
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default();
        assert!(message.contains("run it first"), "{message}");
        assert!(message.contains("`cargo xtask dist`"), "{message}");
        assert_eq!(message.lines().count(), 1, "{message}");
    }
}

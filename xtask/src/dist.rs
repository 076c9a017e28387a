//! `cargo xtask dist`: stripped release binaries and the npm packages, packed
//! into `target/dist/` (docs/ARCHITECTURE.md, "Packaging").
//!
//! Layout, for version V on the host platform P (`linux-x64` here):
//!
//! * `packages/condense-P/`: `bin/condense` (the command, and the sidecar
//!   both hosts start as `condense sidecar`), a `package.json` whose
//!   `os`/`cpu` (and `libc`) let npm install it only on P;
//! * `packages/condense/`: the `condense` command's launcher
//!   (`bin/condense.js`, from `crates/condense-cli/npm`);
//! * `packages/condense-pi/`: the shim in `condense-host-pi/extension/`
//!   and the client it imports in `condense-engine/client/`, at their
//!   places relative to each other in the repository, so every import is
//!   as written; its `pi` manifest names the shim's entry;
//! * `packages/condense-opencode/`: the plugin in
//!   `condense-host-opencode/plugin/` and the client beside it the same way;
//! * the main packages name `condense-P@V` as an optional dependency;
//! * `condense-P-V.tgz`, `condense-pi-V.tgz`, `condense-opencode-V.tgz`,
//!   `condense-V.tgz`: `npm pack` of each;
//! * `bin/condense`: the command-line tool.

use std::fs;
use std::path::{Path, PathBuf};

use crate::packages::{
    entry_fields, imports, main_manifest_patch, packed_dir, readme, ships, Platform, CLI,
    CLIENT_SOURCE, CLI_FILES, CLI_PACKAGE, CLI_SOURCE, OPENCODE_PACKAGE, OPENCODE_SOURCE,
    PI_PACKAGE, PI_SOURCE,
};
use crate::runner::{Ctx, StepError};

/// The workspace version, which every package carries.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Merges a JSON patch into a `package.json` (argv: source, destination,
/// patch) and drops `private`: the source manifests stay the one place their
/// fields are written.
const PATCH_MANIFEST_JS: &str = "const fs = require('node:fs');\
const [src, dst, patch] = process.argv.slice(1);\
const m = JSON.parse(fs.readFileSync(src, 'utf8'));\
delete m.private;\
Object.assign(m, JSON.parse(patch));\
fs.writeFileSync(dst, JSON.stringify(m, null, 2) + '\\n');";

/// Where cargo puts its output: `$CARGO_TARGET_DIR` or `<root>/target`.
pub fn target_dir(ctx: &Ctx) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => ctx.root.join(dir),
        None => ctx.root.join("target"),
    }
}

/// `target/dist`.
pub fn dist_dir(ctx: &Ctx) -> PathBuf {
    target_dir(ctx).join("dist")
}

/// The tarball `npm pack` writes for an unscoped package.
pub fn tarball_name(package: &str) -> String {
    format!("{package}-{VERSION}.tgz")
}

fn io_error(what: &str, path: &Path, err: std::io::Error) -> StepError {
    StepError::new(format!("{what} {}: {err}", path.display()))
}

fn write(path: &Path, text: &str) -> Result<(), StepError> {
    fs::write(path, text).map_err(|e| io_error("cannot write", path, e))
}

fn read(path: &Path) -> Result<String, StepError> {
    fs::read_to_string(path).map_err(|e| io_error("cannot read", path, e))
}

fn create_dir(path: &Path) -> Result<(), StepError> {
    fs::create_dir_all(path).map_err(|e| io_error("cannot create", path, e))
}

/// Copies an executable and makes sure it stays one.
fn copy_executable(from: &Path, to: &Path) -> Result<(), StepError> {
    fs::copy(from, to).map_err(|e| io_error("cannot copy", from, e))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(to, fs::Permissions::from_mode(0o755))
            .map_err(|e| io_error("cannot chmod", to, e))?;
    }
    Ok(())
}

/// The shipped files of a source directory (see [`ships`]), sorted.
fn shipped_files(dir: &Path) -> Result<Vec<String>, StepError> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .map_err(|e| io_error("cannot list", dir, e))?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_file())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| ships(n))
        .collect();
    names.sort();
    Ok(names)
}

/// The whole command: build, lay out, pack.
pub fn dist(ctx: &Ctx) -> Result<(), StepError> {
    let platform = Platform::host().ok_or_else(|| {
        StepError::new(format!(
            "no platform package is defined for {}-{} (xtask/src/packages.rs, PLATFORMS)",
            std::env::consts::OS,
            std::env::consts::ARCH
        ))
    })?;
    ctx.run(&mut ctx.cargo(["build", "--release", "-p", "condense-cli", "--bins"]))?;
    let release = target_dir(ctx).join("release");
    let out = dist_dir(ctx);
    if out.exists() {
        fs::remove_dir_all(&out).map_err(|e| io_error("cannot clear", &out, e))?;
    }
    let packages = out.join("packages");
    create_dir(&packages)?;

    let platform_dir = packages.join(platform.package());
    lay_out_platform(&platform, &release, &platform_dir)?;
    let pi_dir = packages.join(PI_PACKAGE);
    lay_out_pi(ctx, &pi_dir, &[platform])?;
    let opencode_dir = packages.join(OPENCODE_PACKAGE);
    lay_out_opencode(ctx, &opencode_dir, &[platform])?;
    let cli_dir = packages.join(CLI_PACKAGE);
    lay_out_cli(ctx, &cli_dir, &[platform])?;

    for (package, dir) in [
        (platform.package(), &platform_dir),
        (PI_PACKAGE.to_owned(), &pi_dir),
        (OPENCODE_PACKAGE.to_owned(), &opencode_dir),
        (CLI_PACKAGE.to_owned(), &cli_dir),
    ] {
        let mut pack = ctx.command("npm");
        pack.current_dir(dir)
            .args(["pack", "--silent", "--pack-destination"])
            .arg(&out)
            .env("npm_config_update_notifier", "false");
        ctx.run(&mut pack)?;
        let tarball = out.join(tarball_name(&package));
        if !tarball.is_file() {
            return Err(StepError::new(format!(
                "npm pack did not write {}",
                tarball.display()
            )));
        }
        eprintln!(
            "    {} ({} KiB)",
            tarball.display(),
            fs::metadata(&tarball).map(|m| m.len() / 1024).unwrap_or(0)
        );
    }

    let bin = out.join("bin");
    create_dir(&bin)?;
    copy_executable(
        &release.join(platform.exe(CLI)),
        &bin.join(platform.exe(CLI)),
    )?;
    Ok(())
}

/// `condense-<os>-<cpu>`: the command (which is also the sidecar), and a
/// manifest npm installs only on that platform.
fn lay_out_platform(platform: &Platform, release: &Path, dir: &Path) -> Result<(), StepError> {
    let bin = dir.join("bin");
    create_dir(&bin)?;
    let exe = platform.exe(CLI);
    copy_executable(&release.join(&exe), &bin.join(&exe))?;
    write(&dir.join("package.json"), &platform.manifest(VERSION))?;
    write(
        &dir.join("README.md"),
        &readme(
            &platform.package(),
            &format!(
                "The condense binary for {}-{}. Not installed by hand: \
                 `condense-pi`, `condense-opencode` and `condense` depend on it.",
                platform.os, platform.cpu
            ),
        ),
    )
}

/// Writes `<dir>/package.json`: the source manifest with the version and the
/// optional platform dependencies set (by Node, which reads JSON properly).
fn patch_manifest(
    ctx: &Ctx,
    source: &Path,
    dir: &Path,
    platforms: &[Platform],
    entry: Option<&str>,
) -> Result<(), StepError> {
    let mut node = ctx.command("node");
    node.arg("-e")
        .arg(PATCH_MANIFEST_JS)
        .arg(source)
        .arg(dir.join("package.json"))
        .arg(main_manifest_patch(VERSION, platforms, entry));
    ctx.run(&mut node)
}

/// `condense`: the command's launcher, which runs the platform package's
/// binary.
fn lay_out_cli(ctx: &Ctx, dir: &Path, platforms: &[Platform]) -> Result<(), StepError> {
    let source = ctx.root.join(CLI_SOURCE);
    for name in CLI_FILES {
        let (from, to) = (source.join(name), dir.join(name));
        if let Some(parent) = to.parent() {
            create_dir(parent)?;
        }
        copy_executable(&from, &to)?;
    }
    patch_manifest(ctx, &source.join("package.json"), dir, platforms, None)?;
    write(
        &dir.join("README.md"),
        &readme(
            CLI_PACKAGE,
            "Claude Code through condense: `npx condense claude`. \
             Also `condense proxy`, `condense mcp` and the offline session tools.",
        ),
    )
}

/// `condense-pi`: the shim as pi loads it, with the client.
fn lay_out_pi(ctx: &Ctx, dir: &Path, platforms: &[Platform]) -> Result<(), StepError> {
    lay_out_host(ctx, dir, platforms, PI_PACKAGE, PI_SOURCE)?;
    write(
        &dir.join("README.md"),
        &readme(PI_PACKAGE, "Install into pi: `pi install npm:condense-pi`."),
    )
}

/// `condense-opencode`: the plugin as OpenCode loads it, with the client.
fn lay_out_opencode(ctx: &Ctx, dir: &Path, platforms: &[Platform]) -> Result<(), StepError> {
    lay_out_host(ctx, dir, platforms, OPENCODE_PACKAGE, OPENCODE_SOURCE)?;
    write(
        &dir.join("README.md"),
        &readme(
            OPENCODE_PACKAGE,
            "Install into OpenCode: add `\"plugin\": [\"condense-opencode\"]` to `opencode.json`.",
        ),
    )
}

/// A host package: the host's shipped files and the client's, each at its
/// [`packed_dir`], checked to import nothing outside the package, and the
/// manifest naming the host's entry.
fn lay_out_host(
    ctx: &Ctx,
    dir: &Path,
    platforms: &[Platform],
    package: &str,
    source: &str,
) -> Result<(), StepError> {
    for from in [source, CLIENT_SOURCE] {
        let (from_dir, to_dir) = (ctx.root.join(from), dir.join(packed_dir(from)));
        create_dir(&to_dir)?;
        for name in shipped_files(&from_dir)? {
            let file = from_dir.join(&name);
            fs::copy(&file, to_dir.join(&name)).map_err(|e| io_error("cannot copy", &file, e))?;
        }
    }
    check_self_contained(dir)?;
    let entry = entry_fields(package);
    patch_manifest(
        ctx,
        &ctx.root.join(source).join("package.json"),
        dir,
        platforms,
        entry.as_deref(),
    )
}

/// Fails if a packaged module imports, by a relative path, a file that is
/// not in its package: it would work in the repository and break when
/// installed.
fn check_self_contained(dir: &Path) -> Result<(), StepError> {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        for entry in fs::read_dir(&current)
            .map_err(|e| io_error("cannot list", &current, e))?
            .flatten()
        {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "ts") {
                continue;
            }
            let text = read(&path)?;
            let here = path.strip_prefix(dir).unwrap_or(&path).parent();
            for spec in imports(&text).into_iter().filter(|s| s.starts_with('.')) {
                let inside = resolve_inside(here.unwrap_or(Path::new("")), spec);
                let found = inside.as_ref().is_some_and(|p| {
                    let target = dir.join(p);
                    target.is_file() || target.with_extension("ts").is_file()
                });
                if !found {
                    return Err(StepError::new(format!(
                        "{} imports {spec}, which is not in its package",
                        path.display()
                    )));
                }
            }
        }
    }
    Ok(())
}

/// `spec` resolved from `from` (both relative to a package's root), or
/// `None` when it climbs above the root.
fn resolve_inside(from: &Path, spec: &str) -> Option<PathBuf> {
    let mut parts: Vec<&std::ffi::OsStr> = from.iter().collect();
    for part in spec.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(std::ffi::OsStr::new(p)),
        }
    }
    Some(parts.iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packages::manifest_field;

    fn root() -> PathBuf {
        Ctx::from_env().root
    }

    fn source(path: &str) -> String {
        let file = root().join(path);
        fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
    }

    /// Every place that states the version or a package name agrees with the
    /// workspace (`[workspace.package] version`, which xtask carries).
    #[test]
    fn names_and_versions_agree_with_the_workspace() {
        let cargo = source("Cargo.toml");
        assert!(
            cargo.contains(&format!("\nversion = \"{VERSION}\"\n")),
            "the workspace version is {VERSION}"
        );
        for (dir, name) in [
            (PI_SOURCE, PI_PACKAGE),
            (OPENCODE_SOURCE, OPENCODE_PACKAGE),
            (CLI_SOURCE, CLI_PACKAGE),
            (CLIENT_SOURCE, "condense-client"),
        ] {
            let manifest = source(&format!("{dir}/package.json"));
            assert_eq!(manifest_field(&manifest, "version"), Some(VERSION), "{dir}");
            assert_eq!(manifest_field(&manifest, "name"), Some(name), "{dir}");
        }
        assert!(
            source(&format!("{CLIENT_SOURCE}/sidecar.ts"))
                .contains(&format!("export const SHIM_VERSION = \"{VERSION}\";")),
            "the shim's SHIM_VERSION"
        );
        assert!(
            source("CHANGELOG.md").contains(&format!("\n## {VERSION}")),
            "CHANGELOG.md has a section for {VERSION}"
        );
        let locate = source(&format!("{CLIENT_SOURCE}/locate.ts"));
        assert!(
            locate.contains("return `condense-${platform}-${arch}`;"),
            "the shim looks for the package Platform::package names"
        );
        let launcher = source(&format!("{CLI_SOURCE}/bin/condense.js"));
        assert!(
            launcher.contains("`condense-${process.platform}-${process.arch}`"),
            "the command's launcher looks for the package Platform::package names"
        );
    }

    #[test]
    fn a_package_imports_only_its_own_files() {
        let dir = std::env::temp_dir().join(format!("xtask-dist-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("host/ext")).expect("temp dir");
        fs::create_dir_all(dir.join("engine/client")).expect("temp dir");
        let put = |p: &str, text: &str| fs::write(dir.join(p), text).expect("write");
        put(
            "host/ext/a.ts",
            "import { x } from \"../../engine/client/b.ts\";\nimport { y } from \"./c\";\n\
             import * as fs from \"node:fs\";\n",
        );
        put("host/ext/c.ts", "");
        put("engine/client/b.ts", "import { z } from \"./d.ts\";\n");
        put("engine/client/d.ts", "");
        assert!(check_self_contained(&dir).is_ok());
        put(
            "host/ext/e.ts",
            "import { z } from \"../../../outside.ts\";\n",
        );
        let err = check_self_contained(&dir).expect_err("an import leaves the package");
        assert!(err.message.contains("not in its package"), "{err}");
        fs::remove_file(dir.join("host/ext/e.ts")).expect("remove");
        put(
            "host/ext/f.ts",
            "import { w } from \"../../engine/client/missing.ts\";\n",
        );
        let err = check_self_contained(&dir).expect_err("a file the package lacks");
        assert!(err.message.contains("missing.ts"), "{err}");
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn tarballs_carry_name_and_version() {
        assert_eq!(
            tarball_name("condense-pi"),
            format!("condense-pi-{VERSION}.tgz")
        );
    }
}

// Where a sidecar binary is. Shared by the pi shim and the OpenCode plugin,
// and by both the workspace checkout and the npm packages (`cargo xtask dist`
// ships the client in both), so it imports Node built-ins only.
//
// The order, first hit wins:
// 1. the environment variable (`CONDENSE_PI_BIN`, `CONDENSE_OPENCODE_BIN`):
//    an explicit choice, and final: a wrong path never falls back silently;
// 2. the platform package (`condense-<platform>-<arch>`, an optional
//    dependency of the npm packages), found with Node's module resolution
//    from the package that asks;
// 3. the binary on `PATH`;
// 4. the workspace's `target/{release,debug}` (a checkout of the repository)
//    and `$CARGO_TARGET_DIR`.

import * as fs from "node:fs";
import { createRequire } from "node:module";
import * as path from "node:path";

/** The npm package carrying the sidecar binaries for this platform, e.g. `condense-linux-x64`. */
export function platformPackage(platform: string = process.platform, arch: string = process.arch): string {
	return `condense-${platform}-${arch}`;
}

export interface Lookup {
	/** The binary's name without extension: `condense-pi` or `condense-opencode`. */
	binary: string;
	/** The environment variable that names the binary explicitly. */
	envVar: string;
	/** The cargo package that builds the binary, named in the build-from-source hint. */
	crate: string;
	/** The directory of the asking module (the extension or plugin directory). */
	fromDir: string | undefined;
	/** The environment to read (`process.env` by default; tests hand in their own). */
	env?: { readonly [key: string]: string | undefined };
}

export interface Found {
	/** The executable, when one was found. */
	path?: string;
	/** Every place looked at, in order (for the notice when nothing was found). */
	tried: string[];
}

function isExecutable(file: string): boolean {
	try {
		const st = fs.statSync(file);
		if (!st.isFile()) return false;
		fs.accessSync(file, fs.constants.X_OK);
		return true;
	} catch {
		return false;
	}
}

/** The binary inside the platform package, if Node's resolution finds the package from `fromDir`. */
function fromPlatformPackage(exe: string, fromDir: string, tried: string[]): string | undefined {
	const pkg = platformPackage();
	let manifest: string;
	try {
		// Resolving the manifest (not a main file) works for a package without code.
		manifest = createRequire(path.join(fromDir, "package.json")).resolve(`${pkg}/package.json`);
	} catch {
		tried.push(`the npm package ${pkg}`);
		return undefined;
	}
	const candidate = path.join(path.dirname(manifest), "bin", exe);
	tried.push(candidate);
	return isExecutable(candidate) ? candidate : undefined;
}

/** Finds the sidecar binary (see the order at the top of this file). */
export function findBinary(lookup: Lookup): Found {
	const env = lookup.env ?? process.env;
	const tried: string[] = [];
	const explicit = env[lookup.envVar]?.trim();
	if (explicit) {
		tried.push(`${lookup.envVar}=${explicit}`);
		return isExecutable(explicit) ? { path: explicit, tried } : { tried };
	}
	const exe = process.platform === "win32" ? `${lookup.binary}.exe` : lookup.binary;
	if (lookup.fromDir) {
		const found = fromPlatformPackage(exe, lookup.fromDir, tried);
		if (found) return { path: found, tried };
	}
	for (const dir of (env.PATH ?? "").split(path.delimiter)) {
		if (!dir) continue;
		const candidate = path.join(dir, exe);
		if (isExecutable(candidate)) return { path: candidate, tried };
	}
	tried.push(`${exe} on PATH`);
	const roots: string[] = [];
	if (lookup.fromDir) roots.push(path.resolve(lookup.fromDir, "..", "..", "..", "target"));
	if (env.CARGO_TARGET_DIR) roots.push(path.resolve(env.CARGO_TARGET_DIR));
	for (const root of roots) {
		for (const profile of ["release", "debug"]) {
			const candidate = path.join(root, profile, exe);
			tried.push(candidate);
			if (isExecutable(candidate)) return { path: candidate, tried };
		}
	}
	return { tried };
}

/** The notice for a missing sidecar: what was tried and what to install (the caller says what carries on). */
export function missingNotice(lookup: Lookup, found: Found): string {
	const explicit = (lookup.env ?? process.env)[lookup.envVar]?.trim();
	const fix = explicit
		? `${lookup.envVar} names no executable file; fix or unset it`
		: `install the npm package ${platformPackage()} next to this one (a platform without it: build from source, \`cargo build --release -p ${lookup.crate}\`, and set ${lookup.envVar})`;
	return `the ${lookup.binary} sidecar was not found (tried ${found.tried.join(", ")}); ${fix}`;
}

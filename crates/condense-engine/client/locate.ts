// Where the sidecar binary is: `condense`, which both hosts run as
// `condense sidecar`. Shared by the pi shim and the OpenCode plugin, and by
// both the workspace checkout and the npm packages (`cargo xtask dist` ships
// the client in both), so it imports Node built-ins only.
//
// The order, first hit wins:
// 1. the environment variable `CONDENSE_BIN`: an explicit choice, and
//    final: a wrong path never falls back silently;
// 2. the platform package (`condense-<platform>-<arch>`, an optional
//    dependency of the npm packages), found with Node's module resolution
//    from the package that asks;
// 3. the binary on `PATH`;
// 4. the workspace's `target/{release,debug}` (a checkout of the repository)
//    and `$CARGO_TARGET_DIR`.

import * as fs from "node:fs";
import { createRequire } from "node:module";
import * as path from "node:path";

/** The binary's name without extension. */
export const SIDECAR_BINARY = "condense";
/** The arguments that make it the sidecar. */
export const SIDECAR_ARGS: readonly string[] = ["sidecar"];
/** The environment variable that names the binary explicitly. */
export const SIDECAR_ENV = "CONDENSE_BIN";
/** The cargo package that builds it, named in the build-from-source hint. */
const SIDECAR_CRATE = "condense-cli";

/** The npm package carrying the binaries for this platform, e.g. `condense-linux-x64`. */
export function platformPackage(platform: string = process.platform, arch: string = process.arch): string {
	return `condense-${platform}-${arch}`;
}

export interface Lookup {
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
	const explicit = env[SIDECAR_ENV]?.trim();
	if (explicit) {
		tried.push(`${SIDECAR_ENV}=${explicit}`);
		return isExecutable(explicit) ? { path: explicit, tried } : { tried };
	}
	const exe = process.platform === "win32" ? `${SIDECAR_BINARY}.exe` : SIDECAR_BINARY;
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
	const explicit = (lookup.env ?? process.env)[SIDECAR_ENV]?.trim();
	const fix = explicit
		? `${SIDECAR_ENV} names no executable file; fix or unset it`
		: `install the npm package ${platformPackage()} next to this one (a platform without it: build from source, \`cargo build --release -p ${SIDECAR_CRATE}\`, and set ${SIDECAR_ENV})`;
	return `the condense sidecar was not found (tried ${found.tried.join(", ")}); ${fix}`;
}

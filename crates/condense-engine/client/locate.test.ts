// The sidecar lookup (locate.ts) against directory trees laid out as npm and
// the workspace lay them out. Run by condense-engine's tests/client_units.rs.

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";

import { findBinary, missingNotice, platformPackage } from "./locate.ts";
import type { Lookup } from "./locate.ts";

function tempDir(): string {
	return fs.mkdtempSync(path.join(os.tmpdir(), "condense-locate-"));
}

function writeFile(file: string, text: string, mode = 0o644): string {
	fs.mkdirSync(path.dirname(file), { recursive: true });
	fs.writeFileSync(file, text);
	fs.chmodSync(file, mode);
	return file;
}

/** An npm install: `<root>/node_modules/condense-pi` (the asker) beside the platform package. */
function npmTree(binMode: number): { root: string; fromDir: string; bin: string } {
	const root = tempDir();
	const modules = path.join(root, "node_modules");
	const fromDir = path.join(modules, "condense-pi");
	writeFile(path.join(fromDir, "package.json"), JSON.stringify({ name: "condense-pi" }));
	const pkg = path.join(modules, platformPackage());
	writeFile(path.join(pkg, "package.json"), JSON.stringify({ name: platformPackage(), version: "0.1.0" }));
	const bin = writeFile(path.join(pkg, "bin", "condense"), "#!/bin/sh\n", binMode);
	return { root, fromDir, bin };
}

function lookup(fromDir: string | undefined, env: { [key: string]: string | undefined }): Lookup {
	return { fromDir, env };
}

test("the platform package is found with Node's resolution from the asking package", () => {
	const { fromDir, bin } = npmTree(0o755);
	const other = tempDir();
	writeFile(path.join(other, "condense"), "#!/bin/sh\n", 0o755);
	// The package wins over a binary on PATH.
	const found = findBinary(lookup(fromDir, { PATH: other }));
	assert.equal(found.path, fs.realpathSync(bin));
});

test("the package is found from a module nested deeper in the asking package", () => {
	const { fromDir, bin } = npmTree(0o755);
	const nested = path.join(fromDir, "shared");
	fs.mkdirSync(nested, { recursive: true });
	assert.equal(findBinary(lookup(nested, { PATH: "" })).path, fs.realpathSync(bin));
});

test("the environment variable wins, and a wrong one never falls back", () => {
	const { fromDir } = npmTree(0o755);
	const mine = writeFile(path.join(tempDir(), "my-condense"), "#!/bin/sh\n", 0o755);
	assert.equal(findBinary(lookup(fromDir, { CONDENSE_BIN: mine })).path, mine);

	const wrong = path.join(tempDir(), "missing");
	const env = { CONDENSE_BIN: wrong };
	const found = findBinary(lookup(fromDir, env));
	assert.equal(found.path, undefined);
	assert.deepEqual(found.tried, [`CONDENSE_BIN=${wrong}`]);
	const notice = missingNotice(lookup(fromDir, env), found);
	assert.match(notice, /CONDENSE_BIN names no executable file/);
});

test("a platform package whose binary is not executable falls through to PATH", () => {
	const { fromDir, bin } = npmTree(0o644);
	const dir = tempDir();
	const onPath = writeFile(path.join(dir, "condense"), "#!/bin/sh\n", 0o755);
	const found = findBinary(lookup(fromDir, { PATH: dir }));
	assert.equal(found.path, onPath);
	assert.ok(found.tried.includes(fs.realpathSync(bin)), `${found.tried}`);
});

test("a workspace checkout finds target/release before target/debug", () => {
	const ws = tempDir();
	const fromDir = path.join(ws, "crates", "condense-host-pi", "extension");
	fs.mkdirSync(fromDir, { recursive: true });
	const debug = writeFile(path.join(ws, "target", "debug", "condense"), "#!/bin/sh\n", 0o755);
	assert.equal(findBinary(lookup(fromDir, { PATH: "" })).path, debug);
	const release = writeFile(path.join(ws, "target", "release", "condense"), "#!/bin/sh\n", 0o755);
	assert.equal(findBinary(lookup(fromDir, { PATH: "" })).path, release);
});

test("nothing found: the notice names every place tried and the package to install", () => {
	const lonely = tempDir();
	const l = lookup(lonely, { PATH: "" });
	const found = findBinary(l);
	assert.equal(found.path, undefined);
	assert.equal(found.tried[0], `the npm package ${platformPackage()}`);
	assert.ok(found.tried.includes("condense on PATH"), `${found.tried}`);
	const notice = missingNotice(l, found);
	assert.match(notice, new RegExp(`install the npm package ${platformPackage()}`));
	assert.match(notice, /cargo build --release -p condense-cli/);
	assert.ok(notice.startsWith("the condense sidecar was not found (tried the npm package"), notice);
});

#!/usr/bin/env node
// The `condense` command from npm: runs the binary that this platform's
// package (`condense-<os>-<cpu>`, an optional dependency) carries, with the
// same arguments, terminal and exit status.
"use strict";

const { spawnSync } = require("node:child_process");

const platformPackage = `condense-${process.platform}-${process.arch}`;
const exe = process.platform === "win32" ? "condense.exe" : "condense";

let bin;
try {
	bin = require.resolve(`${platformPackage}/bin/${exe}`);
} catch {
	console.error(
		`condense: ${platformPackage} is not installed. npm installs it with condense on ${process.platform}-${process.arch}; ` +
			"reinstall without --omit=optional, or build condense from source (cargo install --path crates/condense-cli).",
	);
	process.exit(2);
}

const run = spawnSync(bin, process.argv.slice(2), { stdio: "inherit" });
if (run.error) {
	console.error(`condense: cannot run ${bin}: ${run.error.message}`);
	process.exit(2);
}
if (run.signal) {
	process.kill(process.pid, run.signal);
}
process.exit(run.status ?? 1);

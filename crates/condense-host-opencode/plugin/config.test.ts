// Unit tests of condense.json's reading (run by tests/plugin_units.rs).

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";

import { configDirs, readConfig } from "./config.ts";

function dirs(): [string, string] {
	const root = fs.mkdtempSync(path.join(os.tmpdir(), "condense-config-"));
	const global = path.join(root, "global");
	const project = path.join(root, "project");
	fs.mkdirSync(global);
	fs.mkdirSync(project);
	return [global, project];
}

test("the project's keys win over the global file's, key by key", () => {
	const [global, project] = dirs();
	fs.writeFileSync(path.join(global, "condense.json"), JSON.stringify({ enabled: true, minBatchChars: 10 }));
	fs.writeFileSync(path.join(project, "condense.json"), JSON.stringify({ minBatchChars: 20 }));
	const warned: string[] = [];
	assert.deepEqual(readConfig([global, project], (l) => warned.push(l)), { enabled: true, minBatchChars: 20 });
	assert.deepEqual(warned, []);
});

test("missing files and directories are skipped silently", () => {
	const [global] = dirs();
	const warned: string[] = [];
	assert.deepEqual(readConfig([global, path.join(global, "nowhere")], (l) => warned.push(l)), {});
	assert.deepEqual(warned, []);
});

test("a FIFO, a device, a directory, bad JSON and an array are each skipped with a warning", () => {
	const [global, project] = dirs();
	const cases: [string, (file: string) => void, RegExp][] = [
		["fifo", (f) => execFileSync("mkfifo", [f]), /is not a regular file/],
		["device", (f) => fs.symlinkSync("/dev/zero", f), /is not a regular file/],
		["directory", (f) => fs.mkdirSync(f), /is not a regular file/],
		["bad json", (f) => fs.writeFileSync(f, "{\"enabled\": tru"), /is not valid JSON/],
		["array", (f) => fs.writeFileSync(f, "[1]"), /is not a JSON object/],
	];
	for (const [name, make, expected] of cases) {
		const file = path.join(project, "condense.json");
		fs.rmSync(file, { recursive: true, force: true });
		make(file);
		fs.writeFileSync(path.join(global, "condense.json"), JSON.stringify({ enabled: false }));
		const warned: string[] = [];
		// Reading returns at once (a FIFO with no writer would block here) and
		// keeps the other file's keys.
		assert.deepEqual(readConfig([global, project], (l) => warned.push(l)), { enabled: false }, name);
		assert.equal(warned.length, 1, `${name}: ${warned}`);
		assert.match(warned[0], expected, name);
	}
});

test("the global directory follows XDG_CONFIG_HOME, else ~/.config", () => {
	assert.deepEqual(configDirs("/p", { XDG_CONFIG_HOME: "/x" }), ["/x/opencode", "/p/.opencode"]);
	assert.deepEqual(configDirs("/p", { HOME: "/h", XDG_CONFIG_HOME: " " }), ["/h/.config/opencode", "/p/.opencode"]);
});

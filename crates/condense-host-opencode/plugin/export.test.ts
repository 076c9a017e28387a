// The plugin's conversion of OpenCode's messages, pinned on an export
// (`opencode export SESSION`): `condense simulate` reads exports with a
// conversion of its own (crates/condense-cli/src/opencode_export.rs), and
// its test pins the same fixture to the same pi messages, so the two agree
// (run by tests/plugin_units.rs under `node --test`).

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { test } from "node:test";

import { convert } from "./messages.ts";

const fixtures = path.join(import.meta.dirname, "..", "tests", "fixtures");

function read(name: string): any {
	return JSON.parse(fs.readFileSync(path.join(fixtures, name), "utf8"));
}

test("an export converts to the pi messages the simulator replays", () => {
	const exported = read("export.json");
	assert.deepEqual(convert(exported.messages).pi, read("export.pi.json"));
});

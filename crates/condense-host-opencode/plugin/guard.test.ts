// Unit tests of the placeholder guard (run by tests/plugin_units.rs).

import assert from "node:assert/strict";
import { test } from "node:test";

import { placeholdersIn, refusal, WRITING_TOOLS } from "./guard.ts";
import { OPENCODE_CLEARED } from "./messages.ts";

test("a summary stub in a write's content is found with its ref", () => {
	const content = "line 1\n[Summarized in pruner summary, ref `t12`. Use context_tree_query to retrieve full output.]\nline 3";
	const found = placeholdersIn({ filePath: "/x/a.ts", content });
	assert.deepEqual(found, [{ what: "a condense summary stub", refs: ["t12"] }]);
	const text = refusal("write", found);
	assert.match(text, /context_tree_query\(\{"toolCallIds": \["t12"\]\}\)/);
});

test("nested edits, chains, purged arguments and OpenCode's placeholder are all found", () => {
	const found = placeholdersIn({
		edits: [
			{ oldString: "a", newString: '<compressed-chain id="b3" tools="t4,t5">\nbody' },
			{ oldString: "b", newString: '{"_purged": "<purged-errored-args size=\\"900\\"/>"}' },
		],
		note: `x ${OPENCODE_CLEARED} y`,
	});
	const byKind = new Map(found.map((f) => [f.what, f.refs]));
	assert.deepEqual(byKind.get("a condense compressed chain"), ["t4", "t5"]);
	assert.deepEqual(byKind.get("condense's purged arguments"), []);
	assert.deepEqual(byKind.get("OpenCode's cleared-output placeholder"), []);
	assert.match(refusal("multiedit", found), /Read the original again|context_tree_query/);
});

test("ordinary content, and text that only mentions the tool, pass", () => {
	assert.deepEqual(placeholdersIn({ filePath: "/x", content: "use context_tree_query to page outputs; Summarized in pruner summary" }), []);
	assert.deepEqual(placeholdersIn({ content: 42, list: [null, true] }), []);
	assert.deepEqual(placeholdersIn(undefined), []);
});

test("the write tools are checked, reads are not", () => {
	for (const t of ["write", "edit", "multiedit", "patch", "apply_patch"]) assert.ok(WRITING_TOOLS.has(t));
	assert.ok(!WRITING_TOOLS.has("read"));
	assert.ok(!WRITING_TOOLS.has("context_tree_query"));
});

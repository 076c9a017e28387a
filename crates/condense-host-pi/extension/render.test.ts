// Unit tests of render.ts (the plain split, pi-tui not loaded), run by
// `cargo test -p condense-host-pi --test shim_units` with the end-to-end
// tests' Node 22 (`node --test`, TypeScript types stripped).
import assert from "node:assert/strict";
import { test } from "node:test";

import { renderSummary } from "./render.ts";

const summary = (text: string, details: Record<string, unknown>) => ({
	customType: "context-prune-summary",
	content: [{ type: "text", text }],
	details,
});

/** Terminal columns of `row` as render.ts counts them (wide scripts two). */
const columns = (row: string) => [...row].reduce((n, ch) => n + ((ch.codePointAt(0) ?? 0) >= 0x1100 ? 2 : 1), 0);

test("a collapsed summary is its title: the turn and how many tools it covers", () => {
	const message = summary("The files hold fixtures.", { turnIndex: 3, toolCallRefs: ["t1", "t2"] });
	assert.deepEqual(renderSummary(message, { expanded: false }, undefined).render(80), ["[pruner] Turn 3 summary (2 tool(s))"]);
	// Older entries name raw tool call ids; a missing turn shows as "?".
	const old = summary("x", { toolCallIds: ["call_1"] });
	assert.deepEqual(renderSummary(old, {}, undefined).render(80), ["[pruner] Turn ? summary (1 tool(s))"]);
});

test("an expanded summary wraps every line of its text to the width, and the title is cut to it", () => {
	const text = "first line\n" + "word ".repeat(30) + "\n" + "漢字".repeat(20);
	const message = summary(text, { turnIndex: 12, toolCallRefs: ["t1"] });
	for (const width of [10, 17, 40]) {
		const rows = renderSummary(message, { expanded: true }, undefined).render(width);
		assert.ok(rows.length > 3, `width ${width}: ${rows.length} rows`);
		for (const row of rows) assert.ok(columns(row) <= width, `width ${width}: ${JSON.stringify(row)}`);
		assert.equal(rows.slice(1).join(""), text.replace(/\n/g, ""), `width ${width}: no text lost`);
	}
});

test("the title is styled with the theme, and a theme that throws leaves it plain", () => {
	const message = summary("x", { turnIndex: 1, toolCallRefs: [] });
	const theme = { fg: (color: string, text: string) => `<${color}>${text}</>` };
	assert.deepEqual(renderSummary(message, {}, theme).render(80), ["<customMessageLabel>[pruner] Turn 1 summary (0 tool(s))</>"]);
	const broken = {
		fg: () => {
			throw new Error("no such color");
		},
	};
	assert.deepEqual(renderSummary(message, {}, broken).render(80), ["[pruner] Turn 1 summary (0 tool(s))"]);
});

// Unit tests of turns.ts, run by `cargo test -p condense-host-pi --test shim_units`
// with the end-to-end tests' Node 22 (`node --test`, TypeScript types stripped).
import assert from "node:assert/strict";
import { test } from "node:test";

import { toolTurnAtEnd, TurnEnds, turnKey } from "./turns.ts";

const user = (ts: number, text: string) => ({ role: "user", content: text, timestamp: ts });
const result = (ts: number, id: string) => ({
	role: "toolResult",
	toolCallId: id,
	toolName: "read",
	content: [{ type: "text", text: "file text" }],
	isError: false,
	timestamp: ts,
});
const toolCall = (id: string) => ({ type: "toolCall", id, name: "read", arguments: { path: "a" } });
const assistant = (ts: number, content: unknown[], extra: Record<string, unknown> = {}) => ({
	role: "assistant",
	content,
	stopReason: content.some((b: any) => b.type === "toolCall") ? "toolUse" : "stop",
	timestamp: ts,
	...extra,
});
const text = (t: string) => ({ type: "text", text: t });

/** A session after one tool turn with two calls: the turn_end of `asked` is due. */
const asked = assistant(2, [text("reading"), toolCall("c1"), toolCall("c2")], { responseId: "resp_1" });
const afterToolTurn = () => [user(1, "go"), asked, result(3, "c1"), result(4, "c2")];

/** Settles `p` or reports that it is still pending after the current macrotask. */
async function stateOf(p: Promise<unknown>): Promise<"settled" | "pending"> {
	let settled = false;
	p.then(
		() => (settled = true),
		() => (settled = true),
	);
	await new Promise((resolve) => setImmediate(resolve));
	return settled ? "settled" : "pending";
}

test("the turn key survives pi's deep copy and tells turns apart by timestamp and response id", () => {
	assert.equal(turnKey(asked), turnKey(structuredClone(asked)));
	assert.notEqual(turnKey(asked), turnKey({ ...asked, responseId: "resp_2" }));
	assert.notEqual(turnKey(asked), turnKey({ ...asked, timestamp: 5 }));
	// Without a response id the timestamp alone identifies the turn.
	const { responseId: _, ...bare } = asked as Record<string, unknown>;
	assert.equal(turnKey(bare), turnKey(structuredClone(bare)));
	for (const notAnAssistant of [user(2, "hi"), result(2, "c1"), { role: "assistant" }, null, "text", 7]) {
		assert.equal(turnKey(notAnAssistant), undefined, JSON.stringify(notAnAssistant));
	}
});

test("the tail is a tool turn only when tool results, and nothing else, follow an assistant that asked for tools", () => {
	const cases: [string, unknown[], string | undefined][] = [
		["two results after the calls", afterToolTurn(), turnKey(asked)],
		["one result of two", afterToolTurn().slice(0, 3), turnKey(asked)],
		["a user prompt after the results (a new run, a resumed session)", [...afterToolTurn(), user(5, "next")], undefined],
		["a steering message after the results", [...afterToolTurn(), user(5, "stop that")], undefined],
		["the assistant asked for tools but no result yet", afterToolTurn().slice(0, 2), undefined],
		["the last assistant answered in text", [...afterToolTurn(), assistant(5, [text("done")])], undefined],
		[
			"an aborted turn: its results follow an assistant without tool calls",
			[user(1, "go"), assistant(2, [text("partial")], { stopReason: "aborted" }), result(3, "c1")],
			undefined,
		],
		["results with no assistant before them", [result(3, "c1"), result(4, "c2")], undefined],
		["a custom message between the results", [user(1, "go"), asked, result(3, "c1"), { role: "custom", timestamp: 4 }, result(5, "c2")], undefined],
		["only a user prompt", [user(1, "go")], undefined],
		["nothing", [], undefined],
	];
	for (const [what, messages, expected] of cases) {
		assert.equal(toolTurnAtEnd(messages), expected, what);
	}
	// What `context` receives is a deep copy of what `turn_end` carried.
	assert.equal(toolTurnAtEnd(structuredClone(afterToolTurn())), turnKey(asked));
});

test("context waits for a tool turn's turn_end handler that starts late, then for it to finish", async () => {
	const turns = new TurnEnds();
	const settled = turns.settled(structuredClone(afterToolTurn()), 60_000);
	assert.equal(await stateOf(settled), "pending", "waits for the handler to start");
	let finish!: () => void;
	turns.record(asked, new Promise<void>((resolve) => (finish = resolve)));
	assert.equal(await stateOf(settled), "pending", "waits for the started handler to finish");
	finish();
	assert.equal(await settled, "arrived");
});

test("a turn_end of another turn does not end the wait", async () => {
	const turns = new TurnEnds();
	const settled = turns.settled(afterToolTurn(), 60_000);
	turns.record(assistant(9, [toolCall("c9")]), Promise.resolve());
	turns.record({ ...asked, responseId: "resp_other" }, Promise.resolve());
	assert.equal(await stateOf(settled), "pending");
	turns.record(asked, Promise.resolve());
	assert.equal(await settled, "arrived");
});

test("no wait when the turn_end handler already started (pi awaiting turn_end, a dead sidecar's early return)", async () => {
	const turns = new TurnEnds();
	turns.record(asked, Promise.resolve());
	assert.equal(await turns.settled(structuredClone(afterToolTurn()), 60_000), "ready");
});

test("no wait when the tail is no tool turn, and the latest handler is still awaited", async () => {
	const turns = new TurnEnds();
	assert.equal(await turns.settled([user(1, "go")], 60_000), "ready", "nothing recorded, nothing due");
	let finish!: () => void;
	turns.record(asked, new Promise<void>((resolve) => (finish = resolve)));
	const settled = turns.settled([...afterToolTurn(), user(5, "next")], 60_000);
	assert.equal(await stateOf(settled), "pending", "a flush still running at the latest turn end is awaited, as before");
	finish();
	assert.equal(await settled, "ready");
});

test("the wait is bounded: a turn_end that never starts lets context carry on", async () => {
	const turns = new TurnEnds();
	assert.equal(await turns.settled(afterToolTurn(), 20), "timeout");
	// A late handler after the timeout neither throws nor wakes anything.
	turns.record(asked, Promise.resolve());
	assert.equal(await turns.settled(afterToolTurn(), 60_000), "ready");
});

test("a handler that rejects does not fail the context call", async () => {
	const turns = new TurnEnds();
	turns.record(asked, Promise.reject(new Error("sidecar gone")));
	assert.equal(await turns.settled(afterToolTurn(), 60_000), "ready");
});

test("older turns are forgotten, the latest ones remembered", async () => {
	const turns = new TurnEnds();
	const turnAt = (ts: number) => assistant(ts, [toolCall(`c${ts}`)]);
	for (let ts = 100; ts < 150; ts++) turns.record(turnAt(ts), Promise.resolve());
	assert.ok(turns.has(turnKey(turnAt(149))!));
	assert.ok(!turns.has(turnKey(turnAt(100))!));
});

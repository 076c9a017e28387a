// Unit tests of sync.ts, run by `cargo test -p condense-engine --test client_units`
// with the end-to-end tests' Node 22 (`node --test`, TypeScript types stripped).
import assert from "node:assert/strict";
import { test } from "node:test";

import { answerSteps, applySteps, heldIntact, holdAnswer, KeyTable, withoutSystemMessages } from "./sync.ts";

// The key table through the functions these tests were first written against.
const messageKeys = (messages: readonly unknown[]) => KeyTable.of(messages);
const commonPrefix = (keys: KeyTable, messages: readonly unknown[]) => keys.commonPrefix(messages);
const syncedKeys = (keys: KeyTable, keep: number, messages: readonly unknown[]) => {
	keys.sync(keep, messages);
	return keys;
};

const user = (ts: number, text: string) => ({ role: "user", content: text, timestamp: ts });
const result = (ts: number, id: string, text: string) => ({
	role: "toolResult",
	toolCallId: id,
	toolName: "read",
	content: [{ type: "text", text }],
	isError: false,
	timestamp: ts,
});
const assistant = (ts: number, id: string) => ({
	role: "assistant",
	content: [
		{ type: "thinking", thinking: "hmm" },
		{ type: "toolCall", id, name: "read", arguments: { path: "a" } },
	],
	timestamp: ts,
});
const branch = () => [user(1, "go"), assistant(2, "c1"), result(3, "c1", "file text"), user(4, "next")];

test("the common prefix survives a deep copy and stops at the first change", () => {
	const keys = messageKeys(branch());
	assert.equal(commonPrefix(keys, structuredClone(branch())), 4);
	const edited = structuredClone(branch());
	(edited[2].content as any)[0].text = "file text, redacted";
	assert.equal(commonPrefix(keys, edited), 2);
	const reordered = [branch()[0], branch()[2], branch()[1]];
	assert.equal(commonPrefix(keys, reordered), 1);
	const compacted = [{ role: "compactionSummary", summary: "short", timestamp: 9 }, user(4, "next")];
	assert.equal(commonPrefix(keys, compacted), 0);
	assert.equal(commonPrefix(keys, branch().slice(0, 2)), 2);
});

test("pi's roles without content are keyed by their summary or output", () => {
	const a = [{ role: "branchSummary", summary: "one", timestamp: 5 }];
	const b = [{ role: "branchSummary", summary: "one, longer", timestamp: 5 }];
	assert.equal(commonPrefix(messageKeys(a), b), 0);
	assert.equal(commonPrefix(messageKeys(a), structuredClone(a)), 1);
});

test("synced keys keep the prefix and key what follows", () => {
	const keys = messageKeys(branch().slice(0, 2));
	const next = structuredClone(branch());
	const synced = syncedKeys(keys, commonPrefix(keys, next), next);
	assert.equal(synced.length, 4);
	assert.equal(commonPrefix(synced, structuredClone(branch())), 4);
});

test("steps copy input objects and insert the sidecar's messages", () => {
	const input = branch();
	const stub = result(3, "c1", "[stub]");
	const out = applySteps(input, [{ keep: [0, 2] }, { message: stub }, { keep: [3, 4] }])!;
	assert.equal(out.length, 4);
	assert.equal(out[0], input[0]);
	assert.equal(out[2], stub);
	assert.equal(out[3], input[3]);
	for (const bad of [[{ keep: [0, 9] }], [{ keep: [2, 1] }], [{ keep: [0] }], [{ message: [] }], [{}], {}, [null]]) {
		assert.equal(applySteps(input, bad), undefined, JSON.stringify(bad));
	}
});

test("an incremental answer reuses the held steps' prefix and their very objects", () => {
	const first = [{ keep: [0, 2] }, { message: result(3, "c1", "[stub]") }, { keep: [3, 4] }];
	const held = holdAnswer(7, first)!;
	assert.equal(held.seq, 7);
	assert.ok(heldIntact(held));
	const steps = answerSteps(held, 7, { seq: 8, reuse: 2, steps: [{ keep: [3, 6] }] })!;
	assert.equal(steps.length, 3);
	assert.equal(steps[1], first[1]);
	const next = holdAnswer(8, steps, held, 2)!;
	assert.deepEqual(next.keys.slice(0, 2), held.keys.slice(0, 2));
	assert.ok(heldIntact(next));
	// A whole answer needs nothing held.
	assert.deepEqual(answerSteps(undefined, undefined, { seq: 1, steps: first }), first);
});

test("an answer built on something else is refused", () => {
	const held = holdAnswer(7, [{ keep: [0, 1] }, { message: user(5, "x") }])!;
	assert.equal(answerSteps(held, 6, { seq: 8, reuse: 1, steps: [] }), undefined, "another base");
	assert.equal(answerSteps(undefined, undefined, { seq: 8, reuse: 1, steps: [] }), undefined, "nothing held");
	assert.equal(answerSteps(held, 7, { seq: 8, reuse: 3, steps: [] }), undefined, "more than held");
	assert.equal(answerSteps(held, 7, { seq: 8, reuse: -1, steps: [] }), undefined, "negative");
	assert.equal(answerSteps(held, 7, { seq: 8, reuse: 1 }), undefined, "no steps");
	assert.equal(holdAnswer("8", []), undefined, "a seq that is not a number");
});

test("a held message changed by someone else is noticed", () => {
	const message = result(3, "c1", "[stub]");
	const held = holdAnswer(1, [{ keep: [0, 1] }, { message }])!;
	assert.ok(heldIntact(held));
	message.content[0].text = "[stub] with a note another extension appended";
	assert.ok(!heldIntact(held));
});

test("system messages (pi 1.6) are not part of what context handlers get", () => {
	const session = [{ role: "system", content: "You are pi.", timestamp: 0 }, ...branch(), { role: "system", content: "", timestamp: 5 }];
	const visible = withoutSystemMessages(session)!;
	assert.equal(visible.length, 4);
	assert.equal(commonPrefix(messageKeys(visible), structuredClone(branch())), 4);
	assert.equal(withoutSystemMessages(undefined), undefined);
});

test("the common prefix stops at a changed header or content; non-objects are keyed by type", () => {
	const keys = messageKeys(branch());
	const edited = structuredClone(branch());
	(edited[2].content as any)[0].text = "file text, redacted";
	assert.equal(commonPrefix(keys, edited), 2);
	const retimed = structuredClone(branch());
	retimed[1].timestamp = 99;
	assert.equal(commonPrefix(keys, retimed), 1);
	assert.equal(commonPrefix(keys, [null, ...branch()]), 0);
	assert.equal(commonPrefix(messageKeys([null, "x"]), [null, "y"]), 2);
	assert.equal(commonPrefix(messageKeys([null, "x"]), [null, 1]), 1);
});

test("a branch that grew at its end is sent on before it is read", () => {
	assert.equal(new KeyTable().grownPrefix(branch()), 0, "no keys: everything is sent");
	const keys = messageKeys(branch().slice(0, 3));
	const grown = structuredClone(branch());
	assert.equal(keys.grownPrefix(grown), 3);
	assert.equal(keys.grownPrefix(grown.slice(0, 3)), 3, "the same branch");
	assert.equal(keys.grownPrefix(grown.slice(0, 2)), undefined, "shorter: a compaction or a navigation");
	const lastEdited = structuredClone(branch());
	(lastEdited[2].content as any)[0].text = "file text, redacted";
	assert.equal(keys.grownPrefix(lastEdited), undefined, "the last kept message changed");
	// An edit before the last key is not seen here: the common prefix,
	// read during the round trip, finds it.
	const earlyEdit = structuredClone(branch());
	earlyEdit[0].content = "went";
	assert.equal(keys.grownPrefix(earlyEdit), 3);
	assert.equal(commonPrefix(keys, earlyEdit), 0);
});

test("a key table syncs in place: shorter, longer, and back", () => {
	const keys = messageKeys(branch());
	const shorter = structuredClone(branch().slice(0, 2));
	keys.sync(commonPrefix(keys, shorter), shorter);
	assert.equal(keys.length, 2);
	assert.equal(commonPrefix(keys, structuredClone(branch())), 2);
	const other = [user(1, "go"), assistant(7, "c9")];
	keys.sync(commonPrefix(keys, other), other);
	assert.equal(commonPrefix(keys, other), 2);
	assert.equal(commonPrefix(keys, branch()), 1, "the replaced message no longer matches");
	keys.sync(1, branch());
	assert.equal(keys.length, 4);
	assert.equal(commonPrefix(keys, structuredClone(branch())), 4);
	keys.truncate(0);
	assert.equal(commonPrefix(keys, branch()), 0);
});

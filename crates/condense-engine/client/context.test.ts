// Unit tests of context.ts, run by `cargo test -p condense-engine --test client_units`.
import assert from "node:assert/strict";
import { test } from "node:test";

import { ContextClient } from "./context.ts";

const user = (ts: number, text: string) => ({ role: "user", content: text, timestamp: ts });
const list = () => [user(1, "a"), user(2, "b"), user(3, "c")];
const stub = { role: "user", content: "stub", timestamp: 9 };

test("an unknown copy keeps nothing, and a sync makes it known", () => {
	const client = new ContextClient();
	assert.equal(client.keep(list()), 0);
	client.sync(0, list());
	assert.equal(client.keep(list()), 3);
	assert.equal(client.keep([user(1, "a"), user(2, "changed"), user(3, "c")]), 1);
	client.forgetCopy();
	assert.equal(client.keep(list()), 0);
});

test("an answer's steps are applied and held for the next answer to reuse", () => {
	const client = new ContextClient();
	const sidecar = {};
	const messages = list();
	assert.equal(client.base(sidecar), undefined);
	const first = client.apply(messages, undefined, { seq: 1, steps: [{ keep: [0, 1] }, { message: stub }, { keep: [2, 3] }] }, sidecar);
	assert.equal(first.kind, "rendered");
	assert.deepEqual(first.kind === "rendered" && first.messages, [messages[0], stub, messages[2]]);
	assert.equal(client.base(sidecar), 1);
	// The next answer reuses the first two steps and adds its own.
	const next = client.apply(messages, 1, { seq: 2, reuse: 2, steps: [{ keep: [1, 3] }] }, sidecar);
	assert.deepEqual(next.kind === "rendered" && next.messages, [messages[0], stub, messages[1], messages[2]]);
	assert.equal(next.kind === "rendered" && next.steps, 3);
});

test("a held render from another sidecar, or one whose messages changed, is no base", () => {
	const client = new ContextClient();
	const sidecar = {};
	const message = { role: "user", content: "stub", timestamp: 9 };
	client.apply(list(), undefined, { seq: 4, steps: [{ message }] }, sidecar);
	assert.equal(client.base({}), undefined, "another sidecar");
	client.apply(list(), undefined, { seq: 5, steps: [{ message }] }, sidecar);
	message.content = "edited by another extension";
	assert.equal(client.base(sidecar), undefined, "its message changed");
});

test("an unchanged answer changes nothing; a malformed one forgets the held render", () => {
	const client = new ContextClient();
	const sidecar = {};
	client.apply(list(), undefined, { seq: 1, steps: [{ keep: [0, 3] }] }, sidecar);
	assert.deepEqual(client.apply(list(), 1, { unchanged: true }, sidecar), { kind: "unchanged" });
	assert.equal(client.base(sidecar), 1);
	assert.deepEqual(client.apply(list(), 1, { seq: 2, reuse: 9, steps: [] }, sidecar), { kind: "malformed" });
	assert.equal(client.base(sidecar), undefined);
	assert.deepEqual(client.apply(list(), undefined, { seq: 3, steps: "garbage" }, sidecar), { kind: "malformed" });
});

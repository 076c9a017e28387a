// Unit tests of how the requests sent ahead of a call are carried out (run by tests/plugin_units.rs).

import assert from "node:assert/strict";
import { test } from "node:test";

import { sentAhead, settle, within } from "./requests.ts";
import type { Sent } from "./requests.ts";

/** A request answered (or failed) after `ms`, whose carried-out answers land in `done`. */
function request(done: string[], name: string, ms: number, fails = false, inStep = true): Sent {
	const answer = sentAhead(
		new Promise((resolve, reject) => setTimeout(() => (fails ? reject(new Error(`${name} failed`)) : resolve({ name })), ms)),
	);
	return {
		answer,
		apply: (a) => {
			done.push(String(a.name));
			return inStep;
		},
	};
}

test("answers are carried out in the order sent, whatever order they arrive in", async () => {
	const done: string[] = [];
	const inStep = await settle([request(done, "message.end", 20), request(done, "turn.end", 5), request(done, "agent.start", 1)]);
	assert.equal(inStep, true);
	assert.deepEqual(done, ["message.end", "turn.end", "agent.start"]);
});

test("a failed request does not stop the answers after it, and its error is thrown after them", async () => {
	const done: string[] = [];
	await assert.rejects(
		settle([request(done, "message.end", 1), request(done, "turn.end", 2, true), request(done, "message.end 2", 3), request(done, "turn.end 2", 4)]),
		/turn.end failed/,
	);
	assert.deepEqual(done, ["message.end", "message.end 2", "turn.end 2"]);
});

test("an answer that leaves the keys behind makes the whole call out of step", async () => {
	const done: string[] = [];
	const inStep = await settle([request(done, "turn.end", 1, false, false), request(done, "agent.start", 1)]);
	assert.equal(inStep, false);
	assert.deepEqual(done, ["turn.end", "agent.start"]);
});

test("a context that never answers fails at its own deadline, counted from when it is awaited", async () => {
	const never = sentAhead(new Promise(() => undefined));
	await assert.rejects(within(never, 20, "context"), /context: no answer within 20 ms/);
	const soon = sentAhead(new Promise((resolve) => setTimeout(() => resolve({ seq: 1 }), 5)));
	assert.deepEqual(await within(soon, 1_000, "context"), { seq: 1 });
});

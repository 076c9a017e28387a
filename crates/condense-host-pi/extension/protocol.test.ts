// Every effect variant, as the sidecar writes it (`protocol.samples.json`,
// generated from the Rust enum by `tests/protocol_roundtrip.rs`), read
// through the shim's types and written back: nothing may change. With
// `CONDENSE_PROTOCOL_OUT` set, the re-emitted JSON is written there for the
// Rust side to read back.

import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { test } from "node:test";

import { EFFECT_KINDS, parseEffect, ProtocolError } from "./protocol.ts";
import type { Effect } from "./protocol.ts";

const samplesFile = process.env.CONDENSE_PROTOCOL_SAMPLES ?? new URL("./protocol.samples.json", import.meta.url);
const samples: { effects: unknown[] } = JSON.parse(readFileSync(samplesFile, "utf8"));

test("every effect the sidecar writes reads and re-emits unchanged", () => {
	const read: Effect[] = samples.effects.map((raw) => {
		const effect = parseEffect(raw);
		assert.ok(effect, `unknown kind in ${JSON.stringify(raw)}`);
		return effect;
	});
	const reEmitted: unknown = JSON.parse(JSON.stringify(read));
	assert.deepEqual(reEmitted, samples.effects);
	const kinds = new Set(read.map((e) => e.kind));
	assert.deepEqual([...kinds].sort(), [...EFFECT_KINDS].sort(), "the samples cover every kind");
	const out = process.env.CONDENSE_PROTOCOL_OUT;
	if (out) writeFileSync(out, JSON.stringify({ effects: reEmitted }));
});

test("a known effect with a missing or mistyped field is refused", () => {
	for (const raw of samples.effects) {
		const o = raw as { [key: string]: unknown };
		for (const key of Object.keys(o)) {
			if (key === "kind" || key === "ttlMs" || key === "values") continue;
			const missing = { ...o };
			delete missing[key];
			assert.throws(() => parseEffect(missing), ProtocolError, `${o.kind} without ${key}`);
		}
	}
	assert.throws(() => parseEffect({ kind: "notify", level: "loud", text: "x" }), ProtocolError);
	assert.throws(() => parseEffect({ kind: "status", text: 3 }), ProtocolError);
	assert.equal(parseEffect({ kind: "fromTheFuture", x: 1 }), undefined);
});

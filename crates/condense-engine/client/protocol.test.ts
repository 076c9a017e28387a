// Every message of the protocol, as the sidecar writes it
// (`protocol.samples.json`, generated from the Rust types by
// condense-engine's `tests/client_protocol.rs`), read through the checks and
// written back: nothing may change, and every method the shim knows has a
// sample. With `CONDENSE_PROTOCOL_OUT` set, the re-emitted JSON is written
// there for the Rust side to read back.

import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { test } from "node:test";

import {
	EFFECT_KINDS,
	isErrorBody,
	parseEffect,
	ProtocolError,
	readSidecarNotice,
	readSidecarRequest,
	SHIM_NOTIFICATIONS,
	SHIM_REQUESTS,
	SIDECAR_NOTIFICATIONS,
	SIDECAR_REQUESTS,
} from "./protocol.ts";
import type { Effect, ShimMethod } from "./protocol.ts";

interface Sample {
	method: string;
	params?: unknown;
	result?: unknown;
}
interface Samples {
	effects: unknown[];
	requests: Sample[];
	answers: Sample[];
	sidecarRequests: Sample[];
	sidecarNotifications: Sample[];
	shimNotifications: Sample[];
	errors: unknown[];
}

const samplesFile = process.env.CONDENSE_PROTOCOL_SAMPLES ?? new URL("./protocol.samples.json", import.meta.url);
const samples: Samples = JSON.parse(readFileSync(samplesFile, "utf8"));

function shimMethod(method: string): ShimMethod {
	assert.ok(Object.prototype.hasOwnProperty.call(SHIM_REQUESTS, method), `the shim does not know ${method}`);
	return method as ShimMethod;
}

/** What JSON makes of a value (drops `undefined`, as the wire does). */
function wire(value: unknown): unknown {
	return JSON.parse(JSON.stringify(value));
}

function methods(list: Sample[]): string[] {
	return [...new Set(list.map((s) => s.method))].sort();
}

test("every message the sidecar writes reads and re-emits unchanged", () => {
	const effects: Effect[] = samples.effects.map((raw) => {
		const effect = parseEffect(raw);
		assert.ok(effect, `unknown kind in ${JSON.stringify(raw)}`);
		return effect;
	});
	const requests = samples.requests.map(({ method, params }) => ({
		method,
		params: SHIM_REQUESTS[shimMethod(method)].params(params, method),
	}));
	const answers = samples.answers.map(({ method, result }) => {
		const read = SHIM_REQUESTS[shimMethod(method)].result(result, method);
		// The effects in an answer are effects too.
		if ("effects" in read) for (const e of read.effects) assert.ok(parseEffect(e), `${method}: ${JSON.stringify(e)}`);
		return { method, result: read };
	});
	const sidecarRequests = samples.sidecarRequests.map(({ method, params, result }) => {
		const request = readSidecarRequest(method, params);
		assert.ok(request, `the shim does not answer ${method}`);
		return { method, params: request.params, result: SIDECAR_REQUESTS[request.method].result(result, method) };
	});
	const sidecarNotifications = samples.sidecarNotifications.map(({ method, params }) => {
		const notice = readSidecarNotice(method, params);
		assert.ok(notice, `the shim ignores ${method}`);
		return notice;
	});
	const shimNotifications = samples.shimNotifications.map(({ method, params }) => {
		assert.equal(method, "llm.event");
		return { method, params: SHIM_NOTIFICATIONS["llm.event"](params, method) };
	});
	const errors = samples.errors.map((e) => isErrorBody(e, "error"));
	const reEmitted = wire({ effects, requests, answers, sidecarRequests, sidecarNotifications, shimNotifications, errors });
	assert.deepEqual(reEmitted, wire(samples));

	// Every method and kind the shim knows has a sample.
	assert.deepEqual([...new Set(effects.map((e) => e.kind))].sort(), [...EFFECT_KINDS].sort(), "effect kinds");
	assert.deepEqual(methods(samples.requests), Object.keys(SHIM_REQUESTS).sort(), "requests");
	assert.deepEqual(methods(samples.answers), Object.keys(SHIM_REQUESTS).sort(), "answers");
	assert.deepEqual(methods(samples.sidecarRequests), Object.keys(SIDECAR_REQUESTS).sort(), "sidecar requests");
	assert.deepEqual(methods(samples.sidecarNotifications), Object.keys(SIDECAR_NOTIFICATIONS).sort(), "notifications");
	assert.deepEqual(methods(samples.shimNotifications), Object.keys(SHIM_NOTIFICATIONS).sort(), "shim notifications");

	const out = process.env.CONDENSE_PROTOCOL_OUT;
	if (out) writeFileSync(out, JSON.stringify(reEmitted));
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

/**
 * The fields the protocol lets the sidecar leave out of an answer (`commands`
 * and `reasoningEffort`: a sidecar older than them leaves them out).
 */
const OPTIONAL_ANSWER_FIELDS = new Set(["unchanged", "seq", "reuse", "steps", "micros", "synced", "commands"]);
const OPTIONAL_SIDECAR_PARAMS = new Set(["reasoningEffort"]);

function without(o: unknown, key: string): { [key: string]: unknown } {
	const copy: { [key: string]: unknown } = { ...(o as object) };
	delete copy[key];
	return copy;
}

test("an answer or a sidecar message without a required field is refused", () => {
	for (const { method, result } of samples.answers) {
		const check = SHIM_REQUESTS[shimMethod(method)].result;
		for (const key of Object.keys(result as object)) {
			if (OPTIONAL_ANSWER_FIELDS.has(key)) check(without(result, key), method);
			else assert.throws(() => check(without(result, key), method), ProtocolError, `${method} without ${key}`);
		}
	}
	for (const { method, params } of samples.sidecarRequests) {
		for (const key of Object.keys(params as object)) {
			if (OPTIONAL_SIDECAR_PARAMS.has(key)) readSidecarRequest(method, without(params, key));
			else assert.throws(() => readSidecarRequest(method, without(params, key)), ProtocolError, `${method} without ${key}`);
		}
	}
	for (const { method, params } of samples.sidecarNotifications) {
		for (const key of Object.keys(params as object)) {
			assert.throws(() => readSidecarNotice(method, without(params, key)), ProtocolError, `${method} without ${key}`);
		}
	}
	assert.throws(() => SHIM_REQUESTS.hello.result({ protocol: "1", sidecar: "x" }, "hello"), ProtocolError);
	assert.throws(() => SHIM_REQUESTS.hello.result({ protocol: 1, sidecar: "x", commands: [{ name: "now" }] }, "hello"), ProtocolError);
	const complete = { model: "default", system: null, user: "", maxTokens: null };
	assert.throws(() => readSidecarRequest("llm.complete", { ...complete, reasoningEffort: 3 }), ProtocolError);
	assert.throws(() => SHIM_REQUESTS.context.result({ steps: [{ keep: [1] }], effects: [] }, "context"), ProtocolError);
	assert.throws(() => SHIM_REQUESTS.context.result({ effects: {} }, "context"), ProtocolError);
	assert.equal(readSidecarRequest("llm.fromTheFuture", {}), undefined);
	assert.equal(readSidecarNotice("fromTheFuture", {}), undefined);
});

// Unit tests of the OpenCode ↔ core message mapping and the branch rebuilt
// from the event log (run by tests/plugin_units.rs under `node --test`).

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";

import { buildBranch, EventLog, knownCount } from "./log.ts";
import { applyRender, contextTokens, convert, isCleared, OPENCODE_CLEARED } from "./messages.ts";
import type { OcMessage, OcPart, PiMessage } from "./messages.ts";

const S = "ses_test";

function user(id: string, text: string, created: number): OcMessage {
	return {
		info: { id, sessionID: S, role: "user", time: { created }, agent: "build", model: { providerID: "p", modelID: "m" } },
		parts: [{ id: `${id}-t`, sessionID: S, messageID: id, type: "text", text }],
	};
}

function toolPart(messageID: string, callID: string, output: string, extra: Partial<OcPart> = {}): OcPart {
	return {
		id: `${messageID}-${callID}`,
		sessionID: S,
		messageID,
		type: "tool",
		callID,
		tool: "read",
		state: { status: "completed", input: { filePath: `/x/${callID}` }, output, time: { start: 1, end: 2 } },
		...extra,
	};
}

function assistant(id: string, created: number, parts: OcPart[]): OcMessage {
	return {
		info: { id, sessionID: S, role: "assistant", time: { created, completed: created + 1 }, providerID: "p", modelID: "m" },
		parts,
	};
}

function session(): OcMessage[] {
	return [
		user("u1", "read a and b", 10),
		assistant("a1", 20, [toolPart("a1", "call_a", "AAA original")]),
		assistant("a2", 30, [{ id: "a2-x", sessionID: S, messageID: "a2", type: "text", text: "thinking aloud" }, toolPart("a2", "call_b", "BBB original")]),
		assistant("a3", 40, [{ id: "a3-x", sessionID: S, messageID: "a3", type: "text", text: "done" }]),
		user("u2", "next", 50),
	];
}

test("an assistant message becomes the message and one toolResult per finished tool part", () => {
	const { pi } = convert(session());
	assert.deepEqual(
		pi.map((m) => m.role),
		["user", "assistant", "toolResult", "assistant", "toolResult", "assistant", "user"],
	);
	assert.equal(pi[2]?.toolCallId, "call_a");
	assert.deepEqual(pi[2]?.content, [{ type: "text", text: "AAA original" }]);
	assert.equal(pi[1]?.stopReason, "toolUse");
	assert.equal(pi[5]?.stopReason, "stop");
});

test("an assistant message carries the call's usage as pi records it, for the cache economics", () => {
	const [, a1] = session() as [OcMessage, OcMessage];
	a1.info.tokens = { input: 500, output: 20, reasoning: 5, cache: { read: 12000, write: 3000 } };
	a1.info.cost = 0.0125;
	const { pi } = convert([a1]);
	assert.deepEqual(pi[0]?.usage, { input: 500, output: 25, cacheRead: 12000, cacheWrite: 3000, totalTokens: 15525, cost: { total: 0.0125 } });
	// No tokens recorded (or unreadable ones): no usage, as pi has none for such a call.
	a1.info.tokens = { input: 0, output: 0, reasoning: 0, cache: { read: 0, write: 0 } };
	assert.equal(convert([a1]).pi[0]?.usage, undefined);
	a1.info.tokens = { input: -1, output: Number.NaN, reasoning: 0, cache: { read: 1.5, write: 0 } };
	assert.equal(convert([a1]).pi[0]?.usage, undefined);
});

test("the context a turn reports counts every part, and malformed counts as nothing", () => {
	const [, a1] = session() as [OcMessage, OcMessage];
	a1.info.tokens = { input: 500, output: 20, reasoning: 5, cache: { read: 12000, write: 3000 } };
	assert.equal(contextTokens(a1.info), 15525);
	delete a1.info.tokens;
	assert.equal(contextTokens(a1.info), null);
	// A provider that reports no cache object, and counts that are not counts.
	a1.info.tokens = JSON.parse('{"input": 100, "output": "x", "reasoning": null}');
	assert.equal(contextTokens(a1.info), 100);
});

test("a part OpenCode cleared is left out: never captured, summarized or stubbed; the model still gets OpenCode's placeholder", () => {
	const m = session();
	const part = m[1]?.parts[0];
	if (part?.state?.time) part.state.time.compacted = 3;
	assert.ok(part && isCleared(part));
	const converted = convert(m);
	const { pi } = converted;
	assert.deepEqual(
		pi.map((x) => x.role),
		["user", "assistant", "assistant", "toolResult", "assistant", "user"],
	);
	assert.deepEqual(pi[1]?.content, [], "no call for the cleared part");
	assert.ok(!pi.some((x) => x.toolCallId === "call_a"));
	assert.ok(!JSON.stringify(pi).includes(OPENCODE_CLEARED));
	// The message keeps its part: OpenCode sends its placeholder as before.
	const out = applyRender(m, converted, pi.map((x) => (x.toolCallId === "call_b" ? { ...x, content: [{ type: "text", text: "stub b" }] } : x)));
	assert.ok(out);
	assert.equal(out[1], m[1], "the cleared part's message is passed as it is");
});

test("arguments the sidecar purged become the part's input in a copy; the original stays", () => {
	const messages = session();
	const a2 = messages[2];
	const part = a2?.parts[1];
	if (part?.state) {
		part.state.status = "error";
		part.state.error = "boom";
		part.state.input = { filePath: "/x/call_b", content: "y".repeat(5000) };
	}
	const converted = convert(messages);
	const purged = { _purged: '<purged-errored-args size="5030"/>' };
	const rendered = converted.pi.map((x) =>
		x.role === "assistant" && JSON.stringify(x.content).includes("call_b")
			? { ...x, content: (x.content as Record<string, unknown>[]).map((b) => (b.type === "toolCall" ? { ...b, arguments: purged } : b)) }
			: x,
	);
	const out = applyRender(messages, converted, rendered);
	assert.ok(out);
	assert.deepEqual(
		out.map((m) => m.info.id),
		["u1", "a1", "a2", "a3", "u2"],
	);
	assert.deepEqual(out[2]?.parts[1]?.state?.input, purged);
	assert.equal(out[2]?.parts[1]?.state?.error, "boom", "the error result stays visible");
	assert.equal((a2?.parts[1]?.state?.input as { content?: string }).content?.length, 5000, "OpenCode's own part is untouched");
	assert.equal(out[2]?.parts[0], a2?.parts[0], "other parts are shared");
});

test("keeping everything changes nothing", () => {
	const messages = session();
	const converted = convert(messages);
	assert.equal(applyRender(messages, converted, converted.pi), undefined);
});

test("a stub replaces that tool part's output in a copy, the original stays", () => {
	const messages = session();
	const converted = convert(messages);
	const rendered: PiMessage[] = converted.pi.map((m) =>
		m.toolCallId === "call_a" ? { ...m, content: [{ type: "text", text: "[stub t1]" }] } : m,
	);
	const out = applyRender(messages, converted, rendered);
	assert.ok(out);
	assert.equal(out.length, messages.length);
	assert.equal(out[1]?.parts[0]?.state?.output, "[stub t1]");
	assert.equal(messages[1]?.parts[0]?.state?.output, "AAA original", "the input is not mutated");
	assert.equal(out[2], messages[2], "untouched messages are the very objects");
});

test("a compressed chain removes its messages and puts the synthetic one in their place", () => {
	const messages = session();
	const converted = convert(messages);
	const [u1, , , , , a3, u2] = converted.pi as PiMessage[];
	const synthetic: PiMessage = { role: "user", content: [{ type: "text", text: "<compressed-chain>x</compressed-chain>" }], timestamp: 25 };
	const out = applyRender(messages, converted, [u1 as PiMessage, synthetic, a3 as PiMessage, u2 as PiMessage]);
	assert.ok(out);
	assert.deepEqual(
		out.map((m) => m.info.id),
		["u1", "condense-synthetic-0", "a3", "u2"],
	);
	const made = out[1];
	assert.equal(made?.info.role, "user");
	assert.equal(made?.info.sessionID, S);
	assert.equal(made?.parts[0]?.text, "<compressed-chain>x</compressed-chain>");
	assert.equal(made?.parts[0]?.synthetic, true);
});

test("the branch puts logged entries after their message and leaves the plugin's marks out", () => {
	const messages = session();
	const branch = buildBranch(messages, [
		{ type: "custom", customType: "context-prune-index", data: { n: 1 }, id: "c1", timestamp: "t", after: "a1" },
		{ type: "reported", id: "c2", timestamp: "t", after: "a1" },
		{ type: "custom", customType: "context-prune-summary", data: { n: 2 }, id: "c3", timestamp: "t", after: "gone" },
	]);
	const kinds = branch.map((e) => (e.type === "custom" ? String(e.customType) : String((e.message as PiMessage).role)));
	assert.deepEqual(kinds, [
		"user",
		"assistant",
		"toolResult",
		"context-prune-index",
		"assistant",
		"toolResult",
		"assistant",
		"user",
		"context-prune-summary",
	]);
	assert.ok(branch.every((e) => !("after" in e)));
	branch.forEach((e, i) => assert.equal(e.parentId, i === 0 ? null : branch[i - 1]?.id));
});

test("after a compaction the branch is pi's: what it left out, its summary and tail, the compaction entry, then the rest", () => {
	const compaction: OcMessage = {
		info: { id: "c1", sessionID: S, role: "user", time: { created: 60 } },
		parts: [{ id: "c1-p", sessionID: S, messageID: "c1", type: "compaction" }],
	};
	const summary = assistant("s1", 70, [{ id: "s1-x", sessionID: S, messageID: "s1", type: "text", text: "what we did" }]);
	summary.info.summary = true;
	const [u1, a1, a2, a3, u2] = session() as [OcMessage, OcMessage, OcMessage, OcMessage, OcMessage];
	const cont = user("u3", "Continue", 80);
	const a4 = assistant("a4", 90, [toolPart("a4", "call_d", "DDD original")]);
	// Stored order, and the list OpenCode hands the hook (u2 is the kept tail).
	const history = [u1, a1, a2, a3, u2, compaction, summary, cont, a4];
	const list = [compaction, summary, u2, cont, a4];
	const entry = (id: string, after: string) => ({ type: "custom" as const, customType: "context-prune-summary", data: {}, id, timestamp: "t", after });
	const branch = buildBranch(list, [entry("e1", "a1"), entry("e2", "u2"), entry("e3", "a4")], history);
	const kinds = branch.map((e) => (e.type === "message" ? String((e.message as PiMessage).role) : e.type === "custom" ? String(e.id) : String(e.type)));
	assert.deepEqual(kinds, [
		// Left out by the compaction (its turns still count), with its entries:
		// out of the context, as in pi.
		"user",
		"assistant",
		"toolResult",
		"e1",
		"assistant",
		"toolResult",
		"assistant",
		// Kept: OpenCode's summary and the tail with its entries, then pi's compaction entry.
		"assistant",
		"user",
		"e2",
		"compaction",
		"user",
		"assistant",
		"toolResult",
		"e3",
	]);
	const kept = branch.find((e) => e.type === "compaction");
	const first = branch[kinds.indexOf("e1") + 4];
	assert.equal(kept?.firstKeptEntryId, first?.id);
	assert.deepEqual((first?.message as PiMessage).content, [{ type: "text", text: "what we did" }]);
	// The list's compaction message is pi's compaction marker, as the store builds it from that entry.
	const { pi } = convert(list);
	assert.deepEqual(pi[0], { role: "compactionSummary", summary: "", tokensBefore: 0, timestamp: 60 });
	assert.equal(kept?.timestamp, new Date(60).toISOString());
	// Without the history, the entries of what is gone still stay out of the context.
	const alone = buildBranch(list, [entry("e1", "a1"), entry("e3", "a4")]);
	const ids = alone.map((e) => String(e.id));
	assert.ok(ids.indexOf("e1") < ids.indexOf("compaction"), ids.join(" "));
	assert.ok(ids.indexOf("e3") > ids.indexOf("compaction"), ids.join(" "));
});

test("the log appends whole lines, reads them back, and refuses an unsafe session id", () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), "condense-log-"));
	const log = new EventLog(dir, S);
	log.append([{ type: "custom", customType: "context-prune-index", data: { n: 1 }, after: "a1" }]);
	log.append([{ type: "reported", after: "a1" }]);
	const read = new EventLog(dir, S).read();
	assert.deepEqual(
		read.map((e) => [e.type, e.after, e.id]),
		[
			["custom", "a1", "condense-1"],
			["reported", "a1", "condense-2"],
		],
	);
	fs.appendFileSync(path.join(dir, `${S}.jsonl`), '{"type":"custom","torn');
	assert.equal(new EventLog(dir, S).read().length, 2, "a torn last line is skipped");
	assert.equal(new EventLog(dir, "../escape").file, undefined);
	fs.rmSync(dir, { recursive: true, force: true });
});

test("a log that is not a regular file reads as empty and refuses appends at once", () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), "condense-log-"));
	for (const [name, make] of [
		["ses_fifo", (f: string) => execFileSync("mkfifo", [f])],
		["ses_zero", (f: string) => fs.symlinkSync("/dev/zero", f)],
	] as const) {
		make(path.join(dir, `${name}.jsonl`));
		const log = new EventLog(dir, name);
		assert.deepEqual(log.read(), [], name);
		assert.throws(() => log.append([{ type: "reported", after: "a1" }]), /is not a regular file/, name);
	}
	fs.rmSync(dir, { recursive: true, force: true });
});

test("at start the sidecar knows up to the last reported message, or a never-seen session's finished messages", () => {
	const messages = session();
	const mark = (after: string) => ({ type: "reported" as const, id: `r-${after}`, timestamp: "", after });
	// A log: up to the last reported assistant message; later ones are reported as turns.
	assert.equal(knownCount(messages, [mark("a1")]), 2);
	assert.equal(knownCount(messages, [mark("a1"), mark("a2")]), 3);
	// A log with entries but no mark yet: nothing known, every turn reported.
	assert.equal(knownCount(messages, [{ type: "custom", id: "c1", timestamp: "", after: "a1" }]), 0);
	// No log: every message, up to an assistant message still running.
	assert.equal(knownCount(messages, []), messages.length);
	const running = session();
	const a2 = running[2];
	if (a2) a2.info.time = { created: 30 };
	assert.equal(knownCount(running, []), 2);
});

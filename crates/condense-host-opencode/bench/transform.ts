// The transform hook's cost per LLM call inside OpenCode's own runtime (the
// Bun that the `opencode` binary embeds), on a long session.
//
//   BUN_BE_BUN=1 opencode bench/transform.ts SESSION.jsonl [CALLS]
//
// SESSION.jsonl is a pi session (`condense gen --pruned`): its messages
// become OpenCode's `{info, parts}` (an assistant message with its tool
// results as completed tool parts), its condense entries the plugin's log,
// every assistant message marked reported, as if the plugin had run the
// whole session. Then the hook runs as OpenCode runs it before each LLM
// call: the first call starts the sidecar (`$CONDENSE_BIN`) and
// sends the whole list; each later call adds one finished assistant message
// with a small `read` (reported as a turn, then an incremental `context`).
// Prints the first call and the later calls' median, p90 and max, in ms,
// and the median time of the message mapping alone.

import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { condensePlugin } from "../plugin/plugin.ts";
import { convert } from "../plugin/messages.ts";
import type { OcMessage, OcPart } from "../plugin/messages.ts";

type Json = Record<string, unknown>;

const [file, callsArg] = process.argv.slice(2);
if (!file) {
	console.error("usage: BUN_BE_BUN=1 opencode bench/transform.ts SESSION.jsonl [CALLS]");
	process.exit(2);
}
const CALLS = Number(callsArg ?? 40);
const SESSION = "ses_bench";

const entries = fs
	.readFileSync(file, "utf8")
	.split("\n")
	.filter((l) => l.trim())
	.map((l) => JSON.parse(l) as Json);

function text(content: unknown): string {
	if (typeof content === "string") return content;
	if (!Array.isArray(content)) return "";
	return content.map((b: Json) => (b?.type === "text" ? String(b.text ?? "") : "")).join("");
}

// Messages and the condense entries after each (by the OpenCode message they follow).
const messages: OcMessage[] = [];
const log: Json[] = [];
const results = new Map<string, Json>();
for (const e of entries) {
	const m = e.message as Json | undefined;
	if (e.type === "message" && m?.role === "toolResult") results.set(String(m.toolCallId), m);
}
let n = 0;
const after = () => messages.at(-1)?.info.id ?? null;
for (const e of entries) {
	if (e.type === "custom" || e.type === "custom_message") {
		log.push({ ...e, after: after() });
		continue;
	}
	const m = e.message as Json | undefined;
	if (e.type !== "message" || !m) continue;
	const ts = Number(m.timestamp ?? 0);
	const id = `msg_${String(++n).padStart(6, "0")}`;
	if (m.role === "user") {
		messages.push({
			info: { id, sessionID: SESSION, role: "user", time: { created: ts }, agent: "build", model: { providerID: "fake", modelID: "fake-1" } },
			parts: [{ id: `${id}-t`, sessionID: SESSION, messageID: id, type: "text", text: text(m.content) }],
		});
	} else if (m.role === "assistant") {
		const parts: OcPart[] = [];
		for (const [i, b] of ((m.content as Json[]) ?? []).entries()) {
			const pid = `${id}-${i}`;
			if (b.type === "text") parts.push({ id: pid, sessionID: SESSION, messageID: id, type: "text", text: String(b.text) });
			else if (b.type === "thinking") parts.push({ id: pid, sessionID: SESSION, messageID: id, type: "reasoning", text: String(b.thinking) });
			else if (b.type === "toolCall") {
				const r = results.get(String(b.id));
				parts.push({
					id: pid,
					sessionID: SESSION,
					messageID: id,
					type: "tool",
					callID: String(b.id),
					tool: String(b.name),
					state: {
						status: r?.isError ? "error" : "completed",
						input: (b.arguments as Json) ?? {},
						output: text(r?.content),
						error: r?.isError ? text(r?.content) : undefined,
						time: { start: ts, end: Number(r?.timestamp ?? ts) },
					},
				});
			}
		}
		messages.push({
			info: { id, sessionID: SESSION, role: "assistant", time: { created: ts, completed: ts + 1 }, providerID: "fake", modelID: "fake-1" },
			parts,
		});
		log.push({ type: "reported", after: id });
	}
}

// An isolated home: condense.json, the log, no OpenCode.
const home = fs.mkdtempSync(path.join(os.tmpdir(), "condense-oc-bench-"));
process.env.XDG_CONFIG_HOME = path.join(home, "config");
process.env.XDG_DATA_HOME = path.join(home, "data");
fs.mkdirSync(path.join(home, "config", "opencode"), { recursive: true });
fs.writeFileSync(path.join(home, "config", "opencode", "condense.json"), JSON.stringify({ enabled: true }));
const logDir = path.join(home, "data", "opencode", "storage", "plugin", "condense");
fs.mkdirSync(logDir, { recursive: true });
fs.writeFileSync(
	path.join(logDir, `${SESSION}.jsonl`),
	log.map((e, i) => JSON.stringify({ ...e, id: e.id ?? `bench-${i}`, timestamp: e.timestamp ?? new Date(0).toISOString() })).join("\n") + "\n",
);

// `tool()` and its schema builder: the bench never calls the tool.
const chain: unknown = new Proxy(function () {}, { get: () => chain, apply: () => chain });
const tool = Object.assign((def: unknown) => def, { schema: chain });
const client = {
	config: { get: async () => ({ data: {} }), providers: async () => ({ data: { providers: [] } }) },
};
const hooks = await condensePlugin(tool as never)({ client, directory: home } as never);
const hook = hooks["experimental.chat.messages.transform"];
if (!hook) throw new Error("no transform hook");
const transform = hook;

let chars = 0;
for (const m of messages) for (const p of m.parts) chars += (p.text?.length ?? 0) + String(p.state?.output ?? "").length;

async function call(list: OcMessage[]): Promise<{ ms: number; out: number }> {
	const output = { messages: [...list] };
	const started = performance.now();
	await transform({}, output as never);
	return { ms: performance.now() - started, out: output.messages.length };
}

const first = await call(messages);
const times: number[] = [];
let out = first.out;
let last = messages.at(-1)?.info.time.created ?? 0;
for (let k = 0; k < CALLS; k++) {
	last += 1000;
	const id = `msg_new_${String(k).padStart(4, "0")}`;
	messages.push({
		info: { id, sessionID: SESSION, role: "assistant", time: { created: last, completed: last + 500 }, providerID: "fake", modelID: "fake-1" },
		parts: [
			{
				id: `${id}-0`,
				sessionID: SESSION,
				messageID: id,
				type: "tool",
				callID: `call_new_${k}`,
				tool: "read",
				state: { status: "completed", input: { filePath: `/src/f${k}.ts` }, output: "x".repeat(400), time: { start: last, end: last + 400 } },
			},
		],
	});
	const r = await call(messages);
	times.push(r.ms);
	out = r.out;
}
// The plugin's own share: mapping OpenCode's list to pi messages, which the
// hook does once per call before anything else.
const converts: number[] = [];
for (let k = 0; k < 20; k++) {
	const started = performance.now();
	convert(messages);
	converts.push(performance.now() - started);
}
converts.sort((a, b) => a - b);
times.sort((a, b) => a - b);
const q = (p: number) => times[Math.min(times.length - 1, Math.floor(p * times.length))] ?? NaN;
console.log(
	`messages ${messages.length} (about ${Math.round(chars / 4 / 1000)}k tokens of text and outputs), rendered to ${out}\n` +
		`first call (sidecar start, session.start, whole context): ${first.ms.toFixed(1)} ms\n` +
		`later calls (${times.length}): median ${q(0.5).toFixed(2)} ms, p90 ${q(0.9).toFixed(2)} ms, max ${(times.at(-1) ?? NaN).toFixed(2)} ms\n` +
		`of which the mapping (convert, median of 20): ${(converts[10] ?? NaN).toFixed(2)} ms`,
);
fs.rmSync(home, { recursive: true, force: true });
process.exit(0);

// OpenCode's `{info, parts}` messages as core's (pi-shaped) messages, and a
// render plan's answer mapped back onto OpenCode's messages.
//
// One OpenCode assistant message is one LLM call: it becomes one pi
// assistant message (text, thinking and tool calls) followed by one
// `toolResult` message per finished tool part. A tool part OpenCode's own
// pruning already cleared is left out of both: the model sees OpenCode's
// placeholder for it, so condense never captures, summarizes or stubs it.
// The render answer comes back as pi messages; `applyRender` turns it into
// OpenCode's list: a tool result the sidecar rewrote (a stub) becomes that
// tool part's `state.output` in a copy of the part, arguments the sidecar
// purged (a failed call's) become that part's `state.input` in a copy,
// messages whose pi images were all dropped (a compressed chain) are
// removed, and any other message the sidecar wrote becomes a synthetic user
// message at its place.

/** The OpenCode shapes this file reads (a subset of @opencode-ai/sdk's types). */
export interface OcToolState {
	status: string;
	input?: Record<string, unknown>;
	output?: string;
	error?: string;
	time?: { start?: number; end?: number; compacted?: number };
	[key: string]: unknown;
}
export interface OcPart {
	id: string;
	sessionID: string;
	messageID: string;
	type: string;
	text?: string;
	synthetic?: boolean;
	ignored?: boolean;
	callID?: string;
	tool?: string;
	state?: OcToolState;
	[key: string]: unknown;
}
export interface OcInfo {
	id: string;
	sessionID: string;
	role: string;
	time: { created: number; completed?: number };
	providerID?: string;
	modelID?: string;
	model?: { providerID: string; modelID: string };
	/** The assistant message that answers a compaction: OpenCode's summary of what came before. */
	summary?: boolean;
	finish?: string;
	error?: unknown;
	tokens?: { input: number; output: number; reasoning: number; cache: { read: number; write: number } };
	[key: string]: unknown;
}
export interface OcMessage {
	info: OcInfo;
	parts: OcPart[];
}

/** A pi message as the sidecar reads it (condense-core's `Message`). */
export type PiMessage = { role: string; [key: string]: unknown };

/** What OpenCode sends in place of a tool output its own pruning cleared. */
export const OPENCODE_CLEARED = "[Old tool result content cleared]";

/** OpenCode's messages as pi messages, with where each came from. */
export interface Converted {
	pi: PiMessage[];
	/** The index of the OpenCode message each pi message came from. */
	origins: Map<PiMessage, number>;
	/** The index of the OpenCode message holding each tool call, cleared ones too. */
	callAt: Map<string, number>;
	/** The index of the OpenCode message whose tool part gave each `toolResult`. */
	resultAt: Map<string, number>;
}

function isToolPart(p: OcPart): p is OcPart & { callID: string; tool: string; state: OcToolState } {
	return p.type === "tool" && typeof p.callID === "string" && typeof p.tool === "string" && !!p.state;
}

/** True for a tool part OpenCode's pruning cleared (the model is sent {@link OPENCODE_CLEARED}). */
export function isCleared(p: OcPart): boolean {
	return isToolPart(p) && !!p.state.time?.compacted;
}

/** The text a finished tool part shows the model. */
function resultText(part: OcPart & { state: OcToolState }): string {
	if (part.state.status === "error") return String(part.state.error ?? "");
	return String(part.state.output ?? "");
}

/**
 * True for the user message that starts an OpenCode compaction (its
 * `compaction` part). Once the compaction's summary is written, OpenCode's
 * list starts with it and leaves out what came before (its tail of recent
 * turns aside).
 */
export function isCompaction(m: OcMessage): boolean {
	return m.info.role === "user" && m.parts.some((p) => p.type === "compaction");
}

/** True for the assistant message holding a compaction's summary (not a turn of the agent's). */
export function isCompactionSummary(m: OcMessage): boolean {
	return m.info.role === "assistant" && m.info.summary === true;
}

/** The pi messages of one OpenCode message (the first is the message itself). */
export function toPi(m: OcMessage): { message: PiMessage; results: { message: PiMessage; part: OcPart }[] } {
	const timestamp = m.info.time?.created ?? 0;
	// pi's own marker of a compaction, as condense's store builds it from a
	// `compaction` entry (log.ts writes one on resume), so the sidecar's copy
	// and a rebuilt branch agree byte for byte. OpenCode's summary follows as
	// the assistant message it is.
	if (isCompaction(m)) return { message: { role: "compactionSummary", summary: "", tokensBefore: 0, timestamp }, results: [] };
	if (m.info.role !== "assistant") {
		const content = m.parts
			.filter((p) => p.type === "text" && !p.ignored && typeof p.text === "string")
			.map((p) => ({ type: "text", text: p.text as string }));
		return { message: { role: "user", content, timestamp }, results: [] };
	}
	const content: Record<string, unknown>[] = [];
	const results: { message: PiMessage; part: OcPart }[] = [];
	for (const p of m.parts) {
		if (p.type === "text" && typeof p.text === "string") content.push({ type: "text", text: p.text });
		else if (p.type === "reasoning" && typeof p.text === "string") content.push({ type: "thinking", thinking: p.text });
		else if (isToolPart(p) && !isCleared(p)) {
			content.push({ type: "toolCall", id: p.callID, name: p.tool, arguments: p.state.input ?? {} });
			if (p.state.status === "completed" || p.state.status === "error") {
				results.push({
					part: p,
					message: {
						role: "toolResult",
						toolCallId: p.callID,
						toolName: p.tool,
						content: [{ type: "text", text: resultText(p) }],
						isError: p.state.status === "error",
						timestamp: p.state.time?.end ?? timestamp,
					},
				});
			}
		}
	}
	const hasCalls = content.some((c) => c.type === "toolCall");
	const message: PiMessage = {
		role: "assistant",
		content,
		provider: m.info.providerID ?? "",
		model: m.info.modelID ?? "",
		stopReason: hasCalls ? "toolUse" : "stop",
		timestamp,
	};
	const usage = piUsage(m.info);
	if (usage) message.usage = usage;
	return { message, results };
}

/**
 * What OpenCode recorded for the call as pi's `usage` (the provider's split
 * of uncached input, cache reads and writes), which the sidecar's cache
 * economics read; reasoning is output. None for a call with no tokens yet.
 */
function piUsage(info: OcInfo): Record<string, unknown> | undefined {
	const t = info.tokens;
	if (!t) return undefined;
	const input = count(t.input);
	const output = count(t.output) + count(t.reasoning);
	const cacheRead = count(t.cache?.read);
	const cacheWrite = count(t.cache?.write);
	const totalTokens = input + output + cacheRead + cacheWrite;
	if (totalTokens === 0) return undefined;
	const cost = typeof info.cost === "number" && Number.isFinite(info.cost) && info.cost >= 0 ? info.cost : 0;
	return { input, output, cacheRead, cacheWrite, totalTokens, cost: { total: cost } };
}

/**
 * The call's whole context as the harness reports it to the budget gates
 * (input, output, reasoning and both cache parts), or null with no tokens
 * recorded. Malformed counts read as 0: a missing `cache` object must not
 * throw and switch condense off for the session.
 */
export function contextTokens(info: OcInfo): number | null {
	const t = info.tokens;
	if (!t) return null;
	return count(t.input) + count(t.output) + count(t.reasoning) + count(t.cache?.read) + count(t.cache?.write);
}

/** A token count as recorded, or 0 for anything else (the data is OpenCode's, read as is). */
function count(v: unknown): number {
	return typeof v === "number" && Number.isSafeInteger(v) && v > 0 ? v : 0;
}

/** Every OpenCode message as pi messages, in order. */
export function convert(messages: readonly OcMessage[]): Converted {
	const pi: PiMessage[] = [];
	const origins = new Map<PiMessage, number>();
	const callAt = new Map<string, number>();
	const resultAt = new Map<string, number>();
	messages.forEach((m, i) => {
		const { message, results } = toPi(m);
		pi.push(message);
		origins.set(message, i);
		if (m.info.role === "assistant") for (const p of m.parts) if (isToolPart(p)) callAt.set(p.callID, i);
		for (const r of results) {
			pi.push(r.message);
			origins.set(r.message, i);
			resultAt.set(r.message.toolCallId as string, i);
		}
	});
	return { pi, origins, callAt, resultAt };
}

/** The text of a pi message's content (string or text blocks). */
export function piText(m: PiMessage): string {
	const c = m.content;
	if (typeof c === "string") return c;
	if (!Array.isArray(c)) return "";
	return c
		.map((b) => (b && typeof b === "object" && (b as { type?: unknown }).type === "text" ? String((b as { text?: unknown }).text ?? "") : ""))
		.join("");
}

/**
 * OpenCode's list for the rendered pi list `rendered` (the very objects of
 * `converted.pi` where the plan kept them). Returns `undefined` when nothing
 * changed.
 */
export function applyRender(messages: readonly OcMessage[], converted: Converted, rendered: readonly PiMessage[]): OcMessage[] | undefined {
	const resultByCall = converted.resultAt;
	const assistantByCall = converted.callAt;
	type Slot = { message: number } | { synthetic: PiMessage };
	const slots: Slot[] = [];
	const placed = new Set<number>();
	const outputs = new Map<string, string>();
	const inputs = new Map<string, Record<string, unknown>>();
	const place = (i: number) => {
		if (placed.has(i)) return;
		placed.add(i);
		slots.push({ message: i });
	};
	for (const r of rendered) {
		const origin = converted.origins.get(r);
		if (origin !== undefined) {
			place(origin);
			continue;
		}
		const callId = typeof r.toolCallId === "string" ? r.toolCallId : undefined;
		if (r.role === "toolResult" && callId !== undefined && resultByCall.has(callId)) {
			outputs.set(callId, piText(r));
			place(resultByCall.get(callId) as number);
			continue;
		}
		if (r.role === "assistant" && Array.isArray(r.content)) {
			// A rewritten assistant message: the original stays, but a call
			// whose arguments the sidecar purged (a failed call's, after its
			// cooldown) is sent with the purged arguments.
			const calls = r.content.filter((b) => b && typeof b === "object" && (b as { type?: unknown }).type === "toolCall") as {
				id?: unknown;
				arguments?: unknown;
			}[];
			const at = calls.map((c) => (typeof c.id === "string" ? assistantByCall.get(c.id) : undefined)).find((i) => i !== undefined);
			if (at !== undefined) {
				for (const c of calls) {
					if (typeof c.id === "string" && isPurged(c.arguments)) inputs.set(c.id, c.arguments);
				}
				place(at);
				continue;
			}
		}
		slots.push({ synthetic: r });
	}
	const unchanged =
		outputs.size === 0 && inputs.size === 0 && slots.length === messages.length && slots.every((s, i) => "message" in s && s.message === i);
	if (unchanged) return undefined;
	const out: OcMessage[] = [];
	const rewrites = outputs.size > 0 || inputs.size > 0;
	let synthetic = 0;
	slots.forEach((slot, at) => {
		if ("message" in slot) {
			const m = messages[slot.message] as OcMessage;
			if (!rewrites || !m.parts.some((p) => isToolPart(p) && (outputs.has(p.callID) || inputs.has(p.callID)))) {
				out.push(m);
				return;
			}
			const parts = m.parts.map((p) => {
				if (!isToolPart(p)) return p;
				const output = outputs.get(p.callID);
				const input = inputs.get(p.callID);
				if (output === undefined && input === undefined) return p;
				const state = { ...p.state };
				if (output !== undefined && p.state.status === "completed") state.output = output;
				if (input !== undefined) state.input = input;
				return { ...p, state };
			});
			out.push({ info: m.info, parts });
			return;
		}
		out.push(syntheticMessage(slot.synthetic, neighbourInfo(messages, slots, at), synthetic++));
	});
	return out;
}

/** True for the arguments condense's error purge leaves (`{"_purged": "<purged-errored-args size=…/>"}`). */
function isPurged(args: unknown): args is Record<string, unknown> {
	if (!args || typeof args !== "object" || Array.isArray(args)) return false;
	const keys = Object.keys(args);
	const v = (args as Record<string, unknown>)._purged;
	return keys.length === 1 && typeof v === "string" && v.startsWith("<purged-errored-args");
}

/** The info of the nearest OpenCode user message (for a synthetic message's agent and model). */
function neighbourInfo(messages: readonly OcMessage[], slots: readonly ({ message: number } | { synthetic: PiMessage })[], at: number): OcInfo | undefined {
	for (let i = at; i < slots.length; i++) {
		const s = slots[i];
		if (s && "message" in s) {
			const m = messages[s.message];
			if (m && m.info.role === "user") return m.info;
		}
	}
	return messages.find((m) => m.info.role === "user")?.info;
}

function syntheticMessage(pi: PiMessage, near: OcInfo | undefined, n: number): OcMessage {
	const sessionID = near?.sessionID ?? "";
	const id = `condense-synthetic-${n}`;
	const info: OcInfo = {
		...(near ?? {}),
		id,
		sessionID,
		role: "user",
		time: { created: typeof pi.timestamp === "number" ? pi.timestamp : (near?.time.created ?? 0) },
	};
	return {
		info,
		parts: [{ id: `${id}-text`, sessionID, messageID: id, type: "text", text: piText(pi), synthetic: true }],
	};
}

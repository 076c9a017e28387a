// One OpenCode session's link to its sidecar: starting it from the
// session's event log, reporting finished turns, carrying out effects, and
// the `context` exchange's state (the client's `ContextClient`). The plugin
// (plugin.ts) holds one per session.

import * as path from "node:path";
import { fileURLToPath } from "node:url";
import type { PluginInput } from "@opencode-ai/plugin";
import { findBinary, missingNotice } from "../../condense-engine/client/locate.ts";
import type { Lookup } from "../../condense-engine/client/locate.ts";
import { parseEffect } from "../../condense-engine/client/protocol.ts";
import type { Effect, Json, SidecarRequest, SidecarResult } from "../../condense-engine/client/protocol.ts";
import { errorText, logError, PROTOCOL_VERSION, SHIM_VERSION, Sidecar } from "../../condense-engine/client/sidecar.ts";
import { ContextClient } from "../../condense-engine/client/context.ts";
import { HELLO_TIMEOUT_MS, REQUEST_TIMEOUT_MS } from "../../condense-engine/client/constants.ts";
import { complete } from "./llm.ts";
import type { ProviderEndpoint } from "./llm.ts";
import { buildBranch, EventLog, knownCount, storageDir } from "./log.ts";
import type { LoggedEntry } from "./log.ts";
import { contextTokens, isCompaction, isCompactionSummary, toPi } from "./messages.ts";
import type { OcMessage } from "./messages.ts";
import { ask, asJson, debug, sentAhead } from "./requests.ts";
import type { Sent } from "./requests.ts";

/** pi's `/pruner status` as a tool (an OpenCode command is a prompt for the model, no display). */
export const STATUS_TOOL = "context_prune_status";

export type Client = PluginInput["client"];

/** What a session's link asks of the plugin it belongs to. */
export interface LinkHost {
	readonly client: Client;
	readonly config: { [key: string]: Json };
	readonly endpoints: ReadonlyMap<string, ProviderEndpoint>;
	history(sessionID: string): Promise<OcMessage[] | undefined>;
	contextWindow(providerID: string, modelID: string): Promise<number>;
	notify(message: string, variant: "info" | "success" | "warning" | "error"): void;
	toast(message: string, variant: "info" | "success" | "warning" | "error"): void;
}

/** The sidecar lookup (locate.ts): from this plugin's directory, so its npm install finds the platform package. */
function sidecarLookup(): Lookup {
	let here: string | undefined;
	try {
		here = path.dirname(fileURLToPath(import.meta.url));
	} catch {
		here = undefined;
	}
	return { fromDir: here };
}

/** One OpenCode session's sidecar. */
export class SessionLink {
	readonly log: EventLog;
	/** Assistant messages already reported (`turn.end`) or in the branch at start. */
	readonly reported = new Set<string>();
	private sidecar: Sidecar | undefined;
	private ready: Promise<boolean> | undefined;
	failed = false;
	/** The OpenCode message new entries follow. */
	anchor: string | null = null;
	/** The session model, for `llm.complete`'s `"default"`. */
	model: { providerID: string; modelID: string } | undefined;
	/** What the sidecar's copy holds and the render last applied (the client's context.ts). */
	readonly context = new ContextClient();
	/** The OpenCode messages the last `context` carried. */
	sent = new Set<string>();
	/** The next transform is OpenCode's compaction summarizing the history, not a call of the agent's. */
	compacting = false;
	/** The compaction the sidecar's branch was built after (the message starting OpenCode's list). */
	compaction: string | undefined;

	constructor(
		readonly sessionID: string,
		private readonly plugin: LinkHost,
	) {
		this.log = new EventLog(storageDir(), sessionID);
	}

	/** `/pruner <args>`'s answer as text (its notices), for a tool's result. */
	async commandText(args: string): Promise<string> {
		const sidecar = this.failed ? undefined : await this.connect([]);
		if (!sidecar) throw new Error(`${STATUS_TOOL} is unavailable: the condense sidecar is not running for this session`);
		const res = await ask(sidecar, "command", { args, utcOffsetMinutes: -new Date().getTimezoneOffset() }, REQUEST_TIMEOUT_MS);
		const texts: string[] = [];
		for (const raw of Array.isArray(res.effects) ? res.effects : []) {
			const e = parseEffect(raw);
			if (e?.kind === "notify") texts.push(e.text);
		}
		return texts.join("\n");
	}

	/** The sidecar, started and handed the session on first use; `undefined` once failed. */
	async connect(messages: readonly OcMessage[]): Promise<Sidecar | undefined> {
		if (this.failed) return undefined;
		this.ready ??= this.start(messages);
		return (await this.ready) && this.sidecar?.alive ? this.sidecar : undefined;
	}

	private async start(messages: readonly OcMessage[]): Promise<boolean> {
		const lookup = sidecarLookup();
		const found = findBinary(lookup);
		const bin = found.path;
		if (!bin) {
			this.fail(missingNotice(lookup, found));
			return false;
		}
		const sidecar = new Sidecar(bin, {
			onRequest: (request) => this.onRequest(request),
			onNotification: (notice) => {
				if (notice.method === "ui.effects") this.carryOut(notice.params.effects, true);
			},
			onFailure: (reason) => this.fail(reason),
		});
		this.sidecar = sidecar;
		try {
			await ask(sidecar, "hello", { protocol: PROTOCOL_VERSION, shim: SHIM_VERSION, host: { name: "opencode" } }, HELLO_TIMEOUT_MS);
			// The branch is what the sidecar was told before: the messages up
			// to the last one reported (a previous process marked them in the
			// log). Later ones are reported as turns, so a reply that finished
			// after the last LLM call of that process still flushes.
			const logged = this.log.read();
			for (const e of logged) if (e.type === "reported" && typeof e.after === "string") this.reported.add(e.after);
			const known = messages.slice(0, knownCount(messages, logged));
			this.anchor = known.at(-1)?.info.id ?? null;
			// A session met for the first time: its finished turns are the
			// branch, marked so a later process starts from them too.
			const adopted = logged.length === 0 ? known.filter((m) => m.info.role === "assistant").map((m) => m.info.id) : [];
			for (const id of adopted) this.reported.add(id);
			const lastAdopted = adopted.at(-1);
			if (lastAdopted !== undefined) this.log.append([{ type: "reported", after: lastAdopted }]);
			await this.startSession(sidecar, known, logged, "startup");
			return true;
		} catch (err) {
			this.fail(`the sidecar did not start: ${errorText(err)}`);
			return false;
		}
	}

	/**
	 * `session.start` with the branch `known` and the log make (log.ts).
	 * After a compaction OpenCode's list lacks what it summarized; the branch
	 * holds it as pi's does.
	 */
	private async startSession(sidecar: Sidecar, known: readonly OcMessage[], logged: readonly LoggedEntry[], reason: string): Promise<void> {
		const first = known[0];
		this.compaction = first && isCompaction(first) ? first.info.id : undefined;
		const history = this.compaction ? await this.plugin.history(this.sessionID) : undefined;
		const res = await ask(
			sidecar,
			"session.start",
			{
				reason,
				settings: { contextPrune: this.plugin.config },
				model: null,
				// OpenCode's session lives in its database: no file to hold.
				sessionFile: null,
				sessionDir: this.log.dir,
				sessionId: this.sessionID,
				branch: asJson(buildBranch(known, logged, history)),
				tree: false,
			},
			REQUEST_TIMEOUT_MS,
		);
		this.carryOut(res.effects, false);
	}

	/**
	 * The first call after a compaction: OpenCode's list was replaced (its
	 * summary first, then the tail of recent turns it kept, which it moved
	 * after the summary), so the sidecar starts again from the log, as a
	 * resumed process would, and shows the tail's summaries where a resume
	 * does. A compaction's own call and the list it summarizes never start one.
	 */
	async afterCompaction(sidecar: Sidecar, messages: readonly OcMessage[]): Promise<void> {
		if (!this.compactedSince(messages)) return;
		const logged = this.log.read();
		await this.startSession(sidecar, messages.slice(0, knownCount(messages, logged)), logged, "compact");
		this.context.reset();
		this.sent = new Set();
	}

	/** Whether `messages` start with an OpenCode compaction the sidecar's branch was not built after. */
	compactedSince(messages: readonly OcMessage[]): boolean {
		const first = messages[0];
		return !!first && isCompaction(first) && first.info.id !== this.compaction;
	}

	private async onRequest(request: SidecarRequest): Promise<SidecarResult> {
		return complete(this.plugin.client, request.params, this.model, (id) => this.plugin.endpoints.get(id));
	}

	fail(reason: string): void {
		if (this.failed) return;
		this.failed = true;
		this.sidecar?.close();
		logError(`condense: ${reason}; messages pass unchanged for session ${this.sessionID}`);
		debug(() => `failed: ${reason}`);
		this.plugin.toast(`condense is off for this session: ${reason}`, "warning");
	}

	/** Carries out an answer's effects: entries to the log, notices as toasts. */
	carryOut(effects: unknown, uiOnly: boolean): void {
		if (!Array.isArray(effects)) return;
		const entries: Parameters<EventLog["append"]>[0] = [];
		for (const raw of effects) {
			let e: Effect | undefined;
			try {
				e = parseEffect(raw);
			} catch (err) {
				this.fail(`the sidecar sent a malformed effect: ${errorText(err)}`);
				return;
			}
			if (!e) continue;
			if (e.kind === "notify") this.plugin.notify(e.text, e.level);
			if (uiOnly) continue;
			if (e.kind === "append") entries.push({ type: "custom", customType: e.customType, data: e.data, after: this.anchor });
			else if (e.kind === "appendMessage") {
				entries.push({
					type: "custom_message",
					customType: e.customType,
					content: e.content,
					display: e.display,
					details: e.details,
					after: this.anchor,
				});
			}
		}
		try {
			this.log.append(entries);
		} catch (err) {
			this.fail(`cannot write ${this.log.file}: ${errorText(err)}`);
		}
	}

	/**
	 * Sends `message.end` and `turn.end` for each finished assistant message
	 * not reported yet, without waiting for the answers: the sidecar handles
	 * them in order, and the keys take each turn as the sidecar's copy does.
	 * [`settle`] carries out the answers.
	 */
	async sendTurns(sidecar: Sidecar, messages: readonly OcMessage[]): Promise<Sent[]> {
		const sent: Sent[] = [];
		// pi's turnIndex: the assistant message's place in its run (from the user message before it).
		let runTurn = 0;
		let previous: string | null = null;
		for (const m of messages) {
			const info = m.info;
			const before = previous;
			previous = info.id;
			if (info.role === "user") runTurn = 0;
			if (info.role !== "assistant") continue;
			if (isCompactionSummary(m)) {
				// OpenCode's summary of what it compacted: pi's compaction
				// entry, no turn of the agent's (it is no reply to flush at,
				// and what it summarized left the list it is in).
				if (!this.reported.has(info.id) && info.time.completed) {
					this.reported.add(info.id);
					this.log.append([{ type: "reported", after: info.id }]);
				}
				continue;
			}
			const turnIndex = runTurn++;
			if (this.reported.has(info.id) || !info.time.completed) continue;
			this.reported.add(info.id);
			if (info.providerID && info.modelID) this.model = { providerID: info.providerID, modelID: info.modelID };
			const converted = toPi(m);
			const message = asJson(converted.message);
			const toolResults = asJson(converted.results.map((r) => r.message));
			const now = info.time.completed;
			const tokens = contextTokens(info);
			const contextWindow = info.providerID && info.modelID ? await this.plugin.contextWindow(info.providerID, info.modelID) : 0;
			// A reply's flush (at `message.end`) goes before the reply, where
			// the live sidecar shows it and pi's session file has it: the
			// reply joins the sidecar's copy only at `turn.end`.
			sent.push({
				answer: sentAhead(ask(sidecar, "message.end", { message, now }, REQUEST_TIMEOUT_MS)),
				apply: (answer) => {
					this.anchor = before;
					this.carryOut(answer.effects, false);
					return true;
				},
			});
			sent.push({
				answer: sentAhead(ask(sidecar, "turn.end", { turnIndex, message, toolResults, usage: { tokens, contextWindow }, now }, REQUEST_TIMEOUT_MS)),
				apply: (answer) => {
					this.anchor = info.id;
					this.carryOut(answer.effects, false);
					this.log.append([{ type: "reported", after: info.id }]);
					// A sidecar that did not append the turn (`synced`) has a
					// copy the keys no longer describe.
					if (answer.synced === true) return true;
					this.context.forgetCopy();
					return false;
				},
			});
			// The sidecar appends the turn to its copy: so do its keys. A
			// message the last `context` already carried may not be appended
			// again: then the next `context` sends everything.
			if (this.sent.has(info.id)) this.context.forgetCopy();
			else this.context.keys?.append([message, ...toolResults], 0);
		}
		return sent;
	}
}

// pi's link to its sidecar: starting it, the handshake, requests, what a
// failure tells the user, and the state every handler shares (the context
// exchange, the requests in flight). One per extension load; a failed
// sidecar is replaced at the next session start.

import type { ExtensionAPI, ExtensionContext } from "@mariozechner/pi-coding-agent";
import { applyUiEffects } from "./effects";
import { complete, LlmCalls } from "./llm";
import type { CommandInfo, ShimMethod, ShimRequests, SidecarNotice, SidecarRequest } from "../../condense-engine/client/protocol.ts";
import { findBinary, missingNotice } from "../../condense-engine/client/locate.ts";
import type { Lookup } from "../../condense-engine/client/locate.ts";
import { CodedError, errorText, logError, PROTOCOL_VERSION, SHIM_VERSION, Sidecar } from "../../condense-engine/client/sidecar.ts";
import { ContextClient } from "../../condense-engine/client/context.ts";
import { HELLO_TIMEOUT_MS, REQUEST_TIMEOUT_MS } from "../../condense-engine/client/constants.ts";

/** The running pi's version, for `hello` (best effort). */
async function piVersion(): Promise<string> {
	for (const spec of ["@earendil-works/pi-coding-agent", "@mariozechner/pi-coding-agent"]) {
		try {
			const mod: any = await import(spec);
			const v = mod?.VERSION ?? mod?.default?.VERSION;
			if (typeof v === "string") return v;
		} catch {
			// try the next name
		}
	}
	return "unknown";
}

export class SidecarLink {
	/** The sidecar events are forwarded to (after a successful handshake). */
	sidecar: Sidecar | undefined;
	/** A sidecar between spawn and handshake. */
	private handshaking: Sidecar | undefined;
	private starting: Promise<Sidecar | undefined> | undefined;
	/** What the sidecar's copy holds and the render last applied. */
	readonly context = new ContextClient();
	/** Bumped by every `context` request, to detect one racing a `turn.end`. */
	contextEpoch = 0;
	/** The flush a run's start may run: the run's first `context` waits for it. */
	agentStart: Promise<unknown> | undefined;
	/** The flush pi's compaction may run: the next `context` waits for it too. */
	compacting: Promise<unknown> | undefined;
	/** The last ctx a handler saw, for what the sidecar asks outside a handler. */
	lastCtx: ExtensionContext | undefined;
	/** `/pruner`'s subcommands, as the sidecar's `hello` lists them (its completions). */
	prunerSubcommands: CommandInfo[] = [];
	/** Forwarded event requests still waiting for their answer (flushes among them). */
	readonly inflight = new Set<Promise<unknown>>();
	readonly llm = new LlmCalls();
	private versionOfPi: Promise<string> | undefined;
	private reportedMissing = false;
	private readonly loggedErrors = new Set<string>();

	constructor(
		private readonly pi: ExtensionAPI,
		private readonly extDir: string | undefined,
		readonly debug: boolean,
	) {}

	/** The sidecar, when one is up. */
	get live(): Sidecar | undefined {
		return this.sidecar?.alive ? this.sidecar : undefined;
	}

	logOnce(key: string, text: string) {
		if (this.loggedErrors.has(key)) return;
		this.loggedErrors.add(key);
		logError(text);
	}

	tellUser(text: string) {
		logError(text);
		try {
			const ctx: any = this.lastCtx;
			if (ctx?.hasUI) ctx.ui.notify(text, "warning");
		} catch {
			// a stale ctx: the console line is all we can do
		}
	}

	/** Wraps a handler: remembers the ctx and never lets an exception reach pi. */
	guard<E>(name: string, fn: (event: E, ctx: ExtensionContext) => Promise<any>) {
		return async (event: E, ctx: ExtensionContext) => {
			if (ctx) this.lastCtx = ctx;
			try {
				return await fn(event, ctx);
			} catch (err) {
				this.logOnce(`handler:${name}`, `condense: ${name} handler failed: ${errorText(err)}`);
				return undefined;
			}
		};
	}

	/** The live sidecar, started (and shaken hands with) if there is none. */
	async ensure(): Promise<Sidecar | undefined> {
		if (this.sidecar?.alive) return this.sidecar;
		if (!this.starting) {
			this.starting = this.start().finally(() => {
				this.starting = undefined;
			});
		}
		return this.starting;
	}

	/** A request to the live sidecar; `undefined` when there is none or it failed. */
	async call<M extends ShimMethod>(
		method: M,
		params: ShimRequests[M]["params"],
		timeoutMs = REQUEST_TIMEOUT_MS,
	): Promise<ShimRequests[M]["result"] | undefined> {
		const s = this.sidecar;
		if (!s?.alive) return undefined;
		const request = s.request(method, params, timeoutMs);
		if (method !== "context") {
			this.inflight.add(request);
			const done = () => this.inflight.delete(request);
			request.then(done, done);
		}
		try {
			return await request;
		} catch (err) {
			const code = err instanceof CodedError ? err.code : "";
			// Failures and deadlines were reported by onFailure; an error answer is the sidecar's own.
			if (code !== "failed" && code !== "closed" && code !== "timeout") {
				this.logOnce(`answer:${method}:${code}`, `condense: ${errorText(err)}`);
			}
			return undefined;
		}
	}

	/** Takes the sidecar out of service (shutdown): its failure is no news. */
	retire(): Sidecar | undefined {
		const s = this.sidecar;
		this.sidecar = undefined;
		this.context.forgetCopy();
		this.llm.cancelAll();
		return s;
	}

	/** A sidecar broke (reported once per sidecar by Sidecar.fail). */
	private onFailure(s: Sidecar, reason: string) {
		this.llm.cancelAll();
		if (this.sidecar !== s && this.handshaking !== s) return; // retired on purpose (shutdown): nothing to report
		if (this.sidecar === s) this.sidecar = undefined;
		if (this.handshaking === s) this.handshaking = undefined;
		this.context.forgetCopy();
		this.tellUser(`condense: ${reason}. Context pruning is off until the next session start; pi continues unpruned.`);
	}

	private hooksFor(get: () => Sidecar | undefined) {
		return {
			onRequest: (request: SidecarRequest, id: string | number) => {
				const controller = this.llm.start(id);
				return complete(this.lastCtx, request.params, controller.signal, (kind, delta) =>
					get()?.notify("llm.event", { requestId: String(id), kind, delta }),
				)
					.catch((err) => {
						if (this.debug) logError(`condense: llm.complete ${String(id)} failed: ${errorText(err)}`);
						throw err;
					})
					.finally(() => this.llm.finish(id));
			},
			onNotification: (notice: SidecarNotice) => {
				switch (notice.method) {
					case "llm.cancel":
						this.llm.cancel(notice.params.requestId);
						return;
					case "ui.effects":
						applyUiEffects(notice.params.effects, this.lastCtx, this.pi);
						return;
					case "protocol.error":
						// The sidecar discarded one of our lines: whatever it was, the two
						// sides are out of step now.
						get()?.fail(`the sidecar rejected a message: ${JSON.stringify(notice.params.message)}`);
						return;
				}
			},
			onFailure: (reason: string) => {
				const s = get();
				if (s) this.onFailure(s, reason);
			},
		};
	}

	private async start(): Promise<Sidecar | undefined> {
		const lookup: Lookup = { fromDir: this.extDir };
		const found = findBinary(lookup);
		if (!found.path) {
			if (!this.reportedMissing) {
				this.reportedMissing = true;
				this.tellUser(`condense: ${missingNotice(lookup, found)}. pi continues without context pruning.`);
			}
			return undefined;
		}
		let s: Sidecar | undefined;
		s = new Sidecar(found.path, this.hooksFor(() => s));
		this.handshaking = s;
		try {
			this.versionOfPi ??= piVersion();
			const hello = await s.request(
				"hello",
				{ protocol: PROTOCOL_VERSION, shim: SHIM_VERSION, host: { name: "pi", version: await this.versionOfPi } },
				HELLO_TIMEOUT_MS,
			);
			if (hello.protocol !== PROTOCOL_VERSION) {
				s.fail(`the sidecar speaks protocol ${JSON.stringify(hello.protocol)}, the shim ${PROTOCOL_VERSION}`);
				return undefined;
			}
			this.prunerSubcommands = hello.commands ?? [];
		} catch (err) {
			if (s.alive) s.fail(`the sidecar refused the handshake: ${errorText(err)}`);
			return undefined;
		} finally {
			if (this.handshaking === s) this.handshaking = undefined;
		}
		if (!s.alive) return undefined;
		this.sidecar = s;
		this.context.forgetCopy();
		return s;
	}
}

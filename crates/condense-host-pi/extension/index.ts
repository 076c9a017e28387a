// condense for pi: a thin shim. The condense-pi sidecar (Rust) owns all state
// and logic; this extension turns pi's events into the sidecar requests of
// docs/protocol.md and carries out what the answers ask for.
//
// Failing open is the rule: if the sidecar is missing, exits, answers
// garbage or misses a deadline, pi carries on with its messages unchanged,
// the user is told once, and a new sidecar starts at the next session start.

import type { ExtensionAPI, ExtensionContext } from "@mariozechner/pi-coding-agent";
import * as path from "node:path";
import { PerformanceObserver } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { applyEffects, applyEffectsInteractive, applyUiEffects, clearWidgetTimers } from "./effects";
import { complete, LlmCalls, resolveModel } from "./llm";
import { noteSettingsBlock, summarizerPrice } from "../../condense-engine/client/prices.ts";
import type { CommandInfo, ContextParams, Json, QueryParams, ShimMethod, ShimRequests, SidecarNotice, SidecarRequest } from "../../condense-engine/client/protocol.ts";
import { readSettings } from "./settings";
import { loadTui, renderSummary } from "./render";
import { findBinary, missingNotice } from "../../condense-engine/client/locate.ts";
import type { Lookup } from "../../condense-engine/client/locate.ts";
import { CodedError, errorText, logError, PROTOCOL_VERSION, SHIM_VERSION, Sidecar } from "../../condense-engine/client/sidecar.ts";
import { withoutSystemMessages } from "../../condense-engine/client/sync.ts";
import { ContextClient } from "../../condense-engine/client/context.ts";
import { TurnEnds } from "./turns";
import { CONTEXT_TIMEOUT_MS, HELLO_TIMEOUT_MS, QUERY_TOOL, REQUEST_TIMEOUT_MS, SUMMARY_TYPE } from "../../condense-engine/client/constants.ts";

/**
 * How long `context` waits for the `turn_end` handler of the tool turn it
 * sends to start (pi 0.73/0.74 queue it behind earlier handlers; turns.ts).
 */
const TURN_END_START_WAIT_MS = 2_000;
/** How long `session_shutdown` waits for the sidecar's goodbye. */
const SHUTDOWN_TIMEOUT_MS = 2_000;
/** How long `session_shutdown` lets unfinished work (a flush) finish when a user is waiting. */
const SHUTDOWN_GRACE_UI_MS = 2_000;


function extensionDir(): string | undefined {
	try {
		return path.dirname(fileURLToPath(import.meta.url));
	} catch {
		// not an ES module here
	}
	try {
		// @ts-ignore: CommonJS under some loaders
		return typeof __dirname === "string" ? __dirname : undefined;
	} catch {
		return undefined;
	}
}

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

function safe<T>(f: () => T): T | undefined {
	try {
		return f();
	} catch {
		return undefined;
	}
}

export default function condense(pi: ExtensionAPI) {
	const extDir = extensionDir();
	const timing = process.env.CONDENSE_PI_TIMING === "1";
	// Garbage collections are logged too: V8 collects the deep copy pi makes
	// for every LLM call while a `context` round trip waits (the bench tells
	// that time apart from condense's own).
	if (timing) {
		new PerformanceObserver((list) => {
			for (const e of list.getEntries()) {
				process.stderr.write(`condense: gc at ${e.startTime.toFixed(2)} ${e.duration.toFixed(2)} ms\n`);
			}
		}).observe({ entryTypes: ["gc"] });
	}
	const debug = process.env.CONDENSE_PI_DEBUG === "1";
	const llm = new LlmCalls();
	/** The sidecar events are forwarded to (after a successful handshake). */
	let sidecar: Sidecar | undefined;
	/** A sidecar between spawn and handshake. */
	let handshaking: Sidecar | undefined;
	let starting: Promise<Sidecar | undefined> | undefined;
	/** What the sidecar's copy holds and the render last applied (the client's context.ts). */
	const context = new ContextClient();
	/** Bumped by every `context` request, to detect one racing a `turn.end`. */
	let contextEpoch = 0;
	/** The `turn_end` handlers started: `context` waits for its turn's. */
	const turnEnds = new TurnEnds();
	// The flush a run's start may run (cache-aware policy): the run's first
	// `context` waits for it, as for its turn's `turn_end`.
	let agentStart: Promise<unknown> | undefined;
	// The flush pi's compaction may run: the next `context` (an overflow's
	// retried call comes at once) waits for it too.
	let compacting: Promise<unknown> | undefined;
	let lastCtx: ExtensionContext | undefined;
	let versionOfPi: Promise<string> | undefined;
	let reportedMissing = false;
	/** `/pruner`'s subcommands, as the sidecar's `hello` lists them (its completions). */
	let prunerSubcommands: CommandInfo[] = [];
	const loggedErrors = new Set<string>();
	/** Forwarded event requests still waiting for their answer (flushes among them). */
	const inflight = new Set<Promise<unknown>>();

	function logOnce(key: string, text: string) {
		if (loggedErrors.has(key)) return;
		loggedErrors.add(key);
		logError(text);
	}

	function tellUser(text: string) {
		logError(text);
		try {
			const ctx: any = lastCtx;
			if (ctx?.hasUI) ctx.ui.notify(text, "warning");
		} catch {
			// a stale ctx: the console line is all we can do
		}
	}

	/** A sidecar broke (reported once per sidecar by Sidecar.fail). */
	function onFailure(s: Sidecar, reason: string) {
		llm.cancelAll();
		if (sidecar !== s && handshaking !== s) return; // retired on purpose (shutdown): nothing to report
		if (sidecar === s) sidecar = undefined;
		if (handshaking === s) handshaking = undefined;
		context.forgetCopy();
		tellUser(`condense: ${reason}. Context pruning is off until the next session start; pi continues unpruned.`);
	}

	function hooksFor(get: () => Sidecar | undefined) {
		return {
			onRequest(request: SidecarRequest, id: string | number) {
				const controller = llm.start(id);
				return complete(lastCtx, request.params, controller.signal, (kind, delta) =>
					get()?.notify("llm.event", { requestId: String(id), kind, delta }),
				)
					.catch((err) => {
						if (debug) logError(`condense: llm.complete ${String(id)} failed: ${errorText(err)}`);
						throw err;
					})
					.finally(() => llm.finish(id));
			},
			onNotification(notice: SidecarNotice) {
				switch (notice.method) {
					case "llm.cancel":
						llm.cancel(notice.params.requestId);
						return;
					case "ui.effects":
						applyUiEffects(notice.params.effects, lastCtx, pi);
						return;
					case "protocol.error":
						// The sidecar discarded one of our lines: whatever it was, the two
						// sides are out of step now.
						get()?.fail(`the sidecar rejected a message: ${JSON.stringify(notice.params.message)}`);
						return;
				}
			},
			onFailure(reason: string) {
				const s = get();
				if (s) onFailure(s, reason);
			},
		};
	}

	async function startSidecar(): Promise<Sidecar | undefined> {
		const lookup: Lookup = { binary: "condense-pi", envVar: "CONDENSE_PI_BIN", crate: "condense-host-pi", fromDir: extDir };
		const found = findBinary(lookup);
		if (!found.path) {
			if (!reportedMissing) {
				reportedMissing = true;
				tellUser(`condense: ${missingNotice(lookup, found)}. pi continues without context pruning.`);
			}
			return undefined;
		}
		let s: Sidecar | undefined;
		s = new Sidecar(found.path, hooksFor(() => s));
		handshaking = s;
		try {
			versionOfPi ??= piVersion();
			const hello = await s.request(
				"hello",
				{ protocol: PROTOCOL_VERSION, shim: SHIM_VERSION, pi: await versionOfPi },
				HELLO_TIMEOUT_MS,
			);
			if (hello.protocol !== PROTOCOL_VERSION) {
				s.fail(`the sidecar speaks protocol ${JSON.stringify(hello.protocol)}, the shim ${PROTOCOL_VERSION}`);
				return undefined;
			}
			prunerSubcommands = hello.commands ?? [];
		} catch (err) {
			if (s.alive) s.fail(`the sidecar refused the handshake: ${errorText(err)}`);
			return undefined;
		} finally {
			if (handshaking === s) handshaking = undefined;
		}
		if (!s.alive) return undefined;
		sidecar = s;
		context.forgetCopy();
		return s;
	}

	async function ensureSidecar(): Promise<Sidecar | undefined> {
		if (sidecar?.alive) return sidecar;
		if (!starting) {
			starting = startSidecar().finally(() => {
				starting = undefined;
			});
		}
		return starting;
	}

	/** A request to the live sidecar; `undefined` when there is none or it failed. */
	async function call<M extends ShimMethod>(
		method: M,
		params: ShimRequests[M]["params"],
		timeoutMs = REQUEST_TIMEOUT_MS,
	): Promise<ShimRequests[M]["result"] | undefined> {
		const s = sidecar;
		if (!s?.alive) return undefined;
		const request = s.request(method, params, timeoutMs);
		if (method !== "context") {
			inflight.add(request);
			const done = () => inflight.delete(request);
			request.then(done, done);
		}
		try {
			return await request;
		} catch (err) {
			const code = err instanceof CodedError ? err.code : "";
			// Failures and deadlines were reported by onFailure; an error answer is the sidecar's own.
			if (code !== "failed" && code !== "closed" && code !== "timeout") {
				logOnce(`answer:${method}:${code}`, `condense: ${errorText(err)}`);
			}
			return undefined;
		}
	}

	async function sendSessionStart(ctx: ExtensionContext, reason: string, tree: boolean) {
		const started = timing ? performance.now() : 0;
		const sm: any = (ctx as any).sessionManager;
		const entries = safe(() => sm.getBranch());
		const branch: Json[] = Array.isArray(entries) ? entries : [];
		// What pi will hand `context`; the sidecar holds the same list afterwards.
		// pi 1.6 keeps `system` messages in the session context but never hands
		// them to `context` handlers (the sidecar's copy leaves them out too).
		const messages = safe(() =>
			typeof sm.buildSessionContext === "function"
				? withoutSystemMessages(sm.buildSessionContext().messages)
				: undefined,
		);
		const model: any = safe(() => (ctx as any).model);
		const settings = readSettings();
		noteSettingsBlock((settings as any)?.contextPrune);
		const params: ShimRequests["session.start"]["params"] = {
			reason,
			settings,
			model: model && typeof model.provider === "string" && typeof model.id === "string" ? { provider: model.provider, id: model.id } : null,
			sessionFile: safe(() => sm.getSessionFile()) ?? null,
			sessionDir: safe(() => sm.getSessionDir()) ?? null,
			sessionId: safe(() => sm.getSessionId()) ?? null,
			// The sidecar builds the context messages from `branch`; sending
			// them too would double a line of 10 MB at 1M tokens (docs/protocol.md).
			branch,
			tree,
		};
		context.forgetCopy();
		const res = await call("session.start", params, REQUEST_TIMEOUT_MS);
		if (!res) return;
		if (Array.isArray(messages)) context.sync(0, messages);
		applyEffects(res.effects, ctx, pi);
		if (timing) {
			process.stderr.write(
				`condense: session.start ${(performance.now() - started).toFixed(2)} ms (entries ${branch.length}, messages ${
					Array.isArray(messages) ? messages.length : "none"
				})\n`,
			);
		}
	}

	/** Wraps a handler: remembers the ctx and never lets an exception reach pi. */
	function guard<E>(name: string, fn: (event: E, ctx: ExtensionContext) => Promise<any>) {
		return async (event: E, ctx: ExtensionContext) => {
			if (ctx) lastCtx = ctx;
			try {
				return await fn(event, ctx);
			} catch (err) {
				logOnce(`handler:${name}`, `condense: ${name} handler failed: ${errorText(err)}`);
				return undefined;
			}
		};
	}

	const onSessionStart = guard("session_start", async (event: any, ctx) => {
		const s = await ensureSidecar();
		if (!s) return;
		await sendSessionStart(ctx, typeof event?.reason === "string" ? event.reason : "startup", false);
	});
	pi.on("session_start", onSessionStart as any);
	// pi 0.58 reported these separately; later versions fold them into session_start.
	pi.on("session_switch" as any, onSessionStart as any);
	pi.on("session_fork" as any, onSessionStart as any);

	pi.on(
		"session_tree",
		guard("session_tree", async (_event: any, ctx) => {
			if (!sidecar?.alive) return;
			await sendSessionStart(ctx, "tree", true);
		}) as any,
	);

	const onTurnEnd = guard("turn_end", async (event: any, ctx) => {
		const s = sidecar;
		if (!s?.alive) return;
		const usage: any = safe(() => (ctx as any).getContextUsage?.());
		const message = event?.message ?? null;
		const toolResults = Array.isArray(event?.toolResults) ? event.toolResults : [];
		const epoch = contextEpoch;
		const heldKeys = context.keys?.length;
		const res = await call("turn.end", {
			turnIndex: event?.turnIndex ?? 0,
			message,
			toolResults,
			usage: {
				tokens: typeof usage?.tokens === "number" ? usage.tokens : null,
				contextWindow: typeof usage?.contextWindow === "number" ? usage.contextWindow : 0,
			},
			now: Date.now(),
		});
		if (!res) {
			// An error answer leaves the sidecar's copy unknown: resend everything next time.
			if (sidecar === s) context.forgetCopy();
			return;
		}
		// A sidecar that appended the turn to its copy says `synced`; mirror it,
		// unless a context request raced this one (then resend everything).
		if (res.synced === true && sidecar === s) {
			if (contextEpoch === epoch && context.keys && context.keys.length === heldKeys && message) {
				context.keys.append([message, ...toolResults], 0);
			} else {
				context.forgetCopy();
			}
		}
		applyEffects(res.effects, ctx, pi);
	});
	pi.on("turn_end", ((event: any, ctx: ExtensionContext) => {
		// Recorded before the handler can return early (no sidecar), so
		// `context` never waits for a turn_end that has come and gone.
		const done = onTurnEnd(event, ctx);
		turnEnds.record(event?.message, done);
		return done;
	}) as any);

	pi.on(
		"message_end",
		guard("message_end", async (event: any, ctx) => {
			if (!sidecar?.alive || event?.message?.role !== "assistant") return;
			const res = await call("message.end", { message: event.message, now: Date.now() });
			if (res) applyEffects(res.effects, ctx, pi);
		}) as any,
	);

	pi.on(
		"before_agent_start",
		guard("before_agent_start", async (_event: any, ctx) => {
			if (!sidecar?.alive) return;
			const res = await (agentStart = call("agent.start", {}));
			if (res) applyEffects(res.effects, ctx, pi);
		}) as any,
	);

	// pi compacts at a run's end, on a provider's overflow (then retries the
	// call at once) and on `/compact`, and awaits this handler after it has
	// rebuilt its list: the sidecar gets that list now, so the next call,
	// which writes its whole prompt anew, is priced as cold and may show
	// summaries of what the compaction kept.
	pi.on(
		"session_compact",
		guard("session_compact", async (_event: any, ctx) => {
			const s = sidecar;
			if (!s?.alive) return;
			const sm: any = (ctx as any).sessionManager;
			const messages = safe(() =>
				typeof sm.buildSessionContext === "function"
					? withoutSystemMessages(sm.buildSessionContext().messages)
					: undefined,
			);
			// Without the rebuilt list the sidecar cannot tell what the
			// compaction kept; the next `context` resends it as before.
			if (!Array.isArray(messages)) return;
			const keep = context.keep(messages);
			const request = call("session.compact", { keep, append: messages.slice(keep) as Json[], now: Date.now() });
			context.sync(keep, messages);
			const res = await (compacting = request);
			if (!res) {
				if (sidecar === s) context.forgetCopy();
				return;
			}
			applyEffects(res.effects, ctx, pi);
		}) as any,
	);

	pi.on(
		"agent_end",
		guard("agent_end", async (_event: any, ctx) => {
			if (!sidecar?.alive) return;
			const res = await call("agent.end", {});
			if (res) applyEffects(res.effects, ctx, pi);
		}) as any,
	);

	pi.on(
		"context",
		guard("context", async (event: any, ctx) => {
			const messages = event?.messages;
			// pi 0.73/0.74 run turn_end handlers on a queue the agent loop does not
			// wait for: let the handler of the turn this call sends start and
			// finish, so a flush at that turn's end prunes this call as on later
			// versions (a no-op there: the turn.end was answered already).
			if (sidecar?.alive && Array.isArray(messages)) {
				const wait = await turnEnds.settled(messages, TURN_END_START_WAIT_MS);
				if (wait === "timeout" && debug) {
					logError(`condense: no turn_end within ${TURN_END_START_WAIT_MS} ms of the context call after its turn; carrying on`);
				}
			}
			if (agentStart) await agentStart.catch(() => undefined);
			if (compacting) await compacting.catch(() => undefined);
			const s = sidecar;
			if (!s?.alive || !Array.isArray(messages)) return undefined;
			const started = timing ? performance.now() : 0;
			const base = context.base(s);
			contextEpoch++;
			const request = (from: number, withBase: boolean) => {
				const params: ContextParams = { keep: from, append: messages.slice(from), now: Date.now() };
				const model: any = safe(() => (ctx as any).model);
				if (model && typeof model.provider === "string" && typeof model.id === "string") {
					params.model = `${model.provider}/${model.id}`;
				}
				const summarizerPriceRatio = safe(() => summarizerPrice(ctx, resolveModel));
				if (summarizerPriceRatio !== undefined) params.summarizerPrice = summarizerPriceRatio;
				if (withBase && base !== undefined) params.base = base;
				if (timing) params.timing = true;
				return call("context", params, CONTEXT_TIMEOUT_MS);
			};
			// Sent on the cheap prefix (roles, timestamps, ids); the contents,
			// the costly half of the keys, are checked while the sidecar renders.
			const header = context.headerPrefix(messages);
			let pending = request(header, true);
			const keyed = timing ? performance.now() : 0;
			const keep = context.contentPrefix(messages, header);
			let stale: Promise<any> | undefined;
			if (keep < header) {
				// A message changed in place (another extension's handler edits
				// what it is given): that answer rendered a stale copy. Resend from
				// the change; the sidecar answers requests in order.
				stale = pending;
				pending = request(keep, false);
			}
			context.sync(keep, messages);
			const checked = timing ? performance.now() : 0;
			const res = await pending;
			const answered = timing ? performance.now() : 0;
			if (!res) {
				// An error answer leaves the sidecar's copy unknown: resend everything next time.
				if (sidecar === s) context.reset();
				return undefined;
			}
			// The stale answer's render is dropped, not its effects: a switch
			// the sidecar recorded then must reach the session file.
			const staleRes = stale ? await stale.catch(() => undefined) : undefined;
			if (staleRes) applyEffects(staleRes.effects, ctx, pi);
			applyEffects(res.effects, ctx, pi);
			const applied = context.apply(messages, base, res, s);
			if (applied.kind === "malformed") {
				s.fail("the sidecar answered context with malformed render steps");
				return undefined;
			}
			const out = applied.kind === "rendered" ? applied.messages : undefined;
			const stepCount = applied.kind === "rendered" ? applied.steps : 0;
			if (timing) {
				const done = performance.now();
				const ms = done - started;
				const sidecarMs = typeof res.micros === "number" ? (res.micros / 1000).toFixed(2) : "?";
				process.stderr.write(
					`condense: context ${ms.toFixed(2)} ms (messages ${messages.length}, keep ${keep}, append ${messages.length - keep}, ${
						out ? `steps ${stepCount} (${res.steps?.length ?? 0} sent) -> ${out.length} messages` : "unchanged"
					}; keys ${(keyed - started).toFixed(2)} ms, round trip ${(answered - keyed).toFixed(2)} ms (contents checked in ${(checked - keyed).toFixed(2)} ms, sidecar ${sidecarMs} ms, parse ${s.lastParseMs.toFixed(2)} ms), apply ${(done - answered).toFixed(2)} ms) at ${started.toFixed(2)}\n`,
				);
			}
			return out ? { messages: out } : undefined;
		}) as any,
	);

	pi.on(
		"session_shutdown",
		guard("session_shutdown", async (_event: any, ctx) => {
			// Some pi versions (0.74) run extension handlers on a queue print mode
			// does not wait for, so a flush in message_end may still be running:
			// without a user waiting, let it finish (its own deadline bounds it).
			if (inflight.size > 0) {
				const interactive = safe(() => (ctx as any)?.hasUI === true) ?? false;
				let timer: ReturnType<typeof setTimeout> | undefined;
				await Promise.race([
					Promise.allSettled([...inflight]),
					new Promise((resolve) => {
						timer = setTimeout(resolve, interactive ? SHUTDOWN_GRACE_UI_MS : REQUEST_TIMEOUT_MS);
					}),
				]);
				if (timer) clearTimeout(timer);
			}
			const s = sidecar;
			sidecar = undefined;
			context.forgetCopy();
			llm.cancelAll();
			clearWidgetTimers();
			if (!s) return;
			try {
				await s.request("shutdown", {}, SHUTDOWN_TIMEOUT_MS);
			} catch {
				// it is going away either way
			}
			s.close();
		}) as any,
	);

	pi.registerTool({
		name: QUERY_TOOL,
		label: "Query Original Tool History",
		description:
			"Retrieve the original, full output of tool calls whose results were replaced by a pruner summary stub. " +
			'Pass the short refs shown in the stubs or summaries, e.g. {"toolCallIds": ["t3", "t4"]}; raw tool call ids also work. ' +
			"A reused raw id returns every occurrence.",
		promptSnippet: "Retrieve original pruned tool outputs by short ref",
		promptGuidelines: [
			`When a tool result says it was summarized by the pruner and you need its exact content, call ${QUERY_TOOL} with its ref instead of re-running the tool.`,
		],
		parameters: {
			type: "object",
			properties: {
				toolCallIds: {
					type: "array",
					items: { type: "string" },
					description: 'Short refs such as "t12" (from pruner stubs and summaries) or raw tool call ids.',
				},
				offset: {
					type: "integer",
					minimum: 1,
					description: "Line number to start each output from (1-indexed); a cut output says which offset continues it.",
				},
				limit: {
					type: "integer",
					minimum: 1,
					description: "Maximum number of lines to show of each output (at most 2000).",
				},
			},
			required: ["toolCallIds"],
		} as any,
		async execute(_toolCallId: string, params: any, _signal: any, _onUpdate: any, ctx: ExtensionContext) {
			if (ctx) lastCtx = ctx;
			const s = sidecar;
			if (!s?.alive) throw new Error(`${QUERY_TOOL} is unavailable: the condense sidecar is not running`);
			const ids: string[] = Array.isArray(params?.toolCallIds) ? params.toolCallIds.map((x: unknown) => String(x)) : [];
			let res: ShimRequests["query"]["result"];
			try {
				const query: QueryParams = { toolCallIds: ids };
				for (const key of ["offset", "limit"] as const) {
					const n = params?.[key];
					if (Number.isInteger(n) && n > 0) query[key] = n;
				}
				res = await s.request("query", query, REQUEST_TIMEOUT_MS);
			} catch (err) {
				throw new Error(`${QUERY_TOOL} failed: ${errorText(err)}`);
			}
			return {
				content: [{ type: "text", text: res.text }],
				details: res.details ?? {},
			};
		},
	} as any);

	pi.registerCommand("pruner", {
		description: "condense context pruning: status, settings, manual flush (/pruner help)",
		getArgumentCompletions(prefix: string) {
			const p = (prefix ?? "").trimStart();
			if (p.includes(" ")) return null;
			const items = prunerSubcommands.filter(({ name }) => name.startsWith(p)).map(({ name, description }) => ({
				value: name,
				label: name,
				description,
			}));
			return items.length > 0 ? items : null;
		},
		handler: async (args: string, ctx: any) => {
			if (ctx) lastCtx = ctx;
			try {
				if (!sidecar?.alive) {
					const text = "condense: the sidecar is not running; /pruner is unavailable until the next session start";
					if (ctx?.hasUI) ctx.ui.notify(text, "warning");
					else logError(text);
					return;
				}
				// A dialog's answer comes back as another command (docs/protocol.md).
				const run = async (text: string): Promise<void> => {
					const res = await call("command", { args: text, utcOffsetMinutes: -new Date().getTimezoneOffset() });
					if (res) await applyEffectsInteractive(res.effects, ctx, pi, run);
				};
				await run(typeof args === "string" ? args : "");
			} catch (err) {
				logOnce("command", `condense: /pruner failed: ${errorText(err)}`);
			}
		},
	} as any);

	const registerRenderer = (pi as any).registerMessageRenderer;
	if (typeof registerRenderer === "function") {
		loadTui();
		try {
			registerRenderer.call(pi, SUMMARY_TYPE, renderSummary);
		} catch (err) {
			logOnce("renderer", `condense: cannot register the summary renderer: ${errorText(err)}`);
		}
	}
}

// condense for pi: a thin shim. The sidecar (`condense sidecar`, Rust) owns all state
// and logic; this extension turns pi's events into the sidecar requests of
// docs/protocol.md and carries out what the answers ask for. This file wires
// pi's events; `link.ts` holds the sidecar, `context_hook.ts` the handler
// run before every LLM call, `tools.ts` the query tool and `/pruner`.
//
// Failing open is the rule: if the sidecar is missing, exits, answers
// garbage or misses a deadline, pi carries on with its messages unchanged,
// the user is told once, and a new sidecar starts at the next session start.

import type { ExtensionAPI, ExtensionContext } from "@mariozechner/pi-coding-agent";
import * as path from "node:path";
import { PerformanceObserver } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { contextHandler } from "./context_hook";
import { compactOf, noteRunStart } from "./compact";
import { applyEffects, clearWidgetTimers } from "./effects";
import { SidecarLink } from "./link";
import { loadTui, renderSummary } from "./render";
import { agentDir, readSettings } from "./settings";
import { registerPrunerCommand, registerQueryTool } from "./tools";
import { TurnEnds } from "./turns";
import { noteSettingsBlock } from "../../condense-engine/client/prices.ts";
import type { Json, ShimRequests } from "../../condense-engine/client/protocol.ts";
import { errorText } from "../../condense-engine/client/sidecar.ts";
import { withoutSystemMessages } from "../../condense-engine/client/sync.ts";
import { REQUEST_TIMEOUT_MS, SUMMARY_TYPE } from "../../condense-engine/client/constants.ts";

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

function safe<T>(f: () => T): T | undefined {
	try {
		return f();
	} catch {
		return undefined;
	}
}

/** The list pi will hand `context`, from the session (pi 1.6 keeps `system` messages out of it). */
function contextMessages(ctx: ExtensionContext): unknown[] | undefined {
	const sm: any = (ctx as any).sessionManager;
	return safe(() =>
		typeof sm.buildSessionContext === "function" ? withoutSystemMessages(sm.buildSessionContext().messages) : undefined,
	);
}

export default function condense(pi: ExtensionAPI) {
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
	const link = new SidecarLink(pi, extensionDir(), process.env.CONDENSE_PI_DEBUG === "1");
	const context = link.context;
	/** The `turn_end` handlers started: `context` waits for its turn's. */
	const turnEnds = new TurnEnds();

	async function sendSessionStart(ctx: ExtensionContext, reason: string, tree: boolean) {
		const started = timing ? performance.now() : 0;
		const sm: any = (ctx as any).sessionManager;
		const entries = safe(() => sm.getBranch());
		const branch: Json[] = Array.isArray(entries) ? entries : [];
		// What pi will hand `context`; the sidecar holds the same list afterwards.
		const messages = contextMessages(ctx);
		const model: any = safe(() => (ctx as any).model);
		const settings = readSettings();
		noteSettingsBlock((settings as any)?.contextPrune);
		const params: ShimRequests["session.start"]["params"] = {
			reason,
			settings,
			model: model && typeof model.provider === "string" && typeof model.id === "string" ? { provider: model.provider, id: model.id } : null,
			sessionFile: safe(() => sm.getSessionFile()) ?? null,
			sessionDir: safe(() => sm.getSessionDir()) ?? null,
			// pi keeps a session directory per project; the miss counts are
			// the provider's, so every project's sessions share one.
			missesDir: path.join(agentDir(), "condense-misses"),
			sessionId: safe(() => sm.getSessionId()) ?? null,
			// The sidecar builds the context messages from `branch`; sending
			// them too would double a line of 10 MB at 1M tokens (docs/protocol.md).
			branch,
			tree,
			// A user who turned pi's compaction off is not compacted by condense.
			canCompact: compactOf(ctx) !== undefined && (settings as any)?.compaction?.enabled !== false,
		};
		context.forgetCopy();
		const res = await link.call("session.start", params, REQUEST_TIMEOUT_MS);
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

	const onSessionStart = link.guard("session_start", async (event: any, ctx) => {
		const s = await link.ensure();
		if (!s) return;
		await sendSessionStart(ctx, typeof event?.reason === "string" ? event.reason : "startup", false);
	});
	pi.on("session_start", onSessionStart as any);
	// pi 0.58 reported these separately; later versions fold them into session_start.
	pi.on("session_switch" as any, onSessionStart as any);
	pi.on("session_fork" as any, onSessionStart as any);

	pi.on(
		"session_tree",
		link.guard("session_tree", async (_event: any, ctx) => {
			if (!link.live) return;
			await sendSessionStart(ctx, "tree", true);
		}) as any,
	);

	const onTurnEnd = link.guard("turn_end", async (event: any, ctx) => {
		const s = link.live;
		if (!s) return;
		const usage: any = safe(() => (ctx as any).getContextUsage?.());
		const message = event?.message ?? null;
		const toolResults = Array.isArray(event?.toolResults) ? event.toolResults : [];
		const epoch = link.contextEpoch;
		const heldKeys = context.keys?.length;
		const res = await link.call("turn.end", {
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
			if (link.sidecar === s) context.forgetCopy();
			return;
		}
		// A sidecar that appended the turn to its copy says `synced`; mirror it,
		// unless a context request raced this one (then resend everything).
		if (res.synced === true && link.sidecar === s) {
			if (link.contextEpoch === epoch && context.keys && context.keys.length === heldKeys && message) {
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
		link.guard("message_end", async (event: any, ctx) => {
			if (!link.live || event?.message?.role !== "assistant") return;
			const res = await link.call("message.end", { message: event.message, now: Date.now() });
			if (res) applyEffects(res.effects, ctx, pi);
		}) as any,
	);

	pi.on(
		"before_agent_start",
		link.guard("before_agent_start", async (_event: any, ctx) => {
			noteRunStart();
			if (!link.live) return;
			const res = await (link.agentStart = link.call("agent.start", {}));
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
		link.guard("session_compact", async (_event: any, ctx) => {
			const s = link.live;
			if (!s) return;
			const messages = contextMessages(ctx);
			// Without the rebuilt list the sidecar cannot tell what the
			// compaction kept; the next `context` resends it as before.
			if (!Array.isArray(messages)) return;
			const keep = context.keep(messages);
			const request = link.call("session.compact", { keep, append: messages.slice(keep) as Json[], now: Date.now() });
			context.sync(keep, messages);
			const res = await (link.compacting = request);
			if (!res) {
				if (link.sidecar === s) context.forgetCopy();
				return;
			}
			applyEffects(res.effects, ctx, pi);
		}) as any,
	);

	pi.on(
		"agent_end",
		link.guard("agent_end", async (_event: any, ctx) => {
			if (!link.live) return;
			const res = await link.call("agent.end", {});
			if (res) applyEffects(res.effects, ctx, pi);
		}) as any,
	);

	pi.on("context", link.guard("context", contextHandler(pi, link, turnEnds, timing)) as any);

	pi.on(
		"session_shutdown",
		link.guard("session_shutdown", async (_event: any, ctx) => {
			// Some pi versions (0.74) run extension handlers on a queue print mode
			// does not wait for, so a flush in message_end may still be running:
			// without a user waiting, let it finish (its own deadline bounds it).
			if (link.inflight.size > 0) {
				const interactive = safe(() => (ctx as any)?.hasUI === true) ?? false;
				let timer: ReturnType<typeof setTimeout> | undefined;
				await Promise.race([
					Promise.allSettled([...link.inflight]),
					new Promise((resolve) => {
						timer = setTimeout(resolve, interactive ? SHUTDOWN_GRACE_UI_MS : REQUEST_TIMEOUT_MS);
					}),
				]);
				if (timer) clearTimeout(timer);
			}
			const s = link.retire();
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

	registerQueryTool(pi, link);
	registerPrunerCommand(pi, link);

	const registerRenderer = (pi as any).registerMessageRenderer;
	if (typeof registerRenderer === "function") {
		loadTui();
		try {
			registerRenderer.call(pi, SUMMARY_TYPE, renderSummary);
		} catch (err) {
			link.logOnce("renderer", `condense: cannot register the summary renderer: ${errorText(err)}`);
		}
	}
}

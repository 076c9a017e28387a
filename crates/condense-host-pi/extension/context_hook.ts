// The `context` handler: before every LLM call, the messages pi is about to
// send go to the sidecar as only what changed since its copy, and its answer
// (render steps, often built on the previous answer's) becomes the list pi
// sends. Effects the answer carries (a switch entry, a notice) are applied
// first. Any failure returns nothing, and pi sends its own list.

import type { ExtensionAPI, ExtensionContext } from "@mariozechner/pi-coding-agent";
import { applyEffects } from "./effects";
import { resolveModel } from "./llm";
import type { SidecarLink } from "./link";
import type { TurnEnds } from "./turns";
import { summarizerPrice } from "../../condense-engine/client/prices.ts";
import type { ContextParams } from "../../condense-engine/client/protocol.ts";
import { logError } from "../../condense-engine/client/sidecar.ts";
import { CONTEXT_TIMEOUT_MS } from "../../condense-engine/client/constants.ts";

/**
 * How long `context` waits for the `turn_end` handler of the tool turn it
 * sends to start (pi 0.73/0.74 queue it behind earlier handlers; turns.ts).
 */
export const TURN_END_START_WAIT_MS = 2_000;

function safe<T>(f: () => T): T | undefined {
	try {
		return f();
	} catch {
		return undefined;
	}
}

/** The handler, for `pi.on("context", …)` (the caller wraps it in the link's guard). */
export function contextHandler(pi: ExtensionAPI, link: SidecarLink, turnEnds: TurnEnds, timing: boolean) {
	return async (event: any, ctx: ExtensionContext): Promise<{ messages: unknown[] } | undefined> => {
		const messages = event?.messages;
		// pi 0.73/0.74 run turn_end handlers on a queue the agent loop does not
		// wait for: let the handler of the turn this call sends start and
		// finish, so a flush at that turn's end prunes this call as on later
		// versions (a no-op there: the turn.end was answered already).
		if (link.live && Array.isArray(messages)) {
			const wait = await turnEnds.settled(messages, TURN_END_START_WAIT_MS);
			if (wait === "timeout" && link.debug) {
				logError(`condense: no turn_end within ${TURN_END_START_WAIT_MS} ms of the context call after its turn; carrying on`);
			}
		}
		if (link.agentStart) await link.agentStart.catch(() => undefined);
		if (link.compacting) await link.compacting.catch(() => undefined);
		const s = link.live;
		if (!s || !Array.isArray(messages)) return undefined;
		const context = link.context;
		const started = timing ? performance.now() : 0;
		const base = context.base(s);
		link.contextEpoch++;
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
			return link.call("context", params, CONTEXT_TIMEOUT_MS);
		};
		// A branch that grew at its end (the usual call) is sent on at once,
		// and read while the sidecar renders; any other is read first.
		const grown = context.grownPrefix(messages);
		const sent = grown ?? context.keep(messages);
		let pending = request(sent, true);
		const keyed = timing ? performance.now() : 0;
		const keep = grown === undefined ? sent : context.keep(messages);
		let stale: Promise<any> | undefined;
		if (keep < sent) {
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
			if (link.sidecar === s) context.reset();
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
		if (timing) {
			const done = performance.now();
			const ms = done - started;
			const stepCount = applied.kind === "rendered" ? applied.steps : 0;
			const sidecarMs = typeof res.micros === "number" ? (res.micros / 1000).toFixed(2) : "?";
			process.stderr.write(
				`condense: context ${ms.toFixed(2)} ms (messages ${messages.length}, keep ${keep}, append ${messages.length - keep}, ${
					out ? `steps ${stepCount} (${res.steps?.length ?? 0} sent) -> ${out.length} messages` : "unchanged"
				}; sent after ${(keyed - started).toFixed(2)} ms${grown === undefined ? " (branch read first)" : ""}, round trip ${(answered - keyed).toFixed(2)} ms (branch read in ${(checked - keyed).toFixed(2)} ms, sidecar ${sidecarMs} ms, parse ${s.lastParseMs.toFixed(2)} ms), apply ${(done - answered).toFixed(2)} ms) at ${started.toFixed(2)}\n`,
			);
		}
		return out ? { messages: out } : undefined;
	};
}

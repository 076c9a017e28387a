// The summarizer's price relative to the session model's, from the host's
// model prices (pi's registry `model.cost`, OpenCode's provider list; dollars
// per million tokens), sent with each `context` call so the cache-aware
// policy charges summaries what they cost (docs/configuration.md,
// `economy.summarizerPrice`). Both hosts use it.

import { SESSION_MODEL } from "./protocol.ts";

/**
 * The `contextPrune.summarizerModel` the sidecar summarizes with: read at
 * `session.start`, changed by a saved settings block (`/pruner model`).
 */
let summarizerSpec: unknown = SESSION_MODEL;

/** Takes the `summarizerModel` of a `contextPrune` block read or saved. */
export function noteSettingsBlock(block: unknown): void {
	const spec = block && typeof block === "object" ? (block as Record<string, unknown>).summarizerModel : undefined;
	summarizerSpec = spec ?? SESSION_MODEL;
}

/** A registry model's input price, when it has a usable one. */
function inputPrice(model: any): number | undefined {
	const price = model?.cost?.input;
	return typeof price === "number" && Number.isFinite(price) && price >= 0 ? price : undefined;
}

/**
 * The summarizer model's input price over the session model's, or
 * `undefined` when they are the same model (the engine assumes 1), or a
 * price is missing, or the session model's is zero. A summarizer priced at
 * zero gives 0 (both hosts price a model with no `cost` at zero; the engine
 * never charges below 1 on a report).
 */
export function priceRatio(session: any, summarizer: any): number | undefined {
	if (!session || !summarizer) return undefined;
	if (session === summarizer || (session.provider === summarizer.provider && session.id === summarizer.id)) {
		return undefined;
	}
	const base = inputPrice(session);
	const price = inputPrice(summarizer);
	if (base === undefined || price === undefined || base === 0) return undefined;
	return price / base;
}

/**
 * pi's [`priceRatio`] of the configured summarizer against the session
 * model (`ctx.model`), the summarizer found by `resolve` (llm.ts's
 * `resolveModel`, the lookup `llm.complete` summarizes with).
 */
export function summarizerPrice<Ctx>(ctx: Ctx, resolve: (ctx: Ctx, spec: unknown) => unknown): number | undefined {
	return priceRatio((ctx as any).model, resolve(ctx, summarizerSpec));
}

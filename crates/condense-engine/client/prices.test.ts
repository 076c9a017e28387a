// Unit tests of prices.ts, run by `cargo test -p condense-engine --test client_units`
// with the end-to-end tests' Node 22 (`node --test`, TypeScript types stripped).
import assert from "node:assert/strict";
import { test } from "node:test";

import { noteSettingsBlock, priceRatio, summarizerPrice } from "./prices.ts";

const model = (provider: string, id: string, input: number) => ({
	provider,
	id,
	cost: { input, output: input * 5, cacheRead: input / 10, cacheWrite: input * 1.25 },
});
const sonnet = model("anthropic", "claude-sonnet-4-5", 3);
const haiku = model("anthropic", "claude-haiku-4-5", 1);
const opus = model("anthropic", "claude-opus-4-1", 15);

test("the ratio is the summarizer's input price over the session model's", () => {
	assert.equal(priceRatio(sonnet, opus), 5);
	assert.equal(priceRatio(sonnet, haiku), 1 / 3);
	assert.equal(priceRatio(haiku, sonnet), 3);
});

test("the same model, an unpriced one or a missing one gives no ratio", () => {
	assert.equal(priceRatio(sonnet, sonnet), undefined);
	assert.equal(priceRatio(sonnet, { ...sonnet }), undefined);
	assert.equal(priceRatio(model("local", "llama", 0), opus), undefined);
	assert.equal(priceRatio(sonnet, { provider: "x", id: "y" }), undefined);
	assert.equal(priceRatio(sonnet, model("x", "nan", Number.NaN)), undefined);
	assert.equal(priceRatio(undefined, opus), undefined);
	// A free summarizer (a local model) costs nothing.
	assert.equal(priceRatio(sonnet, model("local", "llama", 0)), 0);
});

test("the configured summarizer is the one the saved settings name", () => {
	const all = [sonnet, haiku, opus];
	// The session model for "default" and for a spec no model matches, as
	// llm.ts's resolveModel answers.
	const resolve = (ctx: any, spec: unknown) =>
		all.find((m) => spec === `${m.provider}/${m.id}` || spec === m.id) ?? ctx.model;
	const ctx: any = { model: sonnet };
	noteSettingsBlock({ summarizerModel: "anthropic/claude-opus-4-1" });
	assert.equal(summarizerPrice(ctx, resolve), 5);
	noteSettingsBlock({ summarizerModel: "claude-haiku-4-5" });
	assert.equal(summarizerPrice(ctx, resolve), 1 / 3);
	noteSettingsBlock({ summarizerModel: "default" });
	assert.equal(summarizerPrice(ctx, resolve), undefined);
	noteSettingsBlock({ enabled: true });
	assert.equal(summarizerPrice(ctx, resolve), undefined);
	noteSettingsBlock(null);
	assert.equal(summarizerPrice(ctx, resolve), undefined);
});

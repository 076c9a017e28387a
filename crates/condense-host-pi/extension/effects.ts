// Carrying out the effects a sidecar answer lists (docs/protocol.md, "Effects").

import type { ExtensionAPI, ExtensionContext } from "@mariozechner/pi-coding-agent";
import { parseEffect } from "../../condense-engine/client/protocol.ts";
import type { Effect, InputEffect, Level, Placement, SelectEffect } from "../../condense-engine/client/protocol.ts";
import { noteSettingsBlock } from "../../condense-engine/client/prices.ts";
import { compactWhenIdle } from "./compact";
import { saveContextPrune } from "./settings";
import { errorText, logError } from "../../condense-engine/client/sidecar.ts";

/** The footer key pi-condense uses. */
export const STATUS_KEY = "context-prune";

/** The session manager's write methods, which pi's readonly type omits. */
interface SessionWriter {
	appendCustomEntry?: (customType: string, data?: unknown) => string;
	appendCustomMessageEntry?: (customType: string, content: unknown, display: boolean, details?: unknown) => string;
}

const widgetTimers = new Map<string, ReturnType<typeof setTimeout>>();
const warnedKinds = new Set<string>();

function hasUI(ctx: ExtensionContext | undefined): boolean {
	try {
		return !!ctx && (ctx as any).hasUI === true && !!(ctx as any).ui;
	} catch {
		// a stale ctx throws on every access
		return false;
	}
}

const debug = process.env.CONDENSE_PI_DEBUG === "1";

function notify(ctx: ExtensionContext | undefined, text: string, level: Level): void {
	if (debug) logError(`condense notify [${level}]: ${text}`);
	if (!hasUI(ctx)) return;
	(ctx as any).ui.notify(text, level);
}

function setWidget(ctx: ExtensionContext | undefined, key: string, lines: string[] | undefined, placement: Placement): void {
	if (!hasUI(ctx)) return;
	const ui = (ctx as any).ui;
	if (typeof ui.setWidget !== "function") return;
	if (placement === "aboveEditor" || placement === "belowEditor") ui.setWidget(key, lines, { placement });
	else ui.setWidget(key, lines);
}

/** One effect. Throws on failure; the caller isolates effects from each other. */
function applyEffect(effect: Effect, ctx: ExtensionContext | undefined, pi: ExtensionAPI): void {
	switch (effect.kind) {
		case "append": {
			const customType = effect.customType;
			const writer = ctx ? ((ctx as any).sessionManager as SessionWriter | undefined) : undefined;
			if (effect.delivery === "session" && typeof writer?.appendCustomEntry === "function") {
				writer.appendCustomEntry(customType, effect.data);
			} else {
				pi.appendEntry(customType, effect.data);
			}
			return;
		}
		case "appendMessage": {
			const customType = effect.customType;
			const display = effect.display;
			const writer = ctx ? ((ctx as any).sessionManager as SessionWriter | undefined) : undefined;
			if (effect.delivery === "session" && typeof writer?.appendCustomMessageEntry === "function") {
				writer.appendCustomMessageEntry(customType, effect.content, display, effect.details);
			} else {
				pi.sendMessage(
					{ customType, content: effect.content, display, details: effect.details } as any,
					{ deliverAs: "steer" },
				);
			}
			return;
		}
		case "notify":
			notify(ctx, effect.text, effect.level);
			return;
		case "status": {
			if (!hasUI(ctx)) return;
			const text = effect.text ?? undefined;
			(ctx as any).ui.setStatus(STATUS_KEY, text);
			return;
		}
		case "widget": {
			const key = effect.key;
			const lines = effect.lines ?? undefined;
			const old = widgetTimers.get(key);
			if (old) {
				clearTimeout(old);
				widgetTimers.delete(key);
			}
			setWidget(ctx, key, lines, effect.placement);
			const ttl = effect.ttlMs;
			if (lines && ttl !== undefined && ttl > 0 && hasUI(ctx)) {
				const timer = setTimeout(() => {
					widgetTimers.delete(key);
					try {
						setWidget(ctx, key, undefined, effect.placement);
					} catch {
						// the ctx went stale (session replaced); its UI is gone too
					}
				}, ttl);
				timer.unref?.();
				widgetTimers.set(key, timer);
			}
			return;
		}
		case "saveSettings":
			saveContextPrune(effect.contextPrune);
			noteSettingsBlock(effect.contextPrune);
			return;
		case "select":
		case "input":
			// Dialogs belong to `command` answers (applyEffectsInteractive).
			if (debug) logError(`condense: ${effect.kind} effect outside a command answer ignored`);
			return;
		case "compact":
			compactWhenIdle(ctx);
			return;
		case "cost":
			pi.events.emit("cost:external", {
				source: "condense",
				totalCost: effect.totalCost,
				inputTokens: effect.inputTokens,
				outputTokens: effect.outputTokens,
			});
			return;
	}
}

/** The kind of a raw effect, for logs and filters. */
function kindOf(raw: unknown): unknown {
	return raw && typeof raw === "object" ? (raw as { kind?: unknown }).kind : undefined;
}

/** Reads a raw effect; `undefined` (logged once per kind) for a kind this shim does not know. */
function readEffect(raw: unknown): Effect | undefined {
	const effect = parseEffect(raw);
	if (effect) return effect;
	const kind = String(kindOf(raw));
	if (!warnedKinds.has(kind)) {
		warnedKinds.add(kind);
		logError(`condense: ignoring unknown effect kind ${JSON.stringify(kindOf(raw))}`);
	}
	return undefined;
}

/** Carries out `effects` in order; one failing effect does not stop the rest. */
export function applyEffects(effects: unknown, ctx: ExtensionContext | undefined, pi: ExtensionAPI): void {
	if (!Array.isArray(effects)) return;
	for (const raw of effects) {
		if (!raw || typeof raw !== "object") continue;
		try {
			const effect = readEffect(raw);
			if (effect) applyEffect(effect, ctx, pi);
		} catch (err) {
			const kind = kindOf(raw);
			logError(`condense: effect ${String(kind)} failed: ${errorText(err)}`);
			if (kind === "saveSettings") {
				try {
					notify(ctx, `condense: could not save settings: ${errorText(err)}`, "error");
				} catch {
					// nothing more to do
				}
			}
		}
	}
}

/** Clears pending widget timers (shutdown). */
export function clearWidgetTimers(): void {
	for (const timer of widgetTimers.values()) clearTimeout(timer);
	widgetTimers.clear();
}

/** Effect kinds a `ui.effects` notification may carry (docs/protocol.md). */
const UI_KINDS = new Set(["notify", "status", "widget"]);

/**
 * Carries out the effects of a `ui.effects` notification (progress while a
 * request runs). Only UI effects are honoured: entries and settings arrive in
 * answers, so an abandoned request never leaves half of its writes behind.
 */
export function applyUiEffects(effects: unknown, ctx: ExtensionContext | undefined, pi: ExtensionAPI): void {
	if (!Array.isArray(effects)) return;
	applyEffects(
		effects.filter((e: unknown) => UI_KINDS.has(String(kindOf(e)))),
		ctx,
		pi,
	);
}

/** Sends `/pruner <args>` to the sidecar and carries out its answer. */
export type CommandRunner = (args: string) => Promise<void>;

/** Shows a `select` or `input` dialog; the command to send back, or undefined (cancelled, no UI). */
async function dialog(effect: SelectEffect | InputEffect, ctx: ExtensionContext | undefined): Promise<string | undefined> {
	if (!hasUI(ctx)) return undefined;
	const ui = (ctx as any).ui;
	const then = effect.then.trim();
	const withPrefix = (answer: string) => (then ? `${then} ${answer}` : answer).trim();
	const title = effect.title;
	if (effect.kind === "select") {
		const options = effect.options;
		if (options.length === 0 || typeof ui.select !== "function") return undefined;
		const choice = await ui.select(title, options);
		if (typeof choice !== "string") return undefined;
		const i = options.indexOf(choice);
		const values = effect.values;
		return withPrefix(values && i >= 0 && i < values.length ? values[i] : choice);
	}
	if (typeof ui.input !== "function") return undefined;
	const placeholder = effect.placeholder !== "" ? effect.placeholder : undefined;
	const answer = await ui.input(title, placeholder);
	return typeof answer === "string" ? withPrefix(answer) : undefined;
}

/**
 * Carries out a `command` answer: the effects in order, and for each dialog
 * effect (`select`, `input`) the dialog, whose answer is sent back as a new
 * `command` through `run` before the remaining effects. Without a UI (print
 * mode) dialogs are skipped.
 */
export async function applyEffectsInteractive(
	effects: unknown,
	ctx: ExtensionContext | undefined,
	pi: ExtensionAPI,
	run: CommandRunner,
): Promise<void> {
	if (!Array.isArray(effects)) return;
	for (const raw of effects) {
		if (!raw || typeof raw !== "object") continue;
		const kind = kindOf(raw);
		if (kind !== "select" && kind !== "input") {
			applyEffects([raw], ctx, pi);
			continue;
		}
		let next: string | undefined;
		try {
			const effect = parseEffect(raw);
			if (effect?.kind !== "select" && effect?.kind !== "input") continue;
			next = await dialog(effect, ctx);
		} catch (err) {
			logError(`condense: the ${kind} dialog failed: ${errorText(err)}`);
			continue;
		}
		if (next !== undefined) await run(next);
	}
}

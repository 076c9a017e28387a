// `llm.complete`: the sidecar asks the shim to run a completion through pi's
// model registry and pi-ai, so keys, OAuth and provider quirks stay pi's.
//
// Where the streaming call lives depends on pi's version, so it is
// feature-detected, never chosen by version number:
// - pi 1.x: `ctx.modelRegistry.stream(model, context, options)` resolves
//   credentials (and a credential-specific base URL) at request time;
// - pi 0.83 (and 1.x, deprecated there): `stream` in `@earendil-works/pi-ai/compat`;
// - pi 0.74-0.82: `stream` in `@earendil-works/pi-ai`;
// - pi 0.73 and older: `stream` in `@mariozechner/pi-ai` (the only scope its
//   extension loader aliases).

import type { ExtensionContext } from "@mariozechner/pi-coding-agent";
import { SESSION_MODEL } from "../../condense-engine/client/protocol.ts";
import type { LlmCompleteParams, LlmCompleteResult, LlmEventKind, LlmUsage } from "../../condense-engine/client/protocol.ts";
import { CodedError, errorText, logError } from "../../condense-engine/client/sidecar.ts";

/** The pi-ai entry points that may export `stream`, newest first. */
const PI_AI_MODULES = [
	"@earendil-works/pi-ai/compat",
	"@mariozechner/pi-ai/compat",
	"@earendil-works/pi-ai",
	"@mariozechner/pi-ai",
];

type StreamFn = (model: any, context: any, options?: any) => any;

/** A streaming entry point and where it came from (for `CONDENSE_PI_DEBUG`). */
interface Streamer {
	stream: StreamFn;
	source: string;
	/** True if it resolves credentials itself (the key and headers are not passed). */
	ownAuth: boolean;
}

let piAiStream: Promise<Streamer> | undefined;

async function importFirst(specs: string[], pick: (mod: any) => unknown): Promise<{ mod: any; spec: string }> {
	const errors: string[] = [];
	for (const spec of specs) {
		try {
			const mod: any = await import(spec);
			for (const candidate of [mod, mod?.default]) {
				if (candidate && pick(candidate)) return { mod: candidate, spec };
			}
			errors.push(`${spec}: no usable export`);
		} catch (err) {
			errors.push(`${spec}: ${errorText(err)}`);
		}
	}
	throw new Error(errors.join("; "));
}

function loadPiAiStream(): Promise<Streamer> {
	if (!piAiStream) {
		piAiStream = importFirst(PI_AI_MODULES, (m) => typeof m.stream === "function").then(({ mod, spec }) => ({
			stream: mod.stream as StreamFn,
			source: spec,
			ownAuth: false,
		}));
		piAiStream.catch(() => {
			piAiStream = undefined; // try again next time
		});
	}
	return piAiStream;
}

/** The registry's own `stream` (pi 1.x), else pi-ai's. */
async function loadStreamer(ctx: ExtensionContext): Promise<Streamer> {
	const registry = (ctx as any).modelRegistry;
	if (typeof registry?.stream === "function") {
		return {
			stream: (model, context, options) => registry.stream(model, context, options),
			source: "ctx.modelRegistry.stream",
			ownAuth: true,
		};
	}
	return loadPiAiStream();
}

const warned = new Set<string>();
function warnOnce(ctx: ExtensionContext, key: string, text: string): void {
	if (warned.has(key)) return;
	warned.add(key);
	logError(text);
	try {
		if ((ctx as any).hasUI) (ctx as any).ui.notify(text, "warning");
	} catch {
		// stale ctx
	}
}

/**
 * {@link SESSION_MODEL} = the session model; else `provider/id` (split on the first `/`).
 * A bare model id is accepted too: the session model when the id matches it,
 * else the one registered model with that id. Anything else falls back to
 * the session model, with a warning.
 */
export function resolveModel(ctx: ExtensionContext, spec: unknown): any {
	const session = (ctx as any).model;
	if (typeof spec !== "string" || spec === "" || spec === SESSION_MODEL) return session;
	const slash = spec.indexOf("/");
	const registry = (ctx as any).modelRegistry;
	let found: any;
	if (slash > 0 && typeof registry?.find === "function") {
		found = registry.find(spec.slice(0, slash), spec.slice(slash + 1));
	}
	if (!found && slash === -1) {
		if (session?.id === spec) return session;
		const all: any[] = (typeof registry?.getAll === "function" ? registry.getAll() : []) ?? [];
		const matches = all.filter((m) => m?.id === spec);
		found = matches.find((m) => m.provider === session?.provider) ?? (matches.length === 1 ? matches[0] : undefined);
	}
	if (found) return found;
	warnOnce(
		ctx,
		`model:${spec}`,
		`condense: summarizer model "${spec}" not found${session ? `; using the session model ${session.provider}/${session.id}` : ""}`,
	);
	return session;
}

async function resolveAuth(ctx: ExtensionContext, model: any): Promise<{ apiKey?: string; headers?: Record<string, string>; model: any }> {
	const registry = (ctx as any).modelRegistry;
	let apiKey: string | undefined;
	let headers: Record<string, string> | undefined;
	if (typeof registry?.getApiKeyAndHeaders === "function") {
		// 0.73+
		const auth = await registry.getApiKeyAndHeaders(model);
		if (!auth || auth.ok === false) {
			throw new CodedError("auth", `no credentials for ${model.provider}/${model.id}: ${auth?.error ?? "unknown error"}`);
		}
		apiKey = auth.apiKey;
		headers = auth.headers;
	} else if (typeof registry?.getApiKey === "function") {
		// 0.58
		apiKey = await registry.getApiKey(model);
		if (!apiKey) throw new CodedError("auth", `no API key for ${model.provider}`);
	}
	// Providers whose endpoint depends on the credential (e.g. Copilot business).
	if (typeof registry?.getProviderAuth === "function") {
		try {
			const providerAuth = await registry.getProviderAuth(model.provider);
			const baseUrl = providerAuth?.auth?.baseUrl;
			if (typeof baseUrl === "string" && baseUrl !== "" && baseUrl !== model.baseUrl) model = { ...model, baseUrl };
		} catch {
			// keep the model's own baseUrl
		}
	}
	return { apiKey, headers, model };
}

const debug = process.env.CONDENSE_PI_DEBUG === "1";
const loggedSource = new Set<string>();

export interface LlmEventSink {
	(kind: LlmEventKind, delta: string): void;
}

/**
 * Runs one completion. Resolves `{text, stopReason, usage:{input, output, cost}}`;
 * throws CodedError `auth`, `aborted` or `transient`.
 */
export async function complete(
	ctx: ExtensionContext | undefined,
	params: LlmCompleteParams,
	signal: AbortSignal,
	onEvent: LlmEventSink,
): Promise<LlmCompleteResult> {
	if (!ctx) throw new CodedError("transient", "no pi session is active");
	let model = resolveModel(ctx, params.model);
	if (!model) throw new CodedError("auth", "no model is selected in pi");
	// Also where the registry streams by itself: a missing credential is an
	// `auth` failure, not a transient one.
	const auth = await resolveAuth(ctx, model);
	if (signal.aborted) throw new CodedError("aborted", "cancelled");
	const streamer = await loadStreamer(ctx).catch((err) => {
		throw new CodedError("transient", `pi-ai is not available: ${errorText(err)}`);
	});
	if (debug && !loggedSource.has(streamer.source)) {
		loggedSource.add(streamer.source);
		logError(`condense: llm.complete streams through ${streamer.source}`);
	}

	const options: Record<string, unknown> = { signal };
	if (!streamer.ownAuth) {
		model = auth.model;
		if (auth.apiKey !== undefined) options.apiKey = auth.apiKey;
		if (auth.headers !== undefined) options.headers = auth.headers;
	}
	if (params.maxTokens !== null && params.maxTokens > 0) options.maxTokens = params.maxTokens;
	if (typeof params.reasoningEffort === "string") options.reasoningEffort = params.reasoningEffort;
	const system = params.system !== null && params.system !== "" ? params.system : undefined;
	const user = params.user;
	const context: Record<string, unknown> = {
		messages: [{ role: "user", content: [{ type: "text", text: user }], timestamp: Date.now() }],
	};
	if (system !== undefined) context.systemPrompt = system;

	let message: any;
	try {
		const events = streamer.stream(model, context, options);
		for await (const ev of events as AsyncIterable<any>) {
			if (typeof ev?.delta !== "string") continue;
			if (ev.type === "text_delta") onEvent("text", ev.delta);
			else if (ev.type === "thinking_delta") onEvent("thinking", ev.delta);
		}
		message = await events.result();
	} catch (err) {
		if (signal.aborted) throw new CodedError("aborted", "cancelled");
		throw new CodedError("transient", errorText(err));
	}
	const stopReason = String(message?.stopReason ?? "stop");
	if (stopReason === "aborted" || signal.aborted) throw new CodedError("aborted", message?.errorMessage ?? "cancelled");
	if (stopReason === "error") throw new CodedError("transient", message?.errorMessage ?? "the provider reported an error");
	const text = Array.isArray(message?.content)
		? message.content
				.filter((b: any) => b?.type === "text" && typeof b.text === "string")
				.map((b: any) => b.text)
				.join("")
		: "";
	return { text, stopReason, usage: usageOf(message) };
}

function usageOf(message: any): LlmUsage {
	const u = message?.usage ?? {};
	const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : 0);
	return { input: num(u.input), output: num(u.output), cost: num(u.cost?.total) };
}

/** In-flight completions by the sidecar's request id, for `llm.cancel`. */
export class LlmCalls {
	private controllers = new Map<string, AbortController>();

	start(id: string | number): AbortController {
		const controller = new AbortController();
		this.controllers.set(String(id), controller);
		return controller;
	}

	finish(id: string | number): void {
		this.controllers.delete(String(id));
	}

	cancel(id: unknown): void {
		const controller = this.controllers.get(String(id));
		if (controller) controller.abort();
	}

	cancelAll(): void {
		for (const controller of this.controllers.values()) controller.abort();
		this.controllers.clear();
	}
}


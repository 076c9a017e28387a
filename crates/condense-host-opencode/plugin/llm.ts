// `llm.complete` for the summarizer, answered by the plugin: OpenCode's SDK
// exposes no completion call, so the request goes to the model's provider
// directly, as OpenCode itself would reach it: the Anthropic Messages API
// when the provider is Anthropic's SDK (`@ai-sdk/anthropic`), otherwise the
// provider's OpenAI-compatible endpoint (`provider.<id>.options.baseURL` /
// `apiKey` in opencode.json). Endpoint and key come from what `chat.params`
// showed for the provider, else from the config. A provider with neither
// answers `transient` ("no endpoint"), so the sidecar's outage fallback, the
// extractive summarizer, takes the batch; a refused key answers `auth`.

import type { PluginInput } from "@opencode-ai/plugin";
import { SESSION_MODEL } from "../../condense-engine/client/protocol.ts";
import type { LlmCompleteResult } from "../../condense-engine/client/protocol.ts";
import { CodedError } from "../../condense-engine/client/sidecar.ts";

/** `llm.complete`'s params (docs/protocol.md). */
export interface CompleteParams {
	model?: unknown;
	system?: unknown;
	user?: unknown;
	maxTokens?: unknown;
}

type ProviderOptions = { baseURL?: unknown; apiKey?: unknown };

/** How a provider is reached, as `chat.params` showed it. */
export interface ProviderEndpoint {
	/** The AI SDK package OpenCode uses for it (`@ai-sdk/anthropic`, `@ai-sdk/openai-compatible`, …). */
	npm?: string | undefined;
	baseURL?: string | undefined;
	apiKey?: string | undefined;
}

/** The Anthropic SDK's package name. */
export const ANTHROPIC_NPM = "@ai-sdk/anthropic";
const ANTHROPIC_BASE = "https://api.anthropic.com/v1";

/** `provider/id` (or {@link SESSION_MODEL}: the session model) as OpenCode's ids. */
export function resolveModel(spec: unknown, session: { providerID: string; modelID: string } | undefined) {
	if (typeof spec === "string" && spec !== SESSION_MODEL) {
		const slash = spec.indexOf("/");
		if (slash > 0) return { providerID: spec.slice(0, slash), modelID: spec.slice(slash + 1) };
		if (session) return { providerID: session.providerID, modelID: spec };
	}
	return session;
}

export async function complete(
	client: PluginInput["client"],
	params: CompleteParams,
	session: { providerID: string; modelID: string } | undefined,
	endpointOf: (providerID: string) => ProviderEndpoint | undefined = () => undefined,
): Promise<LlmCompleteResult> {
	const model = resolveModel(params.model, session);
	if (!model) throw new CodedError("auth", "no model to summarize with yet");
	const seen = endpointOf(model.providerID);
	let options: ProviderOptions | undefined;
	let npm: unknown;
	try {
		const config = (await client.config.get()).data as
			| { provider?: Record<string, { npm?: unknown; options?: ProviderOptions }> }
			| undefined;
		options = config?.provider?.[model.providerID]?.options;
		npm = config?.provider?.[model.providerID]?.npm;
	} catch {
		// The config could not be read: what chat.params showed is all there is.
	}
	const endpoint: ProviderEndpoint = {
		npm: seen?.npm ?? (typeof npm === "string" ? npm : model.providerID === "anthropic" ? ANTHROPIC_NPM : undefined),
		baseURL: seen?.baseURL ?? (typeof options?.baseURL === "string" ? options.baseURL : undefined),
		apiKey: seen?.apiKey ?? (typeof options?.apiKey === "string" ? options.apiKey : undefined),
	};
	if (endpoint.npm === ANTHROPIC_NPM) return anthropic(endpoint, model.modelID, params);
	return openAiCompatible(endpoint, model, params);
}

async function post(url: string, headers: Record<string, string>, body: unknown): Promise<unknown> {
	let res: Response;
	try {
		res = await fetch(url, { method: "POST", headers, body: JSON.stringify(body) });
	} catch (err) {
		throw new CodedError("transient", `summarizer request failed: ${err instanceof Error ? err.message : String(err)}`);
	}
	if (res.status === 401 || res.status === 403) throw new CodedError("auth", `summarizer endpoint refused the key (${res.status})`);
	if (!res.ok) throw new CodedError("transient", `summarizer endpoint answered ${res.status}`);
	try {
		return await res.json();
	} catch {
		throw new CodedError("transient", "summarizer endpoint answered no JSON");
	}
}

function num(v: unknown): number {
	return typeof v === "number" && Number.isFinite(v) ? v : 0;
}

async function openAiCompatible(
	endpoint: ProviderEndpoint,
	model: { providerID: string; modelID: string },
	params: CompleteParams,
): Promise<LlmCompleteResult> {
	const baseURL = endpoint.baseURL?.replace(/\/+$/, "");
	if (!baseURL) throw new CodedError("transient", `provider ${model.providerID} has no endpoint the plugin can call (no baseURL)`);
	const headers: Record<string, string> = { "content-type": "application/json" };
	if (endpoint.apiKey) headers.authorization = `Bearer ${endpoint.apiKey}`;
	const json = (await post(`${baseURL}/chat/completions`, headers, {
		model: model.modelID,
		stream: false,
		max_tokens: typeof params.maxTokens === "number" ? params.maxTokens : undefined,
		messages: [
			{ role: "system", content: String(params.system ?? "") },
			{ role: "user", content: String(params.user ?? "") },
		],
	})) as {
		choices?: { message?: { content?: unknown }; finish_reason?: unknown }[];
		usage?: { prompt_tokens?: unknown; completion_tokens?: unknown };
	};
	const choice = json.choices?.[0];
	return {
		text: typeof choice?.message?.content === "string" ? choice.message.content : "",
		stopReason: choice?.finish_reason === "length" ? "length" : "stop",
		usage: { input: num(json.usage?.prompt_tokens), output: num(json.usage?.completion_tokens), cost: 0 },
	};
}

/** The Anthropic Messages API (`POST {baseURL}/messages`). */
async function anthropic(endpoint: ProviderEndpoint, modelID: string, params: CompleteParams): Promise<LlmCompleteResult> {
	const key = endpoint.apiKey ?? process.env.ANTHROPIC_API_KEY;
	if (!key) throw new CodedError("auth", "no Anthropic API key (OpenCode's provider showed none and ANTHROPIC_API_KEY is unset)");
	const baseURL = (endpoint.baseURL ?? ANTHROPIC_BASE).replace(/\/+$/, "");
	const json = (await post(
		`${baseURL}/messages`,
		{ "content-type": "application/json", "x-api-key": key, "anthropic-version": "2023-06-01" },
		{
			model: modelID,
			max_tokens: typeof params.maxTokens === "number" ? params.maxTokens : 4096,
			system: String(params.system ?? ""),
			messages: [{ role: "user", content: String(params.user ?? "") }],
		},
	)) as { content?: { type?: unknown; text?: unknown }[]; stop_reason?: unknown; usage?: { input_tokens?: unknown; output_tokens?: unknown } };
	const text = (json.content ?? [])
		.filter((b) => b?.type === "text" && typeof b.text === "string")
		.map((b) => b.text as string)
		.join("");
	return {
		text,
		stopReason: json.stop_reason === "max_tokens" ? "length" : "stop",
		usage: { input: num(json.usage?.input_tokens), output: num(json.usage?.output_tokens), cost: 0 },
	};
}

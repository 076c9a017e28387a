// `llm.complete` for the summarizer, answered by the plugin: OpenCode's SDK
// exposes no completion call, so the request goes to the OpenAI-compatible
// endpoint the user configured for the model's provider
// (`provider.<id>.options.baseURL` / `apiKey` in opencode.json). A provider
// without one answers `auth`, and the summarizer falls back as it does
// without a key.

import type { PluginInput } from "@opencode-ai/plugin";
import type { LlmCompleteResult } from "../../condense-host-pi/extension/protocol.ts";
import { CodedError } from "../../condense-host-pi/extension/sidecar.ts";

/** `llm.complete`'s params (docs/protocol.md). */
export interface CompleteParams {
	model?: unknown;
	system?: unknown;
	user?: unknown;
	maxTokens?: unknown;
}

type ProviderOptions = { baseURL?: unknown; apiKey?: unknown };

/** `provider/id` (or `"default"`: the session model) as OpenCode's ids. */
function resolveModel(spec: unknown, session: { providerID: string; modelID: string } | undefined) {
	if (typeof spec === "string" && spec !== "default") {
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
): Promise<LlmCompleteResult> {
	const model = resolveModel(params.model, session);
	if (!model) throw new CodedError("auth", "no model to summarize with yet");
	const config = (await client.config.get()).data as { provider?: Record<string, { options?: ProviderOptions }> } | undefined;
	const options = config?.provider?.[model.providerID]?.options;
	const baseURL = typeof options?.baseURL === "string" ? options.baseURL.replace(/\/+$/, "") : undefined;
	if (!baseURL) throw new CodedError("auth", `provider ${model.providerID} has no OpenAI-compatible baseURL configured`);
	const headers: Record<string, string> = { "content-type": "application/json" };
	if (typeof options?.apiKey === "string") headers.authorization = `Bearer ${options.apiKey}`;
	const body = {
		model: model.modelID,
		stream: false,
		max_tokens: typeof params.maxTokens === "number" ? params.maxTokens : undefined,
		messages: [
			{ role: "system", content: String(params.system ?? "") },
			{ role: "user", content: String(params.user ?? "") },
		],
	};
	let res: Response;
	try {
		res = await fetch(`${baseURL}/chat/completions`, { method: "POST", headers, body: JSON.stringify(body) });
	} catch (err) {
		throw new CodedError("transient", `summarizer request failed: ${err instanceof Error ? err.message : String(err)}`);
	}
	if (res.status === 401 || res.status === 403) throw new CodedError("auth", `summarizer endpoint refused the key (${res.status})`);
	if (!res.ok) throw new CodedError("transient", `summarizer endpoint answered ${res.status}`);
	const json = (await res.json()) as {
		choices?: { message?: { content?: unknown }; finish_reason?: unknown }[];
		usage?: { prompt_tokens?: unknown; completion_tokens?: unknown };
	};
	const choice = json.choices?.[0];
	const finish = choice?.finish_reason;
	return {
		text: typeof choice?.message?.content === "string" ? choice.message.content : "",
		stopReason: finish === "length" ? "length" : "stop",
		usage: {
			input: typeof json.usage?.prompt_tokens === "number" ? json.usage.prompt_tokens : 0,
			output: typeof json.usage?.completion_tokens === "number" ? json.usage.completion_tokens : 0,
			cost: 0,
		},
	};
}

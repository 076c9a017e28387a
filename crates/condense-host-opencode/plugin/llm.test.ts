// Unit tests of the summarizer's calls (llm.ts) against a local server
// standing in for Anthropic's Messages API and an OpenAI-compatible one
// (run by tests/plugin_units.rs).

import assert from "node:assert/strict";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";

import { ANTHROPIC_NPM, complete } from "./llm.ts";

type Seen = { url: string; headers: http.IncomingHttpHeaders; body: Record<string, unknown> };

async function server(answer: (seen: Seen) => { status: number; body: unknown }): Promise<{ base: string; seen: Seen[]; close: () => void }> {
	const seen: Seen[] = [];
	const srv = http.createServer((req, res) => {
		let text = "";
		req.on("data", (c) => (text += c));
		req.on("end", () => {
			const s: Seen = { url: req.url ?? "", headers: req.headers, body: JSON.parse(text) as Record<string, unknown> };
			seen.push(s);
			const a = answer(s);
			res.writeHead(a.status, { "content-type": "application/json" });
			res.end(JSON.stringify(a.body));
		});
	});
	await new Promise<void>((r) => srv.listen(0, "127.0.0.1", () => r()));
	const port = (srv.address() as AddressInfo).port;
	return { base: `http://127.0.0.1:${port}/v1`, seen, close: () => srv.close() };
}

function client(provider: Record<string, unknown>) {
	return { config: { get: async () => ({ data: { provider } }) } } as never;
}

const params = { model: "default", system: "be brief", user: "<tool-call-batch>x</tool-call-batch>", maxTokens: 300 };

test("an Anthropic provider is called through the Messages API with its key", async () => {
	const s = await server(() => ({
		status: 200,
		body: { content: [{ type: "text", text: "- a summary" }], stop_reason: "end_turn", usage: { input_tokens: 12, output_tokens: 3 } },
	}));
	try {
		const res = await complete(client({}), params, { providerID: "anthropic", modelID: "claude-x" }, () => ({
			npm: ANTHROPIC_NPM,
			baseURL: s.base,
			apiKey: "sk-ant-test",
		}));
		assert.deepEqual(res, { text: "- a summary", stopReason: "stop", usage: { input: 12, output: 3, cost: 0 } });
		const [seen] = s.seen;
		assert.equal(seen?.url, "/v1/messages");
		assert.equal(seen?.headers["x-api-key"], "sk-ant-test");
		assert.equal(seen?.headers["anthropic-version"], "2023-06-01");
		assert.deepEqual(seen?.body, { model: "claude-x", max_tokens: 300, system: "be brief", messages: [{ role: "user", content: params.user }] });
	} finally {
		s.close();
	}
});

test("a truncated Anthropic answer is a length stop; a refused key is auth", async () => {
	let status = 200;
	const s = await server(() =>
		status === 200 ? { status, body: { content: [{ type: "text", text: "- cut" }], stop_reason: "max_tokens" } } : { status, body: { error: "no" } },
	);
	try {
		const endpoint = () => ({ npm: ANTHROPIC_NPM, baseURL: s.base, apiKey: "k" });
		const model = { providerID: "anthropic", modelID: "claude-x" };
		assert.equal((await complete(client({}), params, model, endpoint)).stopReason, "length");
		status = 401;
		await assert.rejects(complete(client({}), params, model, endpoint), (e: { code?: string }) => e.code === "auth");
	} finally {
		s.close();
	}
});

test("an OpenAI-compatible provider from the config is called at its baseURL", async () => {
	const s = await server(() => ({ status: 200, body: { choices: [{ message: { content: "- ok" }, finish_reason: "stop" }], usage: { prompt_tokens: 5, completion_tokens: 2 } } }));
	try {
		const res = await complete(client({ fake: { npm: "@ai-sdk/openai-compatible", options: { baseURL: `${s.base}/`, apiKey: "k2" } } }), params, {
			providerID: "fake",
			modelID: "m1",
		});
		assert.equal(res.text, "- ok");
		assert.equal(s.seen[0]?.url, "/v1/chat/completions");
		assert.equal(s.seen[0]?.headers.authorization, "Bearer k2");
		assert.equal(s.seen[0]?.body.model, "m1");
	} finally {
		s.close();
	}
});

test("a provider with no endpoint answers transient, so the sidecar's extractive fallback takes the batch", async () => {
	await assert.rejects(
		complete(client({ other: { npm: "@ai-sdk/openai-compatible" } }), params, { providerID: "other", modelID: "m" }),
		(e: { code?: string; message?: string }) => e.code === "transient" && /no endpoint/.test(e.message ?? ""),
	);
	await assert.rejects(complete(client({}), params, undefined), (e: { code?: string }) => e.code === "auth");
});

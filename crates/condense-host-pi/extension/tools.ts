// What the shim registers with pi beside its event handlers: the recovery
// tool `context_tree_query` and the `/pruner` command. Both are answered by
// the sidecar.

import type { ExtensionAPI, ExtensionContext } from "@mariozechner/pi-coding-agent";
import { applyEffectsInteractive } from "./effects";
import type { SidecarLink } from "./link";
import type { QueryParams, ShimRequests } from "../../condense-engine/client/protocol.ts";
import { errorText, logError } from "../../condense-engine/client/sidecar.ts";
import { QUERY_TOOL, REQUEST_TIMEOUT_MS } from "../../condense-engine/client/constants.ts";

export function registerQueryTool(pi: ExtensionAPI, link: SidecarLink) {
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
			if (ctx) link.lastCtx = ctx;
			const s = link.live;
			if (!s) throw new Error(`${QUERY_TOOL} is unavailable: the condense sidecar is not running`);
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
}

export function registerPrunerCommand(pi: ExtensionAPI, link: SidecarLink) {
	pi.registerCommand("pruner", {
		description: "condense context pruning: status, settings, manual flush (/pruner help)",
		getArgumentCompletions(prefix: string) {
			const p = (prefix ?? "").trimStart();
			if (p.includes(" ")) return null;
			const items = link.prunerSubcommands.filter(({ name }) => name.startsWith(p)).map(({ name, description }) => ({
				value: name,
				label: name,
				description,
			}));
			return items.length > 0 ? items : null;
		},
		handler: async (args: string, ctx: any) => {
			if (ctx) link.lastCtx = ctx;
			try {
				if (!link.live) {
					const text = "condense: the sidecar is not running; /pruner is unavailable until the next session start";
					if (ctx?.hasUI) ctx.ui.notify(text, "warning");
					else logError(text);
					return;
				}
				// A dialog's answer comes back as another command (docs/protocol.md).
				const run = async (text: string): Promise<void> => {
					const res = await link.call("command", { args: text, utcOffsetMinutes: -new Date().getTimezoneOffset() });
					if (res) await applyEffectsInteractive(res.effects, ctx, pi, run);
				};
				await run(typeof args === "string" ? args : "");
			} catch (err) {
				link.logOnce("command", `condense: /pruner failed: ${errorText(err)}`);
			}
		},
	} as any);
}

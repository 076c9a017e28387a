// condense inside OpenCode: the plugin that starts the sidecar
// (`condense sidecar`) and translates OpenCode's hooks into the sidecar protocol
// (docs/protocol.md). It holds no pruning logic.
//
// - `experimental.chat.messages.transform` (once per LLM call of the main
//   loop): finished assistant messages not yet reported go to the sidecar as
//   `message.end` / `turn.end` (OpenCode's one assistant message is one LLM
//   call, pi's turn), then, at a run's first call, `agent.start` (pi's
//   `before_agent_start`), then the whole list as `context`; the render
//   comes back onto OpenCode's messages (messages.ts). OpenCode hands the hook copies:
//   what is changed here reaches this one LLM call only.
//   `context` is incremental as in pi (`keep`: the prefix the sidecar still
//   holds, by sync.ts's keys; `base`: the render steps held, so an answer
//   reuses them).
// - `chat.params` (each LLM call): the model's context limit, for the budget
//   triggers `turn.end` reports, and the provider's endpoint and key, for
//   the summarizer's calls (llm.ts).
// - `event`: `session.idle` is pi's `agent_end`; `tui.toast.show` (a toast
//   OpenCode's bus carried to the TUI) goes to the debug log.
// - `experimental.session.compacting`: the next transform is OpenCode's
//   compaction summarizing the history (no run starts), told to keep the
//   stubs' refs; the first call after it starts the sidecar's session again
//   from the log, with the branch laid out as pi's after a compaction.
// - `tool.execute.before`: a file write whose arguments carry a placeholder
//   (guard.ts) is refused.
// - `context_tree_query`: the sidecar's `query`; `context_prune_status`:
//   pi's `/pruner status` text.
// - State: one sidecar per OpenCode session (sub-agents are sessions too);
//   entries go to the session's event log (log.ts); session_link.ts holds
//   a session's link, requests.ts the requests it sends.
//
// Fail open: a missing, crashed or slow sidecar leaves the messages as they
// are; the session's sidecar is not restarted until OpenCode restarts.

// Only types from @opencode-ai/plugin: `tool` is handed in by the entry
// file, which resolves the package where OpenCode installed it.
import type { Plugin } from "@opencode-ai/plugin";
import type { tool as toolFn } from "@opencode-ai/plugin";
import type { ContextParams, Json } from "../../condense-engine/client/protocol.ts";
import { CodedError, errorText, logError } from "../../condense-engine/client/sidecar.ts";
import { priceRatio } from "../../condense-engine/client/prices.ts";
import { CONTEXT_TIMEOUT_MS, QUERY_TOOL, REQUEST_TIMEOUT_MS } from "../../condense-engine/client/constants.ts";
import { configDirs, readConfig } from "./config.ts";
import { placeholdersIn, refusal, WRITING_TOOLS } from "./guard.ts";
import { resolveModel } from "./llm.ts";
import type { ProviderEndpoint } from "./llm.ts";
import { applyRender, convert } from "./messages.ts";
import type { OcMessage, PiMessage } from "./messages.ts";
import { ask, asJson, debug, sentAhead, settle, within } from "./requests.ts";
import type { Answer } from "./requests.ts";
import { SessionLink, STATUS_TOOL } from "./session_link.ts";
import type { Client } from "./session_link.ts";

/**
 * What OpenCode's compaction is told besides its own prompt: the stubs it
 * reads stand for outputs the query tool pages back, by refs that only its
 * summary can carry past the compaction.
 */
const COMPACTION_HINT =
	"Some tool outputs in this conversation were replaced by condense with stubs such as " +
	"\"[Summarized in pruner summary, ref `t3`. Use context_tree_query to retrieve full output.]\", " +
	"or summarized in messages that list their refs. The originals stay retrievable with the " +
	`${QUERY_TOOL} tool. In your summary, keep each ref (\`t<N>\`) next to what it stands for, ` +
	"so the work can page back the outputs it still needs.";

/** The plugin's state across sessions. */
class CondenseState {
	readonly sessions = new Map<string, SessionLink>();
	config: { [key: string]: Json };
	/** Context limits by `provider/model`, from `chat.params` or the provider list. */
	private readonly windows = new Map<string, number>();
	/** Input prices (dollars per million tokens) by `provider/model`, from the same. */
	private readonly inputPrices = new Map<string, number>();
	private providersRead: Promise<void> | undefined;
	/** Each provider's endpoint and key, from `chat.params`, for the summarizer's calls. */
	readonly endpoints = new Map<string, ProviderEndpoint>();
	/** Warnings already shown (a config warning comes with every session's start: shown once). */
	private readonly warned = new Set<string>();

	constructor(
		readonly client: Client,
		directory: string,
	) {
		this.config = readConfig(configDirs(directory), logError);
	}

	link(sessionID: string): SessionLink {
		let s = this.sessions.get(sessionID);
		if (!s) {
			s = new SessionLink(sessionID, this);
			this.sessions.set(sessionID, s);
		}
		return s;
	}

	/** What `chat.params` says about an LLM call's model and provider. */
	noteCall(model: unknown, provider: unknown): void {
		const m = model as { id?: unknown; providerID?: unknown; limit?: { context?: unknown }; api?: { npm?: unknown }; cost?: { input?: unknown } } | undefined;
		if (typeof m?.id !== "string" || typeof m.providerID !== "string") return;
		const limit = m.limit?.context;
		if (typeof limit === "number" && limit > 0) this.windows.set(`${m.providerID}/${m.id}`, limit);
		const price = m.cost?.input;
		if (typeof price === "number") this.inputPrices.set(`${m.providerID}/${m.id}`, price);
		const p = provider as { options?: Record<string, unknown>; info?: { key?: unknown } } | undefined;
		const options = p?.options ?? {};
		const key = typeof options.apiKey === "string" ? options.apiKey : typeof p?.info?.key === "string" ? p.info.key : undefined;
		this.endpoints.set(m.providerID, {
			npm: typeof m.api?.npm === "string" ? m.api.npm : undefined,
			baseURL: typeof options.baseURL === "string" ? options.baseURL : undefined,
			apiKey: key,
		});
	}

	/** The model's context limit in tokens (0: unknown, no budget trigger). */
	async contextWindow(providerID: string, modelID: string): Promise<number> {
		const key = `${providerID}/${modelID}`;
		const known = this.windows.get(key);
		if (known !== undefined) return known;
		// A call this process did not make (a resumed session's last reply):
		// OpenCode's provider list has the limit too.
		await this.readProviders();
		return this.windows.get(key) ?? 0;
	}

	/** Reads OpenCode's provider list once: each model's limit and input price. */
	private readProviders(): Promise<void> {
		this.providersRead ??= (async () => {
			try {
				const res = (await this.client.config.providers()) as {
					data?: { providers?: { id?: unknown; models?: Record<string, { limit?: { context?: unknown }; cost?: { input?: unknown } }> }[] };
				};
				for (const p of res.data?.providers ?? []) {
					for (const [id, model] of Object.entries(p.models ?? {})) {
						const limit = model.limit?.context;
						const k = `${String(p.id)}/${id}`;
						if (typeof limit === "number" && limit > 0 && !this.windows.has(k)) this.windows.set(k, limit);
						const price = model.cost?.input;
						if (typeof price === "number" && !this.inputPrices.has(k)) this.inputPrices.set(k, price);
					}
				}
			} catch {
				// Nothing known: no budget trigger for the model, no summarizer price.
			}
		})();
		return this.providersRead;
	}

	/**
	 * The configured summarizer's input price over the session model's
	 * (`summarizerPrice` of `context`), when OpenCode prices both and they
	 * are different models.
	 */
	async summarizerPrice(session: { providerID: string; modelID: string } | undefined): Promise<number | undefined> {
		const summarizer = resolveModel(this.config.summarizerModel, session);
		if (!session || !summarizer) return undefined;
		const priced = async (m: { providerID: string; modelID: string }) => {
			const key = `${m.providerID}/${m.modelID}`;
			if (!this.inputPrices.has(key)) await this.readProviders();
			return { provider: m.providerID, id: m.modelID, cost: { input: this.inputPrices.get(key) } };
		};
		return priceRatio(await priced(session), await priced(summarizer));
	}

	/** Every message of the session as OpenCode stores it (what a compaction left out of the list too). */
	async history(sessionID: string): Promise<OcMessage[] | undefined> {
		try {
			const res = (await this.client.session.messages({ path: { id: sessionID } })) as { data?: unknown };
			return Array.isArray(res.data) ? (res.data as OcMessage[]) : undefined;
		} catch {
			return undefined;
		}
	}

	/** A notice: a toast (in the TUI), warnings and errors also on stderr; each warning once per process. */
	notify(message: string, variant: "info" | "success" | "warning" | "error"): void {
		if (variant === "warning" || variant === "error") {
			if (this.warned.has(message)) return;
			this.warned.add(message);
			logError(message);
		}
		this.toast(message, variant);
	}

	toast(message: string, variant: "info" | "success" | "warning" | "error"): void {
		// The debug log records each toast, so a test without a TUI sees what the user would.
		debug(() => `toast ${variant}: ${message}`);
		// Without a TUI (`opencode run`) nobody shows it; a failed call is dropped.
		this.client.tui?.showToast?.({ body: { title: "condense", message, variant } })?.catch?.(() => {});
	}

	/** The transform hook: returns OpenCode's list for this LLM call, or `undefined` to leave it. */
	async render(messages: readonly OcMessage[]): Promise<OcMessage[] | undefined> {
		const sessionID = messages.find((m) => typeof m.info?.sessionID === "string")?.info.sessionID;
		if (!sessionID) return undefined;
		const link = this.link(sessionID);
		const user = [...messages].reverse().find((m) => m.info.role === "user")?.info.model;
		if (user && typeof user.providerID === "string" && typeof user.modelID === "string") link.model = user;
		const sidecar = await link.connect(messages);
		if (!sidecar) return undefined;
		let pending: Promise<Answer> | undefined;
		try {
			// The finished turns, the run's start and the call go out back
			// to back; the sidecar answers them in order (protocol.md).
			const sent = await link.sendTurns(sidecar, messages);
			const compacting = link.compacting;
			link.compacting = false;
			if (!compacting && link.compactedSince(messages)) {
				// The sidecar starts again from the log: after the turns.
				await settle(sent.splice(0));
				await link.afterCompaction(sidecar, messages);
			}
			if (messages.at(-1)?.info.role === "user" && !compacting) {
				// A run's first call: the flush its previous run's reply left
				// (cache-aware policy) runs now, anchored after that reply.
				sent.push({
					answer: sentAhead(ask(sidecar, "agent.start", {}, REQUEST_TIMEOUT_MS)),
					apply: (started) => {
						link.carryOut(started.effects, false);
						return true;
					},
				});
			}
			const converted = convert(messages);
			// Only what changed since the sidecar's copy (sync.ts's keys).
			const keep = link.context.keep(converted.pi);
			const base = link.context.base(sidecar);
			const params: ContextParams = { keep, append: asJson(converted.pi.slice(keep)), now: Date.now() };
			if (link.model) params.model = `${link.model.providerID}/${link.model.modelID}`;
			const summarizerPrice = await this.summarizerPrice(link.model);
			if (summarizerPrice !== undefined) params.summarizerPrice = summarizerPrice;
			if (base !== undefined) params.base = base;
			// Behind the turns' requests the answer waits for their flushes
			// too: its own deadline starts once they are answered (`within`).
			if (sent.length > 0) params.ordered = true;
			pending = sentAhead(ask(sidecar, "context", params, sent.length > 0 ? REQUEST_TIMEOUT_MS : CONTEXT_TIMEOUT_MS));
			// The sidecar's copy is this list once it answers (an error answer
			// resets the keys, below): keyed during the round trip.
			link.context.sync(keep, converted.pi);
			const inStep = await settle(sent);
			const res = await within(pending, CONTEXT_TIMEOUT_MS, "context");
			pending = undefined;
			link.anchor = messages.at(-1)?.info.id ?? link.anchor;
			link.sent = new Set(messages.map((m) => m.info.id));
			link.carryOut(res.effects, false);
			if (!inStep) {
				// It rendered a copy the keys did not describe.
				link.context.reset();
				return undefined;
			}
			const applied = link.context.apply(converted.pi, base, res, sidecar);
			if (applied.kind === "unchanged") return undefined;
			if (applied.kind === "malformed") {
				link.fail("the sidecar sent a malformed render");
				return undefined;
			}
			return applyRender(messages, converted, applied.messages as PiMessage[]);
		} catch (err) {
			// A switch the sidecar recorded in its answer must still reach
			// the log, whatever failed before it.
			pending?.then((res) => link.carryOut(res.effects, false), () => undefined);
			link.context.reset();
			// The sidecar's copy no longer matches this list: the messages pass
			// unchanged, and the next call sends the whole list (keys unset).
			if (err instanceof CodedError && err.code === OUT_OF_SYNC) return undefined;
			link.fail(errorText(err));
			return undefined;
		}
	}
}

/** The sidecar's error code for a `context` request its copy cannot honour. */
const OUT_OF_SYNC = "out-of-sync";

/** The plugin, given `@opencode-ai/plugin`'s `tool` (see index.ts). */
export function condensePlugin(tool: typeof toolFn): Plugin {
	return async (input) => {
	const state = new CondenseState(input.client, input.directory);
	return {
		"experimental.chat.messages.transform": async (_input, output) => {
			try {
				const next = await state.render(output.messages as unknown as OcMessage[]);
				if (next) output.messages.splice(0, output.messages.length, ...(next as unknown as typeof output.messages));
			} catch (err) {
				logError(`condense: ${errorText(err)}; messages pass unchanged`);
			}
		},
		// OpenCode runs the transform hook on the history it is about to
		// summarize right after this one: that call is no run's start.
		"experimental.session.compacting": async (input, output) => {
			const link = state.sessions.get(input.sessionID);
			if (!link || link.failed) return;
			link.compacting = true;
			output.context.push(COMPACTION_HINT);
		},
		"chat.params": async (input) => {
			try {
				state.noteCall(input.model, input.provider);
			} catch (err) {
				logError(`condense: ${errorText(err)}`);
			}
		},
		"tool.execute.before": async (input, output) => {
			if (!WRITING_TOOLS.has(input.tool)) return;
			const found = placeholdersIn(output.args);
			// Thrown: OpenCode reports it to the model as the call's error, and nothing is written.
			if (found.length > 0) throw new Error(refusal(input.tool, found));
		},
		event: async ({ event }) => {
			if (event.type === "tui.toast.show") {
				// What OpenCode's bus carried to the TUI: the debug log shows a test it did.
				const toast = event.properties;
				if (toast.title === "condense") debug(() => `toast event ${toast.variant}: ${toast.message}`);
				return;
			}
			if (event.type !== "session.idle") return;
			const link = state.sessions.get(event.properties.sessionID);
			const sidecar = link && !link.failed ? await link.connect([]) : undefined;
			if (!link || !sidecar) return;
			try {
				const res = await ask(sidecar, "agent.end", {}, REQUEST_TIMEOUT_MS);
				link.carryOut(res.effects, false);
			} catch (err) {
				link.fail(errorText(err));
			}
		},
		tool: {
			[QUERY_TOOL]: tool({
				description:
					"Retrieve the original, full output of tool calls whose results were replaced by a pruner summary stub. " +
					'Pass the short refs shown in the stubs or summaries, e.g. {"toolCallIds": ["t3", "t4"]}; raw tool call ids also work.',
				args: {
					toolCallIds: tool.schema
						.array(tool.schema.string())
						.describe('Short refs such as "t12" (from pruner stubs and summaries) or raw tool call ids.'),
					offset: tool.schema
						.number()
						.int()
						.min(1)
						.optional()
						.describe("Line number to start each output from (1-indexed); a cut output says which offset continues it."),
					limit: tool.schema
						.number()
						.int()
						.min(1)
						.optional()
						.describe("Maximum number of lines to show of each output (at most 2000)."),
				},
				async execute(args, ctx) {
					const link = state.sessions.get(ctx.sessionID);
					const sidecar = link && !link.failed ? await link.connect([]) : undefined;
					if (!sidecar) throw new Error(`${QUERY_TOOL} is unavailable: the condense sidecar is not running for this session`);
					const page: { offset?: number; limit?: number } = {};
					if (args.offset !== undefined) page.offset = args.offset;
					if (args.limit !== undefined) page.limit = args.limit;
					const res = await ask(sidecar, "query", { toolCallIds: args.toolCallIds, ...page }, REQUEST_TIMEOUT_MS);
					return typeof res.text === "string" ? res.text : "";
				},
			}),
			[STATUS_TOOL]: tool({
				description:
					"Show condense's status for this session: its settings, the summarizer's usage, the context's metrics, " +
					"and the prompt cache's economics from the recorded usage with what the pruning policy decided. " +
					"Call it when the user asks about condense, context pruning or its cost.",
				args: {},
				async execute(_args, ctx) {
					// Only a session this process already handed a call has its sidecar.
					const link = state.sessions.get(ctx.sessionID);
					if (!link) throw new Error(`${STATUS_TOOL} is unavailable: condense has not seen this session yet`);
					return await link.commandText("status");
				},
			}),
		},
	};
};
}

// The sidecar protocol, typed (docs/protocol.md): every request, answer and
// notification in both directions, and the effects.
//
// Mirrors `condense_engine::protocol` and `condense_engine::request`. What
// the shim receives goes in as `unknown` and comes out typed with every
// field checked (`parseEffect`, the `SHIM_REQUESTS` result checks, the
// `SIDECAR_REQUESTS` / `SIDECAR_NOTIFICATIONS` params checks), or as a
// `ProtocolError` naming the field. What it sends is built against the
// interfaces below, which `tsc` checks (`tests/client_typecheck.rs`). The
// round-trip test (`protocol.test.ts`, driven by `tests/client_protocol.rs`)
// sends a Rust sample of every message through the checks and back, so a
// field renamed on either side fails the build.
//
// This module imports nothing (no pi, no Node): every host's TypeScript uses it.

/** Any JSON value (entry payloads, message content: condense-store's to define). */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** How an entry reaches the session file. */
export type Delivery = "session" | "runtime";
/** How loud a notification is. */
export type Level = "info" | "warning" | "error";
/** Where a widget is drawn. */
export type Placement = "aboveEditor" | "belowEditor";

export interface AppendEffect {
	kind: "append";
	customType: string;
	data: Json;
	delivery: Delivery;
}

export interface AppendMessageEffect {
	kind: "appendMessage";
	customType: string;
	content: Json;
	display: boolean;
	details: Json;
	delivery: Delivery;
}

export interface NotifyEffect {
	kind: "notify";
	level: Level;
	text: string;
}

export interface StatusEffect {
	kind: "status";
	/** `null` clears the footer. */
	text: string | null;
}

export interface WidgetEffect {
	kind: "widget";
	key: string;
	/** `null` removes the widget. */
	lines: string[] | null;
	placement: Placement;
	/** Remove the widget after this many milliseconds. */
	ttlMs?: number;
}

export interface SaveSettingsEffect {
	kind: "saveSettings";
	contextPrune: { [key: string]: Json };
}

export interface CostEffect {
	kind: "cost";
	totalCost: number;
	inputTokens: number;
	outputTokens: number;
}

export interface SelectEffect {
	kind: "select";
	title: string;
	options: string[];
	/** The value sent for each option (parallel to `options`); absent: the option itself. */
	values?: string[];
	then: string;
}

export interface InputEffect {
	kind: "input";
	title: string;
	placeholder: string;
	then: string;
}

/** Compact the context now, as the host's own compaction would (sent at a run's end to a host whose `session.start` said `canCompact`). */
export interface CompactEffect {
	kind: "compact";
}

/** One thing the sidecar asks the shim to do. */
export type Effect =
	| AppendEffect
	| AppendMessageEffect
	| NotifyEffect
	| StatusEffect
	| WidgetEffect
	| SaveSettingsEffect
	| CostEffect
	| SelectEffect
	| InputEffect
	| CompactEffect;

/** Every effect kind this shim knows. */
export const EFFECT_KINDS: ReadonlySet<string> = new Set([
	"append",
	"appendMessage",
	"notify",
	"status",
	"widget",
	"saveSettings",
	"cost",
	"select",
	"input",
	"compact",
]);

/** An effect of a known kind with a missing or mistyped field. */
export class ProtocolError extends Error {}

type Fields = { readonly [key: string]: unknown };

function field(o: Fields, kind: string, name: string): unknown {
	if (!(name in o)) throw new ProtocolError(`${kind} effect without ${name}`);
	return o[name];
}

function str(o: Fields, kind: string, name: string): string {
	const v = field(o, kind, name);
	if (typeof v !== "string") throw new ProtocolError(`${kind}.${name} is not a string`);
	return v;
}

function num(o: Fields, kind: string, name: string): number {
	const v = field(o, kind, name);
	if (typeof v !== "number") throw new ProtocolError(`${kind}.${name} is not a number`);
	return v;
}

function bool(o: Fields, kind: string, name: string): boolean {
	const v = field(o, kind, name);
	if (typeof v !== "boolean") throw new ProtocolError(`${kind}.${name} is not a boolean`);
	return v;
}

function strings(o: Fields, kind: string, name: string): string[] {
	const v = field(o, kind, name);
	if (!Array.isArray(v) || !v.every((s) => typeof s === "string")) {
		throw new ProtocolError(`${kind}.${name} is not a list of strings`);
	}
	return v as string[];
}

function oneOf<T extends string>(o: Fields, kind: string, name: string, allowed: readonly T[]): T {
	const v = str(o, kind, name);
	if (!(allowed as readonly string[]).includes(v)) throw new ProtocolError(`${kind}.${name} is ${JSON.stringify(v)}`);
	return v as T;
}

function json(o: Fields, kind: string, name: string): Json {
	return field(o, kind, name) as Json;
}

function object(o: Fields, kind: string, name: string): { [key: string]: Json } {
	const v = field(o, kind, name);
	if (!v || typeof v !== "object" || Array.isArray(v)) throw new ProtocolError(`${kind}.${name} is not an object`);
	return v as { [key: string]: Json };
}

const DELIVERIES = ["session", "runtime"] as const;
const LEVELS = ["info", "warning", "error"] as const;
const PLACEMENTS = ["aboveEditor", "belowEditor"] as const;

/**
 * Reads one effect off the wire: the `Effect` with every field checked,
 * `undefined` for a kind this shim does not know (a newer sidecar's), or a
 * `ProtocolError` for a known kind that is malformed.
 */
export function parseEffect(value: unknown): Effect | undefined {
	if (!value || typeof value !== "object" || Array.isArray(value)) throw new ProtocolError("an effect is not an object");
	const o = value as Fields;
	const kind = o.kind;
	switch (kind) {
		case "append":
			return {
				kind,
				customType: str(o, kind, "customType"),
				data: json(o, kind, "data"),
				delivery: oneOf(o, kind, "delivery", DELIVERIES),
			};
		case "appendMessage":
			return {
				kind,
				customType: str(o, kind, "customType"),
				content: json(o, kind, "content"),
				display: bool(o, kind, "display"),
				details: json(o, kind, "details"),
				delivery: oneOf(o, kind, "delivery", DELIVERIES),
			};
		case "notify":
			return { kind, level: oneOf(o, kind, "level", LEVELS), text: str(o, kind, "text") };
		case "status": {
			const text = field(o, kind, "text");
			if (text !== null && typeof text !== "string") throw new ProtocolError("status.text is not a string or null");
			return { kind, text };
		}
		case "widget": {
			const lines = field(o, kind, "lines") === null ? null : strings(o, kind, "lines");
			const effect: WidgetEffect = {
				kind,
				key: str(o, kind, "key"),
				lines,
				placement: oneOf(o, kind, "placement", PLACEMENTS),
			};
			if ("ttlMs" in o) effect.ttlMs = num(o, kind, "ttlMs");
			return effect;
		}
		case "saveSettings":
			return { kind, contextPrune: object(o, kind, "contextPrune") };
		case "cost":
			return {
				kind,
				totalCost: num(o, kind, "totalCost"),
				inputTokens: num(o, kind, "inputTokens"),
				outputTokens: num(o, kind, "outputTokens"),
			};
		case "select": {
			const effect: SelectEffect = {
				kind,
				title: str(o, kind, "title"),
				options: strings(o, kind, "options"),
				then: str(o, kind, "then"),
			};
			if ("values" in o) effect.values = strings(o, kind, "values");
			return effect;
		}
		case "input":
			return {
				kind,
				title: str(o, kind, "title"),
				placeholder: str(o, kind, "placeholder"),
				then: str(o, kind, "then"),
			};
		case "compact":
			return { kind };
		default:
			return undefined;
	}
}

// ---------------------------------------------------------------------------
// Checked reading of every other message.

/** Reads one value off the wire as a `T`, or throws a `ProtocolError` naming `where`. */
export type Check<T> = (value: unknown, where: string) => T;
/** One check per field of `T`; an optional field's check passes `undefined` through. */
export type Shape<T> = { readonly [K in keyof T]-?: Check<T[K]> };

function isFields(value: unknown): value is Fields {
	return !!value && typeof value === "object" && !Array.isArray(value);
}

function wrong(where: string, value: unknown, what: string): ProtocolError {
	return new ProtocolError(value === undefined ? `${where} is missing` : `${where} is not ${what}`);
}

/**
 * An object of the fields `shape` names, each checked; fields it does not
 * name are dropped, so a field the other side renamed never passes unseen.
 */
export function record<T>(shape: Shape<T>): Check<T> {
	return (value, where) => {
		if (!isFields(value)) throw wrong(where, value, "an object");
		const out: { [key: string]: unknown } = {};
		for (const key of Object.keys(shape) as (keyof T & string)[]) {
			const read = shape[key](value[key], `${where}.${key}`);
			if (read !== undefined) out[key] = read;
		}
		return out as T;
	};
}

export const isString: Check<string> = (v, where) => {
	if (typeof v !== "string") throw wrong(where, v, "a string");
	return v;
};
export const isNumber: Check<number> = (v, where) => {
	if (typeof v !== "number" || !Number.isFinite(v)) throw wrong(where, v, "a number");
	return v;
};
export const isBoolean: Check<boolean> = (v, where) => {
	if (typeof v !== "boolean") throw wrong(where, v, "a boolean");
	return v;
};
/** Any JSON value, present (`null` included). */
export const isJson: Check<Json> = (v, where) => {
	if (v === undefined) throw wrong(where, v, "JSON");
	return v as Json;
};
/** A list whose items are read later, one by one (effects: one bad item must not drop the others). */
export const isList: Check<unknown[]> = (v, where) => {
	if (!Array.isArray(v)) throw wrong(where, v, "a list");
	return v;
};
export function optional<T>(check: Check<T>): Check<T | undefined> {
	return (v, where) => (v === undefined ? undefined : check(v, where));
}
export function nullable<T>(check: Check<T>): Check<T | null> {
	return (v, where) => (v === null ? null : check(v, where));
}
export function listOf<T>(check: Check<T>): Check<T[]> {
	return (v, where) => isList(v, where).map((item, i) => check(item, `${where}[${i}]`));
}
export function oneOfValues<T extends string | boolean>(...allowed: T[]): Check<T> {
	return (v, where) => {
		if (!(allowed as unknown[]).includes(v)) throw wrong(where, v, allowed.map((a) => JSON.stringify(a)).join(" or "));
		return v as T;
	};
}

/**
 * Effects in an answer. Each is read with `parseEffect` when it is carried
 * out, so a malformed or unknown one is skipped alone.
 */
export type RawEffects = unknown[];

// ---------------------------------------------------------------------------
// Shim → sidecar requests (`condense_engine::request::Request`) and answers.

/** A model as pi names it. */
export interface ModelRef {
	provider: string;
	id: string;
}

export interface HelloParams {
	/** The protocol major version the shim speaks. */
	protocol: number;
	shim: string;
	/** The harness the shim runs in. */
	host?: HostInfo;
}

/** The harnesses a shim is written for. */
export type HostName = "pi" | "opencode";

/** The harness a shim runs in, and its version when the shim can tell. */
export interface HostInfo {
	name: HostName;
	version?: string;
}

export interface SessionStartParams {
	reason: string;
	/** The whole `settings.json` value, or `null`. */
	settings: Json;
	/** The session model; `null`: none. */
	model: ModelRef | null;
	sessionFile: string | null;
	sessionDir: string | null;
	/** Where every session's cache-miss counts go (absent or `null`:
	 * `condense-misses/` in `sessionDir`). */
	missesDir?: string | null;
	sessionId: string | null;
	/** The branch's entries, root first, as pi's `getBranch()` returns them. */
	branch: Json[];
	/** `true` for `session_tree`. */
	tree: boolean;
	/** The host compacts its context when asked (a `compact` effect); absent: it does not. */
	canCompact?: boolean;
}

export interface ContextParams {
	/** How many leading messages of the sidecar's copy still match. */
	keep: number;
	/** The messages after them. */
	append: Json[];
	/** The `seq` of the steps answer the shim holds. */
	base?: number;
	/** Asks for `micros` in the answer. */
	timing?: boolean;
	/**
	 * Answered after the requests sent before it that change the session
	 * (`message.end`, `turn.end`, `agent.start`, …), so a shim may send a
	 * turn's requests and this one without waiting for each answer.
	 */
	ordered?: boolean;
	/** The shim's clock at the call (ms): the cache-aware policy's time. */
	now?: number;
	/** The model the call goes to, `provider/id` (a change finds the cache cold). */
	model?: string;
	/**
	 * The summarizer model's input price over that model's, from pi's model
	 * registry, when both are known and the models differ.
	 */
	summarizerPrice?: number;
}

export interface TurnUsage {
	/** Context tokens, if pi knows. */
	tokens: number | null;
	contextWindow: number;
}

export interface TurnEndParams {
	turnIndex: number;
	/** The turn's assistant message (`null`: none). */
	message: Json;
	toolResults: Json[];
	usage: TurnUsage;
	/** The shim's clock (ms). */
	now: number;
}

export interface MessageEndParams {
	message: Json;
	now: number;
}

/** `session.compact`: the host's list after its compaction, sent as `context` sends it. */
export interface CompactParams {
	/** How many leading messages of the sidecar's copy still match. */
	keep: number;
	/** The messages after them. */
	append: Json[];
	/** The shim's clock (ms). */
	now?: number;
}

export interface QueryParams {
	toolCallIds: string[];
	/** The first line of each output to show (1-based). */
	offset?: number;
	/** The most lines of each output to show. */
	limit?: number;
}

export interface CommandParams {
	/** The text after `/pruner`. */
	args: string;
	/** Minutes to add to UTC for the user's local time. */
	utcOffsetMinutes: number;
}

/** The params of `agent.start`, `agent.end` and `shutdown`, and `shutdown`'s answer. */
export type Empty = { [key: string]: never };

export interface HelloResult {
	protocol: number;
	sidecar: string;
	/** `/pruner`'s subcommands, for its completions (absent from older sidecars). */
	commands?: CommandInfo[];
}

/** One `/pruner` subcommand as `hello` lists it. */
export interface CommandInfo {
	name: string;
	description: string;
}

/** The answer of `session.start`, `message.end`, `agent.start`, `agent.end`, `session.compact` and `command`. */
export interface EffectsResult {
	effects: RawEffects;
}

export interface TurnEndResult {
	effects: RawEffects;
	/** The sidecar appended the turn's messages to its copy. */
	synced?: boolean;
}

/** One render step: keep input messages `start..end`, or insert a message. */
export type Step = { keep: [number, number] } | { message: Json };

export interface ContextResult {
	/** `true`: the held plan stands (no `seq`, no `steps`). */
	unchanged?: boolean;
	seq?: number;
	/** How many steps of the held answer come first. */
	reuse?: number;
	steps?: Step[];
	effects: RawEffects;
	/** The sidecar's own time (asked with `timing`). */
	micros?: number;
}

export interface QueryResult {
	text: string;
	details: Json;
}

/** Every request the shim sends: its params and its answer. */
export interface ShimRequests {
	hello: { params: HelloParams; result: HelloResult };
	"session.start": { params: SessionStartParams; result: EffectsResult };
	context: { params: ContextParams; result: ContextResult };
	"turn.end": { params: TurnEndParams; result: TurnEndResult };
	"message.end": { params: MessageEndParams; result: EffectsResult };
	"agent.start": { params: Empty; result: EffectsResult };
	"agent.end": { params: Empty; result: EffectsResult };
	"session.compact": { params: CompactParams; result: EffectsResult };
	query: { params: QueryParams; result: QueryResult };
	command: { params: CommandParams; result: EffectsResult };
	shutdown: { params: Empty; result: Empty };
}
export type ShimMethod = keyof ShimRequests;

const isEmpty: Check<Empty> = record<Empty>({});
const isEffectsResult = record<EffectsResult>({ effects: isList });
const isModelRef = record<ModelRef>({ provider: isString, id: isString });
const isStep: Check<Step> = (v, where) => {
	if (isFields(v) && "keep" in v) {
		const range = listOf(isNumber)(v.keep, `${where}.keep`);
		if (range.length !== 2) throw wrong(`${where}.keep`, v.keep, "a [start, end] pair");
		return { keep: [range[0], range[1]] as [number, number] };
	}
	return record<{ message: Json }>({ message: isJson })(v, where);
};

/** The checks of every shim request's params and answer. */
export const SHIM_REQUESTS: { readonly [M in ShimMethod]: { params: Check<ShimRequests[M]["params"]>; result: Check<ShimRequests[M]["result"]> } } = {
	hello: {
		params: record<HelloParams>({
			protocol: isNumber,
			shim: isString,
			host: optional(record<HostInfo>({ name: oneOfValues<HostName>("pi", "opencode"), version: optional(isString) })),
		}),
		result: record<HelloResult>({
			protocol: isNumber,
			sidecar: isString,
			commands: optional(listOf(record<CommandInfo>({ name: isString, description: isString }))),
		}),
	},
	"session.start": {
		params: record<SessionStartParams>({
			reason: isString,
			settings: isJson,
			model: nullable(isModelRef),
			sessionFile: nullable(isString),
			sessionDir: nullable(isString),
			missesDir: optional(nullable(isString)),
			sessionId: nullable(isString),
			branch: listOf(isJson),
			tree: isBoolean,
			canCompact: optional(isBoolean),
		}),
		result: isEffectsResult,
	},
	context: {
		params: record<ContextParams>({
			keep: isNumber,
			append: listOf(isJson),
			base: optional(isNumber),
			timing: optional(isBoolean),
			ordered: optional(isBoolean),
			now: optional(isNumber),
			model: optional(isString),
			summarizerPrice: optional(isNumber),
		}),
		result: record<ContextResult>({
			unchanged: optional(isBoolean),
			seq: optional(isNumber),
			reuse: optional(isNumber),
			steps: optional(listOf(isStep)),
			effects: isList,
			micros: optional(isNumber),
		}),
	},
	"turn.end": {
		params: record<TurnEndParams>({
			turnIndex: isNumber,
			message: isJson,
			toolResults: listOf(isJson),
			usage: record<TurnUsage>({ tokens: nullable(isNumber), contextWindow: isNumber }),
			now: isNumber,
		}),
		result: record<TurnEndResult>({ effects: isList, synced: optional(isBoolean) }),
	},
	"message.end": {
		params: record<MessageEndParams>({ message: isJson, now: isNumber }),
		result: isEffectsResult,
	},
	"agent.start": { params: isEmpty, result: isEffectsResult },
	"agent.end": { params: isEmpty, result: isEffectsResult },
	"session.compact": {
		params: record<CompactParams>({ keep: isNumber, append: listOf(isJson), now: optional(isNumber) }),
		result: isEffectsResult,
	},
	query: {
		params: record<QueryParams>({ toolCallIds: listOf(isString), offset: optional(isNumber), limit: optional(isNumber) }),
		result: record<QueryResult>({ text: isString, details: isJson }),
	},
	command: {
		params: record<CommandParams>({ args: isString, utcOffsetMinutes: isNumber }),
		result: isEffectsResult,
	},
	shutdown: { params: isEmpty, result: isEmpty },
};

// ---------------------------------------------------------------------------
// Sidecar → shim requests and notifications, and the shim's notifications.

/** `llm.complete`'s `model` (and `summarizerModel`'s spelling) for the session's own model. */
export const SESSION_MODEL = "default";

export interface LlmCompleteParams {
	/** {@link SESSION_MODEL} or `provider/id`. */
	model: string;
	/**
	 * pi-ai's `reasoningEffort`, resolved by the sidecar from the thinking
	 * setting; `null` (or absent, from older sidecars): send none.
	 */
	reasoningEffort?: string | null;
	/** The system prompt; `null`: none. */
	system: string | null;
	user: string;
	/** The output token limit; `null`: the model's own. */
	maxTokens: number | null;
}

export interface LlmUsage {
	input: number;
	output: number;
	/** Dollars. */
	cost: number;
}

export interface LlmCompleteResult {
	text: string;
	stopReason: string;
	usage: LlmUsage;
}

export interface LlmCancelParams {
	requestId: string;
}

export interface UiEffectsParams {
	/** Only `notify`, `status` and `widget` are carried out. */
	effects: RawEffects;
}

export interface ProtocolErrorParams {
	message: string;
}

/** What streamed in a completion. */
export type LlmEventKind = "text" | "thinking" | "usage";

/** `llm.event` (shim → sidecar notification). */
export interface LlmEventParams {
	requestId: string;
	kind: LlmEventKind;
	delta: string;
}

/** An error answer's `error`. */
export interface ErrorBody {
	code: string;
	message: string;
}

/** Every request the sidecar sends: its params and the shim's answer. */
export interface SidecarRequests {
	"llm.complete": { params: LlmCompleteParams; result: LlmCompleteResult };
}
export type SidecarMethod = keyof SidecarRequests;

/** Every notification the sidecar sends. */
export interface SidecarNotifications {
	"llm.cancel": LlmCancelParams;
	"ui.effects": UiEffectsParams;
	"protocol.error": ProtocolErrorParams;
}
export type SidecarNotification = keyof SidecarNotifications;

/** Every notification the shim sends. */
export interface ShimNotifications {
	"llm.event": LlmEventParams;
}

const isLlmUsage = record<LlmUsage>({ input: isNumber, output: isNumber, cost: isNumber });

/** The checks of every sidecar request's params and the shim's answer. */
export const SIDECAR_REQUESTS: {
	readonly [M in SidecarMethod]: { params: Check<SidecarRequests[M]["params"]>; result: Check<SidecarRequests[M]["result"]> };
} = {
	"llm.complete": {
		params: record<LlmCompleteParams>({
			model: isString,
			reasoningEffort: optional(nullable(isString)),
			system: nullable(isString),
			user: isString,
			maxTokens: nullable(isNumber),
		}),
		result: record<LlmCompleteResult>({ text: isString, stopReason: isString, usage: isLlmUsage }),
	},
};

/** The checks of every sidecar notification's params. */
export const SIDECAR_NOTIFICATIONS: { readonly [M in SidecarNotification]: Check<SidecarNotifications[M]> } = {
	"llm.cancel": record<LlmCancelParams>({ requestId: isString }),
	"ui.effects": record<UiEffectsParams>({ effects: isList }),
	"protocol.error": record<ProtocolErrorParams>({ message: isString }),
};

/** The checks of every shim notification's params. */
export const SHIM_NOTIFICATIONS: { readonly [M in keyof ShimNotifications]: Check<ShimNotifications[M]> } = {
	"llm.event": record<LlmEventParams>({
		requestId: isString,
		kind: oneOfValues<LlmEventKind>("text", "thinking", "usage"),
		delta: isString,
	}),
};

export const isErrorBody: Check<ErrorBody> = record<ErrorBody>({ code: isString, message: isString });

/** True for a method this shim answers. */
export function isSidecarMethod(method: string): method is SidecarMethod {
	return Object.prototype.hasOwnProperty.call(SIDECAR_REQUESTS, method);
}

/** True for a notification this shim reads. */
export function isSidecarNotification(method: string): method is SidecarNotification {
	return Object.prototype.hasOwnProperty.call(SIDECAR_NOTIFICATIONS, method);
}

/** A request of the sidecar, by method. */
export type SidecarRequest = { [M in SidecarMethod]: { method: M; params: SidecarRequests[M]["params"] } }[SidecarMethod];
/** The shim's answer to a request of the sidecar. */
export type SidecarResult = SidecarRequests[SidecarMethod]["result"];
/** A notification of the sidecar, by method. */
export type SidecarNotice = { [M in SidecarNotification]: { method: M; params: SidecarNotifications[M] } }[SidecarNotification];

/** Reads a sidecar request's params; `undefined` for a method this shim does not answer. */
export function readSidecarRequest(method: string, params: unknown): SidecarRequest | undefined {
	if (!isSidecarMethod(method)) return undefined;
	return { method, params: SIDECAR_REQUESTS[method].params(params, `${method} params`) };
}

/** Reads a sidecar notification's params; `undefined` for one this shim ignores. */
export function readSidecarNotice(method: string, params: unknown): SidecarNotice | undefined {
	switch (method) {
		case "llm.cancel":
			return { method, params: SIDECAR_NOTIFICATIONS[method](params, `${method} params`) };
		case "ui.effects":
			return { method, params: SIDECAR_NOTIFICATIONS[method](params, `${method} params`) };
		case "protocol.error":
			return { method, params: SIDECAR_NOTIFICATIONS[method](params, `${method} params`) };
		default:
			return undefined;
	}
}

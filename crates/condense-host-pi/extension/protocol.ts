// The sidecar protocol's effects, typed (docs/protocol.md, "Effects").
//
// Mirrors `condense_engine::protocol::Effect`. `parseEffect` is the
// boundary: a line's JSON goes in as `unknown` and comes out as an `Effect`
// whose every field was checked, or an error naming the field. The
// round-trip test (`protocol.test.ts`, driven by `tests/protocol_roundtrip.rs`)
// sends a Rust sample of every variant through it, so a field renamed on
// either side fails the build.

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
	| InputEffect;

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
		default:
			return undefined;
	}
}

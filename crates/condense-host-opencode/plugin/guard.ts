// Placeholders never reach a file the model writes.
//
// What the model is sent in place of an output (condense's stubs, a
// `<compressed-chain>`, purged arguments, OpenCode's own "cleared"
// placeholder) is not the output: a model that copies it into a file
// destroys the content it stands for (the failure users of other pruners
// met). `tool.execute.before` runs this over a file-writing tool's
// arguments and refuses the call, telling the model which refs to page
// back with `context_tree_query` and to write the real text.

import { OPENCODE_CLEARED } from "./messages.ts";

/** OpenCode's tools that write files (their arguments are checked). */
export const WRITING_TOOLS: ReadonlySet<string> = new Set(["write", "edit", "multiedit", "patch", "apply_patch"]);

/** The texts condense (or OpenCode) puts in place of an output, and what each is. */
const MARKERS: readonly { pattern: RegExp; what: string }[] = [
	{ pattern: /\[Summarized in pruner summary, ref `(t\d+)`\./g, what: "a condense summary stub" },
	{ pattern: /\[Oversized output spilled to file — \d+ bytes\.\]/g, what: "a condense spill stub" },
	{ pattern: /Or use context_tree_query with ref `(t\d+)`\./g, what: "a condense spill stub" },
	// Quotes may come JSON-escaped (a model copying arguments it was shown as JSON).
	{ pattern: /<compressed-chain id=\\?"b\d+\\?"(?: tools=\\?"([^"\\]*)\\?")?>/g, what: "a condense compressed chain" },
	{ pattern: /<purged-errored-args size=\\?"\d+\\?"\/>/g, what: "condense's purged arguments" },
	{ pattern: new RegExp(OPENCODE_CLEARED.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"), "g"), what: "OpenCode's cleared-output placeholder" },
];

/** A placeholder found in a tool call's arguments. */
export interface Placeholder {
	/** What kind of placeholder it is. */
	what: string;
	/** The `t<N>` refs it names (to page back), possibly none. */
	refs: string[];
}

function strings(value: unknown, out: string[], depth = 0): void {
	if (depth > 16) return;
	if (typeof value === "string") out.push(value);
	else if (Array.isArray(value)) for (const v of value) strings(v, out, depth + 1);
	else if (value && typeof value === "object") for (const v of Object.values(value)) strings(v, out, depth + 1);
}

/** The placeholders in `args` (every string, however nested); empty when there are none. */
export function placeholdersIn(args: unknown): Placeholder[] {
	const texts: string[] = [];
	strings(args, texts);
	const found = new Map<string, Set<string>>();
	for (const text of texts) {
		for (const { pattern, what } of MARKERS) {
			for (const m of text.matchAll(pattern)) {
				const refs = found.get(what) ?? new Set<string>();
				for (const r of (m[1] ?? "").split(",")) if (/^t\d+$/.test(r.trim())) refs.add(r.trim());
				found.set(what, refs);
			}
		}
	}
	return [...found].map(([what, refs]) => ({ what, refs: [...refs] }));
}

/** Why a write carrying `found` is refused, and what the model should do instead. */
export function refusal(tool: string, found: readonly Placeholder[]): string {
	const kinds = found.map((f) => f.what).join(", ");
	const refs = [...new Set(found.flatMap((f) => f.refs))];
	const page =
		refs.length > 0
			? `Page the original back with context_tree_query({"toolCallIds": ${JSON.stringify(refs)}}) and write the real text.`
			: "Read the original again (re-run the tool, or context_tree_query with the ref the summary names) and write the real text.";
	return `condense refused this ${tool} call: its arguments contain ${kinds}, which stands for content the model was not shown, not the content itself; writing it would destroy that content. ${page}`;
}

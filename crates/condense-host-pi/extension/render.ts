// The summary message's renderer: `[pruner] Turn <t> summary (<n> tool(s))`,
// wrapped and cut to the terminal's width with pi-tui's helpers when they
// load, else with a plain split.

function contentText(content: unknown): string {
	if (typeof content === "string") return content;
	if (!Array.isArray(content)) return "";
	return content
		.filter((b: any) => b?.type === "text" && typeof b.text === "string")
		.map((b: any) => b.text)
		.join("\n");
}

/** pi-tui's width helpers, loaded in the background (rendering is synchronous). */
let tui: { wrapTextWithAnsi?: (t: string, w: number) => string[]; truncateToWidth?: (t: string, w: number) => string } | undefined;
export function loadTui(): void {
	if (tui) return;
	(async () => {
		for (const spec of ["@earendil-works/pi-tui", "@mariozechner/pi-tui"]) {
			try {
				const mod: any = await import(spec);
				const m = typeof mod?.wrapTextWithAnsi === "function" ? mod : mod?.default;
				if (typeof m?.wrapTextWithAnsi === "function" && typeof m?.truncateToWidth === "function") {
					tui = m;
					return;
				}
			} catch {
				// try the next name
			}
		}
	})();
}

/** Terminal columns of one code point (wide scripts and emoji count two). */
function columns(ch: string): number {
	const cp = ch.codePointAt(0) ?? 0;
	if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) return 0;
	return cp >= 0x1100 ? 2 : 1;
}

/** Splits `text` into rows of at most `width` columns. */
function wrap(text: string, width: number): string[] {
	const clean = text.replace(/\t/g, "    ");
	if (typeof tui?.wrapTextWithAnsi === "function") {
		try {
			return tui.wrapTextWithAnsi(clean, width);
		} catch {
			// fall through to the plain split
		}
	}
	const rows: string[] = [];
	let row = "";
	let used = 0;
	for (const ch of clean) {
		const w = columns(ch);
		if (used + w > width && row !== "") {
			rows.push(row);
			row = "";
			used = 0;
		}
		row += ch;
		used += w;
	}
	rows.push(row);
	return rows;
}

/** `text` cut to `width` columns. */
function clip(text: string, width: number): string {
	if (typeof tui?.truncateToWidth === "function") {
		try {
			return tui.truncateToWidth(text, width);
		} catch {
			// fall through
		}
	}
	return wrap(text, width)[0] ?? "";
}

/** `[pruner] Turn <t> summary (<n> tool(s))`, and the summary when expanded. */
export function renderSummary(message: any, options: any, theme: any) {
	const details = message?.details ?? {};
	const refs = Array.isArray(details.toolCallRefs)
		? details.toolCallRefs
		: Array.isArray(details.toolCallIds)
			? details.toolCallIds
			: [];
	const title = `[pruner] Turn ${details.turnIndex ?? "?"} summary (${refs.length} tool(s))`;
	const body = options?.expanded ? contentText(message?.content) : "";
	return {
		render(width: number): string[] {
			const w = Math.max(2, Math.floor(width) || 80);
			const head = clip(title, w);
			let styled = head;
			try {
				if (typeof theme?.fg === "function") styled = theme.fg("customMessageLabel", head);
			} catch {
				styled = head;
			}
			const lines = [styled];
			if (body) for (const row of body.split("\n")) lines.push(...wrap(row, w));
			return lines;
		},
		invalidate() {},
	};
}

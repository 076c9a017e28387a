// For `node --test` only (tests/plugin_units.rs): the pi shim's modules
// import each other without an extension (`./protocol`), as pi's loader and
// OpenCode's Bun resolve them; Node does not, so a relative specifier
// without one is retried with `.ts`.
import { register } from "node:module";

register(
	"data:text/javascript," +
		encodeURIComponent(
			"export async function resolve(specifier, context, next) {" +
				"  try { return await next(specifier, context); } catch (err) {" +
				"    if (specifier.startsWith('.') && !/\\.[cm]?[jt]s$/.test(specifier)) return next(specifier + '.ts', context);" +
				"    throw err;" +
				"  }" +
				"}",
		),
);

//! The normalization table: for every key of the block, values in range,
//! values out of range or of the wrong type, and the value each is used as.

use serde_json::{json, Value};

/// One row: the key, the value found, the value used, whether it is reported.
pub struct Row {
    pub key: &'static str,
    pub input: Value,
    pub used: Value,
    pub warns: bool,
}

pub fn ok(key: &'static str, input: Value) -> Row {
    Row {
        key,
        used: input.clone(),
        input,
        warns: false,
    }
}

pub fn fixed(key: &'static str, input: Value, used: Value) -> Row {
    Row {
        key,
        input,
        used,
        warns: true,
    }
}

pub fn silent(key: &'static str, input: Value, used: Value) -> Row {
    Row {
        key,
        input,
        used,
        warns: false,
    }
}

pub fn rows() -> Vec<Row> {
    let u32_max = json!(u32::MAX);
    vec![
        // enabled
        ok("enabled", json!(true)),
        ok("enabled", json!(false)),
        fixed("enabled", json!("yes"), json!(false)),
        fixed("enabled", json!(1), json!(false)),
        fixed("enabled", json!(null), json!(false)),
        // showPruneStatusLine
        ok("showPruneStatusLine", json!(false)),
        fixed("showPruneStatusLine", json!("off"), json!(true)),
        // summarizerModel: any string, else default
        ok("summarizerModel", json!("anthropic/claude-haiku-4-5")),
        ok("summarizerModel", json!("openrouter/meta/llama")),
        ok("summarizerModel", json!("")),
        fixed("summarizerModel", json!(5), json!("default")),
        fixed("summarizerModel", json!(null), json!("default")),
        fixed("summarizerModel", json!({"id": "x"}), json!("default")),
        // summarizerThinking
        ok("summarizerThinking", json!("off")),
        ok("summarizerThinking", json!("xhigh")),
        fixed("summarizerThinking", json!("HIGH"), json!("default")),
        fixed("summarizerThinking", json!("max"), json!("default")),
        fixed("summarizerThinking", json!(3), json!("default")),
        // pruneOn
        ok("pruneOn", json!("on-demand")),
        ok("pruneOn", json!("agent-message")),
        fixed("pruneOn", json!("every-turn"), json!("agent-message")),
        fixed("pruneOn", json!(1), json!("agent-message")),
        // batchingMode (validated, unlike pi-condense)
        ok("batchingMode", json!("agent-message")),
        ok("batchingMode", json!("turn")),
        fixed("batchingMode", json!("per-turn"), json!("turn")),
        fixed("batchingMode", json!("Turn"), json!("turn")),
        fixed("batchingMode", json!(true), json!("turn")),
        // quietOversizedSkips
        ok("quietOversizedSkips", json!(true)),
        fixed("quietOversizedSkips", json!("true"), json!(false)),
        // minBatchChars: >= 0, floor, 0 disables
        ok("minBatchChars", json!(0)),
        ok("minBatchChars", json!(5000)),
        silent("minBatchChars", json!(1000.0), json!(1000)),
        fixed("minBatchChars", json!(2.7), json!(2)),
        fixed("minBatchChars", json!(0.5), json!(0)),
        fixed("minBatchChars", json!(-5), json!(1000)),
        fixed("minBatchChars", json!(-0.5), json!(1000)),
        fixed("minBatchChars", json!("500"), json!(1000)),
        fixed("minBatchChars", json!("NaN"), json!(1000)),
        fixed("minBatchChars", json!(null), json!(1000)),
        fixed("minBatchChars", json!([1]), json!(1000)),
        fixed("minBatchChars", json!(1e30), json!(u64::MAX)),
        // recoveryGraceTurns: >= 0, floor, 0 disables
        ok("recoveryGraceTurns", json!(0)),
        ok("recoveryGraceTurns", json!(8)),
        fixed("recoveryGraceTurns", json!(2.7), json!(2)),
        fixed("recoveryGraceTurns", json!(-1), json!(3)),
        fixed("recoveryGraceTurns", json!("3"), json!(3)),
        fixed("recoveryGraceTurns", json!(1e10), u32_max.clone()),
        // timeouts: >= 0, floor, 0 disables
        ok("summarizerIdleTimeoutMs", json!(0)),
        ok("summarizerIdleTimeoutMs", json!(45000)),
        fixed("summarizerIdleTimeoutMs", json!(1500.9), json!(1500)),
        fixed("summarizerIdleTimeoutMs", json!(-1), json!(20000)),
        fixed("summarizerIdleTimeoutMs", json!(false), json!(20000)),
        ok("summarizerMaxTimeoutMs", json!(0)),
        ok("summarizerMaxTimeoutMs", json!(600000)),
        fixed("summarizerMaxTimeoutMs", json!("10m"), json!(180000)),
        fixed("summarizerMaxTimeoutMs", json!(-180000), json!(180000)),
        // protectedTools
        ok("protectedTools", json!([])),
        ok("protectedTools", json!(["bash", "read"])),
        fixed("protectedTools", json!("bash"), json!([])),
        fixed("protectedTools", json!(null), json!([])),
        fixed(
            "protectedTools",
            json!(["bash", 3, null, "read"]),
            json!(["bash", "read"]),
        ),
        // protectedPaths: explicit [] is the kill switch
        ok("protectedPaths", json!([])),
        ok("protectedPaths", json!(["docs/**", "**/SKILL.md"])),
        fixed(
            "protectedPaths",
            json!("**/*.md"),
            json!(["**/skills/**/*.md"]),
        ),
        fixed(
            "protectedPaths",
            json!({"a": 1}),
            json!(["**/skills/**/*.md"]),
        ),
        fixed("protectedPaths", json!([1, "a/**"]), json!(["a/**"])),
        fixed("protectedPaths", json!([true]), json!([])),
        // dedupByContentHash
        ok("dedupByContentHash", json!(false)),
        fixed("dedupByContentHash", json!(0), json!(true)),
        // autoBudgetThreshold: (0, 1] or null; 0 means off
        ok("autoBudgetThreshold", json!(0.8)),
        ok("autoBudgetThreshold", json!(1)),
        ok("autoBudgetThreshold", json!(null)),
        silent("autoBudgetThreshold", json!(1.0), json!(1)),
        silent("autoBudgetThreshold", json!(0), json!(null)),
        fixed("autoBudgetThreshold", json!(1.5), json!(null)),
        fixed("autoBudgetThreshold", json!(-0.2), json!(null)),
        fixed("autoBudgetThreshold", json!(80), json!(null)),
        fixed("autoBudgetThreshold", json!("0.8"), json!(null)),
        fixed("autoBudgetThreshold", json!(true), json!(null)),
        // spillThreshold: >= 1, floor
        ok("spillThreshold", json!(1)),
        ok("spillThreshold", json!(131072)),
        fixed("spillThreshold", json!(100.9), json!(100)),
        fixed("spillThreshold", json!(0), json!(65536)),
        fixed("spillThreshold", json!(0.5), json!(65536)),
        fixed("spillThreshold", json!(-1), json!(65536)),
        fixed("spillThreshold", json!("big"), json!(65536)),
        // spillPreviewBytes: >= 0, floor
        ok("spillPreviewBytes", json!(0)),
        ok("spillPreviewBytes", json!(4096)),
        fixed("spillPreviewBytes", json!(-1), json!(2048)),
        fixed("spillPreviewBytes", json!(10.5), json!(10)),
        // budgetTurnDelta: (0, 1] or null
        ok("budgetTurnDelta", json!(0.1)),
        ok("budgetTurnDelta", json!(1)),
        silent("budgetTurnDelta", json!(0), json!(null)),
        fixed("budgetTurnDelta", json!(2), json!(null)),
        fixed("budgetTurnDelta", json!("0.1"), json!(null)),
        // chainCompression.*
        ok("chainCompression.enabled", json!(false)),
        fixed("chainCompression.enabled", json!("no"), json!(true)),
        ok("chainCompression.rollingWindow", json!(1)),
        ok("chainCompression.rollingWindow", json!(10)),
        fixed("chainCompression.rollingWindow", json!(0), json!(3)),
        fixed("chainCompression.rollingWindow", json!(0.5), json!(3)),
        fixed("chainCompression.rollingWindow", json!(2.7), json!(2)),
        fixed("chainCompression.rollingWindow", json!(-1), json!(3)),
        fixed("chainCompression.rollingWindow", json!("5"), json!(3)),
        fixed(
            "chainCompression.rollingWindow",
            json!(1e12),
            u32_max.clone(),
        ),
        ok("chainCompression.stripFinalAssistantThinking", json!(false)),
        fixed(
            "chainCompression.stripFinalAssistantThinking",
            json!(null),
            json!(true),
        ),
        ok("chainCompression.fuseRangeSummary", json!(false)),
        fixed("chainCompression.fuseRangeSummary", json!(1), json!(true)),
        // purgeErrors.*
        ok("purgeErrors.enabled", json!(false)),
        fixed("purgeErrors.enabled", json!("false"), json!(true)),
        ok("purgeErrors.cooldownTurns", json!(1)),
        ok("purgeErrors.cooldownTurns", json!(10)),
        fixed("purgeErrors.cooldownTurns", json!(0), json!(2)),
        fixed("purgeErrors.cooldownTurns", json!(3.9), json!(3)),
        fixed("purgeErrors.cooldownTurns", json!(-2), json!(2)),
        ok("purgeErrors.minArgChars", json!(0)),
        ok("purgeErrors.minArgChars", json!(100)),
        fixed("purgeErrors.minArgChars", json!(-1), json!(500)),
        fixed("purgeErrors.minArgChars", json!(99.99), json!(99)),
        fixed("purgeErrors.minArgChars", json!("500"), json!(500)),
        // thinkingStrip.*: off by default, window clamped to >= 1
        ok("thinkingStrip.enabled", json!(true)),
        ok("thinkingStrip.enabled", json!(false)),
        fixed("thinkingStrip.enabled", json!("true"), json!(false)),
        ok("thinkingStrip.keepLastTurns", json!(1)),
        ok("thinkingStrip.keepLastTurns", json!(100)),
        fixed("thinkingStrip.keepLastTurns", json!(0), json!(1)),
        fixed("thinkingStrip.keepLastTurns", json!(-3), json!(1)),
        fixed("thinkingStrip.keepLastTurns", json!(0.5), json!(1)),
        fixed("thinkingStrip.keepLastTurns", json!(2.7), json!(2)),
        fixed("thinkingStrip.keepLastTurns", json!("x"), json!(16)),
        fixed("thinkingStrip.keepLastTurns", json!(null), json!(16)),
        ok("economy.policy", json!("reference")),
        ok("economy.policy", json!("cache-aware")),
        fixed("economy.policy", json!("Cache-Aware"), json!("cache-aware")),
        fixed("economy.policy", json!("none"), json!("cache-aware")),
        fixed("economy.policy", json!(1), json!("cache-aware")),
        ok("economy.pressureShare", json!(0.5)),
        ok("economy.pressureShare", json!(1)),
        fixed("economy.pressureShare", json!(0), json!(0.8)),
        fixed("economy.pressureShare", json!(1.5), json!(0.8)),
        fixed("economy.pressureShare", json!("x"), json!(0.8)),
        ok("economy.profile", json!("anthropic-5m")),
        ok("economy.profile", json!("anthropic-1h")),
        ok("economy.profile", json!("openai")),
        ok("economy.profile", json!("no-cache")),
        fixed("economy.profile", json!("anthropic"), json!("anthropic-5m")),
        fixed("economy.profile", json!(5), json!("anthropic-5m")),
        ok("economy.maxExcess", json!(0)),
        ok("economy.maxExcess", json!(0.05)),
        ok("economy.maxExcess", json!(2)),
        ok("economy.maxExcess", json!(null)),
        fixed("economy.maxExcess", json!(-0.1), json!(0.02)),
        fixed("economy.maxExcess", json!("0"), json!(0.02)),
        fixed("economy.maxExcess", json!(true), json!(0.02)),
        ok("economy.missRates", json!([0, 0.1, 0.4, 0.7, 0.7])),
        ok("economy.missRates", json!(null)),
        ok("economy.missRates", json!("learn")),
        fixed("economy.missRates", json!("guess"), json!("learn")),
        silent(
            "economy.missRates",
            json!([0.1, 0.5]),
            json!([0.1, 0.5, 0.5, 0.5, 0.5]),
        ),
        fixed("economy.missRates", json!([1.5]), json!("learn")),
        fixed("economy.missRates", json!([]), json!("learn")),
        fixed("economy.missRates", json!("0.5"), json!("learn")),
        fixed(
            "economy.missRates",
            json!([0, 0, 0, 0, 0, 0]),
            json!("learn"),
        ),
        fixed("economy.missRates", json!([0.1, "x"]), json!("learn")),
        ok("economy.summarizerPrice", json!(0.33)),
        ok("economy.summarizerPrice", json!(5)),
        ok("economy.summarizerPrice", json!(0)),
        ok("economy.summarizerPrice", json!(null)),
        fixed("economy.summarizerPrice", json!(-1), json!(null)),
        fixed("economy.summarizerPrice", json!("1"), json!(null)),
        ok("economy.writePrice", json!(2)),
        ok("economy.writePrice", json!(null)),
        fixed("economy.writePrice", json!(-0.5), json!(null)),
        ok("economy.readPrice", json!(0.25)),
        fixed("economy.readPrice", json!(false), json!(null)),
        ok("economy.ttlSeconds", json!(3600)),
        ok("economy.ttlSeconds", json!(0)),
        fixed("economy.ttlSeconds", json!(-300), json!(null)),
        ok("economy.minCacheableTokens", json!(2048)),
        fixed("economy.minCacheableTokens", json!("many"), json!(null)),
        // A fraction rounds down, and is reported as every rounding is.
        fixed("economy.minCacheableTokens", json!(2.7), json!(2)),
        // Past the bound, products of prices and tokens leave f64's range.
        fixed("economy.writePrice", json!(1e308), json!(null)),
        fixed("economy.summarizerPrice", json!(2e6), json!(null)),
        fixed("economy.maxExcess", json!(1e308), json!(0.02)),
        fixed("thinkingStrip.keepLastTurns", json!(1e12), u32_max),
    ]
}

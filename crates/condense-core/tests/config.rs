//! The `contextPrune` block: normalization of every key, deep merge of the
//! nested objects, warnings, and the unknown-key round trip.

use condense_core::{
    replace_context_prune, BatchingMode, Config, ConfigWarning, PruneOn, ThinkingLevel,
    SETTINGS_KEY,
};
use serde_json::{json, Value};

/// Builds a block holding `value` at a dotted `key` (`a` or `a.b`).
fn block_with(key: &str, value: &Value) -> Value {
    match key.split_once('.') {
        None => json!({ key: value }),
        Some((outer, inner)) => json!({ outer: { inner: value } }),
    }
}

/// The normalized JSON of a dotted `key` after saving `config`.
fn saved(config: &Config, key: &str) -> Value {
    let out = config.to_settings_value(&json!({}));
    key.split('.').fold(out, |v, k| v[k].clone())
}

/// One row: the key, the value found, the value used, whether it is reported.
struct Row {
    key: &'static str,
    input: Value,
    used: Value,
    warns: bool,
}

fn ok(key: &'static str, input: Value) -> Row {
    Row {
        key,
        used: input.clone(),
        input,
        warns: false,
    }
}

fn fixed(key: &'static str, input: Value, used: Value) -> Row {
    Row {
        key,
        input,
        used,
        warns: true,
    }
}

fn silent(key: &'static str, input: Value, used: Value) -> Row {
    Row {
        key,
        input,
        used,
        warns: false,
    }
}

fn rows() -> Vec<Row> {
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
        fixed("economy.policy", json!("Cache-Aware"), json!("reference")),
        fixed("economy.policy", json!("none"), json!("reference")),
        fixed("economy.policy", json!(1), json!("reference")),
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
        fixed("economy.maxExcess", json!(-0.1), json!(null)),
        fixed("economy.maxExcess", json!("0"), json!(null)),
        fixed("economy.maxExcess", json!(true), json!(null)),
        fixed("thinkingStrip.keepLastTurns", json!(1e12), u32_max),
    ]
}

#[test]
fn every_key_normalizes_by_its_rule() {
    let mut failures = Vec::new();
    for row in rows() {
        let block = block_with(row.key, &row.input);
        let (config, warnings) = Config::from_settings_value(&block);
        let got = saved(&config, row.key);
        let expected_warnings = if row.warns {
            vec![ConfigWarning {
                key: row.key.to_owned(),
                value: row.input.to_string(),
                used: row.used.to_string(),
            }]
        } else {
            Vec::new()
        };
        if got != row.used || warnings != expected_warnings {
            failures.push(format!(
                "{} = {}: got {got} with {warnings:?}, want {} with {expected_warnings:?}",
                row.key, row.input, row.used
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_known_key_has_a_row() {
    let keys: Vec<&str> = rows().iter().map(|r| r.key).collect();
    let out = Config::default().to_settings_value(&json!({}));
    for (k, v) in out.as_object().unwrap() {
        match v {
            Value::Object(sub) => {
                for sk in sub.keys() {
                    let dotted = format!("{k}.{sk}");
                    assert!(keys.contains(&dotted.as_str()), "no row for {dotted}");
                }
            }
            _ => assert!(keys.contains(&k.as_str()), "no row for {k}"),
        }
    }
}

#[test]
fn normalized_values_reach_the_struct() {
    let (c, warnings) = Config::from_settings_value(&json!({
        "enabled": true,
        "showPruneStatusLine": false,
        "summarizerModel": "anthropic/claude-haiku-4-5",
        "summarizerThinking": "low",
        "pruneOn": "on-demand",
        "batchingMode": "agent-message",
        "quietOversizedSkips": true,
        "minBatchChars": 0,
        "recoveryGraceTurns": 0,
        "summarizerIdleTimeoutMs": 0,
        "summarizerMaxTimeoutMs": 300000,
        "protectedTools": ["bash"],
        "protectedPaths": [],
        "dedupByContentHash": false,
        "autoBudgetThreshold": 0.7,
        "spillThreshold": 1000,
        "spillPreviewBytes": 0,
        "budgetTurnDelta": 0.25,
        "chainCompression": {"enabled": false, "rollingWindow": 5,
            "stripFinalAssistantThinking": false, "fuseRangeSummary": false},
        "purgeErrors": {"enabled": false, "cooldownTurns": 4, "minArgChars": 0},
        "thinkingStrip": {"enabled": true, "keepLastTurns": 8},
        "economy": {"policy": "cache-aware", "pressureShare": 0.9, "profile": "openai"}
    }));
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(c.enabled);
    assert!(!c.show_prune_status_line);
    assert_eq!(c.summarizer_model, "anthropic/claude-haiku-4-5");
    assert_eq!(c.summarizer_thinking, "low");
    assert_eq!(c.prune_on, PruneOn::OnDemand);
    assert_eq!(c.batching_mode, BatchingMode::AgentMessage);
    assert!(c.quiet_oversized_skips);
    assert_eq!(c.min_batch_chars, 0);
    assert_eq!(c.recovery_grace_turns, 0);
    assert_eq!(c.summarizer_idle_timeout_ms, 0);
    assert_eq!(c.summarizer_max_timeout_ms, 300_000);
    assert_eq!(c.protected_tools, vec!["bash".to_owned()]);
    assert!(c.protected_paths.is_empty());
    assert!(!c.dedup_by_content_hash);
    assert_eq!(c.auto_budget_threshold, Some(0.7));
    assert_eq!(c.spill_threshold, 1000);
    assert_eq!(c.spill_preview_bytes, 0);
    assert_eq!(c.budget_turn_delta, Some(0.25));
    assert!(!c.chain_compression.enabled);
    assert_eq!(c.chain_compression.rolling_window, 5);
    assert!(!c.chain_compression.strip_final_assistant_thinking);
    assert!(!c.chain_compression.fuse_range_summary);
    assert!(!c.purge_errors.enabled);
    assert_eq!(c.purge_errors.cooldown_turns, 4);
    assert_eq!(c.purge_errors.min_arg_chars, 0);
    assert!(c.thinking_strip.enabled);
    assert_eq!(c.thinking_strip.keep_last_turns, 8);
    assert_eq!(c.economy.policy, condense_core::Policy::CacheAware);
    assert_eq!(c.economy.pressure_share, 0.9);
    assert_eq!(c.economy.profile, "openai");
}

#[test]
fn defaults_and_their_camel_case_form() {
    let (c, warnings) = Config::from_settings_value(&json!({}));
    assert_eq!(c, Config::default());
    assert!(warnings.is_empty());
    assert!(
        !c.thinking_strip.enabled,
        "thinking strip must be off by default"
    );
    assert_eq!(
        c.to_settings_value(&Value::Null),
        json!({
            "enabled": false,
            "showPruneStatusLine": true,
            "summarizerModel": "default",
            "summarizerThinking": "default",
            "pruneOn": "agent-message",
            "batchingMode": "turn",
            "quietOversizedSkips": false,
            "minBatchChars": 1000,
            "recoveryGraceTurns": 3,
            "summarizerIdleTimeoutMs": 20000,
            "summarizerMaxTimeoutMs": 180000,
            "protectedTools": [],
            "protectedPaths": ["**/skills/**/*.md"],
            "dedupByContentHash": true,
            "autoBudgetThreshold": null,
            "spillThreshold": 65536,
            "spillPreviewBytes": 2048,
            "budgetTurnDelta": null,
            "chainCompression": {"enabled": true, "rollingWindow": 3,
                "stripFinalAssistantThinking": true, "fuseRangeSummary": true},
            "purgeErrors": {"enabled": true, "cooldownTurns": 2, "minArgChars": 500},
            "thinkingStrip": {"enabled": false, "keepLastTurns": 16},
            "economy": {"policy": "reference", "pressureShare": 0.8, "profile": "anthropic-5m", "maxExcess": null}
        })
    );
}

#[test]
fn every_thinking_level_is_accepted() {
    for level in ThinkingLevel::ALL.map(ThinkingLevel::as_str) {
        let (c, w) = Config::from_settings_value(&json!({ "summarizerThinking": level }));
        assert_eq!(c.summarizer_thinking, level);
        assert!(w.is_empty());
    }
}

#[test]
fn mode_names_round_trip() {
    for m in PruneOn::ALL {
        assert_eq!(PruneOn::from_name(m.name()), Some(m));
    }
    for m in BatchingMode::ALL {
        assert_eq!(BatchingMode::from_name(m.name()), Some(m));
    }
    assert_eq!(PruneOn::from_name("On-Demand"), None);
    assert_eq!(BatchingMode::from_name(""), None);
}

#[test]
fn partial_nested_objects_keep_the_other_defaults() {
    let (c, warnings) = Config::from_settings_value(&json!({
        "chainCompression": {"rollingWindow": 5},
        "purgeErrors": {"enabled": false},
        "thinkingStrip": {"keepLastTurns": 4}
    }));
    assert!(warnings.is_empty());
    let d = Config::default();
    assert_eq!(c.chain_compression.rolling_window, 5);
    assert_eq!(c.chain_compression.enabled, d.chain_compression.enabled);
    assert!(c.chain_compression.strip_final_assistant_thinking);
    assert!(c.chain_compression.fuse_range_summary);
    assert!(!c.purge_errors.enabled);
    assert_eq!(c.purge_errors.cooldown_turns, 2);
    assert_eq!(c.purge_errors.min_arg_chars, 500);
    assert!(!c.thinking_strip.enabled);
    assert_eq!(c.thinking_strip.keep_last_turns, 4);
}

#[test]
fn empty_nested_objects_are_all_defaults() {
    let (c, warnings) = Config::from_settings_value(&json!({
        "chainCompression": {}, "purgeErrors": {}, "thinkingStrip": {}
    }));
    assert!(warnings.is_empty());
    assert_eq!(c, Config::default());
}

#[test]
fn a_non_object_nested_value_gives_its_defaults_with_a_warning() {
    let (c, warnings) = Config::from_settings_value(&json!({
        "chainCompression": true,
        "purgeErrors": null,
        "thinkingStrip": [1]
    }));
    assert_eq!(c, Config::default());
    let text: Vec<String> = warnings.iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        vec![
            "contextPrune.chainCompression: invalid value true; using \
             {\"enabled\":true,\"rollingWindow\":3,\"stripFinalAssistantThinking\":true,\
             \"fuseRangeSummary\":true}",
            "contextPrune.purgeErrors: invalid value null; using \
             {\"enabled\":true,\"cooldownTurns\":2,\"minArgChars\":500}",
            "contextPrune.thinkingStrip: invalid value [1]; using \
             {\"enabled\":false,\"keepLastTurns\":16}",
        ]
    );
}

#[test]
fn warnings_display_key_value_and_used_value() {
    let (_, warnings) = Config::from_settings_value(&json!({
        "minBatchChars": -5,
        "batchingMode": "sometimes",
        "chainCompression": {"rollingWindow": 0},
        "thinkingStrip": {"keepLastTurns": 0},
        "protectedTools": ["bash", 7]
    }));
    let text: Vec<String> = warnings.iter().map(ToString::to_string).collect();
    // Reported in the documented key order, whatever the file's order.
    assert_eq!(
        text,
        vec![
            "contextPrune.batchingMode: invalid value \"sometimes\"; using \"turn\"",
            "contextPrune.minBatchChars: invalid value -5; using 1000",
            "contextPrune.protectedTools: invalid value [\"bash\",7]; using [\"bash\"]",
            "contextPrune.chainCompression.rollingWindow: invalid value 0; using 3",
            "contextPrune.thinkingStrip.keepLastTurns: invalid value 0; using 1",
        ]
    );
}

#[test]
fn a_non_object_block_gives_defaults_with_one_warning() {
    for bad in [json!(5), json!("on"), json!([]), json!(null)] {
        let (c, warnings) = Config::from_settings_value(&bad);
        assert_eq!(c, Config::default());
        assert_eq!(warnings.len(), 1);
        assert_eq!(warnings[0].key, "");
        assert_eq!(
            warnings[0].to_string(),
            format!("contextPrune: invalid value {bad}; using {{}}")
        );
    }
}

#[test]
fn whole_settings_file_picks_the_context_prune_key() {
    let (c, w) = Config::from_settings_file_value(&json!({
        "theme": "dark",
        "contextPrune": {"enabled": true, "minBatchChars": "x"}
    }));
    assert!(c.enabled);
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].key, "minBatchChars");

    // Missing key or a non-object file: defaults, silently.
    for settings in [
        json!({"theme": "dark"}),
        json!({}),
        json!([1, 2]),
        json!(null),
    ] {
        let (c, w) = Config::from_settings_file_value(&settings);
        assert_eq!(c, Config::default());
        assert!(w.is_empty(), "{settings}: {w:?}");
    }

    // A present but non-object key is reported.
    let (c, w) = Config::from_settings_file_value(&json!({ "contextPrune": true }));
    assert_eq!(c, Config::default());
    assert_eq!(w.len(), 1);
}

#[test]
fn unknown_keys_survive_a_round_trip() {
    let original = json!({
        "remindUnprunedCount": 5,
        "enabled": true,
        "legacyBlock": {"enabled": true, "keepLastTurns": 16},
        "minBatchChars": -5,
        "chainCompression": {
            "thinkingStrip": {"enabled": true, "keepLastTurns": 16},
            "rollingWindow": 5
        },
        "thinkingStrip": {"mode": "old", "keepLastTurns": 4},
        "zzz": [1, {"a": null}]
    });
    let (config, warnings) = Config::from_settings_value(&original);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let out = config.to_settings_value(&original);

    // Unknown keys, top-level and nested, unchanged.
    assert_eq!(out["remindUnprunedCount"], json!(5));
    assert_eq!(out["legacyBlock"], original["legacyBlock"]);
    assert_eq!(out["zzz"], original["zzz"]);
    assert_eq!(
        out["chainCompression"]["thinkingStrip"],
        json!({"enabled": true, "keepLastTurns": 16})
    );
    assert_eq!(out["thinkingStrip"]["mode"], json!("old"));

    // Known keys normalized, missing ones filled in.
    assert_eq!(out["minBatchChars"], json!(1000));
    assert_eq!(out["chainCompression"]["rollingWindow"], json!(5));
    assert_eq!(out["chainCompression"]["enabled"], json!(true));
    assert_eq!(out["thinkingStrip"]["enabled"], json!(false));
    assert_eq!(out["thinkingStrip"]["keepLastTurns"], json!(4));
    assert_eq!(out["spillThreshold"], json!(65536));

    // Original keys keep their position; new known keys follow in order.
    let keys: Vec<&str> = out
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        &keys[..8],
        &[
            "remindUnprunedCount",
            "enabled",
            "legacyBlock",
            "minBatchChars",
            "chainCompression",
            "thinkingStrip",
            "zzz",
            "showPruneStatusLine",
        ]
    );
    let cc_keys: Vec<&str> = out["chainCompression"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        cc_keys,
        [
            "thinkingStrip",
            "rollingWindow",
            "enabled",
            "stripFinalAssistantThinking",
            "fuseRangeSummary"
        ]
    );

    // Reloading is silent and gives the same config; saving again is a fixed point.
    let (again, warnings) = Config::from_settings_value(&out);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(again, config);
    assert_eq!(again.to_settings_value(&out), out);
}

#[test]
fn saving_over_a_non_object_block_writes_every_key() {
    let c = Config::default();
    assert_eq!(
        c.to_settings_value(&json!("junk")),
        c.to_settings_value(&json!({}))
    );
    let out = c.to_settings_value(&json!({"chainCompression": 3}));
    assert_eq!(out["chainCompression"]["rollingWindow"], json!(3));
}

#[test]
fn saved_text_is_camel_case_in_order() {
    let text = serde_json::to_string(&Config::default().to_settings_value(&json!({}))).unwrap();
    assert!(text
        .starts_with(r#"{"enabled":false,"showPruneStatusLine":true,"summarizerModel":"default""#));
    assert!(text.ends_with(
        r#""thinkingStrip":{"enabled":false,"keepLastTurns":16},"economy":{"policy":"reference","pressureShare":0.8,"profile":"anthropic-5m","maxExcess":null}}"#
    ));
}

#[test]
fn replacing_the_block_keeps_every_other_settings_key() {
    let settings = json!({
        "theme": "dark",
        "contextPrune": {"enabled": false},
        "packages": ["a", "b"],
        "defaultModel": "x"
    });
    let out = replace_context_prune(&settings, json!({"enabled": true}));
    assert_eq!(
        out,
        json!({
            "theme": "dark",
            "contextPrune": {"enabled": true},
            "packages": ["a", "b"],
            "defaultModel": "x"
        })
    );
    let keys: Vec<&str> = out
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["theme", "contextPrune", "packages", "defaultModel"]);

    // Appended when missing; a non-object file becomes a fresh object.
    let out = replace_context_prune(&json!({"theme": "dark"}), json!({}));
    let keys: Vec<&str> = out
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["theme", SETTINGS_KEY]);
    assert_eq!(
        replace_context_prune(&json!([1]), json!({})),
        json!({"contextPrune": {}})
    );
}

#[test]
fn whole_settings_round_trip_keeps_unknown_keys_at_both_levels() {
    let settings = json!({
        "theme": "dark",
        "contextPrune": {"remindUnprunedCount": 5, "purgeErrors": {"cooldownTurns": 0, "x": 1}},
        "after": true
    });
    let (config, warnings) = Config::from_settings_file_value(&settings);
    assert_eq!(warnings.len(), 1);
    let out = config.to_settings_file_value(&settings);
    assert_eq!(out["theme"], json!("dark"));
    assert_eq!(out["after"], json!(true));
    assert_eq!(out["contextPrune"]["remindUnprunedCount"], json!(5));
    assert_eq!(out["contextPrune"]["purgeErrors"]["x"], json!(1));
    assert_eq!(
        out["contextPrune"]["purgeErrors"]["cooldownTurns"],
        json!(2)
    );
    let keys: Vec<&str> = out
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["theme", "contextPrune", "after"]);

    // A file without the block gets one with every key.
    let out = Config::default().to_settings_file_value(&json!({"theme": "dark"}));
    assert_eq!(
        out[SETTINGS_KEY],
        Config::default().to_settings_value(&json!({}))
    );
}

#[test]
fn fractions_are_written_without_a_spurious_decimal() {
    let (c, _) =
        Config::from_settings_value(&json!({"autoBudgetThreshold": 1.0, "budgetTurnDelta": 0.05}));
    let out = c.to_settings_value(&json!({}));
    let text = serde_json::to_string(&out).unwrap();
    assert!(text.contains(r#""autoBudgetThreshold":1,"#), "{text}");
    assert!(text.contains(r#""budgetTurnDelta":0.05,"#), "{text}");
}

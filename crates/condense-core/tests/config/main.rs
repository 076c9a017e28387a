//! The `contextPrune` block: normalization of every key, deep merge of the
//! nested objects, warnings, and the unknown-key round trip.

mod rows;

use condense_core::{
    replace_context_prune, BatchingMode, Config, ConfigWarning, PruneOn, ThinkingLevel,
    SETTINGS_KEY,
};
use serde_json::{json, Value};

use rows::rows;

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
        "economy": {"policy": "reference", "pressureShare": 0.9, "profile": "openai", "maxExcess": null,
                    "summarizerPrice": 0.25, "writePrice": 1.1, "readPrice": 0.5, "ttlSeconds": 600,
                    "minCacheableTokens": 2048}
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
    assert_eq!(c.economy.policy, condense_core::Policy::Reference);
    assert_eq!(c.economy.pressure_share, 0.9);
    assert_eq!(c.economy.profile, "openai");
    assert_eq!(c.economy.max_excess, None);
    assert_eq!(
        c.economy.overrides,
        condense_core::ProfileOverrides {
            summarizer: Some(0.25),
            write: Some(1.1),
            read: Some(0.5),
            ttl_seconds: Some(600.0),
            min_cacheable_tokens: Some(2048),
            output: None,
            usd_per_mtok_input: None,
        }
    );
    // The policy plans with the named profile as overridden.
    let prices = c.economy.prices();
    assert_eq!(prices.name, "openai");
    assert_eq!(prices.summarizer, 0.25);
    let cache = prices.cache.expect("openai caches");
    assert_eq!((cache.write, cache.read), (1.1, 0.5));
    assert_eq!((cache.ttl_ms, cache.min_cacheable_tokens), (600_000, 2048));
}

#[test]
fn cache_prices_need_a_profile_with_a_cache() {
    let (c, warnings) = Config::from_settings_value(&json!({
        "economy": {"profile": "no-cache", "writePrice": 2, "ttlSeconds": 60, "summarizerPrice": 3}
    }));
    let keys: Vec<&str> = warnings.iter().map(|w| w.key.as_str()).collect();
    assert_eq!(keys, ["economy.writePrice", "economy.ttlSeconds"]);
    assert_eq!(c.economy.overrides.write, None);
    assert_eq!(c.economy.overrides.ttl_seconds, None);
    let prices = c.economy.prices();
    assert_eq!((prices.cache, prices.summarizer), (None, 3.0));
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
            "economy": {"policy": "cache-aware", "pressureShare": 0.8, "profile": "anthropic-5m", "maxExcess": 0.02,
                        "missRates": "learn", "summarizerPrice": null, "writePrice": null, "readPrice": null, "ttlSeconds": null,
                        "minCacheableTokens": null}
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
        r#""thinkingStrip":{"enabled":false,"keepLastTurns":16},"economy":{"policy":"cache-aware","pressureShare":0.8,"profile":"anthropic-5m","maxExcess":0.02,"missRates":"learn","summarizerPrice":null,"writePrice":null,"readPrice":null,"ttlSeconds":null,"minCacheableTokens":null}}"#
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

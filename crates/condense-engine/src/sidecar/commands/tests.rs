//! `/pruner` answered against a real engine: texts, saved settings, dialogs,
//! progress and the flushes `now` and `compact` run.

use std::sync::{Arc, Mutex};

use condense_core::ModelRef;
use condense_store::time::format_iso;
use condense_summarizer::{Extractive, SummarizerSettings, Target};

use crate::session::EngineLock;
use crate::{Effects, Engine};
use condense_core::format_count;
use condense_summarizer::Summarizer;
use serde_json::Value;

use super::settings::SETTINGS;
use super::{format_cost, run, tree_text, CommandEnv, CommandHost, SUBCOMMANDS};
use crate::StartParams;
use serde_json::json;
use std::sync::MutexGuard;

struct TestHost {
    engine: Mutex<Engine>,
    ui: Mutex<Vec<Value>>,
}

impl EngineLock for TestHost {
    fn engine(&self) -> MutexGuard<'_, Engine> {
        self.engine.lock().unwrap()
    }
}

impl CommandHost for TestHost {
    fn summarizer(&self) -> Summarizer {
        let config = self.engine.lock().unwrap().config().clone();
        Summarizer::new(
            Target::new(
                Arc::new(Extractive::new()),
                ModelRef::new("test", "extractive"),
            ),
            SummarizerSettings::from_config(&config),
        )
    }
    fn ui(&self, effects: Effects) {
        self.ui
            .lock()
            .unwrap()
            .extend(effects.iter().map(|e| serde_json::to_value(e).unwrap()));
    }
}

const T0: i64 = 1_780_000_000_000;

fn entry(n: usize, ts: i64, message: Value) -> Value {
    json!({
        "type": "message",
        "id": format!("{n:08x}"),
        "parentId": if n == 0 { Value::Null } else { json!(format!("{:08x}", n - 1)) },
        "timestamp": format_iso(ts),
        "message": message,
    })
}

/// A user prompt, `calls` tool turns reading a big file each, and a
/// final text reply: one closed chain, nothing summarized.
fn branch(calls: usize) -> Vec<Value> {
    let mut out = Vec::new();
    let mut ts = T0;
    let mut push = |out: &mut Vec<Value>, m: Value| {
        ts += 1000;
        let mut m = m;
        m["timestamp"] = json!(ts);
        out.push(entry(out.len(), ts, m));
    };
    push(
        &mut out,
        json!({"role": "user", "content": [{"type": "text", "text": "read the files"}]}),
    );
    for i in 0..calls {
        push(
            &mut out,
            json!({"role": "assistant", "content": [
            {"type": "toolCall", "id": format!("call_{i}"), "name": "read", "arguments": {"path": format!("f{i}.txt")}}
        ], "stopReason": "toolUse"}),
        );
        let text: String = (0..60)
            .map(|l| format!("file {i} line {l}: /src/module_{i}.rs ok\n"))
            .collect();
        push(
            &mut out,
            json!({"role": "toolResult", "toolCallId": format!("call_{i}"), "toolName": "read",
            "content": [{"type": "text", "text": text}], "isError": false}),
        );
    }
    push(
        &mut out,
        json!({"role": "assistant", "content": [{"type": "text", "text": "Done."}], "stopReason": "stop"}),
    );
    out
}

fn host(settings: Value, branch: Vec<Value>) -> TestHost {
    let mut e = Engine::default();
    e.start(StartParams {
        settings,
        session_id: "s1".into(),
        session_dir: None,
        misses_dir: None,
        session_file: None,
        branch: crate::jsonl(branch.iter().map(Value::to_string)),
        tree: false,
    });
    TestHost {
        engine: Mutex::new(e),
        ui: Mutex::new(Vec::new()),
    }
}

fn enabled() -> Value {
    json!({"contextPrune": {"enabled": true, "someFutureKey": 7}, "theme": "dark"})
}

/// The effects as the shim receives them.
fn cmd(h: &TestHost, args: &str) -> Vec<Value> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(run(h, args, CommandEnv::default()))
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect()
}

fn texts(effects: &[Value]) -> Vec<String> {
    effects
        .iter()
        .filter(|e| e["kind"] == "notify")
        .map(|e| e["text"].as_str().unwrap_or("").to_owned())
        .collect()
}

fn saved(effects: &[Value]) -> Option<&Value> {
    effects
        .iter()
        .find(|e| e["kind"] == "saveSettings")
        .map(|e| &e["contextPrune"])
}

#[test]
fn on_off_save_and_confirm() {
    let h = host(enabled(), Vec::new());
    let out = cmd(&h, "off");
    assert_eq!(texts(&out), ["Context pruning disabled."]);
    let block = saved(&out).expect("saved");
    assert_eq!(block["enabled"], false);
    assert_eq!(block["someFutureKey"], 7, "unknown keys survive");
    assert!(out
        .iter()
        .any(|e| e["kind"] == "status" && e["text"] == "│ prune: OFF"));
    let out = cmd(&h, "on");
    assert_eq!(texts(&out), ["Context pruning enabled."]);
    assert_eq!(saved(&out).unwrap()["enabled"], true);
}

#[test]
fn status_has_settings_summarizer_and_context_blocks() {
    let h = host(enabled(), branch(2));
    let t = texts(&cmd(&h, "status")).remove(0);
    for line in [
        "pruner status:",
        "  enabled:  true",
        "  model:    default",
        "  thinking: Default (default)",
        "  idle to:  20s",
        "  max to:   180s",
        "  trigger:  On agent message",
        "  batching: Per turn (turn)",
        "  dedup:    on",
        "  status:   on",
        "  (no summarizer calls yet)",
        "  --- context ---",
        "  chain share:  ",
        "  rearmed:      yes",
    ] {
        assert!(t.contains(line), "{line:?} missing from\n{t}");
    }
    assert!(
        t.contains("  frontier gap: ") && t.contains(" tokens"),
        "{t}"
    );
    let idle = host(
        json!({"contextPrune": {"enabled": true, "summarizerIdleTimeoutMs": 0}}),
        Vec::new(),
    );
    let t = texts(&cmd(&idle, "status")).remove(0);
    assert!(t.contains("  idle to:  disabled"), "{t}");
    assert!(!t.contains("rearmed"), "{t}");
}

#[test]
fn stats_and_cost_formatting() {
    let h = host(enabled(), Vec::new());
    assert_eq!(
        texts(&cmd(&h, "stats")),
        ["pruner stats: no summarizer calls yet."]
    );
    let h = host(
        enabled(),
        vec![json!({"type": "custom", "id": "00000000", "parentId": null,
            "timestamp": format_iso(T0), "customType": "context-prune-stats",
            "data": {"callCount": 3, "totalInputTokens": 12_345, "totalOutputTokens": 250,
                "totalCost": 0.0031, "chainsCompressed": 2}})],
    );
    assert_eq!(
        texts(&cmd(&h, "stats")),
        ["pruner stats:\n  calls:       3\n  input:       12.3k tokens\n  output:      250 tokens\n  cost:        $0.003\n  chains:      2 compressed"]
    );
    assert_eq!(format_cost(0.0004), "<$0.001");
    assert_eq!(format_cost(0.0), "$0.000");
    assert_eq!(format_count(1250), "1.3k", "JavaScript rounds the tie up");
    assert_eq!(
        format_count(1150),
        "1.1k",
        "1.15 is below the tie in binary"
    );
    assert_eq!(format_count(2_500_000), "2.5M");
    assert_eq!(format_count(999), "999");
}

#[test]
fn model_and_thinking() {
    let h = host(enabled(), Vec::new());
    assert_eq!(
        texts(&cmd(&h, "model")),
        ["Current summarizer model: default\nCurrent summarizer thinking: Default (default)"]
    );
    let out = cmd(&h, "model openai/gpt-4.1-mini:low");
    assert_eq!(
        texts(&out),
        ["Summarizer model set to: openai/gpt-4.1-mini with thinking low"]
    );
    let block = saved(&out).unwrap();
    assert_eq!(block["summarizerModel"], "openai/gpt-4.1-mini");
    assert_eq!(block["summarizerThinking"], "low");
    let out = cmd(&h, "model anthropic/claude:huge");
    assert!(saved(&out).is_none());
    assert_eq!(out[0]["level"], "warning");
    assert_eq!(
        texts(&out),
        ["Invalid model thinking suffix: huge. Use one of: default, off, minimal, low, medium, high, xhigh."]
    );
    assert_eq!(
        texts(&cmd(&h, "thinking")),
        ["Current summarizer thinking: Low (low)"]
    );
    let out = cmd(&h, "thinking xhigh");
    assert_eq!(texts(&out), ["Summarizer thinking set to: xhigh"]);
    assert_eq!(saved(&out).unwrap()["summarizerThinking"], "xhigh");
    let out = cmd(&h, "thinking lots");
    assert!(saved(&out).is_none());
    assert!(texts(&out)[0].starts_with("Invalid summarizer thinking level: lots."));
}

#[test]
fn prune_on_is_validated_and_batching_too() {
    let h = host(enabled(), Vec::new());
    let out = cmd(&h, "prune-on every-turn");
    assert!(saved(&out).is_none(), "a removed mode is refused");
    assert_eq!(
        texts(&out),
        ["Invalid prune trigger: every-turn. Use one of: agent-message, on-demand."]
    );
    let out = cmd(&h, "prune-on on-demand");
    assert_eq!(saved(&out).unwrap()["pruneOn"], "on-demand");
    let out = cmd(&h, "prune-on");
    let pick = out
        .iter()
        .find(|e| e["kind"] == "select")
        .expect("a picker");
    assert_eq!(pick["then"], "prune-on");
    assert_eq!(pick["values"], json!(["agent-message", "on-demand"]));
    let out = cmd(&h, "batching agent-message");
    assert_eq!(texts(&out), ["Batching mode set to: Per agent message"]);
    assert_eq!(saved(&out).unwrap()["batchingMode"], "agent-message");
    let out = cmd(&h, "batching session");
    assert!(saved(&out).is_none());
    assert_eq!(
        texts(&out),
        ["Invalid batching mode: session. Use one of: turn, agent-message."]
    );
}

#[test]
fn protected_lists() {
    let h = host(enabled(), Vec::new());
    let out = cmd(&h, "protected-tools todo, read  bash");
    assert_eq!(texts(&out), ["Protected tools: todo, read, bash"]);
    assert_eq!(
        saved(&out).unwrap()["protectedTools"],
        json!(["todo", "read", "bash"])
    );
    assert!(h.engine().protection().is_protected("todo", &json!({})));
    let out = cmd(&h, "protected-tools none");
    assert_eq!(texts(&out), ["Protected tools: (none)"]);
    assert_eq!(saved(&out).unwrap()["protectedTools"], json!([]));
    // No argument: the list, and an input whose empty answer clears.
    let out = cmd(&h, "protected-paths");
    assert_eq!(texts(&out), ["Protected paths: **/skills/**/*.md"]);
    let ask = out.iter().find(|e| e["kind"] == "input").expect("an input");
    assert_eq!(ask["then"], "protected-paths --input");
    let out = cmd(&h, "protected-paths --input");
    assert_eq!(texts(&out), ["Protected paths: (none)"]);
    assert_eq!(saved(&out).unwrap()["protectedPaths"], json!([]));
}

#[test]
fn numbers_and_dedup() {
    let h = host(enabled(), Vec::new());
    assert_eq!(
        texts(&cmd(&h, "min-batch-chars")),
        ["Current minBatchChars: 1000 chars."]
    );
    let out = cmd(&h, "min-batch-chars 0");
    assert_eq!(
        texts(&out),
        ["minBatchChars set to 0 — pre-flush trivial-batch skipping disabled."]
    );
    assert_eq!(saved(&out).unwrap()["minBatchChars"], 0);
    let out = cmd(&h, "min-batch-chars 12abc");
    assert!(saved(&out).is_none());
    assert_eq!(
        texts(&out),
        ["Invalid minBatchChars: \"12abc\". Expected a non-negative integer (0 disables)."]
    );
    let out = cmd(&h, "recovery-grace 5");
    assert_eq!(texts(&out), ["recoveryGraceTurns set to 5."]);
    assert_eq!(saved(&out).unwrap()["recoveryGraceTurns"], 5);
    assert_eq!(
        texts(&cmd(&h, "recovery-grace")),
        ["Current recoveryGraceTurns: 5 user turns."]
    );
    assert!(saved(&cmd(&h, "recovery-grace -1")).is_none());
    let out = cmd(&h, "dedup off");
    assert_eq!(texts(&out), ["Content-hash dedup turned OFF."]);
    assert_eq!(saved(&out).unwrap()["dedupByContentHash"], false);
    assert_eq!(
        texts(&cmd(&h, "dedup TRUE")),
        ["Content-hash dedup turned ON."]
    );
    assert!(texts(&cmd(&h, "dedup"))
        .remove(0)
        .starts_with("Content-hash dedup is ON."));
    assert!(saved(&cmd(&h, "dedup maybe")).is_none());
}

#[test]
fn help_unknown_and_picker() {
    let h = host(enabled(), Vec::new());
    let help = texts(&cmd(&h, "help")).remove(0);
    for (name, _) in SUBCOMMANDS {
        assert!(
            help.contains(&format!("/pruner {name}")) || name == "off",
            "{name}"
        );
    }
    assert_eq!(
        texts(&cmd(&h, "frobnicate now")),
        ["Unknown subcommand: \"frobnicate\". Run /pruner help for usage."]
    );
    let out = cmd(&h, "");
    assert_eq!(out[0]["kind"], "select");
    assert_eq!(out[0]["title"], "pruner — choose a subcommand");
    assert_eq!(out[0]["then"], "");
    assert_eq!(
        out[0]["values"].as_array().unwrap().len(),
        SUBCOMMANDS.len()
    );
}

#[test]
fn settings_dialog_round_trip() {
    let h = host(enabled(), Vec::new());
    let out = cmd(&h, "settings");
    let menu = &out[0];
    assert_eq!(menu["kind"], "select");
    assert_eq!(menu["title"], "pruner settings");
    let options = menu["options"].as_array().unwrap();
    assert_eq!(options.len(), SETTINGS.len());
    assert!(options[0].as_str().unwrap().starts_with("Enabled:"));
    assert!(options[0].as_str().unwrap().ends_with("true"));
    assert_eq!(menu["values"][7], "settings edit minBatchChars");

    let out = cmd(&h, "settings edit minBatchChars");
    let pick = &out[0];
    assert_eq!(pick["title"], "Min batch chars (now 1000)");
    assert_eq!(pick["values"][3], "settings pick minBatchChars 2000");
    assert_eq!(
        pick["values"].as_array().unwrap().last().unwrap(),
        "settings input minBatchChars"
    );

    let out = cmd(&h, "settings pick minBatchChars 2000");
    assert_eq!(saved(&out).unwrap()["minBatchChars"], 2000);
    assert_eq!(texts(&out), ["Min batch chars set to: 2000"]);
    assert_eq!(
        out.last().unwrap()["title"],
        "pruner settings",
        "the list comes back"
    );

    let out = cmd(&h, "settings set chainCompression.rollingWindow 0");
    assert!(saved(&out).is_none(), "below the minimum is refused");
    assert_eq!(
        texts(&out),
        ["Invalid value for chainCompression.rollingWindow: \"0\"."]
    );
    let out = cmd(&h, "settings set autoBudgetThreshold 75%");
    assert_eq!(saved(&out).unwrap()["autoBudgetThreshold"], 0.75);
    assert_eq!(texts(&out), ["Auto-flush at context % set to: 75%"]);
    let out = cmd(&h, "settings set purgeErrors.enabled off");
    let block = saved(&out).unwrap();
    assert_eq!(block["purgeErrors"]["enabled"], false);
    assert_eq!(block["purgeErrors"]["cooldownTurns"], 2, "siblings kept");
    assert_eq!(block["someFutureKey"], 7);
    let out = cmd(&h, "settings edit summarizerModel");
    assert_eq!(out[0]["kind"], "input");
    assert_eq!(out[0]["then"], "settings pick summarizerModel");
    let out = cmd(&h, "settings pick protectedTools");
    assert_eq!(saved(&out).unwrap()["protectedTools"], json!([]));
    assert_eq!(
        texts(&cmd(&h, "settings set nope 1")),
        ["Unknown setting: \"nope\". Run /pruner settings for the list."]
    );
}

#[test]
fn now_flushes_with_progress_and_runtime_delivery() {
    let h = host(enabled(), branch(3));
    let out = cmd(&h, "now");
    let summaries: Vec<_> = out
        .iter()
        .filter(|e| e["kind"] == "appendMessage")
        .collect();
    assert_eq!(summaries.len(), 3, "{out:#?}");
    assert!(summaries.iter().all(|e| e["delivery"] == "runtime"));
    assert!(out
        .iter()
        .any(|e| e["customType"] == "context-prune-flush-metrics"
            && e["data"]["trigger"] == "manual"));
    let last = texts(&out).pop().unwrap();
    assert!(
        last.starts_with("pruner: pruned 3 tool calls from 3 batches — summary "),
        "{last}"
    );
    assert!(last.ends_with(" raw chars"), "{last}");
    let cleared = out.iter().rev().nth(1).unwrap();
    assert_eq!(cleared["kind"], "widget");
    assert!(cleared["lines"].is_null());

    let ui = h.ui.lock().unwrap().clone();
    assert_eq!(ui[0]["text"], "│ prune: summarizing…");
    let first = &ui[1];
    assert_eq!(first["key"], "context-prune-progress");
    assert_eq!(first["placement"], "aboveEditor");
    assert_eq!(
        first["lines"][0].as_str().unwrap(),
        "○ Batch 1/3 · 1 tool call · pending"
    );
    let done = ui.last().unwrap()["lines"].as_array().unwrap().clone();
    assert_eq!(done.len(), 3);
    for line in done {
        let line = line.as_str().unwrap();
        assert!(line.starts_with("✓ Batch "), "{line}");
        assert!(
            line.contains(" summary chars / ") && line.ends_with(" raw chars"),
            "{line}"
        );
    }

    // Nothing left: the empty text.
    let out = cmd(&h, "now");
    assert_eq!(
        texts(&out)[0],
        "pruner: nothing pending — no batches to summarize"
    );
    // Disabled.
    cmd(&h, "off");
    assert_eq!(
        texts(&cmd(&h, "now")),
        ["Context pruning is disabled. Run /pruner on first."]
    );
}

#[test]
fn tree_lists_summaries_and_calls() {
    let h = host(enabled(), branch(2));
    assert_eq!(
        texts(&cmd(&h, "tree")),
        ["No pruned tool calls found in this session."]
    );
    cmd(&h, "now");
    let t = tree_text(
        &h.engine(),
        CommandEnv {
            utc_offset_minutes: 60,
        },
    );
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines[0], "Pruned Tool Calls (2 summaries)");
    assert!(
        lines[1].starts_with("[pruner] Turn ") && lines[1].contains(" summary (1 tool · "),
        "{t}"
    );
    // T0 + 2 s is 20:26:42 UTC; the user is one hour ahead.
    assert!(
        lines[1].ends_with(" chars · original 2.1k) · 2026-05-28 21:26:42"),
        "{t}"
    );
    assert_eq!(lines[2], "  read(path=\"f0.txt\") · 2.1k chars", "{t}");
    assert!(!lines[2].contains("[error]"));
}

#[test]
fn compact_compresses_every_closed_chain() {
    // Two closed chains; K = 3 would keep both, compact takes both.
    let mut b = branch(2);
    let mut more = branch(2);
    for (i, e) in more.iter_mut().enumerate() {
        let n = b.len() + i;
        e["id"] = json!(format!("{n:08x}"));
        e["parentId"] = json!(format!("{:08x}", n - 1));
        let ts = T0 + 100_000 + i as i64 * 1000;
        e["timestamp"] = json!(format_iso(ts));
        e["message"]["timestamp"] = json!(ts);
        if let Some(id) = e["message"]["toolCallId"].as_str() {
            e["message"]["toolCallId"] = json!(format!("{id}_b"));
        }
        if let Some(blocks) = e["message"]["content"].as_array_mut() {
            for bl in blocks {
                if let Some(id) = bl["id"].as_str() {
                    bl["id"] = json!(format!("{id}_b"));
                }
            }
        }
    }
    b.extend(more);
    let h = host(
        json!({"contextPrune": {"enabled": true, "chainCompression": {"enabled": false}}}),
        b,
    );
    let out = cmd(&h, "compact");
    let last = texts(&out).pop().unwrap();
    assert!(
        last.starts_with("pruner: compacted 2 chains (b1, b2), reclaimed ~"),
        "{last}\n{out:#?}"
    );
    assert!(last.ends_with(" tokens"));
    let chains: Vec<_> = out
        .iter()
        .filter(|e| e["customType"] == "context-prune-chain")
        .collect();
    assert_eq!(chains.len(), 2);
    assert!(chains.iter().all(|e| e["delivery"] == "runtime"));
    assert_eq!(
        texts(&cmd(&h, "compact")),
        ["pruner: no chains eligible for compaction"]
    );
}

#[test]
fn choice_labels_cover_the_core_modes() {
    use super::settings::{BATCHING_CHOICES, PRUNE_ON_CHOICES};
    use condense_core::{BatchingMode, PruneOn};
    let names = |c: &[(&str, &str)]| c.iter().map(|(v, _)| (*v).to_owned()).collect::<Vec<_>>();
    assert_eq!(
        names(PRUNE_ON_CHOICES),
        PruneOn::ALL.map(|m| m.name().to_owned())
    );
    assert_eq!(
        names(BATCHING_CHOICES),
        BatchingMode::ALL.map(|m| m.name().to_owned())
    );
}

#[test]
fn every_setting_subcommand_is_listed_shows_without_saving_and_refuses_garbage() {
    let subcommands: Vec<&str> = SUBCOMMANDS.iter().map(|(n, _)| *n).collect();
    let h = host(enabled(), Vec::new());
    for name in [
        "model",
        "thinking",
        "prune-on",
        "batching",
        "min-batch-chars",
        "recovery-grace",
        "dedup",
        "protected-tools",
        "protected-paths",
    ] {
        assert!(subcommands.contains(&name), "{name} not in the picker");
        let shown = cmd(&h, name);
        assert!(saved(&shown).is_none(), "{name} with no argument saves");
        assert_eq!(shown[0]["level"], "info", "{name}");
        if name.starts_with("protected-") {
            continue; // every list is a valid list
        }
        let refused = cmd(&h, &format!("{name} x:y:~"));
        assert!(saved(&refused).is_none(), "{name} accepted garbage");
        assert_eq!(refused.len(), 1, "{name}: {refused:?}");
        assert_eq!(refused[0]["level"], "warning", "{name}");
    }
}

#[test]
fn counts_beyond_the_setting_range_are_refused_not_clamped() {
    let h = host(enabled(), Vec::new());
    let out = cmd(&h, "recovery-grace 4294967296");
    assert!(saved(&out).is_none(), "{out:?}");
    assert_eq!(
        texts(&out),
        ["Invalid recoveryGraceTurns: \"4294967296\". Expected a non-negative integer (0 disables)."]
    );
}

#[test]
fn every_preset_of_the_settings_dialog_is_accepted() {
    let h = host(enabled(), Vec::new());
    for s in SETTINGS {
        let edit = cmd(&h, &format!("settings edit {}", s.key));
        let values: Vec<String> = edit[0]["values"]
            .as_array()
            .map(|v| {
                v.iter()
                    .filter_map(|x| x.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        for pick in values.iter().filter(|v| v.starts_with("settings pick ")) {
            let out = cmd(&h, pick);
            assert!(saved(&out).is_some(), "{pick} refused: {out:?}");
            assert_eq!(out.last().unwrap()["title"], "pruner settings", "{pick}");
        }
    }
}

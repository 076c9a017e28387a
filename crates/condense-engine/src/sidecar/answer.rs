//! The `context` answer line, incremental against the previous answer.
//!
//! Between two LLM calls the render plan usually changes only at its end
//! (the turn just taken); its first few hundred steps, stubs and
//! `<compressed-chain>` messages among them, are the same. Re-sending and
//! re-parsing them costs more than the render itself at 1M tokens, so an
//! answer may say "the first `reuse` steps of answer `base`, then these".
//! The shim names the answer it holds (`base`); a base the sidecar no longer
//! has (a restart, an answer the shim dropped at its deadline) simply gets a
//! whole answer. See docs/protocol.md, "Render steps".

use condense_core::PlanStep;

/// The last steps answer sent, for the next answer to build on.
#[derive(Debug, Default)]
pub struct ContextAnswers {
    /// Sequence number of the last steps answer (0: none yet).
    seq: u64,
    /// Its whole step list.
    last: Vec<PlanStep>,
}

impl ContextAnswers {
    /// The last steps answer's number, the `base` a shim holding it sends.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Forgets the last answer (a new session, a new copy of the messages):
    /// the next answer is whole.
    pub fn reset(&mut self) {
        self.last.clear();
    }

    /// The answer's JSON object. `steps` is the render plan (`None`:
    /// unchanged), `base` the answer the shim holds, `effects` the effects
    /// array already serialized.
    pub fn write(
        &mut self,
        base: Option<u64>,
        steps: Option<Vec<PlanStep>>,
        effects: &str,
    ) -> String {
        let Some(steps) = steps else {
            // The shim keeps its last steps answer; so do we.
            return format!(r#"{{"unchanged":true,"effects":{effects}}}"#);
        };
        let reuse = if base == Some(self.seq) && self.seq != 0 {
            self.last
                .iter()
                .zip(&steps)
                .take_while(|(a, b)| a == b)
                .count()
        } else {
            0
        };
        self.seq += 1;
        let fresh = &steps[reuse..];
        let mut out = String::with_capacity(
            fresh
                .iter()
                .map(|s| match s {
                    PlanStep::New(m) => m.json().len() + 16,
                    PlanStep::Keep(_) => 24,
                })
                .sum::<usize>()
                + effects.len()
                + 64,
        );
        out.push_str(&format!(r#"{{"seq":{}"#, self.seq));
        if reuse > 0 {
            out.push_str(&format!(r#","reuse":{reuse}"#));
        }
        out.push_str(r#","steps":["#);
        for (i, step) in fresh.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            match step {
                PlanStep::Keep(r) => {
                    out.push_str(&format!(r#"{{"keep":[{},{}]}}"#, r.start, r.end))
                }
                PlanStep::New(m) => {
                    out.push_str(r#"{"message":"#);
                    out.push_str(&m.json());
                    out.push('}');
                }
            }
        }
        out.push_str(r#"],"effects":"#);
        out.push_str(effects);
        out.push('}');
        self.last = steps;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense_core::Message;
    use serde_json::Value;

    fn msg(text: &str) -> PlanStep {
        PlanStep::New(
            Message::from_json(&format!(
                r#"{{"role":"user","content":"{text}","timestamp":1}}"#
            ))
            .unwrap(),
        )
    }

    fn parse(s: &str) -> Value {
        serde_json::from_str(s).expect("the answer is JSON")
    }

    #[test]
    fn first_answer_is_whole_and_numbered() {
        let mut a = ContextAnswers::default();
        let v = parse(&a.write(None, Some(vec![PlanStep::Keep(0..2), msg("x")]), "[]"));
        assert_eq!(v["seq"], 1);
        assert!(v.get("reuse").is_none());
        assert_eq!(v["steps"][0]["keep"], serde_json::json!([0, 2]));
        assert_eq!(v["steps"][1]["message"]["content"], "x");
        assert_eq!(v["effects"], serde_json::json!([]));
    }

    #[test]
    fn matching_base_reuses_the_common_prefix_of_steps() {
        let mut a = ContextAnswers::default();
        a.write(
            None,
            Some(vec![PlanStep::Keep(0..2), msg("x"), PlanStep::Keep(3..5)]),
            "[]",
        );
        let v = parse(&a.write(
            Some(1),
            Some(vec![
                PlanStep::Keep(0..2),
                msg("x"),
                PlanStep::Keep(3..7),
                msg("y"),
            ]),
            "[]",
        ));
        assert_eq!(v["seq"], 2);
        assert_eq!(v["reuse"], 2);
        assert_eq!(v["steps"].as_array().unwrap().len(), 2);
        assert_eq!(v["steps"][0]["keep"], serde_json::json!([3, 7]));
        assert_eq!(v["steps"][1]["message"]["content"], "y");
    }

    #[test]
    fn a_stale_or_missing_base_gets_a_whole_answer() {
        let mut a = ContextAnswers::default();
        let steps = vec![PlanStep::Keep(0..2), msg("x")];
        a.write(None, Some(steps.clone()), "[]");
        a.write(Some(1), Some(steps.clone()), "[]");
        // The shim still holds answer 1 (it dropped answer 2 at its deadline).
        let v = parse(&a.write(Some(1), Some(steps.clone()), "[]"));
        assert!(v.get("reuse").is_none());
        assert_eq!(v["steps"].as_array().unwrap().len(), 2);
        let v = parse(&a.write(None, Some(steps), "[]"));
        assert!(v.get("reuse").is_none());
    }

    #[test]
    fn unchanged_keeps_the_base_and_reset_forgets_it() {
        let mut a = ContextAnswers::default();
        let steps = vec![PlanStep::Keep(0..2), msg("x")];
        a.write(None, Some(steps.clone()), "[]");
        let v = parse(&a.write(Some(1), None, r#"[{"kind":"status","text":"s"}]"#));
        assert_eq!(v["unchanged"], true);
        assert_eq!(v["effects"][0]["text"], "s");
        let v = parse(&a.write(Some(1), Some(steps.clone()), "[]"));
        assert_eq!(v["reuse"], 2);
        a.reset();
        let v = parse(&a.write(Some(2), Some(steps), "[]"));
        assert!(v.get("reuse").is_none());
        assert_eq!(v["seq"], 3);
    }

    #[test]
    fn identical_plans_reuse_everything() {
        let mut a = ContextAnswers::default();
        let steps = vec![PlanStep::Keep(0..2), msg("x")];
        a.write(None, Some(steps.clone()), "[]");
        let v = parse(&a.write(Some(1), Some(steps), "[]"));
        assert_eq!(v["reuse"], 2);
        assert_eq!(v["steps"], serde_json::json!([]));
    }
}

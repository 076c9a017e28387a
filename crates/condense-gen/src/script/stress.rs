//! The hostile shapes ([`Stress`]): one unit repeated far past what an
//! agent does, so each of condense's per-call, per-turn and per-run costs
//! shows on its own.

use serde_json::{json, Map, Value};

use super::{CallSpec, Scripter};
use crate::options::Stress;
use crate::text::*;

/// Keys in a [`Stress::Deep`] call's arguments, and the depth of the
/// object nested in them (under serde_json's parse limit of 128 with the
/// entry's own levels around it).
const DEEP_KEYS: usize = 500;
const DEEP_NESTING: usize = 120;

/// Turns a [`Stress::Dups`] run takes before its reply.
const DUPS_PER_RUN: usize = 50;

impl Scripter {
    pub(super) fn stress(&mut self, kind: Stress, units: usize, tokens: Option<u64>) {
        match kind {
            Stress::Wide => self.wide(units, tokens),
            Stress::Deep => self.repeat_turns(units, tokens, Self::deep_turn, true),
            Stress::Dups => self.dups(units, tokens),
            Stress::Long => self.repeat_turns(units, tokens, Self::long_turn, false),
        }
    }

    /// Whether another unit is due: until `tokens` when set, else `units`.
    fn due(&self, done: usize, units: usize, tokens: Option<u64>) -> bool {
        match tokens {
            Some(t) => self.tokens() < t,
            None => done < units,
        }
    }

    fn wide(&mut self, units: usize, tokens: Option<u64>) {
        self.user("Read every file in the tree.".into());
        let mut calls = Vec::new();
        // The turn is one step, so its size is counted call by call here.
        let mut chars = self.chars;
        loop {
            let more = match tokens {
                Some(t) => ((chars / 4) as u64) < t,
                None => calls.len() < units,
            };
            if !more {
                break;
            }
            let n = calls.len();
            let call = CallSpec {
                name: "read",
                args: json!({ "path": format!("f{n}") }),
                result: listing(&mut self.rng, n, 200),
                is_error: false,
                ms: self.rng.range(1, 5),
            };
            chars += call.name.len() + call.args.to_string().len() + call.result.len();
            calls.push(call);
        }
        self.turn(0, None, calls);
        self.reply(0, 200);
    }

    /// One prompt, then `turn` until due, then a reply if `reply`.
    fn repeat_turns(
        &mut self,
        units: usize,
        tokens: Option<u64>,
        turn: fn(&mut Self, usize),
        reply: bool,
    ) {
        self.user("Work through the task list without stopping.".into());
        let mut n = 0;
        while self.due(n, units, tokens) {
            turn(self, n);
            n += 1;
        }
        if reply {
            self.reply(0, 200);
        }
    }

    fn deep_turn(&mut self, n: usize) {
        let mut args = Map::new();
        args.insert("path".into(), json!(format!("src/deep_{n}.rs")));
        for k in 0..DEEP_KEYS {
            args.insert(format!("k{k:03}"), json!(format!("value {n}.{k}")));
        }
        let mut nested = json!("leaf");
        for depth in (0..DEEP_NESTING).rev() {
            nested = json!({ format!("level{depth}"): nested });
        }
        args.insert("nested".into(), nested);
        let mut result = format!("Error: could not apply the edit to src/deep_{n}.rs: ");
        let rest = 6000usize.saturating_sub(result.len());
        result.push_str(&prose(&mut self.rng, rest));
        let call = CallSpec {
            name: "edit",
            args: Value::Object(args),
            result,
            is_error: true,
            ms: self.rng.range(3, 20),
        };
        self.turn(0, None, vec![call]);
    }

    fn long_turn(&mut self, n: usize) {
        let failed = n % 7 == 6;
        let chars = self.rng.range(150, 250) as usize;
        let result = if failed {
            let mut r = format!("error: step {n} failed: ");
            r.push_str(&prose(&mut self.rng, chars.saturating_sub(r.len())));
            r
        } else {
            listing(&mut self.rng, n, chars)
        };
        let call = self.bash(format!("./step.sh {n}"), result, failed);
        self.turn(0, None, vec![call]);
    }

    fn dups(&mut self, units: usize, tokens: Option<u64>) {
        let content = prose(&mut self.rng, 3900);
        let mut run = 0;
        while self.due(run, units, tokens) {
            self.user(format!("Run {run}: check the config again."));
            for _ in 0..DUPS_PER_RUN {
                let call = CallSpec {
                    name: "read",
                    args: json!({ "path": "config/app.toml" }),
                    result: content.clone(),
                    is_error: false,
                    ms: self.rng.range(1, 5),
                };
                self.turn(0, None, vec![call]);
            }
            self.reply(0, 200);
            run += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{Shape, SynthOptions};
    use crate::script::{script, Step};

    fn steps(kind: Stress, units: usize, tokens: Option<u64>) -> Vec<Step> {
        script(&SynthOptions {
            shape: Shape::Stress { kind, units },
            tokens,
            ..SynthOptions::default()
        })
    }

    fn calls(step: &Step) -> &[CallSpec] {
        match step {
            Step::Turn { calls, .. } => calls,
            _ => &[],
        }
    }

    fn depth(v: &Value) -> usize {
        match v {
            Value::Object(m) => 1 + m.values().map(depth).max().unwrap_or(0),
            Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
            _ => 0,
        }
    }

    #[test]
    fn wide_is_one_message_of_distinct_reads() {
        let s = steps(Stress::Wide, 300, None);
        assert!(matches!(s[0], Step::User(_)));
        assert!(matches!(s[2], Step::Reply { .. }));
        let calls = calls(&s[1]);
        assert_eq!(calls.len(), 300);
        assert!(calls
            .iter()
            .all(|c| c.name == "read" && c.result.len() == 200));
        assert_ne!(calls[0].result, calls[1].result);
        assert_eq!(calls[299].args, json!({ "path": "f299" }));
    }

    #[test]
    fn deep_arguments_nest_and_every_edit_fails() {
        let s = steps(Stress::Deep, 3, None);
        let turns: Vec<_> = s.iter().filter(|s| !calls(s).is_empty()).collect();
        assert_eq!(turns.len(), 3);
        for t in turns {
            let c = &calls(t)[0];
            assert!(c.is_error);
            assert_eq!(c.result.len(), 6000);
            let args = c.args.as_object().unwrap();
            assert_eq!(args.len(), DEEP_KEYS + 2);
            assert_eq!(depth(&args["nested"]), DEEP_NESTING);
        }
        assert!(matches!(s.last(), Some(Step::Reply { .. })));
    }

    #[test]
    fn dups_read_the_same_output_in_runs_that_reply() {
        let s = steps(Stress::Dups, 2, None);
        assert_eq!(s.len(), 2 * (DUPS_PER_RUN + 2));
        let results: Vec<_> = s.iter().flat_map(calls).map(|c| &c.result).collect();
        assert_eq!(results.len(), 2 * DUPS_PER_RUN);
        assert!(results.iter().all(|r| *r == results[0] && r.len() == 3900));
        assert!(matches!(s[DUPS_PER_RUN + 1], Step::Reply { .. }));
    }

    #[test]
    fn long_never_replies_and_fails_every_seventh_turn() {
        let s = steps(Stress::Long, 70, None);
        assert_eq!(s.len(), 71);
        assert!(s.iter().all(|s| !matches!(s, Step::Reply { .. })));
        let failed: Vec<bool> = s.iter().flat_map(calls).map(|c| c.is_error).collect();
        assert_eq!(failed.iter().filter(|f| **f).count(), 10);
        assert!(failed[6] && !failed[5] && failed[13]);
    }

    #[test]
    fn tokens_steer_every_stress_shape() {
        for kind in [Stress::Wide, Stress::Deep, Stress::Dups, Stress::Long] {
            let s = steps(kind, 1, Some(200_000));
            let chars: usize = s.iter().map(Step::chars).sum();
            assert!(chars / 4 >= 200_000, "{kind:?}: {chars}");
            // Within one unit (a Dups run is the largest) of the target.
            assert!(chars / 4 < 260_000, "{kind:?}: {chars}");
        }
    }
}

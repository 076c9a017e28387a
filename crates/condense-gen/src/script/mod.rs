//! The script: what happens in the session (prompts, tool turns, replies)
//! decided before anything is written, so sizes can be steered to the
//! requested token count independently of the entries' encoding.

use serde_json::{json, Value};

use crate::options::*;
use crate::rng::*;
use crate::text::*;

mod stress;

#[derive(Debug, Clone)]
pub(crate) struct CallSpec {
    pub(crate) name: &'static str,
    pub(crate) args: Value,
    pub(crate) result: String,
    pub(crate) is_error: bool,
    /// Execution time (ms).
    pub(crate) ms: u64,
}

#[derive(Debug, Clone)]
pub(crate) enum Step {
    User(String),
    Turn {
        thinking: Option<String>,
        text: Option<String>,
        calls: Vec<CallSpec>,
    },
    Reply {
        thinking: Option<String>,
        text: String,
    },
}

impl Step {
    /// pi's estimate of the step's messages, in chars.
    pub(crate) fn chars(&self) -> usize {
        match self {
            Step::User(t) => t.len(),
            Step::Turn {
                thinking,
                text,
                calls,
            } => {
                thinking.as_ref().map_or(0, String::len)
                    + text.as_ref().map_or(0, String::len)
                    + calls
                        .iter()
                        .map(|c| c.name.len() + c.args.to_string().len() + c.result.len())
                        .sum::<usize>()
            }
            Step::Reply { thinking, text } => thinking.as_ref().map_or(0, String::len) + text.len(),
        }
    }
}

/// Builds the steps of a session.
pub(crate) struct Scripter {
    rng: SplitMix64,
    seed: u64,
    steps: Vec<Step>,
    chars: usize,
    turn_no: usize,
    /// Current version of each file, and the version last read (if read).
    files: Vec<(u32, Option<u32>)>,
}

impl Scripter {
    fn new(seed: u64) -> Self {
        Scripter {
            rng: SplitMix64::new(seed ^ 0x5c21_97a0_11d3_e4b1),
            seed,
            steps: Vec::new(),
            chars: 0,
            turn_no: 0,
            files: vec![(0, None); FILES.len()],
        }
    }

    fn tokens(&self) -> u64 {
        (self.chars / 4) as u64
    }

    fn push(&mut self, step: Step) {
        self.chars += step.chars();
        self.steps.push(step);
    }

    fn user(&mut self, text: String) {
        self.push(Step::User(text));
    }

    fn turn(&mut self, thinking: usize, text: Option<String>, calls: Vec<CallSpec>) {
        self.turn_no += 1;
        let thinking = (thinking > 0).then(|| thinking_text(&mut self.rng, self.turn_no, thinking));
        self.push(Step::Turn {
            thinking,
            text,
            calls,
        });
    }

    fn reply(&mut self, thinking: usize, text_chars: usize) {
        let thinking = (thinking > 0).then(|| thinking_text(&mut self.rng, self.turn_no, thinking));
        let text = prose(&mut self.rng, text_chars);
        self.push(Step::Reply { thinking, text });
    }

    fn bash(&mut self, command: String, result: String, is_error: bool) -> CallSpec {
        let ms = self.rng.range(40, 6000);
        CallSpec {
            name: "bash",
            args: json!({ "command": command }),
            result,
            is_error,
            ms,
        }
    }

    fn read(&mut self, file: usize) -> CallSpec {
        let (version, _) = self.files[file];
        self.files[file].1 = Some(version);
        CallSpec {
            name: "read",
            args: json!({ "path": FILES[file] }),
            result: file_content(self.seed, FILES[file], version),
            is_error: false,
            ms: self.rng.range(2, 30),
        }
    }

    fn edit(&mut self, file: usize) -> CallSpec {
        self.files[file].0 += 1;
        let old = format!(
            "    let n: u32 = text.len();\n    // {}",
            prose(&mut self.rng, 60)
        );
        let new = "    let n = u32::try_from(text.len())?;".to_owned();
        CallSpec {
            name: "edit",
            args: json!({ "path": FILES[file], "oldText": old, "newText": new }),
            result: format!("Successfully replaced text in {}.", FILES[file]),
            is_error: false,
            ms: self.rng.range(3, 20),
        }
    }

    fn thinking_chars(&mut self) -> usize {
        if self.rng.chance(20) {
            0
        } else {
            self.rng.range(150, 900) as usize
        }
    }

    fn some_file(&mut self) -> usize {
        self.rng.below(FILES.len() as u64) as usize
    }

    // -- shapes --

    fn bash_turn(&mut self, n: usize, results_chars: usize, thinking_chars: usize) {
        let result = listing(&mut self.rng, n, results_chars);
        let call = self.bash(format!("ls -la src/module_{n}"), result, false);
        self.turn(thinking_chars, None, vec![call]);
    }

    fn tool_turns(&mut self, turns: usize, tokens: Option<u64>, results: usize, thinking: usize) {
        self.user("Explore the repository and report on every module.".into());
        let mut n = 0;
        loop {
            let more = match tokens {
                Some(t) => self.tokens() < t,
                None => n < turns,
            };
            if !more {
                break;
            }
            self.bash_turn(n, results, thinking);
            n += 1;
        }
    }

    fn tasks(&mut self, prompts: usize, per_prompt: usize, tokens: Option<u64>) {
        let mut p = 0;
        let mut n = 0;
        loop {
            let more = match tokens {
                Some(t) => self.tokens() < t,
                None => p < prompts,
            };
            if !more {
                break;
            }
            self.user(format!(
                "Step {p}: inspect the next module and summarize it."
            ));
            for _ in 0..per_prompt {
                self.bash_turn(n, 3600, 400);
                n += 1;
            }
            self.reply(400, 200);
            p += 1;
        }
    }

    fn realistic(&mut self, tasks: usize, tokens: Option<u64>) {
        let mut t = 0;
        loop {
            let more = match tokens {
                Some(target) => self.tokens() < target,
                None => t < tasks,
            };
            if !more {
                break;
            }
            let kind = match t {
                0 => 0,
                1 => 1,
                2 => 2,
                3 => 3,
                4 => 4,
                _ => *self.rng.pick(&[1, 3, 5, 5, 5, 6, 6, 2]),
            };
            match kind {
                0 => self.task_skill_explore(),
                1 => self.task_build_fix(),
                2 => self.task_failed_write(),
                3 => self.task_reread(),
                4 => self.task_fetch(),
                5 => self.task_explore(),
                _ => self.task_tests(),
            }
            t += 1;
        }
    }

    fn task_skill_explore(&mut self) {
        self.user(
            "Use the rust-review skill to review how the session loader handles torn lines.".into(),
        );
        let skill = skill_text(&mut self.rng);
        let ms = self.rng.range(2, 10);
        let th = self.thinking_chars();
        self.turn(
            th,
            None,
            vec![CallSpec {
                name: "read",
                args: json!({ "path": SKILL }),
                result: skill,
                is_error: false,
                ms,
            }],
        );
        let calls = vec![self.read(1), self.read(12), self.read(9)];
        let th = self.thinking_chars();
        self.turn(
            th,
            Some("Reading the loader, the appender and their tests.".into()),
            calls,
        );
        let out = grep_output(&mut self.rng, "read_line");
        let call = self.bash("grep -rn \"read_line\" crates".into(), out, false);
        let th = self.thinking_chars();
        self.turn(th, None, vec![call]);
        let th = self.thinking_chars();
        let chars = self.rng.range(200, 700) as usize;
        self.reply(th, chars);
    }

    fn task_build_fix(&mut self) {
        self.user("Build the workspace and fix the errors.".into());
        let file = self.rng.range(1, 7) as usize;
        let log = build_errors(&mut self.rng, FILES[file]);
        let call = self.bash("cargo build --workspace 2>&1".into(), log, true);
        let th = self.thinking_chars();
        self.turn(th, None, vec![call]);
        let call = self.read(file);
        let th = self.thinking_chars();
        self.turn(th, None, vec![call]);
        let call = self.edit(file);
        let th = self.thinking_chars();
        self.turn(
            th,
            Some("Converting with `try_from` instead of narrowing silently.".into()),
            vec![call],
        );
        let ok = build_ok(&mut self.rng);
        let call = self.bash("cargo build --workspace 2>&1".into(), ok, false);
        let th = self.thinking_chars();
        self.turn(th, None, vec![call]);
        let th = self.thinking_chars();
        let chars = self.rng.range(150, 500) as usize;
        self.reply(th, chars);
    }

    fn task_failed_write(&mut self) {
        self.user(
            "Generate the JSON schema of the settings block into generated/schema.json.".into(),
        );
        let size = self.rng.range(4000, 9000) as usize;
        let schema = schema_text(&mut self.rng, size);
        let write = |path: &str, result: String, is_error: bool, ms| CallSpec {
            name: "write",
            args: json!({ "path": path, "content": schema }),
            result,
            is_error,
            ms,
        };
        let ms = self.rng.range(2, 10);
        let th = self.thinking_chars();
        self.turn(
            th,
            None,
            vec![write(
                "generated/schema.json",
                "EACCES: permission denied, open '/home/dev/project/generated/schema.json'".into(),
                true,
                ms,
            )],
        );
        let call = self.bash(
            "ls -la generated/".into(),
            "total 8\ndr-xr-xr-x  2 root root 4096 Jan  3 09:12 .\ndrwxr-xr-x 14 dev  dev  4096 Jan  3 09:12 ..".into(),
            false,
        );
        let th = self.thinking_chars();
        self.turn(th, None, vec![call]);
        let ms = self.rng.range(2, 10);
        let th = self.thinking_chars();
        let ok = format!(
            "Successfully wrote {} bytes to docs/schema.json",
            schema.len()
        );
        self.turn(
            th,
            Some("The directory is read-only; writing next to the docs instead.".into()),
            vec![write("docs/schema.json", ok, false, ms)],
        );
        let th = self.thinking_chars();
        let chars = self.rng.range(150, 400) as usize;
        self.reply(th, chars);
    }

    fn task_reread(&mut self) {
        // A file read before and unchanged since: its output repeats verbatim.
        let unchanged: Vec<usize> = (0..FILES.len())
            .filter(|&i| self.files[i].1 == Some(self.files[i].0))
            .collect();
        let file = if unchanged.is_empty() {
            self.some_file()
        } else {
            *self.rng.pick(&unchanged)
        };
        self.user(format!("Double-check {} before we commit.", FILES[file]));
        let call = self.read(file);
        let th = self.thinking_chars();
        self.turn(th, None, vec![call]);
        let mut stat = String::new();
        for _ in 0..self.rng.range(3, 12) {
            stat.push_str(&format!(
                " {} | {:>3} {}\n",
                self.rng.pick(FILES),
                self.rng.range(1, 80),
                "+".repeat(self.rng.range(1, 30) as usize)
            ));
        }
        let call = self.bash("git diff --stat".into(), stat, false);
        let th = self.thinking_chars();
        self.turn(th, None, vec![call]);
        let th = self.thinking_chars();
        let chars = self.rng.range(100, 300) as usize;
        self.reply(th, chars);
    }

    fn task_fetch(&mut self) {
        self.user(
            "Read the upstream settings documentation and compare it with our config loader."
                .into(),
        );
        let size = self.rng.range(70_000, 82_000) as usize;
        let page = web_page(&mut self.rng, size);
        let ms = self.rng.range(400, 2500);
        let th = self.thinking_chars();
        self.turn(
            th,
            None,
            vec![CallSpec {
                name: "web_fetch",
                args: json!({ "url": "https://docs.example.dev/agent/settings" }),
                result: page,
                is_error: false,
                ms,
            }],
        );
        let call = self.read(3);
        let th = self.thinking_chars();
        self.turn(th, None, vec![call]);
        let th = self.thinking_chars();
        let chars = self.rng.range(300, 800) as usize;
        self.reply(th, chars);
    }

    fn task_explore(&mut self) {
        let topic = *self.rng.pick(IDENTS);
        self.user(format!(
            "How does the {topic} handling work? Walk me through it."
        ));
        for _ in 0..self.rng.range(1, 3) {
            let k = self.rng.range(1, 3);
            let calls: Vec<CallSpec> = (0..k)
                .map(|_| {
                    let f = self.some_file();
                    self.read(f)
                })
                .collect();
            let th = self.thinking_chars();
            self.turn(th, None, calls);
        }
        let out = grep_output(&mut self.rng, topic);
        let call = self.bash(format!("grep -rn \"{topic}\" crates"), out, false);
        let th = self.thinking_chars();
        self.turn(th, None, vec![call]);
        if self.rng.chance(50) {
            let n = self.turn_no;
            let chars = self.rng.range(800, 5000) as usize;
            let out = listing(&mut self.rng, n, chars);
            let call = self.bash("ls -la crates/*/src".into(), out, false);
            let th = self.thinking_chars();
            self.turn(th, None, vec![call]);
        }
        let th = self.thinking_chars();
        let chars = self.rng.range(300, 1200) as usize;
        self.reply(th, chars);
    }

    fn task_tests(&mut self) {
        self.user("Run the tests and fix whatever fails.".into());
        let out = test_output(&mut self.rng, true);
        let failing = out.contains("FAILED");
        let call = self.bash("cargo test --workspace 2>&1".into(), out, failing);
        let th = self.thinking_chars();
        self.turn(th, None, vec![call]);
        if failing {
            let call = self.read(8);
            let th = self.thinking_chars();
            self.turn(th, None, vec![call]);
            let call = self.edit(2);
            let th = self.thinking_chars();
            self.turn(th, None, vec![call]);
            let out = test_output(&mut self.rng, false);
            let call = self.bash("cargo test --workspace 2>&1".into(), out, false);
            let th = self.thinking_chars();
            self.turn(th, None, vec![call]);
        }
        let th = self.thinking_chars();
        let chars = self.rng.range(150, 500) as usize;
        self.reply(th, chars);
    }
}

pub(crate) fn script(opts: &SynthOptions) -> Vec<Step> {
    let mut s = Scripter::new(opts.seed);
    match &opts.shape {
        Shape::ToolTurns {
            turns,
            results_chars,
            thinking_chars,
        } => s.tool_turns(*turns, opts.tokens, *results_chars, *thinking_chars),
        Shape::Tasks {
            prompts,
            turns_per_prompt,
        } => s.tasks(*prompts, *turns_per_prompt, opts.tokens),
        Shape::Realistic { tasks } => s.realistic(*tasks, opts.tokens),
        Shape::Stress { kind, units } => s.stress(*kind, *units, opts.tokens),
    }
    s.steps
}

//! A session's cache economics so far, from what it recorded: the usage pi
//! stored on each assistant message and the switches the cache-aware policy
//! persisted. `/pruner status` and `condense status` show the same report.
//!
//! The ledger keeps the raw figures; prices are applied when a report is
//! asked for, so a profile changed in the settings reprices the whole
//! session.

use crate::config::{EconomyConfig, Policy};
use crate::economy::{
    recorded_bill, BillTotals, MissRates, PriceProfile, RecordedUsage, GAP_EDGES_S,
};
use crate::format::format_count;
use crate::policy::RecordedReason;

/// One `context-prune-switch` entry's figures (those it carries; older or
/// foreign entries may lack some).
#[derive(Debug, Clone, PartialEq)]
pub struct SwitchRecord {
    /// Why the switch happened (`idle-expiry`, `pays`, …).
    pub reason: RecordedReason,
    /// Tokens of the prompt before the switch.
    pub prompt_tokens: Option<u64>,
    /// Tokens the switch removed.
    pub removed_tokens: Option<u64>,
    /// The rewrite's extra cost (units).
    pub rewrite_cost: Option<f64>,
    /// The projected saving over the expected calls (units).
    pub projected_saving: Option<f64>,
}

/// What a branch recorded of its LLM calls and the policy's switches, in
/// branch order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionEconomy {
    calls: Vec<RecordedUsage>,
    switches: Vec<SwitchRecord>,
}

impl SessionEconomy {
    /// An empty ledger.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a call's recorded usage.
    pub fn add_call(&mut self, usage: RecordedUsage) {
        self.calls.push(usage);
    }

    /// Adds a switch.
    pub fn add_switch(&mut self, switch: SwitchRecord) {
        self.switches.push(switch);
    }

    /// The recorded calls.
    pub fn calls(&self) -> &[RecordedUsage] {
        &self.calls
    }

    /// The recorded switches.
    pub fn switches(&self) -> &[SwitchRecord] {
        &self.switches
    }

    /// The report under the `economy.*` settings: priced at the configured
    /// profile, for the configured policy.
    pub fn report_for(&self, settings: &EconomyConfig, pending: usize) -> EconomyReport {
        self.report(&settings.prices(), settings.policy, pending)
    }

    /// The report at `profile`, for the active `policy` with `pending`
    /// summarized items not shown yet (0 under the reference policy, which
    /// shows at once). Calls that recorded no prompt (aborted before the
    /// provider answered) are not counted.
    pub fn report(&self, profile: &PriceProfile, policy: Policy, pending: usize) -> EconomyReport {
        let mut recorded = BillTotals::default();
        let mut recorded_cost = 0.0;
        for usage in self.calls.iter().filter(|u| u.prompt() > 0) {
            recorded.add_call(usage.prompt(), &recorded_bill(profile, usage));
            recorded_cost += usage.cost;
        }
        let mut reasons: Vec<(String, u64)> = Vec::new();
        let (mut removed, mut rewrite, mut saving) = (0u64, 0.0, 0.0);
        for s in &self.switches {
            match reasons.iter_mut().find(|(r, _)| r == s.reason.as_str()) {
                Some((_, n)) => *n += 1,
                None => reasons.push((s.reason.as_str().to_owned(), 1)),
            }
            removed = removed.saturating_add(s.removed_tokens.unwrap_or(0));
            rewrite += finite(s.rewrite_cost);
            saving += finite(s.projected_saving);
        }
        EconomyReport {
            profile: profile.name.clone(),
            usd_per_mtok_input: profile.usd_per_mtok_input,
            uncached_units: recorded.prompt_tokens as f64,
            recorded,
            recorded_cost,
            policy,
            switches: self.switches.len() as u64,
            reasons,
            removed_tokens: removed,
            rewrite_cost: rewrite,
            projected_saving: saving,
            pending: if policy.gates_on_switch() { pending } else { 0 },
            against_no_pruning: None,
            holding: None,
            misses: None,
        }
    }
}

fn finite(x: Option<f64>) -> f64 {
    x.filter(|v| v.is_finite()).unwrap_or(0.0)
}

/// A session's cache economics and the policy's decisions, priced.
#[derive(Debug, Clone, PartialEq)]
pub struct EconomyReport {
    /// The profile's name.
    pub profile: String,
    /// Its dollars per million uncached input tokens.
    pub usd_per_mtok_input: f64,
    /// The calls with a recorded prompt, billed as recorded: the provider's
    /// split of reads, writes and plain input at the profile's prices.
    pub recorded: BillTotals,
    /// The same prompts with no caching: every token at 1.
    pub uncached_units: f64,
    /// What pi priced the calls at (US dollars, from the model's prices).
    pub recorded_cost: f64,
    /// The active display policy.
    pub policy: Policy,
    /// Switches recorded on the branch.
    pub switches: u64,
    /// Their reasons with counts, in order of first appearance.
    pub reasons: Vec<(String, u64)>,
    /// Tokens the switches removed, summed over those that say.
    pub removed_tokens: u64,
    /// The rewrites' extra cost the decisions estimated (units), summed.
    pub rewrite_cost: f64,
    /// The savings the decisions projected (units), summed.
    pub projected_saving: f64,
    /// Items summarized but not shown yet.
    pub pending: usize,
    /// What the live engine estimated the calls it saw saved against no
    /// pruning, and the bound it keeps (`None` where no engine ran them,
    /// e.g. `condense status` on a file).
    pub against_no_pruning: Option<AgainstNoPruning>,
    /// What the live engine holds back and why (`None` where no engine
    /// ran the calls).
    pub holding: Option<Holding>,
    /// The miss model the live engine plans with (`None` where no engine
    /// ran the calls).
    pub misses: Option<PlannedMisses>,
}

/// The miss model the cache-aware policy plans the next call with
/// (`economy.missRates`), as `/pruner status` shows it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PlannedMisses {
    /// `null`: the cache holds for its TTL.
    Ttl,
    /// Shares the settings fix.
    Set(MissRates),
    /// `"learn"`: the calls counted for the provider in this session and
    /// in the directory's other sessions, and the shares once enough were.
    Learned {
        /// This session's calls.
        here: u64,
        /// The other sessions' calls.
        before: u64,
        /// The shares learned, once enough calls were counted.
        rates: Option<MissRates>,
    },
}

impl PlannedMisses {
    /// Its status line.
    pub fn line(&self) -> String {
        let shares = |r: &MissRates| {
            let edges = GAP_EDGES_S.iter().map(|e| match e {
                e if e % 60 == 0 => format!("under {} min", e / 60),
                e => format!("under {e} s"),
            });
            r.0.iter()
                .zip(edges.chain(["later".to_owned()]))
                .map(|(p, gap)| format!("{:.0}% {gap}", 100.0 * p))
                .collect::<Vec<_>>()
                .join(" · ")
        };
        match self {
            PlannedMisses::Ttl => "misses:       none planned: the cache holds for its TTL".into(),
            PlannedMisses::Set(r) => format!("misses:       as set: {}", shares(r)),
            PlannedMisses::Learned {
                here,
                before,
                rates: Some(r),
            } => format!(
                "misses:       learned from {here} calls here and {before} before: {}",
                shares(r)
            ),
            PlannedMisses::Learned {
                here,
                before,
                rates: None,
            } => format!(
                "misses:       learning ({here} calls here, {before} before): the TTL until \
                 there are enough"
            ),
        }
    }
}

/// What the cache-aware policy holds back at the latest call, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Holding {
    /// Why the summaries made but not shown wait ([`EconomyReport::pending`]).
    pub switch: Option<crate::Hold>,
    /// Outputs captured and not summarized yet.
    pub outputs: usize,
    /// Why the latest flush weighed for them did not run.
    pub flush: Option<crate::Hold>,
}

/// The cache-aware policy's running estimate against no pruning
/// ([`NoPruningBound`](crate::NoPruningBound)).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AgainstNoPruning {
    /// What no pruning would have billed, less what was billed with the
    /// summarizer's input (units; negative when pruning cost more).
    pub saved_units: f64,
    /// `economy.maxExcess`: the excess bets may risk (`None`: unbounded).
    pub max_excess: Option<f64>,
    /// The summarizer's input price the estimate charged summaries at, as a
    /// multiple of the model's (the setting, or the host's report).
    pub summarizer_price: f64,
}

/// `part / whole` as a percentage with one decimal (`0.0%` for an empty
/// whole).
fn pct(part: f64, whole: f64) -> String {
    let p = if whole > 0.0 {
        100.0 * part / whole
    } else {
        0.0
    };
    format!("{p:.1}%")
}

fn units(x: f64) -> String {
    format_count(x.max(0.0).round() as u64)
}

/// A price ratio with at most two decimals (`1`, `0.25`, `0.33`).
fn ratio(x: f64) -> String {
    let s = format!("{x:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

impl Holding {
    /// What is held back and why, in one line (`pending`: summaries made
    /// and not shown).
    pub fn line(&self, pending: usize) -> String {
        let mut parts = Vec::new();
        if pending > 0 {
            let why = self
                .switch
                .map_or(String::new(), |h| format!(" ({})", h.as_str()));
            parts.push(format!("{pending} summarized, not shown{why}"));
        }
        if self.outputs > 0 {
            let why = self
                .flush
                .map_or(String::new(), |h| format!(" ({})", h.as_str()));
            parts.push(format!("{} output(s) not summarized{why}", self.outputs));
        }
        if parts.is_empty() {
            "nothing".to_owned()
        } else {
            parts.join(" · ")
        }
    }
}

impl EconomyReport {
    /// The share of the no-caching price that caching saved (negative when
    /// cache writes cost more than they saved).
    pub fn saved_share(&self) -> f64 {
        if self.uncached_units > 0.0 {
            1.0 - self.recorded.input_units / self.uncached_units
        } else {
            0.0
        }
    }

    /// Billed input in US dollars.
    pub fn billed_input_usd(&self) -> f64 {
        self.recorded.input_units * self.usd_per_mtok_input / 1e6
    }

    /// The report as status lines (no indent; each host indents as its
    /// status does): a `--- cache (PROFILE) ---` block, then `--- policy ---`.
    pub fn lines(&self) -> Vec<String> {
        let r = &self.recorded;
        let mut out = vec![format!("--- cache ({}) ---", self.profile)];
        if r.calls == 0 {
            out.push("(no recorded usage yet)".to_owned());
        } else {
            let prompt = r.prompt_tokens as f64;
            out.push(format!("calls:        {}", r.calls));
            out.push(format!(
                "prompt:       {} tokens",
                format_count(r.prompt_tokens)
            ));
            out.push(format!(
                "cache:        read {} · written {} · uncached {}",
                pct(r.cache_read as f64, prompt),
                pct(r.cache_write as f64, prompt),
                pct(r.uncached as f64, prompt)
            ));
            out.push(format!(
                "hit share:    {}",
                pct(r.cache_read as f64, prompt)
            ));
            out.push(format!(
                "billed input: {} units (${:.3})",
                units(r.input_units),
                self.billed_input_usd()
            ));
            out.push(format!(
                "no caching:   {} units (caching saved {:.1}%)",
                units(self.uncached_units),
                100.0 * self.saved_share()
            ));
            out.push(format!("pi's cost:    ${:.3}", self.recorded_cost));
        }
        out.push("--- policy ---".to_owned());
        out.push(format!("policy:       {}", self.policy.name()));
        if self.switches > 0 || self.policy.gates_on_switch() {
            let reasons: Vec<String> = self
                .reasons
                .iter()
                .map(|(reason, n)| format!("{reason} {n}"))
                .collect();
            out.push(if reasons.is_empty() {
                format!("switches:     {}", self.switches)
            } else {
                format!("switches:     {} ({})", self.switches, reasons.join(", "))
            });
        }
        if self.switches > 0 {
            out.push(format!(
                "decided:      removed {} tokens · rewrite {} units · projected saving {} units",
                format_count(self.removed_tokens),
                units(self.rewrite_cost),
                units(self.projected_saving)
            ));
        }
        if self.policy.gates_on_switch() {
            out.push(format!(
                "not shown:    {} summarized, pending the next switch",
                self.pending
            ));
        }
        if let Some(h) = &self.holding {
            out.push(format!("holding back: {}", h.line(self.pending)));
        }
        if let Some(a) = &self.against_no_pruning {
            let bound = match a.max_excess {
                None => "no bound".to_owned(),
                Some(0.0) => "bound: never above it".to_owned(),
                Some(x) => format!("bound: at most {:.1}% above it", 100.0 * x),
            };
            let saved = if a.saved_units < 0.0 {
                format!("cost {} units more", units(-a.saved_units))
            } else {
                format!("saved {} units", units(a.saved_units))
            };
            out.push(format!("no pruning:   {saved} (estimate); {bound}"));
            out.push(format!(
                "summaries:    charged at {}x the model's input price",
                ratio(a.summarizer_price)
            ));
        }
        if let Some(m) = &self.misses {
            out.push(m.line());
        }
        out
    }
}

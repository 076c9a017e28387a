//! Degradations the engine notices and reports as values.
//!
//! Each diagnostic has a kind and a dedup key; a host persists a diagnostic
//! (`context-prune-diagnostic`) only the first time its `kind:key` is seen in a
//! session, and counts kinds for the footer (`diag u<N>/m<N>/o<N>/b<N>`).

use std::collections::HashSet;

/// What went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DiagnosticKind {
    /// A compressed chain's boundaries did not resolve (or overlapped another).
    UnresolvedRange,
    /// A chain's recorded ids differ from the ids in its range.
    RangeIdMismatch,
    /// Tool results without an open tool call were removed.
    OrphanSweep,
    /// An uncovered chain had nothing to backfill.
    BackfillEmpty,
}

impl DiagnosticKind {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            DiagnosticKind::UnresolvedRange => "unresolved-range",
            DiagnosticKind::RangeIdMismatch => "range-id-mismatch",
            DiagnosticKind::OrphanSweep => "orphan-sweep",
            DiagnosticKind::BackfillEmpty => "backfill-empty",
        }
    }

    /// The footer letter (`u`, `m`, `o`, `b`).
    pub fn letter(self) -> char {
        match self {
            DiagnosticKind::UnresolvedRange => 'u',
            DiagnosticKind::RangeIdMismatch => 'm',
            DiagnosticKind::OrphanSweep => 'o',
            DiagnosticKind::BackfillEmpty => 'b',
        }
    }
}

/// One diagnostic.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Diagnostic {
    /// Its kind.
    pub kind: DiagnosticKind,
    /// Dedup key within the kind.
    pub key: String,
    /// Human-readable detail (persisted as `detail`).
    pub detail: String,
}

/// Collects a render's diagnostics, once per `kind:key`.
#[derive(Debug, Default)]
pub(crate) struct Collector {
    seen: HashSet<(DiagnosticKind, String)>,
    out: Vec<Diagnostic>,
}

impl Collector {
    pub(crate) fn report(&mut self, kind: DiagnosticKind, key: String, detail: String) {
        if self.seen.insert((kind, key.clone())) {
            self.out.push(Diagnostic { kind, key, detail });
        }
    }

    pub(crate) fn finish(self) -> Vec<Diagnostic> {
        self.out
    }
}

/// Session-wide dedup of diagnostics, with per-kind counters for the footer.
#[derive(Debug, Default, Clone)]
pub struct DiagnosticSink {
    seen: HashSet<(DiagnosticKind, String)>,
    counts: [u64; 4],
}

impl DiagnosticSink {
    /// Records a diagnostic; true the first time its `kind:key` is seen (the
    /// caller persists only then).
    pub fn report(&mut self, d: &Diagnostic) -> bool {
        let fresh = self.seen.insert((d.kind, d.key.clone()));
        if fresh {
            self.counts[d.kind as usize] += 1;
        }
        fresh
    }

    /// Forgets a diagnostic whose persistence failed, so it is retried.
    pub fn forget(&mut self, d: &Diagnostic) {
        if self.seen.remove(&(d.kind, d.key.clone())) {
            self.counts[d.kind as usize] -= 1;
        }
    }

    /// Distinct diagnostics of a kind so far.
    pub fn count(&self, kind: DiagnosticKind) -> u64 {
        self.counts[kind as usize]
    }

    /// The footer suffix ` · diag u1/o2` (zero kinds omitted; empty if none).
    pub fn footer_suffix(&self) -> String {
        let parts: Vec<String> = [
            DiagnosticKind::UnresolvedRange,
            DiagnosticKind::RangeIdMismatch,
            DiagnosticKind::OrphanSweep,
            DiagnosticKind::BackfillEmpty,
        ]
        .iter()
        .filter(|k| self.count(**k) > 0)
        .map(|k| format!("{}{}", k.letter(), self.count(*k)))
        .collect();
        if parts.is_empty() {
            String::new()
        } else {
            format!(" · diag {}", parts.join("/"))
        }
    }

    /// Clears everything (session start).
    pub fn reset(&mut self) {
        *self = DiagnosticSink::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(kind: DiagnosticKind, key: &str) -> Diagnostic {
        Diagnostic {
            kind,
            key: key.into(),
            detail: String::new(),
        }
    }

    #[test]
    fn sink_dedups_by_kind_and_key() {
        let mut s = DiagnosticSink::default();
        assert!(s.report(&d(DiagnosticKind::OrphanSweep, "a")));
        assert!(!s.report(&d(DiagnosticKind::OrphanSweep, "a")));
        assert!(s.report(&d(DiagnosticKind::UnresolvedRange, "a")));
        assert!(s.report(&d(DiagnosticKind::OrphanSweep, "b")));
        assert_eq!(s.footer_suffix(), " · diag u1/o2");
        s.forget(&d(DiagnosticKind::OrphanSweep, "b"));
        assert_eq!(s.footer_suffix(), " · diag u1/o1");
        assert!(s.report(&d(DiagnosticKind::OrphanSweep, "b")));
        s.reset();
        assert_eq!(s.footer_suffix(), "");
    }
}

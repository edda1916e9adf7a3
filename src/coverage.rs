//! Rule coverage: which clauses of `docs/rules/` a run exercised, measured from its evidence.
//!
//! Every clause of the rules pages (`roku.*`, `bub.*`, `core.*`, `oracle.*`) has a stable id
//! ([`clauses`], read from the pages themselves at build time by [`crate::clauses`], so the
//! ids cannot drift from the docs). Each id has either a **detector**, a function of a run's [`Evidence`] that says
//! whether the run showed the behaviour the clause describes, or a short **reason** why no
//! single run can show it ([`Measure::NotMeasurable`]). A detector fires only on what the
//! trace and the exchanges show happened (`bub.cap.fifo-queue`: two children waited in the
//! queue at once and both started later), never on what a scenario declares it is about.
//!
//! Adding a clause to the docs is a local change here: one line in [`DETECTORS`] (or, rarely,
//! in [`NOT_MEASURABLE`]); the unit tests fail until every id of the pages has exactly one.
//!
//! `rehearsal run --coverage` counts, per clause, the passing scenarios whose run exercised it
//! ([`Tally`]); `rehearsal fuzz` reports the clauses its campaign reached. This module reads
//! evidence only; it runs nothing and judges nothing (a clause exercised wrongly is the
//! oracles' and the expectations' business).

mod detectors;
mod facts;

use std::collections::BTreeMap;
use std::sync::OnceLock;

#[cfg(feature = "cli")]
pub use crate::clauses::Clause;
pub use crate::clauses::clauses;
use crate::evidence::Evidence;
use detectors::{DETECTORS, Detector, NOT_MEASURABLE};
use facts::Facts;

/// How a clause is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    /// By a detector over each run's evidence.
    Detected,
    /// Not from a run; the reason says why, and where the clause is checked instead.
    NotMeasurable(&'static str),
}

/// How the clause `id` is measured; `None` for an id that is no clause of the docs, or one
/// that has neither a detector nor a reason (the unit tests forbid both).
pub fn measure(id: &str) -> Option<Measure> {
    if DETECTORS.iter().any(|(d, _)| *d == id) {
        return Some(Measure::Detected);
    }
    NOT_MEASURABLE.iter().find(|(n, _)| *n == id).map(|(_, reason)| Measure::NotMeasurable(reason))
}

/// The clauses one run exercised, by their index in [`clauses`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reached {
    bits: Vec<bool>,
}

impl Reached {
    /// Whether the run exercised the clause at `index` of [`clauses`].
    pub fn contains(&self, index: usize) -> bool {
        self.bits.get(index).copied().unwrap_or(false)
    }

    /// The ids exercised, in [`clauses`] order.
    pub fn ids(&self) -> impl Iterator<Item = &'static str> + '_ {
        clauses().iter().enumerate().filter(|(i, _)| self.contains(*i)).map(|(_, c)| c.id)
    }

    /// The indices exercised, in [`clauses`] order.
    pub fn indices(&self) -> impl Iterator<Item = usize> + '_ {
        self.bits.iter().enumerate().filter(|(_, hit)| **hit).map(|(i, _)| i)
    }

    /// What a run judged from the model's side alone exercised: the clauses of the oracles
    /// that judge the core's events (`oracle.*` but `oracle.model-side.*`) are dropped, as
    /// those oracles did not judge it (a wire run has no events, and their detectors would
    /// fire on the emptiness).
    pub fn model_side(mut self) -> Reached {
        for (bit, clause) in self.bits.iter_mut().zip(clauses()) {
            if clause.id.starts_with("oracle.") && !clause.id.starts_with("oracle.model-side.") {
                *bit = false;
            }
        }
        self
    }
}

/// The clauses a run exercised, by the detectors over its evidence.
pub fn reached(evidence: &Evidence) -> Reached {
    let facts = Facts::new(evidence);
    let bits = detectors().iter().map(|detect| detect.is_some_and(|detect| detect(&facts))).collect();
    Reached { bits }
}

/// The detector of each clause, in [`clauses`] order.
fn detectors() -> &'static [Option<Detector>] {
    static IN_ORDER: OnceLock<Vec<Option<Detector>>> = OnceLock::new();
    IN_ORDER.get_or_init(|| {
        let by_id: BTreeMap<&str, Detector> = DETECTORS.iter().copied().collect();
        clauses().iter().map(|clause| by_id.get(clause.id).copied()).collect()
    })
}

/// Coverage over many runs: per clause, how many runs exercised it and the first example.
#[derive(Clone, Debug, Default)]
#[cfg(feature = "cli")]
pub struct Tally {
    runs: u64,
    counts: Vec<(u64, Option<String>)>,
}

/// One clause's line of a [`Tally`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg(feature = "cli")]
pub struct Line<'a> {
    /// The clause.
    pub clause: Clause,
    /// How it is measured.
    pub measure: Measure,
    /// Runs that exercised it.
    pub runs: u64,
    /// The first run that did (a file, a case), if any.
    pub example: Option<&'a str>,
}

#[cfg(feature = "cli")]
impl Tally {
    /// Adds one run's clauses; `example` names the run (a file, a case).
    pub fn add(&mut self, reached: &Reached, example: &str) {
        self.runs += 1;
        self.counts.resize(clauses().len(), (0, None));
        for i in reached.indices() {
            let (count, first) = &mut self.counts[i];
            *count += 1;
            first.get_or_insert_with(|| example.to_string());
        }
    }

    /// How many runs were added.
    pub fn runs(&self) -> u64 {
        self.runs
    }

    /// Every clause, in [`clauses`] order, with its count and example.
    pub fn lines(&self) -> Vec<Line<'_>> {
        clauses()
            .iter()
            .enumerate()
            .map(|(i, clause)| {
                let (runs, example) = self.counts.get(i).map_or((0, None), |(n, e)| (*n, e.as_deref()));
                let measure = measure(clause.id).unwrap_or(Measure::NotMeasurable("no detector"));
                Line { clause: *clause, measure, runs, example }
            })
            .collect()
    }

    /// The measured clauses no run exercised, in [`clauses`] order.
    pub fn unhit(&self) -> Vec<&'static str> {
        self.lines()
            .into_iter()
            .filter(|l| l.measure == Measure::Detected && l.runs == 0)
            .map(|l| l.clause.id)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::Rules;

    #[test]
    fn the_pages_have_clauses_with_well_formed_unique_ids() {
        let ids: Vec<&str> = clauses().iter().map(|c| c.id).collect();
        assert!(ids.len() > 200, "{} clauses read from the pages", ids.len());
        let mut sorted = ids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), ids.len(), "a clause id appears twice");
        for id in ids {
            let parts: Vec<&str> = id.split('.').collect();
            assert!(parts.len() >= 3, "{id}: <family>.<area>.<name>");
            assert!(["roku", "bub", "core", "oracle"].contains(&parts[0]), "{id}: unknown family");
            assert!(id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-'), "{id}");
        }
    }

    #[test]
    fn every_clause_of_the_docs_has_a_detector_or_a_reason() {
        let missing: Vec<&str> = clauses().iter().map(|c| c.id).filter(|id| measure(id).is_none()).collect();
        assert!(
            missing.is_empty(),
            "clauses of docs/rules/ with no detector (add one to the page's file under src/coverage/detectors/, or, if no run can show it, a reason to NOT_MEASURABLE): {missing:?}"
        );
        let both: Vec<&str> =
            DETECTORS.iter().map(|(id, _)| *id).filter(|id| NOT_MEASURABLE.iter().any(|(n, _)| n == id)).collect();
        assert!(both.is_empty(), "both a detector and a reason: {both:?}");
    }

    #[test]
    fn every_detector_and_reason_names_a_clause_of_the_docs_once() {
        let known: Vec<&str> = clauses().iter().map(|c| c.id).collect();
        let mut named: Vec<&str> =
            DETECTORS.iter().map(|(id, _)| *id).chain(NOT_MEASURABLE.iter().map(|(id, _)| *id)).collect();
        let stale: Vec<&&str> = named.iter().filter(|id| !known.contains(id)).collect();
        assert!(stale.is_empty(), "detectors or reasons for ids the docs do not have: {stale:?}");
        named.sort();
        let before = named.len();
        named.dedup();
        assert_eq!(before, named.len(), "an id is listed twice");
    }

    #[test]
    fn few_clauses_are_not_measurable_and_each_says_why() {
        assert!(NOT_MEASURABLE.len() <= 12, "keep the class small: {}", NOT_MEASURABLE.len());
        for (id, reason) in NOT_MEASURABLE {
            assert!(reason.len() > 40, "{id}: say why no run can show it, and where it is checked");
        }
    }

    #[test]
    fn empty_evidence_exercises_nothing() {
        let rules = Rules::roku();
        let trace = crate::trace::Trace::default();
        let evidence = Evidence {
            rules: &rules,
            trace: &trace,
            exchanges: &[],
            due: &[],
            live_sessions: &[],
            session_ended: false,
            limit_hit: None,
            stopped: false,
            alive_tasks: 0,
            setup: None,
        };
        let hit: Vec<&str> = reached(&evidence).ids().collect();
        assert!(hit.is_empty(), "{hit:?}");
    }

    #[test]
    fn a_tally_counts_runs_and_keeps_the_first_example() {
        let mut tally = Tally::default();
        let index = clauses().iter().position(|c| c.id == "bub.cap.fifo-queue").unwrap();
        let mut bits = vec![false; clauses().len()];
        bits[index] = true;
        tally.add(&Reached { bits: bits.clone() }, "a.json");
        tally.add(&Reached { bits }, "b.json");
        tally.add(&Reached::default(), "c.json");
        let line = tally.lines().into_iter().find(|l| l.clause.id == "bub.cap.fifo-queue").unwrap();
        assert_eq!((line.runs, line.example), (2, Some("a.json")));
        assert_eq!(tally.runs(), 3);
        assert!(tally.unhit().contains(&"roku.grant.min-remaining-cap"));
        assert!(!tally.unhit().contains(&"bub.cap.fifo-queue"));
        assert!(!tally.unhit().contains(&"core.never.wall-clock"), "not measurable, so never unhit");
    }
}

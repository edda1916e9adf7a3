//! The verdict on a scenario, built once from everything that decides it.
//!
//! A [`Judgement`] gathers the inputs: the subject judged (an in-process [`Run`], or a runtime
//! seen from the model's side alone, [`Served`]), the failures its judge found, and what the
//! caller adds before the verdict is built: determinism between two runs, the explored tie
//! orders, a stop that came before the judged run (a clock that stopped following the
//! runtime, a turn's command), the comparison with a golden file, and the oracles a runtime
//! switches off. [`Judgement::verdict`] then builds the [`Verdict`], in one fixed order of
//! failures (causes first), and nothing edits it after.
//!
//! What this module deliberately does not do: judge a run (the judges in `judge` and the wire
//! do), read a golden file (the command line does, and passes the comparison in), or print.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use super::failure::{Failure, FailureKind};
use crate::evidence::Evidence;
use crate::evidence::Exchange;
use crate::evidence::attribution::ModelSide;
use crate::rules::Rules;
use crate::run::Run;
use crate::trace::{Trace, printable};

/// What a verdict judged.
#[derive(Debug)]
pub enum Subject {
    /// A run of a core in this process (its trace, outcomes and exchanges).
    Run(Box<Run>),
    /// A runtime in another process, seen from the model's side alone: it reports no events.
    Served(Box<Served>),
}

/// A runtime seen from the model's side alone: the exchanges it made, attributed.
#[derive(Debug)]
pub struct Served {
    /// The record the model-side oracles judged.
    pub side: ModelSide,
    /// The exchanges as the script's engine logged them (for coverage).
    pub exchanges: Vec<Exchange>,
    /// The rules the oracles judged against.
    pub rules: Rules,
    /// How long the run took: wall time, or the clock's virtual end, or zero where a report
    /// must be the same in every run.
    pub elapsed: Duration,
    /// Whether the script was used up (the session ran to its end).
    pub session_ended: bool,
    /// Whether the harness stopped the run (an exhausted lane, an unattributed request).
    pub stopped: bool,
}

impl Served {
    /// The evidence coverage detectors read: the exchanges, and no trace (none was reported).
    pub fn evidence(&self) -> Evidence<'_> {
        static NO_TRACE: std::sync::OnceLock<Trace> = std::sync::OnceLock::new();
        Evidence {
            rules: &self.rules,
            setup: None,
            trace: NO_TRACE.get_or_init(Trace::default),
            exchanges: &self.exchanges,
            due: &[],
            live_sessions: &[],
            session_ended: self.session_ended,
            limit_hit: None,
            stopped: self.stopped,
            alive_tasks: 0,
        }
    }
}

/// Everything that decides a verdict, gathered before it is built. Made by a judge
/// ([`crate::judge::judge_in`], the wire's judge); the caller adds what only it knows; then
/// [`Judgement::verdict`] builds the verdict.
#[derive(Debug)]
pub struct Judgement {
    name: String,
    subject: Subject,
    /// rehearsal's own errors (an attribution the runtime's ground truth contradicts): every
    /// other finding stands on them, so they come before everything.
    own: Vec<Failure>,
    /// Stops that came before the judged run and are the likely cause of the rest.
    first: Vec<Failure>,
    /// What the judge found, in its order.
    judged: Vec<Failure>,
    /// Two runs of one order that differed.
    determinism: Vec<Failure>,
    /// Failures only explored tie orders showed, each worded with how to replay it.
    explored: Vec<Failure>,
    /// The golden file's comparison.
    snapshot: Vec<Failure>,
    /// Clauses switched off: their findings are left out.
    off: Vec<String>,
    orders: u32,
    default_only: Vec<String>,
    only_order: Option<u64>,
    untied: bool,
}

impl Judgement {
    /// What a judge found on `subject`, the scenario `name`.
    pub(crate) fn new(name: String, subject: Subject, judged: Vec<Failure>) -> Judgement {
        Judgement {
            name,
            subject,
            own: Vec::new(),
            first: Vec::new(),
            judged,
            determinism: Vec::new(),
            explored: Vec::new(),
            snapshot: Vec::new(),
            off: Vec::new(),
            orders: 1,
            default_only: Vec::new(),
            only_order: None,
            untied: false,
        }
    }

    /// The in-process run judged, if it is one.
    pub fn run(&self) -> Option<&Run> {
        match &self.subject {
            Subject::Run(run) => Some(run),
            Subject::Served(_) => None,
        }
    }

    /// Every failure the verdict will hold so far, in its order.
    pub fn failures(&self) -> impl Iterator<Item = &Failure> {
        let judged = self.judged.iter().filter(|f| !self.is_off(f));
        let own = self.own.iter().chain(&self.first);
        own.chain(judged).chain(&self.determinism).chain(&self.explored).chain(&self.snapshot)
    }

    fn is_off(&self, failure: &Failure) -> bool {
        switched_off(failure, &self.off)
    }

    /// An error of rehearsal's own (not the system under test's).
    pub(crate) fn own_error(&mut self, failure: Failure) {
        self.own.push(failure);
    }

    /// A difference between two runs of one order.
    pub(crate) fn determinism(&mut self, failure: Failure) {
        self.determinism.push(failure);
    }

    /// A failure only explored orders showed, worded with how to replay it.
    pub(crate) fn explored(&mut self, failure: Failure) {
        self.explored.push(failure);
    }

    /// The tie orders checked, what explored orders skipped, the one order checked instead of
    /// the default, and whether exploring found no tie to explore.
    pub(crate) fn orders(&mut self, orders: u32, default_only: Vec<String>, only_order: Option<u64>, untied: bool) {
        self.orders = orders;
        self.default_only = default_only;
        self.only_order = only_order;
        self.untied = untied;
    }

    /// How many tie orders were checked (`drive --explore` runs one judgement per order).
    pub fn checked_orders(mut self, orders: u32) -> Judgement {
        self.orders = orders;
        self
    }

    /// Stops that came before the judged run: listed first.
    pub fn first(mut self, failures: Vec<Failure>) -> Judgement {
        self.first.extend(failures);
        self
    }

    /// The comparison with the golden file, when it failed.
    pub fn snapshot(mut self, failure: Option<Failure>) -> Judgement {
        self.snapshot.extend(failure);
        self
    }

    /// Leaves out the findings of the rule `clause` (a runtime that switches an oracle off);
    /// how many there were.
    pub fn switch_off(&mut self, clause: &str) -> usize {
        self.off.push(clause.to_string());
        self.judged.iter().filter(|f| self.is_off(f)).count()
    }

    /// How long the served run took, as the report says it (the clock's virtual end, or zero
    /// where a report must be the same in every run).
    pub fn elapsed(mut self, elapsed: Duration) -> Judgement {
        match &mut self.subject {
            Subject::Run(run) => run.elapsed = elapsed,
            Subject::Served(served) => served.elapsed = elapsed,
        }
        self
    }

    /// The verdict, built once.
    pub fn verdict(self) -> Verdict {
        // The order of `failures()`, moved rather than copied: this runs once per judged run.
        let off = self.off;
        let judged = self
            .judged
            .into_iter()
            .filter(|f| !(f.kind == FailureKind::Oracle && f.clause.as_ref().is_some_and(|c| off.contains(c))));
        let failures = (self.own.into_iter().chain(self.first).chain(judged))
            .chain(self.determinism)
            .chain(self.explored)
            .chain(self.snapshot)
            .collect();
        Verdict {
            name: self.name,
            subject: self.subject,
            failures,
            orders: self.orders,
            default_only: self.default_only,
            only_order: self.only_order,
            untied: self.untied,
        }
    }
}

/// Whether `failure` is a finding of an oracle whose clause is in `off`.
fn switched_off(failure: &Failure, off: &[String]) -> bool {
    failure.kind == FailureKind::Oracle && failure.clause.as_ref().is_some_and(|c| off.contains(c))
}

/// A judged run: the verdict on a scenario. Built only by [`Judgement::verdict`].
///
/// Its `Display` is the report `rehearsal run` prints: a `PASS`/`FAIL` line, then each failure
/// with the trace lines involved.
pub struct Verdict {
    name: String,
    subject: Subject,
    failures: Vec<Failure>,
    orders: u32,
    default_only: Vec<String>,
    only_order: Option<u64>,
    untied: bool,
}

impl Verdict {
    /// The scenario's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What was judged.
    pub fn subject(&self) -> &Subject {
        &self.subject
    }

    /// The in-process run judged (in the default tie order, or in the one order checked);
    /// `None` for a runtime served over the wire.
    pub fn run(&self) -> Option<&Run> {
        match &self.subject {
            Subject::Run(run) => Some(run),
            Subject::Served(_) => None,
        }
    }

    /// The in-process run judged, taken out of the verdict.
    pub fn into_run(self) -> Option<Run> {
        match self.subject {
            Subject::Run(run) => Some(*run),
            Subject::Served(_) => None,
        }
    }

    /// The run's trace; `None` for a runtime served over the wire, which reports no events.
    pub fn trace(&self) -> Option<&Trace> {
        self.run().map(|run| &run.trace)
    }

    /// The model-side record judged, when the run was judged from the model's side.
    pub fn model_side(&self) -> Option<&ModelSide> {
        match &self.subject {
            Subject::Run(run) => run.model_side.as_ref(),
            Subject::Served(served) => Some(&served.side),
        }
    }

    /// The evidence the oracles and coverage detectors read.
    pub fn evidence(&self) -> Evidence<'_> {
        match &self.subject {
            Subject::Run(run) => run.evidence(),
            Subject::Served(served) => served.evidence(),
        }
    }

    /// How long the run took: virtual time in process; over the wire as [`Served::elapsed`].
    pub fn elapsed(&self) -> Duration {
        match &self.subject {
            Subject::Run(run) => run.elapsed,
            Subject::Served(served) => served.elapsed,
        }
    }

    /// Why it failed; empty when it passed. Causes come first.
    pub fn failures(&self) -> &[Failure] {
        &self.failures
    }

    /// The tie orders checked: the default one, and any explored ones.
    pub fn orders(&self) -> u32 {
        self.orders
    }

    /// What explored orders skipped, because the file marks it `order_dependent`: each as its
    /// place and the file's reason.
    pub fn default_only(&self) -> &[String] {
        &self.default_only
    }

    /// The one explored order checked instead of the default (`--explore-seed`).
    pub fn only_order(&self) -> Option<u64> {
        self.only_order
    }

    /// Exploring was asked for, but the run had no same-instant tie: the default order is the
    /// only one, and no other was run.
    pub fn untied(&self) -> bool {
        self.untied
    }

    /// Whether every expectation held.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }

    /// Whether the harness failed, not the system under test: something panicked inside an
    /// in-process run (the core or the harness), or rehearsal's attribution of a served run
    /// disagreed with the runtime's own names for its agents. A bug to report, not a verdict
    /// on the scenario.
    pub fn internal_error(&self) -> bool {
        match &self.subject {
            Subject::Run(run) => !run.internal_errors.is_empty(),
            Subject::Served(_) => self.failures.iter().any(|f| f.kind == FailureKind::Internal),
        }
    }

    /// When the run was judged from the model's side: the oracles that judged it (their
    /// clauses `oracle.model-side.*`). `None`: the event oracles judged it.
    pub fn judged_by(&self) -> Option<Vec<&'static str>> {
        self.model_side().map(|_| crate::oracles::model_side::CLAUSES.to_vec())
    }

    /// Panics with the report unless the scenario passed: one line in a `#[test]`.
    #[track_caller]
    pub fn assert_passed(&self) {
        assert!(self.passed(), "{self}");
    }

    /// The report, naming `file` when the scenario came from one.
    pub fn report(&self, file: Option<&Path>) -> String {
        self.report_with(file, false)
    }

    /// As [`Verdict::report`]; `verbose` names every oracle a model-side verdict was judged by
    /// (without it, their count).
    pub fn report_with(&self, file: Option<&Path>, verbose: bool) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let word = if self.passed() { "PASS" } else { "FAIL" };
        let file = file.map(|f| format!("{}; ", printable(&f.to_string_lossy()))).unwrap_or_default();
        let skipped = match self.default_only.len() {
            0 => String::new(),
            n => format!("; {} in the default order only", plural(n, "expectation", "expectations")),
        };
        // `--explore K` checks K orders besides the default; say so, or the line reads as one run.
        let orders = match self.orders {
            _ if self.only_order.is_some() => {
                format!(", tie order {} only{skipped}", self.only_order.unwrap_or_default())
            }
            0 | 1 if self.untied => ", no same-instant ties: one order is every order".to_string(),
            0 | 1 => String::new(),
            n => format!(", {n} tie orders: the default and {} explored{skipped}", n - 1),
        };
        // A core seen from the model's side alone reports no events: the line counts its
        // requests instead, and says which clock timed them (a runtime over the wire without
        // the harness's clock has only wall time; `drive` leaves its wall times to its notes,
        // so that its report is the same in every run).
        let elapsed = self.elapsed();
        let size = match (&self.subject, self.model_side()) {
            (Subject::Run(run), Some(side)) if run.reports == crate::sut::Reports::NoEvents => {
                requests_size(side, elapsed)
            }
            (Subject::Served(_), Some(side)) => requests_size(side, elapsed),
            (subject, _) => {
                let events = match subject {
                    Subject::Run(run) => run.trace.entries.len(),
                    Subject::Served(_) => 0,
                };
                format!("{events} events, {} ms virtual", elapsed.as_millis())
            }
        };
        let _ = writeln!(out, "{word} {} ({file}{size}{orders})", printable(&self.name));
        if let Some(oracles) = self.judged_by() {
            let against = match &self.subject {
                Subject::Run(run) if run.reports == crate::sut::Reports::Events => {
                    "each attribution compared with the alias the core reported"
                }
                _ => "the core reports no events",
            };
            let named = if verbose {
                oracles.join(", ")
            } else {
                format!("{} ({} oracles; --verbose names them)", common_prefix(&oracles), oracles.len())
            };
            let _ = writeln!(out, "  · judged from the model's side alone ({against}): {named}");
        }
        if self.orders > 1 || self.only_order.is_some() {
            for place in &self.default_only {
                let _ = writeln!(out, "  · not checked in explored orders: {}", printable(place));
            }
        }
        // Several failures often quote the same trace lines: each block is printed once.
        let mut quoted: Vec<&[String]> = Vec::new();
        for failure in &self.failures {
            let _ = writeln!(out, "  - {}", printable(&failure.what));
            if failure.lines.is_empty() {
                continue;
            }
            if quoted.contains(&failure.lines.as_slice()) {
                let _ = writeln!(out, "      | (the trace lines quoted above)");
                continue;
            }
            quoted.push(&failure.lines);
            for line in &failure.lines {
                let _ = writeln!(out, "      | {}", printable(line));
            }
        }
        out
    }
}

/// The size of a run seen from the model's side: its requests, and which clock timed them.
fn requests_size(side: &ModelSide, elapsed: Duration) -> String {
    let requests = plural(side.exchanges.len(), "request", "requests");
    match (side.wall_times, elapsed.is_zero()) {
        (true, true) => requests,
        (true, false) => format!("{requests}, {} ms wall", elapsed.as_millis()),
        (false, _) => format!("{requests}, {} ms virtual", elapsed.as_millis()),
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.report(None))
    }
}

impl fmt::Debug for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Verdict")
            .field("name", &self.name)
            .field("passed", &self.passed())
            .field("failures", &self.failures)
            .field("events", &self.trace().map_or(0, |t| t.entries.len()))
            .field("elapsed", &self.elapsed())
            .field("orders", &self.orders)
            .finish()
    }
}

/// The oracles' shared id prefix as a pattern (`oracle.model-side.*`), or the first id.
fn common_prefix(ids: &[&str]) -> String {
    let Some(first) = ids.first() else { return String::new() };
    let mut prefix = first.rsplit_once('.').map_or("", |(p, _)| p);
    while !prefix.is_empty() && !ids.iter().all(|id| id.starts_with(&format!("{prefix}."))) {
        prefix = prefix.rsplit_once('.').map_or("", |(p, _)| p);
    }
    if prefix.is_empty() { first.to_string() } else { format!("{prefix}.*") }
}

pub(super) fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served() -> Subject {
        Subject::Served(Box::new(Served {
            side: ModelSide::default(),
            exchanges: Vec::new(),
            rules: crate::rules::Rules::roku(),
            elapsed: Duration::from_millis(7),
            session_ended: true,
            stopped: false,
        }))
    }

    fn oracle(clause: &str, what: &str) -> Failure {
        Failure::new(FailureKind::Oracle, what.to_string(), Vec::new()).of_rule(clause, "main")
    }

    #[test]
    fn the_verdict_orders_failures_causes_first_and_the_snapshot_last() {
        let mut judgement = Judgement::new("x".into(), served(), vec![oracle("oracle.model-side.depth", "judged")]);
        judgement.determinism(Failure::new(FailureKind::Determinism, "determinism".into(), Vec::new()));
        judgement.explored(Failure::new(FailureKind::Oracle, "explored".into(), Vec::new()));
        judgement.own_error(Failure::new(FailureKind::Internal, "own".into(), Vec::new()));
        let stop = Failure::new(FailureKind::Stopped, "first".into(), Vec::new());
        let snapshot = Failure::new(FailureKind::Snapshot, "snapshot".into(), Vec::new());
        let verdict = judgement.first(vec![stop]).snapshot(Some(snapshot)).verdict();
        let whats: Vec<&str> = verdict.failures().iter().map(|f| f.what.as_str()).collect();
        assert_eq!(whats, ["own", "first", "judged", "determinism", "explored", "snapshot"]);
    }

    #[test]
    fn a_switched_off_oracle_is_left_out_by_its_clause_never_by_its_words() {
        let judged = vec![
            oracle("oracle.model-side.delivery", "model-side delivery: a result never delivered"),
            oracle("oracle.model-side.depth", "model-side depth: too deep"),
            // A check whose words name the clause is not the oracle's finding: it stays.
            Failure::new(FailureKind::Check, "check failed: (oracle.model-side.delivery)".into(), Vec::new()),
        ];
        let mut judgement = Judgement::new("x".into(), served(), judged);
        assert_eq!(judgement.switch_off("oracle.model-side.delivery"), 1);
        let verdict = judgement.elapsed(Duration::ZERO).verdict();
        let whats: Vec<&str> = verdict.failures().iter().map(|f| f.what.as_str()).collect();
        assert_eq!(whats, ["model-side depth: too deep", "check failed: (oracle.model-side.delivery)"]);
        assert_eq!(verdict.elapsed(), Duration::ZERO);
        assert!(verdict.run().is_none());
    }
}

//! The oracles of `docs/rules/core.md` §6 (`oracle.*`), checked on every run.
//!
//! Each oracle reads the evidence of a finished run (the trace, the requests the core sent,
//! what was left alive) and reports every violation with the oracle's name, the agent, the
//! virtual time and the trace lines involved. The oracles re-derive each rule from the
//! reference on their own: they never call the core's arithmetic, so a bug there cannot hide
//! behind shared code.
//!
//! This module judges; it does not run anything, and it does not know which scenario
//! expectations exist (that is `runner::judge`). This file is the frame (the [`Oracle`] names,
//! [`Violation`], the report they fill, [`check`] and [`determinism`]); every other oracle
//! lives in a submodule, one file each; [`index`] holds what several of them read alike.

mod budget;
mod concurrency;
mod context;
mod costs;
mod delivery;
mod depth;
mod fork_isolation;
mod index;
mod launch;
pub mod model_side;
mod precedence;
mod presets;
mod profiles;
mod provenance;
mod routing;
mod sessions;
mod task_ids;
mod termination;
mod texts;
mod timeouts;
mod truncation;
mod wait_order;

pub use profiles::refused as profiles_refused;
pub use truncation::expected_result;

use std::fmt;
use std::time::Duration;

pub use crate::evidence::Evidence;
use crate::rules::words::DEPTH_ERROR;
use crate::sut::event::Event;
use crate::trace::{Entry, Trace, What};
use provenance::{Checked, Provenance};

/// Which rule a violation breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Oracle {
    /// No agent deeper than the depth limit; refused spawns answered with the error.
    Depth,
    /// Pre-deduction, grants, monotonic budgets.
    Budget,
    /// Results handed to a parent are the original or exactly `limit` chars + notice.
    Truncation,
    /// Timeouts fire at exactly start + limit, and only then.
    Timeouts,
    /// At most `cap` running; FIFO starts; no free slot while a child is queued.
    Concurrency,
    /// Fork children see exactly the parent's conversation at the call, and no more.
    ForkIsolation,
    /// Every finished background result reaches the parent exactly once, in completion order.
    Delivery,
    /// Every run ends within its limits and leaves no task alive.
    Termination,
    /// The same scenario and seed give the same trace.
    Determinism,
    /// Every call and reply costs exactly its steps and recovery; nudges follow exactly the
    /// regular calls that exhaust a budget.
    Costs,
    /// Every text the runtime writes (final messages, timeout and cancellation bodies,
    /// refusals, immediate results, denials, nudges) is exactly the rules' own.
    Texts,
    /// Where several sources or states decide one thing (a time limit, the tools offered,
    /// whether a name is known, whether a turn is held), the one the rules name decides.
    Precedence,
    /// A `subagent.wait` covers, reads, orders and returns as the rules say.
    Wait,
    /// Every request carries the request id, session id, model, reasoning effort, memory,
    /// system prompt and profile the rules give its agent.
    Context,
    /// Messages from outside an agent's loop (steering, `subagent.send`) reach their addressee
    /// in its next request and nobody else; every child's requests hold only its own.
    Routing,
    /// A named session serves one run at a time, and each run starts from what the earlier
    /// completed or failed runs recorded.
    Sessions,
    /// A rule judged from the model's side alone ([`model_side`]); not one of [`Oracle::ALL`],
    /// which are the oracles on the core's events.
    ModelSide,
}

impl Oracle {
    /// Every oracle, in the order of docs/rules/core.md.
    pub const ALL: [Oracle; 16] = [
        Oracle::Depth,
        Oracle::Budget,
        Oracle::Truncation,
        Oracle::Timeouts,
        Oracle::Concurrency,
        Oracle::ForkIsolation,
        Oracle::Delivery,
        Oracle::Termination,
        Oracle::Determinism,
        Oracle::Costs,
        Oracle::Texts,
        Oracle::Precedence,
        Oracle::Wait,
        Oracle::Context,
        Oracle::Routing,
        Oracle::Sessions,
    ];

    /// The oracle's name, as reports print it.
    pub fn name(self) -> &'static str {
        match self {
            Oracle::Depth => "depth",
            Oracle::Budget => "budget",
            Oracle::Truncation => "truncation",
            Oracle::Timeouts => "timeouts",
            Oracle::Concurrency => "concurrency",
            Oracle::ForkIsolation => "fork-isolation",
            Oracle::Delivery => "delivery",
            Oracle::Termination => "termination",
            Oracle::Determinism => "determinism",
            Oracle::Costs => "costs",
            Oracle::Texts => "texts",
            Oracle::Precedence => "precedence",
            Oracle::Wait => "wait",
            Oracle::Context => "context",
            Oracle::Routing => "routing",
            Oracle::Sessions => "sessions",
            Oracle::ModelSide => "model-side",
        }
    }
}

impl fmt::Display for Oracle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One broken rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The oracle that caught it.
    pub oracle: Oracle,
    /// The agent involved.
    pub agent: String,
    /// Virtual time of the offending event.
    pub at: Duration,
    /// What is wrong.
    pub message: String,
    /// Indices of the trace entries involved.
    pub lines: Vec<usize>,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "oracle {}: {} at {}.{:03}s: {}",
            self.oracle,
            self.agent,
            self.at.as_secs(),
            self.at.subsec_millis(),
            self.message
        )
    }
}

struct Report<'a> {
    entries: &'a [Entry],
    found: Vec<Violation>,
}

impl Report<'_> {
    fn add(&mut self, oracle: Oracle, line: usize, message: String, mut lines: Vec<usize>) {
        if !lines.contains(&line) {
            lines.push(line);
        }
        lines.sort_unstable();
        // A line past the trace (a run stopped early) names the run, not an entry.
        let (agent, at) =
            self.entries.get(line).map_or(("main".to_string(), Duration::ZERO), |e| (e.agent.to_string(), e.at));
        lines.retain(|l| *l < self.entries.len());
        self.found.push(Violation { oracle, agent, at, message, lines });
    }

    fn add_run(&mut self, oracle: Oracle, message: String) {
        let at = self.entries.last().map_or(Duration::ZERO, |e| e.at);
        self.found.push(Violation { oracle, agent: "main".into(), at, message, lines: Vec::new() });
    }
}

fn core_events(trace: &Trace) -> impl Iterator<Item = (usize, &Entry, &Event)> {
    trace.entries.iter().enumerate().filter_map(|(i, e)| match &e.what {
        What::Core(event) => Some((i, e, event)),
        _ => None,
    })
}

/// Checks every oracle but determinism on one run. (Determinism needs two runs:
/// [`determinism`].)
pub fn check(evidence: &Evidence) -> Vec<Violation> {
    let mut report = Report { entries: &evidence.trace.entries, found: Vec::new() };
    let index = index::Index::new(evidence);
    depth::depth(evidence, &mut report);
    budget::budget(evidence, &mut report);
    truncation::truncation(evidence, &mut report);
    timeouts::timeouts(evidence, &mut report);
    concurrency::concurrency(evidence, &mut report);
    fork_isolation::fork_isolation(evidence, &index, &mut report);
    fork_isolation::history_kept(evidence, &index, &mut report);
    delivery::delivery(evidence, &index, &mut report);
    delivery::instants(evidence, &mut report);
    termination::termination(evidence, &mut report);
    costs::costs(evidence, &index, &mut report);
    texts::texts(evidence, &index, &mut report);
    precedence::precedence(evidence, &index, &mut report);
    wait_order::wait(evidence, &index, &mut report);
    context::context(evidence, &index, &mut report);
    profiles::profiles(evidence, &mut report);
    presets::presets(evidence, &mut report);
    task_ids::task_ids(evidence, &mut report);
    routing::routing(evidence, &index, &mut report);
    sessions::sessions(evidence, &index, &mut report);
    report.found
}

/// Oracle 9: two runs of the same scenario and seed give byte-identical traces.
///
/// Both renderings (text and JSON lines) are functions of the entries alone, so the entries
/// are compared as values and only a difference is rendered.
pub fn determinism(first: &Trace, second: &Trace) -> Option<Violation> {
    let (a, b) = (&first.entries, &second.entries);
    let at = a.iter().zip(b.iter()).position(|(x, y)| x != y).or((a.len() != b.len()).then(|| a.len().min(b.len())))?;
    let entry = a.get(at).or(b.get(at));
    // The text form shortens long strings; where it hides the difference, show the JSON.
    let show = |e: Option<&Entry>, other: Option<&Entry>| match (e, other) {
        (None, _) => "(end)".to_string(),
        (Some(e), Some(o)) if e.line() == o.line() => e.json().to_string(),
        (Some(e), _) => e.line(),
    };
    Some(Violation {
        oracle: Oracle::Determinism,
        agent: entry.map_or("main".into(), |e| e.agent.to_string()),
        at: entry.map_or(Duration::ZERO, |e| e.at),
        message: format!(
            "two runs differ at trace line {}: {:?} vs {:?}",
            at + 1,
            show(a.get(at), b.get(at)),
            show(b.get(at), a.get(at))
        ),
        lines: vec![at],
    })
}

fn short(s: &str) -> String {
    let head: String = s.chars().take(60).collect();
    if head.len() < s.len() { format!("{head}…") } else { head }
}

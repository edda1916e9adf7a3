//! The oracles of `docs/rules/core.md` §6 (`oracle.*`), checked on every run.
//!
//! Each oracle reads the evidence of a finished run (the trace, the requests the core sent,
//! what was left alive) and reports every violation with the oracle's name, the agent, the
//! virtual time and the trace lines involved. The oracles re-derive each rule from the
//! reference on their own: they never call the core's arithmetic, so a bug there cannot hide
//! behind shared code.
//!
//! This module judges; it does not run anything, and it does not know which scenario
//! expectations exist (that is `runner::judge`). Oracles 10 and on live in submodules, one
//! file each; [`index`] holds what several of them read alike.

mod context;
mod costs;
mod index;
mod launch;
pub mod model_side;
mod precedence;
mod presets;
mod profiles;
mod routing;
mod sessions;
mod task_ids;
mod texts;
mod wait_order;

pub use profiles::refused as profiles_refused;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::time::Duration;

pub use crate::evidence::Evidence;
use crate::evidence::{fork_mismatch, same_reply};
use crate::rules::words::DEPTH_ERROR;
use crate::sut::AgentId;
use crate::sut::event::{Event, Family, TaskStatus, Via};
use crate::sut::llm::{Message, Role, Transcript};
use crate::trace::{Entry, Trace, What};
use index::{Agents, PerAgent, status_word};

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
    depth(evidence, &mut report);
    budget(evidence, &mut report);
    truncation(evidence, &mut report);
    timeouts(evidence, &mut report);
    concurrency(evidence, &mut report);
    fork_isolation(evidence, &index, &mut report);
    history_kept(evidence, &index, &mut report);
    delivery(evidence, &index, &mut report);
    instants(evidence, &mut report);
    termination(evidence, &mut report);
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

/// `oracle.delivery.intake-before-request`: the root takes results in only on its way to the
/// model, so each notification is followed by a request of the root before its loop ends; a
/// loop that found its budget at 0 has taken in nothing, and what arrived waits for the next
/// turn.
fn intake_before_request(e: &Evidence, agents: &Agents, r: &mut Report) {
    let mut taken: Vec<usize> = Vec::new();
    for (i, _, event) in core_events(e.trace) {
        if !agents.is_root(i) {
            continue;
        }
        match event {
            Event::Delivered { via: Via::Notification, .. } => taken.push(i),
            Event::LlmRequest { .. } => taken.clear(),
            Event::AgentEnded { message, .. } if !taken.is_empty() => {
                r.add(
                    Oracle::Delivery,
                    i,
                    format!(
                        "main took in {} notification(s) and then ended its loop ({message:?}) without asking the model: results are taken in only before a request, and a loop with no step left leaves them for the next turn",
                        taken.len()
                    ),
                    std::mem::take(&mut taken),
                );
            }
            _ => {}
        }
    }
}

/// Oracle 1.
fn depth(e: &Evidence, r: &mut Report) {
    let limit = e.rules.depth_limit;
    let mut reported = BTreeSet::new();
    // The `Agent` call an agent is running, by agent: (tool.start line, spawned?).
    let mut open: BTreeMap<AgentId, (usize, bool)> = BTreeMap::new();
    // Per parent, how many children it has made; and every child made, with whether its
    // latest run has ended (a continuation runs an existing, finished child again).
    let mut made: BTreeMap<&AgentId, u32> = BTreeMap::new();
    let mut children: BTreeMap<&AgentId, Made> = BTreeMap::new();
    // The tool call each agent is running: (tool, line).
    let mut calling: BTreeMap<&AgentId, (&str, usize)> = BTreeMap::new();
    for (i, entry, event) in core_events(e.trace) {
        let agent = &entry.agent;
        if agent.depth() > limit && reported.insert(agent.clone()) {
            r.add(
                Oracle::Depth,
                i,
                format!("{agent} runs at depth {}, beyond the depth limit {limit}", agent.depth()),
                vec![],
            );
        }
        match event {
            Event::ToolStarted { tool, .. } => {
                calling.insert(agent, (tool.as_str(), i));
                if tool == "Agent" {
                    open.insert(agent.clone(), (i, false));
                }
            }
            Event::TaskEnded { child, .. } => {
                if let Some(made) = children.get_mut(child) {
                    made.ended = true;
                }
            }
            Event::Spawned { child, family, .. } => {
                if child.depth() > limit {
                    r.add(
                        Oracle::Depth,
                        i,
                        format!("{agent} spawned {child} although it is at the depth limit {limit}"),
                        vec![],
                    );
                }
                if let Some(call) = open.get_mut(agent) {
                    call.1 = true;
                }
                // `core.alias.numbering`: a parent's children are numbered 1, 2, … in the order
                // they are made, both families sharing the count; a refused call makes none. An
                // alias made before is legal only as a continuation: a `subagent.send` of the
                // same parent running a finished background child again. Anything else that
                // re-uses a number (a count that restarts each turn, say) made a new child
                // under an old name, which the count would have called something else.
                if let Some(earlier) = children.get_mut(child) {
                    let call = calling.get(agent).copied();
                    let continuation = call.is_some_and(|(tool, _)| tool == "subagent.send")
                        && earlier.family == Family::Background
                        && *family == Family::Background
                        && earlier.ended;
                    if !continuation {
                        let n = made.get(agent).copied().unwrap_or_default() + 1;
                        r.add(
                            Oracle::Depth,
                            i,
                            format!(
                                "{agent} spawned {child} again by `{}`, which is not a continuation (a `subagent.send` running a finished background child again): a new child takes the next number, {}",
                                call.map_or("no call", |(tool, _)| tool),
                                agent.child(n)
                            ),
                            vec![earlier.line],
                        );
                    }
                    earlier.ended = false;
                    earlier.line = i;
                } else {
                    children.insert(child, Made { family: *family, ended: false, line: i });
                    let n = made.entry(agent).or_default();
                    *n += 1;
                    let want = agent.child(*n);
                    if *child != want {
                        r.add(
                            Oracle::Depth,
                            i,
                            format!("{agent}'s child number {n} is called {child}; children are numbered in spawn order, so it is {want}"),
                            vec![],
                        );
                    }
                }
            }
            Event::SpawnRefused { reason, .. } if reason == DEPTH_ERROR && agent.depth() < limit => {
                r.add(
                    Oracle::Depth,
                    i,
                    format!(
                        "{agent} at depth {} was refused a child although the depth limit is {limit}",
                        agent.depth()
                    ),
                    vec![],
                );
            }
            Event::ToolEnded { tool, result, is_error, .. } => {
                calling.remove(agent);
                if tool != "Agent" {
                    continue;
                }
                let Some((start, spawned)) = open.remove(agent) else { continue };
                if agent.depth() >= limit && (spawned || result != DEPTH_ERROR || !is_error) {
                    r.add(
                        Oracle::Depth,
                        i,
                        format!("an `Agent` call of {agent} at the depth limit must give the depth error and no child, got {result:?}"),
                        vec![start],
                    );
                }
            }
            _ => {}
        }
    }
}

/// A child the depth oracle has seen made: its family, whether its latest run has ended, and
/// the line of its latest spawn.
struct Made {
    family: Family,
    ended: bool,
    line: usize,
}

/// The budget an event reports for its own agent: `(before, after)`.
fn budget_of(event: &Event) -> Option<(u32, u32)> {
    match event {
        Event::LlmRequest { budget, .. }
        | Event::Denied { budget, .. }
        | Event::ToolEnded { budget, .. }
        | Event::Nudge { budget, .. }
        | Event::StepCompleted { budget, .. }
        | Event::AgentEnded { budget, .. }
        | Event::TurnEnded { budget, .. } => Some((*budget, *budget)),
        Event::Spawned { budget_before, budget_after, .. } => Some((*budget_before, *budget_after)),
        _ => None,
    }
}

/// Oracle 2.
fn budget(e: &Evidence, r: &mut Report) {
    let rules = e.rules;
    // Per agent: (initial budget, last seen, line where the loop started).
    let mut loops: BTreeMap<AgentId, (u32, u32, usize)> = BTreeMap::new();
    let mut grants: BTreeMap<AgentId, (u32, usize)> = BTreeMap::new();
    for (i, entry, event) in core_events(e.trace) {
        let agent = &entry.agent;
        match event {
            Event::TurnStarted { budget, .. } => {
                if *budget != rules.root_step_budget {
                    r.add(
                        Oracle::Budget,
                        i,
                        format!("a turn starts with {budget} steps, not {}", rules.root_step_budget),
                        vec![],
                    );
                }
                loops.insert(agent.clone(), (*budget, *budget, i));
                continue;
            }
            Event::AgentStarted { budget, .. } => {
                match grants.remove(agent) {
                    Some((grant, line)) if grant != *budget => r.add(
                        Oracle::Budget,
                        i,
                        format!("{agent} starts with {budget} steps but was granted {grant}"),
                        vec![line],
                    ),
                    None => r.add(Oracle::Budget, i, format!("{agent} starts without a grant"), vec![]),
                    _ => {}
                }
                loops.insert(agent.clone(), (*budget, *budget, i));
                continue;
            }
            Event::Spawned { child, cost, grant, budget_before, budget_after, .. } => {
                let after_cost = budget_before.saturating_sub(rules.spawn_cost);
                let want_grant = after_cost.min(rules.child_step_cap);
                if *cost != rules.spawn_cost {
                    r.add(
                        Oracle::Budget,
                        i,
                        format!("a spawn cost {cost}, not the spawn cost {}", rules.spawn_cost),
                        vec![],
                    );
                }
                if *grant != want_grant {
                    r.add(
                        Oracle::Budget,
                        i,
                        format!(
                            "grant {grant} for {child}, but min(remaining after the spawn cost {after_cost}, child step cap {}) = {want_grant}",
                            rules.child_step_cap
                        ),
                        vec![],
                    );
                }
                if *budget_after != after_cost - want_grant.min(after_cost) {
                    r.add(
                        Oracle::Budget,
                        i,
                        format!(
                            "{agent} has {budget_after} left after paying {cost} + grant {grant} from {budget_before}"
                        ),
                        vec![],
                    );
                }
                grants.insert(child.clone(), (*grant, i));
            }
            Event::LlmRequest { budget: 0, .. } => {
                r.add(Oracle::Budget, i, format!("{agent} called the model with no steps left"), vec![]);
            }
            _ => {}
        }
        let Some((before, after)) = budget_of(event) else { continue };
        let Some((initial, last, start)) = loops.get_mut(agent) else { continue };
        if before > *last || after > before {
            r.add(
                Oracle::Budget,
                i,
                format!(
                    "{agent}'s remaining budget rose from {last} to {} (budgets are never refunded)",
                    before.max(after)
                ),
                vec![*start],
            );
        }
        if after > *initial {
            r.add(
                Oracle::Budget,
                i,
                format!("{agent} has {after} steps, more than the {initial} it started with"),
                vec![*start],
            );
        }
        // Follow the reported value, so one refund is reported once, not at every later event.
        *last = after;
    }
}

/// The result a parent must receive for a child's final message (`oracle.truncation.expected`), derived
/// from the reference independently of the core.
pub fn expected_result(message: &str, limit: Option<usize>) -> String {
    match limit {
        Some(limit) if message.chars().count() > limit => {
            let kept: String = message.chars().take(limit).collect();
            format!("{kept}...\n[Sub-agent response truncated to {limit} chars]")
        }
        _ => message.to_string(),
    }
}

/// Oracle 3. A foreground child's result is paired with its parent's `Agent` result through
/// the spawn inside that call, so a result handed over without a `child.result` record is
/// still checked.
fn truncation(e: &Evidence, r: &mut Report) {
    let limit = e.rules.result_limit_chars;
    let mut last_message: BTreeMap<&AgentId, (&str, usize)> = BTreeMap::new();
    // Per parent: the child spawned inside its running `Agent` call, and that spawn's line.
    let mut open: BTreeMap<AgentId, Option<(AgentId, usize)>> = BTreeMap::new();
    for (i, entry, event) in core_events(e.trace) {
        match event {
            Event::AgentEnded { message, .. } => {
                last_message.insert(&entry.agent, (message, i));
            }
            Event::ToolStarted { tool, .. } if tool == "Agent" => {
                open.insert(entry.agent.clone(), None);
            }
            Event::Spawned { child, family: Family::Foreground, .. } => {
                open.insert(entry.agent.clone(), Some((child.clone(), i)));
            }
            Event::ChildResult { child, chars, truncated_to, .. } => {
                let Some((message, line)) = last_message.get(child) else { continue };
                let length = message.chars().count();
                if *chars != length {
                    r.add(
                        Oracle::Truncation,
                        i,
                        format!("{child}'s result has {length} chars, reported {chars}"),
                        vec![*line],
                    );
                }
                let cut = limit.filter(|l| length > *l);
                if *truncated_to != cut {
                    r.add(
                        Oracle::Truncation,
                        i,
                        format!("{child}'s result reports truncated_to {truncated_to:?}, expected {cut:?}"),
                        vec![*line],
                    );
                }
            }
            Event::ToolEnded { tool, result, .. } if tool == "Agent" => {
                let Some(Some((child, spawn))) = open.remove(&entry.agent) else { continue };
                // A child that did not end (timed out) hands over the timeout error instead.
                let Some((message, line)) = last_message.get(&child).filter(|(_, line)| *line > spawn) else {
                    continue;
                };
                let want = expected_result(message, limit);
                if *result != want {
                    r.add(Oracle::Truncation, i, truncation_message(result, &want, limit), vec![*line]);
                }
            }
            Event::TaskEnded { child, status: TaskStatus::Completed | TaskStatus::Failed, body, .. } => {
                let Some((message, line)) = last_message.get(child) else { continue };
                let want = expected_result(message, limit);
                if *body != want {
                    r.add(Oracle::Truncation, i, truncation_message(body, &want, limit), vec![*line]);
                }
            }
            _ => {}
        }
    }
}

fn truncation_message(got: &str, want: &str, limit: Option<usize>) -> String {
    format!(
        "the parent received {} chars ({} bytes) where the limit {limit:?} gives {} chars ({} bytes); they first differ at char {}",
        got.chars().count(),
        got.len(),
        want.chars().count(),
        want.len(),
        got.chars()
            .zip(want.chars())
            .position(|(a, b)| a != b)
            .unwrap_or(got.chars().count().min(want.chars().count()))
    )
}

/// Oracle 4. A child with a limit must end at or before start + limit, and a timeout fires at
/// exactly start + limit; a child cancelled, or still running at the end of the trace, after
/// its time ran out was not stopped when it should have been.
fn timeouts(e: &Evidence, r: &mut Report) {
    let foreground = e.rules.agent_timeout.filter(|t| !t.is_zero());
    // Child alias -> (start, limit, line of the start).
    let mut running: BTreeMap<AgentId, (Duration, Option<Duration>, usize)> = BTreeMap::new();
    let overdue =
        |r: &mut Report, i: usize, child: &AgentId, at: Duration, start: Duration, limit: Duration, line: usize| {
            r.add(
                Oracle::Timeouts,
                i,
                format!("{child} ran {:?}, past its limit {limit:?}, and was not timed out", at - start),
                vec![line],
            );
        };
    for (i, entry, event) in core_events(e.trace) {
        match event {
            Event::Spawned { child, family: Family::Foreground, .. } => {
                running.insert(child.clone(), (entry.at, foreground, i));
            }
            Event::TaskStarted { child, timeout, .. } => {
                running.insert(child.clone(), (entry.at, *timeout, i));
            }
            Event::TimedOut { child, after } => {
                // The child's own children stop with it.
                running.retain(|agent, _| !agent.as_str().starts_with(&format!("{child}/")));
                let Some((start, limit, line)) = running.remove(child) else {
                    r.add(Oracle::Timeouts, i, format!("{child} timed out but was not running"), vec![]);
                    continue;
                };
                match limit {
                    None => r.add(Oracle::Timeouts, i, format!("{child} timed out without a time limit"), vec![line]),
                    Some(limit) if *after != limit || entry.at != start + limit => r.add(
                        Oracle::Timeouts,
                        i,
                        format!(
                            "{child} started at {start:?} with limit {limit:?} but timed out at {:?} (after {after:?}); it must end at exactly start + limit",
                            entry.at
                        ),
                        vec![line],
                    ),
                    Some(_) => {
                        // The harness delivered the reply that ends the child's loop in the
                        // very instant the limit ran out: the child finished (a request made
                        // in that instant is not judged: its reply is not one the timer raced).
                        let raced = e.due.iter().find(|d| {
                            d.agent == *child && d.ends_loop && d.due == entry.at && d.asked >= start && d.asked < entry.at
                        });
                        if let Some(d) = raced {
                            r.add(
                                Oracle::Timeouts,
                                i,
                                format!(
                                    "{child} timed out at {:?}, but the reply that ends it (asked at {:?}) was delivered in that very instant: a child that ends in the instant its limit runs out has finished",
                                    entry.at, d.asked
                                ),
                                vec![line],
                            );
                        }
                    }
                }
            }
            Event::AgentEnded { .. } if entry.agent.depth() > 0 => {
                if let Some((start, Some(limit), line)) = running.remove(&entry.agent)
                    && entry.at > start + limit
                {
                    overdue(r, i, &entry.agent, entry.at, start, limit, line);
                }
            }
            Event::TaskEnded { child, status: TaskStatus::Cancelled, .. } => {
                running.retain(|agent, _| !agent.as_str().starts_with(&format!("{child}/")));
                if let Some((start, Some(limit), line)) = running.remove(child)
                    && entry.at > start + limit
                {
                    overdue(r, i, child, entry.at, start, limit, line);
                }
            }
            _ => {}
        }
    }
    // Every instant before the last one is complete, even in a run the harness stopped: a
    // deadline strictly before the trace's end should have struck.
    let Some(last) = e.trace.entries.len().checked_sub(1) else { return };
    let end = e.trace.entries[last].at;
    for (child, (start, limit, line)) in running {
        if let Some(limit) = limit
            && end > start + limit
        {
            overdue(r, last, &child, end, start, limit, line);
        }
    }
}

/// Oracle 5.
fn concurrency(e: &Evidence, r: &mut Report) {
    let cap = e.rules.max_concurrency;
    let mut running: BTreeSet<&str> = BTreeSet::new();
    let mut queue: VecDeque<(&str, usize)> = VecDeque::new();
    let mut events = core_events(e.trace).peekable();
    while let Some((i, entry, event)) = events.next() {
        match event {
            Event::TaskQueued { task_id, .. } => queue.push_back((task_id, i)),
            Event::TaskStarted { task_id, .. } => {
                if let Some((first, line)) = queue.front()
                    && first != task_id
                {
                    r.add(
                        Oracle::Concurrency,
                        i,
                        format!("{task_id} started while {first}, queued before it, was still waiting (FIFO)"),
                        vec![*line],
                    );
                }
                queue.retain(|(id, _)| id != task_id);
                running.insert(task_id);
                if running.len() > cap {
                    r.add(
                        Oracle::Concurrency,
                        i,
                        format!("{} background children running at once, above the cap {cap}", running.len()),
                        vec![],
                    );
                }
            }
            // A task that ends without running was cancelled in the queue.
            Event::TaskEnded { task_id, .. } if !running.remove(task_id.as_str()) => {
                queue.retain(|(id, _)| id != task_id)
            }
            _ => {}
        }
        // The last instant of a stopped run may be unfinished: nothing is judged there.
        let instant_ends = match events.peek() {
            Some((_, next, _)) => next.at != entry.at,
            None => !e.stopped,
        };
        if instant_ends
            && running.len() < cap
            && let Some((waiting, line)) = queue.front()
        {
            r.add(
                Oracle::Concurrency,
                i,
                format!("{waiting} stays queued while only {} of {cap} slots are taken", running.len()),
                vec![*line],
            );
        }
    }
}

/// Where the messages of each agent's requests may come from.
struct Provenance<'a> {
    /// Per agent: its own replies, as the assistant messages they became.
    replies: PerAgent<Replies<'a>>,
    /// Per agent: texts that legitimately reach it as user messages (user turns, steering,
    /// `subagent.send`, notifications).
    inbound: PerAgent<BTreeSet<String>>,
    /// Per agent: the trace line of each of its requests, in order.
    request_lines: PerAgent<Vec<usize>>,
}

type ReplyKey<'a> = (&'a str, Option<&'a str>, u64);

/// One agent's replies, in the order the model gave them. An agent's requests show its replies
/// in that order, so the next one is tried first; any other is found through an index by
/// [`reply_key`] (built the first time one is needed), so finding one is never a scan of
/// every reply.
#[derive(Default)]
struct Replies<'a> {
    in_order: &'a [&'a Message],
    /// The reply after the last one found.
    next: std::cell::Cell<usize>,
    by_key: std::cell::OnceCell<BTreeMap<ReplyKey<'a>, Vec<usize>>>,
}

impl<'a> Replies<'a> {
    fn new(in_order: &'a [&'a Message]) -> Replies<'a> {
        Replies { in_order, ..Replies::default() }
    }

    /// Whether `message` is one of these replies (same text, call names and arguments).
    fn holds(&self, message: &Message) -> bool {
        let next = self.next.get();
        if self.in_order.get(next).is_some_and(|reply| same_reply(message, reply)) {
            self.next.set(next + 1);
            return true;
        }
        let by_key = self.by_key.get_or_init(|| {
            let mut by_key: BTreeMap<ReplyKey, Vec<usize>> = BTreeMap::new();
            for (i, reply) in self.in_order.iter().enumerate() {
                by_key.entry(reply_key(reply)).or_default().push(i);
            }
            by_key
        });
        let found = by_key
            .get(&reply_key(message))
            .and_then(|alike| alike.iter().copied().find(|i| same_reply(message, self.in_order[*i])));
        if let Some(i) = found {
            self.next.set(i + 1);
        }
        found.is_some()
    }
}

/// What replies are indexed by: the text, the first call's name, and a fingerprint of every
/// call's name and arguments (never its id). Without the fingerprint, an agent calling one
/// tool many times with other arguments puts every such reply under one key, and finding one
/// compares arguments reply by reply (quadratic in its steps). A collision only costs a
/// comparison: `same_reply` decides.
fn reply_key(message: &Message) -> ReplyKey<'_> {
    use std::hash::{Hash, Hasher};
    let mut hasher = FingerprintHasher::default();
    for call in &message.tool_calls {
        call.name.hash(&mut hasher);
        hash_json(&call.args, &mut hasher);
    }
    (message.content.as_str(), message.tool_calls.first().map(|c| c.name.as_str()), hasher.finish())
}

/// A fast, fixed hasher (the multiply-rotate step of rustc's `FxHasher`) for reply
/// fingerprints: they never leave the oracle and need no defence against chosen collisions,
/// only speed; SipHash was a tenth of judging a large run.
#[derive(Default)]
struct FingerprintHasher(u64);

impl std::hash::Hasher for FingerprintHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.add(u64::from_le_bytes(chunk.try_into().unwrap_or_default()));
        }
        let mut tail = [0u8; 8];
        let rest = chunks.remainder();
        tail[..rest.len()].copy_from_slice(rest);
        self.add(u64::from_le_bytes(tail) ^ rest.len() as u64);
    }

    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl FingerprintHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

/// Hashes a JSON value by its structure, allocating nothing: equal values hash equally (an
/// object's entries are combined in any order, as object equality ignores order).
fn hash_json(value: &serde_json::Value, hasher: &mut impl std::hash::Hasher) {
    use serde_json::Value;
    use std::hash::Hash;
    match value {
        Value::Null => 0u8.hash(hasher),
        Value::Bool(b) => (1u8, b).hash(hasher),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => (2u8, u).hash(hasher),
            (None, Some(i)) => (3u8, i).hash(hasher),
            _ => (4u8, n.as_f64().map(f64::to_bits)).hash(hasher),
        },
        Value::String(text) => (5u8, text).hash(hasher),
        Value::Array(items) => {
            (6u8, items.len()).hash(hasher);
            items.iter().for_each(|item| hash_json(item, hasher));
        }
        Value::Object(map) => {
            use std::hash::Hasher as _;
            let mut entries = 0u64;
            for (key, item) in map {
                let mut entry = FingerprintHasher::default();
                key.hash(&mut entry);
                hash_json(item, &mut entry);
                entries = entries.wrapping_add(entry.finish());
            }
            (7u8, map.len(), entries).hash(hasher);
        }
    }
}

/// How far provenance has checked an agent's conversation: its last request from `from` on,
/// and the call ids its own replies made in it. The next request of the agent that grew from
/// this one is checked only in the messages it added.
struct Checked<'a> {
    messages: &'a Transcript,
    from: usize,
    /// In the order made: a result usually answers one of the last, so a search from the end
    /// finds it at once (a set cost an allocation per call).
    calls: Vec<&'a str>,
}

impl<'a> Provenance<'a> {
    /// Every agent's replies (as the index holds them); no inbound text or request line yet.
    fn new(index: &'a index::Index<'a>) -> Provenance<'a> {
        let agents = &index.agents;
        let mut replies = PerAgent::new(agents);
        for agent in 0..agents.len() {
            replies.insert(agent, Replies::new(index.replies_of(agent)));
        }
        Provenance { replies, inbound: PerAgent::new(agents), request_lines: PerAgent::new(agents) }
    }

    /// Notes a text that reached the agent numbered `agent` from outside its loop.
    fn inbound(&mut self, agent: usize, text: String) {
        self.inbound.or_insert_with(agent, BTreeSet::new).insert(text);
    }

    /// The first of `messages` (a stretch of one request of `agent`, following what
    /// `calls` already holds) that cannot come from `agent`'s own loop, and why. An assistant
    /// message must be one of the agent's own replies (same text, call names and arguments;
    /// the core may give the calls ids of its own); a tool result must answer a call of such a
    /// message earlier in the request (ids compared within the request as the core wrote them,
    /// never parsed); a user message must be a text that reached the agent from outside (turns,
    /// steering, sends, notifications) or the runtime's exhaustion nudge.
    fn first_foreign(
        &self,
        (agent, number): (&AgentId, usize),
        messages: impl IntoIterator<Item = &'a Message>,
        calls: &mut Vec<&'a str>,
    ) -> Option<String> {
        for message in messages {
            match message.role {
                Role::Assistant => {
                    let own = self.replies.get(number).is_some_and(|replies| replies.holds(message));
                    if !own {
                        return Some(format!(
                            "an assistant message {agent} never wrote ({:?})",
                            short(&message.content)
                        ));
                    }
                    calls.extend(message.tool_calls.iter().map(|c| c.id.as_str()));
                }
                Role::Tool => {
                    let id = message.tool_call_id.as_deref().unwrap_or_default();
                    if !calls.iter().rev().any(|call| *call == id) {
                        return Some(format!("a tool result for call {id:?}, which no earlier reply of {agent} made"));
                    }
                }
                Role::User => {
                    let known = self.inbound.get(number).is_some_and(|texts| texts.contains(&message.content))
                        || message.content.starts_with("System: step budget exhausted (");
                    if !known {
                        return Some(format!("a user message nobody sent to {agent} ({:?})", short(&message.content)));
                    }
                }
            }
        }
        None
    }
}

fn short(s: &str) -> String {
    let head: String = s.chars().take(60).collect();
    if head.len() < s.len() { format!("{head}…") } else { head }
}

/// Oracle 6. A fork child's first request is exactly the parent's conversation at the call
/// (plus its prompt and what was sent to it before its first step); past that snapshot, and
/// in every request of the root, each message must come from the agent's own loop: its own
/// replies and tool results, user turns, messages sent to it, notifications, nudges. Temp
/// children start from their prompt alone; temp and fork sessions are gone after the run,
/// named ones kept.
fn fork_isolation(e: &Evidence, index: &index::Index, r: &mut Report) {
    let agents = &index.agents;
    let mut kinds: PerAgent<(&str, usize)> = PerAgent::new(agents);
    let mut named = BTreeSet::new();
    let mut prov = Provenance::new(index);
    let mut sent_early: PerAgent<Vec<String>> = PerAgent::new(agents);
    // Per task, its finished runs not yet delivered, in order (a continued task runs again).
    let mut results: BTreeMap<String, VecDeque<(TaskStatus, String)>> = BTreeMap::new();
    for (i, _, event) in core_events(e.trace) {
        let agent = agents.at(i);
        match event {
            Event::SessionOpened { name, kind } => {
                kinds.or_insert_with(agent, || (kind, i));
                if *kind == "named" {
                    named.insert(name.clone());
                }
            }
            Event::TurnStarted { message, .. } => prov.inbound(agent, message.clone()),
            Event::Steered { message } => {
                prov.inbound(agent, message.clone());
                if !prov.request_lines.contains(agent) {
                    sent_early.or_insert_with(agent, Vec::new).push(message.clone());
                }
            }
            Event::TaskEnded { task_id, status, body, .. } if *status != TaskStatus::Cancelled => {
                results.entry(task_id.clone()).or_default().push_back((*status, body.clone()));
            }
            Event::Delivered { task_id, via, .. } => {
                let run = results.get_mut(task_id).and_then(VecDeque::pop_front);
                if let (Some((status, body)), Via::Notification) = (run, via) {
                    prov.inbound(agent, notification(task_id, status, &body));
                }
            }
            Event::LlmRequest { .. } => prov.request_lines.or_insert_with(agent, Vec::new).push(i),
            _ => {}
        }
    }
    let mut checked: PerAgent<Checked> = PerAgent::new(agents);
    let line_of = |number: usize| kinds.get(number).map_or(0, |(_, line)| *line);
    let mut seen: PerAgent<usize> = PerAgent::new(agents);
    let mut first: PerAgent<&Transcript> = PerAgent::new(agents);
    for (k, exchange) in e.exchanges.iter().enumerate() {
        let request = &exchange.request;
        let agent = &request.agent;
        let number = agents.asking(k);
        let n = seen.or_insert_with(number, || 0);
        let line = prov.request_lines.get(number).and_then(|lines| lines.get(*n).copied()).unwrap_or(0);
        *n += 1;
        let kind = kinds.get(number).map(|(k, _)| *k);
        let sent = sent_early.get(number).map_or(&[][..], Vec::as_slice);
        // Messages before `from` are the agent's starting conversation, checked separately.
        let from = match (agent.depth(), kind) {
            (0, _) => 0,
            (_, Some("fork")) => match first.get(number) {
                None => {
                    if let Some(difference) = fork_mismatch(e.exchanges, request, sent) {
                        r.add(
                            Oracle::ForkIsolation,
                            line,
                            format!("{agent}'s first request: {difference}"),
                            vec![line_of(number)],
                        );
                    }
                    first.insert(number, &request.messages);
                    continue;
                }
                Some(start) if !request.messages.starts_with(start) => {
                    r.add(
                        Oracle::ForkIsolation,
                        line,
                        format!("{agent}'s request no longer starts with its fork snapshot"),
                        vec![],
                    );
                    continue;
                }
                Some(start) => start.len(),
            },
            (_, Some("temp")) if !first.contains(number) => {
                first.insert(number, &request.messages);
                if request.messages.len() != 1 + sent.len() {
                    r.add(
                        Oracle::ForkIsolation,
                        line,
                        format!(
                            "{agent} runs in a temp session but its first request holds {} messages, not its prompt and the {} sent to it",
                            request.messages.len(),
                            sent.len()
                        ),
                        vec![line_of(number)],
                    );
                }
                continue;
            }
            _ => continue,
        };
        // Only what this request added to the agent's previous one needs checking.
        let previous = checked.remove(number).filter(|c| c.from == from && request.messages.extends(c.messages));
        let (added, mut calls) = match previous {
            Some(c) => (request.messages.since(c.messages).unwrap_or_default(), c.calls),
            None => (request.messages.iter().skip(from).collect(), Vec::new()),
        };
        if let Some(why) = prov.first_foreign((agent, number), added, &mut calls) {
            r.add(Oracle::ForkIsolation, line, format!("{agent}'s request holds {why}"), vec![]);
        }
        checked.insert(number, Checked { messages: &request.messages, from, calls });
    }
    if e.session_ended {
        for session in e.live_sessions {
            // A named session may be called anything, `temp/…` included; it is not a task's.
            let scratch = session.starts_with("temp/") || session.starts_with("fork/");
            if scratch && !named.contains(session) {
                r.add_run(Oracle::ForkIsolation, format!("session {session} outlived its task"));
            }
        }
        for session in named.iter().filter(|n| !e.live_sessions.contains(n)) {
            r.add_run(Oracle::ForkIsolation, format!("named session {session} was not kept"));
        }
    }
}

/// The notification text for a result, as `bub.delivery.notification-format` gives it.
fn notification(task_id: &str, status: TaskStatus, body: &str) -> String {
    format!(
        "<subagent-notification task_id=\"{task_id}\" status=\"{}\">\n{body}\n</subagent-notification>",
        index::status_word(status)
    )
}

/// `oracle.fork-isolation.history-kept`: a conversation only grows. Each request of an agent
/// begins with every message of its previous request, in order: within a run, and for the
/// root across its turns too (a later turn continues the session's history); a child's run
/// that begins again (a continuation) starts a new count.
fn history_kept(e: &Evidence, index: &index::Index, r: &mut Report) {
    let mut previous: PerAgent<(&Transcript, usize)> = PerAgent::new(&index.agents);
    for (i, entry, event) in core_events(e.trace) {
        let number = index.agents.at(i);
        match event {
            Event::AgentStarted { .. } => {
                previous.remove(number);
            }
            Event::LlmRequest { .. } => {
                let Some(exchange) = index.exchange(i) else { continue };
                let messages = &exchange.request.messages;
                if let Some((before, line)) = previous.insert(number, (messages, i))
                    && !messages.starts_with(before)
                {
                    let agent = &entry.agent;
                    r.add(
                        Oracle::ForkIsolation,
                        i,
                        format!(
                            "{agent}'s request does not begin with its previous request's {} message(s): its history lost or changed some",
                            before.len()
                        ),
                        vec![line],
                    );
                }
            }
            _ => {}
        }
    }
}

/// Oracle 7. Every finished result (cancelled runs excepted) reaches the parent exactly once,
/// by notification or by `wait`, no later than the parent's next step; the notifications of
/// one delivery come in completion order, ties in spawn order; and each notified text is in
/// the parent's next request.
fn delivery(e: &Evidence, index: &index::Index, r: &mut Report) {
    intake_before_request(e, &index.agents, r);
    struct Ended<'a> {
        task_id: &'a str,
        status: TaskStatus,
        body: &'a str,
        at: Duration,
        seq: usize,
        line: usize,
    }
    let mut spawn_seq: BTreeMap<&str, usize> = BTreeMap::new();
    let mut ended: Vec<Ended> = Vec::new();
    // Per task, its runs that ended and are not yet settled (delivered, or reported missed),
    // oldest first; and every such run, for the check at each step of the parent.
    let mut pending: BTreeMap<&str, VecDeque<usize>> = BTreeMap::new();
    let mut unsettled: BTreeSet<usize> = BTreeSet::new();
    // Per task, its last run that was cancelled (never deliverable).
    let mut cancelled: BTreeMap<&str, usize> = BTreeMap::new();
    // The last notification of the current delivery: the root reads each batch before a step.
    let mut batch_last: Option<(Duration, usize)> = None;
    let mut root_requests = e.exchanges.iter().filter(|x| x.request.agent.depth() == 0);
    let mut previous_request: Option<&Transcript> = None;
    let mut awaiting_text: Vec<(String, usize)> = Vec::new();
    // The user message of a turn the root has not yet asked the model about.
    let mut turn_message: Option<&str> = None;
    for (i, entry, event) in core_events(e.trace) {
        match event {
            Event::TurnStarted { message, .. } if entry.agent.depth() == 0 => turn_message = Some(message),
            Event::TaskQueued { task_id, .. } => {
                let next = spawn_seq.len();
                spawn_seq.entry(task_id).or_insert(next);
            }
            Event::TaskEnded { task_id, status: TaskStatus::Cancelled, .. } => {
                cancelled.insert(task_id, i);
            }
            Event::TaskEnded { task_id, status, body, .. } => {
                let seq = spawn_seq.get(task_id.as_str()).copied().unwrap_or(usize::MAX);
                let task_id = task_id.as_str();
                ended.push(Ended { task_id, status: *status, body, at: entry.at, seq, line: i });
                pending.entry(task_id).or_default().push_back(ended.len() - 1);
                unsettled.insert(ended.len() - 1);
                cancelled.remove(task_id);
            }
            Event::Delivered { task_id, status, via } => {
                let Some(index) = pending.get_mut(task_id.as_str()).and_then(VecDeque::pop_front) else {
                    let cancelled = cancelled.get(task_id.as_str());
                    let message = match cancelled {
                        Some(_) => format!("cancelled task {task_id} was delivered"),
                        None => format!("{task_id} was delivered again, or before it ended"),
                    };
                    r.add(Oracle::Delivery, i, message, cancelled.map(|line| vec![*line]).unwrap_or_default());
                    continue;
                };
                unsettled.remove(&index);
                let run = &ended[index];
                if run.status != *status {
                    r.add(
                        Oracle::Delivery,
                        i,
                        format!("{task_id} ended {:?} but was delivered as {status:?}", run.status),
                        vec![run.line],
                    );
                }
                if *via == Via::Notification {
                    let key = (run.at, run.seq);
                    if batch_last.is_some_and(|last| key < last) {
                        r.add(
                            Oracle::Delivery,
                            i,
                            format!("{task_id} was notified out of completion order"),
                            vec![run.line],
                        );
                    }
                    batch_last = Some(key);
                    awaiting_text.push((notification(task_id, run.status, run.body), i));
                }
            }
            Event::LlmRequest { .. } if entry.agent.depth() == 0 => {
                batch_last = None;
                let request = root_requests.next().map(|x| &x.request.messages);
                // Only what this request added since the root's previous one can hold a
                // result notified since then.
                let added: Vec<&Message> = match (request, previous_request) {
                    (Some(now), Some(before)) => now.since(before).unwrap_or_else(|| now.iter().collect()),
                    (Some(now), None) => now.iter().collect(),
                    (None, _) => Vec::new(),
                };
                // `bub.turn.unfinished-next-turn`: a turn's first request holds the user's new
                // message, then the results taken in with it.
                if let Some(message) = turn_message.take() {
                    let user = added.iter().position(|m| m.role == Role::User && m.content == message);
                    let early = awaiting_text.iter().find(|(text, _)| {
                        let at = added.iter().position(|m| m.role == Role::User && m.content == *text);
                        at.zip(user).is_some_and(|(at, user)| at < user)
                    });
                    if let Some((_, line)) = early {
                        r.add(
                            Oracle::Delivery,
                            *line,
                            "a result notified at the start of a turn comes before the turn's user message in the first request".into(),
                            vec![i],
                        );
                    }
                }
                for (text, line) in awaiting_text.drain(..) {
                    if !added.iter().any(|m| m.role == Role::User && m.content == text) {
                        r.add(
                            Oracle::Delivery,
                            line,
                            "a notified result is missing from the parent's next request".into(),
                            vec![i],
                        );
                    }
                }
                previous_request = request.or(previous_request);
                for index in std::mem::take(&mut unsettled) {
                    let run = &ended[index];
                    if let Some(runs) = pending.get_mut(run.task_id) {
                        runs.retain(|x| *x != index);
                    }
                    r.add(
                        Oracle::Delivery,
                        i,
                        format!("{} finished before this step of the parent but was not delivered", run.task_id),
                        vec![run.line],
                    );
                }
            }
            _ => {}
        }
    }
}

/// Oracle 7, in one instant (`oracle.delivery.instant-settled`): the root acts only once
/// everything due at the current instant has happened. A result of a task that was already
/// running when the root sent a request, or when a `wait` answered, and that ends in that
/// same instant, belongs in it; so does a steering message that arrives in the instant of a
/// root request. The trace shows the breach as such a line after the request or the answer,
/// at the same virtual time. Results the root's own later actions cause in that instant (a
/// child it spawns or frees a slot for afterwards) start after the request and are exempt.
fn instants(e: &Evidence, r: &mut Report) {
    enum Late<'a> {
        /// A task run that ended with a result; the line of the `task.started` of that run.
        Ended {
            task_id: &'a str,
            started: usize,
        },
        Steered,
    }
    let mut started: BTreeMap<&str, usize> = BTreeMap::new();
    let mut lates: Vec<(usize, Duration, Late)> = Vec::new();
    for (i, entry, event) in core_events(e.trace) {
        match event {
            Event::TaskStarted { task_id, .. } => {
                started.insert(task_id, i);
            }
            Event::TaskEnded { task_id, status, .. } if *status != TaskStatus::Cancelled => {
                let started = started.get(task_id.as_str()).copied().unwrap_or(usize::MAX);
                lates.push((i, entry.at, Late::Ended { task_id, started }));
            }
            Event::Steered { .. } if entry.agent.depth() == 0 => lates.push((i, entry.at, Late::Steered)),
            _ => {}
        }
    }
    // The wait calls in flight at the root: call id -> (line of its start, listed task ids).
    let mut waits: BTreeMap<&str, (usize, Vec<String>)> = BTreeMap::new();
    let mut next = 0;
    for (i, entry, event) in core_events(e.trace) {
        if entry.agent.depth() != 0 {
            continue;
        }
        // What acts at line i, and which task results it must hold.
        let (what, wait_start, listed) = match event {
            Event::LlmRequest { .. } => ("request", i, None),
            Event::ToolStarted { call_id, tool, args } if tool == "subagent.wait" => {
                let listed = index::field(args, "task_ids").and_then(|ids| ids.as_array()).map(|ids| {
                    ids.iter().filter_map(|id| id.as_str()).map(|id| id.trim().to_string()).collect::<Vec<_>>()
                });
                waits.insert(call_id, (i, listed.unwrap_or_default()));
                continue;
            }
            Event::ToolEnded { call_id, tool, is_error: false, .. } if tool == "subagent.wait" => {
                let Some((start, listed)) = waits.remove(call_id.as_str()) else { continue };
                ("answer of subagent.wait", start, Some(listed))
            }
            _ => continue,
        };
        while lates.get(next).is_some_and(|(line, _, _)| *line < i) {
            next += 1;
        }
        for (line, _, late) in lates[next..].iter().take_while(|(_, at, _)| *at == entry.at) {
            let message = match late {
                Late::Ended { task_id, started } if *started < wait_start => {
                    let targeted =
                        listed.as_ref().is_none_or(|ids| ids.is_empty() || ids.iter().any(|id| id == task_id));
                    if !targeted {
                        continue;
                    }
                    format!(
                        "{task_id} ended in the instant of this {what} but is not in it: the {what} came before the instant settled"
                    )
                }
                Late::Steered if listed.is_none() => {
                    "a steering message arrived in the instant of this request but is not in it".to_string()
                }
                _ => continue,
            };
            r.add(Oracle::Delivery, i, message, vec![*line]);
        }
    }
}

/// Oracle 8.
fn termination(e: &Evidence, r: &mut Report) {
    if let Some(limit) = e.limit_hit {
        r.add_run(Oracle::Termination, format!("the run did not end by itself: {limit}"));
    }
    if !e.session_ended {
        return;
    }
    if e.alive_tasks > 0 {
        r.add_run(
            Oracle::Termination,
            format!("{} tasks of the run are still alive after the session ended", e.alive_tasks),
        );
    }
    let mut open: BTreeMap<String, usize> = BTreeMap::new();
    for (i, _, event) in core_events(e.trace) {
        match event {
            Event::TaskQueued { task_id, .. } => {
                open.insert(task_id.clone(), i);
            }
            Event::TaskEnded { task_id, .. } => {
                open.remove(task_id);
            }
            _ => {}
        }
    }
    for (task_id, line) in open {
        r.add(Oracle::Termination, line, format!("task {task_id} never ended, although the session did"), vec![]);
    }
    let turn_ended = |entry: &Entry| matches!(entry.what, What::Core(Event::TurnEnded { .. }));
    let Some(last_turn) = e.trace.entries.iter().rposition(turn_ended) else {
        return;
    };
    quit_order(e, last_turn, r);
    cancelled_on_request(e, last_turn, r);
    quit_cancels_all(e, last_turn, r);
}

/// `oracle.termination.quit-cancels-all`: quitting, once the session's last turn has ended,
/// cancels every task still queued or running (`bub.quit.cancels-children`) in that instant:
/// no task ends later.
fn quit_cancels_all(e: &Evidence, last_turn: usize, r: &mut Report) {
    let at = e.trace.entries[last_turn].at;
    for (offset, entry) in e.trace.entries[last_turn..].iter().enumerate() {
        let What::Core(Event::TaskEnded { task_id, status, .. }) = &entry.what else { continue };
        // A task due in that very instant may still end on its own before quitting reaches it.
        if entry.at > at {
            r.add(
                Oracle::Termination,
                last_turn + offset,
                format!(
                    "task {task_id} ended {} at {:.3}s, after the session's last turn ended at {:.3}s; quitting cancels every task still queued or running then",
                    status_word(*status),
                    entry.at.as_secs_f64(),
                    at.as_secs_f64()
                ),
                vec![last_turn],
            );
        }
    }
}

/// `oracle.termination.cancelled-on-request`: a task ends `cancelled` only inside the root's
/// `subagent.cancel` call that names it (`bub.cancel.stops`) or by quitting, once the session's
/// last turn has ended (`bub.quit.cancels-children`). A turn that fails, asks the user or runs
/// out of steps leaves its tasks running, to be delivered at the next turn
/// (`bub.turn.unfinished-next-turn`).
fn cancelled_on_request(e: &Evidence, last_turn: usize, r: &mut Report) {
    // The id the root's open `subagent.cancel` names, trimmed (`bub.task-id.trimmed`).
    let mut cancelling: Option<(&str, usize)> = None;
    for (i, entry, event) in core_events(e.trace) {
        match event {
            Event::ToolStarted { tool, args, .. } if tool == "subagent.cancel" && entry.agent.depth() == 0 => {
                cancelling = Some((index::string_arg(args, "task_id").unwrap_or_default().trim(), i));
            }
            Event::ToolEnded { tool, .. } if tool == "subagent.cancel" && entry.agent.depth() == 0 => {
                cancelling = None;
            }
            Event::TaskEnded { task_id, status: TaskStatus::Cancelled, .. } if i < last_turn => {
                match cancelling {
                    Some((named, _)) if named == task_id => {}
                    _ => r.add(
                        Oracle::Termination,
                        i,
                        format!(
                            "task {task_id} was cancelled although no `subagent.cancel` named it and the session's last turn had not ended; only a cancel call or quitting cancels a task"
                        ),
                        cancelling.map(|(_, line)| vec![line]).unwrap_or_default(),
                    ),
                }
            }
            _ => {}
        }
    }
}

/// `oracle.termination.quit-queued-first`: what is cancelled once the last turn has ended is
/// cancelled by quitting, queued tasks before running ones, so none starts only to be
/// cancelled.
fn quit_order(e: &Evidence, last_turn: usize, r: &mut Report) {
    // Per task: whether it is queued (`true`) or running (`false`), and where it started.
    let mut active: BTreeMap<&str, (bool, usize)> = BTreeMap::new();
    for (i, _, event) in core_events(e.trace) {
        match event {
            Event::TaskQueued { task_id, .. } => {
                active.insert(task_id, (true, i));
            }
            Event::TaskStarted { task_id, .. } => {
                active.insert(task_id, (false, i));
            }
            Event::TaskEnded { task_id, status, .. } => {
                let Some((queued, started)) = active.remove(task_id.as_str()) else { continue };
                if i < last_turn || *status != TaskStatus::Cancelled || queued {
                    continue;
                }
                if started > last_turn {
                    r.add(
                        Oracle::Termination,
                        i,
                        format!(
                            "task {task_id} started after the session's last turn ended, only to be cancelled by quitting; quitting cancels the queued tasks first"
                        ),
                        vec![started],
                    );
                } else if let Some((waiting, _)) = active.iter().find(|(_, (queued, _))| *queued) {
                    r.add(
                        Oracle::Termination,
                        i,
                        format!(
                            "quitting cancelled the running task {task_id} while task {waiting} was still queued; it cancels the queued tasks first"
                        ),
                        vec![],
                    );
                }
            }
            _ => {}
        }
    }
}

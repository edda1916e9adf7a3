//! Oracle `costs` (`oracle.costs.*`): what every call and every reply costs, call by call.
//!
//! The budget oracle checks the arithmetic of spawns and that budgets never rise; this one
//! follows each loop's budget, recovery budget and step index through every reply and every
//! call, and requires each to move by exactly what the rules charge: 1 step for an ordinary
//! call (and 1 recovery when it is a failed catalog call or an unknown name), 1 for a denied
//! call, the spawn cost (and the grant) for a spawning call, 1 for a final answer, a failure
//! or a tool-free reply, nothing for `ask_user` or a failed model request. The step index rises
//! by one per reply that ran a regular call, each reply whose calls ran closes with exactly one
//! step event, and the exhaustion nudge follows exactly the regular calls that leave a budget
//! at 0.
//!
//! Which kind a call is comes from its events and the rules: a call answered without a
//! `tool.start` is an unknown name; a started `Agent` or `subagent` family call is a spawning or
//! family call; any other started call is a catalog tool. Whether the name deserved that answer
//! is oracle `precedence`'s to judge.

use super::index::{Index, PerAgent, Tasks, first_terminal, string_arg};
use super::{Oracle, Report, core_events};
use crate::evidence::Evidence;
use crate::sut::event::Event;
use crate::sut::llm::ToolCall;

/// What a loop has left, as the rules charge it.
struct Loop {
    budget: u32,
    recovery: u32,
    steps: u32,
    /// The reply being run: whether it ran a regular call yet.
    regular: bool,
    /// The call running: its `tool.start` line and its kind, and the spawn inside it.
    started: Option<(usize, Kind)>,
    spawn: Option<(u32, u32, usize)>,
    /// A nudge owed by the last call: (budget, recovery, the call's end line).
    nudge: Option<(u32, u32, usize)>,
    /// The budget an answer of this loop left, once it has answered: its next report (its
    /// end, or a held root's next request) must show it.
    answered: bool,
    /// The line of the reply whose calls are running, until its step event closes it.
    step_owed: Option<usize>,
}

impl Loop {
    fn new(budget: u32, recovery: u32) -> Loop {
        Loop {
            budget,
            recovery,
            steps: 0,
            regular: false,
            started: None,
            spawn: None,
            nudge: None,
            answered: false,
            step_owed: None,
        }
    }
}

/// What a call is, for its cost.
#[derive(Clone, Copy)]
enum Kind {
    /// A catalog tool that ran.
    Catalog,
    /// A name the agent does not have (no `tool.start`).
    Unknown,
    /// `Agent`, `subagent`, or a `subagent.send` that continues a finished named-session task.
    Spawning,
    /// `subagent.wait`, `subagent.cancel`, or a `subagent.send` that hands a message over.
    Family,
}

/// The kind of a call that started, from the tasks as they stood when it started.
fn kind(call: Option<&ToolCall>, tool: &str, tasks: &Tasks) -> Kind {
    match tool {
        "Agent" | "subagent" => Kind::Spawning,
        "subagent.wait" | "subagent.cancel" => Kind::Family,
        "subagent.send" => {
            // A send to a finished task kept in a named session continues it: a spawn
            // (`core.cost.family-calls-one`).
            let target = call.and_then(|c| string_arg(&c.args, "task_id")).map(str::trim).unwrap_or_default();
            match tasks.get(target) {
                Some(task) if !task.state.active() && task.kind == "named" => Kind::Spawning,
                _ => Kind::Family,
            }
        }
        _ => Kind::Catalog,
    }
}

pub(super) fn costs(e: &Evidence, index: &Index, r: &mut Report) {
    let rules = e.rules;
    let mut loops: PerAgent<Loop> = PerAgent::new(&index.agents);
    let mut tasks = Tasks::new(index);
    for (i, entry, event) in core_events(e.trace) {
        let agent = &entry.agent;
        let number = index.agents.at(i);
        // The nudge a regular call owes comes right after it, before anything else of its loop.
        let owed = loops.get_mut(number).and_then(|lp| lp.nudge.take());
        if let Some((budget, recovery, line)) = owed
            && !matches!(event, Event::Nudge { .. })
        {
            r.add(
                Oracle::Costs,
                line,
                format!(
                    "a regular call of {agent} left budget {budget}, recovery {recovery} but no exhaustion nudge followed it"
                ),
                vec![i],
            );
        }
        match event {
            Event::TurnStarted { budget, .. } | Event::AgentStarted { budget, .. } => {
                loops.insert(number, Loop::new(*budget, rules.recovery_budget));
            }
            Event::LlmRequest { budget, .. } => {
                let Some(lp) = loops.get_mut(number) else { continue };
                if *budget != lp.budget {
                    let why = if lp.answered { "after its held answer" } else { "since its last step" };
                    r.add(
                        Oracle::Costs,
                        i,
                        format!("{agent} asks the model with {budget} steps, but {why} it has {}", lp.budget),
                        vec![],
                    );
                    lp.budget = *budget;
                }
                lp.answered = false;
                lp.regular = false;
                // `roku.step.event-per-turn`: a reply whose calls ran closes with one step
                // event before its loop asks the model again.
                if let Some(reply) = lp.step_owed.take() {
                    r.add(
                        Oracle::Costs,
                        i,
                        format!(
                            "{agent} asks the model again, but its reply that ran calls was closed by no step event"
                        ),
                        vec![reply],
                    );
                }
            }
            Event::LlmReply { .. } => {
                let Some(lp) = loops.get_mut(number) else { continue };
                let Some(reply) = index.reply(i) else { continue };
                // A reply without calls, `final_answer` and `fail` cost 1 step; `ask_user` none
                // (`roku.loop.text-reply-final-answer`, `roku.terminal.*`, `bub.turn.held-reply-costs-one`).
                let cost = match first_terminal(&reply.tool_calls, agent) {
                    _ if reply.tool_calls.is_empty() => Some(1),
                    Some(call) if call.name == "ask_user" => Some(0),
                    Some(_) => Some(1),
                    None => None,
                };
                if let Some(cost) = cost {
                    lp.budget = lp.budget.saturating_sub(cost);
                    lp.answered = true;
                } else {
                    lp.step_owed = Some(i);
                }
            }
            Event::ToolStarted { tool, .. } => {
                if let Some(lp) = loops.get_mut(number) {
                    lp.started = Some((i, kind(index.call(i), tool, &tasks)));
                    lp.spawn = None;
                }
            }
            Event::Spawned { budget_before, budget_after, .. } => {
                let Some(lp) = loops.get_mut(number) else { continue };
                if *budget_before != lp.budget {
                    r.add(
                        Oracle::Costs,
                        i,
                        format!("{agent} spawns from {budget_before} steps, but it had {} before the call", lp.budget),
                        lp.started.map(|(line, _)| line).into_iter().collect(),
                    );
                }
                lp.spawn = Some((*budget_before, *budget_after, i));
            }
            Event::Denied { budget, .. } => {
                let Some(lp) = loops.get_mut(number) else { continue };
                // A denied call costs 1 step and no recovery (`roku.approval.deny-result`).
                let want = lp.budget.saturating_sub(1);
                if *budget != want {
                    r.add(
                        Oracle::Costs,
                        i,
                        format!(
                            "a denied call of {agent} left {budget} steps; from {} it costs 1, leaving {want}",
                            lp.budget
                        ),
                        vec![],
                    );
                }
                lp.budget = *budget;
            }
            Event::ToolEnded { tool, is_error, budget, recovery, .. } => {
                let Some(lp) = loops.get_mut(number) else { continue };
                let started = lp.started.take();
                let kind = started.map_or(Kind::Unknown, |(_, kind)| kind);
                let started = started.map(|(line, _)| line);
                let spawn = lp.spawn.take();
                let (want, want_recovery, what) = match kind {
                    Kind::Catalog => (
                        lp.budget.saturating_sub(1),
                        lp.recovery.saturating_sub(u32::from(*is_error)),
                        if *is_error {
                            "a failed catalog call costs 1 step and 1 recovery"
                        } else {
                            "a catalog call costs 1 step"
                        },
                    ),
                    Kind::Unknown => (
                        lp.budget.saturating_sub(1),
                        lp.recovery.saturating_sub(1),
                        "a call to a name it does not have costs 1 step and 1 recovery",
                    ),
                    Kind::Family => (lp.budget.saturating_sub(1), lp.recovery, "a `subagent` family call costs 1 step"),
                    Kind::Spawning => match spawn {
                        Some((_, after, _)) => (after, lp.recovery, "a spawning call leaves what its spawn left"),
                        None => (
                            lp.budget.saturating_sub(rules.spawn_cost),
                            lp.recovery,
                            "a refused spawning call costs the spawn cost",
                        ),
                    },
                };
                let lines: Vec<usize> = started.into_iter().chain(spawn.map(|s| s.2)).collect();
                if *budget != want {
                    r.add(
                        Oracle::Costs,
                        i,
                        format!("`{tool}` of {agent} left {budget} steps; from {} {what}, leaving {want}", lp.budget),
                        lines.clone(),
                    );
                }
                if *recovery != want_recovery {
                    r.add(
                        Oracle::Costs,
                        i,
                        format!(
                            "`{tool}` of {agent} left recovery {recovery}; from {} it should leave {want_recovery}",
                            lp.recovery
                        ),
                        lines,
                    );
                }
                lp.budget = *budget;
                lp.recovery = *recovery;
                let regular = matches!(kind, Kind::Catalog | Kind::Unknown);
                lp.regular |= regular;
                // `roku.nudge.after-regular-call`, `roku.nudge.regular-only`, `core.spawn.no-nudge`.
                if regular && (*budget == 0 || *recovery == 0) {
                    lp.nudge = Some((*budget, *recovery, i));
                }
            }
            Event::Nudge { budget, recovery } => {
                if let Some((want, want_recovery, _)) = owed {
                    if (*budget, *recovery) != (want, want_recovery) {
                        r.add(
                            Oracle::Costs,
                            i,
                            format!(
                                "the nudge reports budget {budget}, recovery {recovery}, but {agent} has {want}, {want_recovery}"
                            ),
                            vec![],
                        );
                    }
                } else {
                    r.add(
                        Oracle::Costs,
                        i,
                        format!(
                            "an exhaustion nudge of {agent} follows no regular call that left a budget at 0 (only those are followed by one)"
                        ),
                        vec![],
                    );
                }
            }
            Event::StepCompleted { step_index, budget } => {
                let Some(lp) = loops.get_mut(number) else { continue };
                if lp.step_owed.take().is_none() {
                    r.add(
                        Oracle::Costs,
                        i,
                        format!("{agent} reports a step that closes no reply whose calls ran (one per such reply)"),
                        vec![],
                    );
                }
                // `roku.step.index-regular-only`, `core.spawn.no-step-index`.
                let want = lp.steps + u32::from(lp.regular);
                if *step_index != want {
                    let ran = if lp.regular { "ran a regular call" } else { "ran no regular call" };
                    r.add(
                        Oracle::Costs,
                        i,
                        format!("{agent}'s step index is {step_index} after a reply that {ran}; it should be {want}"),
                        vec![],
                    );
                }
                if *budget != lp.budget {
                    r.add(
                        Oracle::Costs,
                        i,
                        format!("{agent}'s step reports {budget} steps, but its calls left {}", lp.budget),
                        vec![],
                    );
                }
                lp.steps = *step_index;
                lp.budget = *budget;
                lp.regular = false;
            }
            Event::AgentEnded { steps, budget, .. } => {
                let Some(lp) = loops.get_mut(number) else { continue };
                if *budget != lp.budget {
                    r.add(
                        Oracle::Costs,
                        i,
                        format!("{agent} ends with {budget} steps, but what it did leaves {}", lp.budget),
                        vec![],
                    );
                }
                if *steps != lp.steps {
                    r.add(
                        Oracle::Costs,
                        i,
                        format!("{agent} ends reporting step index {steps}, but it reached {}", lp.steps),
                        vec![],
                    );
                }
                lp.budget = *budget;
            }
            _ => {}
        }
        tasks.observe(i, entry, event);
    }
}

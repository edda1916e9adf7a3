//! Oracle 2, `budget` (`oracle.budget.*`): spawns pre-deduct their cost, grants are what
//! the rules give, and a budget never rises.
//!
//! It checks the arithmetic of spawns and grants; the cost of each ordinary call and reply is
//! `costs`.

use std::collections::BTreeMap;

use crate::evidence::Evidence;
use crate::sut::AgentId;
use crate::sut::event::Event;

use super::{Oracle, Report, core_events};

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
pub(super) fn budget(e: &Evidence, r: &mut Report) {
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

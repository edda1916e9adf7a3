//! Oracle 1, `depth` (`oracle.depth.*`): no agent deeper than the depth limit, and a spawn
//! refused at the limit is answered with the rules' error.
//!
//! It follows spawns and their results only; what a spawn costs is `budget` and `costs`.

use std::collections::{BTreeMap, BTreeSet};

use crate::evidence::Evidence;
use crate::rules::words::DEPTH_ERROR;
use crate::sut::AgentId;
use crate::sut::event::{Event, Family};

use super::{Oracle, Report, core_events};

/// Oracle 1.
pub(super) fn depth(e: &Evidence, r: &mut Report) {
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

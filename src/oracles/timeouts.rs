//! Oracle 4, `timeouts` (`oracle.timeouts.*`): a child with a time limit ends by start +
//! limit, and a timeout fires then and only then.
//!
//! It does not decide which limit applies where several could (`precedence`) nor check the
//! timeout's text (`texts`).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::evidence::Evidence;
use crate::sut::AgentId;
use crate::sut::event::{Event, Family, TaskStatus};

use super::{Oracle, Report, core_events};

/// Oracle 4. A child with a limit must end at or before start + limit, and a timeout fires at
/// exactly start + limit; a child cancelled, or still running at the end of the trace, after
/// its time ran out was not stopped when it should have been.
pub(super) fn timeouts(e: &Evidence, r: &mut Report) {
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

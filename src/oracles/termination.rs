//! Oracle 8, `termination` (`oracle.termination.*`): every run ends within its limits and
//! leaves no task alive; quitting cancels what is left, queued tasks first.
//!
//! It reads how the run ended; the limits themselves are the scenario's and the runner's.

use std::collections::BTreeMap;

use crate::evidence::Evidence;
use crate::sut::event::{Event, TaskStatus};
use crate::trace::{Entry, What};

use super::index::status_word;
use super::{Oracle, Report, core_events, index};

/// Oracle 8.
pub(super) fn termination(e: &Evidence, r: &mut Report) {
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

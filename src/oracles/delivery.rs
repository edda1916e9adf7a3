//! Oracle 7, `delivery` (`oracle.delivery.*`): every finished background result reaches its
//! parent exactly once, in completion order, taken in only before a request, and every event
//! of one instant is settled before the root acts.
//!
//! It does not check the result's content (`truncation`) nor the order of a `subagent.wait`
//! (`wait_order`).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use crate::evidence::Evidence;
use crate::sut::event::{Event, TaskStatus, Via};
use crate::sut::llm::{Message, Role, Transcript};

use super::index::Agents;
use super::{Oracle, Report, core_events, index};

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

/// The notification text for a result, as `bub.delivery.notification-format` gives it.
pub(super) fn notification(task_id: &str, status: TaskStatus, body: &str) -> String {
    format!(
        "<subagent-notification task_id=\"{task_id}\" status=\"{}\">\n{body}\n</subagent-notification>",
        index::status_word(status)
    )
}

/// Oracle 7. Every finished result (cancelled runs excepted) reaches the parent exactly once,
/// by notification or by `wait`, no later than the parent's next step; the notifications of
/// one delivery come in completion order, ties in spawn order; and each notified text is in
/// the parent's next request.
pub(super) fn delivery(e: &Evidence, index: &index::Index, r: &mut Report) {
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
pub(super) fn instants(e: &Evidence, r: &mut Report) {
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

//! Oracle 6, `fork-isolation` (`oracle.fork-isolation.*`): a fork child sees exactly its
//! parent's conversation at the call and no more, and a conversation only grows.
//!
//! The bookkeeping of where messages come from is `provenance`; messages sent from outside a
//! loop are judged by `routing`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::evidence::{Evidence, fork_mismatch};
use crate::sut::event::{Event, TaskStatus, Via};
use crate::sut::llm::Transcript;

use super::delivery::notification;
use super::index::PerAgent;
use super::provenance::{Checked, Provenance};
use super::{Oracle, Report, core_events, index};

/// Oracle 6. A fork child's first request is exactly the parent's conversation at the call
/// (plus its prompt and what was sent to it before its first step); past that snapshot, and
/// in every request of the root, each message must come from the agent's own loop: its own
/// replies and tool results, user turns, messages sent to it, notifications, nudges. Temp
/// children start from their prompt alone; temp and fork sessions are gone after the run,
/// named ones kept.
pub(super) fn fork_isolation(e: &Evidence, index: &index::Index, r: &mut Report) {
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

/// `oracle.fork-isolation.history-kept`: a conversation only grows. Each request of an agent
/// begins with every message of its previous request, in order: within a run, and for the
/// root across its turns too (a later turn continues the session's history); a child's run
/// that begins again (a continuation) starts a new count.
pub(super) fn history_kept(e: &Evidence, index: &index::Index, r: &mut Report) {
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

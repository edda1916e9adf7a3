//! Oracle `routing` (`oracle.routing.*`): every message from outside an agent's own loop
//! reaches its addressee, in its next request, and nobody else.
//!
//! Fork isolation judges the provenance of the root's requests and of fork children's. This
//! oracle judges the other children (foreground, temp, named), run by run: past the
//! conversation a run starts from, each message of its requests must come from its own loop
//! (its replies, the results of its calls, the exhaustion nudge) or have been sent to it. And
//! it follows every message sent from outside: each steering message the harness sent is
//! reported at the root in its instant; each `subagent.send` that hands a message over
//! reports it at the task it names; and each message reported at an agent is in that agent's
//! next request, in the order sent.

use std::time::Duration;

use super::index::{Index, PerAgent, Tasks, string_arg};
use super::{Checked, Oracle, Provenance, Report, core_events, short};
use crate::evidence::Evidence;
use crate::sut::AgentId;
use crate::sut::event::{Event, Family};
use crate::sut::llm::{Message, Role, Transcript};

/// How a child's run starts, which says where its own messages begin.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Start {
    /// A foreground child: its task alone (`roku.child.fresh-history`).
    Foreground,
    /// A temp session: its prompt, then what was sent to it (fork isolation counts them).
    Temp,
    /// A named session: what the session recorded, its prompt, what was sent to it (oracle
    /// `sessions` judges the first two).
    Named,
    /// A fork: fork isolation's.
    Fork,
}

/// A run of a child: how it starts, and how far provenance has checked its requests.
struct Run<'a> {
    start: Start,
    goal: String,
    line: usize,
    /// Messages before this index are the run's starting conversation.
    from: Option<usize>,
    checked: Option<Checked<'a>>,
}

pub(super) fn routing(e: &Evidence, index: &Index, r: &mut Report) {
    // Who may have sent what to whom: every message reported at a child.
    let mut prov = Provenance::new(index);
    for (i, _, event) in core_events(e.trace) {
        if let Event::Steered { message } = event {
            prov.inbound(index.agents.at(i), message.clone());
        }
    }
    let mut tasks = Tasks::new(index);
    let mut runs: PerAgent<Run> = PerAgent::new(&index.agents);
    let mut goals: PerAgent<(Start, String)> = PerAgent::new(&index.agents);
    let mut open: PerAgent<(&str, &serde_json::Value, usize)> = PerAgent::new(&index.agents);
    // A `subagent.send` handing a message over: (its line, the alias it must reach, the message).
    let mut handing: Option<(usize, &AgentId, &str)> = None;
    // Per agent: messages sent to it since its last request, and that request.
    let mut pending: PerAgent<Vec<(&str, usize)>> = PerAgent::new(&index.agents);
    let mut previous: PerAgent<&Transcript> = PerAgent::new(&index.agents);
    let mut steered_at_root: Vec<(Duration, &str, usize)> = Vec::new();
    for (i, entry, event) in core_events(e.trace) {
        let agent = &entry.agent;
        let number = index.agents.at(i);
        let at_root = index.agents.is_root(i);
        match event {
            Event::ToolStarted { tool, args, .. } => {
                open.insert(number, (tool, args, i));
                if tool == "subagent.send" && at_root {
                    let id = string_arg(args, "task_id").map(str::trim).unwrap_or_default();
                    let message = string_arg(args, "message").unwrap_or_default();
                    if let Some(task) = tasks.get(id).filter(|t| t.state.active())
                        && !message.trim().is_empty()
                    {
                        handing = Some((i, task.alias, message));
                    }
                }
            }
            Event::ToolEnded { .. } => {
                open.remove(number);
                if let Some((line, to, _)) = handing.take().filter(|_| at_root) {
                    r.add(
                        Oracle::Routing,
                        i,
                        format!("`subagent.send` handed its message to nobody: it is never reported at {to}"),
                        vec![line],
                    );
                }
            }
            Event::Spawned { child, family, .. } => {
                let Some((tool, args, _)) = open.get(number).copied() else { continue };
                let (start, goal) = match (family, tool) {
                    (Family::Foreground, _) => (Start::Foreground, string_arg(args, "task").map(str::trim)),
                    (_, "subagent") => (Start::Temp, string_arg(args, "prompt").map(str::trim)),
                    _ => (Start::Named, string_arg(args, "message")),
                };
                if let Some(child) = index.agents.number(child) {
                    goals.insert(child, (start, goal.unwrap_or_default().to_string()));
                }
            }
            Event::SessionOpened { kind, .. } => {
                if let Some((start, _)) = goals.get_mut(number) {
                    *start = match *kind {
                        "fork" => Start::Fork,
                        "named" => Start::Named,
                        _ => Start::Temp,
                    };
                }
            }
            Event::AgentStarted { .. } => {
                let (start, goal) = goals.get(number).cloned().unwrap_or((Start::Fork, String::new()));
                runs.insert(number, Run { start, goal, line: i, from: None, checked: None });
            }
            Event::Steered { message } => {
                if at_root {
                    steered_at_root.push((entry.at, message, i));
                }
                if let Some((line, to, sent)) = handing.take() {
                    let wrong = if agent != to {
                        Some(format!("`subagent.send` to {to} reached {agent} instead"))
                    } else if message != sent {
                        Some(format!(
                            "`subagent.send` handed {to} {:?}, not the message as written ({:?})",
                            short(message),
                            short(sent)
                        ))
                    } else {
                        None
                    };
                    if let Some(wrong) = wrong {
                        r.add(Oracle::Routing, i, wrong, vec![line]);
                    }
                }
                pending.or_insert_with(number, Vec::new).push((message, i));
            }
            Event::LlmRequest { .. } => {
                let Some(exchange) = index.exchange(i) else { continue };
                let messages = &exchange.request.messages;
                let before = previous.insert(number, messages);
                let grown = before.and_then(|p| messages.since(p));
                let grew = grown.is_some();
                let added: Vec<&Message> = grown.unwrap_or_else(|| messages.iter().collect());
                // `oracle.routing.reaches-next-request`.
                let sent = pending.remove(number).unwrap_or_default();
                let mut rest = added.iter().filter(|m| m.role == Role::User);
                for (message, line) in &sent {
                    if !rest.any(|m| m.content == *message) {
                        r.add(
                            Oracle::Routing,
                            i,
                            format!(
                                "{agent}'s next request does not hold the message sent to it ({:?}), in the order sent",
                                short(message)
                            ),
                            vec![*line],
                        );
                        break;
                    }
                }
                if agent.depth() == 0 {
                    continue;
                }
                let Some(run) = runs.get_mut(number) else { continue };
                if run.start == Start::Fork {
                    continue;
                }
                let from = match run.from {
                    Some(from) => from,
                    None => {
                        let from = first_request(r, i, agent, run, messages, sent.len());
                        run.from = Some(from);
                        from
                    }
                };
                // `oracle.routing.provenance`: only what this request added needs checking.
                let (added, mut calls) = match run.checked.take() {
                    // Usually the agent's previous request: what this one added is known.
                    Some(c) if grew && before.is_some_and(|p| std::ptr::eq(p, c.messages)) => (added, c.calls),
                    Some(c) if messages.extends(c.messages) => {
                        (messages.since(c.messages).unwrap_or_default(), c.calls)
                    }
                    _ => (messages.iter().skip(from).collect(), Vec::new()),
                };
                if let Some(why) = prov.first_foreign((agent, number), added, &mut calls) {
                    r.add(Oracle::Routing, i, format!("{agent}'s request holds {why}"), vec![run.line]);
                }
                run.checked = Some(Checked { messages, from, calls });
            }
            _ => {}
        }
        tasks.observe(i, entry, event);
    }
    if let Some(setup) = e.setup {
        reported_at_root(r, e, &setup.steering, &steered_at_root);
    }
}

/// Checks how a run's first request starts and returns where its own messages begin.
fn first_request(r: &mut Report, line: usize, agent: &AgentId, run: &Run, messages: &Transcript, sent: usize) -> usize {
    match run.start {
        // `roku.child.fresh-history`: exactly the trimmed task, then its own loop.
        Start::Foreground => {
            if messages.first() != Some(&Message::user(run.goal.as_str())) {
                r.add(
                    Oracle::Routing,
                    line,
                    format!(
                        "{agent}'s first request does not start with its task {:?} alone (it starts with {:?})",
                        short(&run.goal),
                        messages.first().map(|m| short(&m.content)).unwrap_or_default()
                    ),
                    vec![run.line],
                );
            }
            1
        }
        // `bub.session.temp-empty`: the prompt (fork isolation counts what follows).
        Start::Temp => {
            if messages.first() != Some(&Message::user(run.goal.as_str())) {
                r.add(
                    Oracle::Routing,
                    line,
                    format!("{agent}'s first request does not start with its prompt {:?}", short(&run.goal)),
                    vec![run.line],
                );
            }
            messages.len()
        }
        // What was sent before the first request follows the prompt; the rest is `sessions`'s.
        Start::Named | Start::Fork => messages.len().saturating_sub(sent),
    }
}

/// `oracle.routing.steering-reported`: each steering message the harness sent before the
/// trace's last instant is reported at the root in its own instant, and the root reports no
/// other.
fn reported_at_root(r: &mut Report, e: &Evidence, sent: &[(Duration, String)], reported: &[(Duration, &str, usize)]) {
    let Some(end) = e.trace.entries.last().map(|x| x.at) else { return };
    let mut left: Vec<Option<&(Duration, &str, usize)>> = reported.iter().map(Some).collect();
    for (at, message) in sent {
        let found = left.iter_mut().find(|x| x.is_some_and(|(t, m, _)| t == at && *m == message.as_str()));
        match found {
            Some(slot) => *slot = None,
            None if *at < end => r.add_run(
                Oracle::Routing,
                format!("the steering message {:?} sent at {at:?} was never reported at main", short(message)),
            ),
            None => {}
        }
    }
    for (at, message, line) in left.into_iter().flatten() {
        r.add(
            Oracle::Routing,
            *line,
            format!("main reports a steering message nobody sent at {at:?}: {:?}", short(message)),
            vec![],
        );
    }
}

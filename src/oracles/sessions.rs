//! Oracle `sessions` (`oracle.sessions.*`): a named session serves one run at a time, on
//! every path that starts one, and each run on a name starts from what the earlier runs on it
//! recorded (`docs/rules/bub.md` §2).
//!
//! What a name records is read from the evidence alone: when a run on it completes or fails,
//! the conversation it ended with is its last request's messages, then its last reply (if the
//! model answered), then the results and nudges that followed that reply; a run that never
//! asked the model adds only its prompt to what it started from. A run that timed out or was
//! cancelled records nothing. The next run's first request must be that conversation, its
//! prompt, and the messages sent to it before that request.

use std::collections::BTreeMap;

use super::index::{Index, Tasks, string_arg};
use super::launch::{launch, session_arg};
use super::{Oracle, Report, core_events, short};
use crate::evidence::{Evidence, same_reply};
use crate::sut::AgentId;
use crate::sut::event::{Event, TaskStatus};
use crate::sut::llm::{Message, Role, Transcript};

/// A piece of what a named session recorded.
#[derive(Clone)]
enum Part<'a> {
    /// A request's messages, exactly.
    Request(&'a Transcript),
    /// A reply as its run kept it, then the results and nudges that followed it.
    Reply(&'a Message),
    /// A prompt, as a user message.
    User(String),
}

/// A run on a named session.
struct Run<'a> {
    name: String,
    prompt: String,
    line: usize,
    /// Whether its first request has been judged.
    seen: bool,
    /// Its last exchange: the request's messages and the reply.
    last: Option<(&'a Transcript, Option<&'a Message>)>,
}

/// The nudge's opening words (`roku.nudge.after-regular-call`).
const NUDGE: &str = "System: step budget exhausted (";

pub(super) fn sessions(e: &Evidence, index: &Index, r: &mut Report) {
    let mut tasks = Tasks::new(index);
    // Per name: what it recorded, and the alias of the run using it.
    let mut recorded: BTreeMap<String, Vec<Part>> = BTreeMap::new();
    let mut in_use: BTreeMap<String, &AgentId> = BTreeMap::new();
    let mut runs: BTreeMap<&AgentId, Run> = BTreeMap::new();
    // Per agent: messages sent to it since its last request.
    let mut sent: BTreeMap<&AgentId, usize> = BTreeMap::new();
    // The root's current call, and the refusal it must end with.
    let mut call: Option<(&str, &serde_json::Value, usize)> = None;
    let mut refusal: Option<(String, usize, bool)> = None;
    for (i, entry, event) in core_events(e.trace) {
        let agent = &entry.agent;
        let at_root = index.agents.is_root(i);
        match event {
            Event::ToolStarted { tool, args, .. } if at_root => {
                call = Some((tool.as_str(), &**args, i));
                let user = |name: &str| in_use.get(name).and_then(|alias| tasks.id_of(alias));
                let refused = match tool.as_str() {
                    // `bub.session.named-one-at-a-time`: a call that passes every earlier check
                    // meets the session in use.
                    "subagent" => {
                        let (kind, name) = session_arg(args);
                        let valid = e.setup.is_some_and(|setup| launch(args, setup, e.rules).is_ok());
                        user(&name).filter(|_| kind == "named" && valid).map(|task| (name.clone(), task))
                    }
                    // A send that would continue a finished named-session task.
                    "subagent.send" => {
                        let id = string_arg(args, "task_id").map(str::trim).unwrap_or_default();
                        let message = string_arg(args, "message").unwrap_or_default();
                        tasks
                            .get(id)
                            .filter(|t| !t.state.active() && t.kind == "named" && !message.trim().is_empty())
                            .and_then(|t| user(t.session).map(|task| (t.session.to_string(), task)))
                    }
                    _ => None,
                };
                refusal = refused.map(|(name, task)| (format!("session '{name}' is in use by task {task}"), i, false));
            }
            Event::Spawned { .. } if at_root => {
                if let Some(expected) = refusal.as_mut() {
                    expected.2 = true;
                }
            }
            Event::ToolEnded { result, is_error, .. } if at_root => {
                call = None;
                let Some((want, line, spawned)) = refusal.take() else { continue };
                if spawned || !is_error || *result != want {
                    r.add(
                        Oracle::Sessions,
                        i,
                        format!("a run was asked for on a session in use; the call must be refused with {want:?} and start nothing, got {:?}", short(result)),
                        vec![line],
                    );
                }
            }
            Event::SessionOpened { name, kind: "named" } => {
                if let Some(other) = in_use.get(name.as_str()) {
                    r.add(
                        Oracle::Sessions,
                        i,
                        format!("{agent} starts a run on session {name:?} while {other}'s run on it is unfinished"),
                        vec![],
                    );
                }
                in_use.insert(name.clone(), agent);
                let prompt = match call {
                    Some(("subagent", args, _)) => string_arg(args, "prompt").map(str::trim),
                    Some((_, args, _)) => string_arg(args, "message"),
                    None => None,
                };
                let prompt = prompt.unwrap_or_default().to_string();
                runs.insert(agent, Run { name: name.clone(), prompt, line: i, seen: false, last: None });
            }
            Event::Steered { .. } => *sent.entry(agent).or_default() += 1,
            Event::LlmRequest { .. } => {
                let early = sent.remove(agent).unwrap_or_default();
                let (Some(run), Some(exchange)) = (runs.get_mut(agent), index.exchange(i)) else { continue };
                run.last = Some((&exchange.request.messages, None));
                if !run.seen {
                    run.seen = true;
                    let parts = recorded.get(&run.name).map_or(&[][..], Vec::as_slice);
                    if let Some(why) = mismatch(&exchange.request.messages, parts, &run.prompt, early) {
                        r.add(
                            Oracle::Sessions,
                            i,
                            format!(
                                "{agent}'s run on session {:?} does not start from what it recorded: {why}",
                                run.name
                            ),
                            vec![run.line],
                        );
                    }
                }
            }
            Event::LlmReply { .. } => {
                if let (Some(run), Some(reply)) = (runs.get_mut(agent), index.reply(i))
                    && let Some((_, kept)) = run.last.as_mut()
                {
                    *kept = Some(reply);
                }
            }
            Event::TaskEnded { child, status, .. } => {
                let Some(run) = runs.remove(child) else { continue };
                if in_use.get(&run.name) == Some(&child) {
                    in_use.remove(&run.name);
                }
                // `bub.session.named-recorded-on-end`: completed and failed runs record.
                if matches!(status, TaskStatus::Completed | TaskStatus::Failed) {
                    let parts = recorded.entry(run.name).or_default();
                    match run.last {
                        Some((messages, reply)) => {
                            *parts = vec![Part::Request(messages)];
                            parts.extend(reply.map(Part::Reply));
                        }
                        None => parts.push(Part::User(run.prompt)),
                    }
                }
            }
            _ => {}
        }
        tasks.observe(i, entry, event);
    }
}

/// Why `request` is not `parts`, then the prompt, then `early` messages sent before it.
fn mismatch(request: &Transcript, parts: &[Part], prompt: &str, early: usize) -> Option<String> {
    let messages: Vec<&Message> = request.iter().collect();
    let Some(at) = messages.len().checked_sub(1 + early) else {
        return Some(format!("it holds {} messages, fewer than its prompt and the {early} sent to it", messages.len()));
    };
    if messages[at].role != Role::User || messages[at].content != prompt {
        return Some(format!(
            "message {at} should be its prompt {:?}, got {:?}",
            short(prompt),
            short(&messages[at].content)
        ));
    }
    let head = &messages[..at];
    let mut pos = 0;
    for part in parts {
        match part {
            Part::Request(kept) => {
                if pos != 0 || kept.len() > head.len() || !request.starts_with(kept) {
                    return Some(format!(
                        "it should begin with the {} messages of the last request of the session's previous run",
                        kept.len()
                    ));
                }
                pos = kept.len();
            }
            Part::Reply(reply) => {
                let Some(kept) = head.get(pos).filter(|m| same_reply(m, reply)) else {
                    return Some(format!("message {pos} should be the previous run's last reply"));
                };
                let calls: Vec<&str> = kept.tool_calls.iter().map(|c| c.id.as_str()).collect();
                pos += 1;
                while let Some(m) = head.get(pos) {
                    let answers =
                        m.role == Role::Tool && m.tool_call_id.as_deref().is_some_and(|id| calls.contains(&id));
                    let nudge = m.role == Role::User && m.content.starts_with(NUDGE);
                    if !(answers || nudge) {
                        break;
                    }
                    pos += 1;
                }
            }
            Part::User(text) => {
                if head.get(pos).is_none_or(|m| m.role != Role::User || m.content != *text) {
                    return Some(format!("message {pos} should be an earlier run's prompt {:?}", short(text)));
                }
                pos += 1;
            }
        }
    }
    if pos != head.len() {
        return Some(format!(
            "the session recorded {pos} messages, but {} come before the prompt (got {:?} at {pos})",
            head.len(),
            short(&head[pos].content)
        ));
    }
    None
}

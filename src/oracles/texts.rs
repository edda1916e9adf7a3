//! Oracle `texts` (`oracle.texts.*`): every text the runtime writes itself is exactly the one
//! the rules give, rebuilt here from the rules' strings (each constant names its clause) and
//! from what the call asked, never copied from the trace.
//!
//! Covered: how a loop ends (the final message of each way to end), the timeout and
//! cancellation bodies, the refusals of `Agent` and of the `subagent` family, the immediate
//! results of `subagent`, `subagent.send` and `subagent.cancel`, the unknown-tool answer, the
//! reasons of denied calls and the exhaustion nudge as the model reads it. Not covered here: a
//! child's result as handed over (oracle `truncation`), notifications (oracle `delivery`),
//! `subagent.wait` results (oracle `wait`), the session-in-use refusal (oracle `sessions`).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use super::index::{
    FAMILY, Index, PerAgent, TaskState, Tasks, first_terminal, list_arg, seconds_text, status_word, string_arg,
};
use super::launch::{launch, session_arg};
use super::{DEPTH_ERROR, Oracle, Report, short};
use crate::evidence::Evidence;
use crate::sut::AgentId;
use crate::sut::event::{Event, OutcomeKind, Status, TaskStatus};
use crate::sut::llm::{Message, Role, Transcript};
use crate::trace::{What, json_string};

/// `roku.agent.empty-task`.
use crate::rules::words::NO_TASK as EMPTY_TASK;
/// The calls that may be refused with `spawn.refused`.
const SPAWNING: [&str; 2] = ["Agent", "subagent"];
/// `roku.loop.empty-text-completed`.
const LOOP_COMPLETED: &str = "Runtime loop completed.";
/// `roku.terminal.fail-default`.
const FAIL_DEFAULT: &str = "LLM reported failure.";
/// `bub.cancel.stops`.
const CANCELLED: &str = "Cancelled.";
/// `roku.approval.user-deny`.
const USER_DENIED: &str = "User denied the operation.";
/// `bub.send.empty-message`.
const EMPTY_MESSAGE: &str = "error: empty message";

/// `roku.loop.budget-zero-fails`.
fn budget_exhausted(steps: u32, goal: &str) -> String {
    format!("Step budget exhausted after {steps} steps; goal: {goal}")
}

/// `roku.loop.llm-error-fails`.
fn llm_failed(goal: &str) -> String {
    format!("LLM call failed for goal: {goal}")
}

/// `roku.timeout.error-text`, with the limit printed as `core.time.seconds-format` says.
fn foreground_timeout(limit: Duration) -> String {
    format!("[Sub-agent error] Timed out after {} seconds.", seconds_text(limit))
}

/// `bub.timeout.outcome`.
fn background_timeout(limit: Duration) -> String {
    format!("Timed out after {} seconds.", seconds_text(limit))
}

/// `roku.approval.policy-deny`.
fn policy_denied(tool: &str) -> String {
    format!("Tool `{tool}` is denied by the current security policy.")
}

/// `roku.nudge.after-regular-call`.
fn nudge(budget: u32, recovery: u32) -> String {
    format!(
        "System: step budget exhausted (remaining: {budget}, recovery: {recovery}). Please call final_answer or fail now."
    )
}

/// `bub.task-id.unknown`.
fn unknown_task(id: &str) -> String {
    format!("unknown task id: '{id}'")
}

/// `bub.spawn.immediate-result` (and a continuation's, `bub.send.continue-named`).
fn immediate(task_id: &str, status: &str, session: &str) -> String {
    format!(
        "{{\"task_id\":{},\"status\":{},\"session\":{}}}",
        json_string(task_id),
        json_string(status),
        json_string(session)
    )
}

/// `bub.send.to-active-task`, `bub.cancel.result`.
fn task_status(task_id: &str, status: &str) -> String {
    format!("{{\"task_id\":{},\"status\":{}}}", json_string(task_id), json_string(status))
}

/// A text as a violation shows it: whole up to 200 characters (a JSON result is read to its
/// end), else its beginning.
fn shown(text: &str) -> String {
    match text.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// How a loop's last step went, which decides its final message.
#[derive(Clone, Copy)]
enum Last<'a> {
    /// A reply, which may end the loop.
    Reply(&'a Message),
    /// The model request failed.
    Failed,
    /// Anything else: if the loop ends now, its budget ran out at the top of an iteration.
    Other,
}

struct Loop<'a> {
    goal: String,
    steps: u32,
    last: Last<'a>,
    /// Nudges the loop's next request must hold, as the model reads them.
    nudges: Vec<(String, usize)>,
    previous: Option<&'a Transcript>,
    /// The last approval question about this loop's calls: (tool, answer).
    asked: Option<(&'a str, bool)>,
}

/// A started call of the family (or `Agent`) and what happened inside it.
struct Open<'a> {
    line: usize,
    tool: &'a str,
    args: &'a Value,
    spawned: Option<&'a AgentId>,
    refused: Option<&'a str>,
    queued: Option<&'a str>,
    started_task: bool,
    timed_out: bool,
    /// Where the tasks stood when the call began (for `send` and `cancel`).
    target: Option<(TaskState, &'a str)>,
    /// Whether the session the call names was in use when it began.
    session_in_use: bool,
}

pub(super) fn texts(e: &Evidence, index: &Index, r: &mut Report) {
    let rules = e.rules;
    let root = index.agents.root();
    let mut tasks = Tasks::new(index);
    let mut loops: PerAgent<Loop> = PerAgent::new(&index.agents);
    let mut goals: PerAgent<String> = PerAgent::new(&index.agents);
    let mut open: PerAgent<Open> = PerAgent::new(&index.agents);
    // Per task: the time limit its current run started with.
    let mut limits: BTreeMap<&str, Option<Duration>> = BTreeMap::new();
    for (i, entry) in e.trace.entries.iter().enumerate() {
        let agent = &entry.agent;
        let number = index.agents.at(i);
        let event = match &entry.what {
            What::Asked { tool, approve } => {
                if let Some(lp) = loops.get_mut(number) {
                    lp.asked = Some((tool, *approve));
                }
                continue;
            }
            What::Stopped(_) => continue,
            What::Core(event) => event,
        };
        match event {
            Event::TurnStarted { message, .. } => {
                let fresh = Loop {
                    goal: message.clone(),
                    steps: 0,
                    last: Last::Other,
                    nudges: Vec::new(),
                    previous: None,
                    asked: None,
                };
                let previous = loops.get(number).and_then(|lp| lp.previous);
                loops.insert(number, Loop { previous, ..fresh });
            }
            Event::AgentStarted { .. } => {
                let goal = goals.get(number).cloned().unwrap_or_default();
                let previous = loops.get(number).and_then(|lp| lp.previous);
                loops.insert(
                    number,
                    Loop { goal, steps: 0, last: Last::Other, nudges: Vec::new(), previous, asked: None },
                );
            }
            Event::LlmRequest { .. } => {
                let Some(lp) = loops.get_mut(number) else { continue };
                lp.last = Last::Other;
                let Some(exchange) = index.exchange(i) else { continue };
                let messages = &exchange.request.messages;
                let previous = lp.previous.replace(messages);
                // Only a nudge owed needs what this request added.
                let added: Vec<&Message> = if lp.nudges.is_empty() {
                    Vec::new()
                } else {
                    previous.and_then(|p| messages.since(p)).unwrap_or_else(|| messages.iter().collect())
                };
                for (text, line) in lp.nudges.drain(..) {
                    if !added.iter().any(|m| m.role == Role::User && m.content == text) {
                        r.add(
                            Oracle::Texts,
                            line,
                            format!("{agent}'s next request does not hold the nudge as the rules write it: {text:?}"),
                            vec![i],
                        );
                    }
                }
            }
            Event::LlmReply { .. } => {
                if let (Some(lp), Some(reply)) = (loops.get_mut(number), index.reply(i)) {
                    lp.last = Last::Reply(reply);
                }
            }
            Event::LlmFailed { .. } => {
                if let Some(lp) = loops.get_mut(number) {
                    lp.last = Last::Failed;
                }
            }
            Event::StepCompleted { step_index, .. } => {
                if let Some(lp) = loops.get_mut(number) {
                    lp.steps = *step_index;
                    lp.last = Last::Other;
                }
            }
            Event::AgentEnded { kind, status, message, .. } => {
                let Some(lp) = loops.get(number) else { continue };
                let (want_kind, want_status, want) = expected_end(lp, agent);
                if (*kind, *status, message.as_str()) != (want_kind, want_status, want.as_str()) {
                    r.add(
                        Oracle::Texts,
                        i,
                        format!(
                            "{agent} ends {kind:?} {status:?} with {:?}; the rules give {want_kind:?} {want_status:?} with {:?}",
                            short(message),
                            short(&want)
                        ),
                        vec![],
                    );
                }
            }
            Event::Nudge { budget, recovery } => {
                if let Some(lp) = loops.get_mut(number) {
                    lp.nudges.push((nudge(*budget, *recovery), i));
                }
            }
            Event::Denied { tool, reason, .. } => {
                let asked = loops.get_mut(number).and_then(|lp| lp.asked.take());
                // Refused by the user when the gate asked about this call, else by policy.
                let want = match asked {
                    Some((asked_tool, false)) if asked_tool == tool => USER_DENIED.to_string(),
                    _ => policy_denied(tool),
                };
                if *reason != want {
                    r.add(
                        Oracle::Texts,
                        i,
                        format!("`{tool}` of {agent} was denied with {reason:?}; the rules give {want:?}"),
                        vec![],
                    );
                }
            }
            Event::ToolStarted { tool, args, .. } => {
                if let Some(lp) = loops.get_mut(number) {
                    lp.asked = None;
                }
                // Only the family's calls name a task or a session; a catalog call's arguments
                // are not read.
                let family = FAMILY.contains(&tool.as_str());
                let id = if family { string_arg(args, "task_id").map(str::trim).unwrap_or_default() } else { "" };
                let target = if family { tasks.get(id).map(|t| (t.state, t.kind)) } else { None };
                let in_use =
                    |name: &str| tasks.all().any(|t| t.kind == "named" && t.session == name && t.state.active());
                let session_in_use = match tool.as_str() {
                    "subagent" => {
                        let (kind, name) = session_arg(args);
                        kind == "named" && in_use(&name)
                    }
                    "subagent.send" => tasks.get(id).is_some_and(|t| t.kind == "named" && in_use(t.session)),
                    _ => false,
                };
                open.insert(
                    number,
                    Open {
                        line: i,
                        tool,
                        args,
                        spawned: None,
                        refused: None,
                        queued: None,
                        started_task: false,
                        timed_out: false,
                        target,
                        session_in_use,
                    },
                );
            }
            Event::Spawned { child, .. } => {
                if let Some(call) = open.get_mut(number) {
                    call.spawned = Some(child);
                    let goal = match call.tool {
                        "Agent" => string_arg(call.args, "task").map(str::trim),
                        "subagent" => string_arg(call.args, "prompt").map(str::trim),
                        _ => string_arg(call.args, "message"),
                    };
                    if let Some(child) = index.agents.number(child) {
                        goals.insert(child, goal.unwrap_or_default().to_string());
                    }
                }
            }
            Event::SpawnRefused { reason, .. } => {
                if let Some(call) = open.get_mut(number) {
                    call.refused = Some(reason);
                }
            }
            Event::TaskQueued { task_id, .. } => {
                if let Some(call) = root.and_then(|root| open.get_mut(root)) {
                    call.queued = Some(task_id);
                }
            }
            Event::TaskStarted { task_id, timeout, .. } => {
                limits.insert(task_id, *timeout);
                if let Some(call) = root.and_then(|root| open.get_mut(root))
                    && call.queued == Some(task_id.as_str())
                {
                    call.started_task = true;
                }
            }
            Event::TimedOut { child, .. } => {
                if tasks.id_of(child).is_none()
                    && let Some(call) = open.get_mut(number)
                {
                    call.timed_out = true;
                }
            }
            Event::TaskEnded { task_id, status, body, .. } => {
                let want = match status {
                    TaskStatus::Cancelled => Some(CANCELLED.to_string()),
                    TaskStatus::TimedOut => limits.get(task_id.as_str()).copied().flatten().map(background_timeout),
                    _ => None,
                };
                if let Some(want) = want
                    && *body != want
                {
                    r.add(
                        Oracle::Texts,
                        i,
                        format!("task {task_id} ended {} with {body:?}; the rules give {want:?}", status_word(*status)),
                        vec![],
                    );
                }
            }
            Event::ToolEnded { tool, is_error, result, .. } => {
                let Some(call) = open.remove(number).filter(|c| c.tool == tool) else {
                    // Nothing started: the name is unknown to the agent (`roku.calls.unknown-tool`).
                    let want = rules.unknown_tool_message.replace("{name}", tool);
                    if *result != want || !is_error {
                        r.add(
                            Oracle::Texts,
                            i,
                            format!("`{tool}` of {agent} was answered {result:?}, not the unknown-tool answer {want:?} as an error"),
                            vec![],
                        );
                    }
                    continue;
                };
                // `core.depth.guard-error`, `roku.agent.empty-task`: the spawning call a rule
                // refuses says so in the trace (`spawn.refused`) with the text it answers.
                let refusal = *is_error && (result == DEPTH_ERROR || result == EMPTY_TASK);
                if SPAWNING.contains(&tool.as_str())
                    && (refusal || call.refused.is_some())
                    && call.refused != Some(result)
                {
                    let message = match call.refused {
                        None => format!(
                            "`{tool}` of {agent} was refused with {:?} but no `spawn.refused` reported it",
                            shown(result)
                        ),
                        Some(reason) => format!(
                            "`{tool}` of {agent} was reported refused ({:?}) but answered {:?}",
                            shown(reason),
                            shown(result)
                        ),
                    };
                    r.add(Oracle::Texts, i, message, vec![call.line]);
                }
                match expected_result(e, agent, &call, &tasks) {
                    Expect::Text(want, error) if *result != want || *is_error != error => {
                        let as_what = if error { "an error" } else { "a result" };
                        r.add(
                            Oracle::Texts,
                            i,
                            format!(
                                "`{tool}` of {agent} gave {:?}; the rules give {:?} as {as_what}",
                                shown(result),
                                shown(&want)
                            ),
                            vec![call.line],
                        );
                    }
                    Expect::Child if call.spawned.is_none() => r.add(
                        Oracle::Texts,
                        i,
                        format!(
                            "`{tool}` of {agent} started nothing and gave {:?}, but the call is valid",
                            short(result)
                        ),
                        vec![call.line],
                    ),
                    Expect::Answered if *is_error => r.add(
                        Oracle::Texts,
                        i,
                        format!(
                            "`{tool}` of {agent} gave the error {:?}, but every id it lists names a task",
                            short(result)
                        ),
                        vec![call.line],
                    ),
                    _ => {}
                }
            }
            _ => {}
        }
        tasks.observe(i, entry, event);
    }
}

/// The kind, status and message a loop ends with, given how its last step went.
fn expected_end(lp: &Loop, agent: &AgentId) -> (OutcomeKind, Status, String) {
    let arg = |call: &crate::sut::llm::ToolCall, name: &str| string_arg(&call.args, name).map(str::to_string);
    match lp.last {
        Last::Failed => (OutcomeKind::Fail, Status::Error, llm_failed(&lp.goal)),
        Last::Reply(reply) if reply.tool_calls.is_empty() => {
            let message = if reply.content.is_empty() { LOOP_COMPLETED.to_string() } else { reply.content.clone() };
            (OutcomeKind::FinalAnswer, Status::Ok, message)
        }
        Last::Reply(reply) => match first_terminal(&reply.tool_calls, agent).map(|c| (c.name.as_str(), c)) {
            Some(("final_answer", call)) => {
                (OutcomeKind::FinalAnswer, Status::Ok, arg(call, "message").unwrap_or_default())
            }
            Some(("fail", call)) => {
                (OutcomeKind::Fail, Status::Error, arg(call, "reason").unwrap_or_else(|| FAIL_DEFAULT.into()))
            }
            Some((_, call)) => (OutcomeKind::AwaitingUser, Status::Ok, arg(call, "question").unwrap_or_default()),
            None => (OutcomeKind::Fail, Status::Error, budget_exhausted(lp.steps, &lp.goal)),
        },
        Last::Other => (OutcomeKind::Fail, Status::Error, budget_exhausted(lp.steps, &lp.goal)),
    }
}

/// What a started `Agent` or family call must end with.
enum Expect {
    /// This text, as an error or not.
    Text(String, bool),
    /// A child or a task: the call is valid.
    Child,
    /// An answer, not an error: every id the call lists names a task (`bub.task-id.trimmed`);
    /// what the answer holds is oracle `wait-order`'s and `delivery`'s.
    Answered,
    /// Another oracle's to judge.
    Elsewhere,
}

/// What a started `Agent` or family call must end with, when the rules fix it here.
fn expected_result(e: &Evidence, agent: &AgentId, call: &Open, tasks: &Tasks) -> Expect {
    if call.tool != "Agent" && !FAMILY.contains(&call.tool) {
        return Expect::Elsewhere;
    }
    let rules = e.rules;
    let args = call.args;
    let id = string_arg(args, "task_id").map(str::trim).unwrap_or_default();
    match call.tool {
        "Agent" => {
            // The depth refusal is oracle `depth`'s; a child's own answer is `truncation`'s.
            if agent.depth() >= rules.depth_limit {
                return Expect::Elsewhere;
            }
            if string_arg(args, "task").unwrap_or_default().trim().is_empty() {
                return Expect::Text(EMPTY_TASK.into(), true);
            }
            match rules.agent_timeout {
                Some(limit) if call.timed_out => Expect::Text(foreground_timeout(limit), true),
                _ => Expect::Child,
            }
        }
        "subagent" => {
            let launched = match e.setup {
                Some(setup) => launch(args, setup, rules).map(|_| ()),
                // Without the setup only the first two checks are known.
                None if rules.depth_limit == 0 => Err(DEPTH_ERROR.to_string()),
                None if string_arg(args, "prompt").unwrap_or_default().trim().is_empty() => {
                    Err("error: empty prompt".into())
                }
                None => return Expect::Elsewhere,
            };
            match launched {
                Err(refusal) => Expect::Text(refusal, true),
                Ok(()) if call.session_in_use => Expect::Elsewhere,
                Ok(()) => {
                    let Some(task_id) = call.queued else { return Expect::Child };
                    let (kind, name) = session_arg(args);
                    let session = if kind == "named" { name } else { format!("{kind}/{task_id}") };
                    let status = if call.started_task { "running" } else { "queued" };
                    Expect::Text(immediate(task_id, status, &session), false)
                }
            }
        }
        "subagent.send" => {
            let Some((state, kind)) = call.target else { return Expect::Text(unknown_task(id), true) };
            let message = string_arg(args, "message").unwrap_or_default();
            if message.trim().is_empty() {
                return Expect::Text(EMPTY_MESSAGE.into(), true);
            }
            if state.active() {
                return Expect::Text(task_status(id, state.word()), false);
            }
            if kind != "named" {
                return Expect::Text(format!("task {id} has finished and its session was discarded"), true);
            }
            if call.session_in_use {
                return Expect::Elsewhere;
            }
            let (Some(task), Some(_)) = (tasks.get(id), call.queued) else { return Expect::Child };
            let status = if call.started_task { "running" } else { "queued" };
            Expect::Text(immediate(id, status, task.session), false)
        }
        "subagent.cancel" => match call.target {
            None => Expect::Text(unknown_task(id), true),
            Some((state, _)) if !state.active() => Expect::Text(format!("task {id} has already finished"), true),
            Some(_) => Expect::Text(task_status(id, "cancelled"), false),
        },
        "subagent.wait" => {
            let listed = list_arg(args, "task_ids");
            match listed.iter().map(|id| id.trim()).find(|id| tasks.get(id).is_none()) {
                Some(id) => Expect::Text(unknown_task(id), true),
                None => Expect::Answered,
            }
        }
        _ => Expect::Elsewhere,
    }
}

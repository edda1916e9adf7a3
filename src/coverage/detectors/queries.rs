//! Questions several detectors ask of a run's facts (named sessions' runs, cancelled runs,
//! the root's acts by instant, …), answered once here.
//!
//! They decide no clause themselves; the detectors of each page do.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use crate::coverage::facts::*;
use crate::evidence::Exchange;
use crate::sut::AgentId;
use crate::sut::event::{Event, OutcomeKind, Status, TaskStatus, Via};

/// A loop ended by the first terminal call `tool` of a response: `check(kind, status,
/// message, the call's argument)`.
pub(super) fn terminal_ended(
    f: &Facts,
    tool: &str,
    key: Option<&str>,
    check: fn(OutcomeKind, Status, &str, Option<&str>) -> bool,
) -> bool {
    f.responses.iter().any(|r| {
        let first = r.calls.iter().position(|c| TERMINAL.contains(&c.as_str()));
        let Some(first) = first.filter(|p| r.calls[*p] == tool) else { return false };
        let Some(ended) = r.ended else { return false };
        let Event::AgentEnded { kind, status, message, .. } = f.ev[ended].event else { return false };
        // The call's arguments, from the reply the model gave.
        let agent = r.agent.expect("a response has an agent");
        let n = f.requests_before(agent, r.at);
        let Some(reply) = n.checked_sub(1).and_then(|n| f.requests(agent).get(n)).and_then(|x| x.reply.as_ref()) else {
            return false;
        };
        let args = reply.tool_calls.get(first).map(|c| &*c.args);
        let value = key.and_then(|k| arg_str(args, k));
        check(*kind, *status, message, value)
    })
}

/// Named sessions' runs, in order, by name.
pub(super) fn named_runs<'f>(f: &'f Facts) -> BTreeMap<&'f str, Vec<usize>> {
    let mut out: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, r) in f.runs.iter().enumerate() {
        if !r.session.starts_with("temp/") && !r.session.starts_with("fork/") {
            out.entry(r.session).or_default().push(i);
        }
    }
    out
}

pub(super) fn first_request_of_run<'a>(f: &Facts<'a>, run: usize) -> Option<(usize, &'a Exchange)> {
    let r = &f.runs[run];
    let started = f.after(r.child, r.queued).find(|(_, e)| matches!(e, Event::AgentStarted { .. }))?.0;
    Some((started, f.first_request_after(r.child, started)?))
}

/// Runs cancelled when the session quit (after the last turn ended).
pub(super) fn quit_cancelled<'f, 'a>(f: &'f Facts<'a>) -> impl Iterator<Item = &'f TaskRun<'a>> + 'f {
    let last_turn = f.ev.iter().rposition(|e| matches!(e.event, Event::TurnEnded { .. }));
    f.runs.iter().filter(move |r| {
        r.status == Some(TaskStatus::Cancelled)
            && r.delivered.is_empty()
            && last_turn.is_some_and(|t| r.ended.is_some_and(|e| e > t))
            && f.e.session_ended
    })
}

/// Runs a `subagent.cancel` call cancelled.
pub(super) fn cancelled_by_call<'f, 'a>(f: &'f Facts<'a>) -> impl Iterator<Item = &'f TaskRun<'a>> + 'f {
    f.runs.iter().filter(move |r| {
        r.status == Some(TaskStatus::Cancelled)
            && r.ended.is_some_and(|e| {
                f.calls_to("subagent.cancel").any(|c| {
                    c.start.is_some_and(|s| s < e)
                        && c.end.is_some_and(|x| x > e)
                        && arg_str(c.args, "task_id").map(str::trim) == Some(r.id)
                })
            })
    })
}

/// The deliveries taken in together (one notification batch before one root request, or
/// one `subagent.wait`), as runs in delivery order.
pub(super) fn batches(f: &Facts) -> Vec<Vec<usize>> {
    let mut by_delivery: Vec<(usize, Via, usize)> = Vec::new();
    for (i, r) in f.runs.iter().enumerate() {
        for (d, via) in &r.delivered {
            by_delivery.push((*d, *via, i));
        }
    }
    by_delivery.sort_by_key(|(d, _, run)| (*d, *run));
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut last: Option<(usize, Via)> = None;
    for (d, via, run) in by_delivery {
        // Consecutive `delivered` lines of the root, nothing else of the root between.
        let together = last.is_some_and(|(p, v)| {
            v == via
                && !f.ev[p + 1..d].iter().any(|e| e.agent.depth() == 0 && !matches!(e.event, Event::Delivered { .. }))
        });
        match out.last_mut() {
            Some(batch) if together => batch.push(run),
            _ => out.push(vec![run]),
        }
        last = Some((d, via));
    }
    out
}

/// A root reply that would have ended the turn was held while children were unfinished.
pub(super) fn held(f: &Facts, reply: fn(&Response) -> bool) -> bool {
    f.responses.iter().any(|r| {
        r.agent.is_some_and(|a| a.depth() == 0)
            && reply(r)
            && r.held.is_some_and(|h| f.after(&AgentId::root(), h).any(|(_, e)| matches!(e, Event::LlmRequest { .. })))
    })
}

/// A background result was truncated to the limit before it was recorded.
pub(super) fn truncated_background(f: &Facts) -> bool {
    f.rules.result_limit_chars.is_some_and(|n| {
        f.runs.iter().any(|r| r.body.ends_with(&format!("...\n[Sub-agent response truncated to {n} chars]")))
    })
}

/// A system prompt's base, before the profile list or a profile body, and its skills line.
pub(super) fn sections(system: &str) -> (&str, Option<&str>) {
    let (rest, skills) = match system.strip_prefix("Skills: ") {
        Some(skills) => ("", Some(skills)),
        None => match system.rsplit_once("\n\nSkills: ") {
            Some((rest, skills)) => (rest, Some(skills)),
            None => (system, None),
        },
    };
    let base = match rest.find("Agent profiles (pass the name") {
        Some(at) => rest[..at].trim_end(),
        None => rest,
    };
    (base, skills)
}

/// The limit a `subagent` call's `timeout_seconds` sets, as the rules read it: `None` when it
/// is absent or invalid (the next source applies), `Some(None)` for 0 (no limit).
pub(super) fn call_timeout(args: Option<&Value>) -> Option<Option<Duration>> {
    let seconds = arg(args, "timeout_seconds")?.as_f64().filter(|s| s.is_finite() && *s >= 0.0)?;
    Some((seconds > 0.0).then(|| Duration::from_secs_f64(seconds.min(crate::rules::MAX_SECONDS))))
}

/// The entries of a `subagent.wait` result: (task id, status, whether it carries a result).
pub(super) fn wait_entries(call: &Call) -> Option<Vec<(String, String, bool)>> {
    let Value::Array(items) = json(call.result)? else { return None };
    items
        .iter()
        .map(|item| {
            let id = item.get("task_id")?.as_str()?.to_string();
            let status = item.get("status")?.as_str()?.to_string();
            Some((id, status, item.get("result").is_some()))
        })
        .collect()
}

/// The heading of the profile listing in the root's system prompt (`bub.profile.listed`).
pub(super) const PROFILES_HEADING: &str = "Agent profiles (pass the name as `agent` to `subagent`):";

/// A started `Agent` or `subagent` call, or a `subagent.send` that continued a task: a
/// spawning call (oracle 10), whether or not it was refused.
pub(super) fn spawning_call(call: &Call) -> bool {
    (call.start.is_some() && matches!(call.tool, "Agent" | "subagent")) || call.spawn.is_some()
}

/// A `subagent` or `subagent.send` call met the session-in-use refusal.
pub(super) fn in_use_refused(f: &Facts) -> bool {
    ["subagent", "subagent.send"].iter().any(|t| {
        f.calls_to(t)
            .any(|c| c.is_error && c.result.starts_with("session '") && c.result.contains("' is in use by task sub-"))
    })
}

/// What the root does that must wait for its instant to settle (`core.instant.settle-before-acting`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum ActKind {
    /// It sends a model request.
    Requests,
    /// The model answered it: it runs the reply's calls, or holds or ends its turn.
    Answered,
    /// A `subagent.wait` of its answers.
    WaitAnswers,
}

/// One act of the root.
#[derive(Clone, Copy)]
pub(super) struct Act {
    pub(super) kind: ActKind,
    /// Its trace position.
    pub(super) at: usize,
    /// Results count as due at it when their runs started before this position (for a wait,
    /// its start).
    pub(super) since: usize,
    /// Whether the act has a reason of its own in the instant (the model answered, the loop
    /// went on from its own step, a wait's deadline came), besides the arrivals: a held
    /// root's wake and a wait's return on its last result have none.
    pub(super) own: bool,
}

/// The root's acts, grouped by instant, each group in trace order.
pub(super) fn root_acts_by_instant(f: &Facts) -> Vec<Vec<Act>> {
    let mut acts: Vec<Act> = root_acts(f).collect();
    acts.sort_by_key(|a| a.at);
    acts.chunk_by(|a, b| f.ev[a.at].at == f.ev[b.at].at).map(<[Act]>::to_vec).collect()
}

/// The root's acts: its requests and the replies it got, in trace order, then its waits'
/// answers.
pub(super) fn root_acts<'f>(f: &'f Facts) -> impl Iterator<Item = Act> + 'f {
    let root = AgentId::root();
    let loop_acts = f.events().filter(|(_, e)| e.agent.depth() == 0).filter_map(|(i, e)| match e.event {
        Event::LlmRequest { .. } => Some(Act { kind: ActKind::Requests, at: i, since: i, own: !f.woke_held_root(i) }),
        Event::LlmReply { .. } => Some(Act { kind: ActKind::Answered, at: i, since: i, own: true }),
        _ => None,
    });
    let waits = f.calls_to("subagent.wait").filter(move |c| *c.agent == root && !c.is_error).filter_map(|c| {
        let (start, end) = (c.start?, c.end?);
        let limit = arg(c.args, "timeout_seconds")
            .and_then(Value::as_f64)
            .filter(|s| s.is_finite() && *s >= 0.0)
            .unwrap_or(crate::rules::WAIT_DEFAULT_SECONDS as f64);
        let waited = (f.ev[end].at - f.ev[start].at).as_secs_f64();
        let at_deadline = (waited - limit).abs() < 1e-9;
        Some(Act { kind: ActKind::WaitAnswers, at: end, since: start, own: at_deadline })
    });
    loop_acts.chain(waits)
}

/// A result of a task spawned in an earlier turn was notified at the start of a later turn,
/// before its first request (`bub.turn.unfinished-next-turn`).
pub(super) fn notified_at_turn_start(f: &Facts) -> bool {
    f.runs.iter().any(|r| {
        let turn_of = |pos: usize| f.ev[..=pos].iter().filter(|e| matches!(e.event, Event::TurnStarted { .. })).count();
        r.delivered.iter().any(|(d, via)| {
            let turn_start = f.ev[..*d].iter().rposition(|e| matches!(e.event, Event::TurnStarted { .. }));
            let first_request = turn_start.is_some_and(|t| {
                !f.ev[t..*d].iter().any(|e| e.agent.depth() == 0 && matches!(e.event, Event::LlmRequest { .. }))
            });
            *via == Via::Notification && turn_of(*d) > turn_of(r.queued) && first_request
        })
    })
}

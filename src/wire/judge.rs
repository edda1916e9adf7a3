//! A served run judged: the model-side oracles over its exchanges, the server's own findings,
//! the request checks and the script's use, as the same [`Verdict`] `rehearsal run` reports.
//!
//! What this module deliberately does not do: judge any expectation on the core's events or
//! the turns' outcomes ([`not_applied`] lists them), or re-derive a rule (the oracles of
//! [`crate::oracles::model_side`] do).

use crate::judge::{Failure, FailureKind, Judgement, Served, Subject, Verdict};
use crate::oracles::model_side;
use crate::scenario::Scenario;

use super::{End, FindingKind, WireRun};

/// Judges a served run of `scenario`: what decides its verdict, on the record the model side
/// saw (a runtime in another process reports no events), with its wall time.
pub fn judge(scenario: &Scenario, wire: &WireRun) -> Verdict {
    judgement(scenario, wire).verdict()
}

/// What decides the verdict on a served run, before `drive` and `serve` add what only they
/// know (the runtime's switched-off oracles, how its commands ended, the clock's end).
pub(crate) fn judgement(scenario: &Scenario, wire: &WireRun) -> Judgement {
    let mut causes = Vec::new();
    let mut failures = Vec::new();
    // A runtime that retries a request the script cannot answer meets the same stop again:
    // each stop is said once, with how many requests met it.
    let mut stops: Vec<(String, usize)> = Vec::new();
    for halt in &wire.halts {
        let said = halt.to_string();
        match stops.iter_mut().find(|(s, _)| *s == said) {
            Some((_, n)) => *n += 1,
            None => stops.push((said, 1)),
        }
    }
    for (said, n) in stops {
        let times = if n > 1 { format!(" ({n} requests met it)") } else { String::new() };
        causes.push(Failure::new(FailureKind::Stopped, format!("stopped: {said}{times}"), Vec::new()));
    }
    for finding in wire.findings.iter().filter(|f| f.kind != FindingKind::Unattributed) {
        // Unattributed requests are the model-side attribution oracle's to report.
        failures.push(Failure::new(
            FailureKind::Oracle,
            format!("wire: {}: {}", finding.kind.name(), finding.message),
            Vec::new(),
        ));
    }
    let rules = scenario.rules.resolve();
    let dialect = wire
        .side
        .dialect
        .as_deref()
        .cloned()
        .unwrap_or_else(|| crate::dialect::Dialect::builtin("generic").expect("a built-in dialect"));
    for finding in model_side::check(&wire.side, &rules, &dialect) {
        failures.push(crate::judge::model_side_failure(&finding));
    }
    for check in &wire.failed_checks {
        failures.push(Failure::new(FailureKind::Check, format!("check failed: {check}"), Vec::new()));
    }
    if wire.halts.is_empty() {
        failures.extend(unused(scenario, wire));
        failures.extend(users(scenario, wire));
    }
    causes.extend(failures);
    let served = Served {
        side: wire.side.clone(),
        exchanges: wire.exchanges.clone(),
        rules,
        elapsed: wire.elapsed,
        session_ended: wire.end == End::Script,
        stopped: !wire.halts.is_empty(),
    };
    Judgement::new(scenario.name.clone(), Subject::Served(Box::new(served)), causes)
}

/// The script a served run left unused: lanes that selected no agent, and replies that had to
/// be used and were not.
fn unused(scenario: &Scenario, wire: &WireRun) -> Vec<Failure> {
    let mut out = Vec::new();
    let ended = match wire.end {
        End::Idle => " before the idle limit ended the run",
        _ => "",
    };
    for (i, lane) in scenario.lanes.iter().enumerate() {
        let uses = wire.reply_use.get(i).map_or(&[][..], Vec::as_slice);
        let must: Vec<usize> = lane
            .replies
            .iter()
            .enumerate()
            .filter(|(j, r)| !(r.optional || r.repeatable) && uses.get(*j).copied().unwrap_or(0) == 0)
            .map(|(j, _)| j)
            .collect();
        if must.is_empty() {
            continue;
        }
        let what = if wire.lane_use.get(i).copied().unwrap_or(0) == 0 {
            format!("lanes[{i}] ({}) selected no agent{ended}: no request was put down to it", lane.selector())
        } else {
            let list: Vec<String> = must.iter().map(|j| format!("replies[{j}]")).collect();
            format!("lanes[{i}] ({}): {} never answered a request{ended}", lane.selector(), list.join(", "))
        };
        out.push(Failure::new(FailureKind::UnusedScript, what, Vec::new()));
    }
    out
}

/// The turns whose user message the root never sent. Each turn's `user` must appear in one of
/// the root's user messages, in turn order (contained, so that a runtime that wraps its user's
/// text, with a date line for one, still matches; messages in between, such as notifications,
/// are passed over). A turn with `user_free` matches nothing and is skipped.
fn users(scenario: &Scenario, wire: &WireRun) -> Vec<Failure> {
    use crate::evidence::attribution::Attribution;
    use crate::sut::llm::Role;
    // The root's user messages, in the order they first appeared.
    let mut said: Vec<&str> = Vec::new();
    for (e, a) in wire.side.exchanges.iter().zip(&wire.side.attributions) {
        let Attribution::Agent(a) = a else { continue };
        if a.alias != crate::sut::AgentId::root() {
            continue;
        }
        for m in e.messages.iter().filter(|m| m.role == Role::User) {
            if !said.contains(&m.content.as_str()) {
                said.push(&m.content);
            }
        }
    }
    if said.is_empty() {
        // No request of the root at all: the unused script and the attribution say so.
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut from = 0;
    for (i, turn) in scenario.turns.iter().enumerate() {
        if turn.user_free {
            continue;
        }
        let wanted = turn.user.trim();
        match said[from..].iter().position(|m| m.contains(wanted)) {
            Some(k) => from += k + 1,
            None => {
                let shown: Vec<String> =
                    said.iter().take(5).map(|m| crate::trace::quoted(&super::excerpt_to(m, 80))).collect();
                let more = if said.len() > 5 { format!(" and {} more", said.len() - 5) } else { String::new() };
                out.push(Failure::new(
                    FailureKind::Check,
                    format!(
                        "turns[{i}].user: the root never sent the model {} (after the turns before it); its user messages were {}{more} (set `user_free` on the turn to leave it free)",
                        crate::trace::quoted(&super::excerpt(wanted)),
                        shown.join(", ")
                    ),
                    Vec::new(),
                ));
            }
        }
    }
    out
}

/// The expectations of `scenario` a served run cannot judge, each as its place and why: the
/// core's events and the turns' outcomes are not on the wire.
pub fn not_applied(scenario: &Scenario) -> Vec<String> {
    let mut out = Vec::new();
    for (i, turn) in scenario.turns.iter().enumerate() {
        let e = &turn.expect;
        let fields = [
            ("outcome", e.outcome.is_some()),
            ("status", e.status.is_some()),
            ("message", e.message.is_some()),
            ("message_contains", e.message_contains.is_some()),
            ("budget_left", e.budget_left.is_some()),
            ("steps", e.steps.is_some()),
        ];
        for (field, set) in fields {
            if set {
                out.push(format!("turns[{i}].expect.{field}: a turn's outcome is the runtime's, not on the wire"));
            }
        }
    }
    let x = &scenario.expect;
    if !x.trace.is_empty() || !x.trace_absent.is_empty() {
        out.push("expect.trace / expect.trace_absent: the core's events are not on the wire".to_string());
    }
    if x.elapsed_ms.is_some() {
        out.push("expect.elapsed_ms: virtual time; a wire run measures wall time".to_string());
    }
    if x.live_sessions.is_some() {
        out.push("expect.live_sessions: the runtime's session store is not on the wire".to_string());
    }
    if !scenario.steer.is_empty() {
        out.push("steer: steering is sent by the runtime's user, not the model".to_string());
    }
    out
}

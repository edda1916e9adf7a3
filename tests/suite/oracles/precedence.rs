//! Oracle `precedence` (`oracle.precedence.*`, docs/rules/core.md): the time limit the call,
//! the profile and the default give; the tools a loop is offered and may call; the held turn.

use std::time::Duration;

use rehearsal::sut::event::Event;
use rehearsal::trace::What;

use super::runs::{BUB_TEXTS, assert_has, line_at, request_of};
use super::tampered;

#[test]
fn precedence_profile_limit_taken_over_the_calls() {
    // The call gives 0.5 s, its profile 0.25 s: the call's wins.
    let failures = tampered(BUB_TEXTS, |run| {
        let line = line_at(run, "main/1", |e| matches!(e, Event::TaskStarted { .. }));
        if let What::Core(Event::TaskStarted { timeout, .. }) = &mut run.trace.entries[line].what {
            *timeout = Some(Duration::from_millis(250));
        }
    });
    assert_has(
        &failures,
        "oracle precedence: main/1 at 0.100s: task sub-e220a839 runs with the time limit 250ms; the call, its profile and the default give 500ms",
    );
}

#[test]
fn precedence_narrowed_child_offered_every_catalog_tool() {
    let failures = tampered(BUB_TEXTS, |run| {
        let every = request_of(run, "main", 0).request.tools.clone();
        let request = &mut request_of(run, "main/2", 0).request;
        let widened: Vec<_> = every
            .iter()
            .filter(|t| ["Read", "Grep", "final_answer", "fail"].contains(&t.name.as_str()))
            .cloned()
            .collect();
        request.tools = widened.into();
    });
    assert_has(
        &failures,
        "oracle precedence: main/2 at 0.100s: main/2 is offered [Read, Grep, final_answer, fail]; the rules give [Read, final_answer, fail]",
    );
}

#[test]
fn precedence_granted_tool_answered_as_unknown() {
    let failures = tampered(BUB_TEXTS, |run| {
        let line = line_at(run, "main/2", |e| matches!(e, Event::ToolStarted { .. }));
        run.trace.entries.remove(line);
    });
    assert_has(
        &failures,
        "oracle precedence: main/2 at 0.210s: `Read` of main/2 was answered as an unknown tool, but main/2 has it",
    );
}

#[test]
fn precedence_answer_not_held_while_tasks_run() {
    let failures = tampered(BUB_TEXTS, |run| {
        let line = line_at(run, "main", |e| matches!(e, Event::AwaitingChildren { unfinished: 2 }));
        run.trace.entries.remove(line);
    });
    assert_has(
        &failures,
        "oracle precedence: main at 0.310s: main answered with a step left while 2 of its tasks were outstanding (queued, running or unread); its turn must wait for them (`awaiting unfinished=2`)",
    );
}

#[test]
fn precedence_held_root_asks_again_after_the_result_arrived() {
    let failures = tampered(BUB_TEXTS, |run| {
        let line = line_at(run, "main", |e| matches!(e, Event::LlmRequest { call: 5, .. }));
        run.trace.entries[line].at = Duration::from_millis(650);
    });
    assert_has(
        &failures,
        "oracle precedence: main at 0.650s: a result or a message reached the held main at 600ms, but it asked the model again only at 650ms",
    );
}

#[test]
fn precedence_turn_held_with_nothing_outstanding() {
    let failures = tampered(BUB_TEXTS, |run| {
        let line = line_at(run, "main", |e| matches!(e, Event::AgentEnded { .. }));
        let mut held = run.trace.entries[line].clone();
        held.what = What::Core(Event::AwaitingChildren { unfinished: 1 });
        run.trace.entries.insert(line, held);
    });
    assert_has(
        &failures,
        "oracle precedence: main at 0.700s: main's answer ends its turn (nothing outstanding, no step left, or `fail` / `ask_user`), but the turn went on",
    );
}

/// The risk gate: `Read` is safe and on the policy list, `Write` needs approval and is on it,
/// `Edit` needs approval and the user refuses it (semantic mutant 30's probe, with a question).
const ROKU_GATE: &str = r#"{
  "name": "policy-safe-tool",
  "approval": {"mode": "risk", "policy_deny": ["Read", "Write"], "answers": [{"tool": "Edit", "approve": false}]},
  "tools": [{"name": "Read", "latency_ms": 1, "risk": "safe"}, {"name": "Write", "latency_ms": 1, "risk": "write"}, {"name": "Edit", "latency_ms": 1}],
  "lanes": [
    {"agent": "main", "replies": [
      {"calls": [{"tool": "Read", "args": {}}, {"tool": "Write", "args": {}}, {"tool": "Edit", "args": {}}], "latency_ms": 10},
      {"text": "done", "latency_ms": 10}
    ]}
  ],
  "turns": [{"user": "go"}]
}"#;

#[test]
fn precedence_safe_tool_denied_by_the_policy() {
    let failures = tampered(ROKU_GATE, |run| {
        let start = line_at(run, "main", |e| matches!(e, Event::ToolStarted { tool, .. } if tool == "Read"));
        let end = line_at(run, "main", |e| matches!(e, Event::ToolEnded { tool, .. } if tool == "Read"));
        run.trace.entries.remove(end);
        run.trace.entries[start].what = What::Core(Event::Denied {
            tool: "Read".into(),
            reason: "Tool `Read` is denied by the current security policy.".into(),
            budget: 29,
        });
    });
    assert_has(
        &failures,
        "oracle precedence: main at 0.010s: `Read` of main was denied without asking; it is safe to the risk gate (a terminal tool, or tagged `risk:safe` and not `risk:write`): it runs without asking",
    );
}

#[test]
fn precedence_policy_refusal_asked_about() {
    let failures = tampered(ROKU_GATE, |run| {
        let denied = line_at(run, "main", |e| matches!(e, Event::Denied { tool, .. } if tool == "Write"));
        let mut asked = run.trace.entries[denied].clone();
        asked.what = What::Asked { tool: "Write".into(), approve: false };
        run.trace.entries.insert(denied, asked);
    });
    assert_has(
        &failures,
        "oracle precedence: main at 0.011s: `Write` of main was denied after the user answered false; it needs approval and the policy refuses it: it is denied without asking",
    );
}

#[test]
fn precedence_refused_call_run_anyway() {
    let failures = tampered(ROKU_GATE, |run| {
        let denied = line_at(run, "main", |e| matches!(e, Event::Denied { tool, .. } if tool == "Edit"));
        run.trace.entries[denied].what = What::Core(Event::ToolEnded {
            call_id: "call-3".into(),
            tool: "Edit".into(),
            is_error: false,
            result: "ok".into(),
            budget: 27,
            recovery: 5,
        });
    });
    assert_has(
        &failures,
        "oracle precedence: main at 0.011s: `Edit` of main went on after the user answered false; the user's answer decides it: denied exactly when refused",
    );
}

#[test]
fn precedence_auto_gate_asks_nobody() {
    let failures = tampered(BUB_TEXTS, |run| {
        let line = line_at(run, "main/2", |e| matches!(e, Event::ToolStarted { .. }));
        let mut asked = run.trace.entries[line].clone();
        asked.what = What::Asked { tool: "Read".into(), approve: true };
        run.trace.entries.insert(line, asked);
    });
    let found = super::runs::of(&failures, "precedence");
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].ends_with(
            "`Read` of main/2 went on after the user answered true; the auto gate approves every call and asks nobody"
        ),
        "{found:#?}"
    );
}

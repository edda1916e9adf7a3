//! Oracle `precedence` (`oracle.precedence.*`, docs/rules/core.md): the time limit the call,
//! the profile and the default give; the tools a loop is offered and may call; the held turn.

use std::time::Duration;

use rehearsal::sut::event::Event;
use rehearsal::trace::What;

use super::oracles::tampered;
use super::oracles_runs::{BUB_TEXTS, assert_has, line_at, request_of};

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

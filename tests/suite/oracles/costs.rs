//! Oracle `costs` (`oracle.costs.*`, docs/rules/core.md): real runs whose every kind of call is
//! priced correctly pass; the same runs, tampered to charge one call wrongly, fail naming it.

use rehearsal::sut::event::Event;
use rehearsal::trace::What;

use super::runs::{BUB_FAMILY, ROKU_CALLS, assert_has, of, set_budget, tool_end};
use super::{line_of, tampered};

#[test]
fn costs_every_call_priced_as_the_rules_say_passes() {
    assert!(tampered(ROKU_CALLS, |_| {}).is_empty());
    assert!(tampered(BUB_FAMILY, |_| {}).is_empty());
}

#[test]
fn costs_catalog_call_charged_two_steps() {
    let failures = tampered(ROKU_CALLS, |run| {
        let line = tool_end(run, "Read", 0);
        set_budget(run, line, 13);
    });
    assert_has(
        &failures,
        "oracle costs: main at 0.110s: `Read` of main left 13 steps; from 15 a catalog call costs 1 step, leaving 14",
    );
}

#[test]
fn costs_failed_catalog_call_without_its_recovery() {
    let failures = tampered(ROKU_CALLS, |run| {
        let line = tool_end(run, "Flaky", 0);
        if let What::Core(Event::ToolEnded { recovery, .. }) = &mut run.trace.entries[line].what {
            assert_eq!(*recovery, 1);
            *recovery = 2;
        }
    });
    assert_has(&failures, "oracle costs: main at 0.120s: `Flaky` of main left recovery 2; from 2 it should leave 1");
}

#[test]
fn costs_spawning_call_charged_more_than_its_spawn_left() {
    let failures = tampered(ROKU_CALLS, |run| {
        let line = tool_end(run, "Agent", 0);
        set_budget(run, line, 0);
    });
    assert_has(
        &failures,
        "oracle costs: main at 0.320s: `Agent` of main left 0 steps; from 13 a spawning call leaves what its spawn left, leaving 2",
    );
}

#[test]
fn costs_refused_spawning_call_charged_nothing() {
    // The blank task is refused: it costs the spawn cost (1) all the same.
    let failures = tampered(ROKU_CALLS, |run| {
        let line = tool_end(run, "Agent", 1);
        set_budget(run, line, 2);
    });
    assert_has(
        &failures,
        "oracle costs: main at 0.320s: `Agent` of main left 2 steps; from 2 a refused spawning call costs the spawn cost, leaving 1",
    );
}

#[test]
fn costs_family_call_charged_nothing() {
    let failures = tampered(BUB_FAMILY, |run| {
        let line = tool_end(run, "subagent.cancel", 0);
        set_budget(run, line, 16);
    });
    assert_has(
        &failures,
        "oracle costs: main at 1.100s: `subagent.cancel` of main left 16 steps; from 16 a `subagent` family call costs 1 step, leaving 15",
    );
}

#[test]
fn costs_held_answer_charged_nothing() {
    // "Waiting." is held (the continued task runs): it costs its step all the same.
    let failures = tampered(BUB_FAMILY, |run| {
        let line = line_of(run, |e| matches!(e, Event::LlmRequest { call: 4, .. }));
        set_budget(run, line, 13);
    });
    assert_has(
        &failures,
        "oracle costs: main at 1.600s: main asks the model with 13 steps, but after its held answer it has 14",
    );
}

#[test]
fn costs_step_index_advanced_by_a_reply_of_spawning_calls_only() {
    let failures = tampered(ROKU_CALLS, |run| {
        let line = line_of(run, |e| matches!(e, Event::StepCompleted { budget: 1, step_index: 1 }));
        if let What::Core(Event::StepCompleted { step_index, .. }) = &mut run.trace.entries[line].what {
            *step_index = 2;
        }
    });
    assert_has(
        &failures,
        "oracle costs: main at 0.320s: main's step index is 2 after a reply that ran no regular call; it should be 1",
    );
}

#[test]
fn costs_nudge_after_a_spawning_call() {
    let failures = tampered(ROKU_CALLS, |run| {
        let line = tool_end(run, "Agent", 1);
        let mut nudge = run.trace.entries[line].clone();
        nudge.what = What::Core(Event::Nudge { budget: 1, recovery: 1 });
        run.trace.entries.insert(line + 1, nudge);
    });
    assert_eq!(
        of(&failures, "costs"),
        [
            "oracle costs: main at 0.320s: an exhaustion nudge of main follows no regular call that left a budget at 0 (only those are followed by one)"
        ]
    );
}

#[test]
fn costs_regular_call_leaving_no_step_without_the_nudge() {
    let failures = tampered(ROKU_CALLS, |run| {
        let line = line_of(run, |e| matches!(e, Event::Nudge { .. }));
        run.trace.entries.remove(line);
    });
    assert_eq!(
        of(&failures, "costs"),
        [
            "oracle costs: main at 0.420s: a regular call of main left budget 0, recovery 0 but no exhaustion nudge followed it"
        ]
    );
}

#[test]
fn costs_failed_model_request_charged_a_step() {
    const LLM_ERROR: &str = r#"{
      "name": "llm-error",
      "lanes": [{"agent": "main", "replies": [{"error": "overloaded", "latency_ms": 100}]}],
      "turns": [{"user": "Go"}]
    }"#;
    let failures = tampered(LLM_ERROR, |run| {
        let line = line_of(run, |e| matches!(e, Event::AgentEnded { .. }));
        set_budget(run, line, 29);
    });
    assert_has(&failures, "oracle costs: main at 0.100s: main ends with 29 steps, but what it did leaves 30");
}

#[test]
fn costs_reply_of_calls_closed_without_a_step_event() {
    // The reply whose only call is `Agent` ran its calls; its step event goes missing.
    let failures = tampered(BUB_FAMILY, |run| {
        let line = line_of(run, |e| matches!(e, Event::StepCompleted { .. }));
        run.trace.entries.remove(line);
    });
    let costs = of(&failures, "costs");
    assert!(
        costs
            .iter()
            .any(|f| f.ends_with("asks the model again, but its reply that ran calls was closed by no step event")),
        "{failures:#?}"
    );
}

#[test]
fn costs_step_event_twice_for_one_reply() {
    let failures = tampered(BUB_FAMILY, |run| {
        let line = line_of(run, |e| matches!(e, Event::StepCompleted { .. }));
        let copy = run.trace.entries[line].clone();
        run.trace.entries.insert(line + 1, copy);
    });
    let costs = of(&failures, "costs");
    assert!(
        costs.iter().any(|f| f.ends_with("reports a step that closes no reply whose calls ran (one per such reply)")),
        "{failures:#?}"
    );
}

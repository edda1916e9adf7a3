//! Oracle 2, budget: refunds, wrong and capped grants, requests with no step left.

use serde_json::json;

use rehearsal::internals::oracles::Oracle;
use rehearsal::rules::Rules;
use rehearsal::sut::event::{Event, Family, OutcomeKind, Status};

use super::evidence::{
    Case, agent_end, agent_start, assert_violation, child_result, kid, llm, root, spawned, step, tool_end, tool_start,
};
use super::traces::{FG_CHILD_END, FG_CHILD_LLM, FG_CHILD_START, FG_SPAWN, FG_TOOL_END, foreground};

#[test]
fn budget_correct_foreground_spawn_passes() {
    foreground("All clear.", "All clear.").assert_clean();
}

#[test]
fn budget_refund_after_the_child_returns() {
    let mut c = foreground("All clear.", "All clear.");
    c.set(FG_TOOL_END, tool_end("main#1.1", "Agent", false, "All clear.", 20));
    let v = c.sole(Oracle::Budget);
    assert_violation(
        &v,
        Oracle::Budget,
        "main",
        300,
        "main's remaining budget rose from 19 to 20 (budgets are never refunded)",
        &[0, FG_TOOL_END],
    );
}

#[test]
fn budget_refund_inside_a_child() {
    // The child's budget rises from 10 to 11 between its request and its end.
    let mut c = foreground("All clear.", "All clear.");
    c.set(FG_CHILD_END, agent_end("All clear.", 11));
    let found = c.only(Oracle::Budget);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert_violation(
        &found[0],
        Oracle::Budget,
        "main/1",
        300,
        "main/1's remaining budget rose from 10 to 11",
        &[FG_CHILD_START, FG_CHILD_END],
    );
    assert_violation(
        &found[1],
        Oracle::Budget,
        "main/1",
        300,
        "main/1 has 11 steps, more than the 10 it started with",
        &[FG_CHILD_START, FG_CHILD_END],
    );
}

#[test]
fn budget_wrong_grant() {
    // From 30: cost 1, then min(29, 10) = 10 must be granted; the core granted 9 (30 → 20).
    let mut c = foreground("All clear.", "All clear.");
    c.set(FG_SPAWN, spawned(&kid(1), Family::Foreground, 9, 30, 20));
    c.set(FG_CHILD_START, agent_start(1, 9));
    c.set(FG_CHILD_LLM, llm(1, 9));
    c.set(FG_CHILD_END, agent_end("All clear.", 8));
    let found = c.only(Oracle::Budget);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert_violation(
        &found[0],
        Oracle::Budget,
        "main",
        100,
        "grant 9 for main/1, but min(remaining after the spawn cost 29, child step cap 10) = 10",
        &[FG_SPAWN],
    );
    assert_violation(
        &found[1],
        Oracle::Budget,
        "main",
        100,
        "main has 20 left after paying 1 + grant 9 from 30",
        &[FG_SPAWN],
    );
}

/// Roku with a root budget of 5: the `Agent` call pays 1 and `grant` of the 4 left; the child
/// answers and the root, at 0, ends without asking the model again.
fn small_root(grant: u32) -> Case {
    let mut c = Case::new(Rules { root_step_budget: 5, ..Rules::roku() });
    c.turn(0);
    c.root_llm(0, &[]);
    c.at(100, &root(), tool_start("main#1.1", "Agent", json!({"task": "T"})));
    c.at(100, &root(), spawned(&kid(1), Family::Foreground, grant, 5, 0));
    c.at(100, &kid(1), agent_start(1, grant));
    c.at(100, &kid(1), llm(1, grant));
    c.at(200, &kid(1), agent_end("ok", grant - 1));
    let limit = c.rules.result_limit_chars;
    c.at(200, &root(), child_result(&kid(1), "ok", limit));
    c.at(200, &root(), tool_end("main#1.1", "Agent", false, "ok", 0));
    c.at(200, &root(), step(0));
    let message = "Step budget exhausted.";
    c.at(
        200,
        &root(),
        Event::AgentEnded {
            kind: OutcomeKind::Fail,
            status: Status::Error,
            message: message.into(),
            steps: 1,
            budget: 0,
        },
    );
    c.at(200, &root(), Event::TurnEnded { turn: 1, kind: OutcomeKind::Fail, status: Status::Error, budget: 0 });
    c
}

#[test]
fn budget_grant_is_capped_by_what_is_left() {
    small_root(4).assert_clean();
    let v = small_root(10).sole(Oracle::Budget);
    assert_violation(
        &v,
        Oracle::Budget,
        "main",
        100,
        "grant 10 for main/1, but min(remaining after the spawn cost 4, child step cap 10) = 4",
        &[3],
    );
}

#[test]
fn budget_child_starts_with_other_than_its_grant() {
    let mut c = foreground("All clear.", "All clear.");
    c.set(FG_CHILD_START, agent_start(1, 11));
    let v = c.sole(Oracle::Budget);
    assert_violation(
        &v,
        Oracle::Budget,
        "main/1",
        100,
        "main/1 starts with 11 steps but was granted 10",
        &[FG_SPAWN, FG_CHILD_START],
    );
}

#[test]
fn budget_child_starts_without_a_grant() {
    let mut c = foreground("All clear.", "All clear.");
    c.trace.entries.remove(FG_SPAWN);
    let found = c.of(Oracle::Budget);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_violation(&found[0], Oracle::Budget, "main/1", 100, "main/1 starts without a grant", &[FG_SPAWN]);
}

/// Roku with a child step cap of 1: `main/1` spends its one step on a Read, then `asks_again`
/// decides whether it calls the model at 0 (wrong) or ends (right).
fn child_at_zero(asks_again: bool) -> (Case, usize) {
    let mut c = Case::new(Rules { child_step_cap: 1, ..Rules::roku() });
    c.turn(0);
    c.root_llm(0, &[]);
    c.root += 1;
    c.agent_call(100, 1); // 30 → 28, grant 1
    c.at(200, &kid(1), tool_start("main/1#1.1", "Read", json!({"path": "a"})));
    c.at(250, &kid(1), tool_end("main/1#1.1", "Read", false, "contents", 0));
    c.at(250, &kid(1), step(0));
    let line = if asks_again { c.at(250, &kid(1), llm(2, 0)) } else { 0 };
    let message = "Step budget exhausted.";
    c.at(
        350,
        &kid(1),
        Event::AgentEnded {
            kind: OutcomeKind::Fail,
            status: Status::Error,
            message: message.into(),
            steps: 1,
            budget: 0,
        },
    );
    c.at(350, &root(), Event::ChildResult { child: kid(1), is_error: true, chars: message.len(), truncated_to: None });
    c.at(350, &root(), tool_end("main#1.1", "Agent", true, message, 28));
    c.at(350, &root(), step(28));
    c.root_llm(350, &[]);
    c.end_turn(450);
    (c, line)
}

#[test]
fn budget_llm_request_with_no_steps_left() {
    let (c, line) = child_at_zero(true);
    let v = c.sole(Oracle::Budget);
    assert_violation(&v, Oracle::Budget, "main/1", 250, "main/1 called the model with no steps left", &[line]);
}

#[test]
fn budget_child_ending_at_zero_without_a_request_passes() {
    child_at_zero(false).0.assert_clean();
}

#[test]
fn budget_turn_not_starting_at_the_root_step_budget() {
    let mut c = foreground("All clear.", "All clear.");
    c.set(0, Event::TurnStarted { turn: 1, message: "Go".into(), budget: 31 });
    let v = c.sole(Oracle::Budget);
    assert_violation(&v, Oracle::Budget, "main", 0, "a turn starts with 31 steps, not 30", &[0]);
}

//! Oracle `texts` (`oracle.texts.*`, docs/rules/core.md): every text the runtime writes is the
//! rules' own. Real runs pass; each test changes one text a buggy core could have written.

use rehearsal::sut::event::Event;
use rehearsal::sut::llm::Message;
use rehearsal::trace::What;

use super::runs::{BUB_TEXTS, ROKU_CALLS, ROKU_STEER, assert_has, edit_request, line_at, tool_end};
use super::tampered;

fn set_result(run: &mut rehearsal::runner::Run, line: usize, text: &str) {
    match &mut run.trace.entries[line].what {
        What::Core(Event::ToolEnded { result, .. }) => *result = text.to_string(),
        What::Core(Event::TaskEnded { body, .. }) => *body = text.to_string(),
        What::Core(Event::AgentEnded { message, .. }) => *message = text.to_string(),
        What::Core(Event::Denied { reason, .. }) => *reason = text.to_string(),
        other => panic!("no text on line {line}: {other:?}"),
    }
}

#[test]
fn texts_of_real_runs_are_the_rules_own() {
    assert!(tampered(BUB_TEXTS, |_| {}).is_empty());
    assert!(tampered(ROKU_STEER, |_| {}).is_empty());
}

#[test]
fn texts_fractional_time_limit_printed_in_whole_seconds() {
    let failures = tampered(BUB_TEXTS, |run| {
        let line = line_at(run, "main/1", |e| matches!(e, Event::TaskEnded { .. }));
        set_result(run, line, "Timed out after 0 seconds.");
    });
    assert_has(
        &failures,
        r#"oracle texts: main/1 at 0.600s: task sub-e220a839 ended timed_out with "Timed out after 0 seconds."; the rules give "Timed out after 0.5 seconds.""#,
    );
}

/// The task queued as `from` reported as queued under `to`.
fn rename_task(run: &mut rehearsal::runner::Run, from: &str, to: &str) {
    for entry in &mut run.trace.entries {
        if let What::Core(Event::TaskQueued { task_id, .. }) = &mut entry.what
            && task_id == from
        {
            *task_id = to.to_string();
        }
    }
}

#[test]
fn texts_task_id_in_upper_case() {
    let failures = tampered(BUB_TEXTS, |run| rename_task(run, "sub-6e789e6a", "sub-6E789E6A"));
    assert_has(
        &failures,
        "oracle texts: main/2 at 0.100s: the run's task 2 has the id sub-6E789E6A; seed 0 gives sub-6e789e6a (`bub.task-id.seeded`)",
    );
}

#[test]
fn texts_task_id_drawn_twice() {
    let failures = tampered(BUB_TEXTS, |run| rename_task(run, "sub-06c45d18", "sub-e220a839"));
    assert_has(
        &failures,
        "oracle texts: main/3 at 0.100s: the run's task 3 has the id sub-e220a839; seed 0 gives sub-06c45d18 (`bub.task-id.seeded`)",
    );
}

#[test]
fn texts_cancelled_task_with_another_body() {
    let failures = tampered(BUB_TEXTS, |run| {
        let line = line_at(run, "main/3", |e| matches!(e, Event::TaskEnded { .. }));
        set_result(run, line, "Canceled.");
    });
    assert_has(
        &failures,
        r#"oracle texts: main/3 at 0.200s: task sub-06c45d18 ended cancelled with "Canceled."; the rules give "Cancelled.""#,
    );
}

#[test]
fn texts_refusal_of_an_unknown_profile_worded_otherwise() {
    let failures = tampered(BUB_TEXTS, |run| {
        let line = tool_end(run, "subagent", 3);
        set_result(run, line, "unknown profile: 'nobody'");
    });
    assert_has(
        &failures,
        r#"oracle texts: main at 0.100s: `subagent` of main gave "unknown profile: 'nobody'"; the rules give "unknown agent profile: 'nobody'" as an error"#,
    );
}

#[test]
fn texts_immediate_result_of_a_queued_task_says_running() {
    let failures = tampered(BUB_TEXTS, |run| {
        let line = tool_end(run, "subagent", 2);
        set_result(run, line, r#"{"task_id":"sub-06c45d18","status":"running","session":"temp/sub-06c45d18"}"#);
    });
    assert_has(
        &failures,
        r#"oracle texts: main at 0.100s: `subagent` of main gave "{\"task_id\":\"sub-06c45d18\",\"status\":\"running\",\"session\":\"temp/sub-06c45d18\"}"; the rules give "{\"task_id\":\"sub-06c45d18\",\"status\":\"queued\",\"session\":\"temp/sub-06c45d18\"}" as a result"#,
    );
}

#[test]
fn texts_cancel_of_a_finished_task_worded_otherwise() {
    let failures = tampered(BUB_TEXTS, |run| {
        let line = tool_end(run, "subagent.cancel", 1);
        set_result(run, line, "task sub-06c45d18 is done");
    });
    assert_has(
        &failures,
        r#"oracle texts: main at 0.200s: `subagent.cancel` of main gave "task sub-06c45d18 is done"; the rules give "task sub-06c45d18 has already finished" as an error"#,
    );
}

#[test]
fn texts_exhausted_budget_counts_the_wrong_steps() {
    let failures = tampered(ROKU_CALLS, |run| {
        let line = line_at(run, "main", |e| matches!(e, Event::AgentEnded { .. }));
        set_result(run, line, "Step budget exhausted after 1 steps; goal: Go");
    });
    assert_has(
        &failures,
        r#"oracle texts: main at 0.420s: main ends Fail Error with "Step budget exhausted after 1 steps; goal: Go"; the rules give Fail Error with "Step budget exhausted after 2 steps; goal: Go""#,
    );
}

#[test]
fn texts_unknown_tool_answered_in_the_other_presets_words() {
    let failures = tampered(ROKU_CALLS, |run| {
        let line = tool_end(run, "Frobnicate", 0);
        set_result(run, line, "Unknown tool name: Frobnicate.");
    });
    assert_has(
        &failures,
        "oracle texts: main at 0.420s: `Frobnicate` of main was answered \"Unknown tool name: Frobnicate.\", not the unknown-tool answer \"tool `Frobnicate` is not enabled in the current runtime inventory\" as an error",
    );
}

const ENDINGS: &str = r#"{
  "name": "endings",
  "rules": {"recovery_budget": 1, "agent_timeout_ms": 250},
  "approval": {"mode": "risk", "policy_deny": ["Write"], "answers": [{"tool": "Agent", "approve": true}]},
  "tools": [
    {"name": "Flaky", "latency_ms": 10, "risk": "safe", "results": [{"error": "I/O error"}]},
    {"name": "Write", "latency_ms": 10, "results": [{"text": "written"}]}
  ],
  "lanes": [
    {"agent": "main", "replies": [
      {"calls": [{"tool": "Flaky", "args": {}}, {"tool": "Write", "args": {}}], "latency_ms": 100},
      {"calls": [{"tool": "Agent", "args": {"task": "Wait forever"}}], "latency_ms": 100},
      {"calls": [{"tool": "fail", "args": {}, "bad_args": true}], "latency_ms": 100}
    ]},
    {"agent": "main/1", "replies": [{"hang": true}]}
  ],
  "turns": [{"user": "Go"}]
}"#;

#[test]
fn texts_default_failure_reason_left_empty() {
    let failures = tampered(ENDINGS, |run| {
        let line = line_at(run, "main", |e| matches!(e, Event::AgentEnded { .. }));
        set_result(run, line, "");
    });
    assert_has(
        &failures,
        r#"oracle texts: main at 0.560s: main ends Fail Error with ""; the rules give Fail Error with "LLM reported failure.""#,
    );
}

#[test]
fn texts_foreground_timeout_printed_in_milliseconds() {
    let failures = tampered(ENDINGS, |run| {
        let line = tool_end(run, "Agent", 0);
        set_result(run, line, "[Sub-agent error] Timed out after 250 seconds.");
    });
    assert_has(
        &failures,
        r#"oracle texts: main at 0.460s: `Agent` of main gave "[Sub-agent error] Timed out after 250 seconds."; the rules give "[Sub-agent error] Timed out after 0.25 seconds." as an error"#,
    );
}

#[test]
fn texts_policy_denial_worded_as_the_users() {
    let failures = tampered(ENDINGS, |run| {
        let line = line_at(run, "main", |e| matches!(e, Event::Denied { .. }));
        set_result(run, line, "User denied the operation.");
    });
    assert_has(
        &failures,
        "oracle texts: main at 0.110s: `Write` of main was denied with \"User denied the operation.\"; the rules give \"Tool `Write` is denied by the current security policy.\"",
    );
}

#[test]
fn texts_nudge_the_model_reads_worded_otherwise() {
    let failures = tampered(ENDINGS, |run| {
        edit_request(run, "main", 1, |messages| {
            let nudge = messages.iter_mut().find(|m| m.content.starts_with("System:")).expect("the nudge");
            *nudge = Message::user("System: step budget exhausted. Please call final_answer or fail now.");
        });
    });
    assert_has(
        &failures,
        r#"oracle texts: main at 0.110s: main's next request does not hold the nudge as the rules write it: "System: step budget exhausted (remaining: 29, recovery: 0). Please call final_answer or fail now.""#,
    );
}

#[test]
fn texts_wait_on_known_tasks_refused_as_unknown() {
    let failures = tampered(super::runs::BUB_WAIT_NAMED, |run| {
        let line = tool_end(run, "subagent.wait", 0);
        match &mut run.trace.entries[line].what {
            What::Core(Event::ToolEnded { result, is_error, .. }) => {
                *result = "unknown task id: ' sub-e220a839\n'".into();
                *is_error = true;
            }
            other => panic!("not a tool end: {other:?}"),
        }
    });
    assert_has(
        &failures,
        r#"oracle texts: main at 0.400s: `subagent.wait` of main gave the error "unknown task id: ' sub-e220a839\n'", but every id it lists names a task"#,
    );
}

/// A blank `Agent` task and, from a child at the depth limit, an `Agent` call: both refused,
/// each with its `spawn.refused`.
const ROKU_REFUSALS: &str = r#"{
  "name": "roku-refusals",
  "rules": {"preset": "roku"},
  "lanes": [
    {"agent": "main", "replies": [
      {"calls": [{"tool": "Agent", "args": {"task": "  "}}], "latency_ms": 10},
      {"calls": [{"tool": "Agent", "args": {"task": "Look"}}], "latency_ms": 10},
      {"text": "Done.", "latency_ms": 10}
    ]},
    {"agent": "main/1", "replies": [
      {"calls": [{"tool": "Agent", "args": {"task": "Deeper"}, "undeclared": true}], "latency_ms": 10},
      {"text": "Seen.", "latency_ms": 10}
    ]}
  ],
  "turns": [{"user": "Go"}]
}"#;

/// The line of the `n`-th `spawn.refused` (from 0).
fn refusal(run: &rehearsal::runner::Run, n: usize) -> usize {
    run.trace
        .entries
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(&e.what, What::Core(Event::SpawnRefused { .. })))
        .nth(n)
        .map(|(i, _)| i)
        .unwrap_or_else(|| panic!("no spawn.refused #{n} in\n{}", run.trace.text()))
}

#[test]
fn texts_refusals_reported_by_spawn_refused() {
    assert!(tampered(ROKU_REFUSALS, |_| {}).is_empty());
}

#[test]
fn texts_depth_refusal_without_its_spawn_refused() {
    let failures = tampered(ROKU_REFUSALS, |run| {
        let line = refusal(run, 1);
        run.trace.entries.remove(line);
    });
    assert_has(
        &failures,
        "oracle texts: main/1 at 0.030s: `Agent` of main/1 was refused with \"[Sub-agent error] Sub-agents cannot spawn further sub-agents.\" but no `spawn.refused` reported it",
    );
}

#[test]
fn texts_refusal_reported_with_another_reason() {
    let failures = tampered(ROKU_REFUSALS, |run| {
        let line = refusal(run, 0);
        match &mut run.trace.entries[line].what {
            What::Core(Event::SpawnRefused { reason, .. }) => *reason = "no task".into(),
            other => panic!("not a refusal: {other:?}"),
        }
    });
    assert_has(
        &failures,
        "oracle texts: main at 0.010s: `Agent` of main was reported refused (\"no task\") but answered \"[Sub-agent error] No task provided.\"",
    );
}

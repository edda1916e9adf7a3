//! Oracle `wait` (`oracle.wait.*`, docs/rules/core.md): what a `subagent.wait` covers, reads,
//! lists in which order, and when it returns.

use std::time::Duration;

use rehearsal::sut::event::{Event, Via};
use rehearsal::trace::What;

use super::runs::{BUB_WAIT_NAMED, assert_has, tool_end};
use super::tampered;

const READ_BOTH: &str = r#"[{"task_id":"sub-6e789e6a","status":"completed","result":"Looked."},{"task_id":"sub-e220a839","status":"completed","result":"First draft."}]"#;

fn set_result(run: &mut rehearsal::runner::Run, line: usize, text: &str) {
    if let What::Core(Event::ToolEnded { result, .. }) = &mut run.trace.entries[line].what {
        *result = text.to_string();
    }
}

#[test]
fn wait_of_a_real_run_passes() {
    assert!(tampered(BUB_WAIT_NAMED, |_| {}).is_empty());
}

#[test]
fn wait_results_in_spawn_order_instead_of_completion_order() {
    let spawn_order = r#"[{"task_id":"sub-e220a839","status":"completed","result":"First draft."},{"task_id":"sub-6e789e6a","status":"completed","result":"Looked."}]"#;
    let failures = tampered(BUB_WAIT_NAMED, |run| {
        let line = tool_end(run, "subagent.wait", 0);
        set_result(run, line, spawn_order);
    });
    assert_has(
        &failures,
        &format!("oracle wait: main at 0.400s: `subagent.wait` answered {spawn_order}; the rules give {READ_BOTH}"),
    );
}

#[test]
fn wait_returns_before_its_last_task_finished() {
    let failures = tampered(BUB_WAIT_NAMED, |run| {
        let line = tool_end(run, "subagent.wait", 0);
        run.trace.entries[line].at = Duration::from_millis(300);
    });
    assert_has(
        &failures,
        "oracle wait: main at 0.300s: `subagent.wait` returned at 300ms, but its last covered task finished at 400ms",
    );
}

#[test]
fn wait_leaves_a_covered_result_unread() {
    let failures = tampered(BUB_WAIT_NAMED, |run| {
        let line = run
            .trace
            .entries
            .iter()
            .rposition(|e| matches!(&e.what, What::Core(Event::Delivered { via: Via::Wait, .. })))
            .unwrap();
        run.trace.entries.remove(line);
    });
    assert_has(
        &failures,
        "oracle wait: main at 0.400s: `subagent.wait` left the result of covered task sub-e220a839 unread",
    );
}

#[test]
fn wait_peek_that_waits() {
    let failures = tampered(BUB_WAIT_NAMED, |run| {
        let line = tool_end(run, "subagent.wait", 1);
        run.trace.entries[line].at = Duration::from_millis(600);
    });
    assert_has(&failures, "oracle wait: main at 0.600s: `subagent.wait` returned at 600ms, but its deadline was 500ms");
}

#[test]
fn wait_reads_a_task_it_does_not_cover() {
    // The first wait lists both tasks and reads both; as if it had listed only the first, it
    // read the second's result too.
    let failures = tampered(BUB_WAIT_NAMED, |run| {
        let end = tool_end(run, "subagent.wait", 0);
        let start = (0..end)
            .rev()
            .find(|i| matches!(&run.trace.entries[*i].what, What::Core(Event::ToolStarted { tool, .. }) if tool == "subagent.wait"))
            .unwrap();
        if let What::Core(Event::ToolStarted { args, .. }) = &mut run.trace.entries[start].what {
            std::sync::Arc::make_mut(args)["task_ids"] = serde_json::json!(["sub-e220a839"]);
        }
    });
    assert_has(
        &failures,
        "oracle wait: main at 0.400s: `subagent.wait` read the result of sub-6e789e6a, which it does not cover",
    );
}

//! Oracle 7, delivery: each result reaches its parent once, in completion order, taken in only
//! before a request.

use serde_json::json;

use rehearsal::internals::oracles::Oracle;
use rehearsal::sut::event::{Event, TaskStatus, Via};
use rehearsal::trace::{Entry, What};

use super::evidence::{Case, assert_violation, edit, kid, ms, note, root, task_ended, tool_end, tool_start};
use super::traces::{BG_DELIVERED, BG_ENDED, BG_NEXT_REQUEST, one_background};

#[test]
fn delivery_one_notified_result_passes() {
    one_background("12 open tickets.", "12 open tickets.").assert_clean();
}

#[test]
fn delivery_by_wait_passes() {
    // The root waits instead of being notified.
    let mut c = Case::bub();
    c.turn(0);
    c.root_llm(0, &[]);
    c.subagent(100, 1, "sub-a", Some(None));
    c.run_child(100, 1);
    c.at(100, &root(), tool_start("main#1.2", "subagent.wait", json!({})));
    c.finish(1100, 1, "sub-a", "done", "done");
    c.deliver(1100, "sub-a", TaskStatus::Completed, Via::Wait);
    c.at(1100, &root(), tool_end("main#1.2", "subagent.wait", false, "done", 25));
    c.root_llm(1100, &[]);
    c.end_turn(1200);
    c.assert_clean();
}

#[test]
fn delivery_twice_by_notification_and_wait() {
    let mut c = one_background("done", "done");
    c.trace.entries.truncate(BG_NEXT_REQUEST + 1);
    c.at(1200, &root(), tool_start("main#3.1", "subagent.wait", json!({})));
    let again = c.deliver(1200, "sub-a", TaskStatus::Completed, Via::Wait);
    c.at(1200, &root(), tool_end("main#3.1", "subagent.wait", false, "done", c.root));
    c.end_turn(1300);
    let v = c.sole(Oracle::Delivery);
    assert_violation(&v, Oracle::Delivery, "main", 1200, "sub-a was delivered again, or before it ended", &[again]);
}

#[test]
fn delivery_before_the_task_ended() {
    let mut c = one_background("done", "done");
    let early = c.trace.entries.remove(BG_DELIVERED);
    c.trace.entries.insert(BG_ENDED, Entry { at: ms(1100), ..early });
    // The root's next request still shows the notification. Provenance follows the trace's
    // order: when the core delivered sub-a there was no result to notify, so the notification
    // text the request holds was never sent to the root, and fork isolation reports it too.
    let found = c.check();
    assert_eq!(found.len(), 3, "{found:#?}");
    assert_violation(
        &found[0],
        Oracle::ForkIsolation,
        "main",
        1100,
        "main's request holds a user message nobody sent to main (\"<subagent-notification task_id=\\\"sub-a\\\"",
        &[BG_NEXT_REQUEST],
    );
    let v = c.of(Oracle::Delivery);
    assert_eq!(v.len(), 2, "{v:#?}");
    assert_violation(
        &v[0],
        Oracle::Delivery,
        "main",
        1100,
        "sub-a was delivered again, or before it ended",
        &[BG_ENDED],
    );
    // ... so, once it ends, it is a finished result nobody delivered.
    assert_violation(
        &v[1],
        Oracle::Delivery,
        "main",
        1100,
        "sub-a finished before this step of the parent but was not delivered",
        &[BG_ENDED + 1, BG_NEXT_REQUEST],
    );
}

#[test]
fn delivery_finished_result_not_delivered_before_the_next_request() {
    // The core neither records the delivery nor shows the notification in the root's next
    // request (which then holds only the user's message).
    let mut c = one_background("done", "done");
    c.trace.entries.remove(BG_DELIVERED);
    let request = BG_NEXT_REQUEST - 1;
    let What::Core(Event::LlmRequest { messages, .. }) = &mut c.trace.entries[request].what else { panic!() };
    *messages -= 1;
    edit(&mut c.exchanges.last_mut().unwrap().request.messages, |m| {
        m.pop();
    });
    let v = c.sole(Oracle::Delivery);
    assert_violation(
        &v,
        Oracle::Delivery,
        "main",
        1100,
        "sub-a finished before this step of the parent but was not delivered",
        &[BG_ENDED, request],
    );
}

#[test]
fn delivery_notification_missing_from_the_next_request() {
    let mut c = one_background("done", "done");
    edit(&mut c.exchanges.last_mut().unwrap().request.messages, |m| {
        m.pop();
    });
    let v = c.sole(Oracle::Delivery);
    assert_violation(
        &v,
        Oracle::Delivery,
        "main",
        1100,
        "a notified result is missing from the parent's next request",
        &[BG_DELIVERED, BG_NEXT_REQUEST],
    );
}

#[test]
fn delivery_notification_with_another_body_is_missing() {
    let mut c = one_background("done", "done");
    edit(&mut c.exchanges.last_mut().unwrap().request.messages, |m| {
        m.last_mut().unwrap().content = note("sub-a", "completed", "other");
    });
    // The notified text is missing (delivery), and the text shown instead is a notification
    // nobody sent to the root (fork isolation): both are true of this request.
    let found = c.check();
    assert_eq!(found.len(), 2, "{found:#?}");
    assert_violation(
        &found[0],
        Oracle::ForkIsolation,
        "main",
        1100,
        "main's request holds a user message nobody sent to main (\"<subagent-notification task_id=\\\"sub-a\\\"",
        &[BG_NEXT_REQUEST],
    );
    assert_violation(
        &found[1],
        Oracle::Delivery,
        "main",
        1100,
        "a notified result is missing from the parent's next request",
        &[BG_DELIVERED, BG_NEXT_REQUEST],
    );
}

#[test]
fn delivery_with_the_wrong_status() {
    let mut c = one_background("done", "done");
    c.set(
        BG_DELIVERED,
        Event::Delivered { task_id: "sub-a".into(), status: TaskStatus::Failed, via: Via::Notification },
    );
    let v = c.sole(Oracle::Delivery);
    assert_violation(
        &v,
        Oracle::Delivery,
        "main",
        1100,
        "sub-a ended Completed but was delivered as Failed",
        &[BG_ENDED, BG_DELIVERED],
    );
}

/// Bub: `main/1` (sub-a) ends at 1.1 s and `main/2` (sub-b) at 2.1 s while the root's model
/// thinks until 3 s; both are notified before its next request, in the order `order`.
fn two_results(order: [&str; 2]) -> (Case, Vec<usize>, Vec<usize>) {
    let mut c = Case::bub();
    c.turn(0);
    c.root_llm(0, &[]);
    c.subagent(100, 1, "sub-a", Some(None));
    c.subagent(100, 2, "sub-b", Some(None));
    c.root_llm(100, &[]);
    c.run_child(100, 1);
    c.run_child(100, 2);
    let ended = vec![c.finish(1100, 1, "sub-a", "alpha", "alpha"), c.finish(2100, 2, "sub-b", "beta", "beta")];
    let mut delivered = Vec::new();
    let mut notes = Vec::new();
    for task in order {
        delivered.push(c.deliver(3000, task, TaskStatus::Completed, Via::Notification));
        notes.push(note(task, "completed", if task == "sub-a" { "alpha" } else { "beta" }));
    }
    c.root_llm(3000, &notes);
    c.end_turn(3100);
    (c, ended, delivered)
}

#[test]
fn delivery_in_completion_order_passes() {
    two_results(["sub-a", "sub-b"]).0.assert_clean();
}

#[test]
fn delivery_notifications_out_of_completion_order() {
    let (c, ended, delivered) = two_results(["sub-b", "sub-a"]);
    let v = c.sole(Oracle::Delivery);
    assert_violation(
        &v,
        Oracle::Delivery,
        "main",
        3000,
        "sub-a was notified out of completion order",
        &[ended[0], delivered[1]],
    );
}

/// Bub: `main/1` is cancelled at 0.5 s by `subagent.cancel`; `delivered` says whether the
/// core (wrongly) delivers it anyway.
pub(super) fn cancelled(delivered: bool) -> (Case, usize, usize) {
    let mut c = Case::bub();
    c.turn(0);
    c.root_llm(0, &[]);
    c.subagent(100, 1, "sub-a", Some(None));
    c.root_llm(100, &[]);
    c.run_child(100, 1);
    c.at(500, &root(), tool_start("main#2.1", "subagent.cancel", json!({"task_id": "sub-a"})));
    let ended = c.at(500, &kid(1), task_ended("sub-a", 1, TaskStatus::Cancelled, "Cancelled."));
    c.at(500, &kid(1), Event::SessionClosed { name: "temp/sub-a".into(), kept: false });
    c.at(500, &root(), tool_end("main#2.1", "subagent.cancel", false, "cancelled", c.root));
    let line = if delivered { c.deliver(500, "sub-a", TaskStatus::Cancelled, Via::Notification) } else { 0 };
    let notes = if delivered { vec![note("sub-a", "cancelled", "Cancelled.")] } else { vec![] };
    c.root_llm(500, &notes);
    c.end_turn(600);
    (c, ended, line)
}

#[test]
fn delivery_cancelled_task_not_delivered_passes() {
    cancelled(false).0.assert_clean();
}

#[test]
fn delivery_cancelled_task_delivered() {
    let (c, ended, line) = cancelled(true);
    // The root's next request shows the cancelled run's notification. A cancelled run is never
    // deliverable, so nobody legitimately sent that text to the root: fork isolation reports
    // it on the request, delivery reports the delivery itself.
    let found = c.check();
    assert_eq!(found.len(), 2, "{found:#?}");
    let request = c.request_line(&root(), 3);
    assert_violation(
        &found[0],
        Oracle::ForkIsolation,
        "main",
        500,
        "main's request holds a user message nobody sent to main (\"<subagent-notification task_id=\\\"sub-a\\\" status=\\\"cancelled\\\">",
        &[request],
    );
    assert_violation(&found[1], Oracle::Delivery, "main", 500, "cancelled task sub-a was delivered", &[ended, line]);
}

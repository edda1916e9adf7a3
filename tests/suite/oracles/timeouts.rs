//! Oracle 4, timeouts: limits fired early, late, without a limit, and in the instant a reply
//! arrives.

use serde_json::json;

use rehearsal::internals::evidence::Due;
use rehearsal::internals::oracles::Oracle;
use rehearsal::rules::Rules;
use rehearsal::sut::event::{Event, OutcomeKind, Status, TaskStatus, Via};
use rehearsal::trace::{Entry, What};

use super::evidence::{Case, assert_violation, kid, ms, note, root, task_ended, tool_end, tool_start};
use super::traces::{FG_CHILD_END, FG_SPAWN, FGT_TIMEOUT, foreground_at, foreground_timeout};

#[test]
fn timeouts_foreground_at_exactly_120_s_passes() {
    foreground_timeout(120_100, 120_000).assert_clean();
}

#[test]
fn timeouts_foreground_at_119_s() {
    let v = foreground_timeout(119_100, 119_000).sole(Oracle::Timeouts);
    assert_violation(
        &v,
        Oracle::Timeouts,
        "main",
        119_100,
        "main/1 started at 100ms with limit 120s but timed out at 119.1s (after 119s); it must end at exactly start + limit",
        &[FG_SPAWN, FGT_TIMEOUT],
    );
}

#[test]
fn timeouts_foreground_reported_after_120_s_but_fired_at_119_s() {
    let v = foreground_timeout(119_100, 120_000).sole(Oracle::Timeouts);
    assert_violation(
        &v,
        Oracle::Timeouts,
        "main",
        119_100,
        "timed out at 119.1s (after 120s)",
        &[FG_SPAWN, FGT_TIMEOUT],
    );
}

#[test]
fn timeouts_without_a_limit() {
    let mut c = foreground_timeout(120_100, 120_000);
    c.rules.agent_timeout = None;
    let v = c.sole(Oracle::Timeouts);
    assert_violation(
        &v,
        Oracle::Timeouts,
        "main",
        120_100,
        "main/1 timed out without a time limit",
        &[FG_SPAWN, FGT_TIMEOUT],
    );
}

#[test]
fn timeouts_child_ending_after_its_limit_without_a_timeout() {
    let v = foreground_at("Done late.", "Done late.", 121_000).sole(Oracle::Timeouts);
    assert_violation(
        &v,
        Oracle::Timeouts,
        "main/1",
        121_000,
        "main/1 ran 120.9s, past its limit 120s, and was not timed out",
        &[FG_SPAWN, FG_CHILD_END],
    );
}

#[test]
fn timeouts_child_finishing_just_before_its_limit_passes() {
    foreground_at("Done in time.", "Done in time.", 120_099).assert_clean();
}

/// `main/1` (spawned at 0.1 s, 120 s limit) times out at 120.1 s while the harness had
/// scheduled a reply for it, asked at `asked` ms, due at `due` ms.
fn timed_out_with_a_reply_due(asked: u64, due: u64, ends_loop: bool) -> Case {
    let mut c = foreground_timeout(120_100, 120_000);
    c.due.push(Due { agent: kid(1), asked: ms(asked), due: ms(due), ends_loop });
    c
}

/// Issue 26: a core that let the timer win the tie with the child's final reply passed every
/// oracle, since the trace of such a run holds no reply at all. The harness knows when it
/// scheduled the reply: `oracle.timeouts.finish-at-limit-wins`.
#[test]
fn timeouts_child_timed_out_in_the_instant_its_final_reply_was_delivered() {
    let v = timed_out_with_a_reply_due(100, 120_100, true).sole(Oracle::Timeouts);
    assert_violation(
        &v,
        Oracle::Timeouts,
        "main",
        120_100,
        "main/1 timed out at 120.1s, but the reply that ends it (asked at 100ms) was delivered in that very instant: a child that ends in the instant its limit runs out has finished",
        &[FG_SPAWN, FGT_TIMEOUT],
    );
}

#[test]
fn timeouts_child_timed_out_with_a_reply_that_does_not_end_it_passes() {
    // A reply with calls (or an error, or blank text) leaves the child running past the limit.
    timed_out_with_a_reply_due(100, 120_100, false).assert_clean();
}

#[test]
fn timeouts_child_timed_out_a_millisecond_before_its_final_reply_passes() {
    timed_out_with_a_reply_due(100, 120_101, true).assert_clean();
}

#[test]
fn timeouts_child_timed_out_with_a_reply_asked_in_the_deadlines_instant_passes() {
    // Asked in the instant the limit ran out, with no latency: not a reply the timer raced.
    timed_out_with_a_reply_due(120_100, 120_100, true).assert_clean();
}

#[test]
fn timeouts_child_timed_out_while_another_childs_final_reply_arrived_passes() {
    let mut c = timed_out_with_a_reply_due(100, 120_100, true);
    c.due[0].agent = kid(2);
    c.assert_clean();
}

/// Bub, cap 1: `main/1` runs 3 s; `main/2` (5 s limit) is queued at 0.1 s and starts at 3.1 s
/// when the slot frees; it hangs and the core reports its timeout at `timeout_at` ms.
fn queued_timeout(timeout_at: u64) -> (Case, usize, usize) {
    let mut c = Case::new(Rules { child_step_cap: 3, max_concurrency: 1, ..Rules::bub() });
    c.turn(0);
    c.root_llm(0, &[]);
    c.subagent(100, 1, "sub-a", Some(None));
    c.subagent(100, 2, "sub-b", None);
    c.root_llm(100, &[]);
    c.run_child(100, 1);
    c.awaiting(200, 2);
    c.finish(3100, 1, "sub-a", "first", "first");
    let started = c.task_started(3100, 2, "sub-b", Some(5));
    c.run_child(3100, 2);
    c.deliver(3100, "sub-a", TaskStatus::Completed, Via::Notification);
    c.root_llm(3100, &[note("sub-a", "completed", "first")]);
    c.awaiting(3200, 1);
    let timed_out = c.at(timeout_at, &root(), Event::TimedOut { child: kid(2), after: ms(5000) });
    c.at(timeout_at, &kid(2), task_ended("sub-b", 2, TaskStatus::TimedOut, "Timed out after 5 seconds."));
    c.at(timeout_at, &kid(2), Event::SessionClosed { name: "temp/sub-b".into(), kept: false });
    c.deliver(timeout_at, "sub-b", TaskStatus::TimedOut, Via::Notification);
    c.root_llm(timeout_at, &[note("sub-b", "timed_out", "Timed out after 5 seconds.")]);
    c.end_turn(timeout_at + 100);
    (c, started, timed_out)
}

#[test]
fn timeouts_background_measured_from_start_passes() {
    queued_timeout(8100).0.assert_clean();
}

#[test]
fn timeouts_background_measured_from_queueing() {
    let (c, started, timed_out) = queued_timeout(5100);
    let v = c.sole(Oracle::Timeouts);
    assert_violation(
        &v,
        Oracle::Timeouts,
        "main",
        5100,
        "main/2 started at 3.1s with limit 5s but timed out at 5.1s (after 5s)",
        &[started, timed_out],
    );
}

/// Formerly a gap: a background child whose time limit passed without a timeout, and which was
/// then cancelled when the session quit, escaped every oracle (the timeouts oracle forgot a task
/// as soon as it was cancelled, whenever that happened). A cancellation after the limit is now
/// reported on the cancellation's line.
#[test]
fn timeouts_background_child_cancelled_long_after_its_limit() {
    // main/1 starts at 0.1 s with a 2 s limit and hangs; no timeout fires; the root works for
    // 10 s, fails, and quitting cancels main/1 at 10.2 s, 8 s after it should have timed out.
    let mut c = Case::bub();
    c.turn(0);
    c.root_llm(0, &[]);
    c.subagent(100, 1, "sub-a", Some(Some(2)));
    c.root_llm(100, &[]);
    c.run_child(100, 1);
    let budget = c.root;
    c.at(
        10_200,
        &root(),
        Event::AgentEnded {
            kind: OutcomeKind::Fail,
            status: Status::Error,
            message: "Gave up.".into(),
            steps: 0,
            budget,
        },
    );
    c.at(10_200, &root(), Event::TurnEnded { turn: 1, kind: OutcomeKind::Fail, status: Status::Error, budget });
    let cancelled = c.at(10_200, &kid(1), task_ended("sub-a", 1, TaskStatus::Cancelled, "Cancelled."));
    c.at(10_200, &kid(1), Event::SessionClosed { name: "temp/sub-a".into(), kept: false });
    let found = c.check();
    assert_eq!(found.len(), 1, "a child that outlived its 2 s limit by 8 s escaped every oracle: {found:#?}");
    let started = 6;
    assert_violation(
        &found[0],
        Oracle::Timeouts,
        "main/1",
        10_200,
        "main/1 ran 10.1s, past its limit 2s, and was not timed out",
        &[started, cancelled],
    );
}

#[test]
fn timeouts_background_child_cancelled_within_its_limit_passes() {
    // The same child cancelled by `subagent.cancel` at 1.5 s, before its 2 s limit: fine.
    let mut c = Case::bub();
    c.turn(0);
    c.root_llm(0, &[]);
    c.subagent(100, 1, "sub-a", Some(Some(2)));
    c.root_llm(100, &[]);
    c.run_child(100, 1);
    c.at(1500, &root(), tool_start("main#2.1", "subagent.cancel", json!({"task_id": "sub-a"})));
    c.at(1500, &kid(1), task_ended("sub-a", 1, TaskStatus::Cancelled, "Cancelled."));
    c.at(1500, &kid(1), Event::SessionClosed { name: "temp/sub-a".into(), kept: false });
    c.at(1500, &root(), tool_end("main#2.1", "subagent.cancel", false, "cancelled", c.root));
    c.root_llm(1500, &[]);
    c.end_turn(1600);
    c.assert_clean();
}

/// Formerly a gap: a child still running at the end of the trace, long past its limit, was not
/// reported by the timeouts oracle (only termination noticed the run hit its horizon). It is
/// now reported on the trace's last line. Like every violation, it is attributed to the agent
/// and time of the line it is reported on: here the harness's `stopped` line, which the runner
/// always records on the root, so the report reads "main at 3600.000s: main/1 ran …".
#[test]
fn timeouts_child_never_ended_past_its_limit() {
    let mut c = Case::roku();
    c.turn(0);
    c.root_llm(0, &[]);
    c.root += 1;
    c.agent_call(100, 1);
    let stop = c.trace.entries.len();
    c.trace.entries.push(Entry {
        at: ms(3_600_000),
        agent: root(),
        what: What::Stopped("the run reached its horizon of 3600000 ms".into()),
    });
    c.session_ended = false;
    c.limit_hit = Some("the run reached its horizon of 3600000 ms".into());
    let termination = c.of(Oracle::Termination);
    assert_eq!(termination.len(), 1, "{termination:#?}");
    let found = c.of(Oracle::Timeouts);
    assert_eq!(found.len(), 1, "main/1 ran an hour past its 120 s limit unreported: {found:#?}");
    assert_violation(
        &found[0],
        Oracle::Timeouts,
        "main",
        3_600_000,
        "main/1 ran 3599.9s, past its limit 120s, and was not timed out",
        &[FG_SPAWN, stop],
    );
}

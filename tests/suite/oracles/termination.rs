//! Oracle 8, termination: runs that hit a limit or leave tasks alive, and what quitting cancels.

use rehearsal::internals::oracles::Oracle;
use rehearsal::rules::Rules;
use rehearsal::sut::event::{TaskStatus, Via};

use super::evidence::{Case, assert_violation, note};
use super::traces::one_background;

#[test]
fn termination_clean_run_passes() {
    let mut c = one_background("done", "done");
    c.assert_clean();
    // A run stopped before its session ended is not asked about tasks.
    c.session_ended = false;
    c.alive = 3;
    c.assert_clean();
}

#[test]
fn termination_limit_hit() {
    let mut c = one_background("done", "done");
    c.limit_hit = Some("the run exceeded the event limit of 10 events".into());
    let v = c.sole(Oracle::Termination);
    assert_violation(
        &v,
        Oracle::Termination,
        "main",
        1200,
        "the run did not end by itself: the run exceeded the event limit of 10 events",
        &[],
    );
}

#[test]
fn termination_alive_tasks_after_the_session_ended() {
    let mut c = one_background("done", "done");
    c.alive = 2;
    let v = c.sole(Oracle::Termination);
    assert_violation(
        &v,
        Oracle::Termination,
        "main",
        1200,
        "2 tasks of the run are still alive after the session ended",
        &[],
    );
}

#[test]
fn termination_queued_task_never_ended() {
    // Cap 1: sub-1 runs and ends; sub-2, queued behind it, never starts nor ends.
    let mut c = Case::new(Rules { child_step_cap: 3, max_concurrency: 1, ..Rules::bub() });
    c.turn(0);
    c.root_llm(0, &[]);
    c.subagent(100, 1, "sub-1", Some(None));
    let queued = c.subagent(100, 2, "sub-2", None);
    c.root_llm(100, &[]);
    c.run_child(100, 1);
    c.finish(1100, 1, "sub-1", "ok", "ok");
    c.deliver(1100, "sub-1", TaskStatus::Completed, Via::Notification);
    c.root_llm(1100, &[note("sub-1", "completed", "ok")]);
    c.end_turn(1200);
    let found = c.of(Oracle::Termination);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_violation(
        &found[0],
        Oracle::Termination,
        "main/2",
        100,
        "task sub-2 never ended, although the session did",
        &[queued],
    );
    // (The concurrency oracle sees the free slot too.)
    assert!(!c.of(Oracle::Concurrency).is_empty());
}

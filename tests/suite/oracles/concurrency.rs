//! Oracle 5, concurrency: the cap, FIFO starts and free slots while a child is queued.

use rehearsal::internals::oracles::Oracle;
use rehearsal::rules::Rules;
use rehearsal::sut::event::{Event, TaskStatus, Via};
use rehearsal::trace::What;

use super::evidence::{Case, assert_violation, note};

/// Bub with `cap`: three children spawned at 0.1 s; `starts` says which start at once (the
/// rest are queued). Returns the case and the queued lines.
fn three_children(cap: usize, starts: [bool; 3]) -> (Case, Vec<usize>) {
    let mut c = Case::new(Rules { child_step_cap: 3, max_concurrency: cap, ..Rules::bub() });
    c.turn(0);
    c.root_llm(0, &[]);
    let mut queued = Vec::new();
    for (i, start) in starts.into_iter().enumerate() {
        let n = i as u32 + 1;
        queued.push(c.subagent(100, n, &format!("sub-{n}"), start.then_some(None)));
    }
    (c, queued)
}

/// Lets every running child finish at 1.1 s + n s, starting queued ones FIFO, and ends the turn.
fn finish_all(c: &mut Case, order: &[u32]) {
    c.root_llm(100, &[]);
    let mut t = 1100;
    for &n in order {
        let task = format!("sub-{n}");
        let started = c
            .trace
            .entries
            .iter()
            .any(|e| matches!(&e.what, What::Core(Event::TaskStarted { task_id, .. }) if *task_id == task));
        if !started {
            c.task_started(t - 1000, n, &task, None);
        }
        c.run_child(t - 1000, n);
        c.finish(t, n, &task, "ok", "ok");
        c.deliver(t, &task, TaskStatus::Completed, Via::Notification);
        c.root_llm(t, &[note(&task, "completed", "ok")]);
        t += 1000;
    }
    c.end_turn(t);
}

#[test]
fn concurrency_within_the_cap_passes() {
    let (mut c, _) = three_children(3, [true; 3]);
    c.root_llm(100, &[]);
    for n in 1..=3 {
        c.run_child(100, n);
    }
    let mut notes = Vec::new();
    for n in 1..=3 {
        let task = format!("sub-{n}");
        c.finish(1100, n, &task, "ok", "ok");
        notes.push(note(&task, "completed", "ok"));
    }
    for n in 1..=3 {
        c.deliver(1100, &format!("sub-{n}"), TaskStatus::Completed, Via::Notification);
    }
    c.root_llm(1100, &notes);
    c.end_turn(1200);
    c.assert_clean();
}

#[test]
fn concurrency_cap_exceeded() {
    let (c, _) = three_children(2, [true; 3]);
    let found = c.of(Oracle::Concurrency);
    assert_eq!(found.len(), 1, "{found:#?}");
    // The third task.started is the line after the third task.queued.
    let third_start = c.trace.entries.len() - 2;
    assert_violation(
        &found[0],
        Oracle::Concurrency,
        "main/3",
        100,
        "3 background children running at once, above the cap 2",
        &[third_start],
    );
}

#[test]
fn concurrency_fifo_queue_passes() {
    // Cap 1: main/1 runs, main/2 and main/3 wait and start in that order.
    let (mut c, _) = three_children(1, [true, false, false]);
    finish_all(&mut c, &[1, 2, 3]);
    c.assert_clean();
}

#[test]
fn concurrency_fifo_broken() {
    // Cap 1: when main/1 finishes, main/3 (queued after main/2) starts first.
    let (mut c, queued) = three_children(1, [true, false, false]);
    finish_all(&mut c, &[1, 3, 2]);
    let found = c.only(Oracle::Concurrency);
    assert_eq!(found.len(), 1, "{found:#?}");
    let line = c
        .trace
        .entries
        .iter()
        .position(|e| matches!(&e.what, What::Core(Event::TaskStarted { task_id, .. }) if task_id == "sub-3"))
        .unwrap();
    assert_violation(
        &found[0],
        Oracle::Concurrency,
        "main/3",
        1100,
        "sub-3 started while sub-2, queued before it, was still waiting (FIFO)",
        &[queued[1], line],
    );
}

#[test]
fn concurrency_second_queued_starts_first_at_the_same_instant() {
    // Cap 4: both are queued at 0.1 s, then sub-2 starts before sub-1.
    let mut c = Case::bub();
    c.turn(0);
    c.root_llm(0, &[]);
    let first = c.subagent(100, 1, "sub-1", None);
    c.subagent(100, 2, "sub-2", None);
    let wrong = c.task_started(100, 2, "sub-2", None);
    c.task_started(100, 1, "sub-1", None);
    let v = c.of(Oracle::Concurrency);
    assert_eq!(v.len(), 1, "{v:#?}");
    assert_violation(
        &v[0],
        Oracle::Concurrency,
        "main/2",
        100,
        "sub-2 started while sub-1, queued before it",
        &[first, wrong],
    );
}

#[test]
fn concurrency_slot_left_free_while_a_task_is_queued() {
    // Cap 2: main/1 runs, main/2 is queued although a slot is free, and starts only at 1.1 s.
    let mut c = Case::new(Rules { child_step_cap: 3, max_concurrency: 2, ..Rules::bub() });
    c.turn(0);
    c.root_llm(0, &[]);
    c.subagent(100, 1, "sub-1", Some(None));
    let queued = c.subagent(100, 2, "sub-2", None);
    c.root_llm(100, &[]);
    c.run_child(100, 1);
    let end_of_100 = c.trace.entries.len() - 1;
    let end_of_200 = c.awaiting(200, 2);
    c.task_started(1100, 2, "sub-2", None);
    let found = c.of(Oracle::Concurrency);
    // Every instant it waited through is reported: 0.1 s (last line: main/1's request), 0.2 s.
    assert_eq!(found.len(), 2, "{found:#?}");
    assert_violation(
        &found[0],
        Oracle::Concurrency,
        "main/1",
        100,
        "sub-2 stays queued while only 1 of 2 slots are taken",
        &[queued, end_of_100],
    );
    assert_violation(
        &found[1],
        Oracle::Concurrency,
        "main",
        200,
        "sub-2 stays queued while only 1 of 2 slots are taken",
        &[queued, end_of_200],
    );
}

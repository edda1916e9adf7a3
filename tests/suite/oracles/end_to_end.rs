//! End to end: real scenario runs, tampered with, then judged; `runner::judge` must fail them
//! naming the oracle. Also the helpers the other `oracles_*` test modules use to do the same.

use std::path::Path;
use std::time::Duration;

use rehearsal::internals::oracles::Oracle;
use rehearsal::sut::AgentId;
use rehearsal::sut::event::{Event, TaskStatus};
use rehearsal::sut::llm::Message;
use rehearsal::trace::What;
use rehearsal::{runner, scenario};

use super::runs::{self as oracles_runs, assert_has};

use super::evidence::{edit, kid, ms};

pub(crate) fn parse(json: &str) -> scenario::Scenario {
    scenario::parse(Path::new("inline.json"), json).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs the scenario, checks the untouched run passes, then tampers with it and returns what
/// `judge` says.
pub(crate) fn tampered(json: &str, tamper: impl FnOnce(&mut runner::Run)) -> Vec<String> {
    let scenario = parse(json);
    let profiles = rehearsal::load::resolve_profiles(&scenario, Path::new(".")).unwrap_or_else(|e| panic!("{e}"));
    let verdict = runner::judge(
        &scenario,
        runner::Runner::new().run(
            &scenario,
            &profiles,
            rehearsal::internals::harness::schedule::Schedule::default_order(),
        ),
    );
    let what: Vec<&str> = verdict.failures().iter().map(|f| f.what.as_str()).collect();
    assert!(verdict.passed(), "the untouched run fails: {what:#?}\n{}", verdict.run().unwrap().trace.text());
    let mut run = verdict.into_run().unwrap();
    tamper(&mut run);
    runner::judge(&scenario, run).failures().iter().map(|f| f.what.clone()).collect()
}

pub(crate) fn line_of(run: &runner::Run, found: impl Fn(&Event) -> bool) -> usize {
    run.trace
        .entries
        .iter()
        .position(|e| matches!(&e.what, What::Core(event) if found(event)))
        .unwrap_or_else(|| panic!("no such entry in\n{}", run.trace.text()))
}

const ROKU_AGENT: &str = r#"{
  "name": "e2e-roku-agent",
  "lanes": [
    {"agent": "main", "replies": [
      {"calls": [{"tool": "Agent", "args": {"task": "Summarise the logs"}}], "latency_ms": 100},
      {"text": "The child says: all clear.", "latency_ms": 100}
    ]},
    {"agent": "main/1", "replies": [{"text": "All clear.", "latency_ms": 200}]}
  ],
  "turns": [{"user": "Check the logs", "expect": {"outcome": "final_answer", "budget_left": 18}}]
}"#;

#[test]
fn e2e_refund_in_a_real_roku_run_fails_the_budget_oracle() {
    let failures = tampered(ROKU_AGENT, |run| {
        let line = line_of(run, |e| matches!(e, Event::ToolEnded { tool, .. } if tool == "Agent"));
        if let What::Core(Event::ToolEnded { budget, .. }) = &mut run.trace.entries[line].what {
            assert_eq!(*budget, 19);
            *budget = 20;
        }
    });
    // The costs oracle sees it too: the call left more than its spawn did.
    assert_eq!(
        failures,
        [
            "oracle budget: main at 0.300s: main's remaining budget rose from 19 to 20 (budgets are never refunded)",
            "oracle costs: main at 0.300s: `Agent` of main left 20 steps; from 30 a spawning call leaves what its spawn left, leaving 19",
            "oracle costs: main at 0.300s: main's step reports 19 steps, but its calls left 20",
        ]
    );
}

#[test]
fn e2e_untruncated_result_in_a_real_roku_run_fails_the_truncation_oracle() {
    // Judged under a limit of 5, the run is what a core ignoring the limit records: the
    // 10-char answer handed over whole, and `child.result` reporting no truncation. Both are
    // wrong; and the limit is not the one the scenario's rules give, which the context oracle
    // says.
    let failures = tampered(ROKU_AGENT, |run| {
        run.rules.result_limit_chars = Some(5);
    });
    assert_eq!(
        failures,
        [
            "oracle truncation: main at 0.300s: main/1's result reports truncated_to None, expected Some(5)",
            "oracle truncation: main at 0.300s: the parent received 10 chars (10 bytes) where the limit Some(5) gives 50 chars (50 bytes); they first differ at char 5",
            "oracle context: main at 0.400s: rule `result_limit_chars`: the core was given Some(5); the preset gives Some(4000) (roku preset)",
        ]
    );
}

const ROKU_HANG: &str = r#"{
  "name": "e2e-roku-timeout",
  "lanes": [
    {"agent": "main", "replies": [
      {"calls": [{"tool": "Agent", "args": {"task": "Wait forever"}}], "latency_ms": 100},
      {"text": "Moving on.", "latency_ms": 100}
    ]},
    {"agent": "main/1", "replies": [{"hang": true}]}
  ],
  "turns": [{"user": "Start the wait", "expect": {"outcome": "final_answer"}}]
}"#;

#[test]
fn e2e_early_timeout_in_a_real_roku_run_fails_the_timeouts_oracle() {
    let failures = tampered(ROKU_HANG, |run| {
        let line = line_of(run, |e| matches!(e, Event::TimedOut { .. }));
        assert_eq!(run.trace.entries[line].at, ms(120_100));
        run.trace.entries[line].at = ms(119_100);
    });
    assert_eq!(failures.len(), 1, "{failures:#?}");
    assert!(
        failures[0].starts_with(
            "oracle timeouts: main at 119.100s: main/1 started at 100ms with limit 120s but timed out at 119.1s"
        ),
        "{failures:#?}"
    );
}

const BUB_NAMED: &str = r#"{
  "name": "e2e-bub-named",
  "rules": {"preset": "bub", "child_step_cap": 3},
  "lanes": [
    {"agent": "main", "replies": [
      {"calls": [{"tool": "subagent", "args": {"prompt": "Research pricing", "session": "research"}}], "latency_ms": 100},
      {"text": "Waiting.", "latency_ms": 100},
      {"text": "Research is in.", "latency_ms": 100}
    ]},
    {"agent": "main/1", "replies": [{"text": "Competitors charge more.", "latency_ms": 1000}]}
  ],
  "turns": [{"user": "Compare pricing", "expect": {"outcome": "final_answer", "message": "Research is in."}}]
}"#;

#[test]
fn e2e_dropped_delivery_in_a_real_bub_run_fails_the_delivery_oracle() {
    // A core that drops the delivery neither records it nor shows the notification.
    let failures = tampered(BUB_NAMED, |run| {
        let line = line_of(run, |e| matches!(e, Event::Delivered { .. }));
        run.trace.entries.remove(line);
        let notified = |m: &Message| m.content.starts_with("<subagent-notification");
        let next = run.exchanges.iter_mut().find(|x| x.request.messages.iter().any(notified)).unwrap();
        edit(&mut next.request.messages, |m| m.retain(|m| !notified(m)));
    });
    assert_eq!(failures.len(), 2, "{failures:#?}");
    assert!(failures[0].starts_with("oracle delivery: main at 1.100s: sub-"), "{failures:#?}");
    assert!(failures[0].ends_with("finished before this step of the parent but was not delivered"), "{failures:#?}");
    // The unread result should also have held the root's last answer.
    assert!(failures[1].starts_with("oracle precedence: main at 1.200s: main answered with a step left while 1"));
}

#[test]
fn e2e_leftover_and_lost_sessions_in_a_real_bub_run_fail_the_fork_isolation_oracle() {
    let failures = tampered(BUB_NAMED, |run| {
        assert_eq!(run.live_sessions, ["research"]);
        run.live_sessions = vec!["temp/sub-ghost".into()];
    });
    assert_eq!(
        failures,
        [
            "oracle fork-isolation: main at 1.200s: session temp/sub-ghost outlived its task",
            "oracle fork-isolation: main at 1.200s: named session research was not kept",
        ]
    );
}

#[test]
fn e2e_leaked_task_in_a_real_bub_run_fails_the_termination_oracle() {
    let failures = tampered(BUB_NAMED, |run| run.alive_tasks = 1);
    assert_eq!(
        failures,
        ["oracle termination: main at 1.200s: 1 tasks of the run are still alive after the session ended"]
    );
}

/// Cap 1: `alpha` runs (and hangs), `beta` waits in the queue, and the root gives up, so
/// quitting finds one task of each kind (semantic mutant 16's probe).
const BUB_QUIT: &str = r#"{
  "name": "quit-order",
  "rules": {"preset": "bub", "max_concurrency": 1},
  "lanes": [
    {"agent": "main", "replies": [
      {"calls": [{"tool": "subagent", "args": {"prompt": "alpha"}}, {"tool": "subagent", "args": {"prompt": "beta"}}], "latency_ms": 10},
      {"calls": [{"tool": "fail", "args": {"reason": "giving up"}}], "latency_ms": 10}
    ]},
    {"task_contains": "alpha", "replies": [{"hang": true}]}
  ],
  "turns": [{"user": "go"}]
}"#;

/// The lines of the tasks quitting cancelled: (queued one's, running one's).
fn quit_cancellations(run: &runner::Run) -> (usize, usize) {
    let ended = |task: &str| {
        line_of(
            run,
            |e| matches!(e, Event::TaskEnded { task_id, status: TaskStatus::Cancelled, .. } if task_id == task),
        )
    };
    (ended("sub-6e789e6a"), ended("sub-e220a839"))
}

#[test]
fn termination_quit_cancelling_the_running_task_first() {
    let failures = tampered(BUB_QUIT, |run| {
        let (queued, running) = quit_cancellations(run);
        assert!(queued < running, "{}", run.trace.text());
        run.trace.entries.swap(queued, running);
    });
    assert_eq!(
        oracles_runs::of(&failures, "termination"),
        [
            "oracle termination: main/1 at 0.020s: quitting cancelled the running task sub-e220a839 while task sub-6e789e6a was still queued; it cancels the queued tasks first"
        ]
    );
}

#[test]
fn termination_quit_starting_a_queued_task_only_to_cancel_it() {
    let failures = tampered(BUB_QUIT, |run| {
        let (queued, _) = quit_cancellations(run);
        let mut started = run.trace.entries[queued].clone();
        started.what = What::Core(Event::TaskStarted {
            task_id: "sub-6e789e6a".into(),
            child: AgentId::root().child(2),
            timeout: None,
        });
        run.trace.entries.insert(queued, started);
    });
    assert_has(
        &failures,
        "oracle termination: main/2 at 0.020s: task sub-6e789e6a started after the session's last turn ended, only to be cancelled by quitting; quitting cancels the queued tasks first",
    );
}

#[test]
fn termination_task_cancelled_before_the_last_turn_ended_without_a_cancel_call() {
    // The turn's end moved after the cancellations: they now fall inside the turn, where no
    // `subagent.cancel` asked for them (as if a failed turn had cancelled its tasks).
    let failures = tampered(BUB_QUIT, |run| {
        let end = line_of(run, |e| matches!(e, Event::TurnEnded { .. }));
        let entry = run.trace.entries.remove(end);
        run.trace.entries.push(entry);
    });
    assert_has(
        &failures,
        "oracle termination: main/2 at 0.020s: task sub-6e789e6a was cancelled although no `subagent.cancel` named it and the session's last turn had not ended; only a cancel call or quitting cancels a task",
    );
}

#[test]
fn termination_running_task_left_to_finish_after_the_session_ended() {
    // Quitting let the running task go on: it ends `completed`, half a second after the last
    // turn ended, instead of `cancelled` in that instant.
    let failures = tampered(BUB_QUIT, |run| {
        let (_, running) = quit_cancellations(run);
        let entry = &mut run.trace.entries[running];
        entry.at += Duration::from_millis(500);
        if let What::Core(Event::TaskEnded { status, body, .. }) = &mut entry.what {
            *status = TaskStatus::Completed;
            *body = "done at last".into();
        }
    });
    assert_has(
        &failures,
        "oracle termination: main/1 at 0.520s: task sub-e220a839 ended completed at 0.520s, after the session's last turn ended at 0.020s; quitting cancels every task still queued or running then",
    );
}

/// Budget 3: the spawn and `Read` leave no step while `alpha`'s result arrives, so the
/// result waits for turn 2 (semantic mutant 32's probe).
const BUB_INTAKE: &str = r#"{
  "name": "budget-before-intake",
  "rules": {"preset": "bub", "root_step_budget": 3},
  "tools": [{"name": "Read", "latency_ms": 50}],
  "lanes": [
    {"agent": "main", "replies": [
      {"calls": [{"tool": "subagent", "args": {"prompt": "alpha"}}, {"tool": "Read", "args": {}}], "latency_ms": 10},
      {"text": "done", "latency_ms": 10}
    ]},
    {"task_contains": "alpha", "replies": [{"text": "alpha done", "latency_ms": 10}]}
  ],
  "turns": [{"user": "go"}, {"user": "again"}]
}"#;

#[test]
fn delivery_notification_taken_in_by_a_loop_out_of_steps() {
    let failures = tampered(BUB_INTAKE, |run| {
        // The delivery moves from turn 2's first request to just before turn 1's end.
        let delivered = line_of(run, |e| matches!(e, Event::Delivered { .. }));
        let ended = line_of(run, |e| matches!(e, Event::AgentEnded { .. }));
        assert!(ended < delivered, "{}", run.trace.text());
        let mut entry = run.trace.entries.remove(delivered);
        entry.at = run.trace.entries[ended].at;
        run.trace.entries.insert(ended, entry);
    });
    assert_has(
        &failures,
        "oracle delivery: main at 0.060s: main took in 1 notification(s) and then ended its loop (\"Step budget exhausted after 1 steps; goal: go\") without asking the model: results are taken in only before a request, and a loop with no step left leaves them for the next turn",
    );
}

#[test]
fn delivery_notification_before_the_turns_user_message() {
    let failures = tampered(BUB_INTAKE, |run| {
        // Turn 2's first request holds "again" and then alpha's result; swap them.
        oracles_runs::edit_request(run, "main", 1, |messages| {
            let user = messages.iter().position(|m| m.content == "again").unwrap();
            let notified = messages.iter().position(|m| m.content.starts_with("<subagent-notification")).unwrap();
            assert!(user < notified);
            messages.swap(user, notified);
        });
    });
    assert_has(
        &failures,
        "oracle delivery: main at 0.060s: a result notified at the start of a turn comes before the turn's user message in the first request",
    );
}

#[test]
fn every_oracle_is_named_as_reports_print_it() {
    let names: Vec<&str> = Oracle::ALL.iter().map(|o| o.name()).collect();
    assert_eq!(
        names,
        [
            "depth",
            "budget",
            "truncation",
            "timeouts",
            "concurrency",
            "fork-isolation",
            "delivery",
            "termination",
            "determinism",
            "costs",
            "texts",
            "precedence",
            "wait",
            "context",
            "routing",
            "sessions",
        ]
    );
}

#[test]
fn depth_child_numbered_out_of_spawn_order() {
    // As if a refused call before it had taken number 1.
    let failures = tampered(ROKU_AGENT, |run| {
        let line = line_of(run, |e| matches!(e, Event::Spawned { .. }));
        if let What::Core(Event::Spawned { child, .. }) = &mut run.trace.entries[line].what {
            *child = AgentId::root().child(2);
        }
    });
    assert_has(
        &failures,
        "oracle depth: main at 0.100s: main's child number 1 is called main/2; children are numbered in spawn order, so it is main/1",
    );
}

/// Renames every trace mention of `from` (its own lines and the child fields of its parent's
/// and its task's events) to `to`, as a core that gave two children one alias would record.
fn rename_agent(run: &mut runner::Run, from: &AgentId, to: &AgentId) {
    for entry in &mut run.trace.entries {
        if entry.agent == *from {
            entry.agent = to.clone();
        }
        if let What::Core(
            Event::Spawned { child, .. }
            | Event::ChildResult { child, .. }
            | Event::TimedOut { child, .. }
            | Event::TaskQueued { child, .. }
            | Event::TaskStarted { child, .. }
            | Event::TaskEnded { child, .. },
        ) = &mut entry.what
            && *child == *from
        {
            *child = to.clone();
        }
    }
}

#[test]
fn depth_child_count_restarting_every_turn() {
    // Semantic mutant 68 (child-count-not-kept-across-turns): the second turn's child is
    // main/1 again. Before issue 26 the oracle took any alias seen before for a continuation,
    // so only the scenario's expectations caught it.
    let scenario = include_str!("../../../scenarios/bub/child-aliases-count-on-across-turns.json");
    let failures = tampered(scenario, |run| rename_agent(run, &kid(2), &kid(1)));
    assert_has(
        &failures,
        "oracle depth: main at 0.600s: main spawned main/1 again by `subagent`, which is not a continuation (a `subagent.send` running a finished background child again): a new child takes the next number, main/2",
    );
}

#[test]
fn depth_continuation_of_a_run_that_has_not_ended() {
    // A `subagent.send` continuation is legal only once the child's earlier run has ended.
    let scenario = include_str!("../../../scenarios/bub/named-session-kept-continued-and-shared.json");
    let failures = tampered(scenario, |run| {
        let line = line_of(run, |e| matches!(e, Event::TaskEnded { .. }));
        run.trace.entries.remove(line);
    });
    assert_has(
        &failures,
        "oracle depth: main at 0.700s: main spawned main/1 again by `subagent.send`, which is not a continuation (a `subagent.send` running a finished background child again): a new child takes the next number, main/2",
    );
}

#[test]
fn fork_isolation_history_of_the_earlier_turn_dropped() {
    let failures = tampered(BUB_INTAKE, |run| {
        // Turn 2's first request starts afresh, without turn 1's conversation.
        oracles_runs::edit_request(run, "main", 1, |messages| {
            let again = messages.iter().position(|m| m.content == "again").unwrap();
            messages.drain(..again);
        });
    });
    assert_has(
        &failures,
        "oracle fork-isolation: main at 0.060s: main's request does not begin with its previous request's 1 message(s): its history lost or changed some",
    );
}

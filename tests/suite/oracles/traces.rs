//! The standard traces several oracles' tests start from (a foreground child, one timing out,
//! one background child), with the trace lines they name.
//!
//! Each test edits its copy; nothing here asserts.

use rehearsal::sut::event::{Event, TaskStatus, Via};

use super::evidence::{Case, agent_end, child_result, kid, ms, note, root, step, tool_end};

// Lines of `foreground`.
pub(super) const FG_SPAWN: usize = 3;
pub(super) const FG_CHILD_START: usize = 4;
pub(super) const FG_CHILD_LLM: usize = 5;
pub(super) const FG_CHILD_END: usize = 6;
pub(super) const FG_RESULT: usize = 7;
pub(super) const FG_TOOL_END: usize = 8;

/// Roku: the root calls `Agent` at 0.1 s; `main/1` answers `message` at `end` ms and the root
/// receives `handed`.
///
/// ```text
///  0   0.000s main    turn.start    budget=30
///  1   0.000s main    llm.request   #1 budget=30
///  2   0.100s main    tool.start    Agent
///  3   0.100s main    spawn         main/1 foreground cost=1 grant=10 budget=30→19
///  4   0.100s main/1  agent.start   budget=10
///  5   0.100s main/1  llm.request   #1 budget=10
///  6   end    main/1  agent.end     budget=9 <message>
///  7   end    main    child.result  main/1 chars=<message chars>
///  8   end    main    tool.end      Agent ok budget=19 <handed>
///  9   end    main    step          budget=19
/// 10   end    main    llm.request   #2 budget=19
/// 11   +100   main    agent.end     budget=18
/// 12   +100   main    turn.end      budget=18
/// ```
pub(super) fn foreground_at(message: &str, handed: &str, end: u64) -> Case {
    let mut c = Case::roku();
    c.turn(0);
    c.root_llm(0, &[]);
    c.root += 1; // a step with calls costs only the spawn
    assert_eq!(c.agent_call(100, 1), FG_SPAWN);
    c.at(end, &kid(1), agent_end(message, 9));
    let limit = c.rules.result_limit_chars;
    c.at(end, &root(), child_result(&kid(1), message, limit));
    c.at(end, &root(), tool_end("main#1.1", "Agent", false, handed, 19));
    c.at(end, &root(), step(19));
    c.root_llm(end, &[]);
    c.end_turn(end + 100);
    c
}

pub(super) fn foreground(message: &str, handed: &str) -> Case {
    foreground_at(message, handed, 300)
}

// Lines of `foreground_timeout`.
pub(super) const FGT_TIMEOUT: usize = 6;

/// Roku: `main/1` (spawned at 0.1 s) hangs and the root reports its timeout at `t` ms, with
/// the `after` (in ms) the core claims.
///
/// ```text
///  0..5  as in `foreground`
///  6   t      main    timeout       main/1 after=<after>
///  7   t      main    tool.end      Agent error budget=19 "[Sub-agent error] Timed out after 120 seconds."
///  8   t      main    step          budget=19
///  9   t      main    llm.request   #2 budget=19
/// 10   +100   main    agent.end / turn.end
/// ```
pub(super) fn foreground_timeout(t: u64, after: u64) -> Case {
    let mut c = Case::roku();
    c.turn(0);
    c.root_llm(0, &[]);
    c.root += 1;
    c.agent_call(100, 1);
    assert_eq!(c.at(t, &root(), Event::TimedOut { child: kid(1), after: ms(after) }), FGT_TIMEOUT);
    c.at(t, &root(), tool_end("main#1.1", "Agent", true, "[Sub-agent error] Timed out after 120 seconds.", 19));
    c.at(t, &root(), step(19));
    c.root_llm(t, &[]);
    c.end_turn(t + 100);
    c
}

// Lines of `one_background`.
pub(super) const BG_ENDED: usize = 13;
pub(super) const BG_DELIVERED: usize = 15;
pub(super) const BG_NEXT_REQUEST: usize = 16;

/// Bub: one background child `main/1` (task `sub-a`) answers `message` at 1.1 s; the task
/// ends with `body`, is notified, and the root's next request shows the notification.
///
/// ```text
///  0   0.000s main    turn.start
///  1   0.000s main    llm.request   #1
///  2   0.100s main    tool.start    subagent
///  3   0.100s main    spawn         main/1 background grant=3
///  4   0.100s main/1  session.open  temp/sub-a kind=temp
///  5   0.100s main/1  task.queued   sub-a
///  6   0.100s main/1  task.started  sub-a
///  7   0.100s main    tool.end      subagent
///  8   0.100s main    llm.request   #2
///  9   0.100s main/1  agent.start   budget=3
/// 10   0.100s main/1  llm.request   #1
/// 11   0.200s main    awaiting      unfinished=1
/// 12   1.100s main/1  agent.end     <message>
/// 13   1.100s main/1  task.ended    sub-a completed <body>
/// 14   1.100s main/1  session.close temp/sub-a discarded
/// 15   1.100s main    delivered     sub-a completed via=notification
/// 16   1.100s main    llm.request   #3 (holds the notification)
/// 17   1.200s main    agent.end
/// 18   1.200s main    turn.end
/// ```
pub(super) fn one_background(message: &str, body: &str) -> Case {
    let mut c = Case::bub();
    c.turn(0);
    c.root_llm(0, &[]);
    c.subagent(100, 1, "sub-a", Some(None));
    c.root_llm(100, &[]);
    c.run_child(100, 1);
    c.awaiting(200, 1);
    assert_eq!(c.finish(1100, 1, "sub-a", message, body), BG_ENDED);
    assert_eq!(c.deliver(1100, "sub-a", TaskStatus::Completed, Via::Notification), BG_DELIVERED);
    assert_eq!(c.root_llm(1100, &[note("sub-a", "completed", body)]), BG_NEXT_REQUEST);
    c.end_turn(1200);
    c
}

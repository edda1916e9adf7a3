//! Every oracle can fire: each of the first nine is handed hand-built evidence that breaks its rule
//! and must report exactly that (oracle, agent, virtual time, message, trace lines), and a
//! correct trace of the same shape that it must pass. Then a few real scenario runs are
//! tampered with, and `runner::judge` must fail them naming the oracle.
//!
//! The traces mirror what the core really records (see `snapshots/`); line numbers in the
//! comments are the indices the oracles report.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use rehearsal::internals::evidence::{Due, Exchange};
use rehearsal::internals::oracles::{self, Evidence, Oracle, Violation};
use rehearsal::rules::Rules;
use rehearsal::runner;
use rehearsal::scenario;
use rehearsal::sut::AgentId;
use rehearsal::sut::event::{Event, Family, OutcomeKind, Status, TaskStatus, Via};
use rehearsal::sut::llm::{LlmRequest, Message, ToolCall, Transcript};
use rehearsal::trace::{Entry, Trace, What};

use super::oracles_runs::{self, assert_has};

const DEPTH_ERROR: &str = "[Sub-agent error] Sub-agents cannot spawn further sub-agents.";

// ---------------------------------------------------------------------------------------------
// Building evidence
// ---------------------------------------------------------------------------------------------

fn root() -> AgentId {
    AgentId::root()
}

/// `main/n`.
fn kid(n: u32) -> AgentId {
    AgentId::root().child(n)
}

pub(crate) fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// One core event of `agent` at `t` ms of virtual time.
fn at(t: u64, agent: &AgentId, event: Event) -> Entry {
    Entry { at: ms(t), agent: agent.clone(), what: What::Core(event) }
}

/// The evidence of one hand-built run, with the bookkeeping a realistic trace needs.
struct Case {
    rules: Rules,
    trace: Trace,
    exchanges: Vec<Exchange>,
    due: Vec<Due>,
    live: Vec<String>,
    session_ended: bool,
    limit_hit: Option<String>,
    alive: usize,
    /// The root's remaining budget, as its next event reports it.
    root: u32,
    /// The root's requests so far.
    calls: u32,
    /// The notifications the root's conversation holds so far (it only grows).
    root_notes: Vec<String>,
}

impl Case {
    fn new(rules: Rules) -> Case {
        let root = rules.root_step_budget;
        Case {
            rules,
            trace: Trace::default(),
            exchanges: Vec::new(),
            due: Vec::new(),
            live: Vec::new(),
            session_ended: true,
            limit_hit: None,
            alive: 0,
            root,
            calls: 0,
            root_notes: Vec::new(),
        }
    }

    fn roku() -> Case {
        Case::new(Rules::roku())
    }

    /// Bub with a child step cap of 3, so several children fit the root's 30 steps.
    fn bub() -> Case {
        Case::new(Rules { child_step_cap: 3, ..Rules::bub() })
    }

    /// Pushes an event; returns its line.
    fn at(&mut self, t: u64, agent: &AgentId, event: Event) -> usize {
        self.trace.entries.push(at(t, agent, event));
        self.trace.entries.len() - 1
    }

    /// Replaces the event on `line`, keeping its time and agent.
    fn set(&mut self, line: usize, event: Event) {
        self.trace.entries[line].what = What::Core(event);
    }

    /// The violations of the nine oracles this file tests. Its hand-built traces are shaped
    /// for those nine (a request costs a step, replies carry no calls); the oracles after
    /// them judge call by call and are tested on real runs, in `oracles_*.rs`.
    fn check(&self) -> Vec<Violation> {
        let mut found = oracles::check(&Evidence {
            rules: &self.rules,
            setup: None,
            trace: &self.trace,
            exchanges: &self.exchanges,
            due: &self.due,
            live_sessions: &self.live,
            session_ended: self.session_ended,
            limit_hit: self.limit_hit.as_deref(),
            stopped: self.limit_hit.is_some(),
            alive_tasks: self.alive,
        });
        found.retain(|v| Oracle::ALL[..9].contains(&v.oracle));
        found
    }

    /// The violations of `oracle`; every other oracle must be silent.
    #[track_caller]
    fn only(&self, oracle: Oracle) -> Vec<Violation> {
        let found = self.check();
        assert!(found.iter().all(|v| v.oracle == oracle), "expected only {oracle} violations, got {found:#?}");
        found
    }

    /// The violations of `oracle`, whatever the others say.
    fn of(&self, oracle: Oracle) -> Vec<Violation> {
        self.check().into_iter().filter(|v| v.oracle == oracle).collect()
    }

    /// The one violation found, which must be of `oracle`.
    #[track_caller]
    fn sole(&self, oracle: Oracle) -> Violation {
        let found = self.only(oracle);
        assert_eq!(found.len(), 1, "expected one {oracle} violation, got {found:#?}");
        found.into_iter().next().unwrap()
    }

    #[track_caller]
    fn assert_clean(&self) {
        let found = self.check();
        assert!(found.is_empty(), "a correct trace was judged wrong: {found:#?}\n{}", self.trace.text());
    }

    // --- the root ---------------------------------------------------------------------------

    fn turn(&mut self, t: u64) -> usize {
        self.calls = 0;
        self.root = self.rules.root_step_budget;
        let budget = self.root;
        self.at(t, &root(), Event::TurnStarted { turn: 1, message: "Go".into(), budget })
    }

    /// A root request whose messages are the user's and then `notes` (user messages); its
    /// reply costs one step.
    fn root_llm(&mut self, t: u64, notes: &[String]) -> usize {
        self.calls += 1;
        let (call, budget) = (self.calls, self.root);
        self.root_notes.extend(notes.iter().cloned());
        let mut messages = vec![Message::user("Go")];
        messages.extend(self.root_notes.iter().map(Message::user));
        let count = messages.len();
        self.exchanges.push(exchange(request(&root(), "Go", messages), None));
        let line = self.at(t, &root(), Event::LlmRequest { call, messages: count, tools: 7, budget });
        self.root -= 1;
        line
    }

    fn end_turn(&mut self, t: u64) -> usize {
        let budget = self.root;
        self.at(t, &root(), agent_end("Done.", budget));
        self.at(t, &root(), Event::TurnEnded { turn: 1, kind: OutcomeKind::FinalAnswer, status: Status::Ok, budget })
    }

    /// The root's `Agent` call spawning `main/n`: tool.start, spawn, the child's agent.start
    /// and first request. Returns the spawn line.
    fn agent_call(&mut self, t: u64, n: u32) -> usize {
        let before = self.root;
        let grant = (before - self.rules.spawn_cost).min(self.rules.child_step_cap);
        let after = before - self.rules.spawn_cost - grant;
        self.root = after;
        self.at(t, &root(), tool_start(&format!("main#{}.1", self.calls), "Agent", json!({"task": "T"})));
        let line = self.at(t, &root(), spawned(&kid(n), Family::Foreground, grant, before, after));
        self.at(t, &kid(n), agent_start(1, grant));
        self.at(t, &kid(n), llm(1, grant));
        line
    }

    /// A background `subagent` call spawning `main/n` as task `task` in `temp/<task>`: tool.start,
    /// spawn, session.open, task.queued, task.started (when `start`), tool.end. Returns the
    /// task.queued line. The grant is recorded for [`Case::run_child`].
    fn subagent(&mut self, t: u64, n: u32, task: &str, start: Option<Option<u64>>) -> usize {
        let before = self.root;
        let grant = (before - self.rules.spawn_cost).min(self.rules.child_step_cap);
        let after = before - self.rules.spawn_cost - grant;
        self.root = after;
        let session = format!("temp/{task}");
        self.at(t, &root(), tool_start(&format!("main#{}.{n}", self.calls), "subagent", json!({"prompt": task})));
        self.at(t, &root(), spawned(&kid(n), Family::Background, grant, before, after));
        self.at(t, &kid(n), Event::SessionOpened { name: session.clone(), kind: "temp" });
        let queued = self.at(t, &kid(n), Event::TaskQueued { task_id: task.into(), child: kid(n), session });
        if let Some(timeout) = start {
            self.task_started(t, n, task, timeout);
        }
        let status = if start.is_some() { "running" } else { "queued" };
        let result = json!({"task_id": task, "status": status, "session": format!("temp/{task}")}).to_string();
        self.at(t, &root(), tool_end(&format!("main#{}.{n}", self.calls), "subagent", false, &result, after));
        queued
    }

    fn task_started(&mut self, t: u64, n: u32, task: &str, timeout_s: Option<u64>) -> usize {
        let timeout = timeout_s.map(Duration::from_secs);
        self.at(t, &kid(n), Event::TaskStarted { task_id: task.into(), child: kid(n), timeout })
    }

    /// A background child's agent.start and first request, with the bub grant.
    fn run_child(&mut self, t: u64, n: u32) {
        let grant = self.rules.child_step_cap;
        self.at(t, &kid(n), agent_start(1, grant));
        self.at(t, &kid(n), llm(1, grant));
    }

    /// A background child's final answer: agent.end, task.ended completed, session.close.
    /// Returns the task.ended line.
    fn finish(&mut self, t: u64, n: u32, task: &str, message: &str, body: &str) -> usize {
        let budget = self.rules.child_step_cap - 1;
        self.at(t, &kid(n), agent_end(message, budget));
        let line = self.at(t, &kid(n), task_ended(task, n, TaskStatus::Completed, body));
        self.at(t, &kid(n), Event::SessionClosed { name: format!("temp/{task}"), kept: false });
        line
    }

    fn deliver(&mut self, t: u64, task: &str, status: TaskStatus, via: Via) -> usize {
        self.at(t, &root(), Event::Delivered { task_id: task.into(), status, via })
    }

    /// The line of `agent`'s request number `call`.
    #[track_caller]
    fn request_line(&self, agent: &AgentId, call: u32) -> usize {
        self.trace
            .entries
            .iter()
            .position(|e| {
                &e.agent == agent && matches!(e.what, What::Core(Event::LlmRequest { call: n, .. }) if n == call)
            })
            .unwrap_or_else(|| panic!("{agent} made no request #{call}"))
    }

    /// The root waits for its children after a text reply.
    fn awaiting(&mut self, t: u64, unfinished: usize) -> usize {
        self.at(t, &root(), Event::AwaitingChildren { unfinished })
    }
}

// --- events ----------------------------------------------------------------------------------

fn llm(call: u32, budget: u32) -> Event {
    Event::LlmRequest { call, messages: 1, tools: 3, budget }
}

fn tool_start(call_id: &str, tool: &str, args: serde_json::Value) -> Event {
    Event::ToolStarted { call_id: call_id.into(), tool: tool.into(), args: args.into() }
}

fn tool_end(call_id: &str, tool: &str, is_error: bool, result: &str, budget: u32) -> Event {
    Event::ToolEnded {
        call_id: call_id.into(),
        tool: tool.into(),
        is_error,
        result: result.into(),
        budget,
        recovery: 5,
    }
}

fn spawned(child: &AgentId, family: Family, grant: u32, before: u32, after: u32) -> Event {
    Event::Spawned {
        child: child.clone(),
        family,
        task: "T".into(),
        cost: 1,
        grant,
        budget_before: before,
        budget_after: after,
    }
}

fn agent_start(depth: u32, budget: u32) -> Event {
    Event::AgentStarted { depth, goal: "T".into(), budget, request_id: "req-1-sub".into() }
}

fn agent_end(message: &str, budget: u32) -> Event {
    Event::AgentEnded { kind: OutcomeKind::FinalAnswer, status: Status::Ok, message: message.into(), steps: 0, budget }
}

/// The core's `child.result` for a successful `message` under the result `limit`: its length in
/// chars, and `truncated_to: Some(limit)` exactly when it is longer than the limit.
fn child_result(child: &AgentId, message: &str, limit: Option<usize>) -> Event {
    let chars = message.chars().count();
    Event::ChildResult { child: child.clone(), is_error: false, chars, truncated_to: limit.filter(|l| chars > *l) }
}

fn step(budget: u32) -> Event {
    Event::StepCompleted { step_index: 0, budget }
}

fn task_ended(task: &str, n: u32, status: TaskStatus, body: &str) -> Event {
    Event::TaskEnded { task_id: task.into(), child: kid(n), status, body: body.into() }
}

// --- requests --------------------------------------------------------------------------------

fn request(agent: &AgentId, goal: &str, messages: Vec<Message>) -> LlmRequest {
    LlmRequest {
        agent: agent.clone(),
        goal: goal.into(),
        profile: None,
        request_id: "req-1".into(),
        session_id: "s".into(),
        model: None,
        reasoning_effort: None,
        memory: Vec::new().into(),
        system: "".into(),
        messages: messages.into(),
        tools: Vec::new().into(),
    }
}

/// Tampers with a request's conversation as a list.
pub(crate) fn edit(messages: &mut Transcript, f: impl FnOnce(&mut Vec<Message>)) {
    let mut list = messages.to_vec();
    f(&mut list);
    *messages = list.into();
}

fn exchange(request: LlmRequest, reply: Option<Message>) -> Exchange {
    Exchange { request, reply }
}

fn call(id: &str, name: &str, args: serde_json::Value) -> ToolCall {
    ToolCall { id: id.into(), name: name.into(), args: args.into() }
}

/// The notification text `bub.delivery.notification-format` gives a finished result.
fn note(task: &str, status: &str, body: &str) -> String {
    format!("<subagent-notification task_id=\"{task}\" status=\"{status}\">\n{body}\n</subagent-notification>")
}

/// What the parent must receive for `message` under `limit` (`oracle.truncation.expected`, written out
/// here on its own).
fn truncated(message: &str, limit: usize) -> String {
    let kept: String = message.chars().take(limit).collect();
    format!("{kept}...\n[Sub-agent response truncated to {limit} chars]")
}

#[track_caller]
fn assert_violation(v: &Violation, oracle: Oracle, agent: &str, t: u64, phrase: &str, lines: &[usize]) {
    assert_eq!(v.oracle, oracle, "{v:#?}");
    assert_eq!(v.agent, agent, "{v:#?}");
    assert_eq!(v.at, ms(t), "{v:#?}");
    assert!(v.message.contains(phrase), "{phrase:?} not in {:?}", v.message);
    assert_eq!(v.lines, lines, "{v:#?}");
}

// ---------------------------------------------------------------------------------------------
// Standard traces
// ---------------------------------------------------------------------------------------------

// Lines of `foreground`.
const FG_SPAWN: usize = 3;
const FG_CHILD_START: usize = 4;
const FG_CHILD_LLM: usize = 5;
const FG_CHILD_END: usize = 6;
const FG_RESULT: usize = 7;
const FG_TOOL_END: usize = 8;

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
fn foreground_at(message: &str, handed: &str, end: u64) -> Case {
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

fn foreground(message: &str, handed: &str) -> Case {
    foreground_at(message, handed, 300)
}

// Lines of `foreground_timeout`.
const FGT_TIMEOUT: usize = 6;

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
fn foreground_timeout(t: u64, after: u64) -> Case {
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
const BG_ENDED: usize = 13;
const BG_DELIVERED: usize = 15;
const BG_NEXT_REQUEST: usize = 16;

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
fn one_background(message: &str, body: &str) -> Case {
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

// ---------------------------------------------------------------------------------------------
// 1. Depth
// ---------------------------------------------------------------------------------------------

/// Roku with `depth_limit`: `main/1` calls `Agent` and `main/1/1` runs and answers.
///
/// ```text
///  0..5  as in `foreground` (main/1 budget 10)
///  6   0.200s main/1    tool.start   Agent
///  7   0.200s main/1    spawn        main/1/1 foreground grant=9 budget=10→0
///  8   0.200s main/1/1  agent.start  depth=2 budget=9
///  9   0.200s main/1/1  llm.request  #1 budget=9
/// 10   0.300s main/1/1  agent.end    budget=8 "Hotel booked."
/// 11   0.300s main/1    child.result main/1/1
/// 12   0.300s main/1    tool.end     Agent ok budget=0 "Hotel booked."
/// 13   0.300s main/1    agent.end    budget=0 "Plan with hotel."
/// 14.. the root receives main/1's answer
/// ```
fn grandchild(depth_limit: u32) -> Case {
    let mut c = Case::new(Rules { depth_limit, ..Rules::roku() });
    c.turn(0);
    c.root_llm(0, &[]);
    c.root += 1;
    c.agent_call(100, 1);
    let grand = kid(1).child(1);
    c.at(200, &kid(1), tool_start("main/1#1.1", "Agent", json!({"task": "Book the hotel"})));
    c.at(200, &kid(1), spawned(&grand, Family::Foreground, 9, 10, 0));
    c.at(200, &grand, agent_start(2, 9));
    c.at(200, &grand, llm(1, 9));
    c.at(300, &grand, agent_end("Hotel booked.", 8));
    let limit = c.rules.result_limit_chars;
    c.at(300, &kid(1), child_result(&grand, "Hotel booked.", limit));
    c.at(300, &kid(1), tool_end("main/1#1.1", "Agent", false, "Hotel booked.", 0));
    c.at(300, &kid(1), agent_end("Plan with hotel.", 0));
    c.at(300, &root(), child_result(&kid(1), "Plan with hotel.", limit));
    c.at(300, &root(), tool_end("main#1.1", "Agent", false, "Plan with hotel.", 19));
    c.at(300, &root(), step(19));
    c.root_llm(300, &[]);
    c.end_turn(400);
    c
}

#[test]
fn depth_child_spawned_beyond_the_limit() {
    let found = grandchild(1).only(Oracle::Depth);
    assert_eq!(found.len(), 3, "{found:#?}");
    assert_violation(
        &found[0],
        Oracle::Depth,
        "main/1",
        200,
        "main/1 spawned main/1/1 although it is at the depth limit 1",
        &[7],
    );
    assert_violation(
        &found[1],
        Oracle::Depth,
        "main/1/1",
        200,
        "main/1/1 runs at depth 2, beyond the depth limit 1",
        &[8],
    );
    assert_violation(
        &found[2],
        Oracle::Depth,
        "main/1",
        300,
        "an `Agent` call of main/1 at the depth limit must give the depth error and no child, got \"Hotel booked.\"",
        &[6, 12],
    );
}

#[test]
fn depth_grandchild_within_a_limit_of_2_passes() {
    grandchild(2).assert_clean();
}

/// Roku: `main/1`, at the depth limit 1, calls `Agent` and is refused with `reason`, the
/// tool ending with `result` (`is_error`).
///
/// ```text
///  6   0.200s main/1  tool.start     Agent
///  7   0.200s main/1  spawn.refused  Agent <reason>
///  8   0.200s main/1  tool.end       Agent <result> budget=9
/// ```
fn refused_at_limit(reason: &str, result: &str, is_error: bool) -> Case {
    let mut c = Case::roku();
    c.turn(0);
    c.root_llm(0, &[]);
    c.root += 1;
    c.agent_call(100, 1);
    c.at(200, &kid(1), tool_start("main/1#1.1", "Agent", json!({"task": "Book the hotel"})));
    c.at(200, &kid(1), Event::SpawnRefused { tool: "Agent".into(), reason: reason.into() });
    c.at(200, &kid(1), tool_end("main/1#1.1", "Agent", is_error, result, 9));
    c.at(200, &kid(1), step(9));
    c.at(200, &kid(1), llm(2, 9));
    c.at(300, &kid(1), agent_end("I could not delegate.", 8));
    let limit = c.rules.result_limit_chars;
    c.at(300, &root(), child_result(&kid(1), "I could not delegate.", limit));
    c.at(300, &root(), tool_end("main#1.1", "Agent", false, "I could not delegate.", 19));
    c.at(300, &root(), step(19));
    c.root_llm(300, &[]);
    c.end_turn(400);
    c
}

#[test]
fn depth_agent_call_at_the_limit_without_the_exact_error_string() {
    let v = refused_at_limit("Sub-agents cannot spawn.", "Sub-agents cannot spawn.", true).sole(Oracle::Depth);
    assert_violation(
        &v,
        Oracle::Depth,
        "main/1",
        200,
        "an `Agent` call of main/1 at the depth limit must give the depth error and no child, got \"Sub-agents cannot spawn.\"",
        &[6, 8],
    );
}

#[test]
fn depth_agent_call_at_the_limit_with_the_error_string_but_not_as_an_error() {
    let v = refused_at_limit(DEPTH_ERROR, DEPTH_ERROR, false).sole(Oracle::Depth);
    assert_violation(&v, Oracle::Depth, "main/1", 200, "must give the depth error and no child", &[6, 8]);
}

#[test]
fn depth_agent_call_at_the_limit_with_the_exact_error_passes() {
    refused_at_limit(DEPTH_ERROR, DEPTH_ERROR, true).assert_clean();
}

#[test]
fn depth_refusal_below_the_limit() {
    // The root (depth 0) is refused with the depth error although the limit is 1.
    let mut c = Case::roku();
    c.turn(0);
    c.root_llm(0, &[]);
    c.at(100, &root(), tool_start("main#1.1", "Agent", json!({"task": "T"})));
    let refused = c.at(100, &root(), Event::SpawnRefused { tool: "Agent".into(), reason: DEPTH_ERROR.into() });
    c.at(100, &root(), tool_end("main#1.1", "Agent", true, DEPTH_ERROR, 29));
    c.root_llm(100, &[]);
    c.end_turn(200);
    let v = c.sole(Oracle::Depth);
    assert_violation(
        &v,
        Oracle::Depth,
        "main",
        100,
        "main at depth 0 was refused a child although the depth limit is 1",
        &[refused],
    );
}

// ---------------------------------------------------------------------------------------------
// 2. Budget
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// 3. Truncation
// ---------------------------------------------------------------------------------------------

#[test]
fn truncation_by_bytes_instead_of_chars() {
    // 4001 emoji are 16004 bytes; cutting at 4000 bytes keeps only 1000 of them.
    let message = "😀".repeat(4001);
    let by_bytes = format!("{}...\n[Sub-agent response truncated to 4000 chars]", &message[..4000]);
    let v = foreground(&message, &by_bytes).sole(Oracle::Truncation);
    let want = truncated(&message, 4000);
    assert_violation(
        &v,
        Oracle::Truncation,
        "main",
        300,
        &format!(
            "the parent received {} chars ({} bytes) where the limit Some(4000) gives {} chars ({} bytes); they first differ at char 1000",
            by_bytes.chars().count(),
            by_bytes.len(),
            want.chars().count(),
            want.len()
        ),
        &[FG_CHILD_END, FG_TOOL_END],
    );
}

#[test]
fn truncation_splitting_a_character() {
    // "a" then 4000 × "é": a byte cut at 4000 splits the 2000th "é"; lossy decoding leaves U+FFFD.
    let message = format!("a{}", "é".repeat(4000));
    let split = String::from_utf8_lossy(&message.as_bytes()[..4000]).into_owned();
    assert!(split.ends_with('\u{FFFD}'));
    let handed = format!("{split}...\n[Sub-agent response truncated to 4000 chars]");
    let v = foreground(&message, &handed).sole(Oracle::Truncation);
    assert_violation(
        &v,
        Oracle::Truncation,
        "main",
        300,
        "they first differ at char 2000",
        &[FG_CHILD_END, FG_TOOL_END],
    );
}

#[test]
fn truncation_result_over_the_limit_returned_whole() {
    let message = "x".repeat(4001);
    let v = foreground(&message, &message).sole(Oracle::Truncation);
    assert_violation(
        &v,
        Oracle::Truncation,
        "main",
        300,
        "the parent received 4001 chars (4001 bytes) where the limit Some(4000) gives",
        &[FG_CHILD_END, FG_TOOL_END],
    );
}

#[test]
fn truncation_notice_missing() {
    let message = "x".repeat(4001);
    let want = truncated(&message, 4000).len();
    assert_eq!(want, 4048);
    let v = foreground(&message, &"x".repeat(4000)).sole(Oracle::Truncation);
    assert_violation(
        &v,
        Oracle::Truncation,
        "main",
        300,
        "the parent received 4000 chars (4000 bytes) where the limit Some(4000) gives 4048 chars (4048 bytes); they first differ at char 4000",
        &[FG_CHILD_END, FG_TOOL_END],
    );
}

#[test]
fn truncation_wrong_char_count_reported() {
    let mut c = foreground("All clear.", "All clear.");
    c.set(FG_RESULT, Event::ChildResult { child: kid(1), is_error: false, chars: 12, truncated_to: None });
    let v = c.sole(Oracle::Truncation);
    assert_violation(
        &v,
        Oracle::Truncation,
        "main",
        300,
        "main/1's result has 10 chars, reported 12",
        &[FG_CHILD_END, FG_RESULT],
    );
}

#[test]
fn truncation_truncated_to_reported_wrong() {
    // `child.result` must report `truncated_to: Some(limit)` exactly when the message is longer
    // than the limit; the result the parent receives is right in every case here.
    let over = "x".repeat(4001);
    let at_limit = "😀".repeat(4000);
    let cases: [(&str, String, Option<usize>, &str); 4] = [
        ("over the limit, not reported", over.clone(), None, "reports truncated_to None, expected Some(4000)"),
        ("over the limit, wrong limit", over, Some(3999), "reports truncated_to Some(3999), expected Some(4000)"),
        ("exactly the limit, reported cut", at_limit, Some(4000), "reports truncated_to Some(4000), expected None"),
        ("short, reported cut", "All clear.".into(), Some(4000), "reports truncated_to Some(4000), expected None"),
    ];
    for (what, message, truncated_to, phrase) in cases {
        let handed = if message.chars().count() > 4000 { truncated(&message, 4000) } else { message.clone() };
        let mut c = foreground(&message, &handed);
        c.assert_clean();
        let chars = message.chars().count();
        c.set(FG_RESULT, Event::ChildResult { child: kid(1), is_error: false, chars, truncated_to });
        let v = c.sole(Oracle::Truncation);
        assert!(v.message.starts_with("main/1's result"), "{what}: {v:#?}");
        assert_violation(&v, Oracle::Truncation, "main", 300, phrase, &[FG_CHILD_END, FG_RESULT]);
    }
}

#[test]
fn truncation_exactly_the_limit_is_returned_unchanged() {
    let message = "😀".repeat(4000);
    foreground(&message, &message).assert_clean();
    // ... and truncating it is wrong.
    let v = foreground(&message, &truncated(&message, 3999)).sole(Oracle::Truncation);
    assert_violation(
        &v,
        Oracle::Truncation,
        "main",
        300,
        "they first differ at char 3999",
        &[FG_CHILD_END, FG_TOOL_END],
    );
}

#[test]
fn truncation_over_the_limit_correctly_truncated_passes() {
    for message in ["x".repeat(4001), "😀".repeat(4001), "字".repeat(10_000), format!("a{}", "é".repeat(4000))] {
        foreground(&message, &truncated(&message, 4000)).assert_clean();
    }
}

#[test]
fn truncation_background_body_not_truncated() {
    let limit = |mut c: Case| {
        c.rules.result_limit_chars = Some(10);
        c
    };
    let message = "12 open tickets.";
    let v = limit(one_background(message, message)).sole(Oracle::Truncation);
    assert_violation(
        &v,
        Oracle::Truncation,
        "main/1",
        1100,
        "the parent received 16 chars (16 bytes) where the limit Some(10) gives",
        &[BG_ENDED - 1, BG_ENDED],
    );
    limit(one_background(message, &truncated(message, 10))).assert_clean();
    one_background(message, message).assert_clean(); // bub: no limit
}

/// Formerly a gap: the check was armed only by the core's own `child.result` event. The oracle
/// now pairs the child's final message (agent.end) with the parent's `Agent` result through the
/// spawn inside that call, so a core that skips `child.result` is still caught.
#[test]
fn truncation_is_checked_even_without_a_child_result_event() {
    let message = "x".repeat(4001);
    let mut c = foreground(&message, &message);
    c.trace.entries.remove(FG_RESULT);
    let found = c.of(Oracle::Truncation);
    assert_eq!(found.len(), 1, "an untruncated 4001-char result escaped the truncation oracle: {found:#?}");
    assert_violation(
        &found[0],
        Oracle::Truncation,
        "main",
        300,
        "the parent received 4001 chars",
        &[FG_CHILD_END, FG_TOOL_END - 1],
    );
}

// ---------------------------------------------------------------------------------------------
// 4. Timeouts
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// 5. Concurrency
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// 6. Fork isolation
// ---------------------------------------------------------------------------------------------

const PROMPT: &str = "Dig into the database";

/// The parent's reply that forks `main/1` (call `main#1.1`, `session` argument `session`),
/// followed by `more` calls in the same reply.
fn spawning_reply(session: &str, more: Vec<ToolCall>) -> Message {
    let mut calls = vec![call("main#1.1", "subagent", json!({"prompt": PROMPT, "session": session}))];
    calls.extend(more);
    Message::assistant("", calls)
}

/// The parent's forking reply.
fn forking_reply() -> Message {
    spawning_reply("fork", Vec::new())
}

/// The fork child's correct first request: the parent's conversation at the call (its user
/// message and the assistant message that made the call), then the prompt.
fn fork_snapshot() -> Vec<Message> {
    vec![Message::user("Go"), forking_reply(), Message::user(PROMPT)]
}

/// Bub: the root forks `main/1` (session `<kind>/sub-a`, or the name of a named session),
/// which greps once and answers; the root is notified. `child_first` is the child's first
/// request; `child_second_extra` is appended to its second (its first, its Grep call and the
/// Grep result); `root_last_extra` goes into the root's last request, before the
/// notification. With `send`, the forking reply also sends the child a message
/// (`subagent.send`, as the real core records it: the child reads it in its first request);
/// with `root_steer`, the root is steered right after the fork and reads it in its request #2.
///
/// ```text
///  0   0.000s main    turn.start
///  1   0.000s main    llm.request   #1 (its reply makes the forking call main#1.1)
///  2   0.100s main    tool.start    subagent {"prompt": PROMPT, "session": <kind>}
///  3   0.100s main    spawn         main/1 background grant=3 budget=30→26
///  4   0.100s main/1  session.open  <kind>/sub-a kind=<kind>
///  5   0.100s main/1  task.queued   sub-a
///  6   0.100s main/1  task.started  sub-a
///  7   0.100s main    tool.end      subagent budget=26
///            (with `send`: tool.start subagent.send, main/1 steered, tool.end budget=25)
///            (with `root_steer`: main steered)
///  8   0.100s main    step
///  9   0.100s main    llm.request   #2 (reply "Waiting.")
/// 10   0.100s main/1  agent.start   budget=3
/// 11   0.100s main/1  llm.request   #1 <child_first>          FORK_CHILD_FIRST
/// 12   0.200s main    awaiting
/// 13   0.300s main/1  tool.start    Grep
/// 14   0.350s main/1  tool.end      Grep "CHILD-ONLY grep hit"
/// 15   0.350s main/1  step
/// 16   0.350s main/1  llm.request   #2 (reply "Database is fine.")   FORK_CHILD_SECOND
/// 17   0.450s main/1  agent.end
/// 18   0.450s main/1  task.ended    sub-a completed
/// 19   0.450s main/1  session.close
/// 20   0.450s main    delivered     sub-a via=notification
/// 21   0.450s main    llm.request   #3 (holds the notification)   FORK_ROOT_LAST
/// 22   0.550s main    agent.end / turn.end
/// ```
struct Fork {
    kind: &'static str,
    /// The session's name: `<kind>/sub-a`, or the name of a named session.
    session: String,
    /// The parent's reply that makes the forking call.
    reply: Message,
    child_first: Vec<Message>,
    child_second_extra: Vec<Message>,
    root_last_extra: Vec<Message>,
    send: Option<&'static str>,
    root_steer: Option<&'static str>,
}

const FORK_OPEN: usize = 4;
// Lines of `Fork` without `send` or `root_steer`.
const FORK_CHILD_FIRST: usize = 11;
const FORK_CHILD_SECOND: usize = 16;
const FORK_ROOT_LAST: usize = 21;

/// The child's body, its last reply.
const FORK_BODY: &str = "Database is fine.";

impl Fork {
    fn new(kind: &'static str) -> Fork {
        let reply = spawning_reply(kind, Vec::new());
        let child_first = if kind == "fork" {
            vec![Message::user("Go"), reply.clone(), Message::user(PROMPT)]
        } else {
            vec![Message::user(PROMPT)]
        };
        Fork {
            kind,
            session: format!("{kind}/sub-a"),
            reply,
            child_first,
            child_second_extra: Vec::new(),
            root_last_extra: Vec::new(),
            send: None,
            root_steer: None,
        }
    }

    /// The forking reply also calls `subagent.send` to the new child with `message`, before the
    /// child's first step: its first request ends with the message.
    fn sending(kind: &'static str, message: &'static str) -> Fork {
        let send = call("main#1.2", "subagent.send", json!({"task_id": "sub-a", "message": message}));
        let reply = spawning_reply(kind, vec![send]);
        let mut f = Fork::new(kind);
        if kind == "fork" {
            f.child_first = vec![Message::user("Go"), reply.clone(), Message::user(PROMPT)];
        }
        f.child_first.push(Message::user(message));
        Fork { reply, send: Some(message), ..f }
    }

    fn build(self) -> Case {
        let mut c = Case::bub();
        let session = self.session.clone();
        let session_arg = if self.kind == "named" { session.as_str() } else { self.kind };
        let grep = call("main/1#1.1", "Grep", json!({"q": "db"}));
        let tool_result = json!({"task_id": "sub-a", "status": "running", "session": session}).to_string();

        c.turn(0);
        c.at(0, &root(), Event::LlmRequest { call: 1, messages: 1, tools: 9, budget: 30 });
        c.exchanges.push(exchange(request(&root(), "Go", vec![Message::user("Go")]), Some(self.reply.clone())));
        c.at(100, &root(), tool_start("main#1.1", "subagent", json!({"prompt": PROMPT, "session": session_arg})));
        c.at(100, &root(), spawned(&kid(1), Family::Background, 3, 30, 26));
        assert_eq!(c.at(100, &kid(1), Event::SessionOpened { name: session.clone(), kind: self.kind }), FORK_OPEN);
        c.at(100, &kid(1), Event::TaskQueued { task_id: "sub-a".into(), child: kid(1), session: session.clone() });
        c.at(100, &kid(1), Event::TaskStarted { task_id: "sub-a".into(), child: kid(1), timeout: None });
        let mut budget = 26;
        c.at(100, &root(), tool_end("main#1.1", "subagent", false, &tool_result, budget));
        let mut root_conversation =
            vec![Message::user("Go"), self.reply.clone(), Message::tool("main#1.1", &tool_result, false)];
        if let Some(message) = self.send {
            // A send costs the parent one step; the child, not started yet, keeps the message
            // for its first request.
            budget -= 1;
            let sent = json!({"task_id": "sub-a", "status": "running"}).to_string();
            c.at(
                100,
                &root(),
                tool_start("main#1.2", "subagent.send", json!({"task_id": "sub-a", "message": message})),
            );
            c.at(100, &kid(1), Event::Steered { message: message.into() });
            c.at(100, &root(), tool_end("main#1.2", "subagent.send", false, &sent, budget));
            root_conversation.push(Message::tool("main#1.2", &sent, false));
        }
        if let Some(message) = self.root_steer {
            c.at(100, &root(), Event::Steered { message: message.into() });
            root_conversation.push(Message::user(message));
        }
        c.at(100, &root(), step(budget));

        let waiting = Message::assistant("Waiting.", vec![]);
        c.at(100, &root(), Event::LlmRequest { call: 2, messages: root_conversation.len(), tools: 9, budget });
        c.exchanges.push(exchange(request(&root(), "Go", root_conversation.clone()), Some(waiting.clone())));
        root_conversation.push(waiting);

        c.at(100, &kid(1), agent_start(1, 3));
        let first =
            c.at(100, &kid(1), Event::LlmRequest { call: 1, messages: self.child_first.len(), tools: 4, budget: 3 });
        c.exchanges.push(exchange(
            request(&kid(1), PROMPT, self.child_first.clone()),
            Some(Message::assistant("Grepping.", vec![grep.clone()])),
        ));
        c.at(200, &root(), Event::AwaitingChildren { unfinished: 1 });
        c.at(300, &kid(1), tool_start("main/1#1.1", "Grep", json!({"q": "db"})));
        c.at(350, &kid(1), tool_end("main/1#1.1", "Grep", false, "CHILD-ONLY grep hit", 2));
        c.at(350, &kid(1), step(2));
        let mut second = self.child_first.clone();
        second.push(Message::assistant("Grepping.", vec![grep]));
        second.push(Message::tool("main/1#1.1", "CHILD-ONLY grep hit", false));
        second.extend(self.child_second_extra);
        let second_line =
            c.at(350, &kid(1), Event::LlmRequest { call: 2, messages: second.len(), tools: 4, budget: 2 });
        c.exchanges.push(exchange(request(&kid(1), PROMPT, second), Some(Message::assistant(FORK_BODY, vec![]))));
        c.at(450, &kid(1), agent_end(FORK_BODY, 1));
        c.at(450, &kid(1), task_ended("sub-a", 1, TaskStatus::Completed, FORK_BODY));
        let kept = self.kind == "named";
        c.at(450, &kid(1), Event::SessionClosed { name: session.clone(), kept });
        c.deliver(450, "sub-a", TaskStatus::Completed, Via::Notification);
        root_conversation.extend(self.root_last_extra);
        root_conversation.push(Message::user(note("sub-a", "completed", FORK_BODY)));
        let last = c.at(
            450,
            &root(),
            Event::LlmRequest { call: 3, messages: root_conversation.len(), tools: 9, budget: budget - 1 },
        );
        c.exchanges
            .push(exchange(request(&root(), "Go", root_conversation), Some(Message::assistant("Done.", vec![]))));
        c.root = budget - 2;
        c.end_turn(550);
        if self.send.is_none() && self.root_steer.is_none() {
            assert_eq!((first, second_line, last), (FORK_CHILD_FIRST, FORK_CHILD_SECOND, FORK_ROOT_LAST));
        }
        if kept {
            c.live.push(session);
        }
        c
    }
}

/// A named session `name`, kept after the run.
fn named(name: &str) -> Case {
    let mut f = Fork::new("named");
    f.session = name.into();
    f.reply = spawning_reply(name, Vec::new());
    f.build()
}

#[test]
fn fork_isolation_correct_fork_temp_and_named_sessions_pass() {
    Fork::new("fork").build().assert_clean();
    Fork::new("temp").build().assert_clean();
    named("research").assert_clean();
}

#[test]
fn fork_isolation_first_request_missing_the_calling_assistant_message() {
    let mut f = Fork::new("fork");
    f.child_first.remove(1);
    let v = f.build().sole(Oracle::ForkIsolation);
    assert_violation(
        &v,
        Oracle::ForkIsolation,
        "main/1",
        100,
        "main/1's first request: the request differs from the parent's conversation at the call at message 1 (expected 3 messages, got 2)",
        &[FORK_OPEN, FORK_CHILD_FIRST],
    );
}

#[test]
fn fork_isolation_first_request_holding_a_later_parent_message() {
    // The subagent call's own result, which the parent only gets after the call, is in the
    // child's snapshot.
    let mut f = Fork::new("fork");
    let result = json!({"task_id": "sub-a", "status": "running", "session": "fork/sub-a"}).to_string();
    f.child_first.insert(2, Message::tool("main#1.1", result, false));
    let v = f.build().sole(Oracle::ForkIsolation);
    assert_violation(
        &v,
        Oracle::ForkIsolation,
        "main/1",
        100,
        "main/1's first request: the request differs from the parent's conversation at the call at message 2 (expected 3 messages, got 4)",
        &[FORK_OPEN, FORK_CHILD_FIRST],
    );
}

#[test]
fn fork_isolation_first_request_of_a_fork_nobody_made() {
    let mut f = Fork::new("fork");
    for m in &mut f.child_first {
        if m.content == PROMPT {
            m.content = "Something else".into();
        }
    }
    let mut c = f.build();
    for x in &mut c.exchanges {
        if x.request.agent == kid(1) {
            x.request.goal = "Something else".into();
        }
    }
    let v = c.sole(Oracle::ForkIsolation);
    assert_violation(
        &v,
        Oracle::ForkIsolation,
        "main/1",
        100,
        "main/1's first request: main made no forking `subagent` call with prompt \"Something else\"",
        &[FORK_OPEN, FORK_CHILD_FIRST],
    );
}

#[test]
fn fork_isolation_first_request_holding_a_message_sent_before_its_first_step_passes() {
    // As the real core records it: the forking reply also sends the child a message, which
    // the child, not started yet, reads in its first request after the snapshot and prompt.
    let f = Fork::sending("fork", "Use the replica.");
    assert_eq!(f.child_first.len(), 4);
    f.build().assert_clean();
    // A temp child likewise starts from its prompt and the message.
    Fork::sending("temp", "Use the replica.").build().assert_clean();

    // Leaving the message out of the fork child's first request is a wrong snapshot ...
    let mut f = Fork::sending("fork", "Use the replica.");
    f.child_first.pop();
    let c = f.build();
    let first = c.request_line(&kid(1), 1);
    let v = c.sole(Oracle::ForkIsolation);
    assert_violation(
        &v,
        Oracle::ForkIsolation,
        "main/1",
        100,
        "main/1's first request: the request differs from the parent's conversation at the call at message 3 (expected 4 messages, got 3): expected User: \"Use the replica.\", got (none)",
        &[FORK_OPEN, first],
    );
    // ... and so is a message nobody sent it.
    let mut f = Fork::new("fork");
    f.child_first.push(Message::user("Use the replica."));
    let v = f.build().sole(Oracle::ForkIsolation);
    assert_violation(
        &v,
        Oracle::ForkIsolation,
        "main/1",
        100,
        "the request differs from the parent's conversation at the call at message 3 (expected 3 messages, got 4)",
        &[FORK_OPEN, FORK_CHILD_FIRST],
    );
}

#[test]
fn fork_isolation_later_request_holding_a_parent_message_written_after_the_fork() {
    // The parent's `subagent` result and its "Waiting." reply, both written after the
    // snapshot, reach the child's second request: the first one found is reported.
    let tool_result = json!({"task_id": "sub-a", "status": "running", "session": "fork/sub-a"}).to_string();
    let mut f = Fork::new("fork");
    f.child_second_extra = vec![Message::tool("main#1.1", &tool_result, false), Message::assistant("Waiting.", vec![])];
    let v = f.build().sole(Oracle::ForkIsolation);
    assert_violation(
        &v,
        Oracle::ForkIsolation,
        "main/1",
        350,
        "main/1's request holds a tool result for call \"main#1.1\", which no earlier reply of main/1 made",
        &[FORK_CHILD_SECOND],
    );
    // The parent's plain-text reply alone carries no call id; it is caught all the same.
    let mut f = Fork::new("fork");
    f.child_second_extra = vec![Message::assistant("Waiting.", vec![])];
    let v = f.build().sole(Oracle::ForkIsolation);
    assert_violation(
        &v,
        Oracle::ForkIsolation,
        "main/1",
        350,
        "main/1's request holds an assistant message main/1 never wrote (\"Waiting.\")",
        &[FORK_CHILD_SECOND],
    );
}

#[test]
fn fork_isolation_later_request_that_lost_its_snapshot() {
    let mut c = Fork::new("fork").build();
    let second = c.exchanges.iter_mut().filter(|x| x.request.agent == kid(1)).nth(1).unwrap();
    edit(&mut second.request.messages, |m| {
        m.remove(0);
    });
    // It also no longer begins with its previous request (`oracle.fork-isolation.history-kept`).
    let found = c.of(Oracle::ForkIsolation);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found[1].message.starts_with("main/1's request does not begin with its previous request's"), "{found:#?}");
    assert_violation(
        &found[0],
        Oracle::ForkIsolation,
        "main/1",
        350,
        "main/1's request no longer starts with its fork snapshot",
        &[FORK_CHILD_SECOND],
    );
}

/// Formerly a gap: only messages that carry a call id had an owner, so a user message the
/// parent received after the fork (a steering message, a notification) reaching the fork child
/// went unseen. Provenance now requires every user message to have been sent to the agent.
#[test]
fn fork_isolation_later_request_holding_the_parents_steering_message() {
    let steer = "PARENT-STEER: focus on payments";
    let mut f = Fork::new("fork");
    f.root_steer = Some(steer); // the root is steered after the fork and reads it (correct)
    f.child_second_extra = vec![Message::user(steer)]; // the fork child gets it too (wrong)
    let c = f.build();
    let found = c.check();
    assert_eq!(found.len(), 1, "the parent's steering message reached the fork child unnoticed: {found:#?}");
    assert_violation(
        &found[0],
        Oracle::ForkIsolation,
        "main/1",
        350,
        "main/1's request holds a user message nobody sent to main/1 (\"PARENT-STEER: focus on payments\")",
        &[c.request_line(&kid(1), 2)],
    );
    // Without the leak, the steered root is fine.
    let mut f = Fork::new("fork");
    f.root_steer = Some(steer);
    f.build().assert_clean();
}

#[test]
fn fork_isolation_root_request_holding_a_childs_message() {
    let mut f = Fork::new("fork");
    f.root_last_extra = vec![Message::tool("main/1#1.1", "CHILD-ONLY grep hit", false)];
    let v = f.build().sole(Oracle::ForkIsolation);
    assert_violation(
        &v,
        Oracle::ForkIsolation,
        "main",
        450,
        "main's request holds a tool result for call \"main/1#1.1\", which no earlier reply of main made",
        &[FORK_ROOT_LAST],
    );
}

#[test]
fn fork_isolation_root_request_holding_a_childs_plain_text_reply() {
    // The child's last reply (text, no calls, so no call id) copied into the root's request as
    // an assistant message. Its body legitimately reaches the root, but only inside the
    // notification.
    let mut f = Fork::new("fork");
    f.root_last_extra = vec![Message::assistant(FORK_BODY, vec![])];
    let v = f.build().sole(Oracle::ForkIsolation);
    assert_violation(
        &v,
        Oracle::ForkIsolation,
        "main",
        450,
        "main's request holds an assistant message main never wrote (\"Database is fine.\")",
        &[FORK_ROOT_LAST],
    );
}

#[test]
fn fork_isolation_temp_child_first_request_holding_more_than_its_prompt() {
    let mut f = Fork::new("temp");
    f.child_first = fork_snapshot();
    let v = f.build().sole(Oracle::ForkIsolation);
    assert_violation(
        &v,
        Oracle::ForkIsolation,
        "main/1",
        100,
        "main/1 runs in a temp session but its first request holds 3 messages, not its prompt and the 0 sent to it",
        &[FORK_OPEN, FORK_CHILD_FIRST],
    );
}

#[test]
fn fork_isolation_temp_or_fork_session_left_after_the_session_ended() {
    for kind in ["temp", "fork"] {
        let mut c = Fork::new(kind).build();
        c.live.push(format!("{kind}/sub-a"));
        let v = c.sole(Oracle::ForkIsolation);
        assert_violation(
            &v,
            Oracle::ForkIsolation,
            "main",
            550,
            &format!("session {kind}/sub-a outlived its task"),
            &[],
        );
        // Before the session ends, the store may still hold it.
        c.session_ended = false;
        c.assert_clean();
    }
}

#[test]
fn fork_isolation_named_session_not_kept() {
    let mut c = named("research");
    c.live.clear();
    let v = c.sole(Oracle::ForkIsolation);
    assert_violation(&v, Oracle::ForkIsolation, "main", 550, "named session research was not kept", &[]);
}

// ---------------------------------------------------------------------------------------------
// 7. Delivery
// ---------------------------------------------------------------------------------------------

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
fn cancelled(delivered: bool) -> (Case, usize, usize) {
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

// ---------------------------------------------------------------------------------------------
// 8. Termination
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// 9. Determinism
// ---------------------------------------------------------------------------------------------

#[test]
fn determinism_identical_traces_pass() {
    let c = one_background("done", "done");
    assert_eq!(oracles::determinism(&c.trace, &c.trace.clone()), None);
}

#[test]
fn determinism_traces_differing_in_one_line() {
    let first = foreground("All clear.", "All clear.").trace;
    let mut second = first.clone();
    second.entries[FG_CHILD_LLM].what = What::Core(llm(1, 9));
    let v = oracles::determinism(&first, &second).expect("the traces differ");
    let (a, b) = (&first.lines()[FG_CHILD_LLM], &second.lines()[FG_CHILD_LLM]);
    assert!(a.ends_with("main/1   llm.request    #1 messages=1 tools=3 budget=10"), "{a}");
    assert_violation(
        &v,
        Oracle::Determinism,
        "main/1",
        100,
        &format!("two runs differ at trace line 6: {a:?} vs {b:?}"),
        &[FG_CHILD_LLM],
    );
}

#[test]
fn determinism_one_trace_shorter() {
    let first = foreground("All clear.", "All clear.").trace;
    let mut second = first.clone();
    second.entries.truncate(10);
    let v = oracles::determinism(&first, &second).expect("the traces differ");
    assert_violation(&v, Oracle::Determinism, "main", 300, "two runs differ at trace line 11:", &[10]);
    assert!(v.message.ends_with("vs \"(end)\""), "{}", v.message);
}

/// Formerly a gap: when two traces differed only in what the text form does not show (a call
/// id, the middle of a long string), the oracle fired but named line `len + 1`, past the end of
/// both traces, with "(end)" vs "(end)". It now finds the entry by its JSON form, and shows
/// the JSON forms when the text forms are equal.
#[test]
fn determinism_difference_only_in_the_json_names_the_line() {
    let first = foreground("All clear.", "All clear.").trace;
    let mut second = first.clone();
    second.entries[2].what = What::Core(tool_start("main#1.9", "Agent", json!({"task": "T"})));
    assert_eq!(first.lines(), second.lines(), "the text form hides call ids");
    let v = oracles::determinism(&first, &second).expect("the JSON lines differ");
    assert_violation(&v, Oracle::Determinism, "main", 100, "two runs differ at trace line 3", &[2]);
    assert!(v.message.contains("main#1.1") && v.message.contains("main#1.9"), "{}", v.message);
}

#[test]
fn determinism_difference_in_the_middle_of_a_long_string() {
    // The text form shortens long strings in the middle; one char there differs.
    let long = "x".repeat(5000);
    let mut other = long.clone();
    other.replace_range(2500..2501, "y");
    let first = foreground(&long, &truncated(&long, 4000)).trace;
    let second = foreground(&other, &truncated(&other, 4000)).trace;
    assert_eq!(first.lines()[FG_CHILD_END], second.lines()[FG_CHILD_END], "the text form hides the middle");
    let v = oracles::determinism(&first, &second).expect("the JSON lines differ");
    assert_violation(&v, Oracle::Determinism, "main/1", 300, "two runs differ at trace line 7", &[FG_CHILD_END]);
}

// ---------------------------------------------------------------------------------------------
// End to end: real runs, tampered, then judged
// ---------------------------------------------------------------------------------------------

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
        super::oracles_runs::edit_request(run, "main", 1, |messages| {
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
    let scenario = include_str!("../../scenarios/bub/child-aliases-count-on-across-turns.json");
    let failures = tampered(scenario, |run| rename_agent(run, &kid(2), &kid(1)));
    assert_has(
        &failures,
        "oracle depth: main at 0.600s: main spawned main/1 again by `subagent`, which is not a continuation (a `subagent.send` running a finished background child again): a new child takes the next number, main/2",
    );
}

#[test]
fn depth_continuation_of_a_run_that_has_not_ended() {
    // A `subagent.send` continuation is legal only once the child's earlier run has ended.
    let scenario = include_str!("../../scenarios/bub/named-session-kept-continued-and-shared.json");
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
        super::oracles_runs::edit_request(run, "main", 1, |messages| {
            let again = messages.iter().position(|m| m.content == "again").unwrap();
            messages.drain(..again);
        });
    });
    assert_has(
        &failures,
        "oracle fork-isolation: main at 0.060s: main's request does not begin with its previous request's 1 message(s): its history lost or changed some",
    );
}

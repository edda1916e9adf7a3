//! Building evidence by hand: the `Case` a test fills line by line, the core events and
//! requests it is made of, and the assertions on what an oracle reports.
//!
//! It holds no test and no standard trace (`traces` does).

use std::time::Duration;

use serde_json::json;

use rehearsal::internals::evidence::{Due, Exchange};
use rehearsal::internals::oracles::{self, Evidence, Oracle, Violation};
use rehearsal::rules::Rules;
use rehearsal::sut::AgentId;
use rehearsal::sut::event::{Event, Family, OutcomeKind, Status, TaskStatus, Via};
use rehearsal::sut::llm::{LlmRequest, Message, ToolCall, Transcript};
use rehearsal::trace::{Entry, Trace, What};

pub(super) fn root() -> AgentId {
    AgentId::root()
}

/// `main/n`.
pub(super) fn kid(n: u32) -> AgentId {
    AgentId::root().child(n)
}

pub(crate) fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// One core event of `agent` at `t` ms of virtual time.
pub(super) fn at(t: u64, agent: &AgentId, event: Event) -> Entry {
    Entry { at: ms(t), agent: agent.clone(), what: What::Core(event) }
}

/// The evidence of one hand-built run, with the bookkeeping a realistic trace needs.
pub(super) struct Case {
    pub(super) rules: Rules,
    pub(super) trace: Trace,
    pub(super) exchanges: Vec<Exchange>,
    pub(super) due: Vec<Due>,
    pub(super) live: Vec<String>,
    pub(super) session_ended: bool,
    pub(super) limit_hit: Option<String>,
    pub(super) alive: usize,
    /// The root's remaining budget, as its next event reports it.
    pub(super) root: u32,
    /// The root's requests so far.
    calls: u32,
    /// The notifications the root's conversation holds so far (it only grows).
    root_notes: Vec<String>,
}

impl Case {
    pub(super) fn new(rules: Rules) -> Case {
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

    pub(super) fn roku() -> Case {
        Case::new(Rules::roku())
    }

    /// Bub with a child step cap of 3, so several children fit the root's 30 steps.
    pub(super) fn bub() -> Case {
        Case::new(Rules { child_step_cap: 3, ..Rules::bub() })
    }

    /// Pushes an event; returns its line.
    pub(super) fn at(&mut self, t: u64, agent: &AgentId, event: Event) -> usize {
        self.trace.entries.push(at(t, agent, event));
        self.trace.entries.len() - 1
    }

    /// Replaces the event on `line`, keeping its time and agent.
    pub(super) fn set(&mut self, line: usize, event: Event) {
        self.trace.entries[line].what = What::Core(event);
    }

    /// The violations of the nine oracles this file tests. Its hand-built traces are shaped
    /// for those nine (a request costs a step, replies carry no calls); the oracles after
    /// them judge call by call and are tested on real runs, in `oracles_*.rs`.
    pub(super) fn check(&self) -> Vec<Violation> {
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
    pub(super) fn only(&self, oracle: Oracle) -> Vec<Violation> {
        let found = self.check();
        assert!(found.iter().all(|v| v.oracle == oracle), "expected only {oracle} violations, got {found:#?}");
        found
    }

    /// The violations of `oracle`, whatever the others say.
    pub(super) fn of(&self, oracle: Oracle) -> Vec<Violation> {
        self.check().into_iter().filter(|v| v.oracle == oracle).collect()
    }

    /// The one violation found, which must be of `oracle`.
    #[track_caller]
    pub(super) fn sole(&self, oracle: Oracle) -> Violation {
        let found = self.only(oracle);
        assert_eq!(found.len(), 1, "expected one {oracle} violation, got {found:#?}");
        found.into_iter().next().unwrap()
    }

    #[track_caller]
    pub(super) fn assert_clean(&self) {
        let found = self.check();
        assert!(found.is_empty(), "a correct trace was judged wrong: {found:#?}\n{}", self.trace.text());
    }

    // --- the root ---------------------------------------------------------------------------

    pub(super) fn turn(&mut self, t: u64) -> usize {
        self.calls = 0;
        self.root = self.rules.root_step_budget;
        let budget = self.root;
        self.at(t, &root(), Event::TurnStarted { turn: 1, message: "Go".into(), budget })
    }

    /// A root request whose messages are the user's and then `notes` (user messages); its
    /// reply costs one step.
    pub(super) fn root_llm(&mut self, t: u64, notes: &[String]) -> usize {
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

    pub(super) fn end_turn(&mut self, t: u64) -> usize {
        let budget = self.root;
        self.at(t, &root(), agent_end("Done.", budget));
        self.at(t, &root(), Event::TurnEnded { turn: 1, kind: OutcomeKind::FinalAnswer, status: Status::Ok, budget })
    }

    /// The root's `Agent` call spawning `main/n`: tool.start, spawn, the child's agent.start
    /// and first request. Returns the spawn line.
    pub(super) fn agent_call(&mut self, t: u64, n: u32) -> usize {
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
    pub(super) fn subagent(&mut self, t: u64, n: u32, task: &str, start: Option<Option<u64>>) -> usize {
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

    pub(super) fn task_started(&mut self, t: u64, n: u32, task: &str, timeout_s: Option<u64>) -> usize {
        let timeout = timeout_s.map(Duration::from_secs);
        self.at(t, &kid(n), Event::TaskStarted { task_id: task.into(), child: kid(n), timeout })
    }

    /// A background child's agent.start and first request, with the bub grant.
    pub(super) fn run_child(&mut self, t: u64, n: u32) {
        let grant = self.rules.child_step_cap;
        self.at(t, &kid(n), agent_start(1, grant));
        self.at(t, &kid(n), llm(1, grant));
    }

    /// A background child's final answer: agent.end, task.ended completed, session.close.
    /// Returns the task.ended line.
    pub(super) fn finish(&mut self, t: u64, n: u32, task: &str, message: &str, body: &str) -> usize {
        let budget = self.rules.child_step_cap - 1;
        self.at(t, &kid(n), agent_end(message, budget));
        let line = self.at(t, &kid(n), task_ended(task, n, TaskStatus::Completed, body));
        self.at(t, &kid(n), Event::SessionClosed { name: format!("temp/{task}"), kept: false });
        line
    }

    pub(super) fn deliver(&mut self, t: u64, task: &str, status: TaskStatus, via: Via) -> usize {
        self.at(t, &root(), Event::Delivered { task_id: task.into(), status, via })
    }

    /// The line of `agent`'s request number `call`.
    #[track_caller]
    pub(super) fn request_line(&self, agent: &AgentId, call: u32) -> usize {
        self.trace
            .entries
            .iter()
            .position(|e| {
                &e.agent == agent && matches!(e.what, What::Core(Event::LlmRequest { call: n, .. }) if n == call)
            })
            .unwrap_or_else(|| panic!("{agent} made no request #{call}"))
    }

    /// The root waits for its children after a text reply.
    pub(super) fn awaiting(&mut self, t: u64, unfinished: usize) -> usize {
        self.at(t, &root(), Event::AwaitingChildren { unfinished })
    }
}

// --- events ----------------------------------------------------------------------------------

pub(super) fn llm(call: u32, budget: u32) -> Event {
    Event::LlmRequest { call, messages: 1, tools: 3, budget }
}

pub(super) fn tool_start(call_id: &str, tool: &str, args: serde_json::Value) -> Event {
    Event::ToolStarted { call_id: call_id.into(), tool: tool.into(), args: args.into() }
}

pub(super) fn tool_end(call_id: &str, tool: &str, is_error: bool, result: &str, budget: u32) -> Event {
    Event::ToolEnded {
        call_id: call_id.into(),
        tool: tool.into(),
        is_error,
        result: result.into(),
        budget,
        recovery: 5,
    }
}

pub(super) fn spawned(child: &AgentId, family: Family, grant: u32, before: u32, after: u32) -> Event {
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

pub(super) fn agent_start(depth: u32, budget: u32) -> Event {
    Event::AgentStarted { depth, goal: "T".into(), budget, request_id: "req-1-sub".into() }
}

pub(super) fn agent_end(message: &str, budget: u32) -> Event {
    Event::AgentEnded { kind: OutcomeKind::FinalAnswer, status: Status::Ok, message: message.into(), steps: 0, budget }
}

/// The core's `child.result` for a successful `message` under the result `limit`: its length in
/// chars, and `truncated_to: Some(limit)` exactly when it is longer than the limit.
pub(super) fn child_result(child: &AgentId, message: &str, limit: Option<usize>) -> Event {
    let chars = message.chars().count();
    Event::ChildResult { child: child.clone(), is_error: false, chars, truncated_to: limit.filter(|l| chars > *l) }
}

pub(super) fn step(budget: u32) -> Event {
    Event::StepCompleted { step_index: 0, budget }
}

pub(super) fn task_ended(task: &str, n: u32, status: TaskStatus, body: &str) -> Event {
    Event::TaskEnded { task_id: task.into(), child: kid(n), status, body: body.into() }
}

// --- requests --------------------------------------------------------------------------------

pub(super) fn request(agent: &AgentId, goal: &str, messages: Vec<Message>) -> LlmRequest {
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

pub(super) fn exchange(request: LlmRequest, reply: Option<Message>) -> Exchange {
    Exchange { request, reply }
}

pub(super) fn call(id: &str, name: &str, args: serde_json::Value) -> ToolCall {
    ToolCall { id: id.into(), name: name.into(), args: args.into() }
}

/// The notification text `bub.delivery.notification-format` gives a finished result.
pub(super) fn note(task: &str, status: &str, body: &str) -> String {
    format!("<subagent-notification task_id=\"{task}\" status=\"{status}\">\n{body}\n</subagent-notification>")
}

/// What the parent must receive for `message` under `limit` (`oracle.truncation.expected`, written out
/// here on its own).
pub(super) fn truncated(message: &str, limit: usize) -> String {
    let kept: String = message.chars().take(limit).collect();
    format!("{kept}...\n[Sub-agent response truncated to {limit} chars]")
}

#[track_caller]
pub(super) fn assert_violation(v: &Violation, oracle: Oracle, agent: &str, t: u64, phrase: &str, lines: &[usize]) {
    assert_eq!(v.oracle, oracle, "{v:#?}");
    assert_eq!(v.agent, agent, "{v:#?}");
    assert_eq!(v.at, ms(t), "{v:#?}");
    assert!(v.message.contains(phrase), "{phrase:?} not in {:?}", v.message);
    assert_eq!(v.lines, lines, "{v:#?}");
}

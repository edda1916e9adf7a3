//! Real runs the oracles after the first nine are tested on (`tests/suite/oracles_*.rs`): each
//! passes untouched, and each test tampers with one piece of its evidence.

use rehearsal::runner::Run;
use rehearsal::sut::AgentId;
use rehearsal::sut::event::Event;
use rehearsal::sut::llm::Message;
use rehearsal::trace::What;

use super::edit;

/// A roku run with every kind of ordinary call: a catalog call, a failed one, an `Agent` call,
/// an unknown name that spends the last step (and the last recovery: a nudge), and the
/// failure at the top of the next iteration.
pub(crate) const ROKU_CALLS: &str = r#"{
  "name": "roku-calls",
  "rules": {"root_step_budget": 15, "recovery_budget": 2},
  "tools": [
    {"name": "Read", "latency_ms": 10, "results": [{"text": "contents"}]},
    {"name": "Flaky", "latency_ms": 10, "results": [{"error": "I/O error"}]}
  ],
  "lanes": [
    {"agent": "main", "replies": [
      {"calls": [{"tool": "Read", "args": {}}, {"tool": "Flaky", "args": {}}], "latency_ms": 100},
      {"calls": [{"tool": "Agent", "args": {"task": "Look"}}, {"tool": "Agent", "args": {"task": "  "}}], "latency_ms": 100},
      {"calls": [{"tool": "Frobnicate", "args": {}, "undeclared": true}], "latency_ms": 100}
    ]},
    {"agent": "main/1", "replies": [{"text": "Seen.", "latency_ms": 100}]}
  ],
  "turns": [{"user": "Go"}]
}"#;

/// A bub run with every call of the family: two spawns (one named), `wait`, a `send` that
/// hands a message over, a `send` that continues the named task, a `cancel`, and a held answer.
pub(crate) const BUB_FAMILY: &str = r#"{
  "name": "bub-family",
  "rules": {"preset": "bub", "child_step_cap": 3},
  "lanes": [
    {"agent": "main", "replies": [
      {"calls": [{"tool": "subagent", "args": {"prompt": "Research", "session": "notes"}}, {"tool": "subagent", "args": {"prompt": "Slow"}}], "latency_ms": 100},
      {"calls": [
        {"tool": "subagent.wait", "args": {"task_ids": ["$task1"], "timeout_seconds": 5}},
        {"tool": "subagent.send", "args": {"task_id": "$task2", "message": "Hurry"}},
        {"tool": "subagent.send", "args": {"task_id": "$task1", "message": "More"}},
        {"tool": "subagent.cancel", "args": {"task_id": "$task2"}}
      ], "latency_ms": 100},
      {"text": "Waiting.", "latency_ms": 100},
      {"text": "Done.", "latency_ms": 100}
    ]},
    {"agent": "main/1", "replies": [{"text": "Found it.", "latency_ms": 1000}, {"text": "More found.", "latency_ms": 500}]},
    {"agent": "main/2", "replies": [{"hang": true}]}
  ],
  "turns": [{"user": "Go"}]
}"#;

/// A roku run whose root is steered while its foreground child works; session context set.
pub(crate) const ROKU_STEER: &str = r#"{
  "name": "steer-roku",
  "session": {"id": "s-9", "model": "m-large", "reasoning_effort": "low", "memory": ["Be brief."], "system_prompt": "You help."},
  "lanes": [
    {"agent": "main", "replies": [
      {"calls": [{"tool": "Agent", "args": {"task": "Look around"}}], "latency_ms": 100},
      {"text": "Done.", "latency_ms": 100}
    ]},
    {"agent": "main/1", "replies": [{"calls": [{"tool": "Read", "args": {}}], "latency_ms": 100}, {"text": "Seen.", "latency_ms": 100}]}
  ],
  "tools": [{"name": "Read", "latency_ms": 10, "results": [{"text": "contents"}]}],
  "steer": [{"at_ms": 150, "message": "Also check the roof."}],
  "turns": [{"user": "Go", "request_id": "ticket-7"}]
}"#;

/// A bub run with a profile child that times out, a child narrowed by `allowed_tools` and
/// `allowed_skills`, a queued child cancelled (and cancelled again), a refused profile, and a
/// root held twice.
pub(crate) const BUB_TEXTS: &str = r#"{
  "name": "bub-texts",
  "rules": {"preset": "bub", "child_step_cap": 3, "max_concurrency": 2},
  "profiles": [{"name": "helper", "description": "Looks things up", "model": "model-b", "timeout_seconds": 0.25, "body": "Be quick."}],
  "session": {"model": "model-a", "skills": ["search", "math"], "system_prompt": "You help."},
  "tools": [{"name": "Read", "latency_ms": 10, "results": [{"text": "contents"}]}, {"name": "Grep", "latency_ms": 10, "results": [{"text": "hits"}]}],
  "lanes": [
    {"agent": "main", "replies": [
      {"calls": [
        {"tool": "subagent", "args": {"prompt": "Hang", "agent": "helper", "timeout_seconds": 0.5}},
        {"tool": "subagent", "args": {"prompt": "Narrow", "allowed_tools": [" READ "], "allowed_skills": "math"}, "bad_args": true},
        {"tool": "subagent", "args": {"prompt": "Queued"}},
        {"tool": "subagent", "args": {"prompt": "Bad", "agent": "nobody"}}
      ], "latency_ms": 100},
      {"calls": [
        {"tool": "subagent.cancel", "args": {"task_id": "$task3"}},
        {"tool": "subagent.cancel", "args": {"task_id": "$task3"}},
        {"tool": "Grep", "args": {}}
      ], "latency_ms": 100},
      {"text": "Waiting.", "latency_ms": 100},
      {"text": "Still waiting.", "latency_ms": 100},
      {"text": "Done.", "latency_ms": 100}
    ]},
    {"agent": "main/1", "replies": [{"hang": true}]},
    {"agent": "main/2", "replies": [{"calls": [{"tool": "Read", "args": {}}], "latency_ms": 100}, {"text": "Narrowed.", "latency_ms": 100}]}
  ],
  "turns": [{"user": "Go"}]
}"#;

/// A bub run with a named session continued by `send` (and refused to another call while in
/// use), a `wait` on two tasks finishing out of spawn order, and a peek.
pub(crate) const BUB_WAIT_NAMED: &str = r#"{
  "name": "bub-wait-named",
  "rules": {"preset": "bub", "child_step_cap": 3},
  "lanes": [
    {"agent": "main", "replies": [
      {"calls": [
        {"tool": "subagent", "args": {"prompt": "Draft the notes", "session": "notes"}},
        {"tool": "subagent", "args": {"prompt": "Quick look"}}
      ], "latency_ms": 100},
      {"calls": [{"tool": "subagent.wait", "args": {"task_ids": ["$task1", "$task2"], "timeout_seconds": 1}}], "latency_ms": 100},
      {"calls": [
        {"tool": "subagent.send", "args": {"task_id": "$task1", "message": "Add the summary"}},
        {"tool": "subagent", "args": {"prompt": "Other notes", "session": "notes"}},
        {"tool": "subagent.wait", "args": {"timeout_seconds": 0}}
      ], "latency_ms": 100},
      {"text": "Waiting.", "latency_ms": 100},
      {"text": "Done.", "latency_ms": 100}
    ]},
    {"agent": "main/1", "replies": [{"text": "First draft.", "latency_ms": 300}, {"text": "Summary added.", "latency_ms": 300}]},
    {"agent": "main/2", "replies": [{"text": "Looked.", "latency_ms": 100}]}
  ],
  "turns": [{"user": "Go"}]
}"#;

/// The failures of one oracle.
pub(crate) fn of<'a>(failures: &'a [String], oracle: &str) -> Vec<&'a str> {
    let prefix = format!("oracle {oracle}:");
    failures.iter().filter(|f| f.starts_with(&prefix)).map(String::as_str).collect()
}

#[track_caller]
pub(crate) fn assert_has(failures: &[String], want: &str) {
    assert!(failures.iter().any(|f| f == want), "expected {want:?} among {failures:#?}");
}

/// The `ToolEnded` of the `n`-th call (from 0) named `tool`.
pub(crate) fn tool_end(run: &Run, tool: &str, n: usize) -> usize {
    run.trace
        .entries
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(&e.what, What::Core(Event::ToolEnded { tool: t, .. }) if t == tool))
        .nth(n)
        .map(|(i, _)| i)
        .unwrap_or_else(|| panic!("no tool.end {tool} #{n} in\n{}", run.trace.text()))
}

pub(crate) fn set_budget(run: &mut Run, line: usize, value: u32) {
    match &mut run.trace.entries[line].what {
        What::Core(
            Event::ToolEnded { budget, .. }
            | Event::LlmRequest { budget, .. }
            | Event::AgentEnded { budget, .. }
            | Event::StepCompleted { budget, .. },
        ) => *budget = value,
        other => panic!("no budget on line {line}: {other:?}"),
    }
}

/// The `n`-th request (from 0) of `agent` among the exchanges.
pub(crate) fn request_of<'a>(
    run: &'a mut Run,
    agent: &str,
    n: usize,
) -> &'a mut rehearsal::internals::evidence::Exchange {
    run.exchanges
        .iter_mut()
        .filter(|x| x.request.agent.as_str() == agent)
        .nth(n)
        .unwrap_or_else(|| panic!("no request #{n} of {agent}"))
}

/// Edits the messages of the `n`-th request of `agent`.
pub(crate) fn edit_request(run: &mut Run, agent: &str, n: usize, f: impl FnOnce(&mut Vec<Message>)) {
    edit(&mut request_of(run, agent, n).request.messages, f);
}

/// The line of the first event matching `found` at `agent`.
pub(crate) fn line_at(run: &Run, agent: &str, found: impl Fn(&Event) -> bool) -> usize {
    let agent = if agent == "main" { AgentId::root() } else { AgentId::root().child(agent[5..].parse().unwrap()) };
    run.trace
        .entries
        .iter()
        .position(|e| e.agent == agent && matches!(&e.what, What::Core(event) if found(event)))
        .unwrap_or_else(|| panic!("no such entry of {agent} in\n{}", run.trace.text()))
}

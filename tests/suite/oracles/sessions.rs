//! Oracle `sessions` (`oracle.sessions.*`, docs/rules/core.md): a named session serves one run
//! at a time, on every path that starts one, and each run starts from what the earlier ones
//! recorded.

use rehearsal::sut::event::Event;
use rehearsal::sut::llm::Message;
use rehearsal::trace::What;

use super::runs::{BUB_WAIT_NAMED, assert_has, edit_request, line_at, tool_end};
use super::tampered;

#[test]
fn sessions_continuation_starts_from_an_empty_session() {
    let failures = tampered(BUB_WAIT_NAMED, |run| {
        edit_request(run, "main/1", 1, |messages| *messages = vec![Message::user("Add the summary")]);
    });
    assert_has(
        &failures,
        r#"oracle sessions: main/1 at 0.500s: main/1's run on session "notes" does not start from what it recorded: it should begin with the 1 messages of the last request of the session's previous run"#,
    );
}

#[test]
fn sessions_continuation_without_the_previous_reply() {
    let failures = tampered(BUB_WAIT_NAMED, |run| {
        edit_request(run, "main/1", 1, |messages| {
            messages.remove(1);
        });
    });
    assert_has(
        &failures,
        r#"oracle sessions: main/1 at 0.500s: main/1's run on session "notes" does not start from what it recorded: message 1 should be the previous run's last reply"#,
    );
}

#[test]
fn sessions_call_on_a_session_in_use_refused_otherwise() {
    let failures = tampered(BUB_WAIT_NAMED, |run| {
        let line = tool_end(run, "subagent", 2);
        if let What::Core(Event::ToolEnded { result, .. }) = &mut run.trace.entries[line].what {
            *result = "session busy".into();
        }
    });
    assert_has(
        &failures,
        r#"oracle sessions: main at 0.500s: a run was asked for on a session in use; the call must be refused with "session 'notes' is in use by task sub-e220a839" and start nothing, got "session busy""#,
    );
}

#[test]
fn sessions_second_run_while_the_first_is_unfinished() {
    let failures = tampered(BUB_WAIT_NAMED, |run| {
        let line = line_at(run, "main/2", |e| matches!(e, Event::SessionOpened { .. }));
        run.trace.entries[line].what = What::Core(Event::SessionOpened { name: "notes".into(), kind: "named" });
    });
    assert_has(
        &failures,
        r#"oracle sessions: main/2 at 0.100s: main/2 starts a run on session "notes" while main/1's run on it is unfinished"#,
    );
}

/// A bub run where a `subagent.send` would continue a finished named task while a second run
/// holds its session: the send path of `bub.session.named-one-at-a-time`.
const BUB_SEND_IN_USE: &str = r#"{
  "name": "bub-send-in-use",
  "rules": {"preset": "bub"},
  "lanes": [
    {"agent": "main", "replies": [
      {"calls": [{"tool": "subagent", "args": {"prompt": "First notes", "session": "notes"}}], "latency_ms": 100},
      {"calls": [
        {"tool": "subagent", "args": {"prompt": "Second notes", "session": "notes"}},
        {"tool": "subagent.send", "args": {"task_id": "$task1", "message": "Add more"}}
      ], "latency_ms": 300},
      {"text": "Waiting.", "latency_ms": 100},
      {"text": "Done.", "latency_ms": 100}
    ]},
    {"agent": "main/1", "replies": [{"text": "First.", "latency_ms": 100}]},
    {"agent": "main/2", "replies": [{"text": "Second.", "latency_ms": 1000}]}
  ],
  "turns": [{"user": "Go"}]
}"#;

#[test]
fn sessions_send_continuing_onto_a_session_in_use_refused_otherwise() {
    let failures = tampered(BUB_SEND_IN_USE, |run| {
        let line = tool_end(run, "subagent.send", 0);
        if let What::Core(Event::ToolEnded { result, .. }) = &mut run.trace.entries[line].what {
            *result = "session busy".into();
        }
    });
    assert_eq!(
        failures,
        [
            r#"oracle sessions: main at 0.400s: a run was asked for on a session in use; the call must be refused with "session 'notes' is in use by task sub-6e789e6a" and start nothing, got "session busy""#
        ]
    );
}

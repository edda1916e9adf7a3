//! Oracle `routing` (`oracle.routing.*`, docs/rules/core.md): steering and `subagent.send` reach
//! their addressee's next request and nobody else; every child's requests hold only its own.

use rehearsal::sut::AgentId;
use rehearsal::sut::event::Event;
use rehearsal::sut::llm::Message;
use rehearsal::trace::What;

use super::runs::{BUB_FAMILY, ROKU_STEER, assert_has, edit_request, line_at};
use super::tampered;

const STEER: &str = "Also check the roof.";

#[test]
fn routing_steering_taken_by_the_foreground_child() {
    // The child reads its parent's steering, and the parent never does.
    let failures = tampered(ROKU_STEER, |run| {
        edit_request(run, "main/1", 1, |messages| messages.push(Message::user(STEER)));
        edit_request(run, "main", 1, |messages| messages.retain(|m| m.content != STEER));
    });
    assert_has(
        &failures,
        r#"oracle routing: main/1 at 0.210s: main/1's request holds a user message nobody sent to main/1 ("Also check the roof.")"#,
    );
    assert_has(
        &failures,
        r#"oracle routing: main at 0.310s: main's next request does not hold the message sent to it ("Also check the roof."), in the order sent"#,
    );
}

#[test]
fn routing_steering_reported_at_the_child() {
    let failures = tampered(ROKU_STEER, |run| {
        let line = line_at(run, "main", |e| matches!(e, Event::Steered { .. }));
        run.trace.entries[line].agent = AgentId::root().child(1);
    });
    assert_has(
        &failures,
        r#"oracle routing: main at 0.410s: the steering message "Also check the roof." sent at 150ms was never reported at main"#,
    );
}

#[test]
fn routing_send_handed_to_another_task() {
    let failures = tampered(BUB_FAMILY, |run| {
        let line = line_at(run, "main/2", |e| matches!(e, Event::Steered { .. }));
        run.trace.entries[line].agent = AgentId::root().child(1);
    });
    assert_has(&failures, "oracle routing: main/1 at 1.100s: `subagent.send` to main/2 reached main/1 instead");
}

#[test]
fn routing_send_handed_over_changed() {
    let failures = tampered(BUB_FAMILY, |run| {
        let line = line_at(run, "main/2", |e| matches!(e, Event::Steered { .. }));
        if let What::Core(Event::Steered { message }) = &mut run.trace.entries[line].what {
            *message = format!("  {message}\n");
        }
    });
    assert_has(
        &failures,
        r#"oracle routing: main/2 at 1.100s: `subagent.send` handed main/2 "  Hurry\n", not the message as written ("Hurry")"#,
    );
}

/// A bub run whose named-session child and temp child each make a catalog call and then
/// answer: two requests per run, so provenance has messages of their own loops to judge.
const BUB_NAMED_AND_TEMP: &str = r#"{
  "name": "bub-named-and-temp",
  "rules": {"preset": "bub"},
  "tools": [{"name": "Read", "latency_ms": 10, "results": [{"text": "contents"}]}],
  "lanes": [
    {"agent": "main", "replies": [
      {"calls": [
        {"tool": "subagent", "args": {"prompt": "Draft the notes", "session": "notes"}},
        {"tool": "subagent", "args": {"prompt": "Quick look"}}
      ], "latency_ms": 100},
      {"text": "Waiting.", "latency_ms": 100},
      {"text": "Done.", "latency_ms": 100}
    ]},
    {"agent": "main/1", "replies": [{"calls": [{"tool": "Read", "args": {}}], "latency_ms": 100}, {"text": "Drafted.", "latency_ms": 100}]},
    {"agent": "main/2", "replies": [{"calls": [{"tool": "Read", "args": {}}], "latency_ms": 100}, {"text": "Looked.", "latency_ms": 100}]}
  ],
  "turns": [{"user": "Go"}]
}"#;

#[test]
fn routing_named_child_reads_a_message_nobody_sent_it() {
    // Provenance covers a named-session child past what its run starts from.
    let failures = tampered(BUB_NAMED_AND_TEMP, |run| {
        edit_request(run, "main/1", 1, |messages| messages.push(Message::user(STEER)));
    });
    assert_eq!(
        failures,
        [
            r#"oracle routing: main/1 at 0.210s: main/1's request holds a user message nobody sent to main/1 ("Also check the roof.")"#
        ]
    );
}

#[test]
fn routing_temp_child_holds_a_reply_it_never_wrote() {
    // And a temp child, past its prompt.
    let failures = tampered(BUB_NAMED_AND_TEMP, |run| {
        edit_request(run, "main/2", 1, |messages| messages.insert(1, Message::assistant("Looked elsewhere.", vec![])));
    });
    assert_eq!(
        failures,
        [
            r#"oracle routing: main/2 at 0.210s: main/2's request holds an assistant message main/2 never wrote ("Looked elsewhere.")"#
        ]
    );
}

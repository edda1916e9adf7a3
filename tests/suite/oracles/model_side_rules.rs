//! Model-side oracles for rules the traffic shows (issue 38), each fed hand-built exchanges:
//! firing on the violating shape, silent on the correct one.

use rehearsal::dialect::Dialect;
use rehearsal::internals::oracles::model_side;
use rehearsal::rules::Rules;
use rehearsal::sut::llm::Message;

use super::attribution::{Talk, call};

fn findings(t: Talk, dialect: &Dialect, rules: &Rules) -> Vec<String> {
    model_side::check(&t.finish(), rules, dialect).iter().map(ToString::to_string).collect()
}

/// `oracle.model-side.terminal`: `[Read, final_answer]` ends the loop and runs neither call;
/// a next request answering the `Read` (or the `final_answer`) is the finding, a new turn is not.
#[test]
fn a_terminal_call_answered_as_a_tool_fires_and_a_new_turn_does_not() {
    let dialect = Dialect::builtin("roku").unwrap();
    for (next, fires) in [
        (Message::tool("r1", "file contents", false), true),
        (Message::tool("f1", "Unknown tool name: final_answer.", true), true),
        (Message::user("Next question."), false),
    ] {
        let mut t = Talk::new(dialect.clone());
        let u1 = Message::user("Read it and answer.");
        let reply = Message::assistant(
            "",
            vec![
                call("r1", "Read", serde_json::json!({"path": "a"})),
                call("f1", "final_answer", serde_json::json!({"message": "done"})),
            ],
        );
        let (n, _) = t.ask(std::slice::from_ref(&u1), &["Read", "final_answer", "fail"]);
        t.reply(n, &reply);
        t.ask(&[u1, reply, next.clone()], &["Read", "final_answer", "fail"]);
        let got = findings(t, &dialect, &Rules::roku());
        let fired = got.iter().any(|f| {
            f.starts_with("model-side terminal (oracle.model-side.terminal): main request #2")
                && f.contains("holds the terminal call `final_answer`")
        });
        assert_eq!(fired, fires, "{next:?}: {got:#?}");
    }
}

/// `oracle.model-side.terminal`: asking again with nothing new after a terminal call.
#[test]
fn asking_again_with_nothing_new_after_a_terminal_call_fires() {
    let dialect = Dialect::builtin("roku").unwrap();
    let mut t = Talk::new(dialect.clone());
    let u1 = Message::user("Answer.");
    let reply = Message::assistant("", vec![call("f1", "fail", serde_json::json!({"reason": "no"}))]);
    let (n, _) = t.ask(std::slice::from_ref(&u1), &["fail"]);
    t.reply(n, &reply);
    t.ask(&[u1, reply], &["fail"]);
    let got = findings(t, &dialect, &Rules::roku());
    assert!(
        got.iter().any(|f| f.contains("(oracle.model-side.terminal)") && f.contains("asks again with nothing new")),
        "{got:#?}"
    );
}

/// `oracle.model-side.timeouts`, `core.time.finish-at-limit-wins`: a child whose final reply was
/// due exactly at its limit finished; its parent told it timed out is the finding. A reply due
/// after the limit makes the same timeout right.
#[test]
fn a_timeout_told_when_the_final_reply_was_due_at_the_limit_fires() {
    let dialect = Dialect::builtin("bub").unwrap();
    for (due_ms, fires) in [(1002, true), (1500, false)] {
        let mut t = Talk::new(dialect.clone());
        let u1 = Message::user("Start.");
        let spawn = Message::assistant(
            "",
            vec![call("c1", "subagent", serde_json::json!({"prompt": "Slow job.", "timeout_seconds": 1}))],
        );
        let (n, _) = t.ask(std::slice::from_ref(&u1), &["subagent", "subagent.wait"]);
        t.reply(n, &spawn);
        let started = Message::tool("c1", "{\"task_id\":\"t1\",\"status\":\"running\"}", false);
        let (n, _) = t.ask(&[u1.clone(), spawn.clone(), started.clone()], &["subagent", "subagent.wait"]);
        let wait = Message::assistant("", vec![call("w1", "subagent.wait", serde_json::json!({}))]);
        t.reply(n, &wait);
        // The child asks at 2 ms; its final reply is due at `due_ms` (the limit ends at 1002 ms).
        t.at(2);
        let (child, _) = t.ask(&[Message::user("Slow job.")], &[]);
        t.ends_loop_due(child, due_ms);
        t.at(1002);
        let told = Message::tool(
            "w1",
            "[{\"task_id\":\"t1\",\"status\":\"timed_out\",\"result\":\"Timed out after 1 seconds.\"}]",
            false,
        );
        let notice = Message::user(
            "<subagent-notification task_id=\"t1\" status=\"timed_out\">\nTimed out after 1 seconds.\n</subagent-notification>",
        );
        t.ask(&[u1, spawn, started, wait, told, notice], &["subagent", "subagent.wait"]);
        let got = findings(t, &dialect, &Rules::bub());
        let fired =
            got.iter().any(|f| f.contains("(oracle.model-side.timeouts)") && f.contains("a reply at the limit wins"));
        assert_eq!(fired, fires, "due at {due_ms} ms: {got:#?}");
    }
}

/// `oracle.model-side.sessions`: two runs on one named session never overlap. The second run
/// asking while the first has not ended fires; asking after the first's final reply (from the
/// session's record) does not.
#[test]
fn a_second_run_on_a_named_session_while_the_first_is_open_fires() {
    let dialect = Dialect::builtin("bub").unwrap();
    for (after, fires) in [(false, true), (true, false)] {
        let mut t = Talk::new(dialect.clone());
        let u1 = Message::user("Start.");
        let spawn = Message::assistant(
            "",
            vec![
                call("c1", "subagent", serde_json::json!({"prompt": "Note alpha.", "session": "notes"})),
                call("c2", "subagent", serde_json::json!({"prompt": "Note beta.", "session": "notes"})),
            ],
        );
        let (n, _) = t.ask(std::slice::from_ref(&u1), &["subagent"]);
        t.reply(n, &spawn);
        let alpha = Message::user("Note alpha.");
        let (a, _) = t.ask(std::slice::from_ref(&alpha), &[]);
        let noted = Message::assistant("alpha noted", Vec::new());
        if after {
            t.reply(a, &noted);
            t.ask(&[alpha, noted, Message::user("Note beta.")], &[]);
        } else {
            t.ask(&[Message::user("Note beta.")], &[]);
            t.at(10);
            t.reply(a, &noted);
        }
        let got = findings(t, &dialect, &Rules::bub());
        let fired = got.iter().any(|f| {
            f.starts_with("model-side sessions (oracle.model-side.sessions): main/2 request #1")
                && f.contains("while main/1's run on it")
        });
        assert_eq!(fired, fires, "second run after the first ended: {after}: {got:#?}");
    }
}

/// `oracle.model-side.child-tools`: a child narrowed to `Read` is offered `Bash` (outside its
/// grant), or a tool its parent lacked: each fires; offered `Read` and the terminal tools, or
/// `Agent` (offered by depth, not by grant), it does not; `ask_user`, which only the root is
/// offered, fires.
#[test]
fn a_child_offered_a_tool_outside_its_grant_or_its_parents_fires() {
    let dialect = Dialect::builtin("rehearsal").unwrap();
    for (offered, fires) in [
        (&["Read", "Bash", "final_answer", "fail"][..], true),
        (&["Read", "Write", "final_answer", "fail"][..], true),
        (&["Read", "final_answer", "ask_user", "fail"][..], true),
        (&["Read", "final_answer", "fail", "Agent"][..], false),
    ] {
        let mut t = Talk::new(dialect.clone());
        let u1 = Message::user("Start.");
        let spawn = Message::assistant(
            "",
            vec![call("c1", "subagent", serde_json::json!({"prompt": "Read only.", "allowed_tools": ["Read"]}))],
        );
        let (n, _) = t
            .ask(std::slice::from_ref(&u1), &["Read", "Bash", "final_answer", "ask_user", "fail", "Agent", "subagent"]);
        t.reply(n, &spawn);
        t.ask(&[Message::user("Read only.")], offered);
        let got = findings(t, &dialect, &Rules::bub());
        let fired = got
            .iter()
            .any(|f| f.starts_with("model-side child-tools (oracle.model-side.child-tools): main/1 request #1"));
        assert_eq!(fired, fires, "{offered:?}: {got:#?}");
    }
}

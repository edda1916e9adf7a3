//! Oracle 6, fork isolation: what a fork child and the root may see in their requests, and
//! conversations that only grow.

use serde_json::json;

use rehearsal::internals::oracles::Oracle;
use rehearsal::sut::event::{Event, Family, TaskStatus, Via};
use rehearsal::sut::llm::{Message, ToolCall};

use super::evidence::{
    Case, agent_end, agent_start, assert_violation, call, edit, exchange, kid, note, request, root, spawned, step,
    task_ended, tool_end, tool_start,
};

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
    pub(super) fn new(kind: &'static str) -> Fork {
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
pub(super) fn named(name: &str) -> Case {
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

//! A blind review of `evidence::attribution::Attributor` (issue 36, "attribution by evidence").
//!
//! Each test plays one request sequence as a model endpoint would see it from a runtime
//! (correct, or broken in a way the rules document), and asserts what the attribution should
//! be by `docs/evidence.md`, `docs/rules/*.md` and the dialect (`src/dialect.rs`). The cases were
//! designed from those documents and the attributor's source alone, without reading the
//! project's own attribution tests, oracles, scenarios or fixtures.
//!
//! The review found 17 of 24 cases wrong; 13 were fixed in the attributor and pass here. The four
//! left are documented limitations (docs/evidence.md, "Known limits"): their tests assert the
//! right attribution or a finding (an ambiguous mark, an unattributed request), never a silent
//! wrong one.

use std::sync::Arc;
use std::time::Duration;

use rehearsal::dialect::{Dialect, PromptWrap};
use rehearsal::internals::evidence::attribution::{Attributed, Attribution, Attributor, Basis};
use rehearsal::sut::llm::{Message, ToolCall, Transcript};
use serde_json::{Value, json};

const DEPTH_ERROR: &str = "[Sub-agent error] Sub-agents cannot spawn further sub-agents.";

/// A model endpoint: the attributor, and a clock that moves 1 ms a request.
struct Endpoint {
    a: Attributor,
    clock: u64,
}

impl Endpoint {
    /// The root's first request, `text` offering `tools`, answered with `calls`.
    fn root_calls(&mut self, text: &str, tools: &[&str], calls: Vec<ToolCall>) {
        let (n, _) = self.ask(&[user(text)], tools);
        self.reply(n, &asst("", calls));
    }

    fn new(dialect: Dialect) -> Endpoint {
        Endpoint { a: Attributor::new(Arc::new(dialect), Vec::new()), clock: 0 }
    }

    fn builtin(name: &str) -> Endpoint {
        Endpoint::new(Dialect::builtin(name).unwrap())
    }

    fn ask(&mut self, messages: &[Message], tools: &[&str]) -> (usize, Attribution) {
        self.ask_with(messages, tools, None, "")
    }

    fn ask_with(
        &mut self,
        messages: &[Message],
        tools: &[&str],
        model: Option<&str>,
        system: &str,
    ) -> (usize, Attribution) {
        self.clock += 1;
        let transcript: Transcript = messages.to_vec().into();
        self.a.request(
            system,
            &transcript,
            tools.iter().map(|t| t.to_string()).collect(),
            model.map(String::from),
            Duration::from_millis(self.clock),
        )
    }

    fn reply(&mut self, number: usize, reply: &Message) {
        self.clock += 1;
        self.a.replied(number, reply, Duration::from_millis(self.clock));
    }
}

fn call(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall { id: id.to_string(), name: name.to_string(), args: Arc::new(args) }
}

fn asst(text: &str, calls: Vec<ToolCall>) -> Message {
    Message::assistant(text, calls)
}

fn user(text: &str) -> Message {
    Message::user(text)
}

fn tool(id: &str, text: &str, is_error: bool) -> Message {
    Message::tool(id, text, is_error)
}

fn who(a: &Attribution) -> &Attributed {
    match a {
        Attribution::Agent(w) => w,
        other => panic!("expected an agent, got {other:?}"),
    }
}

fn alias(a: &Attribution) -> String {
    match a {
        Attribution::Agent(w) => w.alias.as_str().to_string(),
        Attribution::Side(i) => format!("<side {i}>"),
        Attribution::Unattributed(why) => format!("<unattributed: {why}>"),
    }
}

/// Asserts `a` is `expected`'s, going on from its last request, with no ambiguity.
#[track_caller]
fn assert_goes_on(a: &Attribution, expected: &str) {
    assert_eq!(alias(a), expected, "{a:?}");
    let w = who(a);
    assert_eq!(w.basis, Basis::GoesOn, "{a:?}");
    assert_eq!(w.ambiguous, None, "{a:?}");
}

/// Asserts `a` is a new child `expected` told by its call, with no ambiguity.
#[track_caller]
fn assert_child(a: &Attribution, expected: &str) {
    assert_eq!(alias(a), expected, "{a:?}");
    let w = who(a);
    assert_eq!(w.basis, Basis::Child, "{a:?}");
    assert_eq!(w.ambiguous, None, "{a:?}");
    assert_eq!(w.number, 1, "{a:?}");
}

const ROKU_ROOT: &[&str] = &["Read", "final_answer", "ask_user", "fail", "Agent"];
const ROKU_CHILD: &[&str] = &["Read", "final_answer", "fail"];
const BUB_ROOT: &[&str] = &[
    "Read",
    "Bash",
    "final_answer",
    "ask_user",
    "fail",
    "subagent",
    "subagent.wait",
    "subagent.send",
    "subagent.cancel",
];
const BUB_CHILD: &[&str] = &["Read", "Bash", "final_answer", "fail"];
const BUB051_ROOT: &[&str] = &["bash", "fs_read", "subagent"];
const BUB051_CHILD: &[&str] = &["bash", "fs_read"];

fn spawned(task: &str, status: &str) -> String {
    format!(r#"{{"task_id":"{task}","status":"{status}","session":"temp/{task}"}}"#)
}

// ---------------------------------------------------------------------------------------------
// 1. A call whose result shows a child that never asked stays "waiting" forever.
// ---------------------------------------------------------------------------------------------

/// roku: a root with 1 step left calls `Agent`; the child is granted 0 steps and fails without
/// a request (`roku.grant.zero-child-fails`), the parent reading the budget error. Next turn the
/// root calls `Agent` with the same task, and that child asks. It is the root's second child
/// (`core.alias.numbering`: the zero-grant child was made, and numbered `main/1`), a fresh child
/// told by its call.
#[test]
fn a_zero_granted_childs_call_does_not_take_a_later_childs_request() {
    let mut e = Endpoint::builtin("roku");
    let u1 = user("check the logs");
    let (n0, a0) = e.ask(std::slice::from_ref(&u1), ROKU_ROOT);
    assert_eq!(alias(&a0), "main");
    let r0 = asst("", vec![call("c1", "Agent", json!({"task": "check the logs"}))]);
    e.reply(n0, &r0);
    // The child granted 0 steps never asks; the root's budget is spent, its turn ends.
    let zero = tool("c1", "Step budget exhausted after 0 steps; goal: check the logs", true);
    let turn2 = [u1, r0, zero, user("try again")];
    let (n1, a1) = e.ask(&turn2, ROKU_ROOT);
    assert_goes_on(&a1, "main");
    let r1 = asst("", vec![call("c2", "Agent", json!({"task": "check the logs"}))]);
    e.reply(n1, &r1);
    let (_, a2) = e.ask(&[user("check the logs")], ROKU_CHILD);
    assert_child(&a2, "main/2");
}

/// The same, seen from the root: its next turn's user message happens to be the zero-granted
/// task. The request goes on from the root's last request and reply and does not begin with the
/// prompt, so it is the root's (`oracle.model-side.attribution`: "a new child by the spawn call
/// whose prompt … its first request begins with, else the agent whose last request and reply it
/// extends"). No child can be asking: the call's result (the budget error) was already handed to
/// the root.
#[test]
fn a_roots_new_turn_equal_to_a_finished_calls_prompt_is_the_roots() {
    let mut e = Endpoint::builtin("roku");
    let u1 = user("check the logs");
    let (n0, _) = e.ask(std::slice::from_ref(&u1), ROKU_ROOT);
    let r0 = asst("", vec![call("c1", "Agent", json!({"task": "check the logs"}))]);
    e.reply(n0, &r0);
    let zero = tool("c1", "Step budget exhausted after 0 steps; goal: check the logs", true);
    let (_, a1) = e.ask(&[u1, r0, zero, user("check the logs")], ROKU_ROOT);
    assert_goes_on(&a1, "main");
}

/// bub: a queued task cancelled before it asked (`bub.cancel.stops`: a cancelled queued task
/// leaves the queue, never runs). A later call with the same prompt makes the root's next child;
/// its first request is that child's, numbered after the cancelled one (the attributor itself
/// counts a call whose result showed a task as having made a child).
#[test]
fn a_cancelled_queued_tasks_call_does_not_take_a_later_childs_request() {
    let mut e = Endpoint::builtin("bub");
    let u = user("go");
    let (n0, _) = e.ask(std::slice::from_ref(&u), BUB_ROOT);
    let r0 = asst("", vec![call("c1", "subagent", json!({"prompt": "lint"}))]);
    e.reply(n0, &r0);
    let mut h = vec![u, r0, tool("c1", &spawned("sub-00000001", "queued"), false)];
    let (n1, a1) = e.ask(&h, BUB_ROOT);
    assert_goes_on(&a1, "main");
    let r1 = asst("", vec![call("c2", "subagent.cancel", json!({"task_id": "sub-00000001"}))]);
    e.reply(n1, &r1);
    h.extend([r1, tool("c2", r#"{"task_id":"sub-00000001","status":"cancelled"}"#, false)]);
    let (n2, a2) = e.ask(&h, BUB_ROOT);
    assert_goes_on(&a2, "main");
    let r2 = asst("", vec![call("c3", "subagent", json!({"prompt": "lint"}))]);
    e.reply(n2, &r2);
    h.extend([r2, tool("c3", &spawned("sub-00000002", "running"), false)]);
    let (n3, a3) = e.ask(&h, BUB_ROOT);
    assert_goes_on(&a3, "main");
    e.reply(n3, &asst("waiting", vec![]));
    let (_, a4) = e.ask(&[user("lint")], BUB_CHILD);
    assert_child(&a4, "main/2");
}

// ---------------------------------------------------------------------------------------------
// 2. A later request ending with a user message equal to a waiting call's prompt.
// ---------------------------------------------------------------------------------------------

/// bub: two tasks, the second queued. The root sends the running child a message
/// (`bub.send.to-active-task`) whose text is the queued sibling's prompt. The child's next
/// request goes on from its own last request and ends with the sent message: it is the child's.
/// A "departed" sibling would have to hold its *sibling's* conversation, which no session kind
/// promises or breaks into; and the send call that explains the message is on record.
#[test]
fn a_message_sent_to_a_child_equal_to_a_siblings_prompt_stays_the_childs() {
    let mut e = Endpoint::builtin("bub");
    let u = user("go");
    let (n0, _) = e.ask(std::slice::from_ref(&u), BUB_ROOT);
    let r0 = asst(
        "",
        vec![
            call("c1", "subagent", json!({"prompt": "review auth"})),
            call("c2", "subagent", json!({"prompt": "check tests"})),
        ],
    );
    e.reply(n0, &r0);
    let (m0, b0) = e.ask(&[user("review auth")], BUB_CHILD);
    assert_child(&b0, "main/1");
    let k0 = asst("", vec![call("k1", "Read", json!({"path": "auth.rs"}))]);
    e.reply(m0, &k0);
    let mut h = vec![
        u,
        r0,
        tool("c1", &spawned("sub-00000001", "running"), false),
        tool("c2", &spawned("sub-00000002", "queued"), false),
    ];
    let (n1, a1) = e.ask(&h, BUB_ROOT);
    assert_goes_on(&a1, "main");
    let r1 = asst("", vec![call("c3", "subagent.send", json!({"task_id": "sub-00000001", "message": "check tests"}))]);
    e.reply(n1, &r1);
    h.extend([r1, tool("c3", r#"{"task_id":"sub-00000001","status":"running"}"#, false)]);
    let (n2, a2) = e.ask(&h, BUB_ROOT);
    assert_goes_on(&a2, "main");
    e.reply(n2, &asst("waiting for the review", vec![]));
    // The child read its file, and the message sent to it, before its next step.
    let child = [user("review auth"), k0, tool("k1", "fn login() {}", false), user("check tests")];
    let (_, b1) = e.ask(&child, BUB_CHILD);
    assert_goes_on(&b1, "main/1");
}

/// bub: the root's steering message, while its queued task has not started, happens to be the
/// task's prompt. The request goes on from the root's last request and does not begin with the
/// prompt: `oracle.model-side.attribution` says it is the root's. The attributor takes it for the
/// queued child and marks it ambiguous, a false finding on a correct runtime (the code documents
/// the choice in `departed`; docs/evidence.md does not).
#[test]
fn a_roots_steering_equal_to_a_queued_prompt_is_the_roots() {
    let mut e = Endpoint::builtin("bub");
    let u = user("go");
    let (n0, _) = e.ask(std::slice::from_ref(&u), BUB_ROOT);
    let r0 = asst("", vec![call("c1", "subagent", json!({"prompt": "summarize"}))]);
    e.reply(n0, &r0);
    let mut h = vec![u, r0, tool("c1", &spawned("sub-00000001", "queued"), false)];
    let (n1, _) = e.ask(&h, BUB_ROOT);
    let r1 = asst("waiting", vec![]);
    e.reply(n1, &r1);
    h.extend([r1, user("summarize")]);
    let (_, a2) = e.ask(&h, BUB_ROOT);
    // The documented limit (docs/evidence.md, "Known limits"): taken for the child, but marked.
    right_or_flagged(&a2, "main");
}

// ---------------------------------------------------------------------------------------------
// 3. Ties between agents going on.
// ---------------------------------------------------------------------------------------------

/// roku: the root is asked "X" and delegates it verbatim; the child, told "X", gives the very same
/// reply (an `Agent` call with task "X", which it is not offered: `roku.child.agent-call-refused`).
/// The child's next request goes on from its own last request and reply, and equally from the
/// root's (same messages, same reply by name and arguments). The root cannot be asking: its
/// synchronous call is still running (its child has given no final reply), and the request offers
/// the child's tools and holds the depth error. It is the child's; at the very least, a request
/// fitting two agents must not be given to one of them silently.
#[test]
fn a_child_repeating_its_parents_reply_is_not_taken_for_the_parent() {
    let mut e = Endpoint::builtin("roku");
    let (n0, _) = e.ask(&[user("X")], ROKU_ROOT);
    e.reply(n0, &asst("", vec![call("c1", "Agent", json!({"task": "X"}))]));
    let (m0, b0) = e.ask(&[user("X")], ROKU_CHILD);
    assert_child(&b0, "main/1");
    let k0 = asst("", vec![call("k1", "Agent", json!({"task": "X"}))]);
    e.reply(m0, &k0);
    let (_, b1) = e.ask(&[user("X"), k0, tool("k1", DEPTH_ERROR, true)], ROKU_CHILD);
    let w = who(&b1);
    assert!(w.alias.as_str() == "main/1" || w.ambiguous.is_some(), "silently given to {}: {b1:?}", w.alias.as_str());
    assert_goes_on(&b1, "main/1");
}

// ---------------------------------------------------------------------------------------------
// 4. Fork write-back (a child never answered its own spawn call).
// ---------------------------------------------------------------------------------------------

/// bub 0.5.1, `inherit`: a correct fork child whose model numbers call ids per reply (`call_1`
/// in every reply; ids need only be unique within a message, and "the oracles compare ids only
/// within one request", docs/evidence.md). The child's own first call is `call_1`, like the
/// parent's spawn call. Its next request goes on from its own last request and holds the result
/// of *its own* call: it is the child's, not a write-back into the parent.
#[test]
fn a_fork_child_whose_own_call_reuses_the_spawn_calls_id_stays_the_childs() {
    let mut e = Endpoint::builtin("bub-0.5.1");
    let u = user("hi");
    let (n0, _) = e.ask(std::slice::from_ref(&u), BUB051_ROOT);
    let r0 = asst("", vec![call("call_1", "subagent", json!({"prompt": "look around", "session": "inherit"}))]);
    e.reply(n0, &r0);
    let (m0, b0) = e.ask(&[u.clone(), r0.clone(), user("look around")], BUB051_CHILD);
    assert_child(&b0, "main/1");
    let k0 = asst("", vec![call("call_1", "bash", json!({"cmd": "ls"}))]);
    e.reply(m0, &k0);
    let (_, b1) = e.ask(&[u, r0, user("look around"), k0, tool("call_1", "README.md", false)], BUB051_CHILD);
    assert_goes_on(&b1, "main/1");
}

/// bub 0.5.1 as shipped merges an `inherit` child's run back into the stored tape, and the
/// parent's next request reads the stored tape *before* its current turn's entries
/// (`bub051.session.fork-no-leak`, Broken; and the child forks the stored tape,
/// `bub051.session.fork-snapshot`, Broken). Turn 2: the parent's request is the stored tape
/// (turn 1, the child's prompt and final reply), then its own user message, the `subagent` call
/// and its result. It goes on from the child's last request and holds the result of the very
/// call that made the child: by the rule of issue 36 it is the parent's (a write-back), not the
/// child's. The attributor requires it to go on from the parent's last request too, which the
/// real write-back (placed before the turn's user message) never does.
#[test]
fn bub051_write_back_before_the_turns_message_is_the_parents() {
    let mut e = Endpoint::builtin("bub-0.5.1");
    let (u1, hello) = (user("hello"), asst("hi there", vec![]));
    let (n0, _) = e.ask(std::slice::from_ref(&u1), BUB051_ROOT);
    e.reply(n0, &hello);
    let u2 = user("look around");
    let (n1, a1) = e.ask(&[u1.clone(), hello.clone(), u2.clone()], BUB051_ROOT);
    assert_goes_on(&a1, "main");
    let r1 = asst("", vec![call("call_1", "subagent", json!({"prompt": "list files", "session": "inherit"}))]);
    e.reply(n1, &r1);
    // The child forks the stored tape (turn 1 only): a departure from the fork snapshot.
    let (m0, b0) = e.ask(&[u1.clone(), hello.clone(), user("list files")], BUB051_CHILD);
    assert_eq!(alias(&b0), "main/1");
    assert!(matches!(who(&b0).basis, Basis::Departed(_)), "{b0:?}");
    let fin = asst("README.md", vec![]);
    e.reply(m0, &fin);
    // The parent: stored tape (now with the child's run), then its own turn.
    let parent = [u1, hello, user("list files"), fin, u2, r1, tool("call_1", "README.md", false)];
    let (_, a2) = e.ask(&parent, BUB051_ROOT);
    assert_eq!(alias(&a2), "main", "{a2:?}");
}

/// The same rule with a runtime that gives calls its own ids (the contract allows it:
/// "The calls' ids are the core's to choose", docs/evidence.md). A broken runtime writes the
/// child's run into the parent (here in the shape the attributor's `written_back` expects: the
/// parent's request going on from its own last request too); the result of the spawn call
/// answers the runtime's id `c1`, not the model's `call_1`. It is the parent's.
#[test]
fn a_write_back_under_runtime_call_ids_is_the_parents() {
    let mut e = Endpoint::builtin("bub-0.5.1");
    let u = user("hi");
    let (n0, _) = e.ask(std::slice::from_ref(&u), BUB051_ROOT);
    e.reply(n0, &asst("", vec![call("call_1", "subagent", json!({"prompt": "look around", "session": "inherit"}))]));
    // The runtime keeps the call as `c1`.
    let kept = asst("", vec![call("c1", "subagent", json!({"prompt": "look around", "session": "inherit"}))]);
    let (m0, b0) = e.ask(&[u.clone(), kept.clone(), user("look around")], BUB051_CHILD);
    assert_child(&b0, "main/1");
    let fin = asst("nothing here", vec![]);
    e.reply(m0, &fin);
    let parent = [u, kept, user("look around"), fin, tool("c1", "nothing here", false)];
    let (_, a1) = e.ask(&parent, BUB051_ROOT);
    assert_eq!(alias(&a1), "main", "{a1:?}");
}

/// Control: the same write-back with the model's ids kept is the parent's (the rule of issue 36
/// as the attributor implements it).
#[test]
fn a_write_back_under_the_models_call_ids_is_the_parents() {
    let mut e = Endpoint::builtin("bub-0.5.1");
    let u = user("hi");
    let (n0, _) = e.ask(std::slice::from_ref(&u), BUB051_ROOT);
    let r0 = asst("", vec![call("call_1", "subagent", json!({"prompt": "look around", "session": "inherit"}))]);
    e.reply(n0, &r0);
    let (m0, b0) = e.ask(&[u.clone(), r0.clone(), user("look around")], BUB051_CHILD);
    assert_child(&b0, "main/1");
    let fin = asst("nothing here", vec![]);
    e.reply(m0, &fin);
    let parent = [u, r0, user("look around"), fin, tool("call_1", "nothing here", false)];
    let (_, a1) = e.ask(&parent, BUB051_ROOT);
    assert_eq!(alias(&a1), "main", "{a1:?}");
}

/// bub 0.5.1: two `inherit` children of one reply (run together, `bub051.parallel.one-reply`).
/// The faster ends and is merged back; the slower one's next request reads the stored tape
/// afresh, so it holds the faster one's prompt and final reply before its own prompt, reply and
/// tool result (`bub051.session.fork-siblings-apart`, Broken). It holds the slower child's own
/// prompt and its own last reply: it is the slower child's (an isolation finding on it), not a
/// later request of the faster child, which had ended.
#[test]
fn bub051_sibling_leak_stays_with_the_slower_child() {
    let mut e = Endpoint::builtin("bub-0.5.1");
    let u = user("split the work");
    let (n0, _) = e.ask(std::slice::from_ref(&u), BUB051_ROOT);
    let r0 = asst(
        "",
        vec![
            call("call_1", "subagent", json!({"prompt": "fast part", "session": "inherit"})),
            call("call_2", "subagent", json!({"prompt": "slow part", "session": "inherit"})),
        ],
    );
    e.reply(n0, &r0);
    // Turn 1: the stored tape is empty, so each child's request is its prompt alone.
    let (f0, a_fast) = e.ask(&[user("fast part")], BUB051_CHILD);
    assert_eq!(alias(&a_fast), "main/1", "{a_fast:?}");
    let (s0, a_slow) = e.ask(&[user("slow part")], BUB051_CHILD);
    assert_eq!(alias(&a_slow), "main/2", "{a_slow:?}");
    let fast_final = asst("fast done", vec![]);
    e.reply(f0, &fast_final);
    let slow_call = asst("", vec![call("k1", "bash", json!({"cmd": "sleep 1"}))]);
    e.reply(s0, &slow_call);
    let leaked = [user("fast part"), fast_final, user("slow part"), slow_call, tool("k1", "", false)];
    let (_, a) = e.ask(&leaked, BUB051_CHILD);
    assert_eq!(alias(&a), "main/2", "{a:?}");
}

// ---------------------------------------------------------------------------------------------
// 5. Handoffs and numbering.
// ---------------------------------------------------------------------------------------------

fn with_handoff(name: &str) -> Dialect {
    let mut d = Dialect::builtin(name).unwrap();
    d.handoff = vec!["transfer_to_*".into()];
    d
}

/// bub with a handoff tool: one reply starts a background child and hands the conversation off
/// (`[subagent, transfer_to_billing]`). The handoff's agent asks before the background child.
/// Two agents, two aliases: the child by its call's place (`main/1`), the handed-off agent after
/// it (`main/2`: "numbered as a child of `i`, after the children of `i`'s earlier calls and
/// handoffs"). Never one alias for both.
#[test]
fn a_handoff_after_a_spawn_call_of_the_same_reply_takes_the_next_number() {
    let mut e = Endpoint::new(with_handoff("bub"));
    let u = user("I need a refund, and check my last order");
    let (n0, _) = e.ask(std::slice::from_ref(&u), BUB_ROOT);
    let r0 = asst(
        "",
        vec![
            call("c1", "subagent", json!({"prompt": "check the last order"})),
            call("c2", "transfer_to_billing", json!({})),
        ],
    );
    e.reply(n0, &r0);
    let handed = [
        u,
        r0,
        tool("c1", &spawned("sub-00000001", "queued"), false),
        tool("c2", r#"{"assistant": "billing"}"#, false),
    ];
    let (h0, ah) = e.ask_with(&handed, &["refund", "final_answer", "fail"], None, "You are billing.");
    e.reply(h0, &asst("On it.", vec![]));
    let (_, ac) = e.ask(&[user("check the last order")], BUB_CHILD);
    assert_ne!(alias(&ah), alias(&ac), "two agents share one alias: {ah:?} / {ac:?}");
    assert_eq!(alias(&ac), "main/1", "{ac:?}");
    assert_eq!(alias(&ah), "main/2", "{ah:?}");
    assert_eq!(who(&ah).basis, Basis::Handoff);
}

/// generic (synchronous, in order) with a handoff tool: `[transfer_to_billing, spawn_agent]`.
/// A runtime that runs function tools before acting on the handoff (as openai-agents does) lets
/// the spawned child ask first. Whatever the numbering, the two agents must not share an alias.
#[test]
fn a_handoff_before_a_spawn_call_of_the_same_reply_never_shares_its_alias() {
    let mut e = Endpoint::new(with_handoff("generic"));
    let root = ["lookup", "spawn_agent", "transfer_to_billing"];
    let u = user("refund please, and look up the order");
    let (n0, _) = e.ask(std::slice::from_ref(&u), &root);
    let r0 = asst(
        "",
        vec![
            call("c1", "transfer_to_billing", json!({})),
            call("c2", "spawn_agent", json!({"prompt": "look up the order"})),
        ],
    );
    e.reply(n0, &r0);
    let (m0, ac) = e.ask(&[user("look up the order")], &["lookup"]);
    e.reply(m0, &asst("order 42", vec![]));
    let handed = [u, r0, tool("c1", r#"{"assistant": "billing"}"#, false), tool("c2", "order 42", false)];
    let (_, ah) = e.ask_with(&handed, &["refund"], None, "You are billing.");
    assert_eq!(who(&ah).basis, Basis::Handoff, "{ah:?}");
    assert_ne!(alias(&ah), alias(&ac), "two agents share one alias: {ah:?} / {ac:?}");
}

/// Control: a handoff, then the handed-off agent spawns a child; then the root's first child's
/// numbering across a handoff in a later reply. All aliases distinct and as documented.
#[test]
fn handoff_then_spawn_numbers_under_the_handed_off_agent() {
    let mut e = Endpoint::new(with_handoff("generic"));
    let root = ["lookup", "spawn_agent", "transfer_to_billing"];
    let u = user("refund");
    let (n0, _) = e.ask(std::slice::from_ref(&u), &root);
    let r0 = asst("", vec![call("c1", "transfer_to_billing", json!({}))]);
    e.reply(n0, &r0);
    let mut h = vec![u, r0, tool("c1", r#"{"assistant": "billing"}"#, false)];
    let (h0, ah) = e.ask_with(&h, &root, None, "You are billing.");
    assert_eq!(alias(&ah), "main/1");
    assert_eq!(who(&ah).basis, Basis::Handoff);
    let r1 = asst("", vec![call("c2", "spawn_agent", json!({"prompt": "find the invoice"}))]);
    e.reply(h0, &r1);
    let (m0, ac) = e.ask(&[user("find the invoice")], &["lookup"]);
    assert_child(&ac, "main/1/1");
    e.reply(m0, &asst("invoice 7", vec![]));
    h.extend([r1, tool("c2", "invoice 7", false)]);
    let (_, ah2) = e.ask_with(&h, &root, None, "You are billing.");
    assert_goes_on(&ah2, "main/1");
}

// ---------------------------------------------------------------------------------------------
// 6. Evidence the attribution has and does not read.
// ---------------------------------------------------------------------------------------------

/// A runtime makes a side call (a conversation title) that the scenario did not declare; its
/// user message quotes the user's request, which holds the prompt of a call whose child has not
/// asked yet. docs/evidence.md: "an undeclared one that no agent accounts for is the finding
/// `unattributed request`". The 'held within' rule takes it for the child instead (a departure),
/// and the real child's first request, coming next, is then left unattributed.
#[test]
fn an_undeclared_side_request_quoting_a_prompt_does_not_steal_the_child() {
    let mut e = Endpoint::builtin("bub");
    let u = user("please run the tests");
    let (n0, _) = e.ask(std::slice::from_ref(&u), BUB_ROOT);
    e.reply(n0, &asst("", vec![call("c1", "subagent", json!({"prompt": "run the tests"}))]));
    let (_, side) = e.ask(&[user("Write a five-word title for: please run the tests")], &[]);
    let (_, child) = e.ask(&[user("run the tests")], BUB_CHILD);
    // The documented limit: the side request may be taken for the child (a departure, a
    // finding), and then the real child is unattributed (a finding); never both silent.
    let side_departed = matches!(&side, Attribution::Agent(w) if matches!(w.basis, Basis::Departed(_)));
    assert!(matches!(side, Attribution::Unattributed(_)) || side_departed, "the side request: {side:?}");
    if side_departed {
        assert!(matches!(child, Attribution::Unattributed(_)), "the real child: {child:?}");
    } else {
        assert_child(&child, "main/1");
    }
}

/// bub: two calls with the same prompt and different `allowed_tools` and `model`; the children
/// start in one instant and, in an explored tie order, the second call's child asks first. Its
/// request offers the tools the second call granted and asks for its model
/// (`bub.child.tools-narrowed`, `bub.child.model`): only the second call fits. docs/evidence.md
/// justifies call order for same-prompt calls by "their children's first requests are
/// identical"; these are not.
#[test]
fn same_prompt_calls_are_told_apart_by_tools_and_model() {
    let mut e = Endpoint::builtin("bub");
    e.root_calls(
        "audit",
        BUB_ROOT,
        vec![
            call("c1", "subagent", json!({"prompt": "audit", "allowed_tools": ["Read"], "model": "small"})),
            call("c2", "subagent", json!({"prompt": "audit", "allowed_tools": ["Bash"], "model": "large"})),
        ],
    );
    let (_, second) = e.ask_with(&[user("audit")], &["Bash", "final_answer", "fail"], Some("large"), "");
    // The documented limit: taken in call order, and marked ambiguous.
    right_or_flagged(&second, "main/2");
}

/// bub 0.5.1: two `subagent` calls with one prompt run together (twins). The first child's
/// request fails with no reply (a 5xx); its client retries the identical request before the
/// second child has asked. The retry goes on from the first child's failed request (basis
/// GoesOn, as the commit says retries are read); taking it for the twin as a "departed" child,
/// ambiguous, is a false finding on a correct runtime. (Twins are interchangeable for lanes, so
/// the alias itself could go either way; the marks may not.)
#[test]
fn a_retry_while_a_twin_waits_is_no_departure() {
    let mut e = Endpoint::builtin("bub-0.5.1");
    e.root_calls(
        "twice",
        BUB051_ROOT,
        vec![
            call("call_1", "subagent", json!({"prompt": "roll"})),
            call("call_2", "subagent", json!({"prompt": "roll"})),
        ],
    );
    let (m0, b0) = e.ask(&[user("roll")], BUB051_CHILD);
    assert_child(&b0, "main/1");
    e.a.failed(m0);
    let (_, retry) = e.ask(&[user("roll")], BUB051_CHILD);
    let w = who(&retry);
    assert!(!matches!(w.basis, Basis::Departed(_)), "a retry read as a departure: {retry:?}");
    assert_eq!(w.ambiguous, None, "{retry:?}");
}

/// bub 0.5.1: a `subagent` call naming an unknown tool in `allowed_tools` fails before any child
/// starts and is answered with bub's tool-error JSON (`bub051.tools.unknown-refused`,
/// `bub051.result.tool-error`). It makes no child and takes no number
/// (`oracle.depth.alias-numbering`), so the next call's child is `main/1`. (With the same prompt
/// in both calls the alias comes out right by accident, but the child is taken for the refused
/// call and marked ambiguous.)
#[test]
fn bub051_a_call_refused_with_the_tool_error_json_takes_no_number() {
    let mut e = Endpoint::builtin("bub-0.5.1");
    let u = user("go");
    let (n0, _) = e.ask(std::slice::from_ref(&u), BUB051_ROOT);
    let r0 = asst("", vec![call("call_1", "subagent", json!({"prompt": "read it", "allowed_tools": ["nope"]}))]);
    e.reply(n0, &r0);
    let error = r#"{"kind": "tool", "message": "Tool 'subagent' execution failed.", "details": {"error": "ValueError(\"unknown tool name(s): 'nope'\")"}}"#;
    let h = [u, r0, tool("call_1", error, false)];
    let (n1, a1) = e.ask(&h, BUB051_ROOT);
    assert_goes_on(&a1, "main");
    e.reply(n1, &asst("", vec![call("call_2", "subagent", json!({"prompt": "summarize the README"}))]));
    let (_, b) = e.ask(&[user("summarize the README")], BUB051_CHILD);
    assert_child(&b, "main/1");
}

// ---------------------------------------------------------------------------------------------
// 7. Controls that held up.
// ---------------------------------------------------------------------------------------------

/// bub 0.5.1 runs a reply's calls together: the second call's child may ask first and is still
/// `main/2`; the first is `main/1`.
#[test]
fn parallel_children_asking_out_of_order_keep_their_numbers() {
    let mut e = Endpoint::builtin("bub-0.5.1");
    e.root_calls(
        "both",
        BUB051_ROOT,
        vec![
            call("call_1", "subagent", json!({"prompt": "first"})),
            call("call_2", "subagent", json!({"prompt": "second"})),
        ],
    );
    let (_, b) = e.ask(&[user("second")], BUB051_CHILD);
    assert_child(&b, "main/2");
    let (_, a) = e.ask(&[user("first")], BUB051_CHILD);
    assert_child(&a, "main/1");
}

/// An empty (blank) prompt makes no child and takes no number (`bub.spawn.empty-prompt`).
#[test]
fn a_blank_prompt_takes_no_number() {
    let mut e = Endpoint::builtin("bub");
    let (n0, _) = e.ask(&[user("go")], BUB_ROOT);
    e.reply(
        n0,
        &asst(
            "",
            vec![call("c1", "subagent", json!({"prompt": "   "})), call("c2", "subagent", json!({"prompt": "real"}))],
        ),
    );
    let (_, b) = e.ask(&[user("real")], BUB_CHILD);
    assert_child(&b, "main/1");
}

/// A JSON-arguments wrap: the runtime writes the call's arguments with its own key order and
/// whitespace; the child is told by the arguments' value.
#[test]
fn an_arguments_wrap_reads_json_in_any_key_order_and_spacing() {
    let mut d = Dialect::builtin("generic").unwrap();
    d.spawn[0].wrap = Some(PromptWrap::arguments("Input:"));
    let mut e = Endpoint::new(d);
    let (n0, _) = e.ask(&[user("go")], &["spawn_agent"]);
    e.reply(
        n0,
        &asst("", vec![call("c1", "spawn_agent", json!({"prompt": "find x", "depth": 2, "tags": ["a", "b"]}))]),
    );
    let written = "Input:\n{\n  \"tags\" : [ \"a\",\"b\" ],\n  \"depth\":2, \"prompt\":\"find x\"\n}\n";
    let (_, b) = e.ask(&[user(written)], &[]);
    assert_child(&b, "main/1");
}

/// A template wrap, the runtime trimming the prompt as the dialect says.
#[test]
fn a_template_wrap_tells_the_child() {
    let mut d = Dialect::builtin("generic").unwrap();
    d.spawn[0].wrap = Some(PromptWrap::template("Your task:\n{prompt}\nReport back."));
    let mut e = Endpoint::new(d);
    let (n0, _) = e.ask(&[user("go")], &["spawn_agent"]);
    e.reply(n0, &asst("", vec![call("c1", "spawn_agent", json!({"prompt": "  find x  "}))]));
    let (_, b) = e.ask(&[user("Your task:\nfind x\nReport back.")], &[]);
    assert_child(&b, "main/1");
}

/// roku with `depth_limit` 2: the root's reply holds `[Agent plan, Agent build]`; they run one
/// after another (`roku.agent.serial`). The first child (`main/1`, task "plan") itself calls
/// `Agent` with task "build", and that grandchild asks. The root's second call cannot have
/// started: its first call's child is still running (it has given no final reply). So the
/// request is `main/1/1`'s, not the root's second child's; the attributor already reads "calls
/// of a reply run in order" for calls of one reply, not across a parent and its child.
#[test]
fn same_prompt_from_different_parents_in_a_serial_runtime() {
    let mut e = Endpoint::builtin("roku");
    let (n0, _) = e.ask(&[user("go")], ROKU_ROOT);
    e.reply(
        n0,
        &asst("", vec![call("c1", "Agent", json!({"task": "plan"})), call("c2", "Agent", json!({"task": "build"}))]),
    );
    let (m0, b0) = e.ask(&[user("plan")], ROKU_ROOT);
    assert_child(&b0, "main/1");
    e.reply(m0, &asst("", vec![call("k1", "Agent", json!({"task": "build"}))]));
    // main/1's own `Agent` call's child asks (serial: main's second call has not run yet).
    let (_, g) = e.ask(&[user("build")], ROKU_CHILD);
    // The documented limit: taken for the root's second call's child, and marked ambiguous.
    right_or_flagged(&g, "main/1/1");
}

/// `want`'s request, or, where a documented limit of the attribution takes it for another
/// agent, an attribution marked ambiguous (a finding): never a silent wrong one.
fn right_or_flagged(a: &Attribution, want: &str) {
    let w = who(a);
    assert!(w.alias.as_str() == want || w.ambiguous.is_some(), "silently given to {}: {a:?}", w.alias.as_str());
}

/// A root with a long history (2,000 steps, each a tool call and result): every request is the
/// root's, going on. (How fast is a benchmark's to say, never a timed test's.)
#[test]
fn a_long_history_is_attributed_to_the_root_throughout() {
    let mut e = Endpoint::builtin("roku");
    let mut h = vec![user("loop")];
    for i in 0..2000 {
        let (n, a) = e.ask(&h, ROKU_ROOT);
        assert_eq!(alias(&a), "main", "request {i}: {a:?}");
        let r = asst("", vec![call(&format!("c{i}"), "Read", json!({"path": format!("f{i}")}))]);
        e.reply(n, &r);
        h.extend([r, tool(&format!("c{i}"), "ok", false)]);
    }
}

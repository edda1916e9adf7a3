//! Attribution by evidence (issue 36): a child is a child even when its first request departs
//! from what its session promises, the departure is reported under the rule it breaks, a
//! request that fits two candidates is an ambiguous finding, a handoff hands the conversation
//! to a new agent, a declared prompt wrap is read, and a request put down to an agent only by a
//! shared start is never silent.
//!
//! Each test feeds the attributor requests as a model endpoint would see them, then judges the
//! record with the model-side oracles.

use std::sync::Arc;
use std::time::Duration;

use rehearsal::dialect::{Dialect, PromptWrap};
use rehearsal::internals::evidence::attribution::{Attribution, Attributor, Basis, ModelSide};
use rehearsal::internals::oracles::model_side;
use rehearsal::rules::Rules;
use rehearsal::sut::llm::{Message, ToolCall, Transcript};

/// A conversation as the model is sent it (the model-side oracle tests use it too).
pub(crate) struct Talk {
    attributor: Attributor,
    at: Duration,
}

impl Talk {
    pub(crate) fn new(dialect: Dialect) -> Talk {
        Talk { attributor: Attributor::new(Arc::new(dialect), Vec::new()), at: Duration::ZERO }
    }

    /// A request of `messages` offering `tools`: its number and attribution.
    pub(crate) fn ask(&mut self, messages: &[Message], tools: &[&str]) -> (usize, Attribution) {
        self.at += Duration::from_millis(1);
        let transcript: Transcript = messages.iter().cloned().collect();
        let tools = tools.iter().map(|t| t.to_string()).collect();
        self.attributor.request("", &transcript, tools, None, self.at)
    }

    pub(crate) fn reply(&mut self, number: usize, reply: &Message) {
        self.attributor.replied(number, reply, self.at);
    }

    /// No reply will come for request `number` (the model call failed).
    pub(crate) fn failed(&mut self, number: usize) {
        self.attributor.failed(number);
    }

    /// Moves the clock to `ms` milliseconds into the run.
    pub(crate) fn at(&mut self, ms: u64) {
        self.at = Duration::from_millis(ms);
    }

    /// The endpoint scheduled a reply ending request `number`'s loop, due at `ms`.
    pub(crate) fn ends_loop_due(&mut self, number: usize, ms: u64) {
        self.attributor.ends_loop_due(number, Duration::from_millis(ms));
    }

    pub(crate) fn finish(self) -> ModelSide {
        self.attributor.finish()
    }
}

pub(crate) fn call(id: &str, name: &str, args: serde_json::Value) -> ToolCall {
    ToolCall { id: id.into(), name: name.into(), args: Arc::new(args) }
}

fn alias(a: &Attribution) -> String {
    match a {
        Attribution::Agent(who) => who.alias.to_string(),
        other => format!("{other:?}"),
    }
}

fn basis(a: &Attribution) -> Option<&Basis> {
    match a {
        Attribution::Agent(who) => Some(&who.basis),
        _ => None,
    }
}

fn findings(side: &ModelSide, dialect: &Dialect) -> Vec<String> {
    model_side::check(side, &Rules::bub(), dialect, None).iter().map(ToString::to_string).collect()
}

fn bub051() -> Dialect {
    Dialect::builtin("bub-0.5.1").unwrap()
}

/// bub 0.5.1's `session: "inherit"` in a second turn: the child's first request is the
/// *stored* conversation (turn 1 only) and the prompt, not the snapshot at the call. It is the
/// child's, and the fork snapshot oracle says what it lacks, in numbers.
#[test]
fn an_inherit_child_started_from_an_older_snapshot_is_the_child_and_a_fork_snapshot_finding() {
    let mut t = Talk::new(bub051());
    let (u1, r1) = (Message::user("Turn one."), Message::assistant("Done one.", Vec::new()));
    let (n, _) = t.ask(std::slice::from_ref(&u1), &["subagent"]);
    t.reply(n, &r1);
    let u2 = Message::user("Turn two.");
    let spawn = Message::assistant(
        "",
        vec![call("c1", "subagent", serde_json::json!({"prompt": "Look.", "session": "inherit"}))],
    );
    let (n, a) = t.ask(&[u1.clone(), r1.clone(), u2.clone()], &["subagent"]);
    assert_eq!(alias(&a), "main");
    t.reply(n, &spawn);
    // The child: turn one's stored messages, then the prompt.
    let (n, a) = t.ask(&[u1.clone(), r1.clone(), Message::user("Look.")], &[]);
    assert_eq!(alias(&a), "main/1", "{a:?}");
    assert!(matches!(basis(&a), Some(Basis::Departed(_))), "{a:?}");
    t.reply(n, &Message::assistant("Seen.", Vec::new()));
    let (_, a) = t.ask(&[u1, r1, u2, spawn, Message::tool("c1", "Seen.", false)], &["subagent"]);
    assert_eq!(alias(&a), "main");
    let got = findings(&t.finish(), &bub051());
    assert!(
        got.iter().any(|f| f
            .starts_with("model-side fork-snapshot (oracle.model-side.fork-snapshot): main/1 request #1")
            && f.contains(
                "2 messages before its prompt where the snapshot at the call holds 4 (it lacks 2 the parent held)"
            )),
        "{got:#?}"
    );
    assert!(!got.iter().any(|f| f.contains("oracle.model-side.attribution")), "no guess, no ambiguity: {got:#?}");
}

/// A temp child given its parent's conversation before its prompt: the child's, and an
/// isolation finding with the count.
#[test]
fn a_temp_child_holding_its_parents_history_is_the_child_and_an_isolation_finding() {
    let mut t = Talk::new(bub051());
    let u1 = Message::user("Start.");
    let spawn = Message::assistant(
        "",
        vec![call("c1", "subagent", serde_json::json!({"prompt": "Count.", "session": "temp"}))],
    );
    let (n, _) = t.ask(std::slice::from_ref(&u1), &["subagent"]);
    t.reply(n, &spawn);
    let (_, a) = t.ask(&[u1, spawn, Message::user("Count.")], &[]);
    assert_eq!(alias(&a), "main/1", "{a:?}");
    let got = findings(&t.finish(), &bub051());
    assert!(
        got.iter().any(|f| f.starts_with("model-side isolation (oracle.model-side.isolation): main/1 request #1")
            && f.contains("its prompt comes after 2 messages, where a fresh child's request holds none before it")),
        "{got:#?}"
    );
}

/// A prompt wrapped in a template the dialect does not declare: the prompt within a longer
/// message still tells the child, and the wrap is an isolation finding.
#[test]
fn a_prompt_in_an_undeclared_template_is_the_child_and_an_isolation_finding() {
    let mut t = Talk::new(bub051());
    let u1 = Message::user("Start.");
    let spawn = Message::assistant("", vec![call("c1", "subagent", serde_json::json!({"prompt": "Count the files."}))]);
    let (n, _) = t.ask(std::slice::from_ref(&u1), &["subagent"]);
    t.reply(n, &spawn);
    let (_, a) = t.ask(&[Message::user("Your parent asks:\nCount the files.\nReply when done.")], &[]);
    assert_eq!(alias(&a), "main/1", "{a:?}");
    let got = findings(&t.finish(), &bub051());
    assert!(
        got.iter().any(|f| f.contains("(oracle.model-side.isolation): main/1 request #1")
            && f.contains("a wrap the dialect does not declare")),
        "{got:#?}"
    );
}

/// The same wrap, declared in the dialect: the child's first request is what it promises.
#[test]
fn a_declared_template_or_arguments_wrap_is_read_and_raises_nothing() {
    for (wrap, first) in [
        (
            PromptWrap::template("Your parent asks:\n{prompt}\nReply when done."),
            "Your parent asks:\nCount the files.\nReply when done.",
        ),
        (PromptWrap::arguments("Input:"), "Input: {\"prompt\": \"Count the files.\"}"),
    ] {
        let mut dialect = bub051();
        dialect.spawn[0].wrap = Some(wrap.clone());
        let mut t = Talk::new(dialect.clone());
        let u1 = Message::user("Start.");
        let spawn =
            Message::assistant("", vec![call("c1", "subagent", serde_json::json!({"prompt": "Count the files."}))]);
        let (n, _) = t.ask(std::slice::from_ref(&u1), &["subagent"]);
        t.reply(n, &spawn);
        let (n, a) = t.ask(&[Message::user(first)], &[]);
        assert_eq!(alias(&a), "main/1", "{wrap:?}: {a:?}");
        assert_eq!(basis(&a), Some(&Basis::Child), "{wrap:?}");
        t.reply(n, &Message::assistant("3 files.", Vec::new()));
        let (_, a) = t.ask(&[u1, spawn, Message::tool("c1", "3 files.", false)], &["subagent"]);
        assert_eq!(alias(&a), "main");
        let got = findings(&t.finish(), &dialect);
        assert!(got.is_empty(), "{wrap:?}: {got:#?}");
    }
}

/// Two calls whose children would start alike but are not twins (here another model): the
/// first to ask is taken for the earlier call, and the ambiguity is a finding naming both.
/// Twins (the same parent, tool and arguments) are interchangeable and raise nothing.
#[test]
fn a_request_fitting_two_calls_that_differ_is_an_ambiguous_finding_and_twins_are_not() {
    for (second, ambiguous) in [
        (serde_json::json!({"prompt": "Same.", "model": "other"}), true),
        (serde_json::json!({"prompt": "Same."}), false),
    ] {
        let dialect = Dialect::builtin("bub").unwrap();
        let mut t = Talk::new(dialect.clone());
        let spawn = Message::assistant(
            "",
            vec![
                call("c1", "subagent", serde_json::json!({"prompt": "Same."})),
                call("c2", "subagent", second.clone()),
            ],
        );
        let (n, _) = t.ask(&[Message::user("Start.")], &["subagent"]);
        t.reply(n, &spawn);
        let (_, a) = t.ask(&[Message::user("Same.")], &[]);
        assert_eq!(alias(&a), "main/1", "{a:?}");
        let got = findings(&t.finish(), &dialect);
        let said = got.iter().any(|f| {
            f.starts_with("model-side attribution (oracle.model-side.attribution): main/1 request #1 (exchange 1): ambiguous request: it fits the child of main's `subagent` call \"Same.\" (exchange 0) and the child of main's `subagent` call \"Same.\" (exchange 0) alike")
        });
        assert_eq!(said, ambiguous, "{second}: {got:#?}");
    }
}

/// A handoff: the conversation's next request is the target agent's (its own alias, numbered
/// as a child of the agent that handed off), and its later requests go on as its own.
#[test]
fn a_handoff_hands_the_conversation_to_a_new_agent() {
    let mut dialect = Dialect::builtin("generic").unwrap();
    dialect.handoff = vec!["transfer_to_*".into()];
    let mut t = Talk::new(dialect.clone());
    let u1 = Message::user("Book a flight.");
    let hand = Message::assistant("", vec![call("h1", "transfer_to_booking", serde_json::json!({}))]);
    let (n, _) = t.ask(std::slice::from_ref(&u1), &["transfer_to_booking"]);
    t.reply(n, &hand);
    let handed = vec![u1, hand, Message::tool("h1", "{\"assistant\": \"booking\"}", false)];
    let (n, a) = t.ask(&handed, &["book"]);
    assert_eq!(alias(&a), "main/1", "{a:?}");
    assert_eq!(basis(&a), Some(&Basis::Handoff));
    let booked = Message::assistant("", vec![call("b1", "book", serde_json::json!({}))]);
    t.reply(n, &booked);
    let mut later = handed.clone();
    later.extend([booked, Message::tool("b1", "booked", false)]);
    let (_, a) = t.ask(&later, &["book"]);
    assert_eq!(alias(&a), "main/1");
    assert_eq!(basis(&a), Some(&Basis::GoesOn));
    let side = t.finish();
    assert_eq!(side.handoffs.len(), 1);
    assert_eq!(side.handoffs[0].to.as_ref().map(ToString::to_string).as_deref(), Some("main/1"));
}

/// A request that goes on from no agent's last request and that no waiting call accounts for
/// is put down by a shared start only, and that is always a finding (with the append-only
/// oracle's).
#[test]
fn a_request_put_down_by_a_shared_start_only_is_never_silent() {
    let dialect = bub051();
    let mut t = Talk::new(dialect.clone());
    let (u1, r1) = (Message::user("One."), Message::assistant("Ok.", Vec::new()));
    let (n, _) = t.ask(std::slice::from_ref(&u1), &[]);
    t.reply(n, &r1);
    let (_, a) = t.ask(&[u1, Message::user("Not the reply given.")], &[]);
    assert_eq!(alias(&a), "main");
    assert_eq!(basis(&a), Some(&Basis::SharedStart));
    let got = findings(&t.finish(), &dialect);
    assert!(
        got.iter().any(|f| f.starts_with("model-side attribution (oracle.model-side.attribution): main request #2")
            && f.contains("only by the start it shares with the agent's last request (1 messages)")),
        "{got:#?}"
    );
    assert!(got.iter().any(|f| f.contains("(oracle.model-side.append-only): main request #2")), "{got:#?}");
}

/// A parent whose later request holds its child's own reply (a fork written back): isolation.
#[test]
fn a_parent_holding_its_childs_reply_is_an_isolation_finding() {
    let dialect = bub051();
    let mut t = Talk::new(dialect.clone());
    let u1 = Message::user("Start.");
    let spawn = Message::assistant(
        "",
        vec![call("c1", "subagent", serde_json::json!({"prompt": "Look.", "session": "inherit"}))],
    );
    let (n, _) = t.ask(std::slice::from_ref(&u1), &["subagent"]);
    t.reply(n, &spawn);
    let (n, a) = t.ask(&[u1.clone(), spawn.clone(), Message::user("Look.")], &[]);
    assert_eq!((alias(&a), basis(&a)), ("main/1".to_string(), Some(&Basis::Child)));
    let seen = Message::assistant("Seen it all.", Vec::new());
    t.reply(n, &seen);
    // The child's entries written back into the parent's conversation.
    let (_, a) =
        t.ask(&[u1, spawn, Message::user("Look."), seen, Message::tool("c1", "Seen it all.", false)], &["subagent"]);
    assert_eq!(alias(&a), "main", "{a:?}");
    let got = findings(&t.finish(), &dialect);
    assert!(
        got.iter().any(|f| f.starts_with("model-side isolation (oracle.model-side.isolation): main request #2")
            && f.contains("holds a reply of its child main/1")),
        "{got:#?}"
    );
}

/// A queued fork child whose snapshot was taken late goes on from its parent's later request
/// and ends with the prompt of a call the parent made earlier. Offering the parent's tools it
/// fits the parent going on as well: ambiguous. Offering other tools (a child at the depth
/// limit is offered no spawn tool), it is the child's alone.
#[test]
fn a_late_fork_snapshot_is_ambiguous_only_when_the_tools_offered_cannot_tell() {
    for (tools, ambiguous) in [(&["subagent"][..], true), (&[][..], false)] {
        let dialect = Dialect::builtin("bub").unwrap();
        let mut t = Talk::new(dialect.clone());
        let u1 = Message::user("Start.");
        let spawn = Message::assistant(
            "",
            vec![
                call("c1", "subagent", serde_json::json!({"prompt": "Job A."})),
                call("c2", "subagent", serde_json::json!({"prompt": "Job F.", "session": "fork"})),
            ],
        );
        let (n, _) = t.ask(std::slice::from_ref(&u1), &["subagent"]);
        t.reply(n, &spawn);
        let (n, _) = t.ask(&[Message::user("Job A.")], &[]);
        t.reply(n, &Message::assistant("A done.", Vec::new()));
        let results =
            [Message::tool("c1", "{\"task_id\":\"t1\"}", false), Message::tool("c2", "{\"task_id\":\"t2\"}", false)];
        let mut parent = vec![u1, spawn];
        parent.extend(results);
        let (n, a) = t.ask(&parent, &["subagent"]);
        assert_eq!(alias(&a), "main");
        let wait = Message::assistant("", vec![call("w1", "subagent.wait", serde_json::json!({}))]);
        t.reply(n, &wait);
        // F's first request: the parent's conversation as of now, not at the call.
        let mut late = parent.clone();
        late.extend([wait, Message::user("Job F.")]);
        let (_, a) = t.ask(&late, tools);
        assert_eq!(alias(&a), "main/2", "{a:?}");
        let got = findings(&t.finish(), &dialect);
        assert!(got.iter().any(|f| f.contains("(oracle.model-side.fork-snapshot): main/2 request #1")), "{got:#?}");
        let said =
            got.iter().any(|f| f.contains("ambiguous request: it goes on from main's last request (exchange 2)"));
        assert_eq!(said, ambiguous, "{tools:?}: {got:#?}");
    }
}

/// bub 0.5.1 writes an inherit child's entries back into the stored conversation before the
/// turn's user message: the root's next request goes on from the child's last request, yet
/// answers the call that made the child and holds the root's own last reply after the child's
/// entries. It is the root's, rewritten: an isolation finding, never the child's.
#[test]
fn a_parent_whose_history_had_its_childs_entries_put_before_its_turn_is_still_the_parent() {
    let mut t = Talk::new(bub051());
    let (u1, r1, u2) = (Message::user("One."), Message::assistant("Ok.", Vec::new()), Message::user("Two."));
    let (n, _) = t.ask(std::slice::from_ref(&u1), &["subagent"]);
    t.reply(n, &r1);
    let spawn = Message::assistant(
        "",
        vec![call("c1", "subagent", serde_json::json!({"prompt": "Probe.", "session": "inherit"}))],
    );
    let (n, _) = t.ask(&[u1.clone(), r1.clone(), u2.clone()], &["subagent"]);
    t.reply(n, &spawn);
    let (n, a) = t.ask(&[u1.clone(), r1.clone(), Message::user("Probe.")], &[]);
    assert_eq!(alias(&a), "main/1");
    let probed = Message::assistant("Probed.", Vec::new());
    t.reply(n, &probed);
    let merged = [u1, r1, Message::user("Probe."), probed, u2, spawn, Message::tool("c1", "Probed.", false)];
    let (_, a) = t.ask(&merged, &["subagent"]);
    assert_eq!(alias(&a), "main", "{a:?}");
    assert_eq!(basis(&a), Some(&Basis::Rewritten));
    let got = findings(&t.finish(), &bub051());
    assert!(
        got.iter().any(|f| f.contains("(oracle.model-side.isolation): main request #3")
            && f.contains("holds a reply of its child main/1")),
        "{got:#?}"
    );
    assert!(!got.iter().any(|f| f.contains("oracle.model-side.attribution")), "{got:#?}");
}

/// py_runtime's `fork_splice`: the child's prompt and reply written into the parent's
/// conversation after the parent's own last reply, before the notification. The request goes on
/// from the parent's last request and holds the child's reply with nothing answering it: the
/// parent's, and an isolation finding; never the child's.
#[test]
fn a_childs_entries_written_after_its_parents_reply_leave_the_request_the_parents() {
    let dialect = Dialect::builtin("bub").unwrap();
    let mut t = Talk::new(dialect.clone());
    let u1 = Message::user("Fork a child.");
    let spawn = Message::assistant(
        "",
        vec![call("c1", "subagent", serde_json::json!({"prompt": "Job F.", "session": "fork"}))],
    );
    let (n, _) = t.ask(std::slice::from_ref(&u1), &["subagent"]);
    t.reply(n, &spawn);
    let result = Message::tool("c1", "{\"task_id\":\"t1\",\"status\":\"running\"}", false);
    let (n, _) = t.ask(&[u1.clone(), spawn.clone(), result.clone()], &["subagent"]);
    let waiting = Message::assistant("Waiting.", Vec::new());
    t.reply(n, &waiting);
    let (n, a) = t.ask(&[u1.clone(), spawn.clone(), Message::user("Job F.")], &[]);
    assert_eq!(alias(&a), "main/1");
    let three = Message::assistant("three open issues", Vec::new());
    t.reply(n, &three);
    let notice = Message::user(
        "<subagent-notification task_id=\"t1\" status=\"completed\">\nthree open issues\n</subagent-notification>",
    );
    let (_, a) = t.ask(&[u1, spawn, result, waiting, Message::user("Job F."), three, notice], &["subagent"]);
    assert_eq!(alias(&a), "main", "{a:?}");
    let got = findings(&t.finish(), &dialect);
    assert!(
        got.iter().any(|f| f.contains("(oracle.model-side.isolation): main request #3")
            && f.contains("holds a reply of its child main/1")),
        "{got:#?}"
    );
}

//! Re-rendered history (the dialect's `history: rendered`): a runtime that writes an agent's
//! history afresh as text each request, as smolagents 1.26.0 does
//! (`examples/frameworks/smolagents/WIRE.md`), is followed from request to request by what it
//! promises, and a runtime that drops or rewrites earlier history is still an append-only
//! finding.
//!
//! The requests are smolagents' own, captured whole by `examples/frameworks/smolagents/capture/`
//! (the request body, the `X-Rehearsal-Agent` label, the reply given), replayed through the
//! attributor with the example's own dialect file.

use std::sync::Arc;

use rehearsal::dialect::{Dialect, History};
use rehearsal::internals::evidence::attribution::{Attribution, Basis, ModelSide};
use rehearsal::internals::oracles::model_side;
use rehearsal::rules::Rules;
use rehearsal::sut::llm::{Message, Role, ToolCall};
use rehearsal::wire::{Absent, AgentHeader, ground_truth};

use super::attribution::Talk;

/// One captured request: the runtime's label, its messages (no system message), the tools it
/// offered, and the reply it was given (`None`: an error status).
#[derive(Clone)]
struct Captured {
    label: String,
    messages: Vec<Message>,
    tools: Vec<String>,
    reply: Option<Message>,
}

fn example(file: &str) -> String {
    format!("{}/examples/frameworks/smolagents/{file}", env!("CARGO_MANIFEST_DIR"))
}

fn smolagents() -> Dialect {
    Dialect::load(&example("dialect.json")).unwrap()
}

fn text_of(content: &serde_json::Value) -> String {
    match content {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        _ => String::new(),
    }
}

/// A capture file (`capture/NAME.jsonl`), request by request.
fn capture(name: &str) -> Vec<Captured> {
    let text = std::fs::read_to_string(example(&format!("capture/{name}.jsonl"))).unwrap();
    text.lines()
        .map(|line| {
            let record: serde_json::Value = serde_json::from_str(line).unwrap();
            let request = &record["request"];
            let messages = request["messages"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|m| m["role"] != "system")
                .map(|m| {
                    let text = text_of(&m["content"]);
                    match m["role"].as_str().unwrap() {
                        "user" => Message::user(text),
                        "assistant" => Message::assistant(text, Vec::new()),
                        other => panic!("smolagents sends no {other} message"),
                    }
                })
                .collect();
            let tools = request["tools"]
                .as_array()
                .map(|t| t.iter().map(|t| t["function"]["name"].as_str().unwrap().to_string()).collect())
                .unwrap_or_default();
            let reply = (record["status"] == 200).then(|| {
                let response: serde_json::Value = serde_json::from_str(record["response"].as_str().unwrap()).unwrap();
                let m = &response["choices"][0]["message"];
                let calls = m["tool_calls"]
                    .as_array()
                    .map(|calls| {
                        calls
                            .iter()
                            .map(|c| ToolCall {
                                id: c["id"].as_str().unwrap().into(),
                                name: c["function"]["name"].as_str().unwrap().into(),
                                args: Arc::new(
                                    serde_json::from_str(c["function"]["arguments"].as_str().unwrap()).unwrap(),
                                ),
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                Message::assistant(m["content"].as_str().unwrap_or_default(), calls)
            });
            Captured { label: record["agent"].as_str().unwrap().to_string(), messages, tools, reply }
        })
        .collect()
}

/// The record of `requests` attributed under `dialect`, and the labels.
fn replay(requests: &[Captured], dialect: &Dialect) -> (ModelSide, Vec<Option<String>>) {
    let mut t = Talk::new(dialect.clone());
    for r in requests {
        let tools: Vec<&str> = r.tools.iter().map(String::as_str).collect();
        let (n, _) = t.ask(&r.messages, &tools);
        match &r.reply {
            Some(reply) => t.reply(n, reply),
            None => t.failed(n),
        }
    }
    (t.finish(), requests.iter().map(|r| Some(r.label.clone())).collect())
}

fn findings(side: &ModelSide, dialect: &Dialect) -> Vec<String> {
    model_side::check(side, &Rules::bub(), dialect, None).iter().map(ToString::to_string).collect()
}

fn aliases(side: &ModelSide) -> Vec<String> {
    side.attributions
        .iter()
        .map(|a| match a {
            Attribution::Agent(who) => format!("{} #{}", who.alias, who.number),
            other => format!("{other:?}"),
        })
        .collect()
}

fn reused() -> AgentHeader {
    AgentHeader { name: "X-Rehearsal-Agent".into(), absent: Absent::Unlabelled, reused: true }
}

/// Every capture: each request goes on from its agent's last one (no shared start, no
/// finding), and the attribution agrees with smolagents' own labels on every request.
#[test]
fn smolagents_captured_requests_are_followed_agent_by_agent_and_raise_nothing() {
    let dialect = smolagents();
    for (name, want) in [
        // The manager, the researcher's three requests, the manager twice more.
        ("three-requests", &["main #1", "main/1 #1", "main/1 #2", "main/1 #3", "main #2", "main #3"][..]),
        // A text reply answered by an error message, then the request after max_steps (no
        // tools, another system text, the last user message grown).
        ("max-steps-and-errors", &["main #1", "main/1 #1", "main/1 #2", "main/1 #3", "main #2"][..]),
        // The researcher's model call fails; the manager's next request is its first one with
        // the error merged into the task message (no assistant message for the raising call).
        ("member-error", &["main #1", "main/1 #1", "main #2"][..]),
    ] {
        let (side, labels) = replay(&capture(name), &dialect);
        assert_eq!(aliases(&side), want, "{name}");
        for (i, a) in side.attributions.iter().enumerate().skip(1) {
            let Attribution::Agent(who) = a else { unreachable!() };
            assert!(matches!(who.basis, Basis::GoesOn | Basis::Child), "{name} exchange {i}: {:?}", who.basis);
        }
        let got = findings(&side, &dialect);
        assert!(got.is_empty(), "{name}: {got:#?}");
        let truth = ground_truth(&side, &labels, &reused());
        assert!(truth.wrong.is_empty() && truth.unattributed == 0, "{name}: {truth:?}");
        assert_eq!(truth.right, want.len(), "{name}");
    }
}

/// The default (`kept`) still reads the same requests as a history rewritten: every later
/// request is a shared start only, as before the field existed. The field changes nothing for
/// a dialect that does not set it.
#[test]
fn without_the_field_the_same_requests_are_shared_starts_and_append_only_findings() {
    let mut dialect = smolagents();
    dialect.history = History::Kept;
    let (side, _) = replay(&capture("three-requests"), &dialect);
    let got = findings(&side, &dialect);
    assert!(got.iter().any(|f| f.contains("only by the start it shares")), "{got:#?}");
    assert!(got.iter().any(|f| f.contains("(oracle.model-side.append-only): main/1 request #2")), "{got:#?}");
}

/// A runtime that drops or rewrites earlier history is still caught under `rendered`: each
/// tampering of the researcher's third request (exchange 3, which goes on from exchange 2) is a
/// finding, of the oracle that reads it as under `kept`: a step dropped, messages swapped or an
/// earlier reply rewritten is `append-only` (the request goes on from no earlier request of the
/// agent); an earlier message changed so that no start is shared is an unattributed request; the
/// last reply rewritten, or a message spliced in after the first step, reads as going on from the
/// request before (an agent resumed, which append-only allows, as a named session's run may
/// start again from an earlier record) and is `isolation`: a message the agent's loop did not
/// make.
#[test]
fn a_drop_or_a_splice_is_still_a_finding_under_rendered_history() {
    let dialect = smolagents();
    let original = capture("three-requests");
    // [W, a1 "Looking it up.\nCalling tools:…", o1 "Observation:…Paris…", a2 "Calling tools:…", o2]
    assert_eq!(original[3].messages.len(), 5);
    let edit = |how: &dyn Fn(&mut Vec<Message>)| {
        let mut requests = original.clone();
        how(&mut requests[3].messages);
        requests
    };
    let append_only = "model-side append-only (oracle.model-side.append-only): main/1 request #3 (exchange 3): request #3 does not begin with request #2";
    let unattributed = "model-side attribution (oracle.model-side.attribution): ? (exchange 3): unattributed request";
    let isolation = "model-side isolation (oracle.model-side.isolation): main/1 request #3 (exchange 3): main/1's request holds a message its own loop did not make";
    let cases: Vec<(&str, Vec<Captured>, &str)> = vec![
        ("an earlier step dropped", edit(&|m| drop(m.drain(1..3))), append_only),
        ("two earlier messages swapped", edit(&|m| m.swap(1, 2)), append_only),
        (
            "an earlier reply's text dropped",
            edit(&|m| m[1].content = m[1].content.replace("Looking it up.\n", "")),
            append_only,
        ),
        (
            "an earlier reply's arguments rewritten",
            edit(&|m| m[1].content = m[1].content.replace("Paris", "Lyon")),
            append_only,
        ),
        ("the first message grown", edit(&|m| m[0].content.push_str("\nmore")), unattributed),
        ("the wrapped task rewritten", edit(&|m| m[0].content = m[0].content.replace("France", "Spain")), unattributed),
        (
            "the last reply's arguments rewritten",
            edit(&|m| m[3].content = m[3].content.replace("print(2)", "print(3)")),
            isolation,
        ),
        (
            "a call of the last reply dropped",
            edit(&|m| {
                m[3].content = m[3].content.replace(", {'id': 'call_4', 'type': 'function', 'function': {'name': 'python_interpreter', 'arguments': {'code': 'print(2)'}}}", "")
            }),
            isolation,
        ),
        ("a message spliced in", edit(&|m| m.insert(2, Message::user("Spliced."))), isolation),
    ];
    for (what, requests, want) in cases {
        assert_ne!(requests[3].messages, original[3].messages, "{what}: the edit changed nothing");
        let (side, _) = replay(&requests, &dialect);
        let got = findings(&side, &dialect);
        assert!(got.iter().any(|f| f.starts_with(want)), "{what}: {got:#?}");
    }
}

/// The one growth the field allows is narrow: the last user message of the agent's previous
/// request grown by appended text, with nothing after it, and only after a reply with calls
/// (a call raised, and smolagents merged its error into that message). After a reply without
/// calls the reply must be kept; and text put before the message, not after, is a rewrite.
#[test]
fn a_grown_last_message_goes_on_only_after_a_reply_with_calls_and_only_by_appended_text() {
    let dialect = smolagents();
    let task = Message::user("New task:\nAsk the researcher, who fails.");
    let grown = Message::user("New task:\nAsk the researcher, who fails.\nError:\nboom\nNow let's retry: …\n");
    let prefixed = Message::user("Error:\nboom\nNew task:\nAsk the researcher, who fails.");
    let tools = ["python_interpreter", "final_answer"];
    let calls = Message::assistant(
        "",
        vec![ToolCall {
            id: "call_1".into(),
            name: "python_interpreter".into(),
            args: Arc::new(serde_json::json!({"code": "1/0"})),
        }],
    );
    let text = Message::assistant("Just text.", Vec::new());
    for (reply, next, goes_on) in
        [(&calls, &grown, true), (&text, &grown, false), (&calls, &prefixed, false), (&calls, &task, false)]
    {
        let mut t = Talk::new(dialect.clone());
        let (n, _) = t.ask(std::slice::from_ref(&task), &tools);
        t.reply(n, reply);
        let (_, a) = t.ask(std::slice::from_ref(next), &tools);
        let went_on = matches!(&a, Attribution::Agent(who) if who.basis == Basis::GoesOn);
        assert_eq!(went_on, goes_on, "{:?} then {:?}: {a:?}", reply.content, next.content);
        // Not going on, the one-message request shares no start with the agent's: unattributed.
        let got = findings(&t.finish(), &dialect);
        assert_eq!(got.is_empty(), goes_on, "{:?} then {:?}: {got:#?}", reply.content, next.content);
    }
}

/// A child's results come back as the runtime's own user message after its own re-rendered
/// reply: no isolation finding. A user message the child's loop did not make (not after one of
/// its own replies) still is one, and so is a parent's request holding its child's reply.
#[test]
fn isolation_reads_a_re_rendered_child_and_still_catches_a_write_back() {
    let dialect = smolagents();
    let requests = capture("three-requests");
    let (side, _) = replay(&requests, &dialect);
    assert!(findings(&side, &dialect).is_empty());
    // The manager's second request holding the researcher's first reply, re-rendered.
    let mut written_back = requests.clone();
    let child_reply = requests[3].messages[1].clone();
    assert_eq!(child_reply.role, Role::Assistant);
    written_back[4].messages.push(child_reply);
    written_back[4].messages.push(Message::user("Observation:\nStdout:\nParis"));
    let (side, _) = replay(&written_back[..5], &dialect);
    let got = findings(&side, &dialect);
    assert!(got.iter().any(|f| f.contains("main's request holds a reply of its child main/1")), "{got:#?}");
    // A user message between the child's wrapped task and its first reply.
    let mut inserted = requests.clone();
    inserted[2].messages.insert(1, Message::user("From nowhere."));
    let (side, _) = replay(&inserted[..3], &dialect);
    let got = findings(&side, &dialect);
    assert!(got.iter().any(|f| f.contains("main/1's request holds a message its own loop did not make")), "{got:#?}");
}

//! The Anthropic Messages API on the wire (issue 40): `POST /v1/messages` (with `?beta=true`
//! and the headers the `anthropic` SDKs and Claude Code send) answered from the same script as
//! Chat Completions, read into the same transcript, attributed and judged by the same oracles.
//! Spoken over raw HTTP/1.1, as `serve.rs` does, so the bytes checked are the bytes sent.

use std::time::Duration;

use rehearsal::internals::evidence::attribution::{ModelExchange, ModelSide};
use rehearsal::internals::oracles::model_side::{self, Judge};
use rehearsal::runner::Runner;
use rehearsal::wire::{self, End, FindingKind, Server, WireRun};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::serve::{Answer, options, parse, send, start};

/// The headers Claude Code sends beside the body (the key is a dummy, as in its tests).
const CLAUDE_HEADERS: &str = "x-api-key: dummy\r\nanthropic-version: 2023-06-01\r\nanthropic-beta: claude-code-20250219,interleaved-thinking-2025-05-14\r\n";

/// Sends `body` to `POST /v1/messages?beta=true` with Claude Code's headers.
async fn messages(server: &Server, body: &str) -> Answer {
    let mut stream = TcpStream::connect(server.addr()).await.unwrap();
    let request = format!(
        "POST /v1/messages?beta=true HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n{CLAUDE_HEADERS}content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut raw)).await.expect("an answer");
    parse(&String::from_utf8(raw).unwrap())
}

const TOOLS: &str = r#"[{"name":"Agent","description":"Delegate a task","input_schema":{"type":"object","properties":{"task":{"type":"string"}}}}]"#;

/// The root's first request: the system text as blocks, the task as a string.
fn root_first(stream: bool) -> String {
    format!(
        r#"{{"model":"claude-x","max_tokens":1024,"stream":{stream},"system":[{{"type":"text","text":"You are the root.","cache_control":{{"type":"ephemeral"}}}}],"messages":[{{"role":"user","content":"Check the logs"}}],"tools":{TOOLS},"metadata":{{"user_id":"u"}}}}"#
    )
}

/// A child's first request: its task as a text block, no system text, no tools.
fn child_first(task: &str, stream: bool) -> String {
    format!(
        r#"{{"model":"claude-x","max_tokens":1024,"stream":{stream},"messages":[{{"role":"user","content":[{{"type":"text","text":"{task}"}}]}}]}}"#
    )
}

const TRUNCATED: &str = "The logs show nothin...\n[Sub-agent response truncated to 20 chars]";

/// The root's second request: its two calls as `tool_use` blocks, their results as
/// `tool_result` blocks (`first` as the first child's), then a `system` message
/// mid-conversation, as Claude Code sends its reminders.
fn root_second(first: &str) -> String {
    let first = serde_json::to_string(first).unwrap();
    format!(
        r#"{{"model":"claude-x","max_tokens":1024,"system":"You are the root.","messages":[{{"role":"user","content":"Check the logs"}},{{"role":"assistant","content":[{{"type":"text","text":"Delegating both."}},{{"type":"tool_use","id":"call_1","name":"Agent","input":{{"task":"Summarise the logs"}}}},{{"type":"tool_use","id":"call_2","name":"Agent","input":{{"task":"Count the errors"}}}}]}},{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"call_1","content":[{{"type":"text","text":{first}}}]}},{{"type":"tool_result","tool_use_id":"call_2","content":"No errors.","is_error":false}}]}},{{"role":"system","content":"Reminder: answer briefly."}}],"tools":{TOOLS}}}"#
    )
}

/// Plays `anthropic.json` as a correct runtime would, the root's first reply streamed or not,
/// with `first` as the first child's result handed to the root.
async fn delegate_two(stream: bool, first: &str) -> (rehearsal::scenario::Scenario, WireRun) {
    let (scenario, server) = start("anthropic.json", "roku", options()).await;
    assert_eq!(messages(&server, &root_first(stream)).await.status, 200);
    let overloaded = messages(&server, &child_first("Summarise the logs", false)).await;
    assert_eq!(overloaded.status, 529, "{}", overloaded.body);
    assert_eq!(messages(&server, &child_first("Summarise the logs", true)).await.status, 200);
    assert_eq!(messages(&server, &child_first("Count the errors", false)).await.status, 200);
    let last = messages(&server, &root_second(first)).await;
    assert!(last.body.contains(r#""text":"Done: the logs are fine and hold no errors.""#), "{}", last.body);
    let end = server.done().await;
    assert_eq!(end, End::Script, "the script ends with its last reply");
    (scenario, server.finish(end).await)
}

#[tokio::test]
async fn a_non_streamed_reply_with_two_tool_calls_is_the_anthropic_message_byte_for_byte() {
    let (_, server) = start("anthropic.json", "roku", options()).await;
    let answer = messages(&server, &root_first(false)).await;
    assert_eq!(answer.status, 200);
    assert!(answer.headers.contains("content-type: application/json"), "{}", answer.headers);
    assert_eq!(
        answer.body,
        r#"{"id":"msg_0","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"Delegating both."},{"type":"tool_use","id":"call_1","name":"Agent","input":{"task":"Summarise the logs"}},{"type":"tool_use","id":"call_2","name":"Agent","input":{"task":"Count the errors"}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":8,"output_tokens":18,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}"#
    );
    server.finish(End::Caller).await;
}

#[tokio::test]
async fn a_streamed_reply_sends_the_message_events_with_a_block_per_call_and_json_deltas() {
    let (_, server) = start("anthropic.json", "roku", options()).await;
    let answer = messages(&server, &root_first(true)).await;
    assert_eq!(answer.status, 200);
    assert!(answer.headers.contains("content-type: text/event-stream"), "{}", answer.headers);
    assert!(answer.complete, "the stream ends as HTTP says");
    let events = [
        (
            "message_start",
            r#"{"type":"message_start","message":{"id":"msg_0","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":8,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}}"#,
        ),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Delegating both."}}"#,
        ),
        ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"call_1","name":"Agent","input":{}}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"task\":\"Summarise the logs\"}"}}"#,
        ),
        ("content_block_stop", r#"{"type":"content_block_stop","index":1}"#),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"call_2","name":"Agent","input":{}}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"task\":\"Count the errors\"}"}}"#,
        ),
        ("content_block_stop", r#"{"type":"content_block_stop","index":2}"#),
        (
            "message_delta",
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":18}}"#,
        ),
        ("message_stop", r#"{"type":"message_stop"}"#),
    ];
    let want: String = events.iter().map(|(name, data)| format!("event: {name}\ndata: {data}\n\n")).collect();
    assert_eq!(answer.body, want);
    server.finish(End::Caller).await;
}

#[tokio::test]
async fn two_children_an_overloaded_error_and_tool_results_round_trip_attributed_and_judged() {
    let (scenario, run) = delegate_two(true, TRUNCATED).await;
    let aliases: Vec<String> = run.exchanges.iter().map(|e| e.request.agent.to_string()).collect();
    assert_eq!(aliases, ["main", "main/1", "main/1", "main/2", "main"], "{aliases:?}");
    // The 529 is Anthropic's error object, and the trace says what the request got.
    let lines: Vec<String> = wire::trace_lines(&run).into_iter().filter(|l| !l.starts_with(' ')).collect();
    assert!(lines[1].ends_with("-> error 529 overloaded_error"), "{lines:#?}");
    // The top-level system text and the `system` message mid-conversation are the system
    // text; the tool results are tool messages answering the calls by id.
    let last = run.side.exchanges.last().unwrap();
    assert_eq!(&*last.system, "You are the root.\n\nReminder: answer briefly.");
    let messages = last.messages.to_vec();
    assert_eq!(messages.len(), 4, "{messages:?}");
    assert_eq!(messages[1].tool_calls.len(), 2);
    assert_eq!((messages[2].tool_call_id.as_deref(), messages[2].content.as_str()), (Some("call_1"), TRUNCATED));
    assert_eq!((messages[3].tool_call_id.as_deref(), messages[3].content.as_str()), (Some("call_2"), "No errors."));
    assert_eq!(last.tools, ["Agent"]);
    wire::judge(&scenario, &run).assert_passed();
}

#[tokio::test]
async fn a_tool_result_the_runtime_did_not_cut_fails_the_truncation_oracle_as_over_chat() {
    let (scenario, run) = delegate_two(false, "The logs show nothing unusual.").await;
    let verdict = wire::judge(&scenario, &run);
    assert!(!verdict.passed());
    assert!(verdict.failures().iter().any(|f| f.what.starts_with("model-side truncation")), "{verdict}");
}

#[tokio::test]
async fn errors_hangs_and_dropped_streams_are_spelt_as_the_messages_api_spells_them() {
    let (scenario, server) = start("errors.json", "generic", options()).await;
    let hello = r#"{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"Hello"}]}"#;
    let error = messages(&server, hello).await;
    assert_eq!(error.status, 429);
    assert_eq!(
        error.body,
        r#"{"type":"error","error":{"type":"requests","message":"Rate limit reached for requests"}}"#
    );
    // The hang: nothing comes; the client gives up after 300 ms.
    let mut held = TcpStream::connect(server.addr()).await.unwrap();
    let request = format!("POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n{hello}", hello.len());
    held.write_all(request.as_bytes()).await.unwrap();
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_millis(300), held.read(&mut buf)).await;
    assert!(read.is_err(), "a hang answers nothing");
    drop(held);
    // The dropped stream: two events, then the connection closes without `message_stop`.
    let streamed = r#"{"model":"m","stream":true,"messages":[{"role":"user","content":"Hello"}]}"#;
    let cut = messages(&server, streamed).await;
    assert_eq!(cut.status, 200);
    assert!(!cut.complete, "the stream is cut");
    assert_eq!(cut.body.matches("event: ").count(), 2, "{}", cut.body);
    assert!(!cut.body.contains("message_stop"));
    let last = messages(&server, hello).await;
    assert!(last.body.contains(r#""text":"Recovered.""#), "{}", last.body);
    let end = server.done().await;
    let run = server.finish(end).await;
    assert_eq!(run.disconnects.len(), 1, "{:?}", run.disconnects);
    wire::judge(&scenario, &run).assert_passed();
}

#[tokio::test]
async fn refusals_are_anthropic_error_objects_and_count_tokens_and_models_answer() {
    let (_, server) = start("delegate.json", "roku", options()).await;
    let count = send(
        &server,
        "POST",
        "/v1/messages/count_tokens?beta=true",
        r#"{"model":"m","system":"You are the root.","messages":[{"role":"user","content":"Check the logs"}]}"#,
    )
    .await;
    assert_eq!(count.status, 200);
    // 17 + 14 characters, a quarter rounded up: the reply's `usage.input_tokens` for them.
    assert_eq!(count.body, r#"{"input_tokens":8}"#);
    let models = send(&server, "GET", "/v1/models", "").await;
    assert!(models.body.contains(r#""id":"rehearsal""#), "{}", models.body);
    let malformed = messages(&server, r#"{"model":"m","messages":[{"role":"user","content":"Check"#).await;
    assert_eq!(malformed.status, 400);
    assert!(
        malformed.body.starts_with(r#"{"type":"error","error":{"type":"invalid_request_error","message":"rehearsal: request #3 is malformed: the body is not a messages request: EOF"#),
        "{}",
        malformed.body
    );
    let result = messages(&server, r#"{"messages":[{"role":"user","content":[{"type":"tool_result"}]}]}"#).await;
    assert_eq!(result.status, 400);
    assert!(
        result.body.contains("messages[0].content[0]: a `tool_result` block needs `tool_use_id`"),
        "{}",
        result.body
    );
    assert_eq!(messages(&server, &root_first(false)).await.status, 200);
    let stranger = messages(&server, r#"{"messages":[{"role":"user","content":"Who am I?"}]}"#).await;
    assert_eq!(stranger.status, 400);
    assert!(stranger.body.contains("put down to no agent of the scenario"), "{}", stranger.body);
    assert!(stranger.body.contains("(unattributed_request)"), "{}", stranger.body);
    let run = server.finish(End::Caller).await;
    let kinds: Vec<FindingKind> = run.findings.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, [FindingKind::Malformed, FindingKind::Malformed, FindingKind::Unattributed]);
}

/// An exchange's request as the Messages API spells it: the system text top-level, each tool
/// result a `tool_result` block (consecutive ones in one user message), each call a
/// `tool_use` block, the tools offered by name.
fn messages_body(exchange: &ModelExchange) -> String {
    use rehearsal::sut::llm::Role;
    use serde_json::{Value, json};
    let mut messages: Vec<Value> = Vec::new();
    let mut results: Vec<Value> = Vec::new();
    for m in exchange.messages.to_vec() {
        if m.role != Role::Tool && !results.is_empty() {
            messages.push(json!({"role": "user", "content": std::mem::take(&mut results)}));
        }
        match m.role {
            Role::User => messages.push(json!({"role": "user", "content": m.content})),
            Role::Assistant => {
                let mut blocks = Vec::new();
                if !m.content.is_empty() || m.tool_calls.is_empty() {
                    blocks.push(json!({"type": "text", "text": m.content}));
                }
                for c in &m.tool_calls {
                    blocks.push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": *c.args}));
                }
                messages.push(json!({"role": "assistant", "content": blocks}));
            }
            Role::Tool => results.push(json!({
                "type": "tool_result",
                "tool_use_id": m.tool_call_id,
                "content": [{"type": "text", "text": m.content}],
                "is_error": m.is_error,
            })),
        }
    }
    if !results.is_empty() {
        messages.push(json!({"role": "user", "content": results}));
    }
    let tools: Vec<Value> =
        exchange.tools.iter().map(|name| json!({"name": name, "input_schema": {"type": "object"}})).collect();
    let mut body =
        json!({"model": exchange.model.as_deref().unwrap_or("rehearsal"), "max_tokens": 1024, "messages": messages});
    if !exchange.system.is_empty() {
        body["system"] = json!([{"type": "text", "text": &*exchange.system}]);
    }
    if !tools.is_empty() {
        body["tools"] = json!(tools);
    }
    body.to_string()
}

/// Sends one request and gives up on it after `wait` (a scripted hang).
async fn messages_within(server: &Server, body: &str, wait: Duration) -> Option<Answer> {
    tokio::time::timeout(wait, messages(server, body)).await.ok()
}

/// Every scenario of `scenarios/` run in-process, judged from the model's side; then each of its
/// exchanges, in order, sent to `serve` as a Messages request. The server must read back the
/// same system text, messages and tools, put every request down to the same agent, and the
/// model-side oracles must find the same over the wire as in-process (issue 40's round trip).
/// The exchanges are sent one at a time on the wall clock, so the wire's record is judged on the
/// in-process times (a timeout heard 200 ms after a child's first request is early on the wall
/// clock); everything else judged is what the server read.
#[test]
fn every_scenario_round_trips_through_the_messages_api_with_the_same_attribution() {
    let mut files = Vec::new();
    crate::support::scenario_files(&crate::support::manifest_path("scenarios"), &mut files);
    assert!(files.len() > 100, "the suite is there");
    let runner = Runner::new().judge(Judge::ModelSide);
    let mut failing = Vec::new();
    let mut exchanges = 0;
    let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    for path in &files {
        let (scenario, verdict) = runner.check_file(path).unwrap_or_else(|e| panic!("{e}"));
        let run = verdict.run().unwrap();
        let side = run.model_side.clone().expect("a model-side record");
        let dialect = (**side.dialect.as_ref().expect("the dialect read")).clone();
        let wire = tokio.block_on(async {
            let server = Server::start(&scenario, dialect, options()).await.unwrap();
            for exchange in &side.exchanges {
                // A request the script hung or refused in-process is given up on at once.
                let wait = if exchange.reply.is_some() { Duration::from_secs(10) } else { Duration::from_millis(200) };
                messages_within(&server, &messages_body(exchange), wait).await;
            }
            server.finish(End::Caller).await
        });
        exchanges += side.exchanges.len();
        let name = &scenario.name;
        let judged = |side: &ModelSide| -> Vec<String> {
            let dialect = side.dialect.as_deref().unwrap();
            model_side::check(side, &run.rules, dialect, None).iter().map(ToString::to_string).collect()
        };
        // The sends are one at a time on the wall clock: the wire's record is judged on the
        // in-process run's virtual times, so that what differs is what was read, never when.
        let mut timed = wire.side.clone();
        for (there, here) in timed.exchanges.iter_mut().zip(&side.exchanges) {
            (there.arrived, there.replied, there.ends_loop_due) = (here.arrived, here.replied, here.ends_loop_due);
        }
        timed.wall_times = side.wall_times;
        let (here, there) = (judged(&side), judged(&timed));
        if here != there {
            failing.push(format!("{name}: in-process {here:#?}, over the wire {there:#?}"));
        }
        if wire.side.exchanges.len() != side.exchanges.len() {
            failing.push(format!(
                "{name}: {} exchanges over the wire, {} in-process",
                wire.side.exchanges.len(),
                side.exchanges.len()
            ));
            continue;
        }
        for (i, (a, b)) in side.exchanges.iter().zip(&wire.side.exchanges).enumerate() {
            if a.system != b.system || a.messages != b.messages || a.tools != b.tools {
                failing.push(format!("{name}: exchange {i} reads back otherwise:\n{:?}\n{:?}", a.messages, b.messages));
            }
            if side.alias(i) != wire.side.alias(i) {
                failing.push(format!(
                    "{name}: exchange {i} is {:?} in-process, {:?} over the wire",
                    side.alias(i),
                    wire.side.alias(i)
                ));
            }
        }
    }
    assert!(failing.is_empty(), "{} failures:\n{failing:#?}", failing.len());
    assert!(exchanges > 500, "{exchanges} exchanges sent");
}

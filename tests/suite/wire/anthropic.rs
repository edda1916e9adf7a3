//! The Anthropic Messages API on the wire (issue 40): `POST /v1/messages` (with `?beta=true`
//! and the headers the `anthropic` SDKs and Claude Code send) answered from the same script as
//! Chat Completions, read into the same transcript, attributed and judged by the same oracles.
//! Spoken over raw HTTP/1.1, as `serve.rs` does, so the bytes checked are the bytes sent.

use std::time::Duration;

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

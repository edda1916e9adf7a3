//! The OpenAI Responses API on the wire (issue 40): `POST /v1/responses` answered from the
//! same script as Chat Completions and Messages, read into the same transcript, attributed and
//! judged by the same oracles; `previous_response_id` read as the named response's
//! conversation followed by the new input. Spoken over raw HTTP/1.1, as `serve.rs` does, so
//! the bytes checked are the bytes sent.

use std::time::Duration;

use rehearsal::internals::evidence::attribution::{ModelExchange, ModelSide};
use rehearsal::internals::oracles::model_side::{self, Judge};
use rehearsal::runner::Runner;
use rehearsal::sut::llm::Message;
use rehearsal::wire::{self, End, FindingKind, Server, WireRun};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::serve::{Answer, options, send, start};

/// Sends `body` to `POST /v1/responses` with the headers the `openai` SDKs send.
async fn responses(server: &Server, body: &str) -> Answer {
    send(server, "POST", "/v1/responses", body).await
}

const TOOLS: &str = r#"[{"type":"function","name":"Agent","description":"Delegate a task","parameters":{"type":"object","properties":{"task":{"type":"string"}},"required":["task"]},"strict":false},{"type":"web_search"}]"#;

/// The root's first request: `instructions`, a developer item and the task as `input_text`,
/// with fields rehearsal accepts and does not read.
fn root_first(stream: bool) -> String {
    format!(
        r#"{{"model":"gpt-x","stream":{stream},"instructions":"You are the root.","input":[{{"role":"developer","content":"Be brief."}},{{"type":"message","role":"user","content":[{{"type":"input_text","text":"Check the logs"}}]}}],"tools":{TOOLS},"reasoning":{{"effort":"low"}},"temperature":0.2,"max_output_tokens":1000,"parallel_tool_calls":true,"include":[],"text":{{"format":{{"type":"text"}}}},"truncation":"disabled"}}"#
    )
}

/// A child's first request: its task as a string, no instructions, no tools, the root's
/// reasoning effort (which `oracle.model-side.context` expects a child to inherit).
fn child_first(task: &str, stream: bool) -> String {
    format!(r#"{{"model":"gpt-x","stream":{stream},"input":"{task}","reasoning":{{"effort":"low"}}}}"#)
}

const TRUNCATED: &str = "The logs show nothin...\n[Sub-agent response truncated to 20 chars]";

/// The items that answer the root's two calls (`first` as the first child's result), then a
/// `system` message.
fn results(first: &str) -> String {
    let first = serde_json::to_string(first).unwrap();
    format!(
        r#"{{"type":"function_call_output","call_id":"call_1","output":{first}}},{{"type":"function_call_output","call_id":"call_2","output":[{{"type":"input_text","text":"No errors."}}]}},{{"role":"system","content":"Reminder: answer briefly."}}"#
    )
}

/// The root's second request resending the whole conversation, as openai-agents does: its
/// first input, a reasoning item, the first answer's output items as the SDK hands them back,
/// the results.
fn root_second(first: &str) -> String {
    format!(
        r#"{{"model":"gpt-x","instructions":"You are the root.","input":[{{"role":"developer","content":"Be brief."}},{{"role":"user","content":"Check the logs"}},{{"type":"reasoning","id":"rs_0","summary":[]}},{{"id":"msg_0","type":"message","role":"assistant","status":"completed","content":[{{"type":"output_text","text":"Delegating both.","annotations":[],"logprobs":[]}}]}},{{"type":"function_call","id":"fc_0_1","call_id":"call_1","name":"Agent","arguments":"{{\"task\":\"Summarise the logs\"}}","status":"completed"}},{{"type":"function_call","id":"fc_0_2","call_id":"call_2","name":"Agent","arguments":"{{\"task\":\"Count the errors\"}}","status":"completed"}},{}],"tools":{TOOLS}}}"#,
        results(first)
    )
}

/// The root's second request naming its first response instead: only the results are new.
fn root_second_chained(first: &str) -> String {
    format!(
        r#"{{"model":"gpt-x","instructions":"You are the root.","previous_response_id":"resp_0","input":[{}],"tools":{TOOLS}}}"#,
        results(first)
    )
}

/// Plays `responses.json` as a correct runtime would, the root's second request resent whole
/// or chained.
async fn delegate_two(chained: bool, first: &str) -> (rehearsal::scenario::Scenario, WireRun) {
    let (scenario, server) = start("responses.json", "roku", options()).await;
    assert_eq!(responses(&server, &root_first(false)).await.status, 200);
    let limited = responses(&server, &child_first("Summarise the logs", false)).await;
    assert_eq!(limited.status, 429, "{}", limited.body);
    assert_eq!(responses(&server, &child_first("Summarise the logs", true)).await.status, 200);
    assert_eq!(responses(&server, &child_first("Count the errors", false)).await.status, 200);
    let second = if chained { root_second_chained(first) } else { root_second(first) };
    let last = responses(&server, &second).await;
    assert!(last.body.contains(r#""text":"Done: the logs are fine and hold no errors.""#), "{}", last.body);
    let end = server.done().await;
    assert_eq!(end, End::Script, "the script ends with its last reply");
    (scenario, server.finish(end).await)
}

const RESPONSE_TOOLS: &str = r#"[{"type":"function","name":"Agent","description":"Delegate a task","parameters":{"type":"object","properties":{"task":{"type":"string"}},"required":["task"]},"strict":false}]"#;

#[tokio::test]
async fn a_non_streamed_reply_with_two_function_calls_is_the_response_object_byte_for_byte() {
    let (_, server) = start("responses.json", "roku", options()).await;
    let answer = responses(&server, &root_first(false)).await;
    assert_eq!(answer.status, 200);
    assert!(answer.headers.contains("content-type: application/json"), "{}", answer.headers);
    // The usage: 28 + 14 characters asked (the instructions, the developer item, the task),
    // 16 + 29 + 27 answered, a quarter of each rounded up.
    assert_eq!(
        answer.body,
        format!(
            r#"{{"id":"resp_0","object":"response","created_at":0,"status":"completed","error":null,"incomplete_details":null,"instructions":"You are the root.","model":"gpt-x","output":[{{"type":"message","id":"msg_0","status":"completed","role":"assistant","content":[{{"type":"output_text","text":"Delegating both.","annotations":[],"logprobs":[]}}]}},{{"type":"function_call","id":"fc_0_1","call_id":"call_1","name":"Agent","arguments":"{{\"task\":\"Summarise the logs\"}}","status":"completed"}},{{"type":"function_call","id":"fc_0_2","call_id":"call_2","name":"Agent","arguments":"{{\"task\":\"Count the errors\"}}","status":"completed"}}],"parallel_tool_calls":true,"previous_response_id":null,"store":true,"tool_choice":"auto","tools":{RESPONSE_TOOLS},"usage":{{"input_tokens":11,"input_tokens_details":{{"cached_tokens":0,"cache_write_tokens":0}},"output_tokens":18,"output_tokens_details":{{"reasoning_tokens":0}},"total_tokens":29}}}}"#
        )
    );
    // A plain text reply is one message item.
    let child = responses(&server, &child_first("Summarise the logs", false)).await;
    assert_eq!(child.status, 429);
    let child = responses(&server, &child_first("Summarise the logs", false)).await;
    assert!(
        child.body.contains(r#""output":[{"type":"message","id":"msg_2","status":"completed","role":"assistant","content":[{"type":"output_text","text":"The logs show nothing unusual.","annotations":[],"logprobs":[]}]}]"#),
        "{}",
        child.body
    );
    server.finish(End::Caller).await;
}

#[tokio::test]
async fn a_streamed_reply_sends_the_typed_events_in_order_with_sequence_numbers() {
    let (_, server) = start("responses.json", "roku", options()).await;
    let answer = responses(&server, &root_first(true)).await;
    assert_eq!(answer.status, 200);
    assert!(answer.headers.contains("content-type: text/event-stream"), "{}", answer.headers);
    assert!(answer.complete, "the stream ends as HTTP says");
    let frames: Vec<(&str, serde_json::Value)> = answer
        .body
        .split_terminator("\n\n")
        .map(|frame| {
            let (event, data) = frame.split_once('\n').unwrap();
            let data: serde_json::Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
            (event.strip_prefix("event: ").unwrap(), data)
        })
        .collect();
    let names: Vec<&str> = frames.iter().map(|(name, _)| *name).collect();
    assert_eq!(
        names,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    for (i, (name, data)) in frames.iter().enumerate() {
        assert_eq!(data["type"], *name, "the event line names the data's type");
        assert_eq!(data["sequence_number"], i, "{name} is number {i}");
    }
    assert_eq!(frames[0].1["response"]["status"], "in_progress");
    assert_eq!(frames[0].1["response"]["output"], serde_json::json!([]));
    assert_eq!(frames[4].1["delta"], "Delegating both.");
    assert_eq!(
        serde_json::to_string(&frames[8].1).unwrap(),
        r#"{"type":"response.output_item.added","sequence_number":8,"output_index":1,"item":{"type":"function_call","id":"fc_0_1","call_id":"call_1","name":"Agent","arguments":"","status":"in_progress"}}"#
    );
    assert_eq!(frames[9].1["delta"], r#"{"task":"Summarise the logs"}"#);
    assert_eq!(frames[10].1["arguments"], r#"{"task":"Summarise the logs"}"#);
    // The last event holds the whole response, as the non-streamed answer is.
    let whole = &frames[16].1["response"];
    assert_eq!(whole["status"], "completed");
    assert_eq!(whole["output"].as_array().unwrap().len(), 3);
    assert_eq!(whole["usage"]["total_tokens"], 29);
    server.finish(End::Caller).await;
}

#[tokio::test]
async fn two_children_a_rate_limit_and_function_call_outputs_round_trip_attributed_and_judged() {
    let (scenario, run) = delegate_two(false, TRUNCATED).await;
    let aliases: Vec<String> = run.exchanges.iter().map(|e| e.request.agent.to_string()).collect();
    assert_eq!(aliases, ["main", "main/1", "main/1", "main/2", "main"], "{aliases:?}");
    let lines: Vec<String> = wire::trace_lines(&run).into_iter().filter(|l| !l.starts_with(' ')).collect();
    assert!(lines[1].ends_with("-> error 429 rate_limit_error"), "{lines:#?}");
    // `instructions`, the developer item and the system item are the system text, in order;
    // the reasoning item carries nothing; the calls join their message; the outputs are tool
    // messages answering the calls by id.
    let last = run.side.exchanges.last().unwrap();
    assert_eq!(&*last.system, "You are the root.\n\nBe brief.\n\nReminder: answer briefly.");
    let messages = last.messages.to_vec();
    assert_eq!(messages.len(), 4, "{messages:?}");
    assert_eq!((messages[1].content.as_str(), messages[1].tool_calls.len()), ("Delegating both.", 2));
    assert_eq!((messages[2].tool_call_id.as_deref(), messages[2].content.as_str()), (Some("call_1"), TRUNCATED));
    assert_eq!((messages[3].tool_call_id.as_deref(), messages[3].content.as_str()), (Some("call_2"), "No errors."));
    assert_eq!(last.tools, ["Agent"], "a web_search tool is accepted, not offered");
    assert_eq!(run.side.exchanges[0].reasoning_effort.as_deref(), Some("low"));
    wire::judge(&scenario, &run).assert_passed();
}

#[tokio::test]
async fn a_scripted_429_is_the_openai_error_object_with_its_status() {
    let (_, server) = start("responses.json", "roku", options()).await;
    assert_eq!(responses(&server, &root_first(false)).await.status, 200);
    let limited = responses(&server, &child_first("Summarise the logs", true)).await;
    assert_eq!(limited.status, 429);
    assert!(limited.headers.contains("content-type: application/json"), "{}", limited.headers);
    assert_eq!(
        limited.body,
        r#"{"error":{"message":"Rate limit reached","type":"rate_limit_error","param":null,"code":null}}"#
    );
    server.finish(End::Caller).await;
}

#[tokio::test]
async fn previous_response_id_reads_the_same_conversation_as_resending_it() {
    let (scenario, resent) = delegate_two(false, TRUNCATED).await;
    let (_, chained) = delegate_two(true, TRUNCATED).await;
    let read = |run: &WireRun| -> Vec<String> {
        run.side
            .exchanges
            .iter()
            .enumerate()
            .map(|(i, e)| format!("{:?} {:?} {:?} {:?}", run.side.alias(i), e.system, e.messages.to_vec(), e.tools))
            .collect()
    };
    assert_eq!(read(&chained), read(&resent));
    wire::judge(&scenario, &chained).assert_passed();
    // The chained answer names the response it continued.
    let (_, server) = start("responses.json", "roku", options()).await;
    assert_eq!(responses(&server, &root_first(false)).await.status, 200);
    for task in ["Summarise the logs", "Summarise the logs", "Count the errors"] {
        responses(&server, &child_first(task, false)).await;
    }
    let last = responses(&server, &root_second_chained(TRUNCATED)).await;
    assert!(last.body.contains(r#""previous_response_id":"resp_0""#), "{}", last.body);
    server.finish(End::Caller).await;
}

#[tokio::test]
async fn an_unknown_or_unstored_previous_response_is_previous_response_not_found() {
    let (_, server) = start("responses.json", "roku", options()).await;
    let unknown =
        responses(&server, r#"{"model":"m","previous_response_id":"resp_41","input":"Check the logs"}"#).await;
    assert_eq!(unknown.status, 400);
    assert_eq!(
        unknown.body,
        r#"{"error":{"message":"rehearsal: request #1: Previous response with id 'resp_41' not found (this server keeps the last 1024 responses it gave with `store` not false)","type":"invalid_request_error","param":"previous_response_id","code":"previous_response_not_found"}}"#
    );
    // `store: false` answers as usual and keeps nothing to chain to.
    let unstored = responses(
        &server,
        r#"{"model":"m","store":false,"instructions":"You are the root.","input":"Check the logs"}"#,
    )
    .await;
    assert_eq!(unstored.status, 200, "{}", unstored.body);
    // A refused request is no exchange: this is the first, `resp_0`.
    assert!(unstored.body.contains(r#""id":"resp_0""#), "{}", unstored.body);
    assert!(unstored.body.contains(r#""store":false"#), "{}", unstored.body);
    let after = responses(&server, r#"{"previous_response_id":"resp_0","input":[]}"#).await;
    assert_eq!(after.status, 400);
    assert!(after.body.contains(r#""code":"previous_response_not_found""#), "{}", after.body);
    // Items rehearsal cannot read are named.
    let bad = responses(&server, r#"{"input":[{"type":"function_call","name":"Agent","arguments":"{}"}]}"#).await;
    assert_eq!(bad.status, 400);
    assert!(bad.body.contains("input[0]: a `function_call` item needs `call_id` and `name`"), "{}", bad.body);
    let malformed = responses(&server, r#"{"input":"#).await;
    assert_eq!(malformed.status, 400);
    assert!(malformed.body.contains("the body is not a responses request: EOF"), "{}", malformed.body);
    let run = server.finish(End::Caller).await;
    let kinds: Vec<FindingKind> = run.findings.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, [FindingKind::Malformed, FindingKind::Malformed, FindingKind::Malformed, FindingKind::Malformed]);
    assert!(
        run.findings[0].message.contains("previous_response_id `resp_41` names no response"),
        "{:?}",
        run.findings[0]
    );
}

#[tokio::test]
async fn errors_hangs_and_dropped_streams_are_spelt_as_the_responses_api_spells_them() {
    let (scenario, server) = start("errors.json", "generic", options()).await;
    let hello = r#"{"model":"m","input":"Hello"}"#;
    let error = responses(&server, hello).await;
    assert_eq!(error.status, 429);
    assert_eq!(
        error.body,
        r#"{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":null}}"#
    );
    // The hang: nothing comes; the client gives up after 300 ms.
    let mut held = TcpStream::connect(server.addr()).await.unwrap();
    let request = format!("POST /v1/responses HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n{hello}", hello.len());
    held.write_all(request.as_bytes()).await.unwrap();
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_millis(300), held.read(&mut buf)).await;
    assert!(read.is_err(), "a hang answers nothing");
    drop(held);
    // The dropped stream: two events, then the connection closes without `response.completed`.
    let cut = responses(&server, r#"{"model":"m","stream":true,"input":"Hello"}"#).await;
    assert_eq!(cut.status, 200);
    assert!(!cut.complete, "the stream is cut");
    assert_eq!(cut.body.matches("event: ").count(), 2, "{}", cut.body);
    assert!(!cut.body.contains("response.completed"));
    let last = responses(&server, hello).await;
    assert!(last.body.contains(r#""text":"Recovered.""#), "{}", last.body);
    let end = server.done().await;
    let run = server.finish(end).await;
    assert_eq!(run.disconnects.len(), 1, "{:?}", run.disconnects);
    wire::judge(&scenario, &run).assert_passed();
}

/// An exchange's request as the Responses API spells it: the system text as `instructions`,
/// each message an item (an assistant message's text a `message` item, each call a
/// `function_call` item, each tool result a `function_call_output`), the tools offered as
/// function tools.
fn responses_body(exchange: &ModelExchange) -> String {
    use rehearsal::sut::llm::Role;
    use serde_json::{Value, json};
    let mut input: Vec<Value> = Vec::new();
    for m in exchange.messages.to_vec() {
        match m.role {
            Role::User => input.push(json!({"role": "user", "content": [{"type": "input_text", "text": m.content}]})),
            Role::Assistant => {
                if !m.content.is_empty() || m.tool_calls.is_empty() {
                    input.push(json!({"type": "message", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": m.content, "annotations": []}]}));
                }
                for c in &m.tool_calls {
                    input.push(json!({"type": "function_call", "call_id": c.id, "name": c.name,
                        "arguments": serde_json::to_string(&*c.args).unwrap()}));
                }
            }
            Role::Tool => {
                input.push(json!({"type": "function_call_output", "call_id": m.tool_call_id, "output": m.content}))
            }
        }
    }
    let tools: Vec<Value> = exchange
        .tools
        .iter()
        .map(|name| json!({"type": "function", "name": name, "parameters": {"type": "object"}, "strict": false}))
        .collect();
    let mut body = json!({"model": exchange.model.as_deref().unwrap_or("rehearsal"), "input": input, "store": false});
    if !exchange.system.is_empty() {
        body["instructions"] = json!(&*exchange.system);
    }
    if !tools.is_empty() {
        body["tools"] = json!(tools);
    }
    body.to_string()
}

/// Sends one request and gives up on it after `wait` (a scripted hang).
async fn responses_within(server: &Server, body: &str, wait: Duration) -> Option<Answer> {
    tokio::time::timeout(wait, responses(server, body)).await.ok()
}

/// Every scenario of `scenarios/` run in-process, judged from the model's side; then each of its
/// exchanges, in order, sent to `serve` as a Responses request. The server must read back the
/// same system text, messages and tools, put every request down to the same agent, and the
/// model-side oracles must find the same over the wire as in-process (issue 40's round trip,
/// as `anthropic.rs` does it for Messages, judged on the in-process times likewise).
#[test]
fn every_scenario_round_trips_through_the_responses_api_with_the_same_attribution() {
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
                responses_within(&server, &responses_body(exchange), wait).await;
            }
            server.finish(End::Caller).await
        });
        exchanges += side.exchanges.len();
        let name = &scenario.name;
        let judged = |side: &ModelSide| -> Vec<String> {
            let dialect = side.dialect.as_deref().unwrap();
            model_side::check(side, &run.rules, dialect, None).iter().map(ToString::to_string).collect()
        };
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
            // A `function_call_output` has no error flag (a Chat tool message has none
            // either): the in-process results are compared without theirs.
            let sent: Vec<_> = a.messages.to_vec().into_iter().map(|m| Message { is_error: false, ..m }).collect();
            if a.system != b.system || sent != b.messages.to_vec() || a.tools != b.tools {
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

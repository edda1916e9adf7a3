//! The wire (issue 23): `rehearsal serve`'s server started in-process on 127.0.0.1 port 0 and
//! spoken to over raw HTTP/1.1 (a `TcpStream`, so the bytes checked are the bytes sent).
//! Every test's server stops by itself: the script ends, the idle limit passes, or the test
//! finishes it. The `openai` Python SDK's tests of the same server are not here (plain
//! `cargo test` stays Rust-only): `scripts/python-tests` runs tests/python/, from `.ci/run`.

use std::time::Duration;

use rehearsal::dialect::Dialect;
use rehearsal::scenario::Scenario;
use rehearsal::wire::{self, End, FindingKind, ServeOptions, Server, WireRun};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{manifest_path, rehearsal};

pub(super) fn load(name: &str) -> Scenario {
    rehearsal::load::outside(&manifest_path(&format!("tests/wire/{name}"))).unwrap().into_parts().0
}

/// Options for a test: answers at once, a fixed `created`, a short idle limit.
pub(super) fn options() -> ServeOptions {
    ServeOptions { time_scale: 0.0, created_s: Some(0), idle_limit: Duration::from_secs(5), ..ServeOptions::default() }
}

pub(super) async fn start(name: &str, dialect: &str, options: ServeOptions) -> (Scenario, Server) {
    let scenario = load(name);
    let server = Server::start(&scenario, Dialect::builtin(dialect).unwrap(), options).await.unwrap();
    assert!(server.base_url().starts_with("http://127.0.0.1:") && server.base_url().ends_with("/v1"));
    (scenario, server)
}

/// An HTTP answer: status, headers (lower-cased names), body (de-chunked), and whether the
/// body ended as HTTP says it should (a chunked body with its last chunk).
#[derive(Debug)]
pub(super) struct Answer {
    pub(super) status: u16,
    pub(super) headers: String,
    pub(super) body: String,
    pub(super) complete: bool,
}

/// Sends one request on a fresh connection (`Connection: close`) and reads the answer to its
/// end or until the server closes the connection.
pub(super) async fn send(server: &Server, method: &str, path: &str, body: &str) -> Answer {
    let mut stream = TcpStream::connect(server.addr()).await.unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    // A connection the server aborts may end in a reset rather than an orderly close.
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut raw)).await.expect("an answer");
    parse(&String::from_utf8(raw).unwrap())
}

pub(super) fn parse(raw: &str) -> Answer {
    let (head, rest) = raw.split_once("\r\n\r\n").unwrap_or((raw, ""));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let headers = head.to_lowercase();
    if !headers.contains("transfer-encoding: chunked") {
        return Answer { status, headers, body: rest.to_string(), complete: true };
    }
    let (mut body, mut rest, mut complete) = (String::new(), rest, false);
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else { break };
        if size == 0 {
            complete = true;
            break;
        }
        if after.len() < size {
            body.push_str(after);
            break;
        }
        body.push_str(&after[..size]);
        rest = after[size..].strip_prefix("\r\n").unwrap_or(&after[size..]);
    }
    Answer { status, headers, body, complete }
}

async fn chat(server: &Server, body: &str) -> Answer {
    send(server, "POST", "/v1/chat/completions", body).await
}

const TOOLS: &str = r#"[{"type":"function","function":{"name":"Agent","description":"Delegate a task","parameters":{"type":"object"}}}]"#;

/// The root's first request of `delegate.json`.
fn root_first(stream: bool) -> String {
    format!(
        r#"{{"model":"m","stream":{stream},"stream_options":{{"include_usage":true}},"messages":[{{"role":"system","content":"You are the root."}},{{"role":"user","content":"Check the logs"}}],"tools":{TOOLS}}}"#
    )
}

/// The child's first request: its task as the first user message.
const CHILD_FIRST: &str = r#"{"model":"m","messages":[{"role":"user","content":"Summarise the logs"}]}"#;

/// The root's second request, with `result` as the `Agent` call's result.
fn root_second(result: &str) -> String {
    let result = serde_json::to_string(result).unwrap();
    format!(
        r#"{{"model":"m","messages":[{{"role":"system","content":"You are the root."}},{{"role":"user","content":"Check the logs"}},{{"role":"assistant","content":"Delegating.","tool_calls":[{{"id":"call_1","type":"function","function":{{"name":"Agent","arguments":"{{\"task\":\"Summarise the logs\"}}"}}}}]}},{{"role":"tool","tool_call_id":"call_1","content":{result}}}],"tools":{TOOLS}}}"#
    )
}

const TRUNCATED: &str = "The logs show nothin...\n[Sub-agent response truncated to 20 chars]";

/// Plays `delegate.json` as a correct runtime would, with `result` as what the root is handed.
async fn delegate(result: &str) -> (Scenario, WireRun) {
    let (scenario, server) = start("delegate.json", "roku", options()).await;
    assert_eq!(chat(&server, &root_first(false)).await.status, 200);
    assert_eq!(chat(&server, CHILD_FIRST).await.status, 200);
    assert_eq!(chat(&server, &root_second(result)).await.status, 200);
    let end = server.done().await;
    assert_eq!(end, End::Script, "the script ends with its last reply");
    (scenario, server.finish(end).await)
}

#[tokio::test]
async fn a_non_streamed_answer_with_a_tool_call_is_the_openai_object_byte_for_byte() {
    let (_, server) = start("delegate.json", "roku", options()).await;
    let answer = chat(&server, &root_first(false)).await;
    assert_eq!(answer.status, 200);
    assert!(answer.headers.contains("content-type: application/json"), "{}", answer.headers);
    assert_eq!(
        answer.body,
        r#"{"id":"chatcmpl-0","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Delegating.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"Agent","arguments":"{\"task\":\"Summarise the logs\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":8,"completion_tokens":10,"total_tokens":18}}"#
    );
    let child = chat(&server, CHILD_FIRST).await;
    assert_eq!(
        child.body,
        r#"{"id":"chatcmpl-1","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"The logs show nothing unusual."},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":8,"total_tokens":13}}"#
    );
    server.finish(End::Caller).await;
}

#[tokio::test]
async fn a_streamed_answer_sends_tool_call_deltas_then_finish_reason_usage_and_done() {
    let (_, server) = start("delegate.json", "roku", options()).await;
    let answer = chat(&server, &root_first(true)).await;
    assert_eq!(answer.status, 200);
    assert!(answer.headers.contains("content-type: text/event-stream"), "{}", answer.headers);
    assert!(answer.complete, "the stream ends as HTTP says");
    let head = r#"{"id":"chatcmpl-0","object":"chat.completion.chunk","created":0,"model":"m","choices":"#;
    let frames: Vec<String> = [
        r#"[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
        r#"[{"index":0,"delta":{"content":"Delegating."},"finish_reason":null}]}"#,
        r#"[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"Agent","arguments":""}}]},"finish_reason":null}]}"#,
        r#"[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"task\":\"Summarise the logs\"}"}}]},"finish_reason":null}]}"#,
        r#"[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        r#"[],"usage":{"prompt_tokens":8,"completion_tokens":10,"total_tokens":18}}"#,
    ]
    .iter()
    .map(|rest| format!("data: {head}{rest}\n\n"))
    .collect();
    assert_eq!(answer.body, format!("{}data: [DONE]\n\n", frames.concat()));
    server.finish(End::Caller).await;
}

#[tokio::test]
async fn a_childs_requests_are_put_down_to_main_1_and_a_clean_run_passes() {
    let (scenario, run) = delegate(TRUNCATED).await;
    assert_eq!(run.side.alias(0).map(ToString::to_string).as_deref(), Some("main"));
    assert_eq!(run.side.alias(1).map(ToString::to_string).as_deref(), Some("main/1"));
    assert_eq!(run.side.alias(2).map(ToString::to_string).as_deref(), Some("main"));
    assert!(run.side.exchanges.iter().all(|e| e.replied >= Some(e.arrived)), "wall times, replies after requests");
    let verdict = wire::judge(&scenario, &run);
    verdict.assert_passed();
    // A served run is judged as what it is: a runtime seen from the model's side, no fake run.
    assert!(verdict.run().is_none(), "a served run holds no in-process run");
    assert!(matches!(verdict.subject(), rehearsal::Subject::Served(_)));
    assert_eq!(verdict.model_side().map(|side| side.exchanges.len()), Some(3));
}

#[tokio::test]
async fn a_parent_handed_the_untruncated_child_reply_fails_the_model_side_truncation_oracle() {
    let (scenario, run) = delegate("The logs show nothing unusual.").await;
    let verdict = wire::judge(&scenario, &run);
    assert!(!verdict.passed());
    let whats: Vec<&str> = verdict.failures().iter().map(|f| f.what.as_str()).collect();
    assert!(
        whats.iter().any(|w| w.starts_with("model-side truncation (oracle.model-side.truncation): main request #2")),
        "{verdict}"
    );
    // The clause and the agent are data, for a machine to compare without reading the prose.
    let finding = verdict.failures().iter().find(|f| f.what.starts_with("model-side truncation")).unwrap();
    assert_eq!(finding.clause.as_deref(), Some("oracle.model-side.truncation"));
    assert_eq!(finding.agent.as_deref(), Some("main"));
}

#[tokio::test]
async fn a_scripted_error_is_an_api_error_with_its_status_and_type_and_a_hang_is_held_until_the_client_gives_up() {
    let (scenario, server) = start("errors.json", "generic", options()).await;
    let hello = r#"{"model":"m","messages":[{"role":"user","content":"Hello"}]}"#;
    let error = chat(&server, hello).await;
    assert_eq!(error.status, 429);
    assert_eq!(
        error.body,
        r#"{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":null}}"#
    );
    // The hang: nothing comes; the client gives up after 300 ms.
    let mut held = TcpStream::connect(server.addr()).await.unwrap();
    let request =
        format!("POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n{hello}", hello.len());
    held.write_all(request.as_bytes()).await.unwrap();
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_millis(300), held.read(&mut buf)).await;
    assert!(read.is_err(), "a hang answers nothing");
    drop(held);
    // The dropped stream: two chunks, then the connection closes without [DONE].
    let streamed = r#"{"model":"m","stream":true,"messages":[{"role":"user","content":"Hello"}]}"#;
    let cut = chat(&server, streamed).await;
    assert_eq!(cut.status, 200);
    assert!(!cut.complete, "the stream is cut");
    assert_eq!(cut.body.matches("data: ").count(), 2, "{}", cut.body);
    assert!(!cut.body.contains("[DONE]"));
    let last = chat(&server, hello).await;
    assert!(last.body.contains(r#""content":"Recovered.""#), "{}", last.body);
    let end = server.done().await;
    assert_eq!(end, End::Script);
    let run = server.finish(end).await;
    assert_eq!(run.disconnects.len(), 1, "{:?}", run.disconnects);
    let d = &run.disconnects[0];
    assert!(d.hang && d.alias == "main" && d.held_ms >= 250, "{d:?}");
    // --trace says what each request got instead of a reply (issue 42: a 429 showed as
    // `-> no reply`).
    // One line per exchange; what the model saw is indented beneath it.
    let lines: Vec<String> = wire::trace_lines(&run).into_iter().filter(|l| !l.starts_with(' ')).collect();
    assert!(lines[0].ends_with("-> error 429 requests"), "{lines:#?}");
    assert!(lines[1].ends_with("-> a hang"), "{lines:#?}");
    assert!(lines[2].ends_with("-> a stream dropped after 2 chunks"), "{lines:#?}");
    let verdict = wire::judge(&scenario, &run);
    verdict.assert_passed();
    // The header counts requests and says they were timed on the wall clock.
    assert!(verdict.to_string().starts_with("PASS wire-errors (4 requests, "), "{verdict}");
    assert!(verdict.to_string().lines().next().unwrap().ends_with(" ms wall)"), "{verdict}");
}

#[tokio::test]
async fn malformed_oversized_unattributable_and_unserved_requests_get_api_errors_and_findings() {
    let small = ServeOptions { body_limit_bytes: 1024, ..options() };
    let (scenario, server) = start("delegate.json", "roku", small).await;
    let malformed = chat(&server, r#"{"model":"m","messages":[{"role":"user","content":"Check"#).await;
    assert_eq!(malformed.status, 400);
    assert!(malformed.body.contains(r#""type":"invalid_request_error""#), "{}", malformed.body);
    assert!(malformed.body.contains("request #1 is malformed: the body is not a chat completion request: EOF"));
    let role = chat(&server, r#"{"messages":[{"role":"wizard","content":"hi"}]}"#).await;
    assert_eq!(role.status, 400);
    assert!(role.body.contains("messages[0].role is `wizard`"), "{}", role.body);
    let oversized =
        chat(&server, &format!(r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#, "x".repeat(2000))).await;
    assert_eq!(oversized.status, 413);
    assert!(oversized.body.contains("request #3 is larger than the body limit of 1024 bytes"), "{}", oversized.body);
    assert_eq!(chat(&server, &root_first(false)).await.status, 200);
    let stranger = chat(&server, r#"{"messages":[{"role":"user","content":"Who am I?"}]}"#).await;
    assert_eq!(stranger.status, 400);
    assert!(stranger.body.contains(r#""code":"unattributed_request""#), "{}", stranger.body);
    // One number per request (issue 42): its arrival number, not also its exchange's.
    assert!(stranger.body.contains("request #5 is put down to no agent"), "{}", stranger.body);
    let unserved = send(&server, "POST", "/v1/embeddings", "{}").await;
    assert_eq!(unserved.status, 404);
    assert!(unserved.body.contains("POST /v1/embeddings is not served"), "{}", unserved.body);
    let run = server.finish(End::Caller).await;
    let kinds: Vec<FindingKind> = run.findings.iter().map(|f| f.kind).collect();
    assert_eq!(
        kinds,
        [
            FindingKind::Malformed,
            FindingKind::Malformed,
            FindingKind::Oversized,
            FindingKind::Unattributed,
            FindingKind::NotServed
        ]
    );
    let verdict = wire::judge(&scenario, &run);
    let report = verdict.to_string();
    for want in [
        "wire: malformed request: request #1",
        "wire: oversized request: request #3",
        "model-side attribution (oracle.model-side.attribution): ? (exchange 1): unattributed request",
        "wire: request not served: request #6: POST /v1/embeddings",
    ] {
        assert!(report.contains(want), "{want} in\n{report}");
    }
}

#[tokio::test]
async fn the_idle_limit_ends_a_run_the_runtime_left_unfinished() {
    let idle = ServeOptions { idle_limit: Duration::from_millis(200), ..options() };
    let (scenario, server) = start("delegate.json", "roku", idle).await;
    assert_eq!(chat(&server, &root_first(false)).await.status, 200);
    let end = tokio::time::timeout(Duration::from_secs(5), server.done()).await.expect("done within the idle limit");
    assert_eq!(end, End::Idle);
    let run = server.finish(end).await;
    let verdict = wire::judge(&scenario, &run);
    let report = verdict.to_string();
    assert!(
        report.contains("lanes[1] (agent \"main/1\") selected no agent before the idle limit ended the run"),
        "{report}"
    );
    assert!(report.contains("lanes[0] (agent \"main\"): replies[1] never answered a request"), "{report}");
}

/// `--barrier`: three children's requests sent C, B, A (20 ms apart) are answered A, B, C, one
/// at a time, and each release records who was held; the root, alone, is held alone.
#[tokio::test]
async fn under_a_barrier_requests_are_answered_one_at_a_time_in_alias_order() {
    let quiet = Duration::from_millis(400);
    let (scenario, server) = start("barrier.json", "bub", ServeOptions { barrier: Some(quiet), ..options() }).await;
    let tools = TOOLS.replace("Agent", "subagent");
    let root =
        format!(r#"{{"model":"m","messages":[{{"role":"user","content":"Do the three tasks"}}],"tools":{tools}}}"#);
    let first = chat(&server, &root).await;
    assert_eq!(first.status, 200, "{first:?}");
    let server = std::sync::Arc::new(server);
    let answered = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut children = Vec::new();
    for task in ["Task C", "Task B", "Task A"] {
        let (server, answered) = (server.clone(), answered.clone());
        children.push(tokio::spawn(async move {
            let body = format!(r#"{{"model":"m","messages":[{{"role":"user","content":"{task}"}}]}}"#);
            let answer = chat(&server, &body).await;
            assert_eq!(answer.status, 200, "{answer:?}");
            answered.lock().unwrap().push(task);
        }));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for child in children {
        child.await.unwrap();
    }
    assert_eq!(*answered.lock().unwrap(), ["Task A", "Task B", "Task C"]);
    let tools = TOOLS.replace("Agent", "subagent");
    let calls = |n: usize| -> String {
        let call = |i: usize, task: &str| {
            format!(
                r#"{{"id":"call_{i}","type":"function","function":{{"name":"subagent","arguments":"{{\"prompt\":\"{task}\"}}"}}}}"#
            )
        };
        let tasks = ["Task A", "Task B", "Task C"];
        let assistant = format!(
            r#"{{"role":"assistant","content":"Delegating.","tool_calls":[{}]}}"#,
            (1..=n).map(|i| call(i, tasks[i - 1])).collect::<Vec<_>>().join(",")
        );
        let results: Vec<String> = (1..=n)
            .map(|i| {
                format!(r#"{{"role":"tool","tool_call_id":"call_{i}","content":"{} done."}}"#, ["A", "B", "C"][i - 1])
            })
            .collect();
        format!(
            r#"{{"model":"m","messages":[{{"role":"user","content":"Do the three tasks"}},{assistant},{}],"tools":{tools}}}"#,
            results.join(",")
        )
    };
    assert_eq!(chat(&server, &calls(3)).await.status, 200);
    let server = std::sync::Arc::into_inner(server).expect("the children are done with the server");
    let end = server.done().await;
    assert_eq!(end, End::Script);
    let run = server.finish(end).await;
    let releases: Vec<(String, Vec<String>)> =
        run.barrier.iter().map(|r| (r.released.clone(), r.held.clone())).collect();
    let held = |aliases: &[&str]| aliases.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    assert_eq!(
        releases,
        [
            ("main".to_string(), held(&["main"])),
            ("main/1".to_string(), held(&["main/1", "main/2", "main/3"])),
            ("main/2".to_string(), held(&["main/2", "main/3"])),
            ("main/3".to_string(), held(&["main/3"])),
            ("main".to_string(), held(&["main"])),
        ]
    );
    let trace = wire::trace_lines(&run);
    assert!(
        trace
            .iter()
            .any(|l| l.starts_with("barrier 2  released main/1") && l.ends_with("held 3: main/1, main/2, main/3")),
        "{trace:#?}"
    );
    // The barrier orders the answers, not the record: the requests are judged as they came.
    // On wall time children asking in reverse order of their calls break no rule while the cap
    // (4) has room for all three: a first request is not a start, and three children started
    // in one instant may ask in any order (the first-come check needs the cap full).
    let children: Vec<&str> = run
        .side
        .exchanges
        .iter()
        .skip(1)
        .take(3)
        .map(|e| e.messages.first().map_or("", |m| m.content.as_ref()))
        .collect();
    assert_eq!(children, ["Task C", "Task B", "Task A"], "the record keeps arrival order");
    let verdict = wire::judge(&scenario, &run);
    assert!(verdict.failures().is_empty(), "{verdict}");
}

#[tokio::test]
async fn a_barrier_and_the_clock_are_refused_together() {
    let scenario = load("barrier.json");
    let clock = rehearsal::wire::clock::ClockEndpoint::bind(Default::default()).await.unwrap().clock();
    let options = ServeOptions { barrier: Some(Duration::from_millis(100)), clock: Some(clock), ..options() };
    let Err(e) = Server::start(&scenario, Dialect::builtin("roku").unwrap(), options).await else {
        panic!("a barrier on the clock was accepted");
    };
    assert!(e.to_string().contains("--barrier guesses when the runtime is quiet, --clock knows"), "{e}");
    assert!(matches!(e, wire::ServeError::BarrierAndClock), "{e:?}");
}

#[tokio::test]
async fn a_server_that_cannot_start_says_which_option_or_port() {
    let scenario = load("barrier.json");
    let roku = || Dialect::builtin("roku").unwrap();
    let Err(e) = Server::start(&scenario, roku(), ServeOptions { time_scale: -1.0, ..options() }).await else {
        panic!("a negative time scale was accepted");
    };
    assert!(matches!(e, wire::ServeError::TimeScale { time_scale } if time_scale == -1.0), "{e:?}");
    assert_eq!(e.to_string(), "--time-scale -1 is not a number from 0 to 1000");
    // A port already taken: the error carries the port and the io error.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let Err(e) = Server::start(&scenario, roku(), ServeOptions { port, ..options() }).await else {
        panic!("a taken port was bound twice");
    };
    let wire::ServeError::Listen { port: said, source } = &e else { panic!("{e:?}") };
    assert_eq!((*said, source.kind()), (port, std::io::ErrorKind::AddrInUse), "{e}");
    assert!(e.to_string().starts_with(&format!("cannot listen on 127.0.0.1:{port}: ")), "{e}");
    assert!(std::error::Error::source(&e).is_some());
}

#[tokio::test]
async fn models_are_listed() {
    let (_, server) = start("delegate.json", "roku", options()).await;
    let models = send(&server, "GET", "/v1/models", "").await;
    assert_eq!(models.status, 200);
    assert_eq!(
        models.body,
        r#"{"object":"list","data":[{"id":"rehearsal","object":"model","created":0,"owned_by":"rehearsal"}]}"#
    );
    server.finish(End::Caller).await;
}

#[test]
fn serve_exits_4_when_no_runtime_calls_it() {
    // Before the first request the start-up limit runs, not the idle limit (issue 42: a
    // Python runtime's imports took longer than a short idle limit).
    let out = rehearsal(&["serve", "tests/wire/delegate.json", "--idle-limit", "200ms", "--startup-limit", "300ms"]);
    assert_eq!(out.code, Some(4), "{}", out.stderr);
    assert!(out.stderr.contains("no request arrived within the start-up limit (300ms)"), "{}", out.stderr);
    let err = &out.stderr;
    assert!(err.contains("export OPENAI_BASE_URL=http://127.0.0.1:"), "{err}");
    assert!(err.contains("no request arrived"), "{err}");
}

#[test]
fn a_dropped_stream_fails_the_model_call_in_process() {
    let scenario = load("dropped.json");
    let verdict = rehearsal::Runner::new().verify(&scenario, &[]);
    verdict.assert_passed();
    let lines = verdict.run().unwrap().trace.lines().join("\n");
    assert!(lines.contains(r#"llm.error      "stream dropped after 1 chunk""#), "{lines}");
}

/// `rehearsal serve FILE ARGS --ready-file F` started as a user's test would start it: the
/// ready file's base URL, then `client` given it, then what serve printed.
fn serve_with_ready_file(file: &std::path::Path, args: &[&str], client: impl FnOnce(&str)) -> crate::support::Output {
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready.json");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_rehearsal"))
        .arg("serve")
        .arg(file)
        .args(["--color", "never", "--ready-file"])
        .arg(&ready)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while !ready.exists() {
        assert!(started.elapsed() < Duration::from_secs(20), "no ready file");
        std::thread::sleep(Duration::from_millis(10));
    }
    let value: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&ready).unwrap()).unwrap();
    let base = value["base_url"].as_str().unwrap().to_string();
    assert_eq!(value["env"]["OPENAI_BASE_URL"], base.as_str());
    assert_eq!(value["env"]["OPENAI_API_KEY"], "rehearsal");
    // The anthropic SDKs take the origin and add /v1/messages themselves.
    assert_eq!(value["env"]["ANTHROPIC_BASE_URL"], base.strip_suffix("/v1").unwrap());
    assert_eq!(value["pid"], child.id());
    client(&base);
    let out = child.wait_with_output().unwrap();
    crate::support::Output {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The test runtime's `ask MESSAGE` against `base`, in a folder of its own (it keeps its
/// history in its working directory): its exit status and what it printed.
fn ask(base: &str, message: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(crate::support::test_runtime())
        .args(["ask", message])
        .current_dir(dir.path())
        .env("OPENAI_BASE_URL", base)
        .output()
        .unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

/// A scenario file in `dir`: one turn `user`, one reply that must be used.
fn one_reply(dir: &std::path::Path, turn: serde_json::Value) -> std::path::PathBuf {
    let path = dir.join("one-reply.json");
    let text = serde_json::json!({
        "format": 3,
        "name": "one-reply",
        "lanes": [{"agent": "main", "replies": [{"text": "the only reply"}]}],
        "turns": [turn]
    });
    std::fs::write(&path, text.to_string()).unwrap();
    path
}

#[test]
fn serve_answers_a_request_after_its_script_with_an_error_object_and_fails_the_run() {
    // Issue 42: the server used to be gone when the script ended (a connection error for the
    // runtime, and a passing verdict).
    let dir = tempfile::tempdir().unwrap();
    let file = one_reply(dir.path(), serde_json::json!({"user": "hello"}));
    let out = serve_with_ready_file(&file, &["--after-script", "3s"], |base| {
        assert_eq!(ask(base, "hello"), (true, "the only reply\n".to_string()));
        let (ok, said) = ask(base, "hello");
        assert!(!ok);
        assert!(said.contains("script_ended") || said.contains("after the script had ended"), "{said}");
    });
    assert_eq!(out.code, Some(1), "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("wire: request after the script ended: request #2: it arrived after the script had ended"),
        "{}",
        out.stdout
    );
}

#[test]
fn serve_judges_the_root_s_user_message_against_the_turn_unless_it_is_left_free() {
    // Issue 42: every client sent a root message other than the scenario's and passed.
    let dir = tempfile::tempdir().unwrap();
    let file = one_reply(dir.path(), serde_json::json!({"user": "hello"}));
    let out = serve_with_ready_file(&file, &["--after-script", "0s"], |base| {
        assert!(ask(base, "something else entirely").0);
    });
    assert_eq!(out.code, Some(1), "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains(
            r#"turns[0].user: the root never sent the model "hello" (after the turns before it); its user messages were "something else entirely""#
        ),
        "{}",
        out.stdout
    );
    // Wrapped is fine (a runtime may add a date line), and `user_free` leaves it free.
    let out = serve_with_ready_file(&file, &["--after-script", "0s"], |base| {
        assert!(ask(base, "---Date: today---\nhello").0);
    });
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    let file = one_reply(dir.path(), serde_json::json!({"user": "hello", "user_free": true}));
    let out = serve_with_ready_file(&file, &["--after-script", "0s"], |base| {
        assert!(ask(base, "something else entirely").0);
    });
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
}

/// Sends a chat request whose `X-Rehearsal-Agent` header names the sender as the runtime
/// knows it (`None`: no header).
async fn chat_as(server: &Server, label: Option<&str>, body: &str) -> Answer {
    let header = label.map(|l| format!("x-rehearsal-agent: {l}\r\n")).unwrap_or_default();
    chat_with(server, header.as_bytes(), body).await
}

/// Plays `delegate.json` as a correct runtime would, labelling the root's and the child's
/// requests as given.
async fn delegate_labelled(root: Option<&str>, child: Option<&str>, header: wire::AgentHeader) -> (Scenario, WireRun) {
    let (scenario, server) = start("delegate.json", "roku", ServeOptions { agent_header: header, ..options() }).await;
    assert_eq!(chat_as(&server, root, &root_first(false)).await.status, 200);
    assert_eq!(chat_as(&server, child, CHILD_FIRST).await.status, 200);
    assert_eq!(chat_as(&server, root, &root_second(TRUNCATED)).await.status, 200);
    let end = server.done().await;
    (scenario, server.finish(end).await)
}

#[tokio::test]
async fn the_runtimes_own_names_for_its_agents_are_recorded_and_agree_with_the_attribution() {
    let (scenario, run) = delegate_labelled(Some("root"), Some("task-7"), wire::AgentHeader::default()).await;
    assert_eq!(run.labels, [Some("root".to_string()), Some("task-7".to_string()), Some("root".to_string())]);
    let truth = wire::ground_truth(&run.side, &run.labels, &run.agent_header);
    assert_eq!((truth.right, truth.wrong.len(), truth.unattributed, truth.unlabelled), (3, 0, 0, 0));
    wire::judge(&scenario, &run).assert_passed();
}

#[tokio::test]
async fn a_label_that_disagrees_with_the_attribution_is_rehearsals_own_error_never_the_runtimes() {
    // The runtime says the second request is the root's; rehearsal put it down to main/1.
    let (scenario, run) = delegate_labelled(Some("root"), Some("root"), wire::AgentHeader::default()).await;
    let truth = wire::ground_truth(&run.side, &run.labels, &run.agent_header);
    assert_eq!((truth.right, truth.wrong.len()), (2, 1), "{truth:?}");
    let verdict = wire::judge(&scenario, &run);
    assert!(verdict.internal_error(), "an attribution error is the harness's: {verdict}");
    let error = &verdict.failures()[0];
    assert_eq!(error.kind, rehearsal::FailureKind::Internal);
    assert_eq!(error.clause.as_deref(), Some("rehearsal.attribution"));
    assert_eq!(
        error.what,
        "rehearsal's own attribution error, not the runtime's: exchange 1 was put down to `main/1`, but the runtime's X-Rehearsal-Agent header names `root`, and `root` is `main` (at exchange 0)"
    );
    // Nothing is blamed on the runtime: the run is otherwise clean.
    assert_eq!(verdict.failures().len(), 1, "{verdict}");
}

#[tokio::test]
async fn a_runtime_that_labels_only_its_sub_agents_has_its_unlabelled_requests_compared_as_the_roots() {
    let header = wire::AgentHeader { name: "X-Agent-Id".into(), absent: wire::Absent::Root, reused: false };
    // Claude Code's way: the root's requests carry no header. Here the header is another name,
    // so the default one the client sends is not read at all.
    let (scenario, run) = delegate_labelled(None, Some("agent-1"), header.clone()).await;
    assert_eq!(run.labels, [None, None, None], "only the named header is read");
    let truth = wire::ground_truth(&run.side, &run.labels, &run.agent_header);
    assert_eq!((truth.right, truth.wrong.len()), (2, 1), "the child, unlabelled, reads as the root: {truth:?}");
    assert!(wire::judge(&scenario, &run).internal_error());
    // With the child labelled in the named header, every request agrees.
    let (scenario, run) = delegate_with([b"", b"x-agent-id: agent-1\r\n", b""], header).await;
    let truth = wire::ground_truth(&run.side, &run.labels, &run.agent_header);
    assert_eq!((truth.right, truth.wrong.len(), truth.unlabelled), (3, 0, 0), "{truth:?}");
    wire::judge(&scenario, &run).assert_passed();
}

/// Sends a chat request with `head` (raw header lines, each ending in `\r\n`, any bytes) among
/// its headers.
async fn chat_with(server: &Server, head: &[u8], body: &str) -> Answer {
    let mut stream = TcpStream::connect(server.addr()).await.unwrap();
    let mut request =
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n".to_vec();
    request.extend_from_slice(head);
    request.extend_from_slice(format!("content-length: {}\r\nconnection: close\r\n\r\n{body}", body.len()).as_bytes());
    stream.write_all(&request).await.unwrap();
    let mut raw = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut raw)).await.expect("an answer");
    parse(&String::from_utf8(raw).unwrap())
}

/// Plays `delegate.json` as a correct runtime would, with `heads` as the raw header lines of
/// the root's first request, the child's, and the root's second.
async fn delegate_with(heads: [&[u8]; 3], header: wire::AgentHeader) -> (Scenario, WireRun) {
    let (scenario, server) = start("delegate.json", "roku", ServeOptions { agent_header: header, ..options() }).await;
    assert_eq!(chat_with(&server, heads[0], &root_first(false)).await.status, 200);
    assert_eq!(chat_with(&server, heads[1], CHILD_FIRST).await.status, 200);
    assert_eq!(chat_with(&server, heads[2], &root_second(TRUNCATED)).await.status, 200);
    let end = server.done().await;
    (scenario, server.finish(end).await)
}

fn counts(run: &WireRun) -> (usize, usize, usize, usize) {
    let truth = wire::ground_truth(&run.side, &run.labels, &run.agent_header);
    (truth.right, truth.wrong.len(), truth.unattributed, truth.unlabelled)
}

#[tokio::test]
async fn the_agent_header_is_read_whatever_the_case_of_its_name_and_without_the_space_around_its_value() {
    let header = wire::AgentHeader { name: "x-AGENT-id".into(), absent: wire::Absent::Unlabelled, reused: false };
    let (scenario, run) =
        delegate_with([b"X-Agent-Id:   root  \r\n", b"x-agent-id:\ttask-7\t\r\n", b"X-AGENT-ID: root\r\n"], header)
            .await;
    assert_eq!(run.labels, [Some("root".to_string()), Some("task-7".to_string()), Some("root".to_string())]);
    assert_eq!(counts(&run), (3, 0, 0, 0));
    wire::judge(&scenario, &run).assert_passed();
}

#[tokio::test]
async fn the_header_given_twice_with_one_value_is_one_label() {
    let (scenario, run) = delegate_with(
        [
            b"x-rehearsal-agent: root\r\nX-Rehearsal-Agent: root\r\n",
            b"x-rehearsal-agent: t1\r\nx-rehearsal-agent: t1\r\n",
            b"",
        ],
        wire::AgentHeader::default(),
    )
    .await;
    assert_eq!(run.labels, [Some("root".to_string()), Some("t1".to_string()), None]);
    assert_eq!(counts(&run), (2, 0, 0, 1));
    wire::judge(&scenario, &run).assert_passed();
}

#[tokio::test]
async fn labels_sent_as_latin_1_bytes_stay_as_distinct_as_the_runtime_sent_them() {
    // Python's http.client encodes a header's value as Latin-1: `agent-é` and `agent-è` are
    // one byte apart, and neither is UTF-8. Read lossily, both were `agent-\u{fffd}`: one
    // label for two agents, a false attribution error on a correct runtime.
    let (scenario, run) = delegate_with(
        [
            b"x-rehearsal-agent: agent-\xe9\r\n",
            b"x-rehearsal-agent: agent-\xe8\r\n",
            b"x-rehearsal-agent: agent-\xe9\r\n",
        ],
        wire::AgentHeader::default(),
    )
    .await;
    assert_eq!(run.labels, [Some("agent-é".to_string()), Some("agent-è".to_string()), Some("agent-é".to_string())]);
    assert_eq!(counts(&run), (3, 0, 0, 0));
    wire::judge(&scenario, &run).assert_passed();
}

#[tokio::test]
async fn labels_longer_than_a_quote_are_compared_whole() {
    // Two names alike in their first 200 characters and of one length: cut to a quote, they
    // were one label for two agents.
    let long = "x".repeat(300);
    let root = format!("x-rehearsal-agent: {long}-root\r\n");
    let child = format!("x-rehearsal-agent: {long}-kid1\r\n");
    let (scenario, run) =
        delegate_with([root.as_bytes(), child.as_bytes(), root.as_bytes()], wire::AgentHeader::default()).await;
    assert_eq!(counts(&run), (3, 0, 0, 0));
    wire::judge(&scenario, &run).assert_passed();
    // A wrong one is still told, its label quoted short.
    let (scenario, run) =
        delegate_with([root.as_bytes(), root.as_bytes(), root.as_bytes()], wire::AgentHeader::default()).await;
    assert_eq!(counts(&run), (2, 1, 0, 0));
    let verdict = wire::judge(&scenario, &run);
    let what = &verdict.failures()[0].what;
    assert!(what.contains("(305 chars)") && what.len() < 1000, "{what}");
}

#[tokio::test]
async fn the_header_never_changes_the_attribution() {
    // Labels that read like other aliases, labels that swap the agents, none at all: the same
    // requests are put down to the same agents.
    let runs = [
        delegate_with([b"", b"", b""], wire::AgentHeader::default()).await.1,
        delegate_with(
            [b"x-rehearsal-agent: main/1\r\n", b"x-rehearsal-agent: main\r\n", b"x-rehearsal-agent: main/1\r\n"],
            wire::AgentHeader::default(),
        )
        .await
        .1,
        delegate_with(
            [b"x-rehearsal-agent: main\r\n", b"x-rehearsal-agent: main\r\n", b"x-rehearsal-agent: main/1\r\n"],
            wire::AgentHeader { name: "X-Rehearsal-Agent".into(), absent: wire::Absent::Root, reused: false },
        )
        .await
        .1,
    ];
    for run in &runs {
        assert_eq!(run.side.attributions, runs[0].side.attributions, "labels {:?}", run.labels);
    }
    // Opaque names, consistently used, agree whatever they look like.
    assert_eq!(counts(&runs[1]), (3, 0, 0, 0));
    // And names used against the description are told, the attribution unmoved: under
    // `absent: root` the root's requests carry no header, so both of the root's are wrong.
    assert_eq!(counts(&runs[2]), (1, 2, 0, 0));
}

#[tokio::test]
async fn side_and_unattributed_requests_are_counted_apart_and_the_counts_add_up() {
    let options = ServeOptions { side: vec!["Write a title".into()], ..options() };
    let (scenario, server) = start("delegate.json", "roku", options).await;
    let side = r#"{"model":"m","messages":[{"role":"user","content":"Write a title for this chat"}]}"#;
    let stranger = r#"{"messages":[{"role":"user","content":"Who am I?"}]}"#;
    assert_eq!(chat_as(&server, Some("root"), &root_first(false)).await.status, 200);
    // A side request labelled as the root's, or as an agent no one knows: not compared.
    assert_eq!(chat_as(&server, Some("root"), side).await.status, 200);
    assert_eq!(chat_as(&server, Some("title-writer"), side).await.status, 200);
    assert_eq!(chat_as(&server, Some("ghost"), stranger).await.status, 400);
    assert_eq!(chat_as(&server, None, stranger).await.status, 400);
    assert_eq!(chat_as(&server, Some("task-7"), CHILD_FIRST).await.status, 200);
    assert_eq!(chat_as(&server, None, &root_second(TRUNCATED)).await.status, 200);
    let end = server.done().await;
    let run = server.finish(end).await;
    assert_eq!(run.labels.len(), run.side.attributions.len());
    // right 2 (root, task-7), unattributed 1 (ghost; the unlabelled stranger is not counted),
    // unlabelled 1 (the root's second): 4 of the 7 exchanges, the 2 side requests and the
    // unlabelled stranger apart.
    assert_eq!(counts(&run), (2, 0, 1, 1));
    let verdict = wire::judge(&scenario, &run);
    assert!(!verdict.internal_error(), "{verdict}");
    // Under `absent: root`, the unlabelled stranger counts as the root's, unattributed; and
    // the root's first request, labelled `root`, disagrees with the description's rule.
    let header = wire::AgentHeader { name: "X-Rehearsal-Agent".into(), absent: wire::Absent::Root, reused: false };
    let truth = wire::ground_truth(&run.side, &run.labels, &header);
    assert_eq!((truth.right, truth.wrong.len(), truth.unattributed, truth.unlabelled), (2, 1, 2, 0), "{truth:?}");
}

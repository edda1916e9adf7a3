//! `rehearsal record` over the Anthropic Messages API: the proxy forwards `POST /v1/messages`
//! (its `?beta=true`, `x-api-key`, `anthropic-version` and `anthropic-beta` going upstream as
//! they came), reads the request through the conversion `serve` uses and the answer (whole or
//! streamed) into the same scenario format as over Chat Completions. The upstream is a
//! `rehearsal serve` in-process (`super::record::Upstream`), or a raw socket where the bytes
//! it is sent are the point. Guarded: an `sk-ant-` key sent as `x-api-key` and inside the
//! body never reaches the file and the recording replays green under `drive`; a 529, a
//! dropped stream and a hang are recorded as their scripted kinds; a delegation with two
//! `tool_use` blocks, streamed and not, is recorded as calls and the file plays back the
//! same requests; the query and the headers reach the upstream, `--upstream-key-env`'s key
//! as `x-api-key`; a malformed or oversized body is refused in Anthropic's error object and
//! not recorded.

use std::io::{BufRead, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use rehearsal::wire::FindingKind;
use rehearsal::wire::record::proxy::{Api, Outcome, Proxy, ProxyOptions, Recording};

use super::record::{Upstream, drive, load_text, run, schema_accepts};
use crate::support::{Output, manifest_path, test_runtime};

const MESSAGES: &str = "tests/record/messages-runtime.json";
/// A key shaped like Anthropic's: the default `sk-` pattern knows it.
const KEY: &str = "sk-ant-api03-Zx81_qPw-4f3e2d1c0b9a";

/// An upstream scenario for the test runtime's `ask` over Messages.
fn two_turns(dir: &Path) -> rehearsal::Scenario {
    let text = r#"{"name":"messages-upstream","lanes":[{"agent":"main","replies":[
        {"text":"Hello from the upstream."},{"text":"Second answer."}]}],
        "turns":[{"user":"one"},{"user":"two"}]}"#;
    load_text(text, dir, "messages-upstream.json")
}

#[test]
fn a_messages_runtime_is_recorded_with_its_x_api_key_blanked_and_replays_green() {
    let dir = tempfile::tempdir().unwrap();
    let upstream_scenario = two_turns(dir.path());
    let upstream = Upstream::start(&upstream_scenario, "generic");
    let file = dir.path().join("messages.json");
    let leak = [("ANTHROPIC_API_KEY", KEY), ("TEST_RUNTIME_KEY_IN_BODY", "1")];
    let out = run(
        &[
            "record",
            "--color",
            "never",
            "--upstream",
            &upstream.url,
            "--out",
            file.to_str().unwrap(),
            "--runtime",
            MESSAGES,
            "--message",
            "one",
            "--message",
            "two",
            "--",
            test_runtime(),
            "ask",
            "{message}",
        ],
        &leak,
    );
    let verdict = upstream.finish(&upstream_scenario);
    assert!(verdict.passed(), "the upstream itself: {verdict}\n{}", out.both());
    assert_eq!(out.code, Some(0), "{}", out.both());
    assert!(out.stdout.contains("PASS messages"), "{}", out.both());
    let text = std::fs::read_to_string(&file).unwrap();
    // The key went as `x-api-key` and inside the first user message: neither is written.
    assert!(!text.contains(KEY), "{text}");
    assert!(!text.contains("4f3e2d1c0b9a"), "{text}");
    assert!(text.contains("one (api key [redacted])"), "{text}");
    assert!(!out.stdout.contains(KEY) && !out.stderr.contains(KEY), "{}", out.both());
    assert!(text.contains(r#"{"text":"Hello from the upstream.""#), "{text}");
    assert!(text.contains(r#"{"user":"two","expect":{"message":"Second answer."}}"#), "{text}");
    schema_accepts(&file);
    // Replayed over Messages with another key of the same shape: the blanked spans are
    // volatile, so the requests compare equal.
    let other = [("ANTHROPIC_API_KEY", "sk-ant-api03-other-000000000"), ("TEST_RUNTIME_KEY_IN_BODY", "1")];
    let replay = drive(&file, MESSAGES, &[test_runtime(), "ask", "{message}"], &other);
    assert_eq!(replay.code, Some(0), "{}", replay.both());
    assert!(replay.stdout.contains("PASS messages"), "{}", replay.both());
}

#[test]
fn messages_upstream_faults_are_recorded_as_their_scripted_kinds_and_replay_as_they_happened() {
    let dir = tempfile::tempdir().unwrap();
    let text = r#"{"name":"messages-faults","lanes":[{"agent":"main","replies":[
        {"text":"hello"},
        {"error":"Overloaded","error_status":529},
        {"text":"This text is cut off after three events of the stream","drop_after_chunks":3},
        {"hang":true},
        {"text":"back again"}]}],
        "turns":[{"user":"one"},{"user":"two"},{"user":"three"},{"user":"four"},{"user":"five"}]}"#;
    let upstream_scenario = load_text(text, dir.path(), "faults-upstream.json");
    let upstream = Upstream::start(&upstream_scenario, "generic");
    let file = dir.path().join("faults.json");
    let env = [("TEST_RUNTIME_STREAM", "1"), ("TEST_RUNTIME_TIMEOUT_MS", "500"), ("ANTHROPIC_API_KEY", KEY)];
    let mut args = vec!["record", "--color", "never", "--upstream", &upstream.url, "--out", file.to_str().unwrap()];
    args.extend(["--runtime", MESSAGES]);
    for m in ["one", "two", "three", "four", "five"] {
        args.extend(["--message", m]);
    }
    args.extend(["--", test_runtime(), "ask", "{message}"]);
    let out = run(&args, &env);
    let verdict = upstream.finish(&upstream_scenario);
    assert!(verdict.passed(), "the upstream itself: {verdict}");
    assert_eq!(out.code, Some(0), "{}", out.both());
    let text = std::fs::read_to_string(&file).unwrap();
    schema_accepts(&file);
    assert!(text.contains(r#"{"error":"Overloaded","error_status":529,"error_type":"overloaded_error""#), "{text}");
    // Three events: `message_start`, the text block's start, its first 24 characters.
    assert!(text.contains(r#"{"text":"This text is cut off aft","drop_after_chunks":3"#), "{text}");
    assert!(text.contains(r#"{"hang":true"#), "{text}");
    for turn in ["two", "three", "four"] {
        assert!(text.contains(&format!(r#"{{"user":"{turn}","expect":{{"status":"error"}}}}"#)), "{text}");
    }
    assert!(text.contains(r#"{"user":"five","expect":{"message":"back again"}}"#), "{text}");
    let replay = drive(&file, MESSAGES, &[test_runtime(), "ask", "{message}"], &env);
    assert_eq!(replay.code, Some(0), "{}", replay.both());
    assert!(replay.stdout.contains("error 529 overloaded_error"), "{}", replay.both());
}

/// The headers Claude Code sends beside the body, with `key` as its `x-api-key`.
fn claude_headers(key: &str) -> String {
    format!(
        "x-api-key: {key}\r\nanthropic-version: 2023-06-01\r\nanthropic-beta: claude-code-20250219,interleaved-thinking-2025-05-14\r\n"
    )
}

/// `POST /v1/messages?beta=true` of `body` to `addr` with Claude Code's headers: the status and
/// the body (de-chunked).
fn post_messages(addr: &str, key: &str, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let request = format!(
        "POST /v1/messages?beta=true HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n{}content-length: {}\r\nconnection: close\r\n\r\n{body}",
        claude_headers(key),
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let answer = super::serve::parse(&String::from_utf8_lossy(&raw));
    (answer.status, answer.body)
}

const TOOLS: &str = r#"[{"name":"Agent","description":"Delegate a task","input_schema":{"type":"object","properties":{"task":{"type":"string"}}}}]"#;

/// The five requests of `tests/wire/anthropic.json` as a correct runtime sends them, the root's
/// system text holding `key` (a secret a careless runtime wrote there): the root's first
/// (streamed), the first child's (answered 529, then retried streamed), the second child's,
/// the root's second with both results as `tool_result` blocks.
fn delegation(key: &str) -> Vec<(String, u16)> {
    let system = format!("You are the root. Key {key}.");
    let root_first = format!(
        r#"{{"model":"claude-x","max_tokens":1024,"stream":true,"system":[{{"type":"text","text":"{system}"}}],"messages":[{{"role":"user","content":"Check the logs"}}],"tools":{TOOLS}}}"#
    );
    let child = |task: &str, stream: bool| {
        format!(
            r#"{{"model":"claude-x","max_tokens":1024,"stream":{stream},"messages":[{{"role":"user","content":[{{"type":"text","text":"{task}"}}]}}]}}"#
        )
    };
    let root_second = format!(
        r#"{{"model":"claude-x","max_tokens":1024,"system":"{system}","messages":[{{"role":"user","content":"Check the logs"}},{{"role":"assistant","content":[{{"type":"text","text":"Delegating both."}},{{"type":"tool_use","id":"call_1","name":"Agent","input":{{"task":"Summarise the logs"}}}},{{"type":"tool_use","id":"call_2","name":"Agent","input":{{"task":"Count the errors"}}}}]}},{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"call_1","content":[{{"type":"text","text":"The logs show nothing unusual."}}]}},{{"type":"tool_result","tool_use_id":"call_2","content":"No errors."}}]}}],"tools":{TOOLS}}}"#
    );
    vec![
        (root_first, 200),
        (child("Summarise the logs", false), 529),
        (child("Summarise the logs", true), 200),
        (child("Count the errors", false), 200),
        (root_second, 200),
    ]
}

#[test]
fn a_delegation_over_messages_with_tool_use_blocks_streamed_and_not_is_recorded_and_plays_back() {
    let dir = tempfile::tempdir().unwrap();
    // `tests/wire/anthropic.json` under roku's own limits (the recording is judged by them).
    let mut upstream_text: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(manifest_path("tests/wire/anthropic.json")).unwrap()).unwrap();
    upstream_text["rules"] = serde_json::json!({"preset": "roku"});
    let upstream_scenario = load_text(&upstream_text.to_string(), dir.path(), "anthropic-upstream.json");
    let upstream = Upstream::start(&upstream_scenario, "roku");
    let file = dir.path().join("delegation.json");
    // The plain proxy form: the requests are this test's own.
    let mut child = Command::new(env!("CARGO_BIN_EXE_rehearsal"))
        .args(["record", "--color", "never", "--idle-limit", "1s", "--upstream", &upstream.url, "--out"])
        .arg(&file)
        .args(["--runtime", "roku"])
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    stderr.read_line(&mut first).unwrap();
    let base = first.split_whitespace().nth(2).expect("recording through URL to ...").to_string();
    let addr = base.trim_start_matches("http://").trim_end_matches("/v1").to_string();
    for (i, (body, status)) in delegation(KEY).iter().enumerate() {
        let (got, answer) = post_messages(&addr, KEY, body);
        assert_eq!(got, *status, "request {i}: {answer}");
        if i == 0 {
            assert!(answer.contains("event: message_stop"), "{answer}");
        }
    }
    let ran = child.wait_with_output().unwrap();
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    let out = Output {
        code: ran.status.code(),
        stdout: String::from_utf8_lossy(&ran.stdout).into_owned(),
        stderr: first + &rest,
    };
    let verdict = upstream.finish(&upstream_scenario);
    assert!(verdict.passed(), "the upstream itself: {verdict}");
    assert_eq!(out.code, Some(0), "{}", out.both());
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains(KEY) && !out.both().contains(KEY), "{text}\n{}", out.both());
    schema_accepts(&file);
    // The streamed `tool_use` blocks are the root's two calls; the 529 is scripted as itself.
    assert!(
        text.contains(r#"{"text":"Delegating both.","calls":[{"tool":"Agent","args":{"task":"Summarise the logs"}},{"tool":"Agent","args":{"task":"Count the errors"}}]"#),
        "{text}"
    );
    assert!(text.contains(r#""error_status":529,"error_type":"overloaded_error""#), "{text}");
    for lane in [
        r#"{"task_contains": "Summarise the logs", "replies": ["#,
        r#"{"task_contains": "Count the errors", "replies": ["#,
    ] {
        assert!(text.contains(lane), "{lane} in {text}");
    }
    // Played back: the file served, the same requests (another key of the same shape) get
    // the same answers and pass every request check.
    let recorded = rehearsal::load::outside(&file).unwrap().into_parts().0;
    let replay = Upstream::start(&recorded, "roku");
    let replay_addr = replay.url.trim_start_matches("http://").trim_end_matches("/v1").to_string();
    for (i, (body, status)) in delegation("sk-ant-api03-another-key-0000").iter().enumerate() {
        let (got, answer) = post_messages(&replay_addr, "dummy", body);
        assert_eq!(got, *status, "replayed request {i}: {answer}");
    }
    let verdict = replay.finish(&recorded);
    assert!(verdict.passed(), "the replay: {verdict}");
}

/// A proxy with `options` on a runtime of its own; `client` runs against its address on
/// another thread; then the recording.
pub(super) fn through_proxy(options: ProxyOptions, client: impl FnOnce(String) + Send + 'static) -> Recording {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let proxy = Proxy::start(options).await.unwrap();
        let addr = proxy.base_url().trim_start_matches("http://").trim_end_matches("/v1").to_string();
        tokio::task::spawn_blocking(move || client(addr)).await.unwrap();
        proxy.finish(Duration::from_millis(500)).await
    })
}

/// An upstream on a raw socket that answers each of `answers` connections with its `body`
/// (a whole message) and sends the heads it was sent back on the channel.
pub(super) fn raw_upstream(answers: usize, body: &'static str) -> (String, std::sync::mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for _ in 0..answers {
            let Ok((mut stream, _)) = listener.accept() else { return };
            stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
            let mut head = String::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                head.push_str(&line);
            }
            let length = head
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string()))
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            let mut body_in = vec![0; length];
            let _ = reader.read_exact(&mut body_in);
            let _ = tx.send(head);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (url, rx)
}

/// A whole message with text and a call without arguments, as Anthropic writes one.
const WHOLE: &str = r#"{"id":"msg_x","type":"message","role":"assistant","model":"m","content":[{"type":"thinking","thinking":"hmm","signature":"s"},{"type":"text","text":"Listing."},{"type":"tool_use","id":"toolu_1","name":"list","input":{}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}"#;

#[test]
fn the_proxy_passes_the_query_and_the_anthropic_headers_upstream_and_a_key_as_x_api_key() {
    let body = r#"{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}"#;
    for upstream_key in [None, Some("sk-ant-upstream-key-123456".to_string())] {
        let (url, heads) = raw_upstream(1, WHOLE);
        let options = ProxyOptions { upstream: url, upstream_key: upstream_key.clone(), ..ProxyOptions::default() };
        let recording = through_proxy(options, move |addr| {
            let (status, answer) = post_messages(&addr, "runtime-key-77", body);
            assert_eq!(status, 200, "{answer}");
            assert_eq!(answer, WHOLE, "the answer passes through unchanged");
        });
        let head = heads.recv_timeout(Duration::from_secs(5)).unwrap().to_ascii_lowercase();
        assert!(head.starts_with("post /v1/messages?beta=true http/1.1\r\n"), "{head}");
        assert!(head.contains("anthropic-version: 2023-06-01\r\n"), "{head}");
        assert!(head.contains("anthropic-beta: claude-code-20250219,interleaved-thinking-2025-05-14\r\n"), "{head}");
        match &upstream_key {
            None => assert!(head.contains("x-api-key: runtime-key-77\r\n"), "{head}"),
            Some(key) => {
                assert!(head.contains(&format!("x-api-key: {key}\r\n")), "{head}");
                assert!(!head.contains("runtime-key-77") && !head.contains("authorization"), "{head}");
            }
        }
        assert!(recording.secrets.iter().any(|s| s == "runtime-key-77"), "{:?}", recording.secrets);
        let e = &recording.exchanges[0];
        assert_eq!(e.api, Api::Messages);
        assert_eq!(
            e.outcome,
            Outcome::Reply { text: "Listing.".into(), calls: vec![("toolu_1".into(), "list".into(), "{}".into())] }
        );
    }
}

#[test]
fn a_malformed_or_oversized_messages_body_is_refused_in_anthropic_s_error_object_and_not_recorded() {
    let (url, _heads) = raw_upstream(0, WHOLE);
    let options = ProxyOptions { upstream: url, body_limit_bytes: 4096, ..ProxyOptions::default() };
    let recording = through_proxy(options, |addr| {
        let (status, answer) = post_messages(&addr, "k", r#"{"messages":[{"role":"robot","content":"hi"}]}"#);
        assert_eq!(status, 400);
        assert_eq!(
            answer,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"rehearsal record: request #1: messages[0].role is `robot`; expected user, assistant or system (malformed_request)"}}"#
        );
        let (status, answer) = post_messages(&addr, "k", "not json");
        assert_eq!(status, 400);
        assert!(answer.contains("the body is not a messages request: expected ident"), "{answer}");
        let huge = format!(r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#, "x".repeat(8192));
        let (status, answer) = post_messages(&addr, "k", &huge);
        assert_eq!(status, 413);
        assert!(answer.starts_with(r#"{"type":"error","error":{"type":"request_too_large","#), "{answer}");
    });
    assert!(recording.exchanges.is_empty(), "{:?}", recording.exchanges);
    let kinds: Vec<FindingKind> = recording.findings.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, [FindingKind::Malformed, FindingKind::Malformed, FindingKind::Oversized]);
}

#[test]
fn count_tokens_goes_upstream_and_back_and_is_no_exchange() {
    const COUNT: &str = r#"{"input_tokens":8}"#;
    let (url, heads) = raw_upstream(1, COUNT);
    let options = ProxyOptions { upstream: url, ..ProxyOptions::default() };
    let recording = through_proxy(options, |addr| {
        let body = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
        let mut stream = TcpStream::connect(&addr).unwrap();
        let request = format!(
            "POST /v1/messages/count_tokens?beta=true HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n{}content-length: {}\r\nconnection: close\r\n\r\n{body}",
            claude_headers("k"),
            body.len()
        );
        stream.write_all(request.as_bytes()).unwrap();
        let mut raw = Vec::new();
        let _ = stream.read_to_end(&mut raw);
        let answer = super::serve::parse(&String::from_utf8_lossy(&raw));
        assert_eq!((answer.status, answer.body.as_str()), (200, COUNT));
    });
    let head = heads.recv_timeout(Duration::from_secs(5)).unwrap();
    assert!(head.starts_with("POST /v1/messages/count_tokens?beta=true HTTP/1.1\r\n"), "{head}");
    assert!(recording.exchanges.is_empty(), "{:?}", recording.exchanges);
    assert!(recording.findings.is_empty(), "{:?}", recording.findings);
    assert_eq!(recording.requests, 1);
}

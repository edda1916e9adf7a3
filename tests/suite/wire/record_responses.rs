//! `rehearsal record` over the OpenAI Responses API: the proxy forwards `POST /v1/responses`,
//! reads each request through the conversion `serve` uses, a `previous_response_id` from the
//! conversations of the answers that came through it (keyed by the upstream's response ids),
//! and each answer (whole or streamed) into the same scenario format. Guarded: the test
//! runtime chaining its turns by `previous_response_id` is recorded with its key blanked and
//! replays green under `drive`; the delegation of `tests/wire/responses.json` (two
//! `function_call` items streamed, a 429, the root's last request chained) is recorded as
//! calls in the plain form and the file, served again, answers the same requests and passes.

use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::record::{Upstream, drive, load_text, run, schema_accepts};
use crate::support::{Output, manifest_path, test_runtime};

const RESPONSES: &str = "tests/record/responses-runtime.json";
const KEY: &str = "sk-proj-Zx81qPw4f3e2d1c0b9a";

#[test]
fn a_responses_runtime_chaining_by_previous_response_id_is_recorded_and_replays_green() {
    let dir = tempfile::tempdir().unwrap();
    let text = r#"{"name":"responses-upstream","lanes":[{"agent":"main","replies":[
        {"text":"Hello from the upstream."},{"text":"Second answer."},{"text":"Third."}]}],
        "turns":[{"user":"one"},{"user":"two"},{"user":"three"}]}"#;
    let upstream_scenario = load_text(text, dir.path(), "responses-upstream.json");
    let upstream = Upstream::start(&upstream_scenario, "generic");
    let file = dir.path().join("responses.json");
    let env = [("OPENAI_API_KEY", KEY)];
    let mut args = vec!["record", "--color", "never", "--upstream", &upstream.url, "--out", file.to_str().unwrap()];
    args.extend(["--runtime", RESPONSES]);
    for m in ["one", "two", "three"] {
        args.extend(["--message", m]);
    }
    args.extend(["--", test_runtime(), "ask", "{message}"]);
    let out = run(&args, &env);
    let verdict = upstream.finish(&upstream_scenario);
    assert!(verdict.passed(), "the upstream itself: {verdict}\n{}", out.both());
    assert_eq!(out.code, Some(0), "{}", out.both());
    assert!(!out.stderr.contains("previous_response_id"), "every chained id was seen: {}", out.both());
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains(KEY), "{text}");
    schema_accepts(&file);
    // The third request sent only "three" and the second answer's id: recorded as the whole
    // conversation, as serve reads it.
    assert!(
        text.contains(r#"{"role":"user","content":"one"},{"role":"assistant","content":"Hello from the upstream."},{"role":"user","content":"two"},{"role":"assistant","content":"Second answer."},{"role":"user","content":"three"}"#),
        "{text}"
    );
    assert!(text.contains(r#"{"user":"three","expect":{"message":"Third."}}"#), "{text}");
    let replay =
        drive(&file, RESPONSES, &[test_runtime(), "ask", "{message}"], &[("OPENAI_API_KEY", "sk-proj-other-00000000")]);
    assert_eq!(replay.code, Some(0), "{}", replay.both());
    assert!(replay.stdout.contains("PASS responses"), "{}", replay.both());
}

/// `POST /v1/responses` of `body` to `addr`: the status and the body (de-chunked).
fn post_responses(addr: &str, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let request = format!(
        "POST /v1/responses HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\nauthorization: Bearer {KEY}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let answer = super::serve::parse(&String::from_utf8_lossy(&raw));
    (answer.status, answer.body)
}

const TOOLS: &str = r#"[{"type":"function","name":"Agent","description":"Delegate a task","parameters":{"type":"object","properties":{"task":{"type":"string"}}}}]"#;

/// The five requests of `tests/wire/responses.json` as a correct runtime sends them: the
/// root's first (streamed), the first child's (answered 429, then retried streamed), the second
/// child's, the root's second chained to `first_id` with both results as
/// `function_call_output` items.
fn delegation(first_id: &str) -> Vec<(String, u16)> {
    let child = |task: &str, stream: bool| format!(r#"{{"model":"m","stream":{stream},"input":"{task}"}}"#);
    vec![
        (
            format!(
                r#"{{"model":"m","stream":true,"instructions":"You are the root.","input":"Check the logs","tools":{TOOLS}}}"#
            ),
            200,
        ),
        (child("Summarise the logs", false), 429),
        (child("Summarise the logs", true), 200),
        (child("Count the errors", false), 200),
        (
            format!(
                r#"{{"model":"m","instructions":"You are the root.","previous_response_id":"{first_id}","input":[{{"type":"function_call_output","call_id":"call_1","output":"The logs show nothing unusual."}},{{"type":"function_call_output","call_id":"call_2","output":"No errors."}}],"tools":{TOOLS}}}"#
            ),
            200,
        ),
    ]
}

#[test]
fn a_delegation_over_responses_with_function_calls_streamed_and_chained_is_recorded_and_plays_back() {
    let dir = tempfile::tempdir().unwrap();
    // `tests/wire/responses.json` under roku's own limits (the recording is judged by them).
    let mut upstream_text: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(manifest_path("tests/wire/responses.json")).unwrap()).unwrap();
    upstream_text["rules"] = serde_json::json!({"preset": "roku"});
    let upstream_scenario = load_text(&upstream_text.to_string(), dir.path(), "responses-upstream.json");
    let upstream = Upstream::start(&upstream_scenario, "roku");
    let file = dir.path().join("delegation.json");
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
    // The upstream numbers its responses by exchange: the root's first is resp_0.
    for (i, (body, status)) in delegation("resp_0").iter().enumerate() {
        let (got, answer) = post_responses(&addr, body);
        assert_eq!(got, *status, "request {i}: {answer}");
        if i == 0 {
            assert!(answer.contains("event: response.completed"), "{answer}");
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
    assert!(
        text.contains(r#"{"text":"Delegating both.","calls":[{"tool":"Agent","args":{"task":"Summarise the logs"}},{"tool":"Agent","args":{"task":"Count the errors"}}]"#),
        "{text}"
    );
    assert!(text.contains(r#""error_status":429,"error_type":"rate_limit_error""#), "{text}");
    // The chained request is recorded with the conversation it continued.
    assert!(text.contains(r#"{"role":"tool","content":"No errors."}"#), "{text}");
    // Played back: the file served, the same requests pass.
    let recorded = rehearsal::load::outside(&file).unwrap().into_parts().0;
    let replay = Upstream::start(&recorded, "roku");
    let replay_addr = replay.url.trim_start_matches("http://").trim_end_matches("/v1").to_string();
    for (i, (body, status)) in delegation("resp_0").iter().enumerate() {
        let (got, answer) = post_responses(&replay_addr, body);
        assert_eq!(got, *status, "replayed request {i}: {answer}");
    }
    let verdict = replay.finish(&recorded);
    assert!(verdict.passed(), "the replay: {verdict}");
}

/// A whole response as OpenAI writes one: an id of the upstream's own, a reasoning item (it
/// carries nothing), the text and a call.
const WHOLE: &str = r#"{"id":"resp_up_7f3a","object":"response","status":"completed","output":[{"type":"reasoning","id":"rs_1","summary":[]},{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"Looking.","annotations":[]}]},{"type":"function_call","id":"fc_1","call_id":"call_up_1","name":"lookup","arguments":"{\"q\":\"logs\"}"}],"usage":{"input_tokens":1,"output_tokens":1,"total_tokens":2}}"#;

#[test]
fn previous_response_id_is_read_from_the_upstream_s_own_ids_and_an_unseen_one_is_noted() {
    use rehearsal::wire::FindingKind;
    use rehearsal::wire::record::proxy::{Api, Outcome, ProxyOptions};

    use super::record_messages::{raw_upstream, through_proxy};
    let (url, _heads) = raw_upstream(3, WHOLE);
    let options = ProxyOptions { upstream: url, ..ProxyOptions::default() };
    let recording = through_proxy(options, |addr| {
        let (status, answer) = post_responses(&addr, r#"{"model":"m","input":"Check the logs"}"#);
        assert_eq!((status, answer.as_str()), (200, WHOLE));
        // Chained to the upstream's id: read with the conversation that came through.
        let chained = r#"{"model":"m","previous_response_id":"resp_up_7f3a","input":[{"type":"function_call_output","call_id":"call_up_1","output":"fine"}]}"#;
        assert_eq!(post_responses(&addr, chained).0, 200);
        // An id the proxy never saw answered: forwarded all the same.
        assert_eq!(
            post_responses(&addr, r#"{"model":"m","previous_response_id":"resp_before","input":"again"}"#).0,
            200
        );
        // Not a responses request: refused in Chat's error object, not forwarded.
        let (status, answer) = post_responses(&addr, r#"{"input":[{"type":"message","role":"robot","content":"hi"}]}"#);
        assert_eq!(status, 400);
        assert!(
            answer.starts_with(r#"{"error":{"message":"rehearsal record: request #4: input[0].role is `robot`"#),
            "{answer}"
        );
        assert!(
            answer.ends_with(r#""type":"invalid_request_error","param":null,"code":"malformed_request"}}"#),
            "{answer}"
        );
    });
    assert_eq!(recording.exchanges.len(), 3);
    assert!(recording.exchanges.iter().all(|e| e.api == Api::Responses));
    assert_eq!(
        recording.exchanges[0].outcome,
        Outcome::Reply {
            text: "Looking.".into(),
            calls: vec![("call_up_1".into(), "lookup".into(), r#"{"q":"logs"}"#.into())]
        }
    );
    let chained: Vec<(String, String)> = recording.exchanges[1]
        .converted
        .messages
        .iter()
        .map(|m| (format!("{:?}", m.role), m.content.clone()))
        .collect();
    assert_eq!(
        chained,
        [
            ("User".to_string(), "Check the logs".to_string()),
            ("Assistant".to_string(), "Looking.".to_string()),
            ("Tool".to_string(), "fine".to_string())
        ]
    );
    assert_eq!(recording.exchanges[1].converted.messages.iter().nth(1).unwrap().tool_calls[0].name, "lookup");
    assert_eq!(recording.exchanges[2].converted.messages.len(), 1);
    assert_eq!(
        recording.notes,
        [
            "exchange 2: previous_response_id `resp_before` names no response answered through the proxy: the request is recorded without that conversation, and a replay that sends the id is refused"
        ]
    );
    let kinds: Vec<FindingKind> = recording.findings.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, [FindingKind::Malformed]);
}

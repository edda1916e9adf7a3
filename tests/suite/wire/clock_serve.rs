//! `rehearsal serve`'s server on the clock (issue 24), without Python: a fake runtime in the
//! test speaks the clock protocol and HTTP/1.1 itself, with a 10 s model timeout of its own.
//! A reply due at 30 s virtual is given up on, and the server records the give-up at exactly
//! 10.000 s; a reply due at 9.999 s is answered at 9.999 s. Twenty runs of each give the same
//! record and transcript. Every wait is bounded by a wall-clock timeout, so a broken endpoint
//! fails instead of hanging.

use std::time::Duration;

use rehearsal::dialect::Dialect;
use rehearsal::wire::clock::{ClockEnd, ClockEndpoint, ClockOptions, ClockReport};
use rehearsal::wire::{End, ServeOptions, Server, WireRun, trace_lines};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::support::manifest_path;

const S: u64 = 1_000_000_000;
const WAIT: Duration = Duration::from_secs(10);
/// The fake runtime's model timeout.
const GIVE_UP_NS: u64 = 10 * S;

/// The clock side of the fake runtime.
struct ClockLink {
    lines: tokio::io::Lines<BufReader<tokio::net::tcp::OwnedReadHalf>>,
    writer: tokio::net::tcp::OwnedWriteHalf,
}

impl ClockLink {
    async fn send(&mut self, message: Value) {
        self.writer.write_all(format!("{message}\n").as_bytes()).await.expect("the endpoint reads");
    }

    async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(WAIT, self.lines.next_line())
            .await
            .expect("the clock answers within 10 s")
            .expect("the clock connection reads")
            .expect("the clock did not close the connection");
        serde_json::from_str(&line).expect("JSON lines")
    }
}

/// What one run gave: the server's record, the clock's report, what the fake runtime saw.
struct Outcome {
    wire: WireRun,
    clock: ClockReport,
    /// The fake runtime's own account: `answered at NS: BODY` or `gave up at NS`.
    runtime: String,
}

/// One run of `scenario` (a reply with `latency_ms`) against a runtime that gives up after
/// [`GIVE_UP_NS`] of virtual time.
async fn run(scenario: &str) -> Outcome {
    let scenario = rehearsal::load::outside(&manifest_path(&format!("tests/wire/{scenario}"))).unwrap().into_parts().0;
    let endpoint = ClockEndpoint::bind(ClockOptions::default()).await.expect("the clock binds");
    let options = ServeOptions { created_s: Some(0), clock: Some(endpoint.clock()), ..ServeOptions::default() };
    let server = Server::start(&scenario, Dialect::builtin("generic").unwrap(), options).await.unwrap();
    endpoint.set_http(vec![server.addr().to_string()]);

    // The runtime starts: hello, then its one model request.
    let (read, writer) = TcpStream::connect(endpoint.addr()).await.unwrap().into_split();
    let mut link = ClockLink { lines: BufReader::new(read).lines(), writer };
    link.send(json!({"op": "hello", "protocol": 1, "runtime": "fake-http", "pid": 1})).await;
    let welcome = link.recv().await;
    assert_eq!(welcome["http"], json!([server.addr().to_string()]), "the welcome names the model endpoint");
    let mut http = TcpStream::connect(server.addr()).await.unwrap();
    let conn = http.local_addr().unwrap().to_string();
    let body = r#"{"model":"m","messages":[{"role":"user","content":"Hello"}]}"#;
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    http.write_all(request.as_bytes()).await.unwrap();
    let report = |seq: u64, now: u64, next: Option<u64>, read: u64, open: bool| {
        json!({"op": "idle", "seq": seq, "now_ns": now, "next_due_ns": next,
               "conns": [{"conn": conn, "sent": 1, "read": read, "open": open, "reading": open, "order": if seq == 1 { vec![1] } else { vec![] }}]})
    };
    // Idle with its timeout as its one timer.
    link.send(report(1, 0, Some(GIVE_UP_NS), 0, true)).await;
    let advance = link.recv().await;
    assert_eq!(advance["op"], "advance", "{advance}");
    let to = advance["to_ns"].as_u64().unwrap();
    link.send(json!({"op": "at", "seq": 1, "now_ns": to})).await;
    let runtime = if to == GIVE_UP_NS {
        // The timeout fires: the runtime closes the connection (its give-up) and, with nothing
        // else to do, goes idle with no timer.
        drop(http);
        link.send(report(2, to, None, 0, false)).await;
        let end = link.recv().await;
        assert_eq!(end["op"], "end", "{end}");
        format!("gave up at {to}")
    } else {
        // The reply is due before the timeout: idle at its instant, the harness releases it.
        link.send(report(2, to, Some(GIVE_UP_NS), 0, true)).await;
        let mut raw = Vec::new();
        let mut buf = [0u8; 4096];
        let answer = loop {
            let n = tokio::time::timeout(WAIT, http.read(&mut buf)).await.expect("the reply comes").unwrap();
            assert!(n > 0, "the server closed before its reply was complete");
            raw.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&raw).into_owned();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length: usize = head
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap())
                    })
                    .expect("a content-length");
                if body.len() >= length {
                    break body.to_string();
                }
            }
        };
        let answer: Value = serde_json::from_str(&answer).unwrap();
        // Read, and done: the runtime closes its connections and exits.
        link.send(json!({"op": "busy", "seq": 2})).await;
        let pending = link.recv().await;
        assert_eq!(pending["conns"], json!([{"conn": conn, "released": 1}]), "{pending}");
        drop(http);
        drop(link);
        format!("answered at {to}: {}", answer["choices"][0]["message"]["content"])
    };
    // The run is over: the server first (its record waits for the closes), then the clock.
    let end = tokio::time::timeout(Duration::from_millis(200), server.done()).await.unwrap_or(End::Caller);
    let wire = server.finish(end).await;
    let clock = endpoint.finish().await;
    Outcome { wire, clock, runtime }
}

/// What must be the same in every run: the trace, the transcript, the give-ups.
fn record(outcome: &Outcome) -> (Vec<String>, Vec<String>, String, Vec<Option<Duration>>) {
    (
        trace_lines(&outcome.wire),
        outcome.clock.transcript.clone(),
        outcome.runtime.clone(),
        outcome.wire.disconnects.iter().map(|d| d.gave_up).collect(),
    )
}

#[tokio::test]
async fn a_reply_due_at_30_s_against_a_10_s_timeout_is_a_disconnect_at_exactly_10_000_s_in_20_runs() {
    let first = run("clock-latency-30000.json").await;
    assert_eq!(first.runtime, format!("gave up at {GIVE_UP_NS}"));
    let [gave_up] = first.wire.disconnects.as_slice() else { panic!("one disconnect: {:?}", first.wire.disconnects) };
    assert_eq!(gave_up.gave_up, Some(Duration::from_secs(10)), "the give-up is at the virtual instant of the timeout");
    assert_eq!(gave_up.held_ms, 10_000);
    assert_eq!(gave_up.alias, "main");
    assert!(!first.wire.side.wall_times, "the record says its times are virtual");
    assert_eq!(first.wire.side.exchanges[0].replied, None, "never answered");
    assert_eq!(
        trace_lines(&first.wire),
        [
            "0 ms virtual  exchange 0  main #1  1 messages, 0 tools -> no reply",
            "      message 1 user: \"Hello\"",
            "10000 ms virtual  exchange 0  main  gave up: the client closed its connection after 10000 ms, not yet answered",
        ]
    );
    assert!(matches!(first.clock.end, ClockEnd::Stuck { at_ns: GIVE_UP_NS }), "{:?}", first.clock.end);
    assert_eq!(
        first.clock.transcript,
        [
            "      0.000s hello fake-http",
            "      0.000s request on c1",
            "      0.000s advance to 10.000s",
            "     10.000s at #1",
            "     10.000s closed c1",
            "     10.000s end: stuck at 10.000s: the runtime is idle with no timer and no reply due, so nothing can ever happen again",
        ]
    );
    for _ in 1..20 {
        assert_eq!(record(&run("clock-latency-30000.json").await), record(&first));
    }
}

#[tokio::test]
async fn a_reply_due_at_9_999_s_against_a_10_s_timeout_is_answered_at_9_999_s_in_20_runs() {
    let first = run("clock-latency-9999.json").await;
    assert_eq!(first.runtime, "answered at 9999000000: \"The answer.\"");
    assert!(first.wire.disconnects.is_empty(), "{:?}", first.wire.disconnects);
    assert_eq!(first.wire.side.exchanges[0].replied, Some(Duration::from_millis(9_999)));
    assert_eq!(
        trace_lines(&first.wire),
        [
            "0 ms virtual  exchange 0  main #1  1 messages, 0 tools -> text \"The answer.\" at 9999 ms virtual",
            "      message 1 user: \"Hello\"",
        ]
    );
    assert_eq!(
        first.clock.transcript,
        [
            "      0.000s hello fake-http",
            "      0.000s request on c1",
            "      0.000s advance to 9.999s",
            "      9.999s at #1",
            "      9.999s release r1 on c1",
            "      9.999s closed c1",
            "      9.999s disconnected",
            "      9.999s end: finished at 9.999s",
        ]
    );
    for _ in 1..20 {
        assert_eq!(record(&run("clock-latency-9999.json").await), record(&first));
    }
}

//! Hostile input, round 4: the network and process surfaces (`record`'s proxy, the clock
//! endpoint, `drive`, `serve`), attacked as issue 37 lists them. Each test is the defect's
//! reproducer at a small size: loopback only, limits lowered through the library's options
//! (never a timed assertion), every wait bounded so that a regression fails instead of
//! hanging, and every process a test starts tagged with a marker unique to that test, so that
//! looking for survivors never races with a parallel test.

use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rehearsal::dialect::Dialect;
use rehearsal::wire::clock::{ClockEnd, ClockEndpoint, ClockLimits, ClockOptions};
use rehearsal::wire::record::proxy::{Outcome, Proxy, ProxyOptions, Recording};
use rehearsal::wire::{End, FindingKind, ServeOptions, Server};

use crate::support::{Output, manifest_path};

/// Every wait of these tests ends by this much wall time.
const WAIT: Duration = Duration::from_secs(20);

/// A unique marker for this test process and `what`.
fn marker(what: &str) -> String {
    format!("rehearsal-hostile-{}-{what}", std::process::id())
}

/// An upstream that answers every request 200 and then never stops: `sse` frames of 4 KiB of
/// text, or one JSON body that never closes, written as fast as the socket takes them. It
/// stops when its client (the proxy) goes, or when `stop` is set.
struct Endless {
    url: String,
    stop: Arc<AtomicBool>,
}

/// A loopback upstream on port 0: each connection is handed to `answer` on a thread of its
/// own, until `stop` is set. Returns its base URL.
fn upstream(stop: &Arc<AtomicBool>, answer: impl Fn(TcpStream) + Send + Sync + 'static) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let (stopping, answer) = (stop.clone(), Arc::new(answer));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            if stopping.load(Ordering::SeqCst) {
                return;
            }
            let answer = answer.clone();
            std::thread::spawn(move || answer(stream));
        }
    });
    url
}

impl Endless {
    fn start(sse: bool) -> Endless {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let url = upstream(&stop, move |mut stream| {
            let _ = read_head(&mut stream);
            let (kind, first) = if sse {
                ("text/event-stream", String::new())
            } else {
                ("application/json", r#"{"choices":[{"message":{"role":"assistant","content":""#.to_string())
            };
            let head = format!("HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\nconnection: close\r\n\r\n{first}");
            if stream.write_all(head.as_bytes()).is_err() {
                return;
            }
            let text = "x".repeat(4096);
            let piece = if sse {
                format!("data: {{\"choices\":[{{\"delta\":{{\"content\":\"{text}\"}}}}]}}\n\n")
            } else {
                text
            };
            while !stopping.load(Ordering::SeqCst) {
                if stream.write_all(piece.as_bytes()).is_err() {
                    return;
                }
            }
        });
        Endless { url, stop }
    }
}

impl Drop for Endless {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Reads an HTTP head (to the blank line) and returns it.
fn read_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 1 << 16 {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// Sends `raw` to `addr` and reads the answer until the server closes, `want` bytes came,
/// or [`WAIT`] passed: the bytes read.
fn exchange(addr: &str, raw: &[u8], want: usize) -> Vec<u8> {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    stream.write_all(raw).unwrap();
    let started = Instant::now();
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    while got.len() < want && started.elapsed() < WAIT {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    got
}

/// A POST of `body` to `path` on `addr`, closing after the answer.
fn post(addr: &str, path: &str, body: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The host and port of a base URL (`http://127.0.0.1:PORT/v1`).
fn addr_of(base: &str) -> String {
    base.trim_start_matches("http://").trim_end_matches("/v1").to_string()
}

/// A proxy to `upstream` with a 64 KiB reply limit, on a runtime of its own; `client` runs
/// against its address on another thread; then the recording.
fn through_proxy(upstream: &str, client: impl FnOnce(String) + Send + 'static) -> Recording {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let options =
            ProxyOptions { upstream: upstream.to_string(), max_reply_bytes: 64 << 10, ..ProxyOptions::default() };
        let proxy = Proxy::start(options).await.unwrap();
        let addr = addr_of(&proxy.base_url());
        tokio::task::spawn_blocking(move || client(addr)).await.unwrap();
        proxy.finish(Duration::from_millis(500)).await
    })
}

#[test]
fn record_passes_an_endless_whole_answer_through_and_keeps_only_its_limit() {
    // Before: the proxy read the whole body before answering (the client got nothing) and held
    // it twice, until an allocation failed.
    let upstream = Endless::start(false);
    let received = Arc::new(std::sync::Mutex::new(0));
    let seen = received.clone();
    let recording = through_proxy(&upstream.url, move |addr| {
        let body = r#"{"messages":[{"role":"user","content":"hi"}]}"#;
        *seen.lock().unwrap() = exchange(&addr, &post(&addr, "/v1/chat/completions", body), 4 << 20).len();
    });
    assert!(*received.lock().unwrap() >= 4 << 20, "the runtime gets the answer as it streams");
    let e = &recording.exchanges[0];
    assert_eq!(e.outcome, Outcome::Dropped { chunks: 0, text: String::new(), calls: Vec::new() });
    assert_eq!(recording.notes.len(), 1, "{:?}", recording.notes);
    assert!(
        recording.notes[0].starts_with("exchange 0: the answer is longer than --max-reply-bytes (65536 bytes)"),
        "{:?}",
        recording.notes
    );
}

#[test]
fn record_keeps_an_endless_stream_to_its_limit() {
    // Before: every delta's text was kept until the upstream timeout (557 MB for 300 MB).
    let upstream = Endless::start(true);
    let recording = through_proxy(&upstream.url, move |addr| {
        let body = r#"{"messages":[{"role":"user","content":"hi"}],"stream":true}"#;
        let got = exchange(&addr, &post(&addr, "/v1/chat/completions", body), 2 << 20);
        assert!(got.len() >= 2 << 20);
    });
    let Outcome::Dropped { chunks, text, .. } = &recording.exchanges[0].outcome else {
        panic!("{:?}", recording.exchanges[0].outcome)
    };
    assert!(text.len() <= 64 << 10, "{} bytes kept", text.len());
    assert_eq!(text.len(), chunks * 4096, "the chunks that fit are kept whole");
    assert!(recording.notes[0].contains("longer than --max-reply-bytes"), "{:?}", recording.notes);
}

#[test]
fn record_answers_an_endless_model_list_with_an_error_object() {
    // Before: `GET /v1/models` was read whole, with no limit and no timeout.
    let upstream = Endless::start(false);
    let answer = Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = answer.clone();
    through_proxy(&upstream.url, move |addr| {
        let raw = format!("GET /v1/models HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n");
        *kept.lock().unwrap() = exchange(&addr, raw.as_bytes(), usize::MAX);
    });
    let answer = String::from_utf8_lossy(&answer.lock().unwrap()).into_owned();
    assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
    assert!(answer.contains(r#""code":"upstream_too_large""#), "{answer}");
}

#[test]
fn the_clock_endpoint_drops_a_runtime_that_stops_reading() {
    // Before: a client that sent `now` lines and never read the answers blocked the
    // endpoint's one loop; nothing ended the run.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let limits = ClockLimits { write_wall_max: Duration::from_millis(300), ..ClockLimits::default() };
        let endpoint = ClockEndpoint::bind(ClockOptions { limits, ..ClockOptions::default() }).await.unwrap();
        let clock = endpoint.clock();
        let addr = endpoint.addr();
        // The flood runs on a thread: its socket is never read.
        let flood = std::thread::spawn(move || {
            let mut stream = TcpStream::connect(addr).unwrap();
            stream.set_write_timeout(Some(Duration::from_millis(500))).unwrap();
            let hello = "{\"op\":\"hello\",\"protocol\":1,\"runtime\":\"flood\"}\n";
            stream.write_all(hello.as_bytes()).unwrap();
            let now = "{\"op\":\"now\"}\n".repeat(1000);
            let started = Instant::now();
            // Writes fail or block once the endpoint stops reading; either way it stops here.
            while started.elapsed() < Duration::from_secs(10) && stream.write_all(now.as_bytes()).is_ok() {}
            stream
        });
        tokio::time::timeout(WAIT, clock.ended()).await.expect("the clock ends by itself");
        let report = endpoint.finish().await;
        match &report.end {
            ClockEnd::ProtocolError { message, .. } => {
                assert!(message.contains("stopped reading its clock connection"), "{message}");
                assert!(message.contains("within 300 ms"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        drop(flood.join().unwrap());
    });
}

/// Whether process `pid` is alive and still the one tagged `marker` (its command line holds
/// it), so a reused pid is never mistaken for a survivor.
fn alive_with(pid: i32, marker: &str) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else { return false };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let zombie = stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z'));
    !zombie && String::from_utf8_lossy(&cmdline).contains(marker)
}

/// An executable shell script `runtime.sh` in `dir` holding `text`: a runtime for `drive`.
#[cfg(unix)]
fn runtime_script(dir: &Path, text: &str) -> std::path::PathBuf {
    let script = dir.join("runtime.sh");
    std::fs::write(&script, text).unwrap();
    let mut perms = std::fs::metadata(&script).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&script, perms).unwrap();
    script
}

#[cfg(target_os = "linux")]
#[test]
fn drive_kills_a_setsid_grandchild_and_keeps_what_the_runtime_printed() {
    // Before: a grandchild that called setsid left the process group and outlived drive, and
    // while it held stdout, drive threw away what the runtime had printed.
    let dir = tempfile::tempdir().unwrap();
    let mark = marker("setsid");
    let pidfile = dir.path().join("grandchild.pid");
    // The runtime asks the model once (with the test runtime), leaves a grandchild in a
    // session of its own holding stdout, prints the answer and exits.
    // It waits for the grandchild's pid, so the grandchild is surely there when the turn ends.
    let script = runtime_script(
        dir.path(),
        &format!(
            "#!/bin/sh\nsetsid sh -c 'echo $$ > \"$1.tmp\"; mv \"$1.tmp\" \"$1\"; sleep 300; true' {mark} {pidfile} &\nwhile [ ! -s {pidfile} ]; do sleep 0.01; done\nexec {runtime} ask \"$1\"\n",
            pidfile = pidfile.display(),
            runtime = crate::support::test_runtime(),
        ),
    );
    // The grandchild is an `sh` whose command line holds the marker (it runs `sleep`, then
    // `true`, so no shell execs it away): `alive_with` can see it while it lives.
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_rehearsal"))
        .args(["drive", "--color", "never", "--runtime", "generic"])
        .arg(manifest_path("tests/drive/one-turn.json"))
        .arg("--")
        .arg(&script)
        .arg("{message}")
        .output()
        .unwrap();
    let out = Output {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
    let survived = alive_with(pid, &mark);
    if survived {
        // SAFETY: kill(2) on the test's own leftover, identified by its marker.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
    assert!(!survived, "the setsid'd grandchild outlived drive\n{}", out.both());
    assert_eq!(out.code, Some(0), "{}", out.both());
    assert!(out.stdout.contains("PASS"), "{}", out.both());
    assert!(started.elapsed() < WAIT);
}

/// A scenario served in-process on a runtime of its own; `client` runs against its address;
/// then the record of the run.
fn served(scenario: &str, client: impl FnOnce(String) + Send + 'static) -> rehearsal::wire::WireRun {
    let scenario = rehearsal::load::outside(&manifest_path(scenario)).unwrap().into_parts().0;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let options = ServeOptions { idle_limit: Duration::from_secs(30), ..ServeOptions::default() };
        let server = Server::start(&scenario, Dialect::builtin("generic").unwrap(), options).await.unwrap();
        let addr = server.addr().to_string();
        tokio::task::spawn_blocking(move || client(addr)).await.unwrap();
        server.finish(End::Caller).await
    })
}

/// The status line's code and the body of an answer read whole.
fn status_and_body(answer: &[u8]) -> (String, serde_json::Value) {
    let text = String::from_utf8_lossy(answer);
    let status = text.split_whitespace().nth(1).unwrap_or_default().to_string();
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
    (status, serde_json::from_str(body).unwrap_or(serde_json::Value::Null))
}

#[test]
fn serve_quotes_a_huge_role_briefly() {
    // Before: an 8 MB role was quoted whole in its finding (40 such requests: a 320 MB report).
    let answers = Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = answers.clone();
    let run = served("tests/drive/one-turn.json", move |addr| {
        let role = "r".repeat(1 << 20);
        let body = format!(r#"{{"messages":[{{"role":"{role}","content":"hi"}}]}}"#);
        kept.lock().unwrap().push(exchange(&addr, &post(&addr, "/v1/chat/completions", &body), usize::MAX));
    });
    let (status, body) = status_and_body(&answers.lock().unwrap()[0]);
    assert_eq!(status, "400");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("(1048576 chars)"), "{message}");
    assert!(message.len() < 1500, "{} bytes", message.len());
    let finding = &run.findings[0];
    assert_eq!(finding.kind, FindingKind::Malformed);
    assert!(finding.message.len() < 1500, "{} bytes", finding.message.len());
    assert!(finding.message.contains("messages[0].role is `rrrr"), "{}", finding.message);
}

#[test]
fn serve_answers_a_garbage_head_and_oversized_headers_with_error_objects() {
    // Before: hyper's bare 400 and 431 with empty bodies, and no finding.
    let answers = Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = answers.clone();
    let run = served("tests/drive/one-turn.json", move |addr| {
        let garbage = exchange(&addr, b"\x16\x03\x01 not http at all\r\n\r\n", usize::MAX);
        let big = format!("GET /v1/models HTTP/1.1\r\nhost: x\r\nx-big: {}\r\n\r\n", "a".repeat(80 << 10));
        let oversized = exchange(&addr, big.as_bytes(), usize::MAX);
        kept.lock().unwrap().extend([garbage, oversized]);
    });
    let answers = answers.lock().unwrap();
    let (status, body) = status_and_body(&answers[0]);
    assert_eq!(status, "400", "{}", String::from_utf8_lossy(&answers[0]));
    assert_eq!(body["error"]["code"], "malformed_request");
    let (status, body) = status_and_body(&answers[1]);
    assert_eq!(status, "431", "{}", String::from_utf8_lossy(&answers[1]));
    assert_eq!(body["error"]["code"], "request_too_large");
    let kinds: Vec<FindingKind> = run.findings.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, vec![FindingKind::Malformed, FindingKind::Oversized], "{:?}", run.findings);
    assert!(run.findings[0].message.contains("not an HTTP/1 request head"), "{}", run.findings[0].message);
}

#[test]
fn serve_refuses_a_tool_without_a_name_or_a_schema() {
    // Before: both were answered 200.
    let answers = Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = answers.clone();
    let run = served("tests/drive/one-turn.json", move |addr| {
        for tool in [
            r#"{"type":"function","function":{"name":""}}"#,
            r#"{"type":"function","function":{"name":"look","parameters":"not a schema"}}"#,
        ] {
            let body = format!(r#"{{"messages":[{{"role":"user","content":"hi"}}],"tools":[{tool}]}}"#);
            kept.lock().unwrap().push(exchange(&addr, &post(&addr, "/v1/chat/completions", &body), usize::MAX));
        }
    });
    let answers = answers.lock().unwrap();
    for (answer, says) in answers.iter().zip([
        "tools[0].function.name is empty",
        "tools[0] (`look`): function.parameters is a string, not a JSON Schema object",
    ]) {
        let (status, body) = status_and_body(answer);
        assert_eq!(status, "400");
        assert_eq!(body["error"]["code"], "malformed_request");
        assert!(body["error"]["message"].as_str().unwrap().contains(says), "{body}");
    }
    assert_eq!(run.findings.len(), 2, "{:?}", run.findings);
}

#[test]
fn serve_clock_prints_a_protocol_error_that_came_before_any_request() {
    // Before: "no request arrived" and "interrupted"; the protocol error was printed nowhere.
    let mut child = Command::new(env!("CARGO_BIN_EXE_rehearsal"))
        .args(["serve", "--clock", "--color", "never", "--idle-limit", "20s"])
        .arg(manifest_path("tests/drive/one-turn.json"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut clock = None;
    let mut seen = String::new();
    while clock.is_none() {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap() == 0 {
            break;
        }
        seen.push_str(&line);
        clock = line.trim().strip_prefix("export REHEARSAL_CLOCK=").map(String::from);
    }
    let clock = clock.unwrap_or_else(|| panic!("no clock address in {seen}"));
    let mut stream = TcpStream::connect(clock).unwrap();
    stream.write_all(b"{\"op\":\"hello\",\"protocol\":1,\"runtime\":\"bad\"}\nthis is not a clock message\n").unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > WAIT {
            let _ = child.kill();
            panic!("serve --clock did not end after a protocol error");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    assert_eq!(status.code(), Some(4), "{rest}");
    assert!(rest.contains("protocol error"), "{rest}");
    assert!(rest.contains("not a clock message"), "{rest}");
    assert!(!rest.contains("interrupted"), "{rest}");
}

/// `rehearsal record` in the plain proxy form against `upstream`, writing `file`; `client` is
/// given the proxy's base URL; returns what record printed once it ended by its idle limit.
fn record_plain(upstream: &str, file: &Path, client: impl FnOnce(&str)) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rehearsal"))
        .args(["record", "--color", "never", "--idle-limit", "1s", "--upstream", upstream, "--out"])
        .arg(file)
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    stderr.read_line(&mut first).unwrap();
    let base = first.split_whitespace().nth(2).expect("recording through URL to ...").to_string();
    client(&base);
    let out = child.wait_with_output().unwrap();
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    Output { code: out.status.code(), stdout: String::from_utf8_lossy(&out.stdout).into_owned(), stderr: first + &rest }
}

/// An upstream serving `tests/drive/one-turn.json` (its one reply, repeatable) until dropped.
struct Upstream {
    url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Upstream {
    fn start(text: &str) -> Upstream {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("upstream.json");
        std::fs::write(&path, text).unwrap();
        let scenario = rehearsal::load::outside(&path).unwrap().into_parts().0;
        let (url_tx, url_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async move {
                let options = ServeOptions { idle_limit: Duration::from_secs(60), ..ServeOptions::default() };
                let server = Server::start(&scenario, Dialect::builtin("generic").unwrap(), options).await.unwrap();
                url_tx.send(server.base_url()).unwrap();
                let _ = stopped.await;
                server.finish(End::Caller).await
            })
        });
        Upstream { url: url_rx.recv().unwrap(), stop: Some(stop) }
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

const REPEATABLE: &str =
    r#"{"name":"up","lanes":[{"agent":"main","replies":[{"text":"ok","repeatable":true}]}],"turns":[{"user":"hi"}]}"#;

#[test]
fn record_blanks_every_listed_auth_header_written_into_a_message_too() {
    // Before: `Proxy-Authorization` was dropped as hop-by-hop before it was registered as a
    // secret, so its value, written into a message, reached the file.
    let upstream = Upstream::start(REPEATABLE);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("recorded.json");
    let headers = ["authorization", "x-api-key", "api-key", "openai-api-key", "proxy-authorization"];
    let secrets: Vec<String> = headers.iter().map(|h| format!("plain{}{}", h.len(), h.replace('-', ""))).collect();
    // Auth schemes are case-insensitive and come in kinds: the credential after any of them
    // is a secret too (the independent attack's D1: `bearer`, `Basic` and a tab leaked).
    let schemes = ["bearer ", "", "Token\t", "", "Basic "];
    let values: Vec<String> = schemes.iter().zip(&secrets).map(|(scheme, s)| format!("{scheme}{s}")).collect();
    let sent = secrets.clone();
    let out = record_plain(&upstream.url, &file, |base| {
        // One request carrying every header, its message holding every value.
        let addr = addr_of(base);
        let said: Vec<&str> = sent.iter().map(String::as_str).collect();
        let body = format!(r#"{{"messages":[{{"role":"user","content":"hi, my keys are {}"}}]}}"#, said.join(" and "));
        let lines: String = headers.iter().zip(&values).map(|(h, v)| format!("{h}: {v}\r\n")).collect();
        let raw = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nhost: {addr}\r\n{lines}content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let answer = exchange(&addr, raw.as_bytes(), usize::MAX);
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    });
    let text = std::fs::read_to_string(&file).unwrap_or_else(|_| panic!("no file\n{}", out.both()));
    for secret in &secrets {
        assert!(!text.contains(secret.as_str()), "{secret} reached the file:\n{text}");
    }
    // The literal keys match no pattern, yet the recording's own check agrees with the file:
    // the writer and the recording are consistent, and nothing is blamed on the runtime.
    assert_eq!(out.code, Some(0), "{}", out.both());
}

#[test]
fn record_refuses_a_malformed_upstream_at_start() {
    for (url, says) in [
        ("http://127.0.0.1:notaport/v1", "`notaport` is not a port"),
        ("http://user:pw@127.0.0.1:9/v1", "credentials in the URL"),
        ("http://127.0.0.1:0/v1", "`0` is not a port"),
        ("http:///v1", "no host"),
        ("http://127.0.0.1:9/v 1", "a space is not a URL character"),
        ("http://127.0.0.1:+9/v1", "`+9` is not a port"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = crate::support::rehearsal(&[
            "record",
            "--color",
            "never",
            "--upstream",
            url,
            "--out",
            dir.path().join("x.json").to_str().unwrap(),
        ]);
        assert_eq!(out.code, Some(2), "{url}: {}", out.both());
        assert!(out.stderr.contains(says), "{url}: {}", out.both());
    }
}

/// An upstream that answers every request 200 with `body` (a whole JSON answer), until dropped.
fn fixed_upstream(body: String) -> (String, Arc<AtomicBool>) {
    let stop = Arc::new(AtomicBool::new(false));
    let url = upstream(&stop, move |mut stream| {
        let head = read_head(&mut stream);
        // Read the request's body too, so the proxy sees its request taken whole.
        let length: usize = head
            .lines()
            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap_or(0)))
            .unwrap_or(0);
        let mut body_in = vec![0u8; length];
        let _ = stream.read_exact(&mut body_in);
        let answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.write_all(answer.as_bytes());
    });
    (url, stop)
}

#[test]
fn record_writes_what_a_scenario_can_hold_of_a_hostile_answer_and_says_what_it_left_out() {
    // The independent attack's D2 and D3: a long text, 5,000 calls, a call without a name and
    // arguments that are no JSON object made record exit 3, blaming its own writer.
    let calls: Vec<serde_json::Value> = (0..5000)
        .map(|i| {
            let (name, args) = match i {
                0 => ("", "{}".to_string()),
                1 => ("f", "not json".to_string()),
                _ => ("f", format!("{{\"i\":{i}}}")),
            };
            serde_json::json!({"id": format!("c{i}"), "type": "function", "function": {"name": name, "arguments": args}})
        })
        .collect();
    let body = serde_json::json!({"choices": [{"message": {"role": "assistant", "content": "y".repeat(1_000_001), "tool_calls": calls}}]});
    let (url, stop) = fixed_upstream(body.to_string());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("recorded.json");
    let out = record_plain(&url, &file, |base| {
        let addr = addr_of(base);
        let body = r#"{"messages":[{"role":"user","content":"hi"}]}"#;
        let answer = exchange(&addr, &post(&addr, "/v1/chat/completions", body), usize::MAX);
        assert!(String::from_utf8_lossy(&answer[..12]).starts_with("HTTP/1.1 200"));
    });
    stop.store(true, Ordering::SeqCst);
    assert_eq!(out.code, Some(0), "{}", out.both());
    assert!(out.stderr.contains("exchange 0: 1 of the upstream's calls had no function name"), "{}", out.both());
    assert!(
        out.stderr
            .contains("exchange 0: the arguments of call `f` are not a JSON object (\"not json\"); written as {}"),
        "{}",
        out.both()
    );
    let scenario = rehearsal::load::outside(&file).unwrap_or_else(|e| panic!("{e}")).into_parts().0;
    assert_eq!(scenario.limits.max_text_chars, 1_000_001);
    assert_eq!(scenario.limits.max_calls_per_reply, 4999);
}

/// Records one chat request `body` with `headers` through the plain proxy form in front of an
/// upstream serving [`REPEATABLE`]: what record printed, and the file it wrote.
fn record_one(headers: &str, body: &str) -> (Output, String) {
    let upstream = Upstream::start(REPEATABLE);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("recorded.json");
    let (headers, body) = (headers.to_string(), body.to_string());
    let out = record_plain(&upstream.url, &file, move |base| {
        let addr = addr_of(base);
        let raw = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nhost: {addr}\r\n{headers}content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        exchange(&addr, raw.as_bytes(), usize::MAX);
    });
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    (out, text)
}

#[test]
fn record_blanks_a_secret_used_as_a_key_or_a_tool_name_and_never_unmakes_its_file() {
    // The second independent attack's N1, N2 and N9: a key written as a JSON object key in a
    // call's arguments reached the file; in a tool name it made record exit 3 printing it; a
    // key equal to a word of the format (`user`) made the file unreadable.
    let key = "Zq7secretKEY1";
    let body = format!(
        r#"{{"messages":[{{"role":"user","content":"hi"}},{{"role":"assistant","content":"","tool_calls":[{{"id":"c1","type":"function","function":{{"name":"f_{key}","arguments":"{{\"{key}\":\"v\"}}"}}}}]}},{{"role":"tool","tool_call_id":"c1","content":"r"}}]}}"#
    );
    let (out, text) = record_one(&format!("authorization: Bearer {key}\r\n"), &body);
    assert!(!text.is_empty(), "no file: {}", out.both());
    assert!(!text.contains(key), "the key reached the file:\n{text}");
    assert!(!out.stdout.contains(key) && !out.stderr.contains(key), "the key was printed:\n{}", out.both());
    assert_ne!(out.code, Some(3), "{}", out.both());
    let (out, text) = record_one("x-api-key: user\r\n", r#"{"messages":[{"role":"user","content":"hi user"}]}"#);
    assert_eq!(out.code, Some(0), "{}", out.both());
    assert!(text.contains(r#""role":"user""#) && text.contains("hi [redacted]"), "{text}");
}

#[test]
fn record_notes_bodiless_and_non_chat_answers_instead_of_calling_them_hangs() {
    // N6 and N7: a 204 was recorded as a hang, a 200 `{}` as an empty reply, both silently.
    for (answer, says) in [
        ("HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n".to_string(), "not a chat completion"),
        (
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}"
                .to_string(),
            "not a chat completion",
        ),
    ] {
        let stop = Arc::new(AtomicBool::new(false));
        let url = upstream(&stop, move |mut stream| {
            let _ = read_head(&mut stream);
            let _ = stream.write_all(answer.as_bytes());
        });
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("recorded.json");
        let out = record_plain(&url, &file, |base| {
            let addr = addr_of(base);
            exchange(
                &addr,
                &post(&addr, "/v1/chat/completions", r#"{"messages":[{"role":"user","content":"hi"}]}"#),
                usize::MAX,
            );
        });
        stop.store(true, Ordering::SeqCst);
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        assert!(out.stderr.contains(says), "{}", out.both());
        assert!(!text.contains(r#""hang":true"#), "{text}");
        assert!(text.contains(r#""drop_after_chunks":0"#), "{text}");
    }
}

#[test]
fn durations_and_time_scales_past_what_a_clock_can_count_are_usage_errors() {
    // N4: these panicked (exit 101), and some runs then passed.
    let huge = "18446744073709551615s";
    for args in [
        vec!["serve", "tests/drive/one-turn.json", "--startup-limit", huge],
        vec!["serve", "tests/drive/one-turn.json", "--idle-limit", huge],
        vec!["serve", "tests/drive/one-turn.json", "--after-script", huge],
        vec!["serve", "tests/drive/one-turn.json", "--time-scale", "1e308"],
        vec!["record", "--upstream", "http://127.0.0.1:9/v1", "--out", "x.json", "--upstream-timeout", huge],
        vec!["record", "--upstream", "http://127.0.0.1:9/v1", "--out", "x.json", "--upstream-idle", huge],
    ] {
        let out = crate::support::rehearsal(&args);
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.both());
    }
}

#[test]
fn the_idle_limit_waits_for_a_reply_that_is_waiting_out_its_latency() {
    // N5: a reply slower than --idle-limit was cut off (500 server_stopping) and the run passed.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("slow.json");
    std::fs::write(
        &file,
        r#"{"name":"slow","lanes":[{"agent":"main","replies":[{"text":"late but here","latency_ms":1500}]}],"turns":[{"user":"hi"}]}"#,
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_rehearsal"))
        .args(["serve", "--color", "never", "--idle-limit", "300ms", "--after-script", "0s"])
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut base = None;
    while base.is_none() {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap() == 0 {
            break;
        }
        base = line.trim().strip_prefix("export OPENAI_BASE_URL=").map(String::from);
    }
    let addr = addr_of(&base.expect("a base URL"));
    let answer = exchange(
        &addr,
        &post(&addr, "/v1/chat/completions", r#"{"messages":[{"role":"user","content":"hi"}]}"#),
        usize::MAX,
    );
    let answer = String::from_utf8_lossy(&answer).into_owned();
    assert!(answer.starts_with("HTTP/1.1 200") && answer.contains("late but here"), "{answer}");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
}

#[cfg(target_os = "linux")]
#[test]
fn a_termination_signal_to_drive_kills_the_runtime_and_fails_the_cut_turn() {
    // The third independent attack's D1 and D2: SIGTERM left the runtime running and drive
    // exited 143 with no verdict; Ctrl-C passed a turn it had cut short, the JSON summary
    // saying exit code 0 while the process exited 130.
    let dir = tempfile::tempdir().unwrap();
    let mark = marker("sigterm");
    let script = runtime_script(
        dir.path(),
        &format!(
            "#!/bin/sh\n{runtime} ask \"$1\"\nexec sh -c 'sleep 30; true' {mark}\n",
            runtime = crate::support::test_runtime(),
        ),
    );
    for signal in [libc::SIGTERM, libc::SIGINT] {
        let child = Command::new(env!("CARGO_BIN_EXE_rehearsal"))
            .args(["drive", "--color", "never", "--format", "json", "--runtime", "generic", "--turn-limit", "20s"])
            .arg(manifest_path("tests/drive/one-turn.json"))
            .arg("--")
            .arg(&script)
            .arg("{message}")
            .current_dir(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Once the runtime sleeps (its one request answered), drive is signalled.
        let started = Instant::now();
        let sleeper = loop {
            let found = std::fs::read_dir("/proc")
                .unwrap()
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
                .find(|pid| alive_with(*pid, &mark));
            if let Some(pid) = found {
                break pid;
            }
            assert!(started.elapsed() < WAIT, "the runtime never slept");
            std::thread::sleep(Duration::from_millis(20));
        };
        // SAFETY: kill(2) on the drive process this test started.
        unsafe {
            libc::kill(child.id() as i32, signal);
        }
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        std::thread::sleep(Duration::from_millis(50));
        let survived = alive_with(sleeper, &mark);
        if survived {
            // SAFETY: the test's own leftover, identified by its marker.
            unsafe {
                libc::kill(sleeper, libc::SIGKILL);
            }
        }
        assert!(!survived, "signal {signal}: the runtime outlived drive");
        assert_eq!(out.status.code(), Some(130), "signal {signal}: {stdout}");
        assert!(stdout.contains(r#""verdict":"fail""#), "signal {signal}: {stdout}");
        assert!(stdout.contains("interrupted (Ctrl-C or a termination signal)"), "signal {signal}: {stdout}");
        assert!(stdout.contains(r#""exit_code":130"#), "signal {signal}: {stdout}");
    }
}

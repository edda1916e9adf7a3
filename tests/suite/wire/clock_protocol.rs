//! The clock protocol (docs/clock-protocol.md, issue 24) driven directly over TCP, without
//! Python: a scripted fake runtime on one side, the model endpoint's calls on the other.
//!
//! The endpoint runs on an ordinary (unpaused) tokio runtime, as it must; every wait in these
//! tests is bounded by a wall-clock timeout so that a broken endpoint fails instead of hanging.

use std::time::Duration;

use rehearsal::wire::clock::{
    Clock, ClockEndpoint, ClockLimits, ClockOptions, ClockReport, endpoint::DEFAULT_EPOCH_NS,
};
use rehearsal::wire::clock::{ClockEnd, Waiting};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

const S: u64 = 1_000_000_000;
const CONN: &str = "127.0.0.1:51000";
const WAIT: Duration = Duration::from_secs(10);

/// A runtime that says exactly what the test scripts.
struct FakeRuntime {
    lines: tokio::io::Lines<BufReader<OwnedReadHalf>>,
    writer: OwnedWriteHalf,
}

impl FakeRuntime {
    async fn connect(endpoint: &ClockEndpoint) -> FakeRuntime {
        let stream = TcpStream::connect(endpoint.addr()).await.expect("the endpoint accepts");
        let (read, writer) = stream.into_split();
        FakeRuntime { lines: BufReader::new(read).lines(), writer }
    }

    /// Connects and says hello; returns the welcome.
    async fn hello(endpoint: &ClockEndpoint) -> (FakeRuntime, Value) {
        let mut runtime = FakeRuntime::connect(endpoint).await;
        runtime.send(json!({"op": "hello", "protocol": 1, "runtime": "fake", "pid": 1})).await;
        let welcome = runtime.recv().await;
        (runtime, welcome)
    }

    async fn send(&mut self, message: Value) {
        self.send_line(&message.to_string()).await;
    }

    async fn send_line(&mut self, line: &str) {
        self.writer.write_all(format!("{line}\n").as_bytes()).await.expect("the endpoint reads");
    }

    async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(WAIT, self.lines.next_line())
            .await
            .expect("the endpoint answers within 10 s")
            .expect("the connection reads")
            .expect("the endpoint did not close the connection");
        serde_json::from_str(&line).expect("the endpoint writes JSON lines")
    }

    async fn idle(&mut self, seq: u64, now_ns: u64, next_due_ns: Option<u64>, sent: u64, read: u64, open: bool) {
        self.send(json!({
            "op": "idle", "seq": seq, "now_ns": now_ns, "next_due_ns": next_due_ns,
            "conns": [{"conn": CONN, "sent": sent, "read": read, "open": open, "reading": open}],
        }))
        .await;
    }

    async fn at(&mut self, seq: u64, now_ns: u64) {
        self.send(json!({"op": "at", "seq": seq, "now_ns": now_ns})).await;
    }
}

async fn endpoint(limits: ClockLimits) -> ClockEndpoint {
    let options =
        ClockOptions { http: vec!["127.0.0.1:40001".to_string()], seed: 7, limits, ..ClockOptions::default() };
    ClockEndpoint::bind(options).await.expect("the endpoint binds on 127.0.0.1")
}

/// Waits (in real time, bounded) until the endpoint has taken everything sent so far and
/// waits for `what`.
async fn until_waiting(clock: &Clock, what: impl Fn(&Waiting) -> bool) {
    tokio::time::timeout(WAIT, async {
        while !clock.waiting().as_ref().is_some_and(&what) {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the clock never waited as expected; it waits for {:?}", clock.waiting()));
}

/// A reply scheduled the way the model endpoint will: the request seen, then a release whose
/// virtual time of release is reported on the channel.
fn reply(clock: &Clock, due_ns: u64) -> tokio::sync::oneshot::Receiver<u64> {
    clock.conn_opened(CONN);
    let release = clock.release_at(CONN, due_ns);
    let (tx, rx) = tokio::sync::oneshot::channel();
    let clock = clock.clone();
    tokio::spawn(async move {
        if let Ok(released) = release.await {
            assert_eq!(released.released_ns, clock.now_ns());
            let _ = tx.send(released.released_ns);
        }
    });
    rx
}

async fn released(rx: tokio::sync::oneshot::Receiver<u64>) -> u64 {
    tokio::time::timeout(WAIT, rx).await.expect("released within 10 s").expect("released, not dropped")
}

#[tokio::test]
async fn the_welcome_gives_the_virtual_start_the_epoch_the_seed_and_the_model_address() {
    let endpoint = endpoint(ClockLimits::default()).await;
    let (mut runtime, welcome) = FakeRuntime::hello(&endpoint).await;
    assert_eq!(
        welcome,
        json!({"op": "welcome", "protocol": 1, "now_ns": 0, "epoch_ns": DEFAULT_EPOCH_NS, "seed": 7, "http": ["127.0.0.1:40001"], "pending": true})
    );
    runtime.send(json!({"op": "now"})).await;
    assert_eq!(runtime.recv().await, json!({"op": "now", "now_ns": 0}));
    let report = endpoint.finish().await;
    assert_eq!(report.end, ClockEnd::Finished { at_ns: 0 });
    assert_eq!(runtime.recv().await["op"], "end", "a finished clock tells the runtime");
}

#[tokio::test]
async fn a_runtime_with_no_timer_and_nothing_due_is_stuck_at_once() {
    let endpoint = endpoint(ClockLimits::default()).await;
    let (mut runtime, _) = FakeRuntime::hello(&endpoint).await;
    runtime.send(json!({"op": "idle", "seq": 1, "now_ns": 0, "next_due_ns": null, "conns": []})).await;
    let end = runtime.recv().await;
    assert_eq!(end["op"], "end");
    assert!(end["reason"].as_str().unwrap().starts_with("stuck at 0.000s: the runtime is idle with no timer"), "{end}");
    assert_eq!(endpoint.finish().await.end, ClockEnd::Stuck { at_ns: 0 });
}

#[tokio::test]
async fn with_no_timer_the_clock_advances_to_the_next_reply_and_releases_it_after_the_runtime_is_there() {
    let endpoint = endpoint(ClockLimits::default()).await;
    let clock = endpoint.clock();
    let (mut runtime, _) = FakeRuntime::hello(&endpoint).await;
    let mut reply = reply(&clock, 5 * S);
    runtime.idle(1, 0, None, 1, 0, true).await;
    assert_eq!(runtime.recv().await, json!({"op": "advance", "seq": 1, "to_ns": 5 * S}));
    until_waiting(&clock, |waiting| *waiting == Waiting::At).await;
    assert!(reply.try_recv().is_err(), "a reply due at 5 s is not released before the runtime confirms 5 s");
    runtime.at(1, 5 * S).await;
    runtime.idle(2, 5 * S, None, 1, 0, true).await;
    assert_eq!(released(reply).await, 5 * S);
    runtime.send(json!({"op": "busy", "seq": 2})).await;
    assert_eq!(runtime.recv().await["op"], "pending", "every busy report is answered with what is released and unread");
    runtime.idle(3, 5 * S, None, 1, 1, true).await;
    assert_eq!(runtime.recv().await["op"], "end");
    assert_eq!(endpoint.finish().await.end, ClockEnd::Stuck { at_ns: 5 * S });
}

#[tokio::test]
async fn a_timer_and_a_reply_due_at_the_same_instant_run_the_timer_first() {
    let endpoint = endpoint(ClockLimits::default()).await;
    let clock = endpoint.clock();
    let (mut runtime, _) = FakeRuntime::hello(&endpoint).await;
    let mut reply = reply(&clock, 10 * S);
    // The runtime's model timeout is due at 10 s too.
    runtime.idle(1, 0, Some(10 * S), 1, 0, true).await;
    assert_eq!(runtime.recv().await, json!({"op": "advance", "seq": 1, "to_ns": 10 * S}));
    until_waiting(&clock, |waiting| *waiting == Waiting::At).await;
    assert!(reply.try_recv().is_err(), "the reply waits until the runtime has run its 10 s timers");
    runtime.at(1, 10 * S).await;
    // The timeout fired first: the runtime closed the connection, so the reply is never
    // written, however fast or slow the endpoint notices the close.
    runtime.idle(2, 10 * S, None, 1, 0, false).await;
    until_waiting(&clock, |waiting| matches!(waiting, Waiting::Close { .. })).await;
    let closed = clock.conn_closed(CONN);
    assert_eq!(closed.await, Ok(10 * S), "the give-up is recorded at the runtime's time");
    assert_eq!(runtime.recv().await["op"], "end");
    assert!(tokio::time::timeout(WAIT, reply).await.expect("settled").is_err(), "never released");
    let report = endpoint.finish().await;
    assert_eq!(
        report.transcript,
        [
            "      0.000s hello fake",
            "      0.000s advance to 10.000s",
            "     10.000s at #1",
            "     10.000s closed c1",
            "     10.000s end: stuck at 10.000s: the runtime is idle with no timer and no reply due, so nothing can ever happen again",
        ]
    );
}

#[tokio::test]
async fn a_reply_a_millisecond_before_the_timer_is_released_and_read_before_time_moves_on() {
    let endpoint = endpoint(ClockLimits::default()).await;
    let clock = endpoint.clock();
    let (mut runtime, _) = FakeRuntime::hello(&endpoint).await;
    let reply = reply(&clock, 9_999_000_000);
    runtime.idle(1, 0, Some(10 * S), 1, 0, true).await;
    assert_eq!(runtime.recv().await, json!({"op": "advance", "seq": 1, "to_ns": 9_999_000_000u64}));
    runtime.at(1, 9_999_000_000).await;
    runtime.idle(2, 9_999_000_000, Some(10 * S), 1, 0, true).await;
    assert_eq!(released(reply).await, 9_999_000_000);
    // Idle before the bytes arrived: the clock must not move to the 10 s timeout.
    until_waiting(&clock, |waiting| matches!(waiting, Waiting::Read { released: 1, read: 0, .. })).await;
    runtime.send(json!({"op": "busy", "seq": 2})).await;
    assert_eq!(runtime.recv().await["op"], "pending", "every busy report is answered with what is released and unread");
    // Read: the runtime's request completed, and it cancelled its timeout.
    runtime.idle(3, 9_999_000_000, None, 1, 1, true).await;
    assert_eq!(runtime.recv().await["op"], "end");
    assert_eq!(endpoint.finish().await.end, ClockEnd::Stuck { at_ns: 9_999_000_000 });
}

#[tokio::test]
async fn the_handshake_waits_for_the_endpoint_to_see_the_requests_the_runtime_sent() {
    let endpoint = endpoint(ClockLimits::default()).await;
    let clock = endpoint.clock();
    let (mut runtime, _) = FakeRuntime::hello(&endpoint).await;
    // The runtime posted its request and went idle before the model endpoint parsed it.
    runtime.idle(1, 0, Some(10 * S), 1, 0, true).await;
    until_waiting(&clock, |waiting| matches!(waiting, Waiting::Request { sent: 1, seen: 0, .. })).await;
    // Parsed: its reply is due at 2 s, before the timer.
    let reply = reply(&clock, 2 * S);
    assert_eq!(runtime.recv().await, json!({"op": "advance", "seq": 1, "to_ns": 2 * S}));
    runtime.at(1, 2 * S).await;
    runtime.idle(2, 2 * S, Some(10 * S), 1, 0, true).await;
    assert_eq!(released(reply).await, 2 * S);
    endpoint.finish().await;
}

#[tokio::test]
async fn a_busy_report_crossing_an_advance_voids_it_and_nothing_is_released() {
    let endpoint = endpoint(ClockLimits::default()).await;
    let clock = endpoint.clock();
    let (mut runtime, _) = FakeRuntime::hello(&endpoint).await;
    let mut reply = reply(&clock, 5 * S);
    runtime.idle(1, 0, None, 1, 0, true).await;
    // The runtime woke by itself (a thread) before it read the advance.
    runtime.send(json!({"op": "busy", "seq": 1})).await;
    assert_eq!(runtime.recv().await, json!({"op": "advance", "seq": 1, "to_ns": 5 * S}));
    assert_eq!(
        runtime.recv().await,
        json!({"op": "pending", "seq": 1, "conns": []}),
        "nothing released, nothing to wait for"
    );
    until_waiting(&clock, |waiting| *waiting == Waiting::Idle).await;
    assert_eq!(clock.now_ns(), 0);
    assert!(reply.try_recv().is_err());
    runtime.idle(2, 0, None, 1, 0, true).await;
    assert_eq!(runtime.recv().await, json!({"op": "advance", "seq": 2, "to_ns": 5 * S}));
    runtime.at(2, 5 * S).await;
    runtime.idle(3, 5 * S, None, 1, 0, true).await;
    assert_eq!(released(reply).await, 5 * S);
    let report = endpoint.finish().await;
    assert!(report.transcript.iter().any(|line| line.ends_with("advance to 5.000s void: the runtime woke by itself")));
}

#[tokio::test]
async fn a_runtime_that_never_goes_idle_ends_stalled_and_says_what_the_clock_waited_for() {
    let limits = ClockLimits { busy_wall_max: Duration::from_millis(300), ..ClockLimits::default() };
    let endpoint = endpoint(limits).await;
    // Timed from before the hello: the clock counts its wait from the runtime's last message,
    // which a loaded machine may leave well before this test's next line.
    let started = std::time::Instant::now();
    let (mut runtime, _) = FakeRuntime::hello(&endpoint).await;
    let end = runtime.recv().await;
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(end["op"], "end");
    assert_eq!(
        end["reason"],
        "stalled at 0.000s: waited 300 ms of real time for the runtime to go idle (it is running: a busy loop, a blocking call, a thread, a subprocess?)"
    );
    let report = endpoint.finish().await;
    assert!(matches!(report.end, ClockEnd::Stalled { at_ns: 0, waiting: Waiting::Idle, .. }), "{:?}", report.end);
}

#[tokio::test]
async fn a_runtime_that_disconnects_is_recorded_and_the_next_one_continues_at_its_time() {
    let endpoint = endpoint(ClockLimits::default()).await;
    let clock = endpoint.clock();
    let (mut first, _) = FakeRuntime::hello(&endpoint).await;
    let (mut second, refused) = FakeRuntime::hello(&endpoint).await;
    assert_eq!(refused["op"], "refused");
    assert!(refused["reason"].as_str().unwrap().contains("one process at a time"), "{refused}");
    assert!(second.lines.next_line().await.unwrap().is_none(), "a refused connection is closed");
    first.send(json!({"op": "idle", "seq": 1, "now_ns": 0, "next_due_ns": 3 * S, "conns": []})).await;
    assert_eq!(first.recv().await, json!({"op": "advance", "seq": 1, "to_ns": 3 * S}));
    first.at(1, 3 * S).await;
    drop(first);
    until_waiting(&clock, |waiting| *waiting == Waiting::Runtime).await;
    let (_third, welcome) = FakeRuntime::hello(&endpoint).await;
    assert_eq!(welcome["now_ns"], 3 * S, "the next turn's runtime starts where the last one left");
    let report = endpoint.finish().await;
    assert_eq!(report.end, ClockEnd::Finished { at_ns: 3 * S });
    assert!(report.transcript.contains(&"      3.000s disconnected".to_string()), "{:?}", report.transcript);
}

#[tokio::test]
async fn protocol_errors_end_the_clock_with_the_line_and_what_was_wrong() {
    let endpoint = endpoint(ClockLimits::default()).await;
    let (mut runtime, _) = FakeRuntime::hello(&endpoint).await;
    runtime.send_line("{\"op\":\"idle\",\"seq\":1}").await;
    let end = runtime.recv().await;
    let reason = end["reason"].as_str().unwrap();
    assert!(reason.starts_with("protocol error at 0.000s: line 2 of the runtime's clock connection: not a clock message (missing field `now_ns`"), "{reason}");
    let report = endpoint.finish().await;
    assert!(matches!(report.end, ClockEnd::ProtocolError { line: 2, .. }), "{:?}", report.end);
}

#[tokio::test]
async fn an_answer_at_once_is_released_at_once_and_must_be_read_like_any_reply() {
    let endpoint = endpoint(ClockLimits::default()).await;
    let clock = endpoint.clock();
    let (mut runtime, _) = FakeRuntime::hello(&endpoint).await;
    let release = clock.release_after(CONN, 0);
    // Written once the runtime, having sent its request, is idle at the same instant.
    runtime.idle(1, 0, Some(S), 1, 0, true).await;
    let released = tokio::time::timeout(WAIT, release).await.expect("at once");
    assert_eq!(released, Ok(rehearsal::wire::clock::Released { requested_ns: 0, released_ns: 0 }));
    until_waiting(&clock, |waiting| matches!(waiting, Waiting::Read { released: 1, read: 0, .. })).await;
    runtime.send(json!({"op": "busy", "seq": 1})).await;
    assert_eq!(runtime.recv().await["op"], "pending", "every busy report is answered with what is released and unread");
    runtime.idle(2, 0, Some(S), 1, 1, true).await;
    assert_eq!(runtime.recv().await, json!({"op": "advance", "seq": 2, "to_ns": S}));
    endpoint.finish().await;
}

#[tokio::test]
async fn a_dropped_release_is_unscheduled() {
    let endpoint = endpoint(ClockLimits::default()).await;
    let clock = endpoint.clock();
    let (mut runtime, _) = FakeRuntime::hello(&endpoint).await;
    drop(clock.release_at(CONN, 5 * S));
    runtime.idle(1, 0, None, 1, 0, true).await;
    assert_eq!(runtime.recv().await["op"], "end", "nothing is due once the only reply was dropped");
    assert_eq!(endpoint.finish().await.end, ClockEnd::Stuck { at_ns: 0 });
}

#[tokio::test]
async fn a_give_up_seen_before_the_runtime_confirms_its_advance_is_recorded_at_the_new_time() {
    let endpoint = endpoint(ClockLimits::default()).await;
    let clock = endpoint.clock();
    let (mut runtime, _) = FakeRuntime::hello(&endpoint).await;
    let _reply = reply(&clock, 30 * S);
    runtime.idle(1, 0, Some(10 * S), 1, 0, true).await;
    assert_eq!(runtime.recv().await["to_ns"], 10 * S);
    // The runtime applied the advance, its timeout fired and it closed the connection; the
    // model endpoint saw the close before the clock read the runtime's `at`.
    let mut closed = clock.conn_closed(CONN);
    assert!(futures_poll(&mut closed).is_none(), "the close's time is unknown until the advance settles");
    runtime.at(1, 10 * S).await;
    assert_eq!(closed.await, Ok(10 * S));
    let report = endpoint.finish().await;
    assert!(report.transcript.contains(&"     10.000s closed c1".to_string()), "{:?}", report.transcript);
}

/// Polls a future once.
fn futures_poll<F: std::future::Future + Unpin>(future: &mut F) -> Option<F::Output> {
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    match std::pin::Pin::new(future).poll(&mut cx) {
        std::task::Poll::Ready(output) => Some(output),
        std::task::Poll::Pending => None,
    }
}

/// Two requests on one connection, a model timeout, and a give-up, as one scripted session.
async fn scripted_session() -> ClockReport {
    let endpoint = endpoint(ClockLimits::default()).await;
    let clock = endpoint.clock();
    let (mut runtime, _) = FakeRuntime::hello(&endpoint).await;
    let first = reply(&clock, 2 * S);
    runtime.idle(1, 0, Some(10 * S), 1, 0, true).await;
    assert_eq!(runtime.recv().await["to_ns"], 2 * S);
    runtime.at(1, 2 * S).await;
    runtime.idle(2, 2 * S, Some(10 * S), 1, 0, true).await;
    assert_eq!(released(first).await, 2 * S);
    runtime.send(json!({"op": "busy", "seq": 2})).await;
    assert_eq!(runtime.recv().await["op"], "pending", "every busy report is answered with what is released and unread");
    // The runtime read the reply and posted its next request, with a timeout at 12 s.
    runtime.idle(3, 2 * S, Some(12 * S), 2, 1, true).await;
    until_waiting(&clock, |waiting| matches!(waiting, Waiting::Request { sent: 2, seen: 1, .. })).await;
    let mut second = reply(&clock, 32 * S);
    assert_eq!(runtime.recv().await["to_ns"], 12 * S);
    runtime.at(3, 12 * S).await;
    // It gave up at 12 s and closed the connection.
    runtime.idle(4, 12 * S, None, 2, 1, false).await;
    until_waiting(&clock, |waiting| matches!(waiting, Waiting::Close { .. })).await;
    assert_eq!(clock.conn_closed(CONN).await, Ok(12 * S));
    assert_eq!(runtime.recv().await["op"], "end");
    assert!(second.try_recv().is_err(), "the reply of a connection that closed is never released");
    endpoint.finish().await
}

#[tokio::test]
async fn twenty_runs_of_one_session_give_identical_transcripts() {
    let first = scripted_session().await;
    assert_eq!(
        first.transcript,
        [
            "      0.000s hello fake",
            "      0.000s advance to 2.000s",
            "      2.000s at #1",
            "      2.000s release r1 on c1",
            "      2.000s advance to 12.000s",
            "     12.000s at #2",
            "     12.000s closed c1",
            "     12.000s end: stuck at 12.000s: the runtime is idle with no timer and no reply due, so nothing can ever happen again",
        ]
    );
    for _ in 1..20 {
        assert_eq!(scripted_session().await, first);
    }
}

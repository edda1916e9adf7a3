//! The clock's TCP endpoint: newline-delimited JSON on 127.0.0.1, one runtime process at a
//! time, feeding a [`VirtualClock`] and carrying out its steps.
//!
//! The model endpoint (the server) talks to the clock through a [`Clock`] handle: it reports
//! connections and requests, and awaits a [`Release`] before writing each reply. The endpoint
//! writes `advance` and `end` lines to the runtime, and enforces the one wall-clock limit
//! ([`ClockLimits::busy_wall_max`](super::ClockLimits::busy_wall_max)) with tokio's timer,
//! which runs in real time here: this endpoint must never run on a paused tokio clock, which
//! would jump while the endpoint waits on its sockets.
//!
//! It does not serve HTTP and does not start the runtime.

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc, oneshot, watch};
use tokio::time::Instant;

use super::{
    ArrivalId, ArrivedRequest, ClockEnd, ClockLimits, Due, FromRuntime, LINE_BYTES_MAX, LINES_QUEUED_MAX, PROTOCOL,
    ProtocolError, ReleaseId, ServerEvent, Step, ToRuntime, VirtualClock, Waiting,
};

/// 2025-01-01T00:00:00Z, the wall-clock time virtual zero stands for unless a run says
/// otherwise.
pub const DEFAULT_EPOCH_NS: u64 = 1_735_689_600 * 1_000_000_000;

/// How an endpoint is set up.
#[derive(Clone, Debug)]
pub struct ClockOptions {
    /// The model endpoint's addresses (`127.0.0.1:PORT`), sent in `welcome.http`. Default none.
    pub http: Vec<String>,
    /// Seeds the runtime's randomness (`welcome.seed`). Default 0.
    pub seed: u64,
    /// The wall-clock time virtual zero stands for. Default [`DEFAULT_EPOCH_NS`].
    pub epoch_ns: u64,
    /// The limits.
    pub limits: ClockLimits,
    /// Permutes replies due at one instant (`--explore`). Default `None`: scheduling order.
    pub tie_seed: Option<u64>,
}

impl Default for ClockOptions {
    fn default() -> ClockOptions {
        ClockOptions {
            http: Vec::new(),
            seed: 0,
            epoch_ns: DEFAULT_EPOCH_NS,
            limits: ClockLimits::default(),
            tie_seed: None,
        }
    }
}

/// What a finished endpoint reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClockReport {
    /// How the clock ended.
    pub end: ClockEnd,
    /// Virtual now at the end.
    pub now_ns: u64,
    /// The clock's decisions ([`VirtualClock::transcript`]).
    pub transcript: Vec<String>,
}

/// The clock ended before the reply was released: write nothing, the run is ending.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockStopped;

impl std::fmt::Display for ClockStopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the clock stopped before the reply was due")
    }
}

impl std::error::Error for ClockStopped {}

/// When a released reply's request was counted, and when it was released: virtual times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Released {
    /// The virtual time the request was counted at (its arrival, for the trace).
    pub requested_ns: u64,
    /// The virtual time it was released at.
    pub released_ns: u64,
}

struct Inner {
    clock: VirtualClock,
    waiters: BTreeMap<ReleaseId, oneshot::Sender<Released>>,
    /// Requests waiting for their turn: each learns the virtual time it is taken at.
    arrivals: BTreeMap<ArrivalId, oneshot::Sender<u64>>,
    stamps: BTreeMap<u64, oneshot::Sender<u64>>,
    tokens: u64,
    outbox: Vec<ToRuntime>,
    end_sent: bool,
    stop: bool,
    /// Real time of the last message from the runtime or the model endpoint.
    last_input: Instant,
    /// The model endpoint's addresses, sent in `welcome.http`.
    http: Vec<String>,
}

struct Shared {
    inner: Mutex<Inner>,
    wake: Notify,
    ended: watch::Sender<bool>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Changes the clock, carries out its steps, and wakes the endpoint if it has lines to
    /// write.
    fn with<T>(&self, change: impl FnOnce(&mut VirtualClock) -> T) -> T {
        let mut inner = self.lock();
        inner.last_input = Instant::now();
        let result = change(&mut inner.clock);
        self.pump(&mut inner);
        result
    }

    fn pump(&self, inner: &mut Inner) {
        loop {
            for (token, at_ns) in inner.clock.take_stamped() {
                if let Some(stamp) = inner.stamps.remove(&token) {
                    let _ = stamp.send(at_ns);
                }
            }
            match inner.clock.next_step() {
                Step::Release(ids) => {
                    let released_ns = inner.clock.now_ns();
                    for id in ids {
                        let requested_ns = inner.clock.requested_ns(id).unwrap_or(released_ns);
                        let released = Released { requested_ns, released_ns };
                        let sent = inner.waiters.remove(&id).is_some_and(|waiter| waiter.send(released).is_ok());
                        if !sent {
                            inner.clock.release_failed(id);
                        }
                    }
                }
                Step::Take(id) => {
                    let now_ns = inner.clock.now_ns();
                    let sent = inner.arrivals.remove(&id).is_some_and(|arrival| arrival.send(now_ns).is_ok());
                    if !sent {
                        inner.clock.arrival_dropped(id);
                    }
                }
                Step::Advance { seq, to_ns } => inner.outbox.push(ToRuntime::Advance { seq, to_ns }),
                Step::Wait(_) => break,
                Step::Ended(end) => {
                    if !inner.end_sent {
                        inner.end_sent = true;
                        inner.outbox.push(ToRuntime::End { reason: end.to_string() });
                        // Every reply still waiting learns that it never will be due.
                        inner.waiters.clear();
                        inner.arrivals.clear();
                        inner.stamps.clear();
                        self.ended.send_replace(true);
                    }
                    break;
                }
            }
        }
        if !inner.outbox.is_empty() || inner.stop {
            self.wake.notify_one();
        }
    }
}

/// The handle the model endpoint (and `drive`) uses. Cheap to clone.
#[derive(Clone)]
pub struct Clock {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clock").field("now_ns", &self.now_ns()).finish()
    }
}

impl Clock {
    /// Virtual now.
    pub fn now_ns(&self) -> u64 {
        self.shared.lock().clock.now_ns()
    }

    /// Takes an endpoint event under one lock; returns the token its stamp resolves on.
    fn event(&self, event: ServerEvent) -> (u64, oneshot::Receiver<u64>) {
        let (tx, rx) = oneshot::channel();
        let mut inner = self.shared.lock();
        inner.last_input = Instant::now();
        inner.tokens += 1;
        let token = inner.tokens;
        inner.stamps.insert(token, tx);
        inner.clock.server(token, event);
        self.shared.pump(&mut inner);
        (token, rx)
    }

    /// The model endpoint accepted a connection from `peer` (`127.0.0.1:51000`).
    pub fn conn_opened(&self, peer: &str) {
        drop(self.event(ServerEvent::Opened(peer.to_string())));
    }

    /// The model endpoint parsed a request from `peer` and holds it without an answer (a
    /// scripted `hang`); the [`Stamp`] gives its virtual time. Every request is counted exactly
    /// once: by this or by a `release_*`.
    pub fn request_held(&self, peer: &str) -> Stamp {
        Stamp { rx: self.event(ServerEvent::Held(peer.to_string())).1 }
    }

    /// The model endpoint saw `peer`'s connection close; the [`Stamp`] gives the virtual time
    /// of the close (the runtime's give-up, as the model sees it).
    pub fn conn_closed(&self, peer: &str) -> Stamp {
        Stamp { rx: self.event(ServerEvent::Closed(peer.to_string())).1 }
    }

    /// Counts a request the model endpoint parsed from `peer` and schedules its reply at
    /// virtual `due_ns`, in one step (the clock cannot move in between); await the [`Release`]
    /// before writing the reply. Dropping the `Release` unschedules it (or, once released,
    /// uncounts it).
    pub fn release_at(&self, peer: &str, due_ns: u64) -> Release {
        self.release(peer, Due::At(due_ns))
    }

    /// As [`Clock::release_at`], `latency_ns` after the virtual time the request is counted at
    /// (0: an answer at once, such as an API error or `GET /v1/models`).
    pub fn release_after(&self, peer: &str, latency_ns: u64) -> Release {
        self.release(peer, Due::After(latency_ns))
    }

    fn release(&self, peer: &str, due: Due) -> Release {
        let (tx, rx) = oneshot::channel();
        let mut inner = self.shared.lock();
        inner.last_input = Instant::now();
        let id = inner.clock.next_release_id();
        // The waiter first: a reply due now is handed over by the pump below.
        if inner.clock.ended().is_none() {
            inner.waiters.insert(id, tx);
        }
        inner.clock.server(0, ServerEvent::Release { conn: peer.to_string(), id, due });
        self.shared.pump(&mut inner);
        drop(inner);
        Release { id, rx, shared: self.shared.clone(), done: false }
    }

    /// Counts a request the model endpoint parsed from `peer` and queues it for its turn
    /// (see [`ArrivedRequest`]): `key` orders the requests of one instant (a hash of the
    /// request's bytes, [`request_key`]). Await the [`Arrival`] before doing anything with
    /// the request; the [`Turn`] it gives schedules the answer. This is how the server serves
    /// under the clock: what it does with a request never depends on the real order in which
    /// requests of one instant arrived.
    pub fn arrive(&self, peer: &str, key: u64) -> Arrival {
        let (tx, rx) = oneshot::channel();
        let mut inner = self.shared.lock();
        inner.last_input = Instant::now();
        let id = inner.clock.next_arrival_id();
        if inner.clock.ended().is_none() {
            inner.arrivals.insert(id, tx);
        }
        inner.clock.server(0, ServerEvent::Arrived(ArrivedRequest { conn: peer.to_string(), id, key }));
        self.shared.pump(&mut inner);
        drop(inner);
        Arrival { id, rx, shared: self.shared.clone(), done: false }
    }

    /// What the clock waits for, if it waits.
    pub fn waiting(&self) -> Option<Waiting> {
        self.shared.lock().clock.waiting()
    }

    /// How the clock ended, if it has.
    pub fn end(&self) -> Option<ClockEnd> {
        self.shared.lock().clock.ended().cloned()
    }

    /// Resolves when the clock has ended by itself (stuck, stalled, a limit, a protocol error)
    /// or was finished.
    pub async fn ended(&self) {
        let mut ended = self.shared.ended.subscribe();
        // The sender lives as long as the shared state this handle holds.
        let _ = ended.wait_for(|ended| *ended).await;
    }
}

/// A reply's turn to be written: resolves when virtual time has reached its due time and the
/// runtime is there too.
pub struct Release {
    id: ReleaseId,
    rx: oneshot::Receiver<Released>,
    shared: Arc<Shared>,
    done: bool,
}

impl Future for Release {
    type Output = Result<Released, ClockStopped>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match Pin::new(&mut self.rx).poll(cx) {
            Poll::Ready(result) => {
                self.done = true;
                Poll::Ready(result.map_err(|_| ClockStopped))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for Release {
    fn drop(&mut self) {
        if !self.done {
            let mut inner = self.shared.lock();
            inner.waiters.remove(&self.id);
            inner.clock.release_failed(self.id);
            self.shared.pump(&mut inner);
        }
    }
}

/// The order key of a request among those of one instant: FNV-1a (64 bits) of its bytes,
/// the same on every machine and in every run.
pub fn request_key(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// A counted request waiting for its turn: resolves with the [`Turn`] once the clock hands it
/// to the endpoint. Dropping it (the handler was cancelled) takes it out of the queue.
pub struct Arrival {
    id: ArrivalId,
    rx: oneshot::Receiver<u64>,
    shared: Arc<Shared>,
    done: bool,
}

impl Future for Arrival {
    type Output = Result<Turn, ClockStopped>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match Pin::new(&mut self.rx).poll(cx) {
            Poll::Ready(result) => {
                self.done = true;
                Poll::Ready(match result {
                    Ok(arrived_ns) => Ok(Turn { id: self.id, arrived_ns, shared: self.shared.clone(), done: false }),
                    Err(_) => Err(ClockStopped),
                })
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for Arrival {
    fn drop(&mut self) {
        if !self.done {
            let mut inner = self.shared.lock();
            inner.arrivals.remove(&self.id);
            inner.clock.arrival_dropped(self.id);
            self.shared.pump(&mut inner);
        }
    }
}

/// A request's turn: the clock holds still until its answer is scheduled
/// ([`Turn::release_after`]) or it is let go ([`Turn::hold`], or dropping it).
pub struct Turn {
    id: ArrivalId,
    arrived_ns: u64,
    shared: Arc<Shared>,
    done: bool,
}

impl Turn {
    /// The virtual time the request arrived at (the instant it was taken at).
    pub fn arrived_ns(&self) -> u64 {
        self.arrived_ns
    }

    /// Schedules the answer `latency_ns` after the arrival (0: an answer at once, such as an
    /// API error); await the [`Release`] before writing it.
    pub fn release_after(mut self, latency_ns: u64) -> Release {
        self.done = true;
        let (tx, rx) = oneshot::channel();
        let mut inner = self.shared.lock();
        inner.last_input = Instant::now();
        let id = inner.clock.next_release_id();
        if inner.clock.ended().is_none() {
            inner.waiters.insert(id, tx);
        }
        inner.clock.server(0, ServerEvent::Scheduled { arrival: self.id, release: id, due: Due::After(latency_ns) });
        self.shared.pump(&mut inner);
        drop(inner);
        Release { id, rx, shared: self.shared.clone(), done: false }
    }

    /// The request gets no answer (a scripted `hang`): the clock moves on without it.
    pub fn hold(mut self) {
        self.done = true;
        self.let_go();
    }

    fn let_go(&self) {
        let mut inner = self.shared.lock();
        inner.last_input = Instant::now();
        inner.clock.server(0, ServerEvent::Taken(self.id));
        self.shared.pump(&mut inner);
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        if !self.done {
            self.let_go();
        }
    }
}

/// The virtual time of an endpoint event, once the clock has settled it (see
/// [`super::ServerEvent`]); dropping it changes nothing.
pub struct Stamp {
    rx: oneshot::Receiver<u64>,
}

impl Future for Stamp {
    type Output = Result<u64, ClockStopped>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.rx).poll(cx).map(|result| result.map_err(|_| ClockStopped))
    }
}

/// The clock's TCP endpoint. Drop it only after [`ClockEndpoint::finish`]; dropping it earlier
/// leaves its task to end when the runtime's connection does.
pub struct ClockEndpoint {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl ClockEndpoint {
    /// Listens on 127.0.0.1, on a port of the system's choosing, and starts following
    /// whichever runtime connects. Needs a tokio runtime with I/O and time enabled, and an
    /// unpaused clock.
    pub async fn bind(options: ClockOptions) -> io::Result<ClockEndpoint> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let (ended, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                clock: VirtualClock::new(options.limits.clone(), options.tie_seed),
                waiters: BTreeMap::new(),
                arrivals: BTreeMap::new(),
                outbox: Vec::new(),
                end_sent: false,
                stop: false,
                last_input: Instant::now(),
                stamps: BTreeMap::new(),
                tokens: 0,
                http: options.http.clone(),
            }),
            wake: Notify::new(),
            ended,
        });
        let task = tokio::spawn(serve(listener, shared.clone(), options));
        Ok(ClockEndpoint { addr, shared, task })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The value of `REHEARSAL_CLOCK` for the runtime (`127.0.0.1:PORT`).
    pub fn env_value(&self) -> String {
        self.addr.to_string()
    }

    /// Sets the model endpoint's addresses (`welcome.http`) for runtimes that connect from now
    /// on: the server is started with the [`Clock`] of an endpoint already bound, so its
    /// address is known only after [`ClockEndpoint::bind`].
    pub fn set_http(&self, http: Vec<String>) {
        self.shared.lock().http = http;
    }

    /// The handle for the model endpoint.
    pub fn clock(&self) -> Clock {
        Clock { shared: self.shared.clone() }
    }

    /// Stops following the runtime (it gets `end` if the clock had not ended) and reports.
    pub async fn finish(self) -> ClockReport {
        {
            let mut inner = self.shared.lock();
            inner.clock.finish();
            inner.stop = true;
            self.shared.pump(&mut inner);
        }
        self.shared.wake.notify_one();
        // The task ends at its next wake-up; a panic in it is a broken invariant.
        if let Err(error) = self.task.await
            && error.is_panic()
        {
            std::panic::resume_unwind(error.into_panic());
        }
        let inner = self.shared.lock();
        ClockReport {
            end: inner.clock.ended().cloned().expect("finish ends the clock"),
            now_ns: inner.clock.now_ns(),
            transcript: inner.clock.transcript().to_vec(),
        }
    }
}

/// A line from a connection, or why it could not be read.
type Line = Result<String, ProtocolError>;

/// A connection that has said its first line.
struct Greeted {
    writer: OwnedWriteHalf,
    lines: mpsc::Receiver<Line>,
    first: Option<Line>,
}

/// The followed runtime's connection.
struct Session {
    writer: OwnedWriteHalf,
    lines: mpsc::Receiver<Line>,
    line_no: u64,
}

/// Why a line could not be written to a runtime.
enum WriteFailed {
    /// The connection is gone: its reader reports the end.
    Gone,
    /// The runtime stopped reading: the write did not complete within the limit.
    Blocked,
}

/// Writes `line` within `limit`: a runtime that does not read never holds the endpoint.
async fn write_line(writer: &mut OwnedWriteHalf, line: &str, limit: std::time::Duration) -> Result<(), WriteFailed> {
    match tokio::time::timeout(limit, writer.write_all(line.as_bytes())).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err(WriteFailed::Gone),
        Err(_) => Err(WriteFailed::Blocked),
    }
}

/// Ends the clock because the followed runtime stopped reading (its line `line_no` was the
/// last it sent): a protocol error, after which the runtime is no longer followed.
fn stopped_reading(shared: &Shared, line_no: u64, limit: std::time::Duration) {
    let mut inner = shared.lock();
    if inner.clock.ended().is_none() {
        let at_ns = inner.clock.now_ns();
        let message = format!(
            "the runtime stopped reading its clock connection: a line to it could not be written within {} ms",
            limit.as_millis()
        );
        inner.clock.end(ClockEnd::ProtocolError { at_ns, line: line_no, message });
    }
    shared.pump(&mut inner);
}

async fn serve(listener: TcpListener, shared: Arc<Shared>, options: ClockOptions) {
    let (greeted_tx, mut greeted_rx) = mpsc::channel::<Greeted>(LINES_QUEUED_MAX);
    let mut session: Option<Session> = None;
    let busy_wall_max = options.limits.busy_wall_max;
    let write_wall_max = options.limits.write_wall_max;
    loop {
        let (outbox, stop, stall_at) = {
            let mut inner = shared.lock();
            let stall_at = match inner.clock.waiting() {
                Some(Waiting::Runtime) | None => None,
                Some(_) => Some(inner.last_input + busy_wall_max),
            };
            (std::mem::take(&mut inner.outbox), inner.stop, stall_at)
        };
        if let Some(current) = &mut session {
            for message in outbox {
                match write_line(&mut current.writer, &message.line(), write_wall_max).await {
                    Ok(()) => {}
                    // The runtime has gone; its reader reports the end of the connection.
                    Err(WriteFailed::Gone) => break,
                    Err(WriteFailed::Blocked) => {
                        stopped_reading(&shared, current.line_no, write_wall_max);
                        session = None;
                        break;
                    }
                }
            }
        }
        if stop {
            return;
        }
        tokio::select! {
            biased;
            () = shared.wake.notified() => {}
            line = async {
                match &mut session {
                    Some(current) => current.lines.recv().await,
                    None => std::future::pending().await,
                }
            } => {
                let Some(current) = session.as_mut() else { continue };
                match line {
                    None => {
                        session = None;
                        shared.with(VirtualClock::disconnect);
                    }
                    Some(line) => {
                        current.line_no += 1;
                        let line_no = current.line_no;
                        if let Some(answer) = take_line(&shared, line_no, line)
                            && let Err(WriteFailed::Blocked) =
                                write_line(&mut current.writer, &answer.line(), write_wall_max).await
                        {
                            stopped_reading(&shared, line_no, write_wall_max);
                            session = None;
                        }
                    }
                }
            }
            greeted = greeted_rx.recv() => {
                let Some(greeted) = greeted else { continue };
                if let Some(new) = greet(&shared, &options, greeted, session.is_some(), write_wall_max).await {
                    session = Some(new);
                }
            }
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    tokio::spawn(first_line(stream, greeted_tx.clone(), busy_wall_max));
                }
            }
            () = async {
                match stall_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            } => {
                let mut inner = shared.lock();
                // Still waiting, with no input meanwhile (the lock was free in between).
                if inner.last_input + busy_wall_max <= Instant::now()
                    && let Some(waiting) = inner.clock.waiting()
                {
                    let at_ns = inner.clock.now_ns();
                    inner.clock.end(ClockEnd::Stalled { at_ns, waiting, wall: busy_wall_max });
                    shared.pump(&mut inner);
                }
            }
        }
    }
}

/// Reads a new connection's first line (its hello), within the wall-clock limit.
async fn first_line(stream: TcpStream, greeted: mpsc::Sender<Greeted>, limit: std::time::Duration) {
    let _ = stream.set_nodelay(true);
    let (read, writer) = stream.into_split();
    let (tx, mut lines) = mpsc::channel(LINES_QUEUED_MAX);
    tokio::spawn(read_lines(read, tx));
    let first = tokio::time::timeout(limit, lines.recv())
        .await
        .unwrap_or_else(|_| Some(Err(ProtocolError::NoHello { wall: limit })));
    // Connections wait their turn to be greeted; one that waits past the limit is dropped.
    let _ = greeted.send_timeout(Greeted { writer, lines, first }, limit).await;
}

/// Welcomes or refuses a connection that said its first line.
async fn greet(
    shared: &Shared,
    options: &ClockOptions,
    greeted: Greeted,
    busy: bool,
    write_wall_max: std::time::Duration,
) -> Option<Session> {
    let Greeted { mut writer, lines, first } = greeted;
    let answer = match first {
        None => return None,
        Some(Err(error)) => Err(error),
        Some(Ok(line)) => match serde_json::from_str::<FromRuntime>(&line) {
            Ok(FromRuntime::Hello { .. }) if busy => Err(ProtocolError::AnotherRuntime),
            Ok(FromRuntime::Hello { protocol, runtime, .. }) => shared.with(|clock| clock.connect(protocol, &runtime)),
            Ok(_) => Err(ProtocolError::FirstNotHello { line }),
            Err(error) => Err(ProtocolError::FirstNotAMessage { source: Box::new(error) }),
        },
    };
    match answer {
        Ok(now_ns) => {
            let welcome = ToRuntime::Welcome {
                protocol: PROTOCOL,
                now_ns,
                epoch_ns: options.epoch_ns,
                seed: options.seed,
                http: shared.lock().http.clone(),
                pending: true,
            };
            // A runtime gone before its welcome disconnects at once: its reader ends.
            if let Err(WriteFailed::Blocked) = write_line(&mut writer, &welcome.line(), write_wall_max).await {
                stopped_reading(shared, 1, write_wall_max);
                return None;
            }
            Some(Session { writer, lines, line_no: 1 })
        }
        Err(reason) => {
            let _ = write_line(&mut writer, &ToRuntime::Refused { reason: reason.to_string() }.line(), write_wall_max)
                .await;
            let _ = tokio::time::timeout(write_wall_max, writer.shutdown()).await;
            None
        }
    }
}

/// Takes one line of the followed runtime; returns the answer to write at once, if any.
fn take_line(shared: &Shared, line_no: u64, line: Line) -> Option<ToRuntime> {
    let mut inner = shared.lock();
    inner.last_input = Instant::now();
    if inner.clock.ended().is_some() {
        // After `end` the runtime is not followed; what it says no longer matters.
        return None;
    }
    let mut answer = None;
    let taken = match line {
        Err(error) => Err(error),
        Ok(line) => match serde_json::from_str::<FromRuntime>(&line) {
            Err(error) => Err(ProtocolError::NotAMessage { line, source: Box::new(error) }),
            Ok(FromRuntime::Hello { .. }) => Err(ProtocolError::SecondHello),
            Ok(FromRuntime::Now) => {
                answer = Some(ToRuntime::Now { now_ns: inner.clock.now_ns() });
                Ok(())
            }
            Ok(FromRuntime::Idle(report)) => inner.clock.idle(report),
            Ok(FromRuntime::Busy { seq }) => {
                let taken = inner.clock.busy(seq);
                if taken.is_ok() {
                    answer = Some(ToRuntime::Pending { seq, conns: inner.clock.unread() });
                }
                taken
            }
            Ok(FromRuntime::At { seq, now_ns }) => inner.clock.at(seq, now_ns),
        },
    };
    if let Err(error) = taken {
        let at_ns = inner.clock.now_ns();
        inner.clock.end(ClockEnd::ProtocolError { at_ns, line: line_no, message: error.to_string() });
    }
    shared.pump(&mut inner);
    answer
}

pub(super) fn shorten(line: &str) -> String {
    const KEEP: usize = 120;
    if line.chars().count() <= KEEP {
        line.to_string()
    } else {
        format!("{}…", line.chars().take(KEEP).collect::<String>())
    }
}

/// Splits a connection into lines of at most [`LINE_BYTES_MAX`] bytes; ends at end of file,
/// after an error line, or when nobody listens.
async fn read_lines(mut read: OwnedReadHalf, tx: mpsc::Sender<Line>) {
    let mut buffer = Vec::new();
    let mut scanned = 0;
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        let n = match read.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        buffer.extend_from_slice(&chunk[..n]);
        while let Some(offset) = buffer[scanned..].iter().position(|byte| *byte == b'\n') {
            let end = scanned + offset;
            let mut line: Vec<u8> = buffer.drain(..=end).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            scanned = 0;
            let line = String::from_utf8(line).map_err(|_| ProtocolError::NotUtf8);
            let failed = line.is_err();
            // A full queue holds this reader (and, through TCP, the runtime) back.
            if tx.send(line).await.is_err() || failed {
                return;
            }
        }
        scanned = buffer.len();
        if buffer.len() > LINE_BYTES_MAX {
            let _ = tx.send(Err(ProtocolError::LineTooLong { bytes_max: LINE_BYTES_MAX })).await;
            return;
        }
    }
}

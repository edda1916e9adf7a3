//! Virtual time across the process boundary: the harness side of docs/clock-protocol.md.
//!
//! [`VirtualClock`] is the protocol's rules as a pure state machine: virtual now, the replies
//! waiting for their due time (keyed by due time, then tie rank, then registration), what the
//! runtime last reported (idle or busy, its next timer, its per-connection request and
//! response counts), what the model endpoint has seen, and [`VirtualClock::next_step`], which
//! decides: release the replies due now, advance the runtime, wait (saying for what), or end.
//! It does no I/O and reads no clock: the wall-clock limit is the endpoint's
//! ([`endpoint`]), which feeds it messages and carries out its steps.
//!
//! Architecture Invariant: virtual time moves only in [`VirtualClock::at`], when the runtime
//! confirms an advance; a reply due at `T` is released only once both sides are at `T`.
//!
//! This module does not pause tokio's clock (a paused clock would auto-advance while the
//! endpoint waits on its sockets), does not serve HTTP and does not start runtimes.

#[doc(hidden)]
pub mod endpoint;

#[doc(hidden)]
pub use endpoint::{Arrival, Release, Released, Stamp, Turn, request_key};
pub use endpoint::{Clock, ClockEndpoint, ClockOptions, ClockReport, ClockStopped};

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::seed::splitmix64;

/// The protocol version this harness speaks (`hello.protocol`, `welcome.protocol`).
#[doc(hidden)]
pub const PROTOCOL: u32 = 1;

/// The longest message line the harness reads, in bytes (1 MiB).
#[doc(hidden)]
pub const LINE_BYTES_MAX: usize = 1 << 20;

/// The most lines read from one connection and not yet taken by the endpoint: past it the
/// endpoint stops reading that socket until it has taken some (TCP then holds the runtime
/// back), so lines never queue without limit.
#[doc(hidden)]
pub const LINES_QUEUED_MAX: usize = 64;

/// Every limit of the clock, each with its default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClockLimits {
    /// Real time the clock waits for the runtime or the model endpoint without a message
    /// before it ends with [`ClockEnd::Stalled`]. Default 30 s: above a Python runtime's
    /// start-up with the `openai` SDK on a loaded machine.
    pub busy_wall_max: Duration,
    /// The clock never advances past this virtual time. Default one virtual hour, as a
    /// scenario's `limits.horizon_ms`.
    pub horizon_ns: u64,
    /// Advances per run. Default 100,000: a runtime polling on a 1 ms timer stops after 100
    /// virtual seconds instead of running for hours.
    pub advances_max: u64,
    /// Real time one line to the runtime may take to write. A runtime that stops reading its
    /// clock connection (its socket buffer full) is dropped when a write takes longer, and the
    /// clock ends with a protocol error: one client never blocks the endpoint. Default 5 s.
    pub write_wall_max: Duration,
}

impl Default for ClockLimits {
    fn default() -> ClockLimits {
        ClockLimits {
            busy_wall_max: Duration::from_secs(30),
            horizon_ns: 3_600 * 1_000_000_000,
            advances_max: 100_000,
            write_wall_max: Duration::from_secs(5),
        }
    }
}

/// A message from the runtime (one JSON line; unknown fields are ignored).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
#[doc(hidden)]
pub enum FromRuntime {
    /// The first message.
    Hello {
        /// The protocol version the runtime speaks.
        protocol: u32,
        /// Free text naming the runtime (`python-asyncio 3.12.1`).
        #[serde(default)]
        runtime: String,
        /// The runtime's process id, for diagnostics.
        #[serde(default)]
        pid: Option<u64>,
    },
    /// Asks for the harness's time.
    Now,
    /// The runtime can do nothing until time moves or a byte arrives.
    Idle(IdleReport),
    /// The runtime woke by itself since idle report `seq`.
    Busy {
        /// The idle report this voids.
        seq: u64,
    },
    /// The runtime applied advance `seq`.
    At {
        /// The advance it applied.
        seq: u64,
        /// Its time now.
        now_ns: u64,
    },
}

/// An idle report (`{"op":"idle",…}`).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[doc(hidden)]
pub struct IdleReport {
    /// Counts idle reports from 1 on this connection.
    pub seq: u64,
    /// The runtime's time; it must be the harness's.
    pub now_ns: u64,
    /// The runtime's earliest timer, strictly after `now_ns`; `None` when it has none.
    pub next_due_ns: Option<u64>,
    /// The model connections whose counts changed since the previous report.
    #[serde(default)]
    pub conns: Vec<ConnReport>,
}

/// What the runtime says of one connection to the model endpoint.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[doc(hidden)]
pub struct ConnReport {
    /// The runtime's end of the connection (`127.0.0.1:51000`): the peer address the endpoint
    /// accepted it from.
    pub conn: String,
    /// Requests whose last byte the runtime has written.
    pub sent: u64,
    /// Final responses the runtime has read to their last byte.
    pub read: u64,
    /// False once the runtime has seen end of file or closed it.
    #[serde(default = "yes")]
    pub open: bool,
    /// False while the runtime does not read it (its reads are paused).
    #[serde(default = "yes")]
    pub reading: bool,
    /// The runtime's send order (a counter over all its model connections, from 1) of each
    /// request it sent on this connection since its previous report of it. Optional: without
    /// it, requests of one instant are taken in the order of their bytes' hash.
    #[serde(default)]
    pub order: Vec<u64>,
}

fn yes() -> bool {
    true
}

/// A message to the runtime.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
#[doc(hidden)]
pub enum ToRuntime {
    /// The answer to `hello`.
    Welcome {
        /// The protocol version.
        protocol: u32,
        /// Virtual now.
        now_ns: u64,
        /// The wall-clock time (Unix nanoseconds) virtual zero stands for.
        epoch_ns: u64,
        /// Seeds the runtime's randomness.
        seed: u64,
        /// The model endpoint's addresses.
        http: Vec<String>,
        /// The harness answers every `busy` with `pending` (rule 4a).
        pending: bool,
    },
    /// The answer to `busy`: the connections with replies released and not yet read, in
    /// release order, each with how many replies were released on it from the start.
    Pending {
        /// The busy report answered.
        seq: u64,
        /// `{"conn": "127.0.0.1:51000", "released": 2}`, in release order.
        conns: Vec<PendingConn>,
    },
    /// The connection is refused and closed after this.
    Refused {
        /// Why.
        reason: String,
    },
    /// The answer to `now`.
    Now {
        /// Virtual now.
        now_ns: u64,
    },
    /// Move to `to_ns`.
    Advance {
        /// The idle report this answers.
        seq: u64,
        /// The new virtual now.
        to_ns: u64,
    },
    /// The harness stops following this runtime.
    End {
        /// Why ([`ClockEnd`]'s text).
        reason: String,
    },
}

/// A connection with released replies the runtime has not read yet ([`ToRuntime::Pending`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[doc(hidden)]
pub struct PendingConn {
    /// The runtime's end of the connection.
    pub conn: String,
    /// Replies released on it from the start.
    pub released: u64,
}

impl ToRuntime {
    /// The message as one protocol line, `\n` included.
    pub fn line(&self) -> String {
        let mut line = serde_json::to_string(self).expect("a clock message serializes");
        line.push('\n');
        line
    }
}

/// Names a reply scheduled with [`VirtualClock::schedule_release`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[doc(hidden)]
pub struct ReleaseId(pub u64);

/// Names a request counted with [`ServerEvent::Arrived`], waiting for its turn
/// ([`Step::Take`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[doc(hidden)]
pub struct ArrivalId(pub u64);

/// How the clock ended, at which virtual time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClockEnd {
    /// It was stopped from outside (the script ended) while following the runtime normally.
    Finished {
        /// Virtual now.
        at_ns: u64,
    },
    /// The runtime was idle with no timer and no reply pending: it could never move again.
    Stuck {
        /// Virtual now.
        at_ns: u64,
    },
    /// No message from the runtime or the endpoint for [`ClockLimits::busy_wall_max`] of real
    /// time while the clock waited.
    Stalled {
        /// Virtual now.
        at_ns: u64,
        /// What it waited for.
        waiting: Waiting,
        /// The limit that ran out.
        wall: Duration,
    },
    /// The next advance would pass [`ClockLimits::horizon_ns`].
    Horizon {
        /// Virtual now.
        at_ns: u64,
        /// Where the runtime wanted to go.
        wanted_ns: u64,
    },
    /// [`ClockLimits::advances_max`] advances were made.
    AdvanceLimit {
        /// Virtual now.
        at_ns: u64,
    },
    /// The runtime broke the protocol.
    ProtocolError {
        /// Virtual now.
        at_ns: u64,
        /// The line on the runtime's connection, from 1.
        line: u64,
        /// What was wrong.
        message: String,
    },
}

impl ClockEnd {
    /// Virtual time when the clock ended.
    pub fn at_ns(&self) -> u64 {
        match self {
            ClockEnd::Finished { at_ns }
            | ClockEnd::Stuck { at_ns }
            | ClockEnd::Stalled { at_ns, .. }
            | ClockEnd::Horizon { at_ns, .. }
            | ClockEnd::AdvanceLimit { at_ns }
            | ClockEnd::ProtocolError { at_ns, .. } => *at_ns,
        }
    }

    /// Whether the clock ended without anything to report (stopped from outside).
    pub fn is_clean(&self) -> bool {
        matches!(self, ClockEnd::Finished { .. })
    }
}

impl fmt::Display for ClockEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClockEnd::Finished { at_ns } => write!(f, "finished at {}", seconds(*at_ns)),
            ClockEnd::Stuck { at_ns } => write!(
                f,
                "stuck at {}: the runtime is idle with no timer and no reply due, so nothing can ever happen again",
                seconds(*at_ns)
            ),
            ClockEnd::Stalled { at_ns, waiting, wall } => {
                write!(f, "stalled at {}: waited {} ms of real time for {waiting}", seconds(*at_ns), wall.as_millis())
            }
            ClockEnd::Horizon { at_ns, wanted_ns } => write!(
                f,
                "horizon at {}: the next advance, to {}, passes the virtual-time horizon",
                seconds(*at_ns),
                seconds(*wanted_ns)
            ),
            ClockEnd::AdvanceLimit { at_ns } => write!(f, "advance limit at {}", seconds(*at_ns)),
            ClockEnd::ProtocolError { at_ns, line, message } => {
                write!(
                    f,
                    "protocol error at {}: line {line} of the runtime's clock connection: {message}",
                    seconds(*at_ns)
                )
            }
        }
    }
}

/// What the clock waits for when it cannot move.
#[derive(Clone, Debug, PartialEq, Eq)]
#[doc(hidden)]
pub enum Waiting {
    /// No runtime is connected.
    Runtime,
    /// The runtime is running (not idle).
    Idle,
    /// An advance was sent; its `at` (or `busy`) has not come.
    At,
    /// The runtime has sent more requests on a connection than the endpoint has seen.
    Request {
        /// The connection.
        conn: String,
        /// Requests the runtime sent.
        sent: u64,
        /// Requests the endpoint has seen.
        seen: u64,
    },
    /// The runtime closed a connection the endpoint has not seen close.
    Close {
        /// The connection.
        conn: String,
    },
    /// The model endpoint is handling a request it was handed ([`Step::Take`]) and has not
    /// scheduled its answer yet.
    Server,
    /// Released replies the runtime has not read yet.
    Read {
        /// The connection.
        conn: String,
        /// Replies released on it.
        released: u64,
        /// Replies the runtime has read.
        read: u64,
    },
}

impl fmt::Display for Waiting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Waiting::Runtime => write!(f, "a runtime to connect"),
            Waiting::Idle => write!(
                f,
                "the runtime to go idle (it is running: a busy loop, a blocking call, a thread, a subprocess?)"
            ),
            Waiting::At => write!(f, "the runtime to confirm an advance"),
            Waiting::Request { conn, sent, seen } => {
                write!(
                    f,
                    "the model endpoint to see request {} on {conn} (the runtime sent {sent}, it has seen {seen})",
                    seen + 1
                )
            }
            Waiting::Close { conn } => write!(f, "the model endpoint to see {conn} close (the runtime closed it)"),
            Waiting::Server => write!(f, "the model endpoint to schedule the answer to the request it took"),
            Waiting::Read { conn, released, read } => {
                write!(f, "the runtime to read the replies released on {conn} ({released} released, {read} read)")
            }
        }
    }
}

/// What to do next, from [`VirtualClock::next_step`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[doc(hidden)]
pub enum Step {
    /// Write these replies now, in this order.
    Release(Vec<ReleaseId>),
    /// Hand this request to the model endpoint: its turn has come. The endpoint schedules its
    /// answer (or holds it) before the clock takes another step.
    Take(ArrivalId),
    /// Send this advance to the runtime.
    Advance {
        /// The idle report it answers.
        seq: u64,
        /// Where to.
        to_ns: u64,
    },
    /// Nothing until the next message.
    Wait(Waiting),
    /// The clock has ended.
    Ended(ClockEnd),
}

/// A protocol error: what the runtime did wrong, or why its hello is refused (the line number
/// is the endpoint's, in [`ClockEnd::ProtocolError`]).
#[derive(Debug)]
pub enum ProtocolError {
    /// A line that is not UTF-8.
    NotUtf8,
    /// A line longer than the limit ([`LINE_BYTES_MAX`]).
    LineTooLong {
        /// The limit.
        bytes_max: usize,
    },
    /// A connection that said nothing within the limit.
    NoHello {
        /// The limit.
        wall: Duration,
    },
    /// A hello while another runtime process follows the clock.
    AnotherRuntime,
    /// A first message other than hello.
    FirstNotHello {
        /// The line.
        line: String,
    },
    /// A first line that is not a clock message.
    FirstNotAMessage {
        /// The parser's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A hello after the clock ended.
    Ended {
        /// How it ended.
        end: ClockEnd,
    },
    /// A hello in a protocol other than [`PROTOCOL`].
    UnknownProtocol {
        /// The protocol the runtime speaks.
        protocol: u32,
    },
    /// A line that is not a clock message.
    NotAMessage {
        /// The line (shown shortened).
        line: String,
        /// The parser's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A hello on a connection already greeted.
    SecondHello,
    /// An idle report while the runtime is not running.
    IdleWhile {
        /// The report's number.
        seq: u64,
        /// What the clock was waiting for, in words.
        phase: String,
    },
    /// An idle report whose number is not the one after the last.
    IdleOutOfOrder {
        /// The report's number.
        seq: u64,
        /// The last report's number.
        previous: u64,
    },
    /// An idle report whose time is not the harness's.
    IdleNow {
        /// The time it says.
        now_ns: u64,
        /// The report's number.
        seq: u64,
        /// The harness's time.
        harness_ns: u64,
    },
    /// An idle report with a timer due now or earlier.
    IdleDue {
        /// The report's number.
        seq: u64,
        /// When the timer is due.
        due_ns: u64,
        /// Virtual now.
        now_ns: u64,
    },
    /// An idle report whose byte counts of a connection went down.
    CountsDown {
        /// The report's number.
        seq: u64,
        /// The connection (its address).
        conn: String,
        /// Bytes sent, as reported now.
        sent: u64,
        /// Bytes sent, as reported before.
        sent_before: u64,
        /// Bytes read, as reported now.
        read: u64,
        /// Bytes read, as reported before.
        read_before: u64,
    },
    /// A busy report that answers no idle report or advance.
    BusyWhile {
        /// The idle report it names.
        seq: u64,
        /// What the clock was waiting for, in words.
        phase: String,
    },
    /// An advance confirmed at a time other than the advance's.
    AtElsewhere {
        /// The advance's number.
        seq: u64,
        /// The time it says.
        now_ns: u64,
        /// The advance's time.
        to_ns: u64,
    },
    /// An advance confirmed that is not the one unconfirmed.
    AtWhile {
        /// The advance's number.
        seq: u64,
        /// What the clock was waiting for, in words.
        phase: String,
    },
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtocolError::NotUtf8 => f.write_str("a line that is not UTF-8"),
            ProtocolError::LineTooLong { bytes_max } => write!(f, "a line longer than {bytes_max} bytes"),
            ProtocolError::NoHello { wall } => write!(f, "no hello within {} ms", wall.as_millis()),
            ProtocolError::AnotherRuntime => {
                f.write_str("another runtime process is connected to this clock: one process at a time follows it")
            }
            ProtocolError::FirstNotHello { line } => {
                write!(f, "the first message must be hello (protocol {PROTOCOL}), not {line}")
            }
            ProtocolError::FirstNotAMessage { source } => write!(f, "the first line is not a clock message: {source}"),
            ProtocolError::Ended { end } => write!(f, "the clock has ended ({end})"),
            ProtocolError::UnknownProtocol { protocol } => {
                write!(f, "protocol {protocol} is not spoken here; this harness speaks protocol {PROTOCOL}")
            }
            ProtocolError::NotAMessage { line, source } => {
                write!(f, "not a clock message ({source}): {}", endpoint::shorten(line))
            }
            ProtocolError::SecondHello => f.write_str("a second hello on one connection"),
            ProtocolError::IdleWhile { seq, phase } => write!(f, "idle report #{seq} while {phase}"),
            ProtocolError::IdleOutOfOrder { seq, previous } => write!(
                f,
                "idle report #{seq} out of order: the previous one was #{previous}, so this one is #{}",
                previous + 1
            ),
            ProtocolError::IdleNow { seq, now_ns, harness_ns } => {
                write!(f, "idle report #{seq} says now is {now_ns} ns; the harness's time is {harness_ns} ns")
            }
            ProtocolError::IdleDue { seq, due_ns, now_ns } => write!(
                f,
                "idle report #{seq} has a timer due at {due_ns} ns, not after now ({now_ns} ns): a runtime is idle only when nothing is due"
            ),
            ProtocolError::CountsDown { seq, conn, sent, sent_before, read, read_before } => write!(
                f,
                "idle report #{seq}: the counts of {conn} went down (sent {sent} after {sent_before}, read {read} after {read_before})"
            ),
            ProtocolError::BusyWhile { seq, phase } => write!(f, "busy #{seq} while {phase}"),
            ProtocolError::AtElsewhere { seq, now_ns, to_ns } => {
                write!(f, "at #{seq} says {now_ns} ns; the advance was to {to_ns} ns")
            }
            ProtocolError::AtWhile { seq, phase } => write!(f, "at #{seq} while {phase}"),
        }
    }
}

impl std::error::Error for ProtocolError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ProtocolError::FirstNotAMessage { source } | ProtocolError::NotAMessage { source, .. } => Some(&**source),
            _ => None,
        }
    }
}

/// Something the model endpoint saw, in the order it saw it.
///
/// While an advance is unconfirmed, the endpoint cannot know the virtual time of what the
/// runtime does: it happened at the new time if the runtime confirms (`at`), at the old one if
/// the runtime woke by itself (`busy`). [`VirtualClock::server`] therefore holds such events
/// until the advance is settled, then applies them in order at the settled time.
#[derive(Clone, Debug, PartialEq, Eq)]
#[doc(hidden)]
pub enum ServerEvent {
    /// A connection from this peer was accepted.
    Opened(String),
    /// A request from this peer was parsed and is held without an answer (`hang`).
    Held(String),
    /// This peer's connection closed.
    Closed(String),
    /// A request from this peer was parsed; its reply (named `id`, from
    /// [`VirtualClock::next_release_id`]) is due at this time.
    Release {
        /// The peer.
        conn: String,
        /// The reply's name.
        id: ReleaseId,
        /// When it is due.
        due: Due,
    },
    /// A request was parsed and counted; it waits for its turn (see [`ArrivedRequest`]).
    Arrived(ArrivedRequest),
    /// The endpoint scheduled the answer to the request it took: reply `release`, due `due`.
    Scheduled {
        /// The request taken.
        arrival: ArrivalId,
        /// The reply's name.
        release: ReleaseId,
        /// When it is due.
        due: Due,
    },
    /// The endpoint is done with the request it took without scheduling a reply (a `hang`,
    /// or its handler was cancelled).
    Taken(ArrivalId),
}

/// Requests that arrive at one instant on several connections are seen by the endpoint in an
/// order that is a race; what the endpoint does with a request (which agent it is put down to,
/// which reply it gets) depends on that order. So a request counted with
/// [`ServerEvent::Arrived`] waits: once the runtime is idle with its report current (every
/// request it sent at this instant is counted), the clock hands the waiting requests over one
/// at a time ([`Step::Take`]), ordered by the key the endpoint gave (a hash of the request's
/// bytes: the same in every run), permuted by the tie seed under `--explore`; the next one only
/// after the endpoint has scheduled the answer to the previous ([`ServerEvent::Scheduled`] or
/// [`ServerEvent::Taken`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[doc(hidden)]
pub struct ArrivedRequest {
    /// The peer.
    pub conn: String,
    /// Its name.
    pub id: ArrivalId,
    /// The order key among the requests of one instant.
    pub key: u64,
}

/// When a reply is due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[doc(hidden)]
pub enum Due {
    /// At this virtual time (now if it has passed).
    At(u64),
    /// This long after the virtual time the request is counted at.
    After(u64),
}

/// What the runtime is doing, as far as the clock knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    NoRuntime,
    Busy,
    Idle { seq: u64, next_due_ns: Option<u64> },
    Advancing { seq: u64, to_ns: u64 },
}

/// One connection to the model endpoint: the endpoint's counts and the runtime's.
#[derive(Clone, Debug)]
struct Conn {
    /// `c1`, `c2`, … in the order the transcript first names them (their ports differ from run
    /// to run): at a connection's first request taken, or at its close.
    name: Option<String>,
    seen: u64,
    released: u64,
    server_closed: bool,
    sent: u64,
    read: u64,
    open: bool,
    reading: bool,
    /// The name of the last reply released on it (for [`VirtualClock::unread`]'s order).
    last_release: u64,
    /// The runtime's send order of each request on it (`order` of its idle reports).
    order: Vec<u64>,
}

/// A reply waiting for its due time: ordered by due time, tie rank, registration.
type Key = (u64, u64, u64);

/// A request waiting for its turn: ordered by the runtime's send order (when it reports it),
/// tie rank, key, registration.
type ArrivalKey = (u64, u64, u64, u64);

/// A scheduled reply: its connection, its place in the queue while pending (`None` once
/// released), and the virtual time its request was counted at.
#[derive(Clone, Debug)]
struct Scheduled {
    conn: String,
    key: Option<Key>,
    requested_ns: u64,
}

/// The clock protocol's rules as a state machine (see the module docs).
#[derive(Clone, Debug)]
#[doc(hidden)]
pub struct VirtualClock {
    now_ns: u64,
    limits: ClockLimits,
    tie_seed: Option<u64>,
    phase: Phase,
    last_seq: u64,
    conns: BTreeMap<String, Conn>,
    pending: BTreeMap<Key, (ReleaseId, String)>,
    /// Where each scheduled reply is released: on which connection (to count it), and whether
    /// it is still pending (its key).
    releases: BTreeMap<ReleaseId, Scheduled>,
    registered: u64,
    /// Endpoint events held while an advance is unconfirmed, with their tokens.
    deferred: Vec<(u64, ServerEvent)>,
    /// Tokens of applied endpoint events, with the virtual time each was applied at.
    stamped: Vec<(u64, u64)>,
    /// Requests waiting for their turn: connection, order key, and which request on its
    /// connection it is (from 0).
    queue: BTreeMap<ArrivalId, (String, u64, u64)>,
    /// The request handed to the endpoint and not yet scheduled, with its connection.
    taking: Option<(ArrivalId, String)>,
    arrivals_registered: u64,
    /// Connections named so far.
    named: usize,
    /// Closes applied since the last note, by connection name: noted together, sorted, so that
    /// closes of one instant read the same whatever order the endpoint saw them in.
    closes: std::collections::BTreeSet<String>,
    /// The runtime disconnected since the last note: noted after the closes, as a runtime's
    /// exit closes its model connections and its clock connection in a real-time order.
    disconnected: bool,
    advances: u64,
    ended: Option<ClockEnd>,
    transcript: Vec<String>,
}

impl VirtualClock {
    /// A clock at virtual zero with no runtime; `tie_seed` permutes replies due at one instant
    /// (`--explore`), `None` keeps registration order.
    pub fn new(limits: ClockLimits, tie_seed: Option<u64>) -> VirtualClock {
        VirtualClock {
            now_ns: 0,
            limits,
            tie_seed,
            phase: Phase::NoRuntime,
            last_seq: 0,
            conns: BTreeMap::new(),
            pending: BTreeMap::new(),
            releases: BTreeMap::new(),
            registered: 0,
            deferred: Vec::new(),
            stamped: Vec::new(),
            queue: BTreeMap::new(),
            taking: None,
            arrivals_registered: 0,
            named: 0,
            closes: std::collections::BTreeSet::new(),
            disconnected: false,
            advances: 0,
            ended: None,
            transcript: Vec::new(),
        }
    }

    /// Virtual now, in nanoseconds since the run began.
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// The limits.
    pub fn limits(&self) -> &ClockLimits {
        &self.limits
    }

    /// How the clock ended, if it has.
    pub fn ended(&self) -> Option<&ClockEnd> {
        self.ended.as_ref()
    }

    /// The deterministic record of what the clock decided: one line per hello, advance,
    /// release, disconnect and end, at virtual times, connections named `c1`, `c2`. Idle and
    /// busy reports are not in it: how many a runtime sends depends on when bytes arrive.
    pub fn transcript(&self) -> &[String] {
        &self.transcript
    }

    /// Whether a runtime is connected.
    pub fn connected(&self) -> bool {
        self.phase != Phase::NoRuntime
    }

    fn note(&mut self, what: String) {
        self.flush_closes();
        self.transcript.push(format!("{:>12} {what}", seconds(self.now_ns)));
    }

    fn flush_closes(&mut self) {
        for name in std::mem::take(&mut self.closes) {
            self.transcript.push(format!("{:>12} closed {name}", seconds(self.now_ns)));
        }
        if std::mem::take(&mut self.disconnected) {
            self.transcript.push(format!("{:>12} disconnected", seconds(self.now_ns)));
        }
    }

    /// The transcript name of `conn`, given now if it has none.
    fn name(&mut self, conn: &str) -> String {
        let next = self.named + 1;
        let entry = self.conn(conn);
        if let Some(name) = &entry.name {
            return name.clone();
        }
        let name = format!("c{next}");
        entry.name = Some(name.clone());
        self.named = next;
        name
    }

    /// Ends the clock (the first end stays).
    pub fn end(&mut self, end: ClockEnd) {
        if self.ended.is_none() {
            self.note(format!("end: {end}"));
            self.ended = Some(end);
        }
    }

    /// Stops the clock from outside (the script ended).
    pub fn finish(&mut self) {
        self.end(ClockEnd::Finished { at_ns: self.now_ns });
    }

    /// Whether a transcript ([`VirtualClock::transcript`]) shows a runtime's hello: a runtime
    /// that never greeted the clock asked the model off it.
    pub fn greeted(transcript: &[String]) -> bool {
        transcript.iter().any(|line| line.split_whitespace().nth(1) == Some("hello"))
    }

    /// A runtime says hello: `Ok` with the welcome's virtual now, or why it is refused.
    pub fn connect(&mut self, protocol: u32, runtime: &str) -> Result<u64, ProtocolError> {
        if let Some(end) = &self.ended {
            return Err(ProtocolError::Ended { end: end.clone() });
        }
        if protocol != PROTOCOL {
            return Err(ProtocolError::UnknownProtocol { protocol });
        }
        if self.phase != Phase::NoRuntime {
            return Err(ProtocolError::AnotherRuntime);
        }
        self.phase = Phase::Busy;
        self.last_seq = 0;
        let runtime = if runtime.is_empty() { "a runtime" } else { runtime };
        self.note(format!("hello {runtime}"));
        Ok(self.now_ns)
    }

    /// The connected runtime closed its clock connection. Time stays; a later runtime may
    /// connect.
    pub fn disconnect(&mut self) {
        if self.phase != Phase::NoRuntime {
            self.phase = Phase::NoRuntime;
            // Its connections are gone with it, whatever it last reported.
            for conn in self.conns.values_mut() {
                conn.open = false;
                conn.reading = false;
            }
            self.disconnected = true;
        }
    }

    fn conn(&mut self, conn: &str) -> &mut Conn {
        self.conns.entry(conn.to_string()).or_insert_with(fresh_counts)
    }

    /// The model endpoint accepted a connection from `conn`. A closed connection of the same
    /// address (a port used again) starts afresh.
    pub fn conn_opened(&mut self, conn: &str) {
        let entry = self.conn(conn);
        if entry.server_closed {
            *entry = Conn { name: entry.name.take(), ..fresh_counts() };
        }
    }

    /// The model endpoint has parsed a request from `conn`.
    pub fn request_seen(&mut self, conn: &str) {
        let entry = self.conn(conn);
        if entry.server_closed {
            *entry = Conn { name: entry.name.take(), ..fresh_counts() };
        }
        entry.seen += 1;
    }

    /// The model endpoint saw `conn` close. Its pending replies can no longer be delivered and
    /// are dropped.
    pub fn conn_closed(&mut self, conn: &str) {
        let entry = self.conn(conn);
        entry.server_closed = true;
        let dropped: Vec<Key> = self.pending.iter().filter(|(_, (_, on))| on == conn).map(|(key, _)| *key).collect();
        for key in dropped {
            if let Some((id, _)) = self.pending.remove(&key) {
                self.releases.remove(&id);
            }
        }
    }

    /// Schedules a reply on `conn` at virtual `due_ns` (at now if that has passed).
    pub fn schedule_release(&mut self, conn: &str, due_ns: u64) -> ReleaseId {
        let id = self.next_release_id();
        self.schedule(conn, id, due_ns);
        id
    }

    /// A name for a reply about to be scheduled (through [`ServerEvent::Release`]); names go
    /// in call order, which is the order replies due at one instant are released in.
    pub fn next_release_id(&mut self) -> ReleaseId {
        self.registered += 1;
        ReleaseId(self.registered)
    }

    fn schedule(&mut self, conn: &str, id: ReleaseId, due_ns: u64) {
        self.conn(conn);
        let rank = self.tie_seed.map_or(0, |seed| splitmix64(seed ^ id.0));
        let key = (due_ns.max(self.now_ns), rank, id.0);
        self.pending.insert(key, (id, conn.to_string()));
        self.releases.insert(id, Scheduled { conn: conn.to_string(), key: Some(key), requested_ns: self.now_ns });
    }

    /// The virtual time the request of reply `id` was counted at.
    pub fn requested_ns(&self, id: ReleaseId) -> Option<u64> {
        self.releases.get(&id).map(|scheduled| scheduled.requested_ns)
    }

    /// Takes an event of the model endpoint, named by `token`: applied now, or held until an
    /// unconfirmed advance settles (see [`ServerEvent`]). [`VirtualClock::take_stamped`] gives
    /// the virtual time each was applied at.
    pub fn server(&mut self, token: u64, event: ServerEvent) {
        if matches!(self.phase, Phase::Advancing { .. }) {
            self.deferred.push((token, event));
        } else {
            self.apply(token, event);
        }
    }

    /// The tokens of the endpoint events applied since the last call, with their virtual times.
    pub fn take_stamped(&mut self) -> Vec<(u64, u64)> {
        std::mem::take(&mut self.stamped)
    }

    fn apply(&mut self, token: u64, event: ServerEvent) {
        match event {
            ServerEvent::Opened(conn) => self.conn_opened(&conn),
            ServerEvent::Held(conn) => self.request_seen(&conn),
            ServerEvent::Closed(conn) => {
                self.conn_closed(&conn);
                let name = self.name(&conn);
                self.closes.insert(name);
            }
            ServerEvent::Arrived(ArrivedRequest { conn, id, key }) => {
                self.request_seen(&conn);
                let index = self.conn(&conn).seen - 1;
                self.queue.insert(id, (conn, key, index));
            }
            ServerEvent::Scheduled { arrival, release, due } => {
                if let Some((taken, conn)) = self.taking.take() {
                    assert_eq!(taken, arrival, "the endpoint schedules the request it was handed");
                    let due_ns = match due {
                        Due::At(at) => at,
                        Due::After(latency) => self.now_ns.saturating_add(latency),
                    };
                    self.schedule(&conn, release, due_ns);
                }
            }
            ServerEvent::Taken(arrival) => self.arrival_dropped(arrival),
            ServerEvent::Release { conn, id, due } => {
                self.request_seen(&conn);
                let due_ns = match due {
                    Due::At(at) => at,
                    Due::After(latency) => self.now_ns.saturating_add(latency),
                };
                self.schedule(&conn, id, due_ns);
            }
        }
        self.stamped.push((token, self.now_ns));
    }

    fn apply_deferred(&mut self) {
        for (token, event) in std::mem::take(&mut self.deferred) {
            self.apply(token, event);
        }
    }

    /// A name for a request about to be counted (through [`ServerEvent::Arrived`]).
    pub fn next_arrival_id(&mut self) -> ArrivalId {
        self.arrivals_registered += 1;
        ArrivalId(self.arrivals_registered)
    }

    /// The endpoint gave up a counted request (its handler was cancelled, or it was taken and
    /// needs no reply): it no longer waits for its turn, or no longer holds the clock.
    pub fn arrival_dropped(&mut self, id: ArrivalId) {
        // Still held by an unconfirmed advance: it stays counted, as the runtime sent it.
        for (_, event) in &mut self.deferred {
            if let ServerEvent::Arrived(arrived) = event
                && arrived.id == id
            {
                *event = ServerEvent::Held(arrived.conn.clone());
            }
        }
        self.queue.remove(&id);
        if self.taking.as_ref().is_some_and(|(taken, _)| *taken == id) {
            self.taking = None;
        }
    }

    /// A released reply could not be written (its request was dropped): it does not count on
    /// its connection. A pending one is unscheduled; one still held is never scheduled.
    pub fn release_failed(&mut self, id: ReleaseId) {
        self.deferred.retain(|(_, event)| !matches!(event, ServerEvent::Release { id: held, .. } if *held == id));
        if let Some(scheduled) = self.releases.remove(&id) {
            match scheduled.key {
                Some(key) => {
                    self.pending.remove(&key);
                }
                None => {
                    if let Some(entry) = self.conns.get_mut(&scheduled.conn) {
                        entry.released = entry.released.saturating_sub(1);
                    }
                }
            }
        }
    }

    /// Takes an idle report.
    pub fn idle(&mut self, report: IdleReport) -> Result<(), ProtocolError> {
        if self.phase != Phase::Busy {
            return Err(ProtocolError::IdleWhile { seq: report.seq, phase: self.phase_text() });
        }
        if report.seq != self.last_seq + 1 {
            return Err(ProtocolError::IdleOutOfOrder { seq: report.seq, previous: self.last_seq });
        }
        if report.now_ns != self.now_ns {
            return Err(ProtocolError::IdleNow { seq: report.seq, now_ns: report.now_ns, harness_ns: self.now_ns });
        }
        if let Some(due) = report.next_due_ns
            && due <= self.now_ns
        {
            return Err(ProtocolError::IdleDue { seq: report.seq, due_ns: due, now_ns: self.now_ns });
        }
        for reported in &report.conns {
            let entry = self.conn(&reported.conn);
            // The same address reported open again after it closed on both sides is a new
            // connection on a port used again.
            if reported.open && !entry.open && entry.server_closed {
                *entry = Conn { name: entry.name.take(), ..fresh_counts() };
            }
            if reported.sent < entry.sent || reported.read < entry.read {
                return Err(ProtocolError::CountsDown {
                    seq: report.seq,
                    conn: reported.conn.clone(),
                    sent: reported.sent,
                    sent_before: entry.sent,
                    read: reported.read,
                    read_before: entry.read,
                });
            }
            entry.sent = reported.sent;
            entry.read = reported.read;
            entry.open = reported.open;
            entry.reading = reported.reading;
            entry.order.extend_from_slice(&reported.order);
        }
        self.last_seq = report.seq;
        self.phase = Phase::Idle { seq: report.seq, next_due_ns: report.next_due_ns };
        Ok(())
    }

    /// Takes a busy report: idle `seq` (and an advance answering it) is void.
    pub fn busy(&mut self, seq: u64) -> Result<(), ProtocolError> {
        match self.phase {
            Phase::Idle { seq: idle, .. } if idle == seq => {}
            Phase::Advancing { seq: advancing, to_ns } if advancing == seq => {
                self.note(format!("advance to {} void: the runtime woke by itself", seconds(to_ns)));
            }
            _ => return Err(ProtocolError::BusyWhile { seq, phase: self.phase_text() }),
        }
        self.phase = Phase::Busy;
        self.apply_deferred();
        Ok(())
    }

    /// The request whose turn it is: the runtime's own send order first (`order` in its idle
    /// reports), so that requests of one instant are taken as the runtime sent them; without
    /// it, or under `--explore` (which permutes them), by tie rank and the request's key.
    fn next_arrival(&self) -> Option<ArrivalId> {
        let place = |(id, (conn, key, index)): (&ArrivalId, &(String, u64, u64))| -> ArrivalKey {
            let sent = self.conns.get(conn).and_then(|c| c.order.get(*index as usize)).copied().unwrap_or(u64::MAX);
            match self.tie_seed {
                Some(seed) => (splitmix64(seed ^ key), sent, *key, id.0),
                None => (sent, 0, *key, id.0),
            }
        };
        self.queue.iter().min_by_key(|entry| place(*entry)).map(|(id, _)| *id)
    }

    /// The connections with released replies the runtime has not read (as it last reported),
    /// in release order: what a runtime woken by those replies waits for before it runs, so
    /// that it takes all the replies of one instant in one step, in the same order in every
    /// run (rule 4a), whatever order their bytes reached it in.
    pub fn unread(&self) -> Vec<PendingConn> {
        let mut out: Vec<(u64, PendingConn)> = self
            .conns
            .iter()
            .filter(|(_, c)| c.released > c.read && c.open && !c.server_closed)
            .map(|(conn, c)| (c.last_release, PendingConn { conn: conn.clone(), released: c.released }))
            .collect();
        out.sort_by_key(|(last, _)| *last);
        out.into_iter().map(|(_, p)| p).collect()
    }

    /// Takes the runtime's confirmation of an advance: virtual time moves.
    pub fn at(&mut self, seq: u64, now_ns: u64) -> Result<(), ProtocolError> {
        match self.phase {
            Phase::Advancing { seq: advancing, to_ns } if advancing == seq && to_ns == now_ns => {
                self.now_ns = to_ns;
                self.advances += 1;
                self.phase = Phase::Busy;
                self.note(format!("at #{}", self.advances));
                self.apply_deferred();
                Ok(())
            }
            Phase::Advancing { seq: advancing, to_ns } if advancing == seq => {
                Err(ProtocolError::AtElsewhere { seq, now_ns, to_ns })
            }
            _ => Err(ProtocolError::AtWhile { seq, phase: self.phase_text() }),
        }
    }

    fn phase_text(&self) -> String {
        match self.phase {
            Phase::NoRuntime => "no runtime is connected".to_string(),
            Phase::Busy => "the runtime is running (no idle report since its last advance or busy)".to_string(),
            Phase::Idle { seq, .. } => format!("the runtime is idle (report #{seq})"),
            Phase::Advancing { seq, to_ns } => format!("advance #{seq} to {to_ns} ns is unconfirmed"),
        }
    }

    /// What the clock waits for right now, if it waits (for a stall's verdict). It changes
    /// nothing: `None` means [`VirtualClock::next_step`] would act (or has ended).
    pub fn waiting(&self) -> Option<Waiting> {
        if self.ended.is_some() {
            return None;
        }
        if self.taking.is_some() {
            return Some(Waiting::Server);
        }
        match self.phase {
            // Requests of a runtime that has gone are taken: no more can come at this instant.
            Phase::NoRuntime if !self.queue.is_empty() => return None,
            Phase::NoRuntime => return Some(Waiting::Runtime),
            Phase::Busy => return Some(Waiting::Idle),
            Phase::Advancing { .. } => return Some(Waiting::At),
            Phase::Idle { .. } => {}
        }
        // Rule 3: the report is current only once the endpoint has seen what it counts.
        for (conn, entry) in &self.conns {
            if entry.sent > entry.seen && !entry.server_closed {
                return Some(Waiting::Request { conn: conn.clone(), sent: entry.sent, seen: entry.seen });
            }
            if !entry.open && !entry.server_closed && entry.seen > 0 {
                return Some(Waiting::Close { conn: conn.clone() });
            }
        }
        if !self.queue.is_empty() || self.pending.keys().next().is_some_and(|key| key.0 <= self.now_ns) {
            return None;
        }
        // Rule 4: every release acknowledged.
        for (conn, entry) in &self.conns {
            if entry.released > entry.read && entry.open && entry.reading {
                return Some(Waiting::Read { conn: conn.clone(), released: entry.released, read: entry.read });
            }
        }
        None
    }

    /// Decides the next step (and records it: call it again after carrying a step out).
    pub fn next_step(&mut self) -> Step {
        if let Some(end) = &self.ended {
            return Step::Ended(end.clone());
        }
        if let Some(waiting) = self.waiting() {
            return Step::Wait(waiting);
        }
        // Requests first: their answers due now are released after all of this instant's
        // requests are scheduled, in the order the requests were taken.
        if let Some(id) = self.next_arrival() {
            let (conn, _, _) = self.queue.remove(&id).expect("queued");
            let name = self.name(&conn);
            self.note(format!("request on {name}"));
            self.taking = Some((id, conn));
            return Step::Take(id);
        }
        let Phase::Idle { seq, next_due_ns } = self.phase else {
            unreachable!("waiting() answers for every other phase")
        };
        // Rules 4 and 6: replies due now are written once the runtime is idle at now with its
        // report current: it has run its own timers of this instant and its closes are seen,
        // so which replies are written does not depend on how fast the endpoint saw them.
        let now = self.now_ns;
        let mut due = Vec::new();
        while let Some(entry) = self.pending.first_entry() {
            if entry.key().0 > now {
                break;
            }
            due.push(entry.remove());
        }
        if !due.is_empty() {
            let mut ids = Vec::with_capacity(due.len());
            for (id, conn) in due {
                let entry = self.conn(&conn);
                entry.released += 1;
                entry.last_release = id.0;
                let name = self.name(&conn);
                if let Some(scheduled) = self.releases.get_mut(&id) {
                    scheduled.key = None;
                }
                self.note(format!("release r{} on {name}", id.0));
                ids.push(id);
            }
            return Step::Release(ids);
        }
        let next_release = self.pending.keys().next().map(|key| key.0);
        let to_ns = match (next_due_ns, next_release) {
            (None, None) => {
                self.end(ClockEnd::Stuck { at_ns: self.now_ns });
                return Step::Ended(self.ended.clone().expect("just ended"));
            }
            (Some(due), None) | (None, Some(due)) => due,
            (Some(timer), Some(release)) => timer.min(release),
        };
        if to_ns > self.limits.horizon_ns {
            self.end(ClockEnd::Horizon { at_ns: self.now_ns, wanted_ns: to_ns });
            return Step::Ended(self.ended.clone().expect("just ended"));
        }
        if self.advances >= self.limits.advances_max {
            self.end(ClockEnd::AdvanceLimit { at_ns: self.now_ns });
            return Step::Ended(self.ended.clone().expect("just ended"));
        }
        self.phase = Phase::Advancing { seq, to_ns };
        self.note(format!("advance to {}", seconds(to_ns)));
        Step::Advance { seq, to_ns }
    }
}

fn fresh_counts() -> Conn {
    Conn {
        name: None,
        seen: 0,
        released: 0,
        server_closed: false,
        sent: 0,
        read: 0,
        open: true,
        reading: true,
        last_release: 0,
        order: Vec::new(),
    }
}

/// Virtual nanoseconds as the trace writes times: seconds with milliseconds (`10.000s`), or
/// with nanoseconds when the time is not a whole millisecond (`0.000500000s`).
#[doc(hidden)]
pub fn seconds(ns: u64) -> String {
    let (secs, rest) = (ns / 1_000_000_000, ns % 1_000_000_000);
    if rest % 1_000_000 == 0 { format!("{secs}.{:03}s", rest / 1_000_000) } else { format!("{secs}.{rest:09}s") }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn idle(seq: u64, now_ns: u64, next_due_ns: Option<u64>, conns: Vec<ConnReport>) -> IdleReport {
        IdleReport { seq, now_ns, next_due_ns, conns }
    }

    fn conn(sent: u64, read: u64, open: bool) -> ConnReport {
        ConnReport { conn: "127.0.0.1:5000".to_string(), sent, read, open, reading: open, order: Vec::new() }
    }

    fn connected() -> VirtualClock {
        let mut clock = VirtualClock::new(ClockLimits::default(), None);
        assert_eq!(clock.connect(PROTOCOL, "test").unwrap(), 0);
        clock
    }

    /// The transcript's lines start with the virtual time; a hello is read from its words.
    #[test]
    fn a_transcript_shows_whether_a_runtime_greeted_the_clock() {
        let mut clock = VirtualClock::new(ClockLimits::default(), None);
        assert!(!VirtualClock::greeted(clock.transcript()));
        clock.connect(PROTOCOL, "python-asyncio 3.13.0").unwrap();
        assert!(VirtualClock::greeted(clock.transcript()), "{:?}", clock.transcript());
    }

    #[test]
    fn an_idle_report_counting_a_request_the_endpoint_has_not_seen_waits_for_it() {
        let mut clock = connected();
        clock.idle(idle(1, 0, Some(10 * S), vec![conn(1, 0, true)])).unwrap();
        assert!(matches!(clock.next_step(), Step::Wait(Waiting::Request { sent: 1, seen: 0, .. })));
        clock.request_seen("127.0.0.1:5000");
        let release = clock.schedule_release("127.0.0.1:5000", 30 * S);
        assert_eq!(clock.next_step(), Step::Advance { seq: 1, to_ns: 10 * S });
        assert_eq!(clock.next_step(), Step::Wait(Waiting::At), "nothing is released before `at`");
        clock.at(1, 10 * S).unwrap();
        assert_eq!(clock.now_ns(), 10 * S);
        assert_eq!(clock.next_step(), Step::Wait(Waiting::Idle));
        // The runtime timed out and closed; the endpoint has not noticed yet.
        clock.idle(idle(2, 10 * S, None, vec![conn(1, 0, false)])).unwrap();
        assert!(matches!(clock.next_step(), Step::Wait(Waiting::Close { .. })));
        clock.conn_closed("127.0.0.1:5000");
        assert!(!clock.releases.contains_key(&release), "a closed connection's replies are dropped");
        assert_eq!(clock.next_step(), Step::Ended(ClockEnd::Stuck { at_ns: 10 * S }));
    }

    #[test]
    fn a_reply_due_with_a_timer_is_released_after_the_runtime_is_at_that_instant() {
        let mut clock = connected();
        clock.request_seen("127.0.0.1:5000");
        let id = clock.schedule_release("127.0.0.1:5000", 10 * S);
        clock.idle(idle(1, 0, Some(10 * S), vec![conn(1, 0, true)])).unwrap();
        assert_eq!(clock.next_step(), Step::Advance { seq: 1, to_ns: 10 * S });
        clock.at(1, 10 * S).unwrap();
        assert_eq!(clock.next_step(), Step::Wait(Waiting::Idle), "the runtime runs its 10 s timers first");
        clock.idle(idle(2, 10 * S, Some(20 * S), vec![conn(1, 0, true)])).unwrap();
        assert_eq!(clock.next_step(), Step::Release(vec![id]));
        // An idle report that has not read it yet does not move time.
        assert!(matches!(clock.next_step(), Step::Wait(Waiting::Read { released: 1, read: 0, .. })));
        clock.busy(2).unwrap();
        clock.idle(idle(3, 10 * S, Some(20 * S), vec![conn(1, 1, true)])).unwrap();
        assert_eq!(clock.next_step(), Step::Advance { seq: 3, to_ns: 20 * S });
    }

    #[test]
    fn a_busy_report_crossing_an_advance_voids_it_and_time_stays() {
        let mut clock = connected();
        clock.request_seen("127.0.0.1:5000");
        clock.schedule_release("127.0.0.1:5000", 5 * S);
        clock.idle(idle(1, 0, None, vec![conn(1, 0, true)])).unwrap();
        assert_eq!(clock.next_step(), Step::Advance { seq: 1, to_ns: 5 * S });
        clock.busy(1).unwrap();
        assert_eq!(clock.now_ns(), 0);
        assert_eq!(clock.next_step(), Step::Wait(Waiting::Idle), "the reply due at 5 s stays pending");
        assert!(clock.at(1, 5 * S).is_err(), "a stale advance is not confirmed");
    }

    #[test]
    fn what_the_endpoint_sees_during_an_unconfirmed_advance_happens_at_the_time_it_settles_on() {
        for confirmed in [true, false] {
            let mut clock = connected();
            clock.idle(idle(1, 0, Some(10 * S), vec![])).unwrap();
            assert_eq!(clock.next_step(), Step::Advance { seq: 1, to_ns: 10 * S });
            let id = clock.next_release_id();
            clock.server(1, ServerEvent::Release { conn: "127.0.0.1:5000".to_string(), id, due: Due::After(S) });
            clock.server(2, ServerEvent::Closed("127.0.0.1:6000".to_string()));
            assert_eq!(clock.take_stamped(), [], "held until the advance settles");
            let settled = if confirmed {
                clock.at(1, 10 * S).unwrap();
                10 * S
            } else {
                clock.busy(1).unwrap();
                0
            };
            assert_eq!(clock.take_stamped(), [(1, settled), (2, settled)]);
            assert_eq!(clock.requested_ns(id), Some(settled));
            assert_eq!(clock.pending.keys().next().map(|key| key.0), Some(settled + S));
        }
    }

    #[test]
    fn bad_reports_are_protocol_errors_that_say_what() {
        let mut clock = connected();
        let error = clock.idle(idle(2, 0, None, vec![])).unwrap_err();
        assert!(error.to_string().contains("out of order"), "{error:?}");
        assert!(matches!(error, ProtocolError::IdleOutOfOrder { seq: 2, previous: 0 }), "{error:?}");
        let error = clock.idle(idle(1, 0, Some(0), vec![])).unwrap_err();
        assert!(error.to_string().contains("not after now"), "{error:?}");
        assert!(matches!(error, ProtocolError::IdleDue { seq: 1, due_ns: 0, now_ns: 0 }), "{error:?}");
        let error = clock.idle(idle(1, 7, None, vec![])).unwrap_err();
        assert!(error.to_string().contains("harness's time is 0 ns"), "{error:?}");
        assert!(matches!(error, ProtocolError::IdleNow { seq: 1, now_ns: 7, harness_ns: 0 }), "{error:?}");
        let error = clock.busy(1).unwrap_err();
        assert!(error.to_string().contains("running"));
        assert!(matches!(error, ProtocolError::BusyWhile { seq: 1, .. }), "{error:?}");
    }

    #[test]
    fn replies_due_at_one_instant_go_in_registration_order_or_a_seeded_permutation() {
        let order = |seed| {
            let mut clock = VirtualClock::new(ClockLimits::default(), seed);
            clock.connect(PROTOCOL, "").unwrap();
            let ids: Vec<ReleaseId> = (0..6).map(|n| clock.schedule_release(&format!("127.0.0.1:{n}"), 0)).collect();
            clock.idle(idle(1, 0, None, vec![])).unwrap();
            match clock.next_step() {
                Step::Release(released) => (ids, released),
                other => panic!("{other:?}"),
            }
        };
        let (ids, released) = order(None);
        assert_eq!(ids, released);
        let (_, seeded) = order(Some(7));
        assert_ne!(seeded, ids);
        assert_eq!(order(Some(7)).1, seeded, "the same seed gives the same order");
    }

    #[test]
    fn limits_end_the_clock_with_where_it_stood() {
        let mut clock = VirtualClock::new(ClockLimits { horizon_ns: 5 * S, ..ClockLimits::default() }, None);
        clock.connect(PROTOCOL, "").unwrap();
        clock.idle(idle(1, 0, Some(6 * S), vec![])).unwrap();
        assert_eq!(clock.next_step(), Step::Ended(ClockEnd::Horizon { at_ns: 0, wanted_ns: 6 * S }));
        let mut clock = VirtualClock::new(ClockLimits { advances_max: 1, ..ClockLimits::default() }, None);
        clock.connect(PROTOCOL, "").unwrap();
        clock.idle(idle(1, 0, Some(S), vec![])).unwrap();
        assert_eq!(clock.next_step(), Step::Advance { seq: 1, to_ns: S });
        clock.at(1, S).unwrap();
        clock.idle(idle(2, S, Some(2 * S), vec![])).unwrap();
        assert_eq!(clock.next_step(), Step::Ended(ClockEnd::AdvanceLimit { at_ns: S }));
    }

    #[test]
    fn a_line_that_is_not_a_clock_message_keeps_the_line_and_the_parsers_error() {
        let line = format!("{{\"type\":\"nope\",\"pad\":\"{}\"}}", "x".repeat(200));
        let source = serde_json::from_str::<FromRuntime>(&line).unwrap_err();
        let error = ProtocolError::NotAMessage { line: line.clone(), source: Box::new(source) };
        assert!(std::error::Error::source(&error).is_some());
        let shown = error.to_string();
        assert!(shown.starts_with("not a clock message (missing field `op`"), "{shown}");
        assert!(shown.ends_with("xxx…") && shown.len() < line.len(), "{shown}");
    }

    #[test]
    fn a_second_runtime_is_refused_and_a_later_one_continues_at_the_same_time() {
        let mut clock = connected();
        let refused = clock.connect(PROTOCOL, "").unwrap_err();
        assert!(refused.to_string().contains("one process at a time"));
        assert!(matches!(refused, ProtocolError::AnotherRuntime), "{refused:?}");
        clock.idle(idle(1, 0, Some(3 * S), vec![])).unwrap();
        clock.next_step();
        clock.at(1, 3 * S).unwrap();
        clock.disconnect();
        assert_eq!(clock.next_step(), Step::Wait(Waiting::Runtime));
        assert_eq!(clock.connect(PROTOCOL, "turn 2").unwrap(), 3 * S);
        let refused = clock.connect(2, "").unwrap_err();
        assert!(matches!(refused, ProtocolError::UnknownProtocol { protocol: 2 }), "{refused:?}");
        assert_eq!(refused.to_string(), "protocol 2 is not spoken here; this harness speaks protocol 1");
    }

    #[test]
    fn requests_of_one_instant_are_taken_in_the_runtimes_send_order_whatever_order_they_arrived_in() {
        let take_order = |arrival: [&str; 2]| {
            let mut clock = connected();
            let ids: Vec<(String, ArrivalId)> = arrival
                .iter()
                .map(|conn| {
                    let id = clock.next_arrival_id();
                    clock.server(0, ServerEvent::Arrived(ArrivedRequest { conn: conn.to_string(), id, key: 0 }));
                    (conn.to_string(), id)
                })
                .collect();
            assert_eq!(clock.next_step(), Step::Wait(Waiting::Idle), "nothing is taken while the runtime runs");
            // The runtime wrote on :2 first, then on :1.
            let report = |conn: &str, order: u64| ConnReport {
                conn: conn.to_string(),
                sent: 1,
                read: 0,
                open: true,
                reading: true,
                order: vec![order],
            };
            clock.idle(idle(1, 0, Some(S), vec![report("127.0.0.1:1", 2), report("127.0.0.1:2", 1)])).unwrap();
            let mut taken = Vec::new();
            for _ in 0..2 {
                let Step::Take(id) = clock.next_step() else { panic!("a request's turn") };
                assert_eq!(clock.next_step(), Step::Wait(Waiting::Server), "one at a time");
                taken.push(ids.iter().find(|(_, i)| *i == id).unwrap().0.clone());
                let release = clock.next_release_id();
                clock.server(0, ServerEvent::Scheduled { arrival: id, release, due: Due::After(0) });
            }
            (taken, clock.transcript().to_vec())
        };
        let one = take_order(["127.0.0.1:1", "127.0.0.1:2"]);
        assert_eq!(one.0, ["127.0.0.1:2", "127.0.0.1:1"]);
        assert_eq!(take_order(["127.0.0.1:2", "127.0.0.1:1"]), one, "the same order and transcript either way");
    }

    #[test]
    fn times_print_as_the_trace_does() {
        assert_eq!(seconds(10 * S), "10.000s");
        assert_eq!(seconds(9_999_000_000), "9.999s");
        assert_eq!(seconds(500_000), "0.000500000s");
    }
}

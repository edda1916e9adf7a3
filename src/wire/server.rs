//! The HTTP server: `POST /v1/chat/completions`, the Anthropic `POST /v1/messages` and the
//! OpenAI `POST /v1/responses` (non-streamed and streamed; all read into the same conversation
//! and answered from the same script), `POST /v1/messages/count_tokens`, `GET /v1/models`, on
//! 127.0.0.1. One handler per route; the body-size limit is a layer; every refusal is an error
//! object of the request's API made in one place ([`Refusal::response_in`]) and, when the
//! runtime is to blame, a [`WireFinding`] too. Waits (latency, `hang`) are real time, scaled by
//! [`ServeOptions::time_scale`], and end when the server stops, so no request outlives it.
//!
//! Under the clock ([`ServeOptions::clock`], docs/clock-protocol.md) waits are virtual: the
//! server runs its own accept loop so that the clock sees every connection open and close,
//! and every request waits for its turn ([`Clock::arrive`]) before it is read, attributed or
//! answered, then awaits its [`super::clock::Release`] before its answer is written. Times in
//! the record are the clock's.
//!
//! What this module deliberately does not do: choose replies (that is [`super::script`]),
//! render chunks (that is [`super::stream`]), or judge (that is [`super::judge`]).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use super::api::{self, ChatRequest, Converted, ErrorBody, ErrorObject, anthropic, responses};
use super::barrier::Barrier;
use super::clock::{Clock, Turn, request_key};
use super::script::{Bridge, Plan};
use super::stream::{self, Head};
use super::{AgentHeader, Disconnect, End, FindingKind, WireFinding, WireRun};
use crate::dialect::Dialect;
use crate::scenario::Scenario;
use crate::sut::llm::LlmReply;
use crate::wire::script::AnswerKind;

/// How a scenario is served. Every limit is named here with its default.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// The port on 127.0.0.1; 0 (the default) takes a free one.
    pub port: u16,
    /// Real seconds per scripted second: a scripted latency of 200 ms waits
    /// `200 ms × time_scale` of wall time. Default 1; 0 answers at once.
    pub time_scale: f64,
    /// The run ends when no request arrived and none was answered for this long (wall time),
    /// counted from the first request. Default 30 s.
    pub idle_limit: Duration,
    /// Before the first request, how long the runtime may take to start and ask (a Python
    /// SDK's imports take seconds). Default 120 s.
    pub startup_limit: Duration,
    /// The largest request body accepted, in bytes; a larger one is refused (413) and
    /// reported. Default 8 MiB.
    pub body_limit_bytes: usize,
    /// Texts that mark side requests (a title or summary call): a request whose last message
    /// contains one is answered with an empty text and put down to no agent. Default none.
    pub side: Vec<String>,
    /// The `created` field of every answer, in seconds since the Unix epoch; `None` (the
    /// default): the wall clock when the server starts (under the clock: its epoch).
    pub created_s: Option<u64>,
    /// Serve on this virtual clock instead of real time (`--clock`): latencies are virtual and
    /// `time_scale` is not used. Default `None`.
    pub clock: Option<Clock>,
    /// Hold every scripted reply until no request has arrived for this long, then release
    /// them one at a time in alias order (`--barrier`, [`Release`](crate::wire::Release)). Not with `clock`.
    /// Default `None`.
    pub barrier: Option<Duration>,
    /// The header in which the runtime names the agent sending each request: recorded as the
    /// ground truth ([`WireRun::labels`]), never read to attribute. Default `X-Rehearsal-Agent`.
    pub agent_header: AgentHeader,
    /// How many Responses API answers are kept for a later `previous_response_id` (those
    /// asked with `store: false` are not); beyond it the oldest is dropped, and a request
    /// naming it is answered `previous_response_not_found`. Default 1024.
    pub responses_kept_max: usize,
}

impl Default for ServeOptions {
    fn default() -> ServeOptions {
        ServeOptions {
            port: 0,
            time_scale: 1.0,
            idle_limit: Duration::from_secs(30),
            startup_limit: Duration::from_secs(120),
            body_limit_bytes: 8 << 20,
            side: Vec::new(),
            created_s: None,
            clock: None,
            barrier: None,
            agent_header: AgentHeader::default(),
            responses_kept_max: 1024,
        }
    }
}

/// A server (or a recording proxy) that could not start: which option, address or file, and
/// why.
#[derive(Debug)]
pub enum ServeError {
    /// Both `--barrier` and `--clock` were given.
    BarrierAndClock,
    /// `--time-scale` is not a number from 0 to 1000.
    TimeScale {
        /// The value given.
        time_scale: f64,
    },
    /// The port could not be bound on 127.0.0.1.
    Listen {
        /// The port asked for (0: any).
        port: u16,
        /// Why.
        source: std::io::Error,
    },
    /// The bound socket has no local address.
    LocalAddress {
        /// Why.
        source: std::io::Error,
    },
    /// The clock endpoint could not be bound.
    ClockEndpoint {
        /// Why.
        source: std::io::Error,
    },
    /// The `--ready-file` could not be written.
    ReadyFile {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// `--upstream` is an https:// URL.
    UpstreamHttps {
        /// The URL (its scheme lowercased).
        url: String,
    },
    /// `--upstream` is not an http:// URL.
    UpstreamNotHttp {
        /// The URL (its scheme lowercased).
        url: String,
    },
    /// `--upstream` holds a character that is not a URL character.
    UpstreamCharacter {
        /// The URL (its scheme lowercased).
        url: String,
        /// The first such character.
        character: char,
    },
    /// `--upstream` names no host.
    UpstreamNoHost {
        /// The URL (its scheme lowercased).
        url: String,
    },
    /// `--upstream` holds credentials (`user:pw@`).
    UpstreamCredentials {
        /// The URL (its scheme lowercased).
        url: String,
    },
    /// `--upstream` has a query or a fragment.
    UpstreamQuery {
        /// The URL (its scheme lowercased).
        url: String,
    },
    /// `--upstream` has something other than `:port` after a bracketed address.
    UpstreamAfterBracket {
        /// The URL (its scheme lowercased).
        url: String,
    },
    /// `--upstream` opens a `[` in the host and never closes it.
    UpstreamUnclosedBracket {
        /// The URL (its scheme lowercased).
        url: String,
    },
    /// `--upstream`'s host is not a host name or address.
    UpstreamHost {
        /// The URL (its scheme lowercased).
        url: String,
        /// The host as read.
        host: String,
    },
    /// `--upstream`'s port is not a port from 1 to 65535.
    UpstreamPort {
        /// The URL (its scheme lowercased).
        url: String,
        /// The port as read.
        port: String,
    },
}

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServeError::BarrierAndClock => {
                f.write_str("--barrier guesses when the runtime is quiet, --clock knows: give one of them")
            }
            ServeError::TimeScale { time_scale } => {
                write!(f, "--time-scale {time_scale} is not a number from 0 to 1000")
            }
            ServeError::Listen { port, source } => write!(f, "cannot listen on 127.0.0.1:{port}: {source}"),
            ServeError::LocalAddress { source } => write!(f, "no local address: {source}"),
            ServeError::ClockEndpoint { source } => write!(f, "cannot bind the clock endpoint: {source}"),
            ServeError::ReadyFile { path, source } => {
                let shown = crate::trace::printable(&path.to_string_lossy()).into_owned();
                write!(f, "--ready-file {shown}: cannot write it: {source}")
            }
            ServeError::UpstreamHttps { url } => write!(
                f,
                "--upstream {url}: https is not supported (no TLS stack is linked); run a local TLS-terminating proxy and give its http:// address"
            ),
            ServeError::UpstreamNotHttp { url } => {
                write!(f, "--upstream {url}: expected an http:// URL such as http://127.0.0.1:8080/v1")
            }
            // The rest show the URL escaped: it may hold what a terminal should not be sent.
            ServeError::UpstreamCharacter { url, character } => write!(
                f,
                "--upstream {}: {} is not a URL character (percent-encode it)",
                url.escape_debug(),
                if *character == ' ' { "a space".to_string() } else { format!("{character:?}") }
            ),
            ServeError::UpstreamNoHost { url } => write!(f, "--upstream {}: no host", url.escape_debug()),
            ServeError::UpstreamCredentials { url } => write!(
                f,
                "--upstream {}: credentials in the URL are not sent (give the key with --upstream-key-env)",
                url.escape_debug()
            ),
            ServeError::UpstreamQuery { url } => {
                write!(f, "--upstream {}: a base URL has no query or fragment", url.escape_debug())
            }
            ServeError::UpstreamAfterBracket { url } => {
                write!(f, "--upstream {}: expected a port after the bracketed address", url.escape_debug())
            }
            ServeError::UpstreamUnclosedBracket { url } => {
                write!(f, "--upstream {}: an unclosed `[` in the host", url.escape_debug())
            }
            ServeError::UpstreamHost { url, host } => {
                write!(f, "--upstream {}: `{host}` is not a host name or address", url.escape_debug())
            }
            ServeError::UpstreamPort { url, port } => {
                write!(f, "--upstream {}: `{port}` is not a port (1 to 65535)", url.escape_debug())
            }
        }
    }
}

impl std::error::Error for ServeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ServeError::Listen { source, .. }
            | ServeError::LocalAddress { source }
            | ServeError::ClockEndpoint { source }
            | ServeError::ReadyFile { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// What the handlers share.
struct Shared {
    bridge: Mutex<Bridge>,
    options: ServeOptions,
    started: Instant,
    created: u64,
    models: Vec<String>,
    /// HTTP requests received (any route), for numbering them in messages.
    received: AtomicUsize,
    /// Chat requests being answered (their latency or hang not over).
    open: AtomicUsize,
    /// Chat requests whose scripted reply is waiting out its latency: the server's own delay,
    /// during which the runtime is not idle, so the idle limit does not run.
    waiting: AtomicUsize,
    last_activity: Mutex<Instant>,
    findings: Mutex<Vec<WireFinding>>,
    disconnects: Mutex<Vec<Disconnect>>,
    /// Under the clock: each connection's close, at its virtual time (peer, nanoseconds).
    closes: Mutex<Vec<(String, u64)>>,
    /// What the exchanges answered without a reply were given (`error 429 rate_limit_error`,
    /// `a hang`, ...), for the trace.
    unreplied: Mutex<std::collections::BTreeMap<usize, String>>,
    /// Something that `done` watches changed.
    changed: Notify,
    stopping: AtomicBool,
    /// Set by [`Server::script_over`]: every later chat request is refused as asked after the
    /// script ended (side requests are still answered).
    script_over: AtomicBool,
    stop_tx: watch::Sender<bool>,
    /// Under `--barrier`: where replies wait for quiet.
    barrier: Option<Arc<Barrier>>,
    /// The Responses API answers kept for `previous_response_id`.
    chains: Mutex<responses::Chains>,
}

impl Shared {
    fn touch(&self) {
        *self.last_activity.lock().expect("activity lock poisoned") = Instant::now();
        self.changed.notify_waiters();
    }

    fn find(&self, request: usize, kind: FindingKind, message: String) {
        self.findings.lock().expect("findings lock poisoned").push(WireFinding::new(request, kind, &message));
    }

    /// Waits `scripted` (scaled); false when the server stopped first.
    async fn wait(&self, scripted: Duration) -> bool {
        let real = scripted.mul_f64(self.options.time_scale);
        // tokio's timer has millisecond ticks: even a zero sleep waits for the next one, which
        // was most of a request's cost at `--time-scale 0`.
        if real.is_zero() {
            return !self.stopping.load(Ordering::SeqCst);
        }
        let mut stop = self.stop_tx.subscribe();
        tokio::select! {
            _ = tokio::time::sleep(real) => true,
            _ = stop.wait_for(|s| *s) => false,
        }
    }

    fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// The time of an event of `turn`'s request: virtual under the clock, else wall time.
    fn time(&self, turn: Option<&Turn>) -> Duration {
        match turn {
            Some(turn) => Duration::from_nanos(turn.arrived_ns()),
            None => self.elapsed(),
        }
    }
}

impl Shared {
    /// Under the clock: each disconnect gets the virtual time of its connection's close, and
    /// the list goes in request order (handlers are dropped in real-time order).
    fn date_disconnects(&self) {
        let closes = self.closes.lock().expect("closes lock poisoned");
        let mut disconnects = self.disconnects.lock().expect("disconnects lock poisoned");
        for d in disconnects.iter_mut() {
            let (Some(peer), Some(since)) = (&d.peer, d.since) else { continue };
            let since_ns = since.as_nanos() as u64;
            // The first close of that address after the request arrived (ports may be reused).
            if let Some((_, at_ns)) = closes.iter().find(|(p, at)| p == peer && *at >= since_ns) {
                d.gave_up = Some(Duration::from_nanos(*at_ns));
                d.held_ms = (at_ns - since_ns) / 1_000_000;
            }
        }
        disconnects.sort_by_key(|d| d.request);
    }
}

/// The accept loop. Each connection's first request head is read and checked first
/// ([`super::head`]): a head hyper would refuse with a bare status gets the API's error
/// object and a finding. Under the clock, the clock sees each connection open and close (the
/// close is the runtime's give-up, stamped at its virtual time), and each request carries its
/// peer. Off the clock, a stop closes idle connections at once and lets open requests finish.
async fn serve_conns(listener: tokio::net::TcpListener, app: Router, clock: Option<Clock>, shared: Arc<Shared>) {
    use tower_service::Service as _;
    let mut stop = shared.stop_tx.subscribe();
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            _ = stop.wait_for(|s| *s) => break,
            accepted = listener.accept() => accepted,
        };
        let Ok((stream, peer)) = accepted else { break };
        let peer = peer.to_string();
        if let Some(clock) = &clock {
            clock.conn_opened(&peer);
        }
        let (app, clock, shared) = (app.clone(), clock.clone(), shared.clone());
        conns.spawn(async move {
            let _ = stream.set_nodelay(true);
            let tagged = peer.clone();
            let service = hyper::service::service_fn(move |mut request: axum::http::Request<hyper::body::Incoming>| {
                request.extensions_mut().insert(Peer(tagged.clone()));
                let mut app = app.clone();
                async move { app.call(request).await }
            });
            match super::head::first_head(stream).await {
                super::head::FirstHead::Ok(io) => serve_conn(io, service, clock.is_none(), &shared).await,
                super::head::FirstHead::Bad(stream, bad) => refuse_head(stream, bad, &shared).await,
                super::head::FirstHead::Closed => {}
            }
            if let Some(clock) = clock {
                let at_ns = match clock.conn_closed(&peer).await {
                    Ok(at_ns) => at_ns,
                    // The clock has ended: its last time is the best there is.
                    Err(_) => clock.now_ns(),
                };
                shared.closes.lock().expect("closes lock poisoned").push((peer, at_ns));
            }
        });
    }
    // The runtime's connections close as it exits: their closes are waited for a moment, so
    // that each disconnect has its time; then whatever is left is cut.
    let _ = tokio::time::timeout(Duration::from_secs(2), async { while conns.join_next().await.is_some() {} }).await;
}

/// Serves one connection with hyper. `graceful`: a stop closes it once its open requests are
/// answered. A later request head hyper cannot parse ends the connection with hyper's bare
/// status; it is still a finding.
async fn serve_conn<S>(io: super::head::Prefixed, service: S, graceful: bool, shared: &Shared)
where
    S: hyper::service::Service<axum::http::Request<hyper::body::Incoming>, Response = Response> + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let conn = hyper::server::conn::http1::Builder::new().serve_connection(hyper_util::rt::TokioIo::new(io), service);
    tokio::pin!(conn);
    let served = if graceful {
        let mut stop = shared.stop_tx.subscribe();
        let stopped = tokio::select! {
            served = conn.as_mut() => Err(served),
            _ = stop.wait_for(|s| *s) => Ok(()),
        };
        match stopped {
            Err(served) => served,
            Ok(()) => {
                conn.as_mut().graceful_shutdown();
                conn.await
            }
        }
    } else {
        conn.await
    };
    if let Err(e) = served
        && (e.is_parse() || e.is_parse_too_large())
    {
        let n = shared.received.fetch_add(1, Ordering::SeqCst) + 1;
        let kind = if e.is_parse_too_large() { FindingKind::Oversized } else { FindingKind::Malformed };
        shared.find(
            n,
            kind,
            format!("request #{n}: a request head on a kept-alive connection could not be parsed: {e}"),
        );
        shared.touch();
    }
}

/// Answers a first request head that hyper would refuse bare: the API's error object, and a
/// finding naming the request.
async fn refuse_head(stream: tokio::net::TcpStream, bad: super::head::BadHead, shared: &Shared) {
    let n = shared.received.fetch_add(1, Ordering::SeqCst) + 1;
    let (kind, code, reason) = match bad.status() {
        431 => (FindingKind::Oversized, "request_too_large", "Request Header Fields Too Large"),
        _ => (FindingKind::Malformed, "malformed_request", "Bad Request"),
    };
    let message = format!("rehearsal: request #{n}: {}", bad.why());
    shared.find(n, kind, format!("request #{n}: {}", bad.why()));
    shared.touch();
    let body = ErrorBody {
        error: ErrorObject {
            message,
            kind: api::error_type_of(bad.status()).to_string(),
            param: None,
            code: Some(code.to_string()),
        },
    };
    let text = serde_json::to_string(&body).expect("API objects serialize");
    super::head::refuse(stream, bad.status(), reason, &text).await;
}

/// The peer address of the connection a request came on (under the clock).
#[derive(Clone, Debug)]
struct Peer(String);

/// Under the clock: counts the request and waits for its turn. `Ok(None)` off the clock;
/// `Err` when the clock has stopped (write nothing that matters: the run is ending).
async fn turn_of(shared: &Shared, peer: Option<&Peer>, bytes: &[u8]) -> Result<Option<Turn>, ()> {
    match (&shared.options.clock, peer) {
        (Some(clock), Some(Peer(peer))) => clock.arrive(peer, request_key(bytes)).await.map(Some).map_err(|_| ()),
        _ => Ok(None),
    }
}

/// An answer given at once: under the clock it is released (and acknowledged) like a reply.
async fn at_once(turn: Option<Turn>, response: Response, n: usize) -> Response {
    match turn {
        Some(turn) => match turn.release_after(0).await {
            Ok(_) => response,
            Err(_) => Refusal::Stopping.response(n),
        },
        None => response,
    }
}

/// A served scenario. Start it, hand [`Server::base_url`] to the runtime, await
/// [`Server::done`], then [`Server::finish`] for the record to judge.
pub struct Server {
    addr: SocketAddr,
    shared: Arc<Shared>,
    serving: tokio::task::JoinHandle<()>,
}

impl Server {
    /// Binds 127.0.0.1 (port [`ServeOptions::port`]) and serves `scenario`, attributing
    /// requests as `dialect` spells spawn calls. Must be called inside a tokio runtime with
    /// I/O and time enabled.
    pub async fn start(scenario: &Scenario, dialect: Dialect, options: ServeOptions) -> Result<Server, ServeError> {
        if options.barrier.is_some() && options.clock.is_some() {
            return Err(ServeError::BarrierAndClock);
        }
        // At most a thousand real seconds per scripted second: a scripted latency of an hour
        // (the horizon) then waits at most about six weeks, which a clock can still count.
        if !(options.time_scale.is_finite() && (0.0..=1000.0).contains(&options.time_scale)) {
            return Err(ServeError::TimeScale { time_scale: options.time_scale });
        }
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", options.port))
            .await
            .map_err(|source| ServeError::Listen { port: options.port, source })?;
        let addr = listener.local_addr().map_err(|source| ServeError::LocalAddress { source })?;
        let created = options.created_s.unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
        });
        let virtual_times = options.clock.is_some();
        let mut models = vec!["rehearsal".to_string()];
        models.extend(scenario.session.model.iter().cloned());
        models.extend(scenario.profiles.iter().filter_map(|p| p.model.clone()));
        models.sort();
        models.dedup();
        let (stop_tx, _) = watch::channel(false);
        let mut bridge = Bridge::new(scenario, Arc::new(dialect), options.side.clone());
        bridge.virtual_times = virtual_times;
        let shared = Arc::new(Shared {
            bridge: Mutex::new(bridge),
            started: Instant::now(),
            last_activity: Mutex::new(Instant::now()),
            created,
            models,
            received: AtomicUsize::new(0),
            open: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            findings: Mutex::default(),
            disconnects: Mutex::default(),
            closes: Mutex::default(),
            unreplied: Mutex::default(),
            changed: Notify::new(),
            stopping: AtomicBool::new(false),
            script_over: AtomicBool::new(false),
            barrier: options.barrier.map(|quiet| Arc::new(Barrier::new(quiet))),
            chains: Mutex::new(responses::Chains::new(options.responses_kept_max)),
            stop_tx,
            options,
        });
        if let Some(barrier) = shared.barrier.clone() {
            let stop = shared.stop_tx.subscribe();
            tokio::spawn(async move { barrier.run(stop).await });
        }
        let app = Router::new()
            .route("/v1/chat/completions", post(chat).fallback(not_served))
            .route("/v1/messages", post(messages).fallback(not_served))
            .route("/v1/messages/count_tokens", post(count_tokens).fallback(not_served))
            .route("/v1/responses", post(responses_route).fallback(not_served))
            .route("/v1/models", get(models_route).fallback(not_served))
            .fallback(not_served)
            .layer(DefaultBodyLimit::max(shared.options.body_limit_bytes))
            .with_state(shared.clone());
        let serving = tokio::spawn(serve_conns(listener, app, shared.options.clock.clone(), shared.clone()));
        Ok(Server { addr, shared, serving })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL a runtime's OpenAI client takes: `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Resolves when the run is over: the script has nothing left that must be used and no
    /// request is open, or the script stopped the run (an authoring error), or no request
    /// arrived or was answered for [`ServeOptions::idle_limit`].
    pub async fn done(&self) -> End {
        loop {
            let changed = self.shared.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let (used_up, halted) = {
                let bridge = self.shared.bridge.lock().expect("bridge lock poisoned");
                (bridge.used_up(), !bridge.halts().is_empty())
            };
            if halted {
                return End::Stopped;
            }
            if used_up && self.shared.open.load(Ordering::SeqCst) == 0 {
                return End::Script;
            }
            // Before the first request the start-up limit runs, from the start; after it the
            // idle limit, from the last activity.
            let deadline = || {
                if self.shared.received.load(Ordering::SeqCst) == 0 {
                    super::after(self.shared.started, self.shared.options.startup_limit)
                } else {
                    super::after(
                        *self.shared.last_activity.lock().expect("activity lock poisoned"),
                        self.shared.options.idle_limit,
                    )
                }
            };
            // While a scripted reply waits out its latency the runtime is waiting on the
            // server, not idle: the limit runs again from the reply.
            let delaying = self.shared.waiting.load(Ordering::SeqCst) > 0;
            tokio::select! {
                _ = changed => {}
                _ = tokio::time::sleep_until(deadline()), if !delaying => {
                    if deadline() <= Instant::now() && self.shared.waiting.load(Ordering::SeqCst) == 0 {
                        return End::Idle;
                    }
                }
            }
        }
    }

    /// A new user turn begins: requests from now on are the next turn's (`drive` calls it
    /// before each turn's command but the first; the previous command has ended).
    pub fn turn_begins(&self) {
        self.shared.bridge.lock().expect("bridge lock poisoned").turn_begins();
    }

    /// Marks the script as over (after [`Server::done`] gave [`End::Script`]): from now on a
    /// chat request is answered with a 400 API error object (`script_ended`) and recorded as
    /// a finding, so that a runtime asking after the script is told so and the verdict names
    /// it, while the server keeps listening (`rehearsal serve --after-script`). Side requests
    /// are still answered.
    pub fn script_over(&self) {
        self.shared.script_over.store(true, Ordering::SeqCst);
    }

    /// Stops serving (held requests are let go, connections closed) and hands back the
    /// record of the run, ended as `end` says.
    pub async fn finish(self, end: End) -> WireRun {
        self.shared.stopping.store(true, Ordering::SeqCst);
        let _ = self.shared.stop_tx.send(true);
        // Graceful shutdown waits for open connections; a client that keeps an idle one open
        // is not waited for long.
        let mut serving = self.serving;
        if tokio::time::timeout(Duration::from_secs(3), &mut serving).await.is_err() {
            serving.abort();
        }
        if self.shared.options.clock.is_some() {
            self.shared.date_disconnects();
        }
        let bridge = self.shared.bridge.lock().expect("bridge lock poisoned");
        let (lane_use, reply_use) = bridge.lane_use();
        WireRun {
            side: bridge.record(),
            exchanges: bridge.exchanges(),
            findings: self.shared.findings.lock().expect("findings lock poisoned").clone(),
            disconnects: self.shared.disconnects.lock().expect("disconnects lock poisoned").clone(),
            halts: bridge.halts(),
            failed_checks: bridge.failed_checks(),
            lane_use,
            reply_use,
            end,
            elapsed: self.shared.elapsed(),
            requests: self.shared.received.load(Ordering::SeqCst),
            barrier: self.shared.barrier.as_ref().map(|b| b.releases()).unwrap_or_default(),
            unreplied: self.shared.unreplied.lock().expect("unreplied lock poisoned").clone(),
            labels: bridge.labels(),
            agent_header: self.shared.options.agent_header.clone(),
        }
    }
}

/// Why a request was not answered as the script says: one place that maps each to its
/// status and API error object.
enum Refusal {
    /// The body is not a chat completion request.
    Malformed(String),
    /// The body is larger than the limit.
    Oversized(usize),
    /// No agent accounts for the request.
    Unattributed(String),
    /// No route serves it (its path quoted bounded).
    NotServed(Method, String),
    /// The script stopped the run.
    Halted(String),
    /// The request came after the script ended.
    AfterScript(String),
    /// A Responses request's `previous_response_id` names no response kept (the id, quoted
    /// bounded, and how many are kept).
    PreviousNotFound(String, usize),
    /// The server is stopping.
    Stopping,
    /// A scripted `error` reply.
    Scripted { message: String, status: Option<u16>, kind: Option<String> },
}

impl Refusal {
    /// The Chat Completions error object (the routes that are no API's own answer in it).
    fn response(self, request: usize) -> Response {
        self.response_in(Api::Chat, request)
    }

    /// The error object of `api`, with its status.
    fn response_in(self, api: Api, request: usize) -> Response {
        let param = matches!(self, Refusal::PreviousNotFound(..)).then(|| "previous_response_id".to_string());
        let (status, kind, code, message) = match self {
            Refusal::Malformed(why) => (
                400,
                None,
                Some("malformed_request"),
                format!(
                    "rehearsal: request #{request} is malformed: {}",
                    super::excerpt_to(&why, super::FINDING_CHARS_MAX)
                ),
            ),
            Refusal::Oversized(limit) => (
                413,
                None,
                Some("request_too_large"),
                format!("rehearsal: request #{request} is larger than the body limit of {limit} bytes"),
            ),
            Refusal::Unattributed(why) => (
                400,
                None,
                Some("unattributed_request"),
                format!("rehearsal: request #{request} is put down to no agent of the scenario: {why}"),
            ),
            Refusal::NotServed(method, uri) => (
                404,
                None,
                Some("not_served"),
                format!(
                    "rehearsal: request #{request}: {method} {uri} is not served (POST /v1/chat/completions, POST /v1/messages, POST /v1/responses and GET /v1/models are)"
                ),
            ),
            Refusal::PreviousNotFound(id, kept) => (
                400,
                None,
                Some("previous_response_not_found"),
                format!(
                    "rehearsal: request #{request}: Previous response with id '{id}' not found (this server keeps the last {kept} responses it gave with `store` not false)"
                ),
            ),
            Refusal::Halted(why) => {
                (500, None, Some("script_stopped"), format!("rehearsal: request #{request}: the script stopped: {why}"))
            }
            Refusal::AfterScript(why) => {
                (400, None, Some("script_ended"), format!("rehearsal: request #{request}: {why}"))
            }
            Refusal::Stopping => {
                (503, None, Some("server_stopping"), format!("rehearsal: request #{request}: the run is over"))
            }
            Refusal::Scripted { message, status, kind } => (status.unwrap_or(500), kind, None, message),
        };
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        match api {
            // OpenAI answers both of its APIs with the same error object.
            Api::Chat | Api::Responses => {
                let kind = kind.unwrap_or_else(|| api::error_type_of(status.as_u16()).to_string());
                let body = ErrorBody { error: ErrorObject { message, kind, param, code: code.map(String::from) } };
                json_response(status, &body)
            }
            // Anthropic's error object has no code: rehearsal's own is in the message.
            Api::Messages => {
                let kind = kind.unwrap_or_else(|| anthropic::error_type_of(status.as_u16()).to_string());
                let message = match code {
                    Some(code) => format!("{message} ({code})"),
                    None => message,
                };
                let body = anthropic::ErrorBody { kind: "error", error: anthropic::ErrorObject { kind, message } };
                json_response(status, &body)
            }
        }
    }
}

fn json_response<T: serde::Serialize>(status: StatusCode, body: &T) -> Response {
    let text = serde_json::to_string(body).expect("API objects serialize");
    (status, [(header::CONTENT_TYPE, "application/json")], text).into_response()
}

async fn not_served(
    State(shared): State<Arc<Shared>>,
    peer: Option<axum::Extension<Peer>>,
    method: Method,
    uri: Uri,
) -> Response {
    let Ok(turn) = turn_of(&shared, peer.as_deref(), uri.to_string().as_bytes()).await else {
        return Refusal::Stopping.response(0);
    };
    let n = shared.received.fetch_add(1, Ordering::SeqCst) + 1;
    // The path is the request's own text: quoted bounded, here and in the answer.
    let uri = super::excerpt(&uri.to_string());
    shared.find(n, FindingKind::NotServed, format!("request #{n}: {method} {uri} is not served"));
    shared.touch();
    at_once(turn, Refusal::NotServed(method, uri).response(n), n).await
}

async fn models_route(State(shared): State<Arc<Shared>>, peer: Option<axum::Extension<Peer>>) -> Response {
    let Ok(turn) = turn_of(&shared, peer.as_deref(), b"GET /v1/models").await else {
        return Refusal::Stopping.response(0);
    };
    let n = shared.received.fetch_add(1, Ordering::SeqCst) + 1;
    let data = shared
        .models
        .iter()
        .map(|id| api::Model { id: id.clone(), object: "model", created: shared.created, owned_by: "rehearsal" })
        .collect();
    at_once(turn, json_response(StatusCode::OK, &api::ModelList { object: "list", data }), n).await
}

/// A request being answered: counted open until dropped. Dropped before the answer was
/// given, it was let go by the client (a disconnect) or by the server stopping.
struct Held {
    shared: Arc<Shared>,
    request: usize,
    exchange: usize,
    alias: String,
    since: Instant,
    /// Under the clock: the connection's peer and the virtual arrival.
    clocked: Option<(String, Duration)>,
    hang: bool,
    answered: bool,
}

impl Drop for Held {
    fn drop(&mut self) {
        if !self.answered {
            self.shared.bridge.lock().unwrap_or_else(|p| p.into_inner()).failed(self.exchange);
            if !self.shared.stopping.load(Ordering::SeqCst) {
                let held_ms = self.since.elapsed().as_millis() as u64;
                self.shared.disconnects.lock().unwrap_or_else(|p| p.into_inner()).push(Disconnect {
                    request: self.request,
                    exchange: self.exchange,
                    alias: self.alias.clone(),
                    held_ms,
                    hang: self.hang,
                    peer: self.clocked.as_ref().map(|(peer, _)| peer.clone()),
                    since: self.clocked.as_ref().map(|(_, since)| *since),
                    gave_up: None,
                });
            }
        }
        self.shared.open.fetch_sub(1, Ordering::SeqCst);
        self.shared.touch();
    }
}

/// An agent header's value as a label: whole (two names alike in their first characters
/// stay two), as UTF-8, or else as Latin-1, the encoding HTTP clients such as Python's
/// `http.client` give a header's value; decoded lossily, two names differing only in non-UTF-8
/// bytes would be one.
fn label_text(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.to_string(),
        Err(_) => bytes.iter().map(|&b| char::from(b)).collect(),
    }
}

/// The API a request came in: it is read and answered in that API's spelling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Api {
    /// OpenAI Chat Completions.
    Chat,
    /// Anthropic Messages.
    Messages,
    /// OpenAI Responses.
    Responses,
}

/// A request of any API, as sent.
enum Incoming {
    Chat(ChatRequest),
    Messages(anthropic::MessagesRequest),
    Responses(responses::ResponsesRequest),
}

impl Incoming {
    /// The body read as `api`'s request, or why it is not one.
    fn parse(api: Api, body: &[u8]) -> Result<Incoming, String> {
        match api {
            Api::Chat => serde_json::from_slice(body)
                .map(Incoming::Chat)
                .map_err(|e| format!("the body is not a chat completion request: {e}")),
            Api::Messages => serde_json::from_slice(body)
                .map(Incoming::Messages)
                .map_err(|e| format!("the body is not a messages request: {e}")),
            Api::Responses => serde_json::from_slice(body)
                .map(Incoming::Responses)
                .map_err(|e| format!("the body is not a responses request: {e}")),
        }
    }

    /// The request as the conversation, `earlier` (a Responses request's chain) first.
    fn convert(&self, earlier: &[Arc<responses::Item>]) -> Result<Converted, String> {
        match self {
            Incoming::Chat(request) => request.convert(),
            Incoming::Messages(request) => request.convert(),
            Incoming::Responses(request) => request.convert(earlier),
        }
    }

    fn model(&self) -> Option<&str> {
        match self {
            Incoming::Chat(request) => request.model.as_deref(),
            Incoming::Messages(request) => request.model.as_deref(),
            Incoming::Responses(request) => request.model.as_deref(),
        }
    }

    /// The items of the response a Responses request's `previous_response_id` names (none
    /// for other requests), or the id (quoted bounded) when it names none kept.
    fn earlier(&self, shared: &Shared) -> Result<Arc<Vec<Arc<responses::Item>>>, String> {
        let Incoming::Responses(request) = self else { return Ok(Arc::default()) };
        let Some(id) = &request.previous_response_id else { return Ok(Arc::default()) };
        shared.chains.lock().expect("chains lock poisoned").get(id).ok_or_else(|| super::excerpt(id))
    }

    /// Keeps a Responses answer for a later `previous_response_id`, unless asked with
    /// `store: false`.
    fn keep(&self, shared: &Shared, earlier: &[Arc<responses::Item>], exchange: usize, reply: &LlmReply) {
        if let Incoming::Responses(request) = self
            && request.stores()
        {
            let id = format!("resp_{exchange}");
            shared.chains.lock().expect("chains lock poisoned").keep(&id, earlier, request.items(), reply, exchange);
        }
    }
}

/// The characters of a converted request that its usage estimate counts: the system text and
/// every message's text.
fn prompt_chars(converted: &Converted) -> usize {
    converted.system.chars().count() + converted.messages.iter().map(|m| m.content.chars().count()).sum::<usize>()
}

async fn chat(
    state: State<Arc<Shared>>,
    peer: Option<axum::Extension<Peer>>,
    headers: axum::http::HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    answer(Api::Chat, state, peer, headers, body).await
}

/// `POST /v1/messages` (a `?beta=true` query, `x-api-key`, `anthropic-version` and
/// `anthropic-beta` are accepted and not read).
async fn messages(
    state: State<Arc<Shared>>,
    peer: Option<axum::Extension<Peer>>,
    headers: axum::http::HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    answer(Api::Messages, state, peer, headers, body).await
}

/// `POST /v1/responses`.
async fn responses_route(
    state: State<Arc<Shared>>,
    peer: Option<axum::Extension<Peer>>,
    headers: axum::http::HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    answer(Api::Responses, state, peer, headers, body).await
}

/// `POST /v1/messages/count_tokens`: `{"input_tokens": N}`, N the usage estimate of the
/// request's system text and messages (a quarter of their characters, rounded up), as the
/// reply's `usage.input_tokens` would be. Not an exchange: nothing is attributed or scripted.
async fn count_tokens(
    State(shared): State<Arc<Shared>>,
    peer: Option<axum::Extension<Peer>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let Ok(turn) = turn_of(&shared, peer.as_deref(), body.as_deref().unwrap_or_default()).await else {
        return Refusal::Stopping.response_in(Api::Messages, 0);
    };
    let n = shared.received.fetch_add(1, Ordering::SeqCst) + 1;
    let counted = body
        .map_err(|rejection| format!("the body could not be read: {}", rejection.body_text()))
        .and_then(|body| Incoming::parse(Api::Messages, &body))
        .and_then(|request| request.convert(&[]));
    let response = match counted {
        Ok(converted) => {
            let input_tokens = api::Usage::estimate(prompt_chars(&converted), 0).prompt_tokens;
            json_response(StatusCode::OK, &anthropic::TokenCount { input_tokens })
        }
        Err(why) => {
            shared.find(n, FindingKind::Malformed, format!("request #{n}: {why}"));
            Refusal::Malformed(why).response_in(Api::Messages, n)
        }
    };
    shared.touch();
    at_once(turn, response, n).await
}

async fn answer(
    api: Api,
    State(shared): State<Arc<Shared>>,
    peer: Option<axum::Extension<Peer>>,
    headers: axum::http::HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    // Under the clock, nothing is done with a request before its turn: requests of one
    // instant are numbered, attributed and answered in the clock's order, not the sockets'.
    let Ok(turn) = turn_of(&shared, peer.as_deref(), body.as_deref().unwrap_or_default()).await else {
        return Refusal::Stopping.response_in(api, 0);
    };
    let n = shared.received.fetch_add(1, Ordering::SeqCst) + 1;
    shared.touch();
    if let Some(barrier) = &shared.barrier {
        barrier.arrived();
    }
    if shared.stopping.load(Ordering::SeqCst) {
        return at_once(turn, Refusal::Stopping.response_in(api, n), n).await;
    }
    let body = match body {
        Ok(body) => body,
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            let limit = shared.options.body_limit_bytes;
            shared.find(n, FindingKind::Oversized, format!("request #{n}: the body is larger than {limit} bytes"));
            return at_once(turn, Refusal::Oversized(limit).response_in(api, n), n).await;
        }
        Err(rejection) => {
            let why = format!("the body could not be read: {}", rejection.body_text());
            shared.find(n, FindingKind::Malformed, format!("request #{n}: {why}"));
            return at_once(turn, Refusal::Malformed(why).response_in(api, n), n).await;
        }
    };
    let request = match Incoming::parse(api, &body) {
        Ok(request) => request,
        Err(why) => {
            shared.find(n, FindingKind::Malformed, format!("request #{n}: {why}"));
            return at_once(turn, Refusal::Malformed(why).response_in(api, n), n).await;
        }
    };
    let earlier = match request.earlier(&shared) {
        Ok(earlier) => earlier,
        Err(id) => {
            let why = format!("previous_response_id `{id}` names no response this server keeps");
            shared.find(n, FindingKind::Malformed, format!("request #{n}: {why}"));
            let refusal = Refusal::PreviousNotFound(id, shared.options.responses_kept_max);
            return at_once(turn, refusal.response_in(api, n), n).await;
        }
    };
    let converted = match request.convert(&earlier) {
        Ok(converted) => converted,
        Err(why) => {
            shared.find(n, FindingKind::Malformed, format!("request #{n}: {why}"));
            return at_once(turn, Refusal::Malformed(why).response_in(api, n), n).await;
        }
    };
    if shared.script_over.load(Ordering::SeqCst) {
        let last = converted.messages.iter().next_back().map(|m| m.content.as_str()).unwrap_or_default();
        if !shared.options.side.iter().any(|side| last.contains(side.as_str())) {
            let why = "it arrived after the script had ended (every reply the script must give was given)".to_string();
            shared.find(n, FindingKind::AfterScript, format!("request #{n}: {why}"));
            shared.touch();
            return at_once(turn, Refusal::AfterScript(why).response_in(api, n), n).await;
        }
    }
    let prompt_chars = prompt_chars(&converted);
    // The runtime's own name for the sender, kept beside the attribution and never read by it.
    let label = headers.get(shared.options.agent_header.name.as_str()).map(|value| label_text(value.as_bytes()));
    let (exchange, plan) = shared.bridge.lock().expect("bridge lock poisoned").request(
        &converted,
        request.model(),
        shared.time(turn.as_ref()),
        label,
    );
    let head = Head {
        id: match api {
            Api::Chat => format!("chatcmpl-{exchange}"),
            Api::Messages => format!("msg_{exchange}"),
            Api::Responses => format!("resp_{exchange}"),
        },
        created: shared.created,
        model: request.model().unwrap_or("rehearsal").to_string(),
    };
    let answer = match plan {
        Plan::Side => {
            let reply = LlmReply::default();
            shared.bridge.lock().expect("bridge lock poisoned").replied(exchange, &reply, shared.time(turn.as_ref()));
            request.keep(&shared, &earlier, exchange, &reply);
            let response = reply_response(&head, exchange, &reply, &request, prompt_chars, None);
            return at_once(turn, response, n).await;
        }
        Plan::Unattributed(why) => {
            shared.bridge.lock().expect("bridge lock poisoned").failed(exchange);
            shared.find(n, FindingKind::Unattributed, format!("request #{n}: {why}"));
            return at_once(turn, Refusal::Unattributed(why).response_in(api, n), n).await;
        }
        Plan::Halted(why) => {
            shared.bridge.lock().expect("bridge lock poisoned").failed(exchange);
            shared.changed.notify_waiters();
            return at_once(turn, Refusal::Halted(why).response_in(api, n), n).await;
        }
        Plan::Answer(answer) => answer,
    };
    shared.open.fetch_add(1, Ordering::SeqCst);
    let alias = shared.bridge.lock().expect("bridge lock poisoned").alias(exchange);
    let mut held = Held {
        shared: shared.clone(),
        request: n,
        exchange,
        alias: alias.unwrap_or_default(),
        since: Instant::now(),
        clocked: peer.as_ref().zip(turn.as_ref()).map(|(p, t)| (p.0.0.clone(), shared.time(Some(t)))),
        hang: matches!(answer.kind, AnswerKind::Hang),
        answered: false,
    };
    // When the answer is given: virtual under the clock (a `hang` is let go at once, so the
    // clock moves on without it), else after the latency in real time.
    let mut answered_at = None;
    let delaying = Delaying::start(&shared, !matches!(answer.kind, AnswerKind::Hang));
    match turn {
        Some(turn) if matches!(answer.kind, AnswerKind::Hang) => turn.hold(),
        Some(turn) => match turn.release_after(answer.latency_ms.saturating_mul(1_000_000)).await {
            Ok(released) => answered_at = Some(Duration::from_nanos(released.released_ns)),
            Err(_) => return Refusal::Stopping.response_in(api, n),
        },
        None => {
            // Under a barrier the reply waits out its latency and its turn there (a hang
            // never gets one); else its latency here.
            let hang = matches!(answer.kind, AnswerKind::Hang);
            let latency = Duration::from_millis(answer.latency_ms);
            let waited = match shared.barrier.as_ref().filter(|_| !hang) {
                Some(barrier) => barrier.wait(&held.alias, exchange, latency.mul_f64(shared.options.time_scale)).await,
                None => shared.wait(latency).await,
            };
            if !waited {
                return Refusal::Stopping.response_in(api, n);
            }
        }
    }
    drop(delaying);
    let answered_at = answered_at.unwrap_or_else(|| shared.elapsed());
    match answer.kind {
        AnswerKind::Hang => {
            shared.unreplied.lock().expect("unreplied lock poisoned").insert(exchange, "a hang".into());
            // Held until the client gives up (then this future is dropped: a disconnect) or
            // the server stops.
            let mut stop = shared.stop_tx.subscribe();
            let _ = stop.wait_for(|s| *s).await;
            Refusal::Stopping.response_in(api, n)
        }
        AnswerKind::Error(message, status, kind) => {
            held.answered = true;
            let code = status.unwrap_or(500);
            let what = kind.clone().unwrap_or_else(|| match api {
                Api::Chat | Api::Responses => api::error_type_of(code).to_string(),
                Api::Messages => anthropic::error_type_of(code).to_string(),
            });
            shared.unreplied.lock().expect("unreplied lock poisoned").insert(exchange, format!("error {code} {what}"));
            shared.bridge.lock().expect("bridge lock poisoned").failed(exchange);
            Refusal::Scripted { message, status, kind }.response_in(api, n)
        }
        AnswerKind::Reply(reply, drop_after) => {
            held.answered = true;
            let mut bridge = shared.bridge.lock().expect("bridge lock poisoned");
            // A broken stream delivers no reply: the runtime's next request cannot hold it.
            if let Some(chunks) = drop_after {
                let what = format!("a stream dropped after {chunks} chunks");
                shared.unreplied.lock().expect("unreplied lock poisoned").insert(exchange, what);
                bridge.failed(exchange);
            } else {
                bridge.replied(exchange, &reply, answered_at);
            }
            drop(bridge);
            if drop_after.is_none() {
                request.keep(&shared, &earlier, exchange, &reply);
            }
            reply_response(&head, exchange, &reply, &request, prompt_chars, drop_after)
        }
    }
}

/// A scripted reply waiting out its latency, counted in [`Shared::waiting`] until dropped (its
/// latency over, or the handler dropped); a hang is not counted: it waits on the runtime.
struct Delaying {
    shared: Option<Arc<Shared>>,
}

impl Delaying {
    fn start(shared: &Arc<Shared>, counted: bool) -> Delaying {
        if counted {
            shared.waiting.fetch_add(1, Ordering::SeqCst);
        }
        Delaying { shared: counted.then(|| shared.clone()) }
    }
}

impl Drop for Delaying {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.take() {
            shared.waiting.fetch_sub(1, Ordering::SeqCst);
            shared.touch();
        }
    }
}

/// The answer of a reply: JSON, or an SSE stream; cut after `drop_after` chunks when given.
fn reply_response(
    head: &Head,
    exchange: usize,
    reply: &LlmReply,
    request: &Incoming,
    prompt_chars: usize,
    drop_after: Option<usize>,
) -> Response {
    use futures_util::StreamExt as _;
    // The body errs after what was sent: hyper then closes the connection mid-body. It first
    // waits a moment, so that hyper flushes the frames before (a body that is pending lets
    // the connection write what it holds).
    let broken = || {
        futures_util::stream::once(async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Err::<Bytes, _>(std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "scripted drop_after_chunks"))
        })
    };
    let streams = match request {
        Incoming::Chat(request) => request.streams(),
        Incoming::Messages(request) => request.streams(),
        Incoming::Responses(request) => request.streams(),
    };
    if !streams {
        if drop_after.is_some() {
            // Headers, then the connection closes: no complete response.
            let body = Body::from_stream(broken());
            return (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], body).into_response();
        }
        return match request {
            Incoming::Chat(_) => json_response(StatusCode::OK, &stream::completion(head, reply, prompt_chars)),
            Incoming::Messages(_) => {
                json_response(StatusCode::OK, &anthropic::message(&head.id, &head.model, reply, prompt_chars))
            }
            Incoming::Responses(request) => {
                let head = responses::Head::of(request, exchange, head.created);
                json_response(StatusCode::OK, &responses::response(&head, reply, prompt_chars))
            }
        };
    }
    let mut frames: Vec<Result<Bytes, std::io::Error>> = match request {
        Incoming::Chat(request) => stream::chunks(head, reply, prompt_chars, request.include_usage())
            .iter()
            .map(|c| Ok(Bytes::from(stream::frame(c))))
            .collect(),
        Incoming::Messages(_) => anthropic::events(&head.id, &head.model, reply, prompt_chars)
            .iter()
            .map(|e| Ok(Bytes::from(anthropic::frame(e))))
            .collect(),
        Incoming::Responses(request) => {
            responses::events(&responses::Head::of(request, exchange, head.created), reply, prompt_chars)
                .iter()
                .map(|e| Ok(Bytes::from(responses::frame(e))))
                .collect()
        }
    };
    let headers = [(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")];
    let body = match drop_after {
        Some(n) => {
            frames.truncate(n);
            Body::from_stream(futures_util::stream::iter(frames).chain(broken()))
        }
        None => {
            // Chat ends with `[DONE]`; a Messages stream ends with its `message_stop` event, a
            // Responses stream with `response.completed`.
            if matches!(request, Incoming::Chat(_)) {
                frames.push(Ok(Bytes::from_static(stream::DONE.as_bytes())));
            }
            Body::from_stream(futures_util::stream::iter(frames))
        }
    };
    (StatusCode::OK, headers, body).into_response()
}

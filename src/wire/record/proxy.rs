//! The recording proxy of `rehearsal record`: on 127.0.0.1 it takes a runtime's requests as
//! `rehearsal serve` does (each route speaking one [`Api`]: Chat Completions at
//! `/v1/chat/completions`, Anthropic Messages at `/v1/messages`, OpenAI Responses at
//! `/v1/responses`), forwards each to the upstream model, returns the upstream's answer
//! unchanged (status, content type, body bytes as they stream) and keeps what it saw: every
//! request, its answer as the scripted reply kind it amounts to (a reply, an `error` with its
//! status and type, a `hang`, a stream dropped after N chunks), and the order in which requests
//! arrived and were answered, with wall times.
//!
//! The upstream is reached with hyper's own HTTP/1.1 client connection over a tokio TCP
//! stream, one connection per request (no pool: a dropped stream cannot poison the next
//! request). Plain `http://` only; an `https://` upstream is refused at start with a message.
//!
//! What this module deliberately does not do: attribute requests or write a scenario (that is
//! [`crate::wire::record`], from the [`Recording`]), keep any header (auth headers' values are kept
//! only as [`Recording::secrets`], so the writer can blank them wherever they appear), or
//! retry a failed upstream call (the runtime saw the failure; so does the recording).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http_body_util::BodyExt as _;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use crate::dialect::Dialect;
use crate::scenario::Scenario;
use crate::sut::llm::{LlmReply, ToolCall};
use crate::wire::api::{ChatRequest, Converted, ErrorBody, ErrorObject, anthropic, responses};
use crate::wire::script::AnswerKind;
use crate::wire::script::{Bridge, Plan};
use crate::wire::{AgentHeader, Disconnect, End, FindingKind, ServeError, WireFinding, WireRun};

/// How the proxy runs. Every limit is named here with its default.
#[derive(Clone, Debug)]
pub struct ProxyOptions {
    /// The upstream's base URL, as an OpenAI client takes it (`http://HOST:PORT/v1`); a
    /// request to `/v1/chat/completions` goes to `{upstream}/chat/completions`, one to
    /// `/v1/messages?beta=true` to `{upstream}/messages?beta=true`.
    pub upstream: String,
    /// The port on 127.0.0.1; 0 (the default) takes a free one.
    pub port: u16,
    /// When set, every forwarded request carries the key in its API's header instead of the
    /// runtime's own auth headers (`Authorization: Bearer KEY` for Chat Completions,
    /// `x-api-key: KEY` for Messages). Default none: the runtime's headers go as they came.
    pub upstream_key: Option<String>,
    /// How long to wait for the upstream's answer to be complete; past it the request is
    /// recorded as a `hang` and the runtime's connection is held until it gives up, as a
    /// scripted `hang` holds it. Default 300 s.
    pub upstream_timeout: Duration,
    /// [`Proxy::idle`] resolves when no request arrived and none was open for this long.
    /// Default 30 s.
    pub idle_limit: Duration,
    /// The largest request body accepted, in bytes. Default 8 MiB (as `rehearsal serve`).
    pub body_limit_bytes: usize,
    /// The most bytes of one upstream answer the recording keeps (`--max-reply-bytes`). The
    /// runtime still gets the whole answer as it streams (nothing is buffered on its way);
    /// the recording keeps what came before the limit and says so in [`Recording::notes`].
    /// Default 16 MiB.
    pub max_reply_bytes: usize,
    /// How long the upstream may send nothing in the middle of an answer (`--upstream-idle`);
    /// past it the answer is recorded as a `hang` from there on, as past
    /// [`ProxyOptions::upstream_timeout`]. Default 60 s.
    pub upstream_idle: Duration,
    /// How many Responses answers the proxy keeps the conversation of, by the upstream's
    /// response id, to read a later request's `previous_response_id` as `serve` does (the
    /// oldest dropped first). Default 1024, as `serve`'s `responses_kept_max`.
    pub responses_kept_max: usize,
}

/// The longest one SSE event may be before the recording stops parsing the stream (an
/// upstream that never writes the blank line ending an event): 1 MiB, or the reply limit if
/// that is smaller.
const SSE_EVENT_BYTES_MAX: usize = 1 << 20;

/// The most bytes of an upstream's `GET /v1/models` or `count_tokens` answer passed on: a
/// model list is a few kilobytes, a token count a few bytes.
const MODEL_LIST_BYTES_MAX: usize = 1 << 20;

/// The API a forwarded route speaks: how its request is read, where it goes upstream, which
/// header carries `--upstream-key-env`'s key, how its answer is read into an [`Outcome`], and
/// how the proxy's own refusals are spelt (in the API's error object, so the runtime's SDK
/// raises its own error). One variant per route: another API is one more variant and route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// OpenAI Chat Completions: `POST /v1/chat/completions`.
    Chat,
    /// Anthropic Messages: `POST /v1/messages` (with `?beta=true` or not).
    Messages,
    /// OpenAI Responses: `POST /v1/responses`, `previous_response_id` read from the answers
    /// that came through the proxy.
    Responses,
}

/// What the proxy read of a request.
struct Read {
    model: Option<String>,
    streamed: bool,
    converted: Converted,
    /// A Responses request's chain, kept with its answer for a later `previous_response_id`.
    chain: Option<Chain>,
    /// What the recording could not read as `serve` will (a `previous_response_id` the proxy
    /// never saw answered).
    note: Option<String>,
}

/// A Responses request's conversation so far: the earlier items its `previous_response_id`
/// named, its own input, and whether the upstream keeps its answer (`store`).
struct Chain {
    earlier: Arc<Vec<Arc<responses::Item>>>,
    input: Vec<responses::Item>,
    stores: bool,
}

impl Api {
    /// The path under the upstream's base URL.
    fn path(self) -> &'static str {
        match self {
            Api::Chat => "/chat/completions",
            Api::Messages => "/messages",
            Api::Responses => "/responses",
        }
    }

    /// What a request or a whole answer of this API is called in a message.
    fn what(self) -> &'static str {
        match self {
            Api::Chat => "a chat completion",
            Api::Messages => "a message",
            Api::Responses => "a response",
        }
    }

    /// The body read as this API's request: the model asked for, whether it streams, and the
    /// conversation as the server reads it (the same conversion; a Responses request's
    /// `previous_response_id` from `chains`), or why it is none.
    fn read(self, body: &[u8], chains: &Mutex<responses::Chains>) -> Result<Read, String> {
        let read = |model, streamed, converted| Read { model, streamed, converted, chain: None, note: None };
        match self {
            Api::Chat => {
                let request = serde_json::from_slice::<ChatRequest>(body)
                    .map_err(|e| format!("the body is not a chat completion request: {e}"))?;
                Ok(read(request.model.clone(), request.streams(), request.convert()?))
            }
            Api::Messages => {
                let request = serde_json::from_slice::<anthropic::MessagesRequest>(body)
                    .map_err(|e| format!("the body is not a messages request: {e}"))?;
                Ok(read(request.model.clone(), request.streams(), request.convert()?))
            }
            Api::Responses => {
                let request = serde_json::from_slice::<responses::ResponsesRequest>(body)
                    .map_err(|e| format!("the body is not a responses request: {e}"))?;
                // The upstream knows every response it gave; the recording only those it saw.
                // One it never saw is forwarded all the same (the upstream may keep it), read
                // without its conversation, and noted.
                let (earlier, note) = match &request.previous_response_id {
                    None => (Arc::default(), None),
                    Some(id) => match chains.lock().unwrap_or_else(|p| p.into_inner()).get(id) {
                        Some(earlier) => (earlier, None),
                        None => (
                            Arc::default(),
                            Some(format!(
                                "previous_response_id `{}` names no response answered through the proxy: the request is recorded without that conversation, and a replay that sends the id is refused",
                                crate::wire::excerpt(id)
                            )),
                        ),
                    },
                };
                let converted = request.convert(&earlier)?;
                let chain = Some(Chain { earlier, input: request.items(), stores: request.stores() });
                Ok(Read { model: request.model.clone(), streamed: request.streams(), converted, chain, note })
            }
        }
    }

    /// The error `type` this API gives a status.
    fn error_type_of(self, status: u16) -> &'static str {
        match self {
            Api::Chat | Api::Responses => crate::wire::api::error_type_of(status),
            Api::Messages => anthropic::error_type_of(status),
        }
    }

    /// The header that carries an upstream key.
    fn key_header(self, key: &str) -> (header::HeaderName, String) {
        match self {
            Api::Chat | Api::Responses => (header::AUTHORIZATION, format!("Bearer {key}")),
            Api::Messages => (header::HeaderName::from_static("x-api-key"), key.to_string()),
        }
    }

    /// The proxy's own refusal in this API's error object: Chat's (which OpenAI's Responses
    /// API answers with too) carries `code`; Anthropic's has no field for it, so it ends the
    /// message, as `rehearsal serve` writes it.
    fn error_response(self, status: StatusCode, code: &str, message: String) -> Response {
        let text = match self {
            Api::Chat | Api::Responses => {
                let error = ErrorObject {
                    message,
                    kind: self.error_type_of(status.as_u16()).to_string(),
                    param: None,
                    code: Some(code.to_string()),
                };
                serde_json::to_string(&ErrorBody { error })
            }
            Api::Messages => {
                let error = anthropic::ErrorObject {
                    kind: self.error_type_of(status.as_u16()).to_string(),
                    message: format!("{message} ({code})"),
                };
                serde_json::to_string(&anthropic::ErrorBody { kind: "error", error })
            }
        };
        let text = text.expect("API objects serialize");
        (status, [(header::CONTENT_TYPE, "application/json")], text).into_response()
    }
}

impl Default for ProxyOptions {
    fn default() -> ProxyOptions {
        ProxyOptions {
            upstream: String::new(),
            port: 0,
            upstream_key: None,
            upstream_timeout: Duration::from_secs(300),
            idle_limit: Duration::from_secs(30),
            body_limit_bytes: 8 << 20,
            max_reply_bytes: 16 << 20,
            upstream_idle: Duration::from_secs(60),
            responses_kept_max: 1024,
        }
    }
}

/// What the upstream's answer to one request amounted to, as a scripted reply kind.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// A whole reply: its text and calls (`(id, name, arguments text)`).
    Reply {
        /// The text.
        text: String,
        /// The calls: id, function name, arguments as the JSON text the model wrote.
        calls: Vec<(String, String, String)>,
    },
    /// An API error: the HTTP status, the error object's `type` and `message`.
    Error {
        /// The HTTP status.
        status: u16,
        /// The error object's `type`, if it had one.
        kind: Option<String>,
        /// Its `message` (the body's text when it was no error object).
        message: String,
    },
    /// No answer came before the client gave up or the upstream timeout passed.
    Hang,
    /// The stream broke after `chunks` SSE chunks (0 for a non-streamed body cut short),
    /// holding what had come.
    Dropped {
        /// The data chunks received before the break.
        chunks: usize,
        /// The text received.
        text: String,
        /// The calls received.
        calls: Vec<(String, String, String)>,
    },
    /// Still open when the recording ended.
    Open,
}

/// One recorded request.
#[derive(Clone, Debug)]
pub struct RecordedExchange {
    /// The API it came in.
    pub api: Api,
    /// The request as conversation types.
    pub converted: Converted,
    /// The model asked for.
    pub model: Option<String>,
    /// Whether it asked for a stream.
    pub streamed: bool,
    /// When it arrived, since the proxy started.
    pub arrived: Duration,
    /// When its answer was complete (or given up on), since the proxy started.
    pub ended: Option<Duration>,
    /// What the answer amounted to.
    pub outcome: Outcome,
}

/// The order things happened in, for attributing the requests afterwards exactly as a live
/// attributor would have seen them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// Exchange N arrived.
    Arrived(usize),
    /// Exchange N's reply was complete.
    Replied(usize),
    /// Exchange N ended without a reply (an error, a hang, a dropped stream).
    Failed(usize),
}

/// What the proxy saw.
#[derive(Clone, Debug, Default)]
pub struct Recording {
    /// The model requests (of every [`Api`]), in arrival order (the exchange numbers).
    pub exchanges: Vec<RecordedExchange>,
    /// Arrivals and ends, in the order they happened.
    pub events: Vec<Event>,
    /// Values of auth headers the runtime sent or the proxy added: never to be written.
    pub secrets: Vec<String>,
    /// Requests the proxy could not forward as chat requests (malformed, oversized, not
    /// served).
    pub findings: Vec<WireFinding>,
    /// HTTP requests received.
    pub requests: usize,
    /// Wall time from the start to the finish.
    pub elapsed: Duration,
    /// What the recording could not keep as it came (an answer cut at
    /// [`ProxyOptions::max_reply_bytes`], an SSE event that never ended), one sentence each
    /// naming the exchange.
    pub notes: Vec<String>,
}

/// The upstream's address, parsed once.
#[derive(Clone, Debug)]
struct Upstream {
    /// `host:port`, for the TCP connection and the `Host` header.
    authority: String,
    /// The base path (`/v1`), without a trailing slash.
    base: String,
}

impl Upstream {
    fn parse(url: &str) -> Result<Upstream, ServeError> {
        let scheme_end = url.find("://").map_or(0, |i| i + 3);
        let lowered = format!("{}{}", url[..scheme_end].to_ascii_lowercase(), &url[scheme_end..]);
        let url = lowered.as_str();
        if url.starts_with("https://") {
            return Err(ServeError::UpstreamHttps { url: lowered });
        }
        let Some(rest) = url.strip_prefix("http://") else {
            return Err(ServeError::UpstreamNotHttp { url: lowered });
        };
        let url = || lowered.clone();
        if let Some(character) = rest.chars().find(|c| !c.is_ascii_graphic()) {
            return Err(ServeError::UpstreamCharacter { url: url(), character });
        }
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        if authority.is_empty() {
            return Err(ServeError::UpstreamNoHost { url: url() });
        }
        if authority.contains('@') {
            return Err(ServeError::UpstreamCredentials { url: url() });
        }
        if path.contains(['?', '#']) || authority.contains(['?', '#']) {
            return Err(ServeError::UpstreamQuery { url: url() });
        }
        // `host`, `host:port`, `[v6]` or `[v6]:port`.
        let (host, port) = match authority.strip_prefix('[') {
            Some(v6) => match v6.split_once(']') {
                Some((host, "")) => (host, None),
                Some((host, rest)) => match rest.strip_prefix(':') {
                    Some(port) => (host, Some(port)),
                    None => return Err(ServeError::UpstreamAfterBracket { url: url() }),
                },
                None => return Err(ServeError::UpstreamUnclosedBracket { url: url() }),
            },
            None => match authority.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            },
        };
        if host.is_empty()
            || host.contains([' ', '/', '\\', '[', ']'])
            || (!authority.starts_with('[') && host.contains(':'))
        {
            return Err(ServeError::UpstreamHost { url: url(), host: host.to_string() });
        }
        if let Some(port) = port
            && !(port.bytes().all(|b| b.is_ascii_digit()) && matches!(port.parse::<u16>(), Ok(p) if p > 0))
        {
            return Err(ServeError::UpstreamPort { url: url(), port: port.to_string() });
        }
        let authority = if port.is_some() { authority.to_string() } else { format!("{authority}:80") };
        let base = format!("/{}", path.trim_end_matches('/'));
        let base = if base == "/" { String::new() } else { base };
        Ok(Upstream { authority, base })
    }
}

struct Shared {
    options: ProxyOptions,
    upstream: Upstream,
    started: Instant,
    state: Mutex<Recording>,
    received: AtomicUsize,
    open: AtomicUsize,
    last_activity: Mutex<Instant>,
    changed: Notify,
    stopping: AtomicBool,
    stop_tx: watch::Sender<bool>,
    /// The conversations of the Responses answers seen, by the upstream's response id.
    chains: Mutex<responses::Chains>,
    /// The chains of Responses requests still open, by exchange.
    open_chains: Mutex<std::collections::HashMap<usize, Chain>>,
}

impl Shared {
    fn touch(&self) {
        *self.last_activity.lock().expect("activity lock poisoned") = Instant::now();
        self.changed.notify_waiters();
    }

    fn record(&self) -> std::sync::MutexGuard<'_, Recording> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn find(&self, request: usize, kind: FindingKind, message: String) {
        self.record().findings.push(WireFinding::new(request, kind, &message));
    }

    /// Ends exchange `n` with `outcome` (once: a later end is ignored).
    fn end(&self, n: usize, outcome: Outcome) {
        let at = self.started.elapsed();
        let mut rec = self.record();
        let Some(e) = rec.exchanges.get_mut(n) else { return };
        if e.outcome != Outcome::Open {
            return;
        }
        let event = if matches!(outcome, Outcome::Reply { .. }) { Event::Replied(n) } else { Event::Failed(n) };
        e.outcome = outcome;
        e.ended = Some(at);
        rec.events.push(event);
    }

    /// Keeps exchange `n`'s Responses conversation under the upstream's `response_id` when it
    /// ended as a reply the upstream keeps, for a later `previous_response_id`.
    fn chain(&self, n: usize, response_id: Option<String>) {
        let Some(chain) = self.open_chains.lock().unwrap_or_else(|p| p.into_inner()).remove(&n) else { return };
        let (Some(id), true) = (response_id, chain.stores) else { return };
        let reply = match self.record().exchanges.get(n).map(|e| &e.outcome) {
            Some(Outcome::Reply { text, calls }) => LlmReply { text: text.clone(), tool_calls: calls_of(calls) },
            _ => return,
        };
        let mut chains = self.chains.lock().unwrap_or_else(|p| p.into_inner());
        chains.keep(&id, &chain.earlier, chain.input, &reply, n);
    }

    fn secret(&self, value: &str) {
        let value = value.trim();
        // The credential after any scheme (`Bearer`, `bearer`, `Basic`, `Token`, a tab or
        // several spaces between): HTTP auth schemes are case-insensitive and a runtime may
        // write the bare token anywhere.
        let token = value.split_once(char::is_whitespace).map_or(value, |(_, rest)| rest.trim());
        let mut rec = self.record();
        for v in [value, token] {
            if !v.is_empty() && !rec.secrets.iter().any(|s| s == v) {
                rec.secrets.push(v.to_string());
            }
        }
    }
}

/// A running recording proxy. Start it, hand [`Proxy::base_url`] to the runtime, then
/// [`Proxy::finish`] for the [`Recording`].
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    serving: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Binds 127.0.0.1 (port [`ProxyOptions::port`]) and forwards to the upstream. Must be
    /// called inside a tokio runtime with I/O and time enabled.
    pub async fn start(options: ProxyOptions) -> Result<Proxy, ServeError> {
        let upstream = Upstream::parse(&options.upstream)?;
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", options.port))
            .await
            .map_err(|source| ServeError::Listen { port: options.port, source })?;
        let addr = listener.local_addr().map_err(|source| ServeError::LocalAddress { source })?;
        let (stop_tx, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            upstream,
            started: Instant::now(),
            state: Mutex::default(),
            received: AtomicUsize::new(0),
            open: AtomicUsize::new(0),
            last_activity: Mutex::new(Instant::now()),
            changed: Notify::new(),
            stopping: AtomicBool::new(false),
            stop_tx,
            chains: Mutex::new(responses::Chains::new(options.responses_kept_max)),
            open_chains: Mutex::default(),
            options,
        });
        if let Some(key) = &shared.options.upstream_key {
            shared.secret(key);
        }
        let app = Router::new()
            .route("/v1/chat/completions", post(chat).fallback(not_served))
            .route("/v1/messages", post(messages).fallback(not_served))
            .route("/v1/messages/count_tokens", post(count_tokens).fallback(not_served))
            .route("/v1/responses", post(responses_route).fallback(not_served))
            .route("/v1/models", get(models).fallback(not_served))
            .fallback(not_served)
            .layer(DefaultBodyLimit::max(shared.options.body_limit_bytes))
            .with_state(shared.clone());
        let mut stop = shared.stop_tx.subscribe();
        let serving = tokio::spawn(async move {
            let shutdown = async move {
                let _ = stop.wait_for(|s| *s).await;
            };
            let _ = axum::serve(listener, app).with_graceful_shutdown(shutdown).await;
        });
        Ok(Proxy { addr, shared, serving })
    }

    /// The base URL a runtime's OpenAI client takes: `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Resolves when no request is open and none arrived for [`ProxyOptions::idle_limit`].
    pub async fn idle(&self) {
        loop {
            let changed = self.shared.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let deadline = crate::wire::after(
                *self.shared.last_activity.lock().expect("activity lock poisoned"),
                self.shared.options.idle_limit,
            );
            tokio::select! {
                _ = changed => {}
                _ = tokio::time::sleep_until(deadline) => {
                    let last = *self.shared.last_activity.lock().expect("activity lock poisoned");
                    if self.shared.open.load(Ordering::SeqCst) == 0
                        && crate::wire::after(last, self.shared.options.idle_limit) <= Instant::now()
                    {
                        return;
                    }
                }
            }
        }
    }

    /// Waits up to `grace` for open requests to end, then stops (held requests are let go)
    /// and hands back the recording.
    pub async fn finish(self, grace: Duration) -> Recording {
        let until = crate::wire::after(Instant::now(), grace);
        while self.shared.open.load(Ordering::SeqCst) > 0 && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.shared.stopping.store(true, Ordering::SeqCst);
        let _ = self.shared.stop_tx.send(true);
        let mut serving = self.serving;
        if tokio::time::timeout(Duration::from_secs(2), &mut serving).await.is_err() {
            serving.abort();
        }
        let mut rec = self.shared.record().clone();
        rec.requests = self.shared.received.load(Ordering::SeqCst);
        rec.elapsed = self.shared.started.elapsed();
        rec
    }
}

fn error_response(status: StatusCode, code: &str, message: String) -> Response {
    Api::Chat.error_response(status, code, message)
}

async fn not_served(State(shared): State<Arc<Shared>>, method: Method, uri: Uri) -> Response {
    let n = shared.received.fetch_add(1, Ordering::SeqCst) + 1;
    let uri = crate::wire::excerpt(&uri.to_string());
    shared.find(n, FindingKind::NotServed, format!("request #{n}: {method} {uri} is not served"));
    shared.touch();
    error_response(
        StatusCode::NOT_FOUND,
        "not_served",
        format!(
            "rehearsal record: request #{n}: {method} {uri} is not forwarded (POST /v1/chat/completions, POST /v1/messages, POST /v1/messages/count_tokens, POST /v1/responses and GET /v1/models are)"
        ),
    )
}

async fn models(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    // The model list belongs to both APIs: a key the runtime sent as `x-api-key` is Anthropic's.
    let api = if headers.contains_key("x-api-key") { Api::Messages } else { Api::Chat };
    let request = Whole { api, method: Method::GET, path: "/models", what: "model list" };
    whole(&shared, request, None, &headers, Bytes::new()).await
}

/// `POST /v1/messages/count_tokens`: forwarded and passed back as the model list is, and not
/// recorded (it is no exchange: `rehearsal serve` answers it from the request alone).
async fn count_tokens(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let Ok(body) = body else {
        let n = shared.received.fetch_add(1, Ordering::SeqCst) + 1;
        shared.touch();
        let why = format!("the body is larger than {} bytes or could not be read", shared.options.body_limit_bytes);
        shared.find(n, FindingKind::Oversized, format!("request #{n}: count_tokens: {why}"));
        return Api::Messages.error_response(
            StatusCode::PAYLOAD_TOO_LARGE,
            "not_forwarded",
            format!("rehearsal record: request #{n}: {why}"),
        );
    };
    let request =
        Whole { api: Api::Messages, method: Method::POST, path: "/messages/count_tokens", what: "token count" };
    whole(&shared, request, uri.query(), &headers, body).await
}

/// A request whose answer is passed back whole and not recorded.
struct Whole {
    /// The API its key header and its error objects follow.
    api: Api,
    method: Method,
    /// Under the upstream's base.
    path: &'static str,
    /// What the answer is, for a message (`model list`).
    what: &'static str,
}

/// Forwards `request` and passes its answer back read whole, bounded in size
/// ([`MODEL_LIST_BYTES_MAX`]) and in time.
async fn whole(shared: &Shared, request: Whole, query: Option<&str>, headers: &HeaderMap, body: Bytes) -> Response {
    shared.received.fetch_add(1, Ordering::SeqCst);
    shared.touch();
    let Whole { api, method, path, what } = request;
    let error_response = |status: StatusCode, code: &str, message: String| api.error_response(status, code, message);
    let deadline = crate::wire::after(Instant::now(), shared.options.upstream_timeout);
    let path = with_query(path, query);
    let response = match tokio::time::timeout_at(deadline, forward(shared, api, method, &path, headers, body)).await {
        Ok(Ok(response)) => response,
        Ok(Err(why)) => return error_response(StatusCode::BAD_GATEWAY, "upstream_unreachable", why),
        Err(_) => return upstream_timed_out(shared, api),
    };
    let (parts, mut body) = response.into_parts();
    let mut bytes = Vec::new();
    loop {
        let idle = crate::wire::after(Instant::now(), shared.options.upstream_idle).min(deadline);
        match tokio::time::timeout_at(idle, body.frame()).await {
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    if bytes.len() + data.len() > MODEL_LIST_BYTES_MAX {
                        return error_response(
                            StatusCode::BAD_GATEWAY,
                            "upstream_too_large",
                            format!(
                                "rehearsal record: the upstream's {what} is larger than {MODEL_LIST_BYTES_MAX} bytes"
                            ),
                        );
                    }
                    bytes.extend_from_slice(&data);
                }
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                return error_response(
                    StatusCode::BAD_GATEWAY,
                    "upstream_dropped",
                    format!("rehearsal record: the upstream's {what} broke off: {e}"),
                );
            }
            Err(_) => return upstream_timed_out(shared, api),
        }
    }
    passthrough(parts.status, &parts.headers, Body::from(bytes))
}

/// `path` with the request's query, as the runtime sent it (`?beta=true`).
fn with_query(path: &str, query: Option<&str>) -> String {
    match query {
        Some(query) => format!("{path}?{query}"),
        None => path.to_string(),
    }
}

/// The answer to a request the upstream did not answer in time, where no scripted `hang` is
/// being recorded (the model list, a token count).
fn upstream_timed_out(shared: &Shared, api: Api) -> Response {
    api.error_response(
        StatusCode::GATEWAY_TIMEOUT,
        "upstream_timeout",
        format!(
            "rehearsal record: the upstream sent nothing for {} ms",
            shared.options.upstream_idle.min(shared.options.upstream_timeout).as_millis()
        ),
    )
}

/// Headers not forwarded either way: hop-by-hop ones, the length (hyper sets it), and
/// `accept-encoding` (the proxy must read the bytes it passes on).
fn hop_by_hop(name: &header::HeaderName) -> bool {
    matches!(
        name.as_str(),
        "host"
            | "connection"
            | "keep-alive"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "content-length"
            | "accept-encoding"
    )
}

/// Headers whose values are credentials: kept out of the recording wherever they appear.
fn is_auth(name: &header::HeaderName) -> bool {
    matches!(name.as_str(), "authorization" | "x-api-key" | "api-key" | "openai-api-key" | "proxy-authorization")
}

/// Sends one request to the upstream over a fresh connection; the response's body streams.
/// An upstream key goes in `api`'s header.
async fn forward(
    shared: &Shared,
    api: Api,
    method: Method,
    path: &str,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<hyper::Response<hyper::body::Incoming>, String> {
    let upstream = &shared.upstream;
    let stream = tokio::net::TcpStream::connect(&upstream.authority)
        .await
        .map_err(|e| format!("rehearsal record: cannot reach the upstream {}: {e}", upstream.authority))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
        .await
        .map_err(|e| format!("rehearsal record: the upstream {} refused the connection: {e}", upstream.authority))?;
    // The connection is driven until its response body is read (or dropped).
    tokio::spawn(connection);
    let mut request = hyper::Request::builder().method(method).uri(format!("{}{path}", upstream.base));
    for (name, value) in headers {
        // A credential is registered before anything is dropped: `Proxy-Authorization` is
        // hop-by-hop and never forwarded, but its value must still be blanked wherever the
        // runtime also wrote it.
        if is_auth(name) {
            shared.secret(&String::from_utf8_lossy(value.as_bytes()));
            if shared.options.upstream_key.is_some() {
                continue;
            }
        }
        if hop_by_hop(name) {
            continue;
        }
        request = request.header(name, value);
    }
    if let Some(key) = &shared.options.upstream_key {
        let (name, value) = api.key_header(key);
        request = request.header(name, value);
    }
    let request = request
        .header(header::HOST, &upstream.authority)
        .body(http_body_util::Full::new(body))
        .map_err(|e| format!("rehearsal record: cannot build the upstream request: {e}"))?;
    sender.send_request(request).await.map_err(|e| format!("rehearsal record: the upstream failed: {e}"))
}

fn passthrough(status: StatusCode, headers: &HeaderMap, body: Body) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    for (name, value) in headers {
        if !hop_by_hop(name) {
            response.headers_mut().append(name, value.clone());
        }
    }
    response
}

/// A request being forwarded: counted open until dropped; dropped before its answer ended,
/// the client gave up (recorded as a `hang`) or the proxy stopped.
struct Open {
    shared: Arc<Shared>,
    exchange: usize,
}

impl Drop for Open {
    fn drop(&mut self) {
        let outcome = if self.shared.stopping.load(Ordering::SeqCst) { Outcome::Open } else { Outcome::Hang };
        if outcome != Outcome::Open {
            self.shared.end(self.exchange, outcome);
        }
        // A Responses chain not kept by now never will be (the answer failed or was cut).
        self.shared.open_chains.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.exchange);
        self.shared.open.fetch_sub(1, Ordering::SeqCst);
        self.shared.touch();
    }
}

async fn chat(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    forwarded(Api::Chat, shared, uri, headers, body).await
}

/// `POST /v1/messages`: `?beta=true` and the headers `x-api-key`, `anthropic-version` and
/// `anthropic-beta` go upstream as they came.
async fn messages(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    forwarded(Api::Messages, shared, uri, headers, body).await
}

/// `POST /v1/responses`.
async fn responses_route(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    forwarded(Api::Responses, shared, uri, headers, body).await
}

/// A model request of `api`: read as the server reads it, forwarded, its answer passed back
/// as it streams and recorded as what it amounts to.
async fn forwarded(
    api: Api,
    shared: Arc<Shared>,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let error_response = |status: StatusCode, code: &str, message: String| api.error_response(status, code, message);
    let n = shared.received.fetch_add(1, Ordering::SeqCst) + 1;
    shared.touch();
    let body = match body {
        Ok(body) => body,
        Err(rejection) => {
            let limit = shared.options.body_limit_bytes;
            let (kind, why) = if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                (FindingKind::Oversized, format!("the body is larger than {limit} bytes"))
            } else {
                (FindingKind::Malformed, format!("the body could not be read: {}", rejection.body_text()))
            };
            shared.find(n, kind, format!("request #{n}: {why}"));
            return error_response(
                rejection.status(),
                "not_forwarded",
                format!("rehearsal record: request #{n}: {why}"),
            );
        }
    };
    let Read { model, streamed, converted, chain, note } = match api.read(&body, &shared.chains) {
        Ok(ok) => ok,
        Err(why) => {
            // Not recorded, not forwarded: a scenario cannot script it, and the runtime is to
            // blame (the verdict says so).
            shared.find(n, FindingKind::Malformed, format!("request #{n}: {why}"));
            return error_response(
                StatusCode::BAD_REQUEST,
                "malformed_request",
                format!(
                    "rehearsal record: request #{n}: {}",
                    crate::wire::excerpt_to(&why, crate::wire::FINDING_CHARS_MAX)
                ),
            );
        }
    };
    let exchange = {
        let mut rec = shared.record();
        let exchange = rec.exchanges.len();
        rec.exchanges.push(RecordedExchange {
            api,
            converted,
            model,
            streamed,
            arrived: shared.started.elapsed(),
            ended: None,
            outcome: Outcome::Open,
        });
        rec.events.push(Event::Arrived(exchange));
        if let Some(note) = note {
            rec.notes.push(format!("exchange {exchange}: {note}"));
        }
        exchange
    };
    if let Some(chain) = chain {
        shared.open_chains.lock().unwrap_or_else(|p| p.into_inner()).insert(exchange, chain);
    }
    shared.open.fetch_add(1, Ordering::SeqCst);
    let open = Open { shared: shared.clone(), exchange };
    let deadline = crate::wire::after(Instant::now(), shared.options.upstream_timeout);
    let path = with_query(api.path(), uri.query());
    let answer = tokio::time::timeout_at(deadline, forward(&shared, api, Method::POST, &path, &headers, body));
    let response = match answer.await {
        Ok(Ok(response)) => response,
        Ok(Err(why)) => {
            // Recorded as the runtime saw it: the error object's `type` (its `code` says why).
            let kind = Some(api.error_type_of(502).to_string());
            shared.end(exchange, Outcome::Error { status: 502, kind, message: why.clone() });
            drop(open);
            return error_response(StatusCode::BAD_GATEWAY, "upstream_unreachable", why);
        }
        Err(_) => return hold(api, open).await,
    };
    let (parts, upstream_body) = response.into_parts();
    let limit = shared.options.max_reply_bytes;
    let kind = match (parts.status.is_success(), streamed) {
        (false, _) => BodyKind::Error(parts.status.as_u16()),
        (true, true) => BodyKind::Sse,
        (true, false) => BodyKind::Json,
    };
    // Every answer streams through as it comes, whatever its size: nothing is held whole on
    // its way. A whole (non-SSE) body keeps the upstream's length, so it reaches the runtime
    // as the upstream sent it, not re-framed as chunks a plain client may not read.
    let length = parts.headers.get(header::CONTENT_LENGTH).cloned();
    // hyper stops polling a body once its declared length is written, so the tap ends the
    // answer itself when the last byte has passed.
    let expected = length.as_ref().and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let mut tap = Tap { open, parser: Parser::new(api, kind, limit), ended: false, passed: 0, expected };
    // An answer with no body (204, 205, 304, or a length of 0) is complete as it stands:
    // hyper never polls its body, so the tap ends it here.
    if matches!(parts.status.as_u16(), 204 | 205 | 304) || expected == Some(0) {
        tap.complete();
    }
    let idle = shared.options.upstream_idle;
    let body = futures_util::stream::unfold((upstream_body, tap), move |(mut body, mut tap)| async move {
        if tap.ended {
            return None;
        }
        let wake = crate::wire::after(Instant::now(), idle).min(deadline);
        match tokio::time::timeout_at(wake, body.frame()).await {
            Ok(Some(Ok(frame))) => match frame.into_data() {
                Ok(data) => {
                    tap.feed(&data);
                    Some((Ok::<Bytes, std::io::Error>(data), (body, tap)))
                }
                // Trailers carry nothing a reply holds.
                Err(_) => Some((Ok(Bytes::new()), (body, tap))),
            },
            Ok(None) => {
                tap.complete();
                None
            }
            Ok(Some(Err(e))) => {
                // Cut short: the runtime gets what came and a body that breaks.
                tap.broken();
                Some((Err(std::io::Error::new(std::io::ErrorKind::ConnectionAborted, e.to_string())), (body, tap)))
            }
            Err(_) => {
                // Past the upstream timeout, or silent for the idle limit, mid-body: a hang
                // from here on, as the runtime sees no more bytes; held until it gives up or
                // the proxy stops.
                tap.open.shared.end(tap.open.exchange, Outcome::Hang);
                let mut stop = tap.open.shared.stop_tx.subscribe();
                let _ = stop.wait_for(|s| *s).await;
                None
            }
        }
    });
    let mut response = passthrough(parts.status, &parts.headers, Body::from_stream(body));
    if let Some(length) = length {
        response.headers_mut().insert(header::CONTENT_LENGTH, length);
    }
    response
}

/// Past the upstream timeout: the request is a `hang`; the runtime's connection is held
/// until it gives up (the handler is dropped) or the proxy stops.
async fn hold(api: Api, open: Open) -> Response {
    open.shared.end(open.exchange, Outcome::Hang);
    let mut stop = open.shared.stop_tx.subscribe();
    let _ = stop.wait_for(|s| *s).await;
    api.error_response(
        StatusCode::SERVICE_UNAVAILABLE,
        "recording_over",
        "rehearsal record: the recording is over".into(),
    )
}

/// The `type` and `message` of an error body (the body's text when it is no error object):
/// `{"error": {"type", "message"}}` in both APIs (Anthropic's adds a top-level `type`).
fn error_of(bytes: &[u8]) -> (Option<String>, String) {
    let value: serde_json::Value = serde_json::from_slice(bytes).unwrap_or_default();
    let error = &value["error"];
    let kind = error["type"].as_str().map(String::from);
    let message = error["message"]
        .as_str()
        .map(String::from)
        .unwrap_or_else(|| String::from_utf8_lossy(bytes).chars().take(2000).collect());
    (kind, message)
}

/// The answer's body as it passes: parsed on the way, ended as a reply, an error, a drop or
/// a hang.
struct Tap {
    open: Open,
    parser: Parser,
    ended: bool,
    /// Bytes passed on so far.
    passed: u64,
    /// The upstream's `Content-Length`, if it gave one.
    expected: Option<u64>,
}

impl Tap {
    fn feed(&mut self, data: &[u8]) {
        self.passed += data.len() as u64;
        self.keep(data);
        if self.expected.is_some_and(|expected| self.passed >= expected) {
            self.complete();
        }
    }

    fn keep(&mut self, data: &[u8]) {
        let Some(why) = self.parser.feed(data) else { return };
        // The recording keeps no more of this answer: it ends here, as what it amounted to
        // so far, while the runtime goes on getting the rest.
        let shared = &self.open.shared;
        let n = self.open.exchange;
        let outcome = self.parser.so_far_outcome();
        shared.record().notes.push(format!(
            "exchange {n}: {why}; the recording keeps its first {} bytes, written as {}, while the runtime got all of it",
            self.parser.fed,
            describe(&outcome)
        ));
        shared.end(n, outcome);
    }

    fn complete(&mut self) {
        self.ended = true;
        let outcome = self.parser.finish();
        if self.parser.kind == BodyKind::Json && !self.parser.cut && matches!(outcome, Outcome::Dropped { .. }) {
            self.open.shared.record().notes.push(format!(
                "exchange {}: the upstream's whole answer is not {} (not JSON, or not UTF-8); recorded as a stream dropped at its start",
                self.open.exchange,
                self.parser.api.what()
            ));
        }
        self.open.shared.end(self.open.exchange, outcome);
        if self.parser.api == Api::Responses {
            self.open.shared.chain(self.open.exchange, self.parser.response_id.take());
        }
    }

    fn broken(&mut self) {
        self.ended = true;
        let outcome = match self.parser.kind {
            BodyKind::Error(_) => self.parser.finish(),
            _ => self.parser.dropped(),
        };
        self.open.shared.end(self.open.exchange, outcome);
    }
}

/// A recorded outcome in a few words, for a note.
fn describe(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Reply { .. } => "a reply".to_string(),
        Outcome::Error { status, .. } => format!("an error with status {status}"),
        Outcome::Hang | Outcome::Open => "a hang".to_string(),
        Outcome::Dropped { chunks, .. } => format!("a stream dropped after {chunks} chunks"),
    }
}

/// What an upstream answer's body is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BodyKind {
    /// A chat completion or a message as server-sent events.
    Sse,
    /// A chat completion or a message as one JSON body.
    Json,
    /// An error answer with this status.
    Error(u16),
}

/// Reads an upstream answer as it passes: a JSON body, SSE chunks with their deltas, or an
/// error body, of its [`Api`]. It keeps at most `limit` bytes of one answer and at most
/// [`SSE_EVENT_BYTES_MAX`] of one unfinished SSE event, and reads each byte once.
struct Parser {
    api: Api,
    kind: BodyKind,
    /// The most bytes kept.
    limit: usize,
    /// Bytes taken in so far (at most `limit`).
    fed: usize,
    /// Set once the parser stopped taking bytes in.
    cut: bool,
    buffer: Vec<u8>,
    /// How much of `buffer` is known to hold no event end.
    scanned: usize,
    /// SSE data chunks seen (not counting Chat's `[DONE]` nor Anthropic's `ping`s, which carry
    /// nothing a replay sends).
    chunks: usize,
    done: bool,
    text: String,
    /// Per call index (Chat's call index, Anthropic's block index, Responses' output index):
    /// id, name, arguments so far.
    calls: std::collections::BTreeMap<u64, (String, String, String)>,
    /// A Responses answer's id, for a later `previous_response_id`.
    response_id: Option<String>,
}

impl Parser {
    fn new(api: Api, kind: BodyKind, limit: usize) -> Parser {
        Parser {
            api,
            kind,
            limit,
            fed: 0,
            cut: false,
            buffer: Vec::new(),
            scanned: 0,
            chunks: 0,
            done: false,
            text: String::new(),
            calls: Default::default(),
            response_id: None,
        }
    }

    #[cfg(test)]
    fn sse() -> Parser {
        Parser::new(Api::Chat, BodyKind::Sse, usize::MAX)
    }

    /// Takes `data` in; `Some(why)` the moment the parser stops keeping the answer.
    fn feed(&mut self, data: &[u8]) -> Option<String> {
        if self.cut {
            return None;
        }
        let room = self.limit.saturating_sub(self.fed);
        let taken = &data[..data.len().min(room)];
        self.fed += taken.len();
        if let Some(more) = growth_within(self.buffer.len(), self.buffer.capacity(), taken.len(), self.limit) {
            self.buffer.reserve_exact(more);
        }
        self.buffer.extend_from_slice(taken);
        if self.kind == BodyKind::Sse {
            self.events();
            let event_max = SSE_EVENT_BYTES_MAX.min(self.limit);
            if self.buffer.len() > event_max {
                self.cut = true;
                self.buffer = Vec::new();
                return Some(format!("an SSE event ran past {event_max} bytes without the blank line that ends it"));
            }
        }
        if taken.len() < data.len() {
            self.cut = true;
            // An error's message is read from what was kept; a reply cut short is recorded
            // as the chunks that came, so its bytes are no longer needed.
            if !matches!(self.kind, BodyKind::Error(_)) {
                self.buffer = Vec::new();
            }
            return Some(format!("the answer is longer than --max-reply-bytes ({} bytes)", self.limit));
        }
        None
    }

    /// Reads every complete SSE event in the buffer, then drops them from it at once; the
    /// search for an event's end resumes where the last one stopped.
    fn events(&mut self) {
        let mut start = 0;
        loop {
            // A separator may straddle the previous read: look back 3 bytes.
            let from = self.scanned.saturating_sub(3).max(start);
            let Some((len, sep)) = find_event_end(&self.buffer[from..]) else {
                self.scanned = self.buffer.len();
                break;
            };
            let end = from + len;
            let event = String::from_utf8_lossy(&self.buffer[start..end]).into_owned();
            start = end + sep;
            self.scanned = start;
            self.event(&event);
        }
        self.buffer.drain(..start);
        self.scanned -= start;
    }

    fn event(&mut self, text: &str) {
        let data: Vec<&str> =
            text.lines().filter_map(|l| l.strip_prefix("data:")).map(|d| d.strip_prefix(' ').unwrap_or(d)).collect();
        if data.is_empty() {
            return;
        }
        let payload = data.join("\n");
        if self.api == Api::Chat && payload.trim() == "[DONE]" {
            self.done = true;
            return;
        }
        let chunk: serde_json::Value = serde_json::from_str(&payload).unwrap_or_default();
        match self.api {
            Api::Messages => return self.message_event(&chunk),
            Api::Responses => return self.response_event(&chunk),
            Api::Chat => {}
        }
        self.chunks += 1;
        let delta = &chunk["choices"][0]["delta"];
        if let Some(t) = delta["content"].as_str() {
            self.push_text(t);
        }
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let index = call["index"].as_u64().unwrap_or(0);
            let entry = self.calls.entry(index).or_default();
            if let Some(id) = call["id"].as_str() {
                entry.0.push_str(id);
            }
            if let Some(name) = call["function"]["name"].as_str() {
                entry.1.push_str(name);
            }
            if let Some(args) = call["function"]["arguments"].as_str() {
                entry.2.push_str(args);
            }
        }
    }

    fn push_text(&mut self, t: &str) {
        // The text never holds more than the bytes fed: its capacity stays within the limit
        // too.
        if let Some(more) = growth_within(self.text.len(), self.text.capacity(), t.len(), self.limit) {
            self.text.reserve_exact(more);
        }
        self.text.push_str(t);
    }

    /// One event of a Messages stream: `content_block_start` opens a `tool_use` block (its id
    /// and name), `content_block_delta` adds text (`text_delta`) or a call's input JSON
    /// (`input_json_delta`), `message_stop` ends the message; every other event (thinking
    /// deltas, `message_delta`, an `error` mid-stream) adds nothing a reply holds.
    fn message_event(&mut self, event: &serde_json::Value) {
        let kind = event["type"].as_str().unwrap_or_default();
        if kind == "ping" {
            return;
        }
        self.chunks += 1;
        let index = event["index"].as_u64().unwrap_or(0);
        match kind {
            "content_block_start" if event["content_block"]["type"] == "tool_use" => {
                let block = &event["content_block"];
                let entry = self.calls.entry(index).or_default();
                entry.0.push_str(block["id"].as_str().unwrap_or_default());
                entry.1.push_str(block["name"].as_str().unwrap_or_default());
                // An input given whole at the start (none is streamed after it).
                if block["input"].as_object().is_some_and(|o| !o.is_empty()) {
                    entry.2.push_str(&block["input"].to_string());
                }
            }
            "content_block_start" => {
                self.push_text(event["content_block"]["text"].as_str().unwrap_or_default());
            }
            "content_block_delta" => {
                let delta = &event["delta"];
                match delta["type"].as_str().unwrap_or_default() {
                    "text_delta" => self.push_text(delta["text"].as_str().unwrap_or_default()),
                    "input_json_delta" => {
                        let piece = delta["partial_json"].as_str().unwrap_or_default();
                        self.calls.entry(index).or_default().2.push_str(piece);
                    }
                    _ => {}
                }
            }
            "message_stop" => self.done = true,
            _ => {}
        }
    }

    /// One event of a Responses stream: `response.output_text.delta`s are the text, a
    /// `function_call` item added opens a call (its `call_id` and name) whose
    /// `response.function_call_arguments.delta`s are its arguments, and `response.completed`
    /// ends the answer with the whole response, which then stands for what the deltas said.
    fn response_event(&mut self, event: &serde_json::Value) {
        self.chunks += 1;
        let index = event["output_index"].as_u64().unwrap_or(0);
        match event["type"].as_str().unwrap_or_default() {
            "response.created" | "response.in_progress" => {
                self.response_id = event["response"]["id"].as_str().map(String::from);
            }
            "response.output_item.added" if event["item"]["type"] == "function_call" => {
                let item = &event["item"];
                let entry = self.calls.entry(index).or_default();
                entry.0.push_str(item["call_id"].as_str().unwrap_or_default());
                entry.1.push_str(item["name"].as_str().unwrap_or_default());
                entry.2.push_str(item["arguments"].as_str().unwrap_or_default());
            }
            "response.output_text.delta" => self.push_text(event["delta"].as_str().unwrap_or_default()),
            "response.function_call_arguments.delta" => {
                self.calls.entry(index).or_default().2.push_str(event["delta"].as_str().unwrap_or_default());
            }
            "response.completed" => {
                self.done = true;
                self.response_id = event["response"]["id"].as_str().map(String::from).or(self.response_id.take());
                if let Outcome::Reply { text, calls } = whole_response(&event["response"]) {
                    self.text = text;
                    self.calls = calls.into_iter().enumerate().map(|(k, c)| (k as u64, c)).collect();
                }
            }
            _ => {}
        }
    }

    /// The calls so far. A Messages `tool_use` block whose input never came is `{}` (the
    /// input Anthropic gives a call without arguments).
    fn calls_so_far(&self) -> Vec<(String, String, String)> {
        let empty = |args: &String| self.api == Api::Messages && args.is_empty();
        self.calls
            .values()
            .map(|(id, name, args)| (id.clone(), name.clone(), if empty(args) { "{}".into() } else { args.clone() }))
            .collect()
    }

    fn so_far(&self) -> (String, Vec<(String, String, String)>) {
        (self.text.clone(), self.calls_so_far())
    }

    /// A stream broken here: the chunks, text and calls that came.
    fn dropped(&self) -> Outcome {
        let (text, calls) = self.so_far();
        Outcome::Dropped { chunks: self.chunks, text, calls }
    }

    /// What the answer amounts to where the parser stopped keeping it: the text and calls
    /// move into the outcome, so that they are held once.
    fn so_far_outcome(&mut self) -> Outcome {
        match self.kind {
            BodyKind::Error(_) => self.finish(),
            _ => {
                let text = std::mem::take(&mut self.text);
                let calls = self.calls_so_far();
                self.calls.clear();
                Outcome::Dropped { chunks: self.chunks, text, calls }
            }
        }
    }

    fn finish(&mut self) -> Outcome {
        match self.kind {
            BodyKind::Error(status) => {
                let (kind, message) = error_of(&self.buffer);
                Outcome::Error { status, kind, message }
            }
            // The body ended cleanly but without `[DONE]`: the runtime saw a broken stream.
            BodyKind::Sse if !self.done => self.dropped(),
            BodyKind::Sse => {
                let (text, calls) = self.so_far();
                Outcome::Reply { text, calls }
            }
            BodyKind::Json => {
                let value: serde_json::Value = match serde_json::from_slice(&self.buffer) {
                    Ok(v) => v,
                    Err(_) => return Outcome::Dropped { chunks: 0, text: String::new(), calls: Vec::new() },
                };
                match self.api {
                    Api::Messages => return whole_message(&value),
                    Api::Responses => {
                        self.response_id = value["id"].as_str().map(String::from);
                        return whole_response(&value);
                    }
                    Api::Chat => {}
                }
                let message = &value["choices"][0]["message"];
                if !message.is_object() {
                    // JSON, but no chat completion (`{}`, an error object with a 200): as a
                    // body that is not JSON, with the same note.
                    return Outcome::Dropped { chunks: 0, text: String::new(), calls: Vec::new() };
                }
                let text = message["content"].as_str().unwrap_or("").to_string();
                let calls = message["tool_calls"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| {
                        let text = |v: &serde_json::Value| v.as_str().unwrap_or("").to_string();
                        // Arguments are a JSON text; an upstream that sends the object itself
                        // is taken at its word.
                        let args = match &c["function"]["arguments"] {
                            serde_json::Value::String(a) => a.clone(),
                            serde_json::Value::Null => String::new(),
                            other => other.to_string(),
                        };
                        (text(&c["id"]), text(&c["function"]["name"]), args)
                    })
                    .collect();
                Outcome::Reply { text, calls }
            }
        }
    }
}

/// A whole Messages answer: its `text` blocks joined and its `tool_use` blocks as calls; JSON
/// that is no message (`{}`, an error object with a 200) is recorded as a body that is not
/// JSON is, a stream dropped at its start (with a note).
fn whole_message(value: &serde_json::Value) -> Outcome {
    let Some(blocks) = value["content"].as_array().filter(|_| value["type"] == "message") else {
        return Outcome::Dropped { chunks: 0, text: String::new(), calls: Vec::new() };
    };
    let text = blocks.iter().filter(|b| b["type"] == "text").filter_map(|b| b["text"].as_str()).collect();
    let calls = blocks
        .iter()
        .filter(|b| b["type"] == "tool_use")
        .map(|b| {
            let text = |v: &serde_json::Value| v.as_str().unwrap_or("").to_string();
            let input = if b["input"].is_null() { "{}".to_string() } else { b["input"].to_string() };
            (text(&b["id"]), text(&b["name"]), input)
        })
        .collect();
    Outcome::Reply { text, calls }
}

/// A whole Responses answer (`"object": "response"`): its `message` items' `output_text`
/// parts joined and its `function_call` items as calls (`call_id`, `name`, `arguments`); JSON
/// that is no response is recorded as a body that is not JSON is.
fn whole_response(value: &serde_json::Value) -> Outcome {
    let Some(items) = value["output"].as_array().filter(|_| value["object"] == "response") else {
        return Outcome::Dropped { chunks: 0, text: String::new(), calls: Vec::new() };
    };
    let text = items
        .iter()
        .filter(|i| i["type"] == "message")
        .flat_map(|i| i["content"].as_array().into_iter().flatten())
        .filter(|p| p["type"] == "output_text")
        .filter_map(|p| p["text"].as_str())
        .collect();
    let calls = items
        .iter()
        .filter(|i| i["type"] == "function_call")
        .map(|i| {
            let text = |v: &serde_json::Value| v.as_str().unwrap_or("").to_string();
            (text(&i["call_id"]), text(&i["name"]), text(&i["arguments"]))
        })
        .collect();
    Outcome::Reply { text, calls }
}

/// How much to reserve (beyond `len`) in a buffer of `capacity` that must take `more` bytes,
/// never past `limit`: doubling up to 1 MiB, then the whole limit at once when it is at most
/// 64 MiB (doubling on would leave up to twice the limit allocated and hold the old block
/// beside the new one at every step, which the allocator keeps resident; one reservation is
/// made resident only as far as it is written), doubling again past that. `None`: it fits.
fn growth_within(len: usize, capacity: usize, more: usize, limit: usize) -> Option<usize> {
    const SMALL: usize = 1 << 20;
    const RESERVE_MAX: usize = 64 << 20;
    let needed = len + more;
    let grown = if needed > SMALL && limit <= RESERVE_MAX {
        limit
    } else {
        capacity.saturating_mul(2).min(if needed <= SMALL { SMALL } else { usize::MAX })
    };
    (needed > capacity).then(|| needed.max(grown).min(limit.max(needed)) - len)
}

/// Where the first SSE event in `buffer` ends: its length and the separator's.
fn find_event_end(buffer: &[u8]) -> Option<(usize, usize)> {
    // One pass: the first `\n\n` or `\r\n\r\n`, whichever comes first.
    let mut i = 0;
    while let Some(offset) = buffer[i..].iter().position(|b| *b == b'\n') {
        let at = i + offset;
        if buffer.get(at + 1) == Some(&b'\n') {
            return Some((at, 2));
        }
        if at >= 1 && buffer[at - 1] == b'\r' && buffer.get(at + 1..at + 3) == Some(b"\r\n") {
            return Some((at - 1, 4));
        }
        i = at + 1;
    }
    None
}

/// The calls of an [`Outcome`] as conversation types (arguments that are not JSON are kept as
/// the text they are, as the wire's request conversion keeps them).
pub fn calls_of(calls: &[(String, String, String)]) -> Vec<ToolCall> {
    calls
        .iter()
        .map(|(id, name, args)| {
            let args = serde_json::from_str(args).unwrap_or_else(|_| serde_json::Value::String(args.clone()));
            ToolCall { id: id.clone(), name: name.clone(), args: Arc::new(args) }
        })
        .collect()
}

/// `recording` fed to `scenario`'s script in the order it happened, as if `rehearsal serve`
/// had answered it: each request attributed as `dialect` spells spawn calls and answered by
/// its lane, the request checks run, the script's use counted. A reply the script would give
/// that is not the one recorded (a request bound to another lane) is a failed check naming
/// the exchange. No time passes and no socket is opened: the times are the recording's.
pub fn played(scenario: &Scenario, dialect: Dialect, recording: &Recording) -> WireRun {
    let mut bridge = Bridge::new(scenario, Arc::new(dialect), Vec::new());
    let mut findings = recording.findings.clone();
    let mut differing = Vec::new();
    let mut disconnects = Vec::new();
    for event in &recording.events {
        match *event {
            Event::Arrived(n) => {
                let e = &recording.exchanges[n];
                let (number, plan) = bridge.request(&e.converted, e.model.as_deref(), e.arrived, None);
                debug_assert_eq!(number, n, "the bridge numbers exchanges in arrival order");
                match plan {
                    Plan::Answer(answer) => {
                        if let Some(why) = differs(&answer.kind, &e.outcome) {
                            let who = bridge.alias(n).unwrap_or_default();
                            differing.push(format!("exchange {n} ({who}): the scenario answers {why}"));
                        }
                        if matches!(e.outcome, Outcome::Hang | Outcome::Open) {
                            disconnects.push(Disconnect {
                                request: n + 1,
                                exchange: n,
                                alias: bridge.alias(n).unwrap_or_default(),
                                held_ms: e.ended.unwrap_or(recording.elapsed).saturating_sub(e.arrived).as_millis()
                                    as u64,
                                hang: true,
                                peer: None,
                                since: None,
                                gave_up: None,
                            });
                        }
                    }
                    Plan::Unattributed(why) => {
                        findings.push(WireFinding {
                            request: n + 1,
                            kind: FindingKind::Unattributed,
                            message: format!("exchange {n}: {why}"),
                        });
                    }
                    Plan::Side(_) | Plan::Halted(_) => {}
                }
            }
            Event::Replied(n) => {
                let e = &recording.exchanges[n];
                if let Outcome::Reply { text, calls } = &e.outcome {
                    let reply = LlmReply { text: text.clone(), tool_calls: calls_of(calls) };
                    bridge.replied(n, &reply, e.ended.unwrap_or(e.arrived));
                }
            }
            Event::Failed(n) => bridge.failed(n),
        }
    }
    let (lane_use, reply_use) = bridge.lane_use();
    let mut failed_checks = bridge.failed_checks();
    failed_checks.extend(differing);
    WireRun {
        side: bridge.record(),
        exchanges: bridge.exchanges(),
        findings,
        disconnects,
        halts: bridge.halts(),
        failed_checks,
        lane_use,
        reply_use,
        end: if bridge.used_up() { End::Script } else { End::Caller },
        elapsed: recording.elapsed,
        requests: recording.requests,
        barrier: Vec::new(),
        unreplied: recording
            .exchanges
            .iter()
            .enumerate()
            .filter_map(|(n, e)| match &e.outcome {
                Outcome::Error { status, kind, .. } => {
                    Some((n, format!("error {status} {}", kind.as_deref().unwrap_or("(no type)"))))
                }
                Outcome::Hang | Outcome::Open => Some((n, "a hang".to_string())),
                Outcome::Dropped { chunks, .. } => Some((n, format!("a stream dropped after {chunks} chunks"))),
                Outcome::Reply { .. } => None,
            })
            .collect(),
        // A recording is judged as played back from its file, where no header was kept.
        labels: bridge.labels(),
        agent_header: AgentHeader::default(),
    }
}

/// How the scripted answer differs from the recorded outcome, if it does.
fn differs(kind: &AnswerKind, outcome: &Outcome) -> Option<String> {
    let same_calls = |a: &[ToolCall], b: &[(String, String, String)]| {
        a.len() == b.len() && a.iter().zip(calls_of(b)).all(|(x, y)| x.name == y.name && x.args == y.args)
    };
    let ok = match (kind, outcome) {
        (AnswerKind::Reply(r, None), Outcome::Reply { text, calls }) => {
            r.text == *text && same_calls(&r.tool_calls, calls)
        }
        (AnswerKind::Reply(r, Some(n)), Outcome::Dropped { chunks, text, calls }) => {
            n == chunks && r.text == *text && same_calls(&r.tool_calls, calls)
        }
        (AnswerKind::Error(m, status, _), Outcome::Error { status: s, message, .. }) => {
            m == message && status.unwrap_or(500) == (*s).clamp(400, 599)
        }
        (AnswerKind::Hang, Outcome::Hang | Outcome::Open) => true,
        _ => false,
    };
    if ok {
        return None;
    }
    let calls_of_reply = |calls: &[ToolCall]| -> String {
        let shown: Vec<String> =
            calls.iter().map(|c| format!("{} {}", c.name, crate::wire::excerpt(&c.args.to_string()))).collect();
        if shown.is_empty() { String::new() } else { format!(" and calls [{}]", shown.join(", ")) }
    };
    let said = match kind {
        AnswerKind::Reply(r, _) => format!("text {}{}", crate::trace::quoted(&r.text), calls_of_reply(&r.tool_calls)),
        AnswerKind::Error(m, _, _) => format!("an error {}", crate::trace::quoted(m)),
        AnswerKind::Hang => "a hang".to_string(),
    };
    let was = match outcome {
        Outcome::Reply { text, calls } => {
            format!("text {}{}", crate::trace::quoted(text), calls_of_reply(&calls_of(calls)))
        }
        Outcome::Error { message, .. } => format!("an error {}", crate::trace::quoted(message)),
        Outcome::Hang | Outcome::Open => "a hang".to_string(),
        Outcome::Dropped { chunks, .. } => format!("a stream dropped after {chunks} chunks"),
    };
    Some(format!("{said}, the recording has {was}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_sse_stream_is_read_into_text_and_calls_across_split_frames() {
        let mut p = Parser::sse();
        let frames = concat!(
            "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\r\n\r\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"function\":{\"name\":\"f\",\"arguments\":\"\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"a\\\":1}\"}}]}}]}\n\n",
            "data: [DONE]\n\n"
        );
        for piece in frames.as_bytes().chunks(7) {
            p.feed(piece);
        }
        assert_eq!(p.chunks, 5);
        assert_eq!(
            p.finish(),
            Outcome::Reply { text: "Hello".into(), calls: vec![("c1".into(), "f".into(), "{\"a\":1}".into())] }
        );
    }

    #[test]
    fn a_messages_stream_is_read_into_text_and_calls_with_pings_not_counted() {
        let mut p = Parser::new(Api::Messages, BodyKind::Sse, usize::MAX);
        let frames = concat!(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"content\":[]}}\n\n",
            "event: ping\ndata: {\"type\":\"ping\"}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"On it.\"}}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"f\",\"input\":{}}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\":\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"1}\"}}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t2\",\"name\":\"g\",\"input\":{}}}\n\n",
        );
        for piece in frames.as_bytes().chunks(7) {
            p.feed(piece);
        }
        assert_eq!(p.chunks, 7, "every event but the ping");
        let calls = vec![("t1".into(), "f".into(), "{\"a\":1}".into()), ("t2".into(), "g".into(), "{}".into())];
        assert_eq!(p.so_far_outcome(), Outcome::Dropped { chunks: 7, text: "On it.".into(), calls });
        p.feed(b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
        assert!(p.done);
    }

    #[test]
    fn an_sse_event_that_never_ends_is_cut_at_its_bound_and_the_buffer_freed() {
        // An upstream that never writes the blank line ending an event: the parser
        // stops at the bound instead of buffering and rescanning without end.
        let mut p = Parser::new(Api::Chat, BodyKind::Sse, usize::MAX);
        p.feed(b"data: {\"choices\":[{\"delta\":{\"content\":\"ok\"}}]}\n\n");
        let line = vec![b'x'; 64 << 10];
        let mut why = None;
        for _ in 0..((SSE_EVENT_BYTES_MAX >> 16) + 2) {
            if let Some(w) = p.feed(&line) {
                why = Some(w);
                break;
            }
        }
        assert_eq!(why.as_deref(), Some("an SSE event ran past 1048576 bytes without the blank line that ends it"));
        assert!(p.buffer.capacity() == 0, "the unfinished event is dropped");
        assert_eq!(p.feed(b"\n\n"), None, "nothing is taken in after the cut");
        assert_eq!(p.so_far_outcome(), Outcome::Dropped { chunks: 1, text: "ok".into(), calls: Vec::new() });
    }

    #[test]
    fn a_separator_split_across_reads_is_found_once() {
        let mut p = Parser::sse();
        for piece in ["data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\r", "\n\r", "\n", "data: [DONE]\n", "\n"] {
            p.feed(piece.as_bytes());
        }
        assert_eq!(p.chunks, 1);
        assert_eq!(p.finish(), Outcome::Reply { text: "a".into(), calls: Vec::new() });
    }

    #[test]
    fn a_reply_past_the_limit_is_kept_to_the_limit() {
        let mut p = Parser::new(Api::Chat, BodyKind::Sse, 100);
        let frame = "data: {\"choices\":[{\"delta\":{\"content\":\"0123456789\"}}]}\n\n";
        assert_eq!(p.feed(frame.as_bytes()), None);
        assert_eq!(
            p.feed(frame.as_bytes()).as_deref(),
            Some("the answer is longer than --max-reply-bytes (100 bytes)")
        );
        assert_eq!(p.fed, 100);
        assert_eq!(p.so_far_outcome(), Outcome::Dropped { chunks: 1, text: "0123456789".into(), calls: Vec::new() });
    }

    #[test]
    fn growth_stays_within_the_limit() {
        assert_eq!(growth_within(0, 0, 10, 1 << 30), Some(10));
        assert_eq!(growth_within(10, 10, 10, 1 << 30), Some(10), "doubling while small");
        assert_eq!(growth_within(1 << 20, 1 << 20, 1, 16 << 20), Some(15 << 20), "then the limit at once");
        assert_eq!(growth_within(5, 10, 5, 100), None);
        assert_eq!(growth_within(100, 100, 50, 100), Some(50), "never less than needed");
    }

    #[test]
    fn a_stream_without_done_is_a_drop_after_its_chunks() {
        let mut p = Parser::sse();
        p.feed(b"data: {\"choices\":[{\"delta\":{\"content\":\"Cut\"}}]}\n\n");
        assert_eq!(p.finish(), Outcome::Dropped { chunks: 1, text: "Cut".into(), calls: Vec::new() });
    }

    /// A recording of one request, `[user "hi"]`, answered `answered`.
    fn one_exchange(answered: &str) -> Recording {
        let request: ChatRequest = serde_json::from_str(r#"{"messages":[{"role":"user","content":"hi"}]}"#).unwrap();
        Recording {
            exchanges: vec![RecordedExchange {
                api: Api::Chat,
                converted: request.convert().unwrap(),
                model: None,
                streamed: false,
                arrived: Duration::ZERO,
                ended: Some(Duration::from_millis(5)),
                outcome: Outcome::Reply { text: answered.into(), calls: Vec::new() },
            }],
            events: vec![Event::Arrived(0), Event::Replied(0)],
            requests: 1,
            ..Recording::default()
        }
    }

    #[test]
    fn a_script_that_answers_other_than_the_recording_is_a_failed_check() {
        // The writer's own guard: the file's script fed the recording must give the replies
        // recorded; here it does not, and the played run says which exchange.
        let text = r#"{"name":"p","lanes":[{"agent":"main","replies":[{"text":"bye"}]}],"turns":[{"user":"hi"}]}"#;
        let scenario = crate::scenario::parse(std::path::Path::new("p.json"), text).unwrap();
        let generic = || Dialect::builtin("generic").unwrap();
        let run = played(&scenario, generic(), &one_exchange("hello"));
        assert_eq!(
            run.failed_checks,
            vec![r#"exchange 0 (main): the scenario answers text "bye", the recording has text "hello""#]
        );
        let run = played(&scenario, generic(), &one_exchange("bye"));
        assert!(run.failed_checks.is_empty(), "{:?}", run.failed_checks);
        assert_eq!(run.lane_use, vec![1]);
    }

    #[test]
    fn upstream_urls_are_http_only() {
        let err = Upstream::parse("HTTPS://api.openai.com/v1").unwrap_err();
        assert!(matches!(&err, ServeError::UpstreamHttps { url } if url == "https://api.openai.com/v1"), "{err:?}");
        assert!(err.to_string().contains("https is not supported"), "{err}");
        let err = Upstream::parse("http://127.0.0.1:99999/v1").unwrap_err();
        assert!(matches!(&err, ServeError::UpstreamPort { port, .. } if port == "99999"), "{err:?}");
        assert_eq!(err.to_string(), "--upstream http://127.0.0.1:99999/v1: `99999` is not a port (1 to 65535)");
        let err = Upstream::parse("http://127.0.0.1:9/v\u{1b}1").unwrap_err();
        assert!(matches!(&err, ServeError::UpstreamCharacter { character: '\u{1b}', .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            "--upstream http://127.0.0.1:9/v\\u{1b}1: '\\u{1b}' is not a URL character (percent-encode it)"
        );
        let u = Upstream::parse("http://127.0.0.1:9/v1/").unwrap();
        assert_eq!((u.authority.as_str(), u.base.as_str()), ("127.0.0.1:9", "/v1"));
        assert_eq!(Upstream::parse("http://localhost").unwrap().authority, "localhost:80");
    }
}

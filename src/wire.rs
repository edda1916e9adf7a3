//! The wire: rehearsal plays the model over OpenAI Chat Completions, so that an agent runtime
//! in any language (Python, TypeScript, Go, a Rust workspace that will not link into a test)
//! is judged by the same scenario files and model-side oracles as the built-in core.
//!
//! - [`api`]: the request, response, chunk, error and model-list types (serde).
//! - [`clock`]: virtual time across the process boundary (docs/clock-protocol.md): the
//!   [`clock::VirtualClock`] state machine and the TCP endpoint a runtime's clock shim talks to.
//! - [`stream`]: a reply as SSE chunks, as the `openai` SDKs parse them.
//! - `script`: the bridge from an attributed request to its lane's next reply.
//! - `server`: the routes, the body limit, errors as API error objects, real-time waits.
//! - `head`: a connection's first request head, checked before hyper parses it, so that a
//!   head hyper would refuse bare gets an error object and a finding.
//! - `judge`: a finished wire run judged by the model-side oracles, as a [`Verdict`].
//! - [`runtime`]: runtime descriptions, as data: how a runtime is started (env template), its
//!   own limits the oracles judge against, the features it has.
//! - [`drive`]: one scenario played against a runtime's command, once per user turn, then
//!   judged.
//! - [`record`]: a real run through a proxy ([`record::proxy`]) to an upstream model, written
//!   as a scenario (secrets blanked, volatile spans named) and judged.
//! - `process`: what `drive` and `record` share: a turn's command in its own process group
//!   and temp home, killed with every descendant; the clock shim found.
//!
//! The wing has one door: outside `src/wire/`, only the command line (`cli`) imports it
//! (`tests/suite/architecture.rs` holds this).
//!
//! API (what `rehearsal serve` and `rehearsal drive` call):
//!
//! ```no_run
//! # async fn demo(scenario: rehearsal::scenario::Scenario) -> Result<(), rehearsal::wire::ServeError> {
//! use rehearsal::dialect::Dialect;
//! use rehearsal::wire::{Server, ServeOptions};
//! let dialect = Dialect::builtin("generic").expect("a built-in dialect");
//! let server = Server::start(&scenario, dialect, ServeOptions::default()).await?;
//! println!("OPENAI_BASE_URL={}", server.base_url()); // http://127.0.0.1:PORT/v1
//! let end = server.done().await; // the script ended, it stopped, or the idle limit passed
//! let run = server.finish(end).await;
//! let verdict = rehearsal::wire::judge(&scenario, &run);
//! println!("{verdict}");
//! # Ok(()) }
//! ```
//!
//! **Wire times are wall times, unless the clock is on.** An in-process run has a virtual
//! clock; a runtime in another process has its own clock, so a served run measures real time
//! since the server started (`arrived`, `replied` of each exchange), and scripted latencies
//! wait `latency_ms × time_scale` real milliseconds. Rules judged on time (concurrency,
//! timeouts) are judged on those times. Under the clock ([`ServeOptions::clock`],
//! docs/clock-protocol.md) the runtime follows the harness's virtual time instead: latencies
//! are virtual, exchange times are virtual instants, a give-up is recorded at its virtual
//! time ([`Disconnect::gave_up`]), and the record says so (`ModelSide::wall_times` is false).
//!
//! What a wire run judges: the model-side oracles over the exchanges (each request put down
//! to an agent by [`crate::evidence::attribution`]), the scripted request checks, the script's
//! use, and what the server itself saw (malformed, oversized, unattributed or unserved
//! requests: [`WireFinding`]). Expectations on the core's events (`expect.trace`, fragments,
//! `budget_left`, turn outcomes) cannot apply to a runtime seen only from the model's side;
//! [`not_applied`] lists those a scenario holds, and the report says so.
//!
//! What this module deliberately does not do: start the runtime (that is `rehearsal drive`),
//! or read any event of a core.

#[doc(hidden)]
pub mod api;
mod barrier;
pub mod clock;
pub mod drive;
mod head;
mod judge;
pub(crate) mod process;
pub mod record;
pub mod runtime;
mod script;
mod server;
#[doc(hidden)]
pub mod stream;

use std::time::Duration;

use crate::evidence::Exchange;
use crate::evidence::attribution::ModelSide;

pub use barrier::Release;
pub(crate) use judge::judgement;
pub use judge::{GroundTruth, ground_truth, judge, not_applied};
pub use server::{ServeError, ServeOptions, Server};

#[cfg(doc)]
use crate::runner::Verdict;

/// How a served run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// The script had nothing left that must be used, and no request was open.
    Script,
    /// The script stopped the run (an agent without a lane, an exhausted lane, a `when` that
    /// failed, the run budget).
    Stopped,
    /// No request arrived and none was answered for the idle limit.
    Idle,
    /// The caller ended it (the runtime exited, Ctrl-C).
    Caller,
}

/// What the server saw that the runtime is to blame for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireFinding {
    /// The HTTP request's number (arrival order, from 1).
    pub request: usize,
    /// What kind.
    pub kind: FindingKind,
    /// What, in a sentence naming the request.
    pub message: String,
}

/// The most characters of a request's own text that a finding or an error message quotes;
/// longer text is cut there and its length given ([`excerpt`]).
#[doc(hidden)]
pub const QUOTE_CHARS_MAX: usize = 200;

/// The most characters one finding's message holds, whatever it quotes: a net under
/// [`QUOTE_CHARS_MAX`], so that no request can make a report large.
#[doc(hidden)]
pub const FINDING_CHARS_MAX: usize = 1000;

/// `text` as a finding quotes it: whole when it has at most [`QUOTE_CHARS_MAX`] characters,
/// else its start, `…` and its length (`aaaa… (8388608 chars)`).
#[doc(hidden)]
pub fn excerpt(text: &str) -> String {
    excerpt_to(text, QUOTE_CHARS_MAX)
}

/// `text` cut to `max` characters with its length, as [`excerpt`] does.
pub(crate) fn excerpt_to(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((cut, _)) => format!("{}… ({} chars)", &text[..cut], text.chars().count()),
    }
}

/// `at + wait`, or ten years after `at` when that would overflow: a limit given as a library
/// option is not bounded as the command line bounds it, and must not panic.
pub(crate) fn after(at: tokio::time::Instant, wait: Duration) -> tokio::time::Instant {
    at.checked_add(wait).unwrap_or_else(|| at + Duration::from_secs(10 * 365 * 24 * 3_600))
}

impl WireFinding {
    /// A finding about request `request`, its message bounded by [`FINDING_CHARS_MAX`].
    pub fn new(request: usize, kind: FindingKind, message: &str) -> WireFinding {
        WireFinding { request, kind, message: excerpt_to(message, FINDING_CHARS_MAX) }
    }
}

/// The kinds of [`WireFinding`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FindingKind {
    /// The body is not JSON, or not a chat completion request.
    Malformed,
    /// The body is larger than the limit.
    Oversized,
    /// No agent accounts for the request (the model-side attribution oracle reports it too).
    Unattributed,
    /// A route the server does not serve.
    NotServed,
    /// A chat request that came after the script had ended (`rehearsal serve`).
    AfterScript,
}

impl FindingKind {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            FindingKind::Malformed => "malformed request",
            FindingKind::Oversized => "oversized request",
            FindingKind::Unattributed => "unattributed request",
            FindingKind::NotServed => "request not served",
            FindingKind::AfterScript => "request after the script ended",
        }
    }
}

/// A request the client gave up on before its answer came (a `hang`, or a latency longer
/// than the client waits): how a runtime's model timeout shows on the wire. Not a failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Disconnect {
    /// The HTTP request's number.
    pub request: usize,
    /// Its exchange number.
    pub exchange: usize,
    /// The agent it was put down to.
    pub alias: String,
    /// How long it was held, in milliseconds (virtual under the clock, else wall).
    pub held_ms: u64,
    /// Whether the script held it on purpose (`hang`).
    pub hang: bool,
    /// Under the clock: the peer address of its connection.
    pub peer: Option<String>,
    /// Under the clock: the virtual time the request arrived at.
    pub since: Option<Duration>,
    /// Under the clock: the virtual time the client gave up (its connection closed).
    pub gave_up: Option<Duration>,
}

/// The record of a served run.
#[derive(Clone, Debug)]
pub struct WireRun {
    /// The exchanges as the model saw them, in arrival order, with wall times and each one's
    /// attribution.
    pub side: ModelSide,
    /// The agents' exchanges as the script saw them (with their aliases).
    pub exchanges: Vec<Exchange>,
    /// What the server saw that the runtime is to blame for.
    pub findings: Vec<WireFinding>,
    /// Requests the client gave up on.
    pub disconnects: Vec<Disconnect>,
    /// Why the script stopped the run, if it did.
    pub halts: Vec<crate::harness::Halted>,
    /// Request checks that failed.
    pub failed_checks: Vec<String>,
    /// Replies used, per lane.
    pub lane_use: Vec<usize>,
    /// Per lane, per reply: how many requests it answered.
    pub reply_use: Vec<Vec<usize>>,
    /// How it ended.
    pub end: End,
    /// Wall time from the server's start to its finish.
    pub elapsed: Duration,
    /// HTTP requests received.
    pub requests: usize,
    /// Under `--barrier`: every release, in order (empty without one).
    pub barrier: Vec<Release>,
    /// Per exchange answered without a reply, what it was given instead (`error 429
    /// rate_limit_error`, `a hang`, `a stream dropped after 2 chunks`).
    pub unreplied: std::collections::BTreeMap<usize, String>,
    /// Per exchange, in arrival order: the value of the runtime's agent header, when the
    /// request carried it (the ground truth; never read to attribute).
    pub labels: Vec<Option<String>>,
    /// Which header that was, and what a request without it means.
    pub agent_header: AgentHeader,
}

/// The request header in which a runtime names the agent that sent a request: the ground
/// truth rehearsal's attribution is measured against (docs/evidence.md, "The ground truth").
/// The attribution never reads it: a request is put down to an agent from what a model
/// endpoint sees; afterwards the aliases are compared with the runtime's names, and a
/// disagreement is rehearsal's own attribution error, never the runtime's.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentHeader {
    /// The header's name (case does not matter). Default `X-Rehearsal-Agent`.
    #[serde(default = "AgentHeader::default_name")]
    pub name: String,
    /// What a request without it means: `unlabelled` (nothing is compared; the default) or
    /// `root` (the runtime labels its sub-agents only: such a request is the root's).
    #[serde(default)]
    pub absent: Absent,
}

/// What a request without the agent header means.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Absent {
    /// Nothing: the request is not compared.
    #[default]
    Unlabelled,
    /// The root agent sent it.
    Root,
}

impl AgentHeader {
    fn default_name() -> String {
        "X-Rehearsal-Agent".to_string()
    }
}

impl Default for AgentHeader {
    fn default() -> AgentHeader {
        AgentHeader { name: AgentHeader::default_name(), absent: Absent::Unlabelled }
    }
}

/// The exchanges of a served run as lines a person reads (`rehearsal serve --trace`): when
/// each request arrived (milliseconds, labelled `virtual` under the clock and `wall`
/// without it), who it was put down to, what it held, and the reply given and when; then, under
/// the clock, each request the client gave up on, at the virtual time of its give-up.
#[doc(hidden)]
pub fn trace_lines(run: &WireRun) -> Vec<String> {
    use crate::evidence::attribution::Attribution;
    let unit = if run.side.wall_times { "ms wall" } else { "ms virtual" };
    let mut lines: Vec<String> = run
        .side
        .exchanges
        .iter()
        .zip(&run.side.attributions)
        .enumerate()
        .map(|(i, (e, a))| {
            let who = match a {
                Attribution::Agent(a) => format!("{} #{}", a.alias, a.number),
                Attribution::Side(_) => "side request".to_string(),
                Attribution::Unattributed(_) => "unattributed".to_string(),
            };
            let reply = match (&e.reply, e.replied) {
                (Some(r), Some(at)) => {
                    let calls: Vec<String> = r.tool_calls.iter().map(|c| excerpt_to(&c.name, 60)).collect();
                    let what = match (r.content.is_empty(), calls.is_empty()) {
                        (_, false) => format!("calls [{}]", calls.join(", ")),
                        (false, true) => {
                            format!("text {}", crate::trace::quoted(&r.content.chars().take(60).collect::<String>()))
                        }
                        (true, true) => "empty text".to_string(),
                    };
                    format!("{what} at {} {unit}", at.as_millis())
                }
                _ => run.unreplied.get(&i).cloned().unwrap_or_else(|| "no reply".to_string()),
            };
            format!(
                "{} {unit}  exchange {i}  {who}  {} messages, {} tools -> {reply}",
                e.arrived.as_millis(),
                e.messages.len(),
                e.tools.len()
            )
        })
        .collect();
    for d in &run.disconnects {
        if let Some(at) = d.gave_up {
            let what = if d.hang { "held (hang)" } else { "not yet answered" };
            lines.push(format!(
                "{} {unit}  exchange {}  {}  gave up: the client closed its connection after {} ms, {what}",
                at.as_millis(),
                d.exchange,
                d.alias,
                d.held_ms
            ));
        }
    }
    // The barrier's releases, in order: who was let go, and who was held at that moment.
    for (i, r) in run.barrier.iter().enumerate() {
        lines.push(format!(
            "barrier {}  released {} (exchange {})  held {}: {}",
            i + 1,
            r.released,
            r.exchange,
            r.held.len(),
            r.held.join(", ")
        ));
    }
    lines
}

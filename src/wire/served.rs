//! The record of a served run, as data: how it ended, what the server saw that the runtime
//! is to blame for, the requests given up on, the ground truth's header, and the lines a person
//! reads of it (`--trace`).
//!
//! What this module deliberately does not do: serve, judge or print; it holds what the server
//! hands back and the judge reads.

use std::time::Duration;

use crate::evidence::Exchange;
use crate::evidence::attribution::ModelSide;

use super::Release;
use super::{FINDING_CHARS_MAX, excerpt_to};

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
    /// request carried it, whole (a value that is not UTF-8 read as Latin-1): the ground truth,
    /// never read to attribute.
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
    /// The header's name (case does not matter). Default `X-Rehearsal-Agent`. A name HTTP
    /// does not allow is refused: no request could carry it.
    #[serde(default = "AgentHeader::default_name", deserialize_with = "header_name")]
    pub name: String,
    /// What a request without it means: `unlabelled` (nothing is compared; the default) or
    /// `root` (the runtime labels its sub-agents only: such a request is the root's).
    #[serde(default)]
    pub absent: Absent,
    /// Whether one name may stand for several agents in turn: a runtime that runs one agent
    /// object afresh for each call and labels every run with the object's name (smolagents'
    /// managed agents: each call is a new run, a new child, `main/1` then `main/2`). Each agent
    /// still carries one name; a name is no longer one agent. Default `false`: one name, one
    /// agent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reused: bool,
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

/// A header name a request can carry: never found otherwise, so that under `absent: root`
/// every request would read as the root's.
fn header_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let name = <String as serde::Deserialize>::deserialize(d)?;
    match axum::http::HeaderName::from_bytes(name.as_bytes()) {
        Ok(_) => Ok(name),
        Err(_) => Err(serde::de::Error::custom(format!(
            "`{}` is not a header name a request can carry (an HTTP token, as `X-Rehearsal-Agent`)",
            crate::trace::printable(&name)
        ))),
    }
}

impl AgentHeader {
    fn default_name() -> String {
        "X-Rehearsal-Agent".to_string()
    }
}

impl Default for AgentHeader {
    fn default() -> AgentHeader {
        AgentHeader { name: AgentHeader::default_name(), absent: Absent::Unlabelled, reused: false }
    }
}

/// What the model saw of one request, under its `--trace` line, so that a user writing a
/// dialect sees why it went where it went: the tools offered and the last messages (at most
/// two), each cut to [`SEEN_CHARS`] characters.
fn seen(e: &crate::evidence::attribution::ModelExchange) -> Vec<String> {
    use crate::sut::llm::Role;
    let mut out = Vec::new();
    if !e.tools.is_empty() {
        out.push(format!("      tools: {}", excerpt_to(&e.tools.join(", "), SEEN_CHARS)));
    }
    let skip = e.messages.len().saturating_sub(2);
    for (k, m) in e.messages.iter().enumerate().skip(skip) {
        let role = match m.role {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        };
        let calls: Vec<&str> = m.tool_calls.iter().map(|c| c.name.as_str()).collect();
        let calls = if calls.is_empty() { String::new() } else { format!(" calls [{}]", calls.join(", ")) };
        let text = crate::trace::quoted(&excerpt_to(&m.content, SEEN_CHARS));
        out.push(format!("      message {} {role}{calls}: {text}", k + 1));
    }
    out
}

/// How much of a message or tool list `--trace` shows.
const SEEN_CHARS: usize = 100;

/// The exchanges of a served run as lines a person reads (`rehearsal serve --trace`): when
/// each request arrived (milliseconds, labelled `virtual` under the clock and `wall`
/// without it), who it was put down to, what it held (the tools offered and its last messages,
/// indented beneath), and the reply given and when; then, under
/// the clock, each request the client gave up on, at the virtual time of its give-up.
#[doc(hidden)]
pub fn trace_lines(run: &WireRun) -> Vec<String> {
    use crate::evidence::attribution::Attribution;
    let unit = if run.side.wall_times { "ms wall" } else { "ms virtual" };
    let mut lines: Vec<String> = Vec::new();
    for (i, (e, a)) in run.side.exchanges.iter().zip(&run.side.attributions).enumerate() {
        lines.push({
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
        });
        lines.extend(seen(e));
    }
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

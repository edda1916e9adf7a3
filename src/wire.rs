//! The wire: rehearsal plays the model over OpenAI Chat Completions and Anthropic Messages
//! (both read into one conversation, each answered in its own spelling), so that an agent runtime
//! in any language (Python, TypeScript, Go, a Rust workspace that will not link into a test)
//! is judged by the same scenario files and model-side oracles as the built-in core.
//!
//! - [`api`]: the request, response, chunk, error and model-list types (serde); the Anthropic
//!   Messages API's in [`api::anthropic`] and the OpenAI Responses API's in [`api::responses`],
//!   with their events.
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
//! - `fuzz`: generated scenarios driven through a runtime's command, judged from the model's
//!   side, a finding shrunk by re-driving smaller cases and replayed (`rehearsal fuzz --runtime`).
//! - [`record`]: a real run through a proxy ([`record::proxy`]) to an upstream model, written
//!   as a scenario (secrets blanked, volatile spans named) and judged.
//! - `served`: the record of a served run, as data ([`WireRun`] and what it holds).
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
#[cfg(feature = "fuzz")]
pub(crate) mod fuzz;
mod head;
mod judge;
pub(crate) mod process;
pub mod record;
pub mod runtime;
mod script;
mod served;
mod server;
#[doc(hidden)]
pub mod stream;

use std::time::Duration;

pub use barrier::Release;
pub(crate) use judge::judgement;
pub use judge::{GroundTruth, ground_truth, judge, not_applied};
#[doc(hidden)]
pub use served::trace_lines;
pub use served::{Absent, AgentHeader, Disconnect, End, FindingKind, WireFinding, WireRun};
pub use server::{ServeError, ServeOptions, Server};

#[cfg(doc)]
use crate::runner::Verdict;

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

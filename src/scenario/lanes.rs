//! The mock model's script: lanes, their replies and calls, and the checks on the requests
//! they answer.
//!
//! It does not answer requests (the mock LLM does) nor compare recorded requests (`recorded`
//! holds those).

use std::fmt;

use serde::{Deserialize, Serialize};

use super::format::is_zero;
use super::recorded::RecordedRequest;
use super::text::Text;

/// A Rust function answering as the model for one lane: the request in, a reply out (as
/// pydantic-ai's `FunctionModel` does).
#[derive(Clone)]
pub struct ReplyFn(pub std::sync::Arc<dyn Fn(&crate::sut::llm::LlmRequest) -> Reply + Send + Sync>);

impl fmt::Debug for ReplyFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ReplyFn(..)")
    }
}

impl PartialEq for ReplyFn {
    fn eq(&self, other: &ReplyFn) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

/// A script for the agents one selector picks.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Lane {
    /// Selects the agent with this alias (`main`, `main/2`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Selects children whose task contains this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_contains: Option<String>,
    /// Selects children running this profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// The replies, one per request, in order.
    pub replies: Vec<Reply>,
    /// Checked on every request of this lane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_every: Option<Check>,
    /// A Rust function that answers every request of this lane after its scripted replies
    /// are used (scenarios built in code only; never read from or written to a file).
    #[serde(skip)]
    pub respond: Option<ReplyFn>,
}

impl Lane {
    /// The selector, as written.
    pub fn selector(&self) -> String {
        match (&self.agent, &self.task_contains, &self.profile) {
            (Some(a), _, _) => format!("agent {}", crate::trace::quoted(a)),
            (_, Some(t), _) => format!("task_contains {}", crate::trace::quoted(t)),
            (_, _, Some(p)) => format!("profile {}", crate::trace::quoted(p)),
            _ => "no selector".to_string(),
        }
    }
}

/// One scripted reply.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Reply {
    /// The reply's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<Text>,
    /// The reply's tool calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<Call>,
    /// Virtual time before the reply arrives.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub latency_ms: u64,
    /// Instead of a reply: the LLM call fails with this error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// With `error`, over the wire (`rehearsal serve`): the HTTP status of the error answer
    /// (400 to 599; default 500). In-process the call fails with `error` whatever the status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 400, max = 599))]
    pub error_status: Option<u16>,
    /// With `error`, over the wire: the `type` of the API error object (default by status:
    /// `invalid_request_error` for 400, `rate_limit_error` for 429, `server_error` for 5xx, …).
    /// In-process it has no effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_type: Option<String>,
    /// A reply (text and/or calls) whose stream breaks: over the wire a streamed answer sends
    /// this many SSE chunks and then closes the connection without `[DONE]` (a non-streamed
    /// answer closes it with no response). In-process the model call fails, as a dropped
    /// connection fails a client: with the error `stream dropped after N chunks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drop_after_chunks: Option<usize>,
    /// Instead of a reply: no answer ever comes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hang: bool,
    /// What the request this reply answers must hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Check>,
    /// When this reply answers: what the request must hold for it to be chosen. A reply whose
    /// `when` does not hold is passed over if it is `optional` or `repeatable`, and otherwise
    /// stops the run (the script expected it here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<When>,
    /// The reply may be used once or not at all: a request it does not fit (its `when` does
    /// not hold) goes to the next reply, and leaving it unused is no failure.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
    /// The reply may be used any number of times, none included: it answers every request
    /// its `when` holds for, and the first that it does not goes on to the next reply.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub repeatable: bool,
}

/// What a request must hold for a reply to answer it (every field given must hold).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct When {
    /// Texts some message must contain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contains: Vec<Text>,
    /// Texts no message may contain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub absent: Vec<Text>,
    /// Tasks (`$taskN`, the N-th task the run queued) whose result the request holds, as a
    /// notification or in a `subagent.wait` answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub result_of: Vec<String>,
    /// Tasks (`$taskN`) whose result the request does not hold yet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub no_result_of: Vec<String>,
    /// The exact number of messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<usize>,
    /// At least this many messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_messages: Option<usize>,
}

/// One scripted tool call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Call {
    /// The tool name.
    pub tool: String,
    /// Its arguments (for a built-in tool, those its parameter schema accepts).
    #[serde(default = "empty_object", skip_serializing_if = "is_empty_object")]
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    pub args: serde_json::Value,
    /// The tool is deliberately not declared (to show the unknown-tool answer).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub undeclared: bool,
    /// The arguments of a built-in tool are deliberately not what it accepts (an unknown
    /// name, a wrong type, a missing argument, a session named like a kind): sent as written,
    /// not checked at load.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bad_args: bool,
}

pub(super) fn empty_object() -> serde_json::Value {
    serde_json::json!({})
}

pub(super) fn is_empty_object(v: &serde_json::Value) -> bool {
    v.as_object().is_some_and(|o| o.is_empty())
}

/// Assertions on one request the core sent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct Check {
    /// Number of messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<usize>,
    /// Texts some message must contain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contains: Vec<Text>,
    /// Texts no message may contain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub absent: Vec<Text>,
    /// The first message's exact content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_message: Option<Text>,
    /// The last message's exact content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_message: Option<Text>,
    /// The exact content of the message at position `n` (from 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nth_message: Option<NthMessage>,
    /// The exact tool names offered, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools_include: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools_exclude: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Vec<String>>,
    /// Texts the system prompt must contain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub system_contains: Vec<String>,
    /// Texts the system prompt may not contain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub system_absent: Vec<String>,
    /// The request's messages are exactly the parent's conversation at the `subagent` call
    /// that forked this child, followed by the child's prompt.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fork_of_parent: bool,
    /// The request as a real run sent it (`rehearsal record`): the request must hold the same
    /// messages (roles, texts, calls' tools and arguments; not call ids), and the same system
    /// text when one is given, once every span a `volatile` pattern matches is blanked in
    /// both. A miss names the first differing message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded: Option<RecordedRequest>,
    /// Why this check holds in the default tie order only: it is skipped in explored orders,
    /// and the report says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_dependent: Option<String>,
}

/// The exact content of one message of a request, by its position.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NthMessage {
    /// The message's position, counting from 1 (the first message is 1).
    pub n: usize,
    /// Its exact content.
    pub text: Text,
}

//! Requests as `rehearsal record` wrote them (`check.recorded`), and the `volatile` patterns
//! that blank what changes between runs.
//!
//! It holds the format only; the comparison with a replayed request is the mock's.

use serde::{Deserialize, Serialize};

use super::lanes::{empty_object, is_empty_object};

/// A request as it was recorded (`check.recorded`), compared with the one sent on replay.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecordedRequest {
    /// Regular expressions (the `regex` crate's syntax) of what changes from run to run (the
    /// date bub writes into every user message): each match, in the recorded texts and in
    /// the request's, is replaced by `…` before they are compared.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volatile: Vec<String>,
    /// The system text (every `system` and `developer` message, joined by a blank line); not
    /// compared when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// The messages, in order.
    pub messages: Vec<RecordedMessage>,
}

/// One message of a [`RecordedRequest`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecordedMessage {
    /// `user`, `assistant` or `tool`.
    pub role: RecordedRole,
    /// Its text.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub content: String,
    /// An assistant message's calls, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<RecordedCall>,
}

/// Who wrote a [`RecordedMessage`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RecordedRole {
    /// The user, or the runtime speaking for the user.
    User,
    /// The model.
    Assistant,
    /// A tool result.
    Tool,
}

/// One call of a recorded assistant message: its tool and arguments (ids differ between
/// runs, so they are not kept).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecordedCall {
    /// The tool name.
    pub tool: String,
    /// Its arguments.
    #[serde(default = "empty_object", skip_serializing_if = "is_empty_object")]
    pub args: serde_json::Value,
}

/// The most compiled size of one `volatile` pattern, in bytes (the `regex` crate's own
/// bound on a pattern's program; its default is 10 MiB): a pattern is run over every message
/// of every request it checks.
pub const VOLATILE_PATTERN_MAX_BYTES: usize = 1 << 20;

/// A `volatile` pattern compiled, or why it cannot be.
pub(crate) fn volatile_regex(pattern: &str) -> Result<regex::Regex, regex::Error> {
    regex::RegexBuilder::new(pattern).size_limit(VOLATILE_PATTERN_MAX_BYTES).build()
}

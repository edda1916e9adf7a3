//! The conversation types and the LLM trait the core talks to.
//!
//! The core builds an [`LlmRequest`] per step and reads back an [`LlmReply`]. It does not know
//! who answers: a real model client or the harness's scripted engine implement [`Llm`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::Serialize;

use super::AgentId;
pub use super::transcript::Transcript;

/// A boxed future, so the traits stay object-safe.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Who wrote a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The user, or the runtime speaking for the user (nudges, notifications).
    User,
    /// The model.
    Assistant,
    /// A tool result.
    Tool,
}

/// One tool call the model asked for.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolCall {
    /// The call's id, echoed in its result.
    pub id: String,
    /// The tool name, exactly as the model wrote it.
    pub name: String,
    /// The arguments object.
    /// The arguments object (shared: a call's arguments are stored once however many records
    /// hold the call).
    pub args: Arc<serde_json::Value>,
}

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Its text.
    pub content: String,
    /// The calls of an assistant message, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The call a tool result answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Whether a tool result is an error.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
}

impl Message {
    /// A user message.
    pub fn user(content: impl Into<String>) -> Message {
        Message {
            role: Role::User,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            is_error: false,
        }
    }

    /// An assistant message with its calls.
    pub fn assistant(content: impl Into<String>, tool_calls: Vec<ToolCall>) -> Message {
        Message { role: Role::Assistant, content: content.into(), tool_calls, tool_call_id: None, is_error: false }
    }

    /// A tool result.
    pub fn tool(call_id: &str, content: impl Into<String>, is_error: bool) -> Message {
        Message {
            role: Role::Tool,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: Some(call_id.to_string()),
            is_error,
        }
    }
}

/// A tool as offered to the model.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolSpec {
    /// Its name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON schema of its arguments (shared: offered lists copy a pointer).
    pub parameters: Arc<serde_json::Value>,
    /// Tags such as `risk:write`, read by the approval gate; not sent to a model.
    #[serde(skip)]
    pub tags: Vec<String>,
}

/// Everything a core sends for one step.
///
/// Cloning a request copies pointers only: the conversation is a shared [`Transcript`], the
/// tools a shared slice, and the context strings shared text. A core builds the context once
/// per loop and the tools once per loop.
#[derive(Clone, Debug, Serialize)]
pub struct LlmRequest {
    /// The agent asking (`main`, `main/1`, ...): request metadata, as telemetry tags are.
    pub agent: AgentId,
    /// The goal of the asking loop (the user's message, or a child's task).
    pub goal: Arc<str>,
    /// The profile the asking child runs under, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<Arc<str>>,
    /// Request id (`<parent>-sub` for a child).
    pub request_id: Arc<str>,
    /// Session id.
    pub session_id: Arc<str>,
    /// Model override.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<Arc<str>>,
    /// Reasoning effort.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<Arc<str>>,
    /// Memory sections.
    #[serde(skip_serializing_if = "no_memory")]
    pub memory: Arc<[String]>,
    /// The system prompt (not one of the messages).
    pub system: Arc<str>,
    /// The conversation so far.
    pub messages: Transcript,
    /// The tools offered, catalog tools first, then the pseudo tools.
    pub tools: Arc<[ToolSpec]>,
}

fn no_memory(memory: &Arc<[String]>) -> bool {
    memory.is_empty()
}

/// The model's answer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LlmReply {
    /// Its text (may be empty).
    pub text: String,
    /// Its tool calls, in order.
    pub tool_calls: Vec<ToolCall>,
}

/// A failed LLM call: what a core is told, and (by [`Display`](std::fmt::Display)) the
/// text its `llm_failed` event carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LlmError {
    /// The provider answered with an error (a scripted reply's `error`): its text.
    Refused(String),
    /// The reply's stream broke off after this many chunks.
    StreamDropped {
        /// The chunks that arrived before it broke.
        chunks: usize,
    },
}

impl std::fmt::Display for LlmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LlmError::Refused(text) => f.write_str(text),
            LlmError::StreamDropped { chunks: 1 } => f.write_str("stream dropped after 1 chunk"),
            LlmError::StreamDropped { chunks } => write!(f, "stream dropped after {chunks} chunks"),
        }
    }
}

impl std::error::Error for LlmError {}

/// The model the core talks to.
pub trait Llm: Send + Sync {
    /// Answers one request. May take time (on the tokio clock) or never answer.
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> BoxFuture<'a, Result<LlmReply, LlmError>>;
}

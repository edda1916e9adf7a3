//! The OpenAI Chat Completions wire format, as much of it as a runtime sends and an SDK
//! parses: the request (messages, tools, `stream`, `stream_options`), the response, the
//! stream's chunks, the error object, and the model list. Serde types only, and the one
//! conversion of a request into the conversation types the attribution reads.
//!
//! Fields a runtime may send that rehearsal does not read (`temperature`, `max_tokens`,
//! `parallel_tool_calls`, ...) are accepted and ignored. What this module deliberately does
//! not do: choose a reply, or know HTTP. The Anthropic Messages API's types are in
//! [`anthropic`] and the OpenAI Responses API's in [`responses`], beside these, and convert to
//! the same [`Converted`].

pub mod anthropic;
pub mod responses;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::sut::llm::{Message, ToolCall, ToolSpec, Transcript};

/// A `POST /v1/chat/completions` body.
#[derive(Clone, Debug, Deserialize)]
pub struct ChatRequest {
    /// The model asked for.
    #[serde(default)]
    pub model: Option<String>,
    /// The conversation.
    pub messages: Vec<ApiMessage>,
    /// The tools offered.
    #[serde(default)]
    pub tools: Option<Vec<ApiTool>>,
    /// Whether to answer as a server-sent event stream.
    #[serde(default)]
    pub stream: Option<bool>,
    /// Stream options: `include_usage` adds a last chunk with the usage.
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    /// The reasoning effort asked for (`low`, `medium`, `high`, …), kept as sent; a value that
    /// is not a string is recorded as none.
    #[serde(default)]
    pub reasoning_effort: Option<serde_json::Value>,
}

/// `stream_options`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct StreamOptions {
    /// Whether the stream ends with a usage chunk.
    #[serde(default)]
    pub include_usage: Option<bool>,
}

/// One message of a request.
#[derive(Clone, Debug, Deserialize)]
pub struct ApiMessage {
    /// `system`, `developer`, `user`, `assistant` or `tool`.
    pub role: String,
    /// Its text: a string, or a list of parts whose `text` parts are joined.
    #[serde(default)]
    pub content: Option<Content>,
    /// An assistant message's calls.
    #[serde(default)]
    pub tool_calls: Option<Vec<ApiToolCall>>,
    /// The call a tool message answers.
    #[serde(default)]
    pub tool_call_id: Option<String>,
}

/// A message's content.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// Content parts (`{"type":"text","text":…}`); parts of other types carry no text.
    Parts(Vec<Part>),
}

/// A content part.
#[derive(Clone, Debug, Deserialize)]
pub struct Part {
    /// The part's type (`text`, `image_url`, ...).
    #[serde(rename = "type")]
    pub kind: String,
    /// Its text, for a `text` part.
    #[serde(default)]
    pub text: Option<String>,
}

/// A tool call in a request's assistant message.
#[derive(Clone, Debug, Deserialize)]
pub struct ApiToolCall {
    /// Its id.
    pub id: String,
    /// The function called.
    pub function: ApiFunctionCall,
}

/// The function of a call: its name and its arguments as a JSON text.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct ApiFunctionCall {
    /// The function's name.
    pub name: String,
    /// Its arguments, a JSON text.
    pub arguments: String,
}

/// A tool offered.
#[derive(Clone, Debug, Deserialize)]
pub struct ApiTool {
    /// The function.
    pub function: ApiFunction,
}

/// A function offered.
#[derive(Clone, Debug, Deserialize)]
pub struct ApiFunction {
    /// Its name.
    pub name: String,
    /// What it does.
    #[serde(default)]
    pub description: Option<String>,
    /// The JSON Schema of its arguments.
    #[serde(default)]
    pub parameters: Option<serde_json::Value>,
}

/// A request as the conversation types hold it: the system text (every `system` and
/// `developer` message, joined by a blank line), the other messages, the tools.
#[derive(Clone, Debug)]
pub struct Converted {
    /// The system text.
    pub system: String,
    /// The conversation, without the system messages.
    pub messages: Transcript,
    /// The tools offered, in order.
    pub tools: Vec<ToolSpec>,
    /// The reasoning effort the request asked for, if it named one.
    pub reasoning_effort: Option<String>,
}

impl ChatRequest {
    /// Whether the answer is a stream.
    pub fn streams(&self) -> bool {
        self.stream.unwrap_or(false)
    }

    /// Whether a stream ends with a usage chunk.
    pub fn include_usage(&self) -> bool {
        self.stream_options.as_ref().and_then(|o| o.include_usage).unwrap_or(false)
    }

    /// The request as conversation types, or what is wrong with it (`messages[3].role: …`).
    pub(crate) fn convert(&self) -> Result<Converted, String> {
        let mut system = Vec::new();
        let mut messages = Vec::with_capacity(self.messages.len());
        for (i, m) in self.messages.iter().enumerate() {
            let text = m.content.as_ref().map(Content::text).unwrap_or_default();
            match m.role.as_str() {
                "system" | "developer" => system.push(text),
                "user" => messages.push(Message::user(text)),
                "assistant" => {
                    let mut calls = Vec::new();
                    for (k, c) in m.tool_calls.iter().flatten().enumerate() {
                        // Arguments that are not JSON are kept as the text they are: the
                        // history oracle then sees they differ from the call given.
                        let args = serde_json::from_str(&c.function.arguments)
                            .unwrap_or_else(|_| serde_json::Value::String(c.function.arguments.clone()));
                        if c.function.name.is_empty() {
                            return Err(format!("messages[{i}].tool_calls[{k}].function.name is empty"));
                        }
                        calls.push(ToolCall { id: c.id.clone(), name: c.function.name.clone(), args: Arc::new(args) });
                    }
                    messages.push(Message::assistant(text, calls));
                }
                "tool" => {
                    let Some(id) = &m.tool_call_id else {
                        return Err(format!("messages[{i}]: a `tool` message needs `tool_call_id`"));
                    };
                    messages.push(Message::tool(id, text, false));
                }
                other => {
                    return Err(format!(
                        "messages[{i}].role is `{}`; expected system, developer, user, assistant or tool",
                        super::excerpt(other)
                    ));
                }
            }
        }
        // A tool is checked as a message is: a model could not be offered a tool without a
        // name, or whose arguments have no schema an API accepts.
        for (i, t) in self.tools.iter().flatten().enumerate() {
            if t.function.name.trim().is_empty() {
                return Err(format!("tools[{i}].function.name is empty"));
            }
            match &t.function.parameters {
                None | Some(serde_json::Value::Null | serde_json::Value::Object(_)) => {}
                Some(other) => {
                    let kind = match other {
                        serde_json::Value::Bool(_) => "a boolean",
                        serde_json::Value::Number(_) => "a number",
                        serde_json::Value::String(_) => "a string",
                        _ => "an array",
                    };
                    return Err(format!(
                        "tools[{i}] (`{}`): function.parameters is {kind}, not a JSON Schema object",
                        super::excerpt(&t.function.name)
                    ));
                }
            }
        }
        let tools = self
            .tools
            .iter()
            .flatten()
            .map(|t| ToolSpec {
                name: t.function.name.clone(),
                description: t.function.description.clone().unwrap_or_default(),
                parameters: Arc::new(t.function.parameters.clone().unwrap_or(serde_json::Value::Null)),
                tags: Vec::new(),
            })
            .collect();
        let reasoning_effort = self.reasoning_effort.as_ref().and_then(|v| v.as_str()).map(String::from);
        Ok(Converted { system: system.join("\n\n"), messages: messages.into(), tools, reasoning_effort })
    }
}

impl Content {
    /// The text: a string as it is, the `text` parts joined.
    pub fn text(&self) -> String {
        match self {
            Content::Text(text) => text.clone(),
            Content::Parts(parts) => {
                parts.iter().filter(|p| p.kind == "text").filter_map(|p| p.text.as_deref()).collect::<String>()
            }
        }
    }
}

/// A non-streamed answer.
#[derive(Clone, Debug, Serialize)]
pub struct Completion {
    /// `chatcmpl-<n>`, n the request's number.
    pub id: String,
    /// `chat.completion`.
    pub object: &'static str,
    /// Seconds since the Unix epoch when the server started.
    pub created: u64,
    /// The model asked for (or `rehearsal`).
    pub model: String,
    /// The one choice.
    pub choices: Vec<Choice>,
    /// The usage (an estimate: see [`Usage`]).
    pub usage: Usage,
}

/// The choice of a non-streamed answer.
#[derive(Clone, Debug, Serialize)]
pub struct Choice {
    /// 0.
    pub index: usize,
    /// The assistant message.
    pub message: AnswerMessage,
    /// `stop` or `tool_calls`.
    pub finish_reason: &'static str,
}

/// The assistant message of an answer.
#[derive(Clone, Debug, Serialize)]
pub struct AnswerMessage {
    /// `assistant`.
    pub role: &'static str,
    /// The text; `null` when the reply is calls only.
    pub content: Option<String>,
    /// The calls, when there are any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<AnswerToolCall>>,
}

/// A call of an answer.
#[derive(Clone, Debug, Serialize)]
pub struct AnswerToolCall {
    /// Its id.
    pub id: String,
    /// `function`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Name and arguments.
    pub function: ApiFunctionCall,
}

/// Token counts, estimated as a quarter of the characters (rounded up): rehearsal has no
/// tokenizer, and no rule reads tokens; the numbers are there because SDKs expect them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// Of the request's messages.
    pub prompt_tokens: u64,
    /// Of the reply's text and arguments.
    pub completion_tokens: u64,
    /// The sum.
    pub total_tokens: u64,
}

impl Usage {
    /// The estimate for a request of `prompt_chars` characters and a reply of `reply_chars`.
    pub fn estimate(prompt_chars: usize, reply_chars: usize) -> Usage {
        let tokens = |chars: usize| (chars as u64).div_ceil(4);
        let (prompt_tokens, completion_tokens) = (tokens(prompt_chars), tokens(reply_chars));
        Usage { prompt_tokens, completion_tokens, total_tokens: prompt_tokens + completion_tokens }
    }
}

/// One chunk of a streamed answer.
#[derive(Clone, Debug, Serialize)]
pub struct Chunk {
    /// The answer's id (the same in every chunk).
    pub id: String,
    /// `chat.completion.chunk`.
    pub object: &'static str,
    /// As [`Completion::created`].
    pub created: u64,
    /// As [`Completion::model`].
    pub model: String,
    /// One choice, or none in the usage chunk.
    pub choices: Vec<ChunkChoice>,
    /// Only in the usage chunk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// The choice of a chunk.
#[derive(Clone, Debug, Serialize)]
pub struct ChunkChoice {
    /// 0.
    pub index: usize,
    /// What this chunk adds.
    pub delta: Delta,
    /// `null` until the last chunk of the choice.
    pub finish_reason: Option<&'static str>,
}

/// What a chunk adds to the message.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Delta {
    /// `assistant`, in the first chunk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    /// A piece of the text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Pieces of calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<DeltaCall>>,
}

/// A piece of one call: the first carries id, type and name; the others argument fragments.
#[derive(Clone, Debug, Serialize)]
pub struct DeltaCall {
    /// The call's place in the reply.
    pub index: usize,
    /// Its id (first piece only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `function` (first piece only).
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
    /// The name (first piece) and a fragment of the arguments.
    pub function: DeltaFunction,
}

/// A piece of a call's function.
#[derive(Clone, Debug, Serialize)]
pub struct DeltaFunction {
    /// The name (first piece only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A fragment of the arguments' JSON text.
    pub arguments: String,
}

/// The body of an error answer: `{"error": {...}}`.
#[derive(Clone, Debug, Serialize)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorObject,
}

/// An API error object, as the SDKs read it.
#[derive(Clone, Debug, Serialize)]
pub struct ErrorObject {
    /// What went wrong, and for a request rehearsal refused, which request and why.
    pub message: String,
    /// `invalid_request_error`, `server_error`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// Always `null`.
    pub param: Option<String>,
    /// A short code (`malformed_request`, `request_too_large`, ...), or `null`.
    pub code: Option<String>,
}

/// The error `type` OpenAI gives a status.
pub fn error_type_of(status: u16) -> &'static str {
    match status {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        408 | 504 => "timeout_error",
        409 => "conflict_error",
        413 => "invalid_request_error",
        422 => "unprocessable_entity_error",
        429 => "rate_limit_error",
        500..=599 => "server_error",
        _ => "invalid_request_error",
    }
}

/// `GET /v1/models`.
#[derive(Clone, Debug, Serialize)]
pub struct ModelList {
    /// `list`.
    pub object: &'static str,
    /// The models.
    pub data: Vec<Model>,
}

/// One model of the list.
#[derive(Clone, Debug, Serialize)]
pub struct Model {
    /// Its id.
    pub id: String,
    /// `model`.
    pub object: &'static str,
    /// As [`Completion::created`].
    pub created: u64,
    /// `rehearsal`.
    pub owned_by: &'static str,
}

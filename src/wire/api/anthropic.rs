//! The Anthropic Messages wire format (`POST /v1/messages`), as much of it as a Claude-based
//! runtime sends and the `anthropic` SDKs parse: the request (`system`, `messages` of content
//! blocks, `tools` with `input_schema`, `stream`), the message answer, the stream's events,
//! the error object, and `count_tokens`. Serde types only, and the one conversion of a request
//! into the conversation types the attribution reads, the same as a Chat Completions request
//! becomes ([`super::Converted`]).
//!
//! Blocks are read loosely (one struct with a `type`), so that a block type rehearsal does not
//! read (`image`, `document`, `thinking`, `redacted_thinking`, `server_tool_use`, ...) is
//! accepted and carries no text. Fields rehearsal does not read (`max_tokens`, `metadata`,
//! `temperature`, `thinking`, `tool_choice`, `cache_control`, ...) are accepted and ignored.
//! What this module deliberately does not do: choose a reply, or know HTTP.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::Converted;
use crate::sut::llm::{LlmReply, Message, ToolCall, ToolSpec};

/// A `POST /v1/messages` (or `/v1/messages/count_tokens`) body.
#[derive(Clone, Debug, Deserialize)]
pub struct MessagesRequest {
    /// The model asked for.
    #[serde(default)]
    pub model: Option<String>,
    /// The system text: a string or text blocks.
    #[serde(default)]
    pub system: Option<Text>,
    /// The conversation.
    pub messages: Vec<InMessage>,
    /// The tools offered.
    #[serde(default)]
    pub tools: Option<Vec<Tool>>,
    /// Whether to answer as a server-sent event stream.
    #[serde(default)]
    pub stream: Option<bool>,
}

/// One message of a request.
#[derive(Clone, Debug, Deserialize)]
pub struct InMessage {
    /// `user` or `assistant`; `system` too, as Claude Code sends mid-conversation.
    pub role: String,
    /// A string, or blocks.
    pub content: Text,
}

/// A text that is a string or a list of blocks (a message's content, `system`, a
/// `tool_result`'s content).
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum Text {
    /// Plain text.
    Plain(String),
    /// Content blocks.
    Blocks(Vec<Block>),
}

/// A content block, read loosely: the fields of every type rehearsal reads, each optional.
#[derive(Clone, Debug, Deserialize)]
pub struct Block {
    /// `text`, `tool_use`, `tool_result`, or another type (no text).
    #[serde(rename = "type")]
    pub kind: String,
    /// A `text` block's text.
    #[serde(default)]
    pub text: Option<String>,
    /// A `tool_use` block's id.
    #[serde(default)]
    pub id: Option<String>,
    /// A `tool_use` block's tool.
    #[serde(default)]
    pub name: Option<String>,
    /// A `tool_use` block's arguments.
    #[serde(default)]
    pub input: Option<serde_json::Value>,
    /// The call a `tool_result` block answers.
    #[serde(default)]
    pub tool_use_id: Option<String>,
    /// A `tool_result` block's content.
    #[serde(default)]
    pub content: Option<Box<Text>>,
    /// Whether a `tool_result` is an error.
    #[serde(default)]
    pub is_error: Option<bool>,
}

/// A tool offered: a client tool (`name`, `description`, `input_schema`) or a server tool
/// (`type` and `name`, no schema).
#[derive(Clone, Debug, Deserialize)]
pub struct Tool {
    /// Its name.
    pub name: String,
    /// What it does.
    #[serde(default)]
    pub description: Option<String>,
    /// The JSON Schema of its input.
    #[serde(default)]
    pub input_schema: Option<serde_json::Value>,
}

impl Text {
    /// The text: a string as it is, the `text` blocks joined (as Chat joins `text` parts).
    pub fn text(&self) -> String {
        match self {
            Text::Plain(text) => text.clone(),
            Text::Blocks(blocks) => {
                blocks.iter().filter(|b| b.kind == "text").filter_map(|b| b.text.as_deref()).collect()
            }
        }
    }

    fn blocks(&self) -> Vec<Block> {
        match self {
            Text::Plain(text) => vec![Block::text(text)],
            Text::Blocks(blocks) => blocks.clone(),
        }
    }
}

impl Block {
    fn text(text: &str) -> Block {
        Block {
            kind: "text".into(),
            text: Some(text.into()),
            id: None,
            name: None,
            input: None,
            tool_use_id: None,
            content: None,
            is_error: None,
        }
    }
}

impl MessagesRequest {
    /// Whether the answer is a stream.
    pub fn streams(&self) -> bool {
        self.stream.unwrap_or(false)
    }

    /// The request as conversation types, or what is wrong with it
    /// (`messages[3].content[1]: ...`). The top-level `system` and every `role: "system"`
    /// message are the system text, joined by a blank line; a user message's `tool_result`
    /// blocks are tool messages, in order, and its text blocks one user message after them
    /// (a user message with no `tool_result` is one user message, even empty); an assistant
    /// message's text blocks are its text and its `tool_use` blocks its calls.
    pub(crate) fn convert(&self) -> Result<Converted, String> {
        let mut system = Vec::new();
        if let Some(text) = &self.system {
            system.push(text.text());
        }
        let mut messages = Vec::with_capacity(self.messages.len());
        for (i, m) in self.messages.iter().enumerate() {
            match m.role.as_str() {
                "system" => system.push(m.content.text()),
                "user" => {
                    let mut text = String::new();
                    let mut results = 0;
                    for (k, b) in m.content.blocks().iter().enumerate() {
                        match b.kind.as_str() {
                            "text" => text.push_str(b.text.as_deref().unwrap_or_default()),
                            "tool_result" => {
                                let Some(id) = &b.tool_use_id else {
                                    return Err(format!(
                                        "messages[{i}].content[{k}]: a `tool_result` block needs `tool_use_id`"
                                    ));
                                };
                                let content = b.content.as_deref().map(Text::text).unwrap_or_default();
                                messages.push(Message::tool(id, content, b.is_error.unwrap_or(false)));
                                results += 1;
                            }
                            _ => {}
                        }
                    }
                    if results == 0 || !text.is_empty() {
                        messages.push(Message::user(text));
                    }
                }
                "assistant" => {
                    let mut text = String::new();
                    let mut calls = Vec::new();
                    for (k, b) in m.content.blocks().iter().enumerate() {
                        match b.kind.as_str() {
                            "text" => text.push_str(b.text.as_deref().unwrap_or_default()),
                            "tool_use" => {
                                let (Some(id), Some(name)) = (&b.id, &b.name) else {
                                    return Err(format!(
                                        "messages[{i}].content[{k}]: a `tool_use` block needs `id` and `name`"
                                    ));
                                };
                                if name.is_empty() {
                                    return Err(format!("messages[{i}].content[{k}].name is empty"));
                                }
                                let input = b.input.clone().unwrap_or_else(|| serde_json::json!({}));
                                calls.push(ToolCall { id: id.clone(), name: name.clone(), args: Arc::new(input) });
                            }
                            _ => {}
                        }
                    }
                    messages.push(Message::assistant(text, calls));
                }
                other => {
                    return Err(format!(
                        "messages[{i}].role is `{}`; expected user, assistant or system",
                        super::super::excerpt(other)
                    ));
                }
            }
        }
        // A tool is checked as Chat's are: a name, and a schema that is an object when given.
        for (i, t) in self.tools.iter().flatten().enumerate() {
            if t.name.trim().is_empty() {
                return Err(format!("tools[{i}].name is empty"));
            }
            if let Some(schema) = &t.input_schema
                && !(schema.is_object() || schema.is_null())
            {
                return Err(format!(
                    "tools[{i}] (`{}`): input_schema is not a JSON Schema object",
                    super::super::excerpt(&t.name)
                ));
            }
        }
        let tools = self
            .tools
            .iter()
            .flatten()
            .map(|t| ToolSpec {
                name: t.name.clone(),
                description: t.description.clone().unwrap_or_default(),
                parameters: Arc::new(t.input_schema.clone().unwrap_or(serde_json::Value::Null)),
                tags: Vec::new(),
            })
            .collect();
        Ok(Converted { system: system.join("\n\n"), messages: messages.into(), tools, reasoning_effort: None })
    }
}

/// A non-streamed answer (and the `message` of the stream's `message_start`).
#[derive(Clone, Debug, Serialize)]
pub struct MessageAnswer {
    /// `msg_<n>`, n the request's exchange number.
    pub id: String,
    /// `message`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// `assistant`.
    pub role: &'static str,
    /// The model asked for (or `rehearsal`).
    pub model: String,
    /// The text block (when there is text, or nothing else), then a `tool_use` block per call.
    pub content: Vec<OutBlock>,
    /// `end_turn` or `tool_use`; `null` in `message_start`.
    pub stop_reason: Option<&'static str>,
    /// Always `null`.
    pub stop_sequence: Option<String>,
    /// The usage (an estimate: see [`super::Usage`]).
    pub usage: MessagesUsage,
}

/// A block of an answer.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutBlock {
    /// Text.
    Text {
        /// The text (empty in `content_block_start`).
        text: String,
    },
    /// A call.
    ToolUse {
        /// Its id.
        id: String,
        /// The tool.
        name: String,
        /// Its arguments (`{}` in `content_block_start`).
        input: serde_json::Value,
    },
}

/// Token counts, estimated as [`super::Usage`] is; the cache counts are always 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MessagesUsage {
    /// Of the request.
    pub input_tokens: u64,
    /// Of the reply.
    pub output_tokens: u64,
    /// 0.
    pub cache_creation_input_tokens: u64,
    /// 0.
    pub cache_read_input_tokens: u64,
}

/// One event of a streamed answer.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// The message, with no content yet.
    MessageStart {
        /// The message so far.
        message: MessageAnswer,
    },
    /// A block opens.
    ContentBlockStart {
        /// Its place.
        index: usize,
        /// The block, empty.
        content_block: OutBlock,
    },
    /// A piece of a block.
    ContentBlockDelta {
        /// The block's place.
        index: usize,
        /// The piece.
        delta: BlockDelta,
    },
    /// A block closes.
    ContentBlockStop {
        /// Its place.
        index: usize,
    },
    /// The stop reason and the output usage.
    MessageDelta {
        /// The stop reason.
        delta: StopDelta,
        /// `output_tokens`.
        usage: OutputUsage,
    },
    /// The end.
    MessageStop,
}

/// A piece of a block.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum BlockDelta {
    /// A piece of text.
    TextDelta {
        /// The piece.
        text: String,
    },
    /// A piece of a call's input, as JSON text.
    InputJsonDelta {
        /// The piece.
        partial_json: String,
    },
}

/// `message_delta`'s delta.
#[derive(Clone, Debug, Serialize)]
pub struct StopDelta {
    /// `end_turn` or `tool_use`.
    pub stop_reason: &'static str,
    /// Always `null`.
    pub stop_sequence: Option<String>,
}

/// `message_delta`'s usage.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct OutputUsage {
    /// Of the reply.
    pub output_tokens: u64,
}

impl Event {
    /// The event's `type`, the SSE `event:` line.
    pub fn name(&self) -> &'static str {
        match self {
            Event::MessageStart { .. } => "message_start",
            Event::ContentBlockStart { .. } => "content_block_start",
            Event::ContentBlockDelta { .. } => "content_block_delta",
            Event::ContentBlockStop { .. } => "content_block_stop",
            Event::MessageDelta { .. } => "message_delta",
            Event::MessageStop => "message_stop",
        }
    }
}

/// The body of an error answer: `{"type":"error","error":{"type","message"}}`.
#[derive(Clone, Debug, Serialize)]
pub struct ErrorBody {
    /// `error`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The error.
    pub error: ErrorObject,
}

/// An Anthropic error object.
#[derive(Clone, Debug, Serialize)]
pub struct ErrorObject {
    /// `invalid_request_error`, `rate_limit_error`, `api_error`, `overloaded_error`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// What went wrong, and for a request rehearsal refused, which request and why.
    pub message: String,
}

/// The error `type` Anthropic gives a status.
pub fn error_type_of(status: u16) -> &'static str {
    match status {
        401 => "authentication_error",
        402 => "billing_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        504 => "timeout_error",
        529 => "overloaded_error",
        500..=599 => "api_error",
        _ => "invalid_request_error",
    }
}

/// `POST /v1/messages/count_tokens`'s answer.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct TokenCount {
    /// The estimate: see [`super::Usage`].
    pub input_tokens: u64,
}

/// The reply's calls' inputs as JSON texts, in call order.
fn inputs(reply: &LlmReply) -> Vec<String> {
    reply.tool_calls.iter().map(|c| serde_json::to_string(&*c.args).expect("JSON values serialize")).collect()
}

fn usage(prompt_chars: usize, reply: &LlmReply, inputs: &[String]) -> MessagesUsage {
    let reply_chars = reply.text.chars().count() + inputs.iter().map(|a| a.chars().count()).sum::<usize>();
    let usage = super::Usage::estimate(prompt_chars, reply_chars);
    MessagesUsage {
        input_tokens: usage.prompt_tokens,
        output_tokens: usage.completion_tokens,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 0,
    }
}

fn stop_reason(reply: &LlmReply) -> &'static str {
    if reply.tool_calls.is_empty() { "end_turn" } else { "tool_use" }
}

/// The non-streamed answer: `id` `msg_<n>`, the text block unless the reply is calls only,
/// a `tool_use` block per call.
pub fn message(id: &str, model: &str, reply: &LlmReply, prompt_chars: usize) -> MessageAnswer {
    let args = inputs(reply);
    let mut content = Vec::new();
    if !reply.text.is_empty() || reply.tool_calls.is_empty() {
        content.push(OutBlock::Text { text: reply.text.clone() });
    }
    for c in &reply.tool_calls {
        content.push(OutBlock::ToolUse { id: c.id.clone(), name: c.name.clone(), input: (*c.args).clone() });
    }
    MessageAnswer {
        id: id.to_string(),
        kind: "message",
        role: "assistant",
        model: model.to_string(),
        content,
        stop_reason: Some(stop_reason(reply)),
        stop_sequence: None,
        usage: usage(prompt_chars, reply, &args),
    }
}

/// The events of a streamed answer, in order: `message_start` (no content, `output_tokens`
/// 0); the text block (when there is text, or nothing else) as `content_block_start`, its
/// text in `text_delta`s of [`crate::wire::stream::TEXT_PIECE_CHARS`] characters and
/// `content_block_stop`; per call a `tool_use` block with `input: {}`, its input's JSON text
/// in `input_json_delta`s of [`crate::wire::stream::ARGUMENT_PIECE_CHARS`] characters, and its
/// stop; `message_delta` with the stop reason and the output usage; `message_stop`.
pub fn events(id: &str, model: &str, reply: &LlmReply, prompt_chars: usize) -> Vec<Event> {
    use crate::wire::stream::{ARGUMENT_PIECE_CHARS, TEXT_PIECE_CHARS, pieces};
    let args = inputs(reply);
    let usage = usage(prompt_chars, reply, &args);
    let start = MessageAnswer {
        id: id.to_string(),
        kind: "message",
        role: "assistant",
        model: model.to_string(),
        content: Vec::new(),
        stop_reason: None,
        stop_sequence: None,
        usage: MessagesUsage { output_tokens: 0, ..usage },
    };
    let mut out = vec![Event::MessageStart { message: start }];
    let mut index = 0;
    if !reply.text.is_empty() || reply.tool_calls.is_empty() {
        out.push(Event::ContentBlockStart { index, content_block: OutBlock::Text { text: String::new() } });
        for piece in pieces(&reply.text, TEXT_PIECE_CHARS) {
            out.push(Event::ContentBlockDelta { index, delta: BlockDelta::TextDelta { text: piece } });
        }
        out.push(Event::ContentBlockStop { index });
        index += 1;
    }
    for (call, args) in reply.tool_calls.iter().zip(&args) {
        let block = OutBlock::ToolUse { id: call.id.clone(), name: call.name.clone(), input: serde_json::json!({}) };
        out.push(Event::ContentBlockStart { index, content_block: block });
        for piece in pieces(args, ARGUMENT_PIECE_CHARS) {
            out.push(Event::ContentBlockDelta { index, delta: BlockDelta::InputJsonDelta { partial_json: piece } });
        }
        out.push(Event::ContentBlockStop { index });
        index += 1;
    }
    out.push(Event::MessageDelta {
        delta: StopDelta { stop_reason: stop_reason(reply), stop_sequence: None },
        usage: OutputUsage { output_tokens: usage.output_tokens },
    });
    out.push(Event::MessageStop);
    out
}

/// One SSE frame of an event: `event: <type>` and its `data:` line.
pub fn frame(event: &Event) -> String {
    format!("event: {}\ndata: {}\n\n", event.name(), serde_json::to_string(event).expect("events serialize"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn convert(body: &str) -> Converted {
        serde_json::from_str::<MessagesRequest>(body).unwrap().convert().unwrap()
    }

    #[test]
    fn system_text_comes_from_the_top_level_and_from_system_messages_in_order() {
        let c = convert(
            r#"{"system":[{"type":"text","text":"Top."}],"messages":[{"role":"user","content":"Hi"},{"role":"system","content":"Mid."}]}"#,
        );
        assert_eq!(c.system, "Top.\n\nMid.");
        assert_eq!(c.messages.len(), 1);
    }

    #[test]
    fn tool_results_become_tool_messages_before_the_text_of_their_user_message() {
        let c = convert(
            r#"{"messages":[{"role":"user","content":"Go"},{"role":"assistant","content":[{"type":"text","text":"On it."},{"type":"tool_use","id":"t1","name":"Agent","input":{"task":"x"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"done"}],"is_error":true},{"type":"text","text":"more"}]}]}"#,
        );
        let m = c.messages.to_vec();
        assert_eq!(m.len(), 4);
        assert_eq!(m[1].tool_calls[0].name, "Agent");
        assert_eq!(m[2].tool_call_id.as_deref(), Some("t1"));
        assert!(m[2].is_error);
        assert_eq!(m[2].content, "done");
        assert_eq!(m[3].content, "more");
    }
}

//! The OpenAI Responses wire format (`POST /v1/responses`), as much of it as a runtime on the
//! `openai` SDKs' Responses client sends and those SDKs parse (openai-agents' default API): the
//! request (`input` items, `instructions`, function `tools`, `stream`,
//! `previous_response_id`, `store`, `reasoning`), the `response` object, its stream of typed
//! events, and the conversations kept for `previous_response_id` ([`Chains`]). Serde types,
//! the one conversion of a request into the conversation types the attribution reads (the
//! same [`super::Converted`] as a Chat Completions request becomes), and the answer's spelling.
//!
//! Items and parts are read loosely (one struct with a `type`), so that an item rehearsal does
//! not read (`reasoning`, `item_reference`, `web_search_call`, `computer_call_output`, ...) is
//! accepted and carries nothing, and a part of another type (`input_image`, `input_file`,
//! `refusal`, ...) carries no text. Fields rehearsal does not read (`temperature`,
//! `max_output_tokens`, `tool_choice`, `parallel_tool_calls`, `text`, `include`, `metadata`,
//! `truncation`, `user`, ...) are accepted and ignored. Errors are Chat's object
//! ([`super::ErrorBody`]), as OpenAI answers both APIs with it. What this module deliberately
//! does not do: choose a reply, know HTTP, or decide when a response is kept (the server
//! does).

use std::collections::VecDeque;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::Converted;
use crate::sut::llm::{LlmReply, Message, ToolCall, ToolSpec};

/// A `POST /v1/responses` body.
#[derive(Clone, Debug, Deserialize)]
pub struct ResponsesRequest {
    /// The model asked for.
    #[serde(default)]
    pub model: Option<String>,
    /// The new input: a string (one user message) or items.
    #[serde(default)]
    pub input: Option<Input>,
    /// The system text that comes first; never carried over by `previous_response_id`.
    #[serde(default)]
    pub instructions: Option<Input>,
    /// The tools offered: `function` tools are read, others accepted and not offered.
    #[serde(default)]
    pub tools: Option<Vec<Tool>>,
    /// Whether to answer as a server-sent event stream.
    #[serde(default)]
    pub stream: Option<bool>,
    /// A response served before, whose input and output come before `input`.
    #[serde(default)]
    pub previous_response_id: Option<String>,
    /// Whether the response is kept for a later `previous_response_id` (default true).
    #[serde(default)]
    pub store: Option<bool>,
    /// `{"effort": ...}`: the effort is kept as the request's reasoning effort.
    #[serde(default)]
    pub reasoning: Option<Reasoning>,
}

/// `input` (and `instructions`): a string, or a list of items.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum Input {
    /// Plain text.
    Text(String),
    /// Items.
    Items(Vec<Item>),
}

/// An input item, read loosely: the fields of every type rehearsal reads, each optional.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Item {
    /// `message` (or absent, for `{"role", "content"}`), `function_call`,
    /// `function_call_output`, or another type (carries nothing).
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    /// A message's `user`, `assistant`, `system` or `developer`.
    #[serde(default)]
    pub role: Option<String>,
    /// A message's content: a string or parts.
    #[serde(default)]
    pub content: Option<Text>,
    /// The call a `function_call` makes or a `function_call_output` answers.
    #[serde(default)]
    pub call_id: Option<String>,
    /// A `function_call`'s function.
    #[serde(default)]
    pub name: Option<String>,
    /// A `function_call`'s arguments, a JSON text.
    #[serde(default)]
    pub arguments: Option<String>,
    /// A `function_call_output`'s output: a string or parts.
    #[serde(default)]
    pub output: Option<Text>,
}

/// A text that is a string or a list of parts (a message's content, a call's output).
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum Text {
    /// Plain text.
    Plain(String),
    /// Parts: `input_text` and `output_text` carry text, others none.
    Parts(Vec<Part>),
}

/// A content part.
#[derive(Clone, Debug, Deserialize)]
pub struct Part {
    /// `input_text`, `output_text`, `input_image`, `refusal`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// Its text, for a text part.
    #[serde(default)]
    pub text: Option<String>,
}

/// A tool offered: a `function` tool (`name`, `description`, `parameters`, `strict`), or
/// another type (`web_search`, `file_search`, `custom`, ...: accepted, not offered).
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Tool {
    /// `function`, or another type.
    #[serde(rename = "type")]
    pub kind: String,
    /// The function's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema of its arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<serde_json::Value>,
    /// Whether the arguments must follow the schema strictly (not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

/// `reasoning`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Reasoning {
    /// `low`, `medium`, `high`, ... (a value that is not a string is recorded as none).
    #[serde(default)]
    pub effort: Option<serde_json::Value>,
}

impl Text {
    /// The text: a string as it is, the text parts joined (as Chat joins `text` parts).
    pub fn text(&self) -> String {
        match self {
            Text::Plain(text) => text.clone(),
            Text::Parts(parts) => parts
                .iter()
                .filter(|p| matches!(p.kind.as_str(), "input_text" | "output_text" | "text"))
                .filter_map(|p| p.text.as_deref())
                .collect(),
        }
    }
}

impl Input {
    /// The items: a string is one user message.
    pub fn items(&self) -> Vec<Item> {
        match self {
            Input::Text(text) => vec![Item {
                kind: Some("message".into()),
                role: Some("user".into()),
                content: Some(Text::Plain(text.clone())),
                ..Item::default()
            }],
            Input::Items(items) => items.clone(),
        }
    }

    /// As system text: a string as it is, the messages' texts joined by a blank line.
    fn system_text(&self) -> String {
        match self {
            Input::Text(text) => text.clone(),
            Input::Items(items) => {
                items.iter().filter_map(|i| i.content.as_ref().map(Text::text)).collect::<Vec<_>>().join("\n\n")
            }
        }
    }
}

impl ResponsesRequest {
    /// Whether the answer is a stream.
    pub fn streams(&self) -> bool {
        self.stream.unwrap_or(false)
    }

    /// Whether the response is kept for a later `previous_response_id` (`store` defaults to
    /// true, as OpenAI's does).
    pub fn stores(&self) -> bool {
        self.store.unwrap_or(true)
    }

    /// This request's own input items, in order.
    pub fn items(&self) -> Vec<Item> {
        self.input.as_ref().map(Input::items).unwrap_or_default()
    }

    /// The request as conversation types, `earlier` (the items of the response named by
    /// `previous_response_id`, already read once) before its own input, or what is wrong with
    /// it (`input[3]: ...`). `instructions`, then every `system` and `developer` message in
    /// order, are the system text, joined by a blank line (where Chat's `system` and
    /// `developer` messages go); a `function_call` joins the assistant message just before it
    /// (the items of one reply: its text, then its calls), or makes one with no text; a
    /// `function_call_output` is a tool message answering `call_id`.
    pub(crate) fn convert(&self, earlier: &[Arc<Item>]) -> Result<Converted, String> {
        let mut system = Vec::new();
        if let Some(instructions) = &self.instructions {
            system.push(instructions.system_text());
        }
        let own = self.items();
        let mut messages: Vec<Message> = Vec::with_capacity(earlier.len() + own.len());
        // Whether the last message is an assistant message a `function_call` may join.
        let mut open = false;
        let numbered =
            earlier.iter().map(|item| (None, &**item)).chain(own.iter().enumerate().map(|(k, item)| (Some(k), item)));
        for (k, item) in numbered {
            let at = || match k {
                Some(k) => format!("input[{k}]"),
                None => "an item of the previous response".to_string(),
            };
            match item.kind.as_deref() {
                None | Some("message") => {
                    let text = item.content.as_ref().map(Text::text).unwrap_or_default();
                    match item.role.as_deref() {
                        Some("system" | "developer") => system.push(text),
                        Some("user") => {
                            messages.push(Message::user(text));
                            open = false;
                        }
                        Some("assistant") => {
                            messages.push(Message::assistant(text, Vec::new()));
                            open = true;
                        }
                        Some(other) => {
                            return Err(format!(
                                "{}.role is `{}`; expected user, assistant, system or developer",
                                at(),
                                super::super::excerpt(other)
                            ));
                        }
                        None => return Err(format!("{}: a message needs `role`", at())),
                    }
                }
                Some("function_call") => {
                    let (Some(id), Some(name)) = (&item.call_id, &item.name) else {
                        return Err(format!("{}: a `function_call` item needs `call_id` and `name`", at()));
                    };
                    if name.is_empty() {
                        return Err(format!("{}.name is empty", at()));
                    }
                    // Arguments that are not JSON are kept as the text they are, as over Chat.
                    let text = item.arguments.clone().unwrap_or_default();
                    let args = serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
                    let call = ToolCall { id: id.clone(), name: name.clone(), args: Arc::new(args) };
                    match messages.last_mut().filter(|_| open) {
                        Some(last) => last.tool_calls.push(call),
                        None => messages.push(Message::assistant("", vec![call])),
                    }
                    open = true;
                }
                Some("function_call_output") => {
                    let Some(id) = &item.call_id else {
                        return Err(format!("{}: a `function_call_output` item needs `call_id`", at()));
                    };
                    let output = item.output.as_ref().map(Text::text).unwrap_or_default();
                    messages.push(Message::tool(id, output, false));
                    open = false;
                }
                Some(_) => {}
            }
        }
        // A tool is checked as Chat's are: a name, and a schema that is an object when given.
        let mut tools = Vec::new();
        for (i, t) in self.tools.iter().flatten().enumerate() {
            if t.kind != "function" {
                continue;
            }
            let name = t.name.as_deref().unwrap_or_default();
            if name.trim().is_empty() {
                return Err(format!("tools[{i}].name is empty"));
            }
            if let Some(schema) = &t.parameters
                && !(schema.is_object() || schema.is_null())
            {
                return Err(format!(
                    "tools[{i}] (`{}`): parameters is not a JSON Schema object",
                    super::super::excerpt(name)
                ));
            }
            tools.push(ToolSpec {
                name: name.to_string(),
                description: t.description.clone().unwrap_or_default(),
                parameters: Arc::new(t.parameters.clone().unwrap_or(serde_json::Value::Null)),
                tags: Vec::new(),
            });
        }
        let reasoning_effort =
            self.reasoning.as_ref().and_then(|r| r.effort.as_ref()).and_then(|v| v.as_str()).map(String::from);
        Ok(Converted { system: system.join("\n\n"), messages: messages.into(), tools, reasoning_effort })
    }
}

/// The conversations of the responses served with `store` (the default), for
/// `previous_response_id`: each response's items (the earlier response's, its own input, its
/// output), by id, in the order they were served. At most `kept_max` are kept: the oldest is
/// dropped first. Items are shared between a response and the ones chained to it, so a chain
/// of N responses holds N item lists of pointers, not N copies of the conversation.
#[derive(Debug)]
pub struct Chains {
    kept_max: usize,
    kept: VecDeque<(String, Arc<Vec<Arc<Item>>>)>,
}

impl Chains {
    /// An empty store that keeps at most `kept_max` responses.
    pub fn new(kept_max: usize) -> Chains {
        Chains { kept_max, kept: VecDeque::new() }
    }

    /// The items of the response `id`, if it is kept.
    pub fn get(&self, id: &str) -> Option<Arc<Vec<Arc<Item>>>> {
        self.kept.iter().rev().find(|(kept, _)| kept == id).map(|(_, items)| items.clone())
    }

    /// Keeps response `id`: `earlier` (the chain it continued), its own input, then its
    /// output as the items a client sends back.
    pub fn keep(&mut self, id: &str, earlier: &[Arc<Item>], input: Vec<Item>, reply: &LlmReply, exchange: usize) {
        if self.kept_max == 0 {
            return;
        }
        let mut items: Vec<Arc<Item>> = earlier.to_vec();
        items.extend(input.into_iter().map(Arc::new));
        for out in output(exchange, reply) {
            items.push(Arc::new(match out {
                OutItem::Message { content, .. } => Item {
                    kind: Some("message".into()),
                    role: Some("assistant".into()),
                    content: Some(Text::Plain(content.into_iter().map(|p| p.text).collect())),
                    ..Item::default()
                },
                OutItem::FunctionCall { call_id, name, arguments, .. } => Item {
                    kind: Some("function_call".into()),
                    call_id: Some(call_id),
                    name: Some(name),
                    arguments: Some(arguments),
                    ..Item::default()
                },
            }));
        }
        while self.kept.len() >= self.kept_max {
            self.kept.pop_front();
        }
        self.kept.push_back((id.to_string(), Arc::new(items)));
    }
}

/// A `response` object: the non-streamed answer, and the `response` of the stream's
/// `response.created`, `response.in_progress` and `response.completed`.
#[derive(Clone, Debug, Serialize)]
pub struct ResponseObject {
    /// `resp_<n>`, n the request's exchange number.
    pub id: String,
    /// `response`.
    pub object: &'static str,
    /// Seconds since the Unix epoch when the server started.
    pub created_at: u64,
    /// `in_progress` (the stream's first events), `completed`.
    pub status: &'static str,
    /// Always `null`.
    pub error: Option<String>,
    /// Always `null`.
    pub incomplete_details: Option<String>,
    /// The request's `instructions`, when a string.
    pub instructions: Option<String>,
    /// The model asked for (or `rehearsal`).
    pub model: String,
    /// The output items (none until the stream completes).
    pub output: Vec<OutItem>,
    /// `true`.
    pub parallel_tool_calls: bool,
    /// The request's `previous_response_id`.
    pub previous_response_id: Option<String>,
    /// Whether the response is kept.
    pub store: bool,
    /// `auto`.
    pub tool_choice: &'static str,
    /// The request's function tools.
    pub tools: Vec<Tool>,
    /// The usage (an estimate: see [`super::Usage`]); `null` until the stream completes.
    pub usage: Option<ResponsesUsage>,
}

/// An output item.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutItem {
    /// The reply's text.
    Message {
        /// `msg_<n>`.
        id: String,
        /// `in_progress` (when added to a stream), `completed`.
        status: &'static str,
        /// `assistant`.
        role: &'static str,
        /// One `output_text` part (none when added to a stream).
        content: Vec<OutputText>,
    },
    /// A call.
    FunctionCall {
        /// `fc_<n>_<k>`, k the call's place from 1.
        id: String,
        /// The call's id, which its `function_call_output` names.
        call_id: String,
        /// The function.
        name: String,
        /// Its arguments' JSON text (empty when added to a stream).
        arguments: String,
        /// `in_progress` (when added to a stream), `completed`.
        status: &'static str,
    },
}

/// An `output_text` part.
#[derive(Clone, Debug, Serialize)]
pub struct OutputText {
    /// `output_text`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The text.
    pub text: String,
    /// Always empty.
    pub annotations: Vec<serde_json::Value>,
    /// Always empty.
    pub logprobs: Vec<serde_json::Value>,
}

/// Token counts, estimated as [`super::Usage`] is; the cache and reasoning counts are 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ResponsesUsage {
    /// Of the request (the earlier response's items included).
    pub input_tokens: u64,
    /// Cache counts: 0.
    pub input_tokens_details: InputTokensDetails,
    /// Of the reply.
    pub output_tokens: u64,
    /// Reasoning count: 0.
    pub output_tokens_details: OutputTokensDetails,
    /// The sum.
    pub total_tokens: u64,
}

/// `usage.input_tokens_details`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct InputTokensDetails {
    /// 0.
    pub cached_tokens: u64,
    /// 0.
    pub cache_write_tokens: u64,
}

/// `usage.output_tokens_details`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct OutputTokensDetails {
    /// 0.
    pub reasoning_tokens: u64,
}

/// One event of a streamed answer; `sequence_number` counts them from 0.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "type")]
pub enum Event {
    /// The response begins (`in_progress`, no output).
    #[serde(rename = "response.created")]
    Created {
        /// Its place in the stream.
        sequence_number: usize,
        /// The response so far.
        response: ResponseObject,
    },
    /// The response is in progress.
    #[serde(rename = "response.in_progress")]
    InProgress {
        /// Its place in the stream.
        sequence_number: usize,
        /// The response so far.
        response: ResponseObject,
    },
    /// An output item opens.
    #[serde(rename = "response.output_item.added")]
    OutputItemAdded {
        /// Its place in the stream.
        sequence_number: usize,
        /// The item's place in `output`.
        output_index: usize,
        /// The item, empty.
        item: OutItem,
    },
    /// A message's text part opens.
    #[serde(rename = "response.content_part.added")]
    ContentPartAdded {
        /// Its place in the stream.
        sequence_number: usize,
        /// The message's id.
        item_id: String,
        /// The message's place in `output`.
        output_index: usize,
        /// 0.
        content_index: usize,
        /// The part, empty.
        part: OutputText,
    },
    /// A piece of the text.
    #[serde(rename = "response.output_text.delta")]
    OutputTextDelta {
        /// Its place in the stream.
        sequence_number: usize,
        /// The message's id.
        item_id: String,
        /// The message's place in `output`.
        output_index: usize,
        /// 0.
        content_index: usize,
        /// The piece.
        delta: String,
        /// Always empty.
        logprobs: Vec<serde_json::Value>,
    },
    /// The text, whole.
    #[serde(rename = "response.output_text.done")]
    OutputTextDone {
        /// Its place in the stream.
        sequence_number: usize,
        /// The message's id.
        item_id: String,
        /// The message's place in `output`.
        output_index: usize,
        /// 0.
        content_index: usize,
        /// The text.
        text: String,
        /// Always empty.
        logprobs: Vec<serde_json::Value>,
    },
    /// The text part, whole.
    #[serde(rename = "response.content_part.done")]
    ContentPartDone {
        /// Its place in the stream.
        sequence_number: usize,
        /// The message's id.
        item_id: String,
        /// The message's place in `output`.
        output_index: usize,
        /// 0.
        content_index: usize,
        /// The part.
        part: OutputText,
    },
    /// A piece of a call's arguments.
    #[serde(rename = "response.function_call_arguments.delta")]
    FunctionCallArgumentsDelta {
        /// Its place in the stream.
        sequence_number: usize,
        /// The call item's id.
        item_id: String,
        /// The call's place in `output`.
        output_index: usize,
        /// The piece.
        delta: String,
    },
    /// A call's arguments, whole.
    #[serde(rename = "response.function_call_arguments.done")]
    FunctionCallArgumentsDone {
        /// Its place in the stream.
        sequence_number: usize,
        /// The call item's id.
        item_id: String,
        /// The call's place in `output`.
        output_index: usize,
        /// The function.
        name: String,
        /// The arguments.
        arguments: String,
    },
    /// An output item, whole.
    #[serde(rename = "response.output_item.done")]
    OutputItemDone {
        /// Its place in the stream.
        sequence_number: usize,
        /// The item's place in `output`.
        output_index: usize,
        /// The item.
        item: OutItem,
    },
    /// The response, whole, with its usage.
    #[serde(rename = "response.completed")]
    Completed {
        /// Its place in the stream.
        sequence_number: usize,
        /// The response.
        response: ResponseObject,
    },
}

impl Event {
    /// The event's `type`, the SSE `event:` line.
    pub fn name(&self) -> &'static str {
        match self {
            Event::Created { .. } => "response.created",
            Event::InProgress { .. } => "response.in_progress",
            Event::OutputItemAdded { .. } => "response.output_item.added",
            Event::ContentPartAdded { .. } => "response.content_part.added",
            Event::OutputTextDelta { .. } => "response.output_text.delta",
            Event::OutputTextDone { .. } => "response.output_text.done",
            Event::ContentPartDone { .. } => "response.content_part.done",
            Event::FunctionCallArgumentsDelta { .. } => "response.function_call_arguments.delta",
            Event::FunctionCallArgumentsDone { .. } => "response.function_call_arguments.done",
            Event::OutputItemDone { .. } => "response.output_item.done",
            Event::Completed { .. } => "response.completed",
        }
    }
}

/// What an answer repeats of its request and the server: the ids and `created_at` come from
/// the exchange, the rest is the request's own.
#[derive(Clone, Debug)]
pub struct Head {
    /// The request's exchange number: `resp_<n>`, `msg_<n>`, `fc_<n>_<k>`.
    pub exchange: usize,
    /// Seconds since the epoch.
    pub created_at: u64,
    /// The model asked for (or `rehearsal`).
    pub model: String,
    /// The request's `instructions`, when a string.
    pub instructions: Option<String>,
    /// The request's `previous_response_id`.
    pub previous_response_id: Option<String>,
    /// Whether the response is kept.
    pub store: bool,
    /// The request's function tools.
    pub tools: Vec<Tool>,
}

impl Head {
    /// The head of `request`'s answer, exchange `exchange`.
    pub fn of(request: &ResponsesRequest, exchange: usize, created_at: u64) -> Head {
        Head {
            exchange,
            created_at,
            model: request.model.clone().unwrap_or_else(|| "rehearsal".to_string()),
            instructions: match &request.instructions {
                Some(Input::Text(text)) => Some(text.clone()),
                _ => None,
            },
            previous_response_id: request.previous_response_id.clone(),
            store: request.stores(),
            tools: request.tools.iter().flatten().filter(|t| t.kind == "function").cloned().collect(),
        }
    }

    /// `resp_<n>`.
    pub fn id(&self) -> String {
        format!("resp_{}", self.exchange)
    }

    fn object(&self, status: &'static str, output: Vec<OutItem>, usage: Option<ResponsesUsage>) -> ResponseObject {
        ResponseObject {
            id: self.id(),
            object: "response",
            created_at: self.created_at,
            status,
            error: None,
            incomplete_details: None,
            instructions: self.instructions.clone(),
            model: self.model.clone(),
            output,
            parallel_tool_calls: true,
            previous_response_id: self.previous_response_id.clone(),
            store: self.store,
            tool_choice: "auto",
            tools: self.tools.clone(),
            usage,
        }
    }
}

/// The reply's calls' arguments as JSON texts, in call order.
fn arguments(reply: &LlmReply) -> Vec<String> {
    reply.tool_calls.iter().map(|c| serde_json::to_string(&*c.args).expect("JSON values serialize")).collect()
}

fn usage(prompt_chars: usize, reply: &LlmReply) -> ResponsesUsage {
    let reply_chars = reply.text.chars().count() + arguments(reply).iter().map(|a| a.chars().count()).sum::<usize>();
    let usage = super::Usage::estimate(prompt_chars, reply_chars);
    ResponsesUsage {
        input_tokens: usage.prompt_tokens,
        input_tokens_details: InputTokensDetails { cached_tokens: 0, cache_write_tokens: 0 },
        output_tokens: usage.completion_tokens,
        output_tokens_details: OutputTokensDetails { reasoning_tokens: 0 },
        total_tokens: usage.total_tokens,
    }
}

fn output_text(text: &str) -> OutputText {
    OutputText { kind: "output_text", text: text.to_string(), annotations: Vec::new(), logprobs: Vec::new() }
}

/// Whether the reply has a message item: when it has text, or nothing else.
fn has_message(reply: &LlmReply) -> bool {
    !reply.text.is_empty() || reply.tool_calls.is_empty()
}

/// The output items of a reply, completed: its message (when it has text, or nothing else),
/// then a `function_call` per call.
fn output(exchange: usize, reply: &LlmReply) -> Vec<OutItem> {
    let mut out = Vec::new();
    if has_message(reply) {
        out.push(OutItem::Message {
            id: format!("msg_{exchange}"),
            status: "completed",
            role: "assistant",
            content: vec![output_text(&reply.text)],
        });
    }
    for (k, (call, arguments)) in reply.tool_calls.iter().zip(arguments(reply)).enumerate() {
        out.push(OutItem::FunctionCall {
            id: format!("fc_{exchange}_{}", k + 1),
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments,
            status: "completed",
        });
    }
    out
}

/// The non-streamed answer: a completed `response` with the reply's output items.
pub fn response(head: &Head, reply: &LlmReply, prompt_chars: usize) -> ResponseObject {
    head.object("completed", output(head.exchange, reply), Some(usage(prompt_chars, reply)))
}

/// The events of a streamed answer, in order: `response.created` and `response.in_progress`
/// (no output, no usage); the message (when the reply has text, or nothing else) as
/// `output_item.added`, `content_part.added`, its text in `output_text.delta`s of
/// [`crate::wire::stream::TEXT_PIECE_CHARS`] characters, `output_text.done`,
/// `content_part.done` and `output_item.done`; per call a `function_call` item added with
/// empty arguments, its arguments in `function_call_arguments.delta`s of
/// [`crate::wire::stream::ARGUMENT_PIECE_CHARS`] characters, `function_call_arguments.done`
/// and `output_item.done`; `response.completed` with every item and the usage.
pub fn events(head: &Head, reply: &LlmReply, prompt_chars: usize) -> Vec<Event> {
    use crate::wire::stream::{ARGUMENT_PIECE_CHARS, TEXT_PIECE_CHARS, pieces};
    let items = output(head.exchange, reply);
    let mut out = Vec::new();
    let mut n = 0;
    let mut seq = || {
        n += 1;
        n - 1
    };
    out.push(Event::Created { sequence_number: seq(), response: head.object("in_progress", Vec::new(), None) });
    out.push(Event::InProgress { sequence_number: seq(), response: head.object("in_progress", Vec::new(), None) });
    for (output_index, item) in items.iter().enumerate() {
        match item {
            OutItem::Message { id, content, .. } => {
                let text = content.iter().map(|p| p.text.as_str()).collect::<String>();
                let empty =
                    OutItem::Message { id: id.clone(), status: "in_progress", role: "assistant", content: Vec::new() };
                out.push(Event::OutputItemAdded { sequence_number: seq(), output_index, item: empty });
                let item_id = id.clone();
                out.push(Event::ContentPartAdded {
                    sequence_number: seq(),
                    item_id: item_id.clone(),
                    output_index,
                    content_index: 0,
                    part: output_text(""),
                });
                for delta in pieces(&text, TEXT_PIECE_CHARS) {
                    out.push(Event::OutputTextDelta {
                        sequence_number: seq(),
                        item_id: item_id.clone(),
                        output_index,
                        content_index: 0,
                        delta,
                        logprobs: Vec::new(),
                    });
                }
                out.push(Event::OutputTextDone {
                    sequence_number: seq(),
                    item_id: item_id.clone(),
                    output_index,
                    content_index: 0,
                    text: text.clone(),
                    logprobs: Vec::new(),
                });
                out.push(Event::ContentPartDone {
                    sequence_number: seq(),
                    item_id,
                    output_index,
                    content_index: 0,
                    part: output_text(&text),
                });
            }
            OutItem::FunctionCall { id, call_id, name, arguments, .. } => {
                let empty = OutItem::FunctionCall {
                    id: id.clone(),
                    call_id: call_id.clone(),
                    name: name.clone(),
                    arguments: String::new(),
                    status: "in_progress",
                };
                out.push(Event::OutputItemAdded { sequence_number: seq(), output_index, item: empty });
                for delta in pieces(arguments, ARGUMENT_PIECE_CHARS) {
                    out.push(Event::FunctionCallArgumentsDelta {
                        sequence_number: seq(),
                        item_id: id.clone(),
                        output_index,
                        delta,
                    });
                }
                out.push(Event::FunctionCallArgumentsDone {
                    sequence_number: seq(),
                    item_id: id.clone(),
                    output_index,
                    name: name.clone(),
                    arguments: arguments.clone(),
                });
            }
        }
        out.push(Event::OutputItemDone { sequence_number: seq(), output_index, item: item.clone() });
    }
    let done = head.object("completed", items, Some(usage(prompt_chars, reply)));
    out.push(Event::Completed { sequence_number: seq(), response: done });
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
        serde_json::from_str::<ResponsesRequest>(body).unwrap().convert(&[]).unwrap()
    }

    #[test]
    fn instructions_then_system_and_developer_items_are_the_system_text_in_order() {
        let c = convert(
            r#"{"instructions":"Top.","input":[{"role":"developer","content":"Dev."},{"role":"user","content":[{"type":"input_text","text":"Hi"}]},{"type":"message","role":"system","content":"Mid."}]}"#,
        );
        assert_eq!(c.system, "Top.\n\nDev.\n\nMid.");
        assert_eq!(c.messages.len(), 1);
    }

    #[test]
    fn function_calls_join_the_assistant_message_before_them_and_outputs_are_tool_messages() {
        let c = convert(r#"{"input":"Go"}"#);
        assert_eq!(c.messages.to_vec()[0].content, "Go");
        let c = convert(
            r#"{"input":[{"role":"user","content":"Go"},{"type":"reasoning","id":"rs_1","summary":[]},{"type":"message","role":"assistant","id":"msg_1","status":"completed","content":[{"type":"output_text","text":"On it.","annotations":[]}]},{"type":"function_call","call_id":"c1","name":"Agent","arguments":"{\"task\":\"x\"}","id":"fc_1"},{"type":"function_call","call_id":"c2","name":"Agent","arguments":"not json"},{"type":"function_call_output","call_id":"c1","output":"done"},{"type":"function_call_output","call_id":"c2","output":[{"type":"input_text","text":"also"},{"type":"input_image","image_url":"x"}]},{"type":"function_call","call_id":"c3","name":"Agent","arguments":"{}"}]}"#,
        );
        let m = c.messages.to_vec();
        assert_eq!(m.len(), 5, "{m:?}");
        assert_eq!(m[1].content, "On it.");
        assert_eq!(m[1].tool_calls.len(), 2);
        assert_eq!(*m[1].tool_calls[1].args, serde_json::json!("not json"));
        assert_eq!((m[2].tool_call_id.as_deref(), m[2].content.as_str()), (Some("c1"), "done"));
        assert_eq!((m[3].tool_call_id.as_deref(), m[3].content.as_str()), (Some("c2"), "also"));
        assert_eq!((m[4].content.as_str(), m[4].tool_calls.len()), ("", 1));
    }

    #[test]
    fn only_function_tools_are_offered_and_bad_items_are_named() {
        let c = convert(
            r#"{"input":"x","tools":[{"type":"web_search"},{"type":"function","name":"f","parameters":{"type":"object"},"strict":true}]}"#,
        );
        assert_eq!(c.tools.len(), 1);
        let bad =
            serde_json::from_str::<ResponsesRequest>(r#"{"input":[{"type":"function_call_output","output":"x"}]}"#)
                .unwrap()
                .convert(&[])
                .unwrap_err();
        assert_eq!(bad, "input[0]: a `function_call_output` item needs `call_id`");
    }

    #[test]
    fn a_kept_response_holds_its_chain_its_input_and_its_output_and_the_oldest_goes_first() {
        let mut chains = Chains::new(2);
        let reply = LlmReply {
            text: "Hi".into(),
            tool_calls: vec![ToolCall { id: "call_1".into(), name: "f".into(), args: Arc::new(serde_json::json!({})) }],
        };
        chains.keep("resp_0", &[], vec![Item { role: Some("user".into()), ..Item::default() }], &reply, 0);
        let first = chains.get("resp_0").unwrap();
        assert_eq!(first.len(), 3);
        chains.keep("resp_1", &first, Vec::new(), &LlmReply::default(), 1);
        chains.keep("resp_2", &[], Vec::new(), &LlmReply::default(), 2);
        assert!(chains.get("resp_0").is_none());
        assert_eq!(chains.get("resp_1").unwrap().len(), 4);
    }
}

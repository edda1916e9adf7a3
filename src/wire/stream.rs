//! Rendering a reply as the OpenAI stream: the chunks, as SSE frames (`data: {json}\n\n`),
//! then `data: [DONE]\n\n`.
//!
//! The chunks, in order (what the `openai` SDKs' stream accumulators expect):
//! 1. `delta: {"role":"assistant","content":""}`;
//! 2. the text in pieces of [`TEXT_PIECE_CHARS`] characters, one chunk each;
//! 3. per call, in order: a chunk with `index`, `id`, `type: "function"`, `function.name` and
//!    empty `arguments`, then its arguments' JSON text in pieces of [`ARGUMENT_PIECE_CHARS`];
//! 4. an empty delta with `finish_reason` (`tool_calls` when the reply has calls, else `stop`);
//! 5. with `stream_options.include_usage`: a chunk with no choice and the usage.
//!
//! The pieces are fixed sizes, so a reply streams the same bytes every time. What this module
//! deliberately does not do: send anything, or wait (the server owns time).

use super::api::{
    AnswerMessage, AnswerToolCall, ApiFunctionCall, Choice, Chunk, ChunkChoice, Completion, Delta, DeltaCall,
    DeltaFunction, Usage,
};
use crate::sut::llm::LlmReply;

/// The characters of text per chunk.
pub const TEXT_PIECE_CHARS: usize = 24;
/// The characters of a call's arguments per chunk.
pub const ARGUMENT_PIECE_CHARS: usize = 32;

/// What every chunk and answer of one request repeats.
#[derive(Clone, Debug)]
pub struct Head {
    /// `chatcmpl-<n>`.
    pub id: String,
    /// Seconds since the epoch.
    pub created: u64,
    /// The model.
    pub model: String,
}

/// The reply's arguments as JSON texts, in call order.
fn arguments(reply: &LlmReply) -> Vec<String> {
    reply.tool_calls.iter().map(|c| serde_json::to_string(&*c.args).expect("JSON values serialize")).collect()
}

/// The characters a reply counts for the usage estimate.
fn reply_chars(reply: &LlmReply, args: &[String]) -> usize {
    reply.text.chars().count() + args.iter().map(|a| a.chars().count()).sum::<usize>()
}

fn finish_reason(reply: &LlmReply) -> &'static str {
    if reply.tool_calls.is_empty() { "stop" } else { "tool_calls" }
}

/// The non-streamed answer.
pub fn completion(head: &Head, reply: &LlmReply, prompt_chars: usize) -> Completion {
    let args = arguments(reply);
    let calls: Vec<AnswerToolCall> = reply
        .tool_calls
        .iter()
        .zip(&args)
        .map(|(c, a)| AnswerToolCall {
            id: c.id.clone(),
            kind: "function",
            function: ApiFunctionCall { name: c.name.clone(), arguments: a.clone() },
        })
        .collect();
    let content = if reply.text.is_empty() && !calls.is_empty() { None } else { Some(reply.text.clone()) };
    Completion {
        id: head.id.clone(),
        object: "chat.completion",
        created: head.created,
        model: head.model.clone(),
        choices: vec![Choice {
            index: 0,
            message: AnswerMessage {
                role: "assistant",
                content,
                tool_calls: if calls.is_empty() { None } else { Some(calls) },
            },
            finish_reason: finish_reason(reply),
        }],
        usage: Usage::estimate(prompt_chars, reply_chars(reply, &args)),
    }
}

/// Splits `text` into pieces of at most `n` characters (none for an empty text).
pub(crate) fn pieces(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(n).map(|c| c.iter().collect()).collect()
}

/// The chunks of a streamed answer, in order (see the module doc).
pub fn chunks(head: &Head, reply: &LlmReply, prompt_chars: usize, include_usage: bool) -> Vec<Chunk> {
    let chunk = |delta: Delta, finish_reason: Option<&'static str>| Chunk {
        id: head.id.clone(),
        object: "chat.completion.chunk",
        created: head.created,
        model: head.model.clone(),
        choices: vec![ChunkChoice { index: 0, delta, finish_reason }],
        usage: None,
    };
    let mut out = vec![chunk(Delta { role: Some("assistant"), content: Some(String::new()), tool_calls: None }, None)];
    for piece in pieces(&reply.text, TEXT_PIECE_CHARS) {
        out.push(chunk(Delta { content: Some(piece), ..Delta::default() }, None));
    }
    let args = arguments(reply);
    for (index, (call, args)) in reply.tool_calls.iter().zip(&args).enumerate() {
        let first = DeltaCall {
            index,
            id: Some(call.id.clone()),
            kind: Some("function"),
            function: DeltaFunction { name: Some(call.name.clone()), arguments: String::new() },
        };
        out.push(chunk(Delta { tool_calls: Some(vec![first]), ..Delta::default() }, None));
        for piece in pieces(args, ARGUMENT_PIECE_CHARS) {
            let more =
                DeltaCall { index, id: None, kind: None, function: DeltaFunction { name: None, arguments: piece } };
            out.push(chunk(Delta { tool_calls: Some(vec![more]), ..Delta::default() }, None));
        }
    }
    out.push(chunk(Delta::default(), Some(finish_reason(reply))));
    if include_usage {
        out.push(Chunk {
            choices: Vec::new(),
            usage: Some(Usage::estimate(prompt_chars, reply_chars(reply, &args))),
            ..chunk(Delta::default(), None)
        });
    }
    out
}

/// One SSE frame of a chunk.
pub fn frame(chunk: &Chunk) -> String {
    format!("data: {}\n\n", serde_json::to_string(chunk).expect("chunks serialize"))
}

/// The frame that ends a stream.
pub const DONE: &str = "data: [DONE]\n\n";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sut::llm::ToolCall;
    use std::sync::Arc;

    fn head() -> Head {
        Head { id: "chatcmpl-0".into(), created: 0, model: "m".into() }
    }

    #[test]
    fn a_call_streams_its_header_then_argument_fragments_that_join_to_its_arguments() {
        let args = serde_json::json!({"prompt": "a long enough prompt to need two pieces"});
        let reply = LlmReply {
            text: String::new(),
            tool_calls: vec![ToolCall {
                id: "call_1".into(),
                name: "spawn_agent".into(),
                args: Arc::new(args.clone()),
            }],
        };
        let chunks = chunks(&head(), &reply, 10, true);
        let calls: Vec<&DeltaCall> =
            chunks.iter().flat_map(|c| &c.choices).flat_map(|c| c.delta.tool_calls.iter().flatten()).collect();
        assert_eq!(calls[0].id.as_deref(), Some("call_1"));
        assert_eq!(calls[0].function.name.as_deref(), Some("spawn_agent"));
        assert!(calls.len() > 2, "the arguments come in more than one piece");
        let joined: String = calls.iter().map(|c| c.function.arguments.as_str()).collect();
        assert_eq!(serde_json::from_str::<serde_json::Value>(&joined).unwrap(), args);
        let last = &chunks[chunks.len() - 2];
        assert_eq!(last.choices[0].finish_reason, Some("tool_calls"));
        assert!(chunks.last().unwrap().choices.is_empty() && chunks.last().unwrap().usage.is_some());
    }

    #[test]
    fn text_is_cut_on_character_boundaries() {
        assert_eq!(pieces("é".repeat(30).as_str(), 24).len(), 2);
        assert!(pieces("", 24).is_empty());
    }
}

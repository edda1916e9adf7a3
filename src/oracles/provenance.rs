//! Where each message of an agent's requests may come from: its own replies and tool
//! results, user turns, messages sent to it, notifications, nudges.
//!
//! Shared by `fork_isolation` and `routing`; it reports nothing itself, it only says whether
//! a conversation is explained and, when not, by which message.

use std::collections::{BTreeMap, BTreeSet};

use crate::evidence::same_reply;
use crate::sut::AgentId;
use crate::sut::llm::{Message, Role, Transcript};

use super::index::PerAgent;
use super::{index, short};

/// Where the messages of each agent's requests may come from.
pub(super) struct Provenance<'a> {
    /// Per agent: its own replies, as the assistant messages they became.
    replies: PerAgent<Replies<'a>>,
    /// Per agent: texts that legitimately reach it as user messages (user turns, steering,
    /// `subagent.send`, notifications).
    inbound: PerAgent<BTreeSet<String>>,
    /// Per agent: the trace line of each of its requests, in order.
    pub(super) request_lines: PerAgent<Vec<usize>>,
}

type ReplyKey<'a> = (&'a str, Option<&'a str>, u64);

/// One agent's replies, in the order the model gave them. An agent's requests show its replies
/// in that order, so the next one is tried first; any other is found through an index by
/// [`reply_key`] (built the first time one is needed), so finding one is never a scan of
/// every reply.
#[derive(Default)]
struct Replies<'a> {
    in_order: &'a [&'a Message],
    /// The reply after the last one found.
    next: std::cell::Cell<usize>,
    by_key: std::cell::OnceCell<BTreeMap<ReplyKey<'a>, Vec<usize>>>,
}

impl<'a> Replies<'a> {
    fn new(in_order: &'a [&'a Message]) -> Replies<'a> {
        Replies { in_order, ..Replies::default() }
    }

    /// Whether `message` is one of these replies (same text, call names and arguments).
    fn holds(&self, message: &Message) -> bool {
        let next = self.next.get();
        if self.in_order.get(next).is_some_and(|reply| same_reply(message, reply)) {
            self.next.set(next + 1);
            return true;
        }
        let by_key = self.by_key.get_or_init(|| {
            let mut by_key: BTreeMap<ReplyKey, Vec<usize>> = BTreeMap::new();
            for (i, reply) in self.in_order.iter().enumerate() {
                by_key.entry(reply_key(reply)).or_default().push(i);
            }
            by_key
        });
        let found = by_key
            .get(&reply_key(message))
            .and_then(|alike| alike.iter().copied().find(|i| same_reply(message, self.in_order[*i])));
        if let Some(i) = found {
            self.next.set(i + 1);
        }
        found.is_some()
    }
}

/// What replies are indexed by: the text, the first call's name, and a fingerprint of every
/// call's name and arguments (never its id). Without the fingerprint, an agent calling one
/// tool many times with other arguments puts every such reply under one key, and finding one
/// compares arguments reply by reply (quadratic in its steps). A collision only costs a
/// comparison: `same_reply` decides.
fn reply_key(message: &Message) -> ReplyKey<'_> {
    use std::hash::{Hash, Hasher};
    let mut hasher = FingerprintHasher::default();
    for call in &message.tool_calls {
        call.name.hash(&mut hasher);
        hash_json(&call.args, &mut hasher);
    }
    (message.content.as_str(), message.tool_calls.first().map(|c| c.name.as_str()), hasher.finish())
}

/// A fast, fixed hasher (the multiply-rotate step of rustc's `FxHasher`) for reply
/// fingerprints: they never leave the oracle and need no defence against chosen collisions,
/// only speed; SipHash was a tenth of judging a large run.
#[derive(Default)]
struct FingerprintHasher(u64);

impl std::hash::Hasher for FingerprintHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.add(u64::from_le_bytes(chunk.try_into().unwrap_or_default()));
        }
        let mut tail = [0u8; 8];
        let rest = chunks.remainder();
        tail[..rest.len()].copy_from_slice(rest);
        self.add(u64::from_le_bytes(tail) ^ rest.len() as u64);
    }

    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl FingerprintHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

/// Hashes a JSON value by its structure, allocating nothing: equal values hash equally (an
/// object's entries are combined in any order, as object equality ignores order).
fn hash_json(value: &serde_json::Value, hasher: &mut impl std::hash::Hasher) {
    use serde_json::Value;
    use std::hash::Hash;
    match value {
        Value::Null => 0u8.hash(hasher),
        Value::Bool(b) => (1u8, b).hash(hasher),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => (2u8, u).hash(hasher),
            (None, Some(i)) => (3u8, i).hash(hasher),
            _ => (4u8, n.as_f64().map(f64::to_bits)).hash(hasher),
        },
        Value::String(text) => (5u8, text).hash(hasher),
        Value::Array(items) => {
            (6u8, items.len()).hash(hasher);
            items.iter().for_each(|item| hash_json(item, hasher));
        }
        Value::Object(map) => {
            use std::hash::Hasher as _;
            let mut entries = 0u64;
            for (key, item) in map {
                let mut entry = FingerprintHasher::default();
                key.hash(&mut entry);
                hash_json(item, &mut entry);
                entries = entries.wrapping_add(entry.finish());
            }
            (7u8, map.len(), entries).hash(hasher);
        }
    }
}

/// How far provenance has checked an agent's conversation: its last request from `from` on,
/// and the call ids its own replies made in it. The next request of the agent that grew from
/// this one is checked only in the messages it added.
pub(super) struct Checked<'a> {
    pub(super) messages: &'a Transcript,
    pub(super) from: usize,
    /// In the order made: a result usually answers one of the last, so a search from the end
    /// finds it at once (a set cost an allocation per call).
    pub(super) calls: Vec<&'a str>,
}

impl<'a> Provenance<'a> {
    /// Every agent's replies (as the index holds them); no inbound text or request line yet.
    pub(super) fn new(index: &'a index::Index<'a>) -> Provenance<'a> {
        let agents = &index.agents;
        let mut replies = PerAgent::new(agents);
        for agent in 0..agents.len() {
            replies.insert(agent, Replies::new(index.replies_of(agent)));
        }
        Provenance { replies, inbound: PerAgent::new(agents), request_lines: PerAgent::new(agents) }
    }

    /// Notes a text that reached the agent numbered `agent` from outside its loop.
    pub(super) fn inbound(&mut self, agent: usize, text: String) {
        self.inbound.or_insert_with(agent, BTreeSet::new).insert(text);
    }

    /// The first of `messages` (a stretch of one request of `agent`, following what
    /// `calls` already holds) that cannot come from `agent`'s own loop, and why. An assistant
    /// message must be one of the agent's own replies (same text, call names and arguments;
    /// the core may give the calls ids of its own); a tool result must answer a call of such a
    /// message earlier in the request (ids compared within the request as the core wrote them,
    /// never parsed); a user message must be a text that reached the agent from outside (turns,
    /// steering, sends, notifications) or the runtime's exhaustion nudge.
    pub(super) fn first_foreign(
        &self,
        (agent, number): (&AgentId, usize),
        messages: impl IntoIterator<Item = &'a Message>,
        calls: &mut Vec<&'a str>,
    ) -> Option<String> {
        for message in messages {
            match message.role {
                Role::Assistant => {
                    let own = self.replies.get(number).is_some_and(|replies| replies.holds(message));
                    if !own {
                        return Some(format!(
                            "an assistant message {agent} never wrote ({:?})",
                            short(&message.content)
                        ));
                    }
                    calls.extend(message.tool_calls.iter().map(|c| c.id.as_str()));
                }
                Role::Tool => {
                    let id = message.tool_call_id.as_deref().unwrap_or_default();
                    if !calls.iter().rev().any(|call| *call == id) {
                        return Some(format!("a tool result for call {id:?}, which no earlier reply of {agent} made"));
                    }
                }
                Role::User => {
                    let known = self.inbound.get(number).is_some_and(|texts| texts.contains(&message.content))
                        || message.content.starts_with("System: step budget exhausted (");
                    if !known {
                        return Some(format!("a user message nobody sent to {agent} ({:?})", short(&message.content)));
                    }
                }
            }
        }
        None
    }
}

//! The evidence of a run: what the oracles judge, written down as a contract any core can
//! honour (`docs/evidence.md`).
//!
//! Evidence is two records. The **trace** holds the events the core reported through its
//! [`Observer`](crate::sut::event::Observer), in order, stamped with virtual time by the
//! harness. The **exchanges** hold every request the model received and the reply it gave, as
//! the harness itself saw them (the core cannot misreport those). Around them, a few facts the
//! runner knows: the rules, how the run was set up ([`Setup`]: the session context, the
//! catalog, the turns' request ids, the steering it sent), how the run ended, what was left
//! alive.
//!
//! This module sits below both the harness (which writes evidence) and the oracles (which
//! read it); it depends on neither. It also holds the derived facts both need, such as what a
//! fork child's first request must hold.

pub mod attribution;

use std::collections::BTreeMap;
use std::time::Duration;

use crate::dialect::{History, Printed, python_repr};
use crate::rules::Rules;
use crate::scenario::{ProfileSpec, RulesSpec};
use crate::sut::llm::{LlmRequest, Message, Role, Transcript};
use crate::sut::{AgentId, Profile};
use crate::trace::Trace;

/// One request the model received, and the reply it gave.
#[derive(Clone, Debug)]
pub struct Exchange {
    /// The request, as the model received it.
    pub request: LlmRequest,
    /// The reply as an assistant message (text and tool calls), once it arrived; `None` for a
    /// failed call or one that never answered.
    pub reply: Option<Message>,
}

/// A reply the harness scheduled: the agent that asked, when it asked, and the virtual instant
/// the reply is due (the request's instant plus its scripted latency), whether or not the core
/// was still listening then. `ends_loop`: the reply is a non-blank text with no calls, or a
/// lone `final_answer` or `fail` call, with no error, no hang and no dropped stream, so the
/// agent's loop ends on receiving it.
///
/// The harness knows this before the core does; the oracles read it to tell a child that
/// ended in the instant its limit ran out from one the timer beat (`oracle.timeouts.finish-at-limit-wins`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Due {
    /// The agent whose request it answers.
    pub agent: AgentId,
    /// When the request arrived.
    pub asked: Duration,
    /// When the reply is due.
    pub due: Duration,
    /// Whether the reply ends the agent's loop.
    pub ends_loop: bool,
}

/// How the harness set a run up: the facts, besides the rules, that an oracle needs to
/// re-derive what the core should have sent and when. The harness knows them before the run
/// starts; none of them comes from the core.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Setup {
    /// The scenario's seed, from which the core draws task ids.
    pub seed: u64,
    /// The scenario's `rules` as written: a preset and the knobs it sets.
    pub rules_as_written: RulesSpec,
    /// The session id every request must carry.
    pub session_id: String,
    /// The session's model override.
    pub model: Option<String>,
    /// The session's reasoning effort.
    pub reasoning_effort: Option<String>,
    /// The session's memory sections.
    pub memory: Vec<String>,
    /// The base system prompt.
    pub system_prompt: String,
    /// The skills of the root.
    pub skills: Vec<String>,
    /// The agent profiles the core was given, as the loader read and resolved them (inline
    /// over written-in files over workspace over home).
    pub profiles: Vec<Profile>,
    /// The profile files written into the scenario, by file name, as written.
    pub profile_files: BTreeMap<String, String>,
    /// The profiles declared inline, as written.
    pub profile_specs: Vec<ProfileSpec>,
    /// The catalog tools' names, in catalog order.
    pub tools: Vec<String>,
    /// The tags of each catalog tool that has any (`risk:safe`, `risk:write`), by name.
    pub tool_tags: BTreeMap<String, Vec<String>>,
    /// Whether the calls went through Roku's risk gate; `false`: the auto gate, which approves
    /// everything and asks nobody.
    pub risk_gate: bool,
    /// The tools the risk gate's policy refuses outright.
    pub policy_deny: Vec<String>,
    /// The request id of each user turn, in turn order.
    pub request_ids: Vec<String>,
    /// The steering the harness sent the root: at what virtual time, which message.
    pub steering: Vec<(Duration, String)>,
    /// Whether same-instant ties were broken in the default order (not an explored one).
    pub default_order: bool,
}

/// What a finished run leaves for the oracles to read.
#[derive(Clone, Copy)]
pub struct Evidence<'a> {
    /// The rules the run used.
    pub rules: &'a Rules,
    /// How the harness set the run up; `None` for evidence built by hand, where the oracles
    /// that need it judge nothing of what they would read from it.
    pub setup: Option<&'a Setup>,
    /// The trace.
    pub trace: &'a Trace,
    /// Every request the model received, in the order received.
    pub exchanges: &'a [Exchange],
    /// Every reply the harness scheduled, in the order the requests arrived.
    pub due: &'a [Due],
    /// Conversation records the core still held after the session ended.
    pub live_sessions: &'a [String],
    /// Whether the session ran all its turns and quit.
    pub session_ended: bool,
    /// The run limit (horizon, event cap) that stopped the run, if one did.
    pub limit_hit: Option<&'a str>,
    /// Whether the harness stopped the run before it ended (a run limit, an authoring error
    /// in the scenario, a panic): the trace is then a prefix, and its last instant may be
    /// unfinished. An oracle judges only what the prefix shows, never what the stop cut off.
    pub stopped: bool,
    /// Tokio tasks still alive after the session quit.
    pub alive_tasks: usize,
}

/// Whether `kept` is the model's `reply` as a core keeps it: the same role, text, and calls
/// with the same names and arguments in the same order. Call ids are not compared: a core may
/// give calls its own ids, as long as its tool results answer them (the contract,
/// `docs/evidence.md`).
pub fn same_reply(kept: &Message, reply: &Message) -> bool {
    kept.role == reply.role
        && kept.content == reply.content
        && kept.tool_calls.len() == reply.tool_calls.len()
        && kept.tool_calls.iter().zip(&reply.tool_calls).all(|(a, b)| a.name == b.name && a.args == b.args)
}

/// Whether `kept` is the model's `reply` as a runtime whose history is written as `history`
/// says keeps it in its next request ([`History`]): under [`History::Kept`], [`same_reply`];
/// re-rendered, one assistant message of text alone: the reply's text (trimmed), then, when
/// the reply has calls, the dialect's `calls` line and a printout holding each call (its name,
/// and its arguments as the dialect prints them), as often as the reply holds it.
pub fn kept_as(history: &History, kept: &Message, reply: &Message) -> bool {
    let History::Rendered { calls, arguments } = history else { return same_reply(kept, reply) };
    if kept.role != Role::Assistant || !kept.tool_calls.is_empty() || kept.tool_call_id.is_some() {
        return false;
    }
    // Python's `str.strip()` (smolagents strips the model's text) takes more than Rust's `trim`:
    // the separators U+001C to U+001F too (blind review 39).
    let strip = |t: &str| -> usize { t.len() - t.trim_start_matches(python_space).len() };
    let text = reply.content.trim_matches(python_space);
    if reply.tool_calls.is_empty() {
        return kept.content.trim_matches(python_space) == text;
    }
    let Some(rest) = kept.content[strip(&kept.content)..].strip_prefix(text) else { return false };
    // The text is followed by a line break, then the calls' line (none without a text).
    let rest = if text.is_empty() { rest } else { rest.strip_prefix('\n').unwrap_or("\u{0}") };
    let Some(printout) = rest.strip_prefix(calls.as_str()) else { return false };
    let needle = |c: &crate::sut::llm::ToolCall| -> String {
        match arguments {
            None => c.name.clone(),
            Some(Printed::Python) => {
                let name = python_repr(&serde_json::Value::String(c.name.clone())).unwrap_or_else(|| c.name.clone());
                match python_repr(&c.args) {
                    Some(args) => format!("'name': {name}, 'arguments': {args}"),
                    None => format!("'name': {name}, 'arguments': "),
                }
            }
        }
    };
    let needles: Vec<String> = reply.tool_calls.iter().map(needle).collect();
    needles.iter().all(|n| printout.matches(n.as_str()).count() >= needles.iter().filter(|m| *m == n).count())
}

/// Whether Python's `str.isspace()` holds for `c`: Rust's whitespace and U+001C to U+001F.
fn python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// When `messages` go on from a request whose messages were `earlier` and whose reply was
/// `reply`, as a runtime whose history is written as `history` says writes it: how long the
/// start they make is. Under [`History::Kept`]: `earlier`, then the reply kept as given.
/// Re-rendered: `earlier` unchanged, then the reply re-rendered ([`kept_as`]); or, when the
/// reply had calls (one of which raised), `earlier` with its last user message grown by
/// appended text and nothing after it.
pub fn goes_on(history: &History, earlier: &Transcript, reply: &Message, messages: &Transcript) -> Option<usize> {
    let n = earlier.len();
    if messages.len() > n && messages.starts_with(earlier) {
        return kept_as(history, messages.get(n)?, reply).then_some(n + 1);
    }
    if history.is_kept() || reply.tool_calls.is_empty() || messages.len() != n || n == 0 {
        return None;
    }
    let (was, now) = (earlier.get(n - 1)?, messages.get(n - 1)?);
    let grown = was.role == Role::User
        && now.role == Role::User
        && now.tool_calls.is_empty()
        && now.tool_call_id.is_none()
        && now.content.len() > was.content.len()
        && now.content.starts_with(was.content.as_str());
    let same_before = earlier.iter().zip(messages.iter()).take(n - 1).all(|(a, b)| a == b);
    (grown && same_before).then_some(n)
}

/// Whether a fork child's request is exactly its parent's conversation up to and including
/// the assistant message that made the forking call, then the child's prompt, then the
/// messages `sent` to it before its first step. `None` when it is; else what differs.
///
/// The forking call is found by the rules alone: a `subagent` call in one of the parent's
/// replies whose `prompt` (trimmed) is the child's goal and whose `session` is `fork` or
/// `inherit`. No call id is read.
pub fn fork_mismatch(exchanges: &[Exchange], request: &LlmRequest, sent: &[String]) -> Option<String> {
    let Some(parent) = request.agent.parent() else {
        return Some("the root has no parent to fork from".to_string());
    };
    let mut last_difference = None;
    for e in exchanges.iter().filter(|e| e.request.agent == parent) {
        let Some(reply) = &e.reply else { continue };
        let forked = reply.tool_calls.iter().any(|c| {
            c.name == "subagent"
                && c.args.get("prompt").and_then(|p| p.as_str()).map(str::trim) == Some(&*request.goal)
                && matches!(c.args.get("session").and_then(|s| s.as_str()).map(str::trim), Some("fork" | "inherit"))
        });
        if !forked {
            continue;
        }
        let mut expected = e.request.messages.clone();
        expected.push(reply.clone());
        expected.push(Message::user(&*request.goal));
        expected.extend(sent.iter().map(|m| Message::user(m.clone())));
        // The forking reply is compared as the parent kept it (its call ids may be the core's).
        let reply_at = e.request.messages.len();
        let same = |i: usize, a: &Message, b: &Message| if i == reply_at { same_reply(b, a) } else { a == b };
        let (expected, got): (Vec<&Message>, Vec<&Message>) =
            (expected.iter().collect(), request.messages.iter().collect());
        let differs = expected.iter().zip(&got).enumerate().position(|(i, (a, b))| !same(i, a, b));
        if differs.is_none() && expected.len() == got.len() {
            return None;
        }
        let at = differs.unwrap_or(expected.len().min(got.len()));
        let show = |m: Option<&&Message>| m.map_or("(none)".to_string(), |m| format!("{:?}: {:?}", m.role, m.content));
        last_difference = Some(format!(
            "the request differs from the parent's conversation at the call at message {at} (expected {} messages, got {}): expected {}, got {}",
            expected.len(),
            got.len(),
            show(expected.get(at)),
            show(got.get(at))
        ));
    }
    Some(
        last_difference
            .unwrap_or_else(|| format!("{parent} made no forking `subagent` call with prompt {:?}", request.goal)),
    )
}

//! The system-under-test boundary: the small protocol through which the harness drives any
//! orchestration core, and the vocabulary in which a core reports what it did.
//!
//! A core under test implements [`SystemUnderTest`]. For each run the harness hands it a
//! [`Harness`]: the model to call ([`llm::Llm`], the scripted lanes), the tools
//! ([`tool::ToolCatalog`], the simulated tools), the approval set-up and the person who answers
//! approvals ([`approval::Asker`]), and the [`event::Observer`] to report to. The core runs user
//! turns and steering on the tokio clock and reports its [`event::Event`]s. The oracles judge
//! only those events plus the requests and replies the harness itself saw
//! (`docs/evidence.md` is the contract, rule by rule).
//!
//! The built-in core (`crate::core::Builtin`) is one implementation, with no special path;
//! `examples/` holds another, written independently.
//!
//! This module holds types and traits only: it runs nothing and judges nothing.
//!
//! Architecture Invariant: `sut` depends on nothing in this crate but `rules`. Both the
//! built-in core and the harness depend on it, never on each other.

pub mod approval;
pub mod event;
pub mod llm;
pub mod tool;
#[doc(hidden)]
pub mod transcript;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::rules::Rules;
use approval::{Asker, GateMode};
use event::{Observer, OutcomeKind, Status};
use llm::{BoxFuture, Llm};
use tool::ToolCatalog;

/// An agent's alias: `main`, `main/1`, `main/1/2`.
///
/// Part of the contract: the root is `main`; the `n`-th child an agent spawns (counting from
/// 1, across the session's turns) is `<parent>/<n>`. The harness selects a model script by
/// this alias, and the oracles read depth and parentage from it.
///
/// Cloning an alias copies a pointer; its depth is counted once. Aliases compare as their
/// text (the depth follows from it), but through a key read once: the first eight bytes as a
/// big-endian number, zero-padded, which orders as the text does; only aliases longer than
/// eight bytes with equal keys read the rest. Two clones of one alias compare without reading.
#[derive(Clone, Debug)]
pub struct AgentId {
    text: Arc<str>,
    depth: u32,
    key: u64,
}

impl PartialEq for AgentId {
    fn eq(&self, other: &AgentId) -> bool {
        Arc::ptr_eq(&self.text, &other.text) || (self.key == other.key && self.text == other.text)
    }
}

impl Eq for AgentId {}

impl std::hash::Hash for AgentId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.text.hash(state);
    }
}

impl Ord for AgentId {
    fn cmp(&self, other: &AgentId) -> std::cmp::Ordering {
        if Arc::ptr_eq(&self.text, &other.text) {
            return std::cmp::Ordering::Equal;
        }
        // Equal keys: equal first eight bytes, and an alias holds no NUL, so both are shorter
        // than eight bytes (and equal) or both are at least eight long.
        self.key.cmp(&other.key).then_with(|| self.tail().cmp(other.tail()))
    }
}

impl PartialOrd for AgentId {
    fn partial_cmp(&self, other: &AgentId) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl serde::Serialize for AgentId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl AgentId {
    fn new(text: Arc<str>, depth: u32) -> AgentId {
        let mut head = [0u8; 8];
        let n = text.len().min(8);
        head[..n].copy_from_slice(&text.as_bytes()[..n]);
        AgentId { text, depth, key: u64::from_be_bytes(head) }
    }

    /// The bytes past the key.
    fn tail(&self) -> &[u8] {
        &self.text.as_bytes()[self.text.len().min(8)..]
    }

    /// The root agent, `main`.
    pub fn root() -> AgentId {
        AgentId::new(Arc::from("main"), 0)
    }

    /// The `n`-th child (from 1) of this agent.
    pub fn child(&self, n: u32) -> AgentId {
        AgentId::new(Arc::from(format!("{}/{n}", self.text)), self.depth + 1)
    }

    /// 0 for the root, 1 for its children, ...
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// The parent's alias, if any.
    pub fn parent(&self) -> Option<AgentId> {
        self.text.rsplit_once('/').map(|(parent, _)| AgentId::new(Arc::from(parent), self.depth - 1))
    }

    /// Whether `self` is a descendant of `ancestor` (a child, grandchild, ...).
    pub fn descends_from(&self, ancestor: &AgentId) -> bool {
        self.text.len() > ancestor.text.len()
            && self.text.starts_with(&*ancestor.text)
            && self.text[ancestor.text.len()..].starts_with('/')
    }

    /// The alias as text.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for AgentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// How a loop (a turn, or a child) ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Final answer, failure or waiting for the user.
    pub kind: OutcomeKind,
    /// Ok or Error.
    pub status: Status,
    /// The final message, failure reason or question.
    pub message: String,
    /// `step_index` at the end.
    pub steps: u32,
    /// Steps left.
    pub budget_left: u32,
}

/// A reusable child configuration (Bub's agent profiles), already resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    /// Its name, as given in `subagent{agent}`.
    pub name: String,
    /// When to use it; listed in the parent's system prompt.
    pub description: String,
    /// The child's model.
    pub model: Option<String>,
    /// The child's reasoning effort.
    pub reasoning_effort: Option<String>,
    /// Tools the child may use (narrowing the parent's).
    pub tools: Option<Vec<String>>,
    /// Skills the child may use (narrowing the parent's).
    pub skills: Option<Vec<String>>,
    /// The child's time limit.
    pub timeout: Option<Duration>,
    /// Added to the child's system prompt.
    pub body: String,
}

/// What a session is configured with: the scenario's rules and session context.
#[derive(Clone, Debug)]
pub struct SessionConfig {
    /// The rule knobs.
    pub rules: Rules,
    /// Session id, passed to every request.
    pub session_id: String,
    /// Model override.
    pub model: Option<String>,
    /// Reasoning effort.
    pub reasoning_effort: Option<String>,
    /// Memory sections, passed to every request.
    pub memory: Vec<String>,
    /// The base system prompt.
    pub system_prompt: String,
    /// Skills the root may use.
    pub skills: Vec<String>,
    /// Agent profiles for `subagent{agent}`, already resolved (workspace over home).
    pub profiles: Vec<Profile>,
    /// Seed of everything the session draws (task ids).
    pub seed: u64,
}

/// How calls are approved, and who answers when a call needs a person's approval.
#[derive(Clone)]
pub struct Approval {
    /// Approve everything, or Roku's risk-based gate.
    pub mode: GateMode,
    /// Tools the policy refuses outright (risk gate).
    pub policy_deny: Vec<String>,
    /// Answers for calls that need approval (the scenario's scripted user).
    pub asker: Arc<dyn Asker>,
}

/// Everything the harness supplies to a core for one run.
#[derive(Clone)]
pub struct Harness {
    /// The model every agent of the session calls.
    pub llm: Arc<dyn Llm>,
    /// The catalog tools (simulated by the harness).
    pub tools: ToolCatalog,
    /// The approval set-up.
    pub approval: Approval,
    /// Where the core reports its events.
    pub observer: Arc<dyn Observer>,
}

/// What a core implements. The runner runs a scenario only on a core that has every feature
/// the scenario needs, and reports the others as skipped, naming what is missing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// Roku's foreground `Agent` sub-agent.
    pub foreground: bool,
    /// Bub's background `subagent` family (sessions, cap, notifications, profiles).
    pub background: bool,
    /// Roku's risk-based approval gate.
    pub risk_gate: bool,
    /// Messages injected into the root while it runs.
    pub steering: bool,
}

impl Capabilities {
    /// Everything the built-in core does.
    pub const ALL: Capabilities = Capabilities { foreground: true, background: true, risk_gate: true, steering: true };

    /// The features `need` asks for that `self` lacks, by name.
    pub fn missing(&self, need: &Capabilities) -> Vec<&'static str> {
        [
            (need.foreground && !self.foreground, "foreground `Agent`"),
            (need.background && !self.background, "background `subagent`"),
            (need.risk_gate && !self.risk_gate, "the risk-based approval gate"),
            (need.steering && !self.steering, "steering"),
        ]
        .into_iter()
        .filter_map(|(lacking, name)| lacking.then_some(name))
        .collect()
    }
}

/// Sends messages to a session's root from outside its loop (a user typing while it works).
///
/// A core without steering (`Capabilities::steering` false) hands out one that does nothing:
/// the runner never steers a scenario on it.
pub trait Steer: Send + Sync {
    /// Queues a message the root reads before its next step; a core reports it as
    /// [`event::Event::Steered`] at the root.
    fn steer(&self, message: &str);
}

/// One user's session with a core: turns run one after another, steering may arrive at any
/// time, and quitting ends everything the session started.
pub trait CoreSession: Send {
    /// Runs one user turn at the root and returns how it ended. Reports
    /// [`event::Event::TurnStarted`] and [`event::Event::TurnEnded`].
    fn turn<'a>(&'a mut self, message: &'a str, request_id: &'a str) -> BoxFuture<'a, Outcome>;

    /// A handle for steering messages, usable from other tasks.
    fn steerer(&self) -> Arc<dyn Steer>;

    /// Ends the session: stops every child still queued or running and returns once none of
    /// the session's tokio tasks is alive.
    fn quit(&mut self) -> BoxFuture<'_, ()>;

    /// Names of the conversation records the core still holds (named sessions are kept;
    /// `temp/…` and `fork/…` ones are gone once their task ended).
    fn live_sessions(&self) -> Vec<String>;
}

/// A core's refusal to start a session: why, in its words (a configuration it does not
/// accept, such as a profile it cannot honour).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused(pub String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

impl From<String> for Refused {
    fn from(why: String) -> Refused {
        Refused(why)
    }
}

impl From<crate::rules::InvalidKnob> for Refused {
    fn from(invalid: crate::rules::InvalidKnob) -> Refused {
        Refused(invalid.to_string())
    }
}

/// An orchestration core the harness can drive.
pub trait SystemUnderTest: Send + Sync {
    /// A short name for reports (`builtin`, `tiny-roku`, ...).
    fn name(&self) -> &str;

    /// What this core implements (no default: a core says what it does, so the runner never
    /// runs a scenario on a core that silently lacks a feature).
    fn capabilities(&self) -> Capabilities;

    /// Starts a session with the harness's parts. Called inside the run's paused-clock
    /// runtime. The error explains a configuration the core refuses (a finding about the
    /// core: the run stops with [`crate::harness::Halt::Refused`]).
    fn start(&self, config: SessionConfig, harness: Harness) -> Result<Box<dyn CoreSession>, Refused>;

    /// What this core reports through its `Observer`. A core that reports no events (or not
    /// with the built-in core's semantics) says [`Reports::NoEvents`] and is judged from its
    /// traffic with the model alone (`oracles::model_side`).
    fn reports(&self) -> Reports {
        Reports::Events
    }

    /// How this core spells sub-agents to the model: the name of a built-in dialect
    /// (`rehearsal`, `roku`, `bub`, `bub-0.5.1`, `generic`) or the path of a dialect file
    /// (`crate::dialect`). Read only when the run is judged from the model's side.
    fn dialect(&self) -> String {
        "rehearsal".to_string()
    }
}

/// What evidence a core reports besides its traffic with the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reports {
    /// Every event of `docs/evidence.md`, with its semantics.
    Events,
    /// Nothing the oracles can rely on: the run is judged from the model's side alone.
    NoEvents,
}

#[cfg(test)]
mod tests {
    use super::AgentId;

    /// Aliases order, compare and hash as their text, whatever their length (the key covers
    /// eight bytes; `main/1/10` and `main/1/9` differ past it).
    #[test]
    fn aliases_compare_as_their_text() {
        let root = AgentId::root();
        let mut aliases = vec![root.clone()];
        for n in [1, 2, 9, 10, 11, 100] {
            let child = root.child(n);
            for m in [1, 9, 10, 123] {
                aliases.push(child.child(m).child(m));
                aliases.push(child.child(m));
            }
            aliases.push(child);
        }
        for a in &aliases {
            for b in &aliases {
                assert_eq!(a.cmp(b), a.as_str().cmp(b.as_str()), "{a} vs {b}");
                assert_eq!(a == b, a.as_str() == b.as_str(), "{a} vs {b}");
            }
            // A rebuilt alias (another allocation) is equal to the one it names.
            let rebuilt = a.parent().map(|p| p.child(a.as_str().rsplit('/').next().unwrap().parse().unwrap()));
            if let Some(rebuilt) = rebuilt {
                assert_eq!(&rebuilt, a);
                assert_eq!(rebuilt.cmp(a), std::cmp::Ordering::Equal);
                assert_eq!(rebuilt.depth(), a.depth());
            }
        }
    }
}

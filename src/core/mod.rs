//! The orchestration core: a real agent runtime, written against the [`llm::Llm`] trait, the
//! [`tool::Tool`] trait, an [`approval::ApprovalGate`] and the tokio clock.
//!
//! Architecture Invariant: nothing in `core` knows it is being tested. It never reads the
//! wall clock (only `tokio::time`), never draws OS randomness (task ids come from the
//! session's seed), never iterates a `HashMap`, never does I/O. The harness plugs in through
//! the traits alone.
//!
//! A [`Session`] runs user turns at its root agent (`main`). Children are `main/1`, `main/2`,
//! ... in spawn order, their children `main/1/1`, and so on.

pub mod approval;
pub mod budget;
pub mod conversation;
pub mod event;
pub mod llm;
pub mod tool;

mod agent_loop;
mod background;
mod foreground;

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::rules::Rules;
use approval::ApprovalGate;
use budget::Budget;
use conversation::Conversation;
use event::{Event, Observer, OutcomeKind, Status};
use llm::{Llm, Message};
use tool::ToolCatalog;

/// SplitMix64: a small, well-mixed function of one `u64`. Every draw of a run comes from the
/// scenario's seed through it (task ids here; tie orders in the harness's schedule).
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// An agent's alias: `main`, `main/1`, `main/1/2`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct AgentId(String);

impl AgentId {
    /// The root agent, `main`.
    pub fn root() -> AgentId {
        AgentId("main".to_string())
    }

    /// The `n`-th child (from 1) of this agent.
    pub fn child(&self, n: u32) -> AgentId {
        AgentId(format!("{}/{n}", self.0))
    }

    /// 0 for the root, 1 for its children, ...
    pub fn depth(&self) -> u32 {
        self.0.matches('/').count() as u32
    }

    /// The parent's alias, if any.
    pub fn parent(&self) -> Option<AgentId> {
        self.0.rsplit_once('/').map(|(parent, _)| AgentId(parent.to_string()))
    }

    /// The alias as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for AgentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
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

/// A reusable child configuration (Bub's agent profiles).
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

/// What a session is configured with.
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

/// Messages for one agent from outside its loop, read before its next step.
#[derive(Default)]
pub(crate) struct Inbox {
    messages: Mutex<VecDeque<Message>>,
}

impl Inbox {
    pub fn push(&self, message: Message) {
        self.messages.lock().expect("inbox lock poisoned").push_back(message);
    }

    pub fn is_empty(&self) -> bool {
        self.messages.lock().expect("inbox lock poisoned").is_empty()
    }

    pub fn take(&self) -> Vec<Message> {
        self.messages.lock().expect("inbox lock poisoned").drain(..).collect()
    }
}

/// What every loop of a session shares.
pub(crate) struct Shared {
    pub config: SessionConfig,
    pub rules: Rules,
    pub llm: Arc<dyn Llm>,
    pub tools: ToolCatalog,
    pub gate: Arc<dyn ApprovalGate>,
    pub observer: Arc<dyn Observer>,
    pub board: background::Board,
    /// Messages for the root from outside its loop (steering); kept across turns.
    pub root_inbox: Arc<Inbox>,
    this: Weak<Shared>,
}

impl Shared {
    /// An owning handle, for futures that outlive a borrow (children, background tasks).
    pub fn arc(&self) -> Arc<Shared> {
        self.this.upgrade().expect("shared state outlives its loops")
    }
}

/// The system prompt of an agent: the base prompt, the profiles (root only), a profile body
/// (children only), then the skills.
pub(crate) fn system_prompt(
    config: &SessionConfig,
    profiles: Option<&[Profile]>,
    body: Option<&str>,
    skills: &[String],
) -> String {
    let mut system = config.system_prompt.clone();
    if let Some(profiles) = profiles.filter(|p| !p.is_empty()) {
        system.push_str("\n\nAgent profiles (pass the name as `agent` to `subagent`):");
        for profile in profiles {
            system.push_str(&format!("\n- {}: {}", profile.name, profile.description));
        }
    }
    if let Some(body) = body.map(str::trim).filter(|b| !b.is_empty()) {
        system.push_str("\n\n");
        system.push_str(body);
    }
    if !skills.is_empty() {
        system.push_str(&format!("\n\nSkills: {}", skills.join(", ")));
    }
    system.trim_start().to_string()
}

/// A user's session with the root agent: turns, steering, and quitting.
pub struct Session {
    shared: Arc<Shared>,
    history: Conversation,
    turns: u32,
    /// Children the root has spawned in all turns so far: aliases stay unique across turns,
    /// since a background child may outlive the turn that started it.
    children: u32,
}

/// Sends messages to a session's root from elsewhere (another task, a UI).
#[derive(Clone)]
pub struct Steering {
    shared: Arc<Shared>,
}

impl Steering {
    /// Queues a message the root reads before its next step.
    pub fn steer(&self, message: &str) {
        self.shared.root_inbox.push(Message::user(message));
        self.shared.board.wake();
        self.shared.observer.event(&AgentId::root(), Event::Steered { message: message.to_string() });
    }
}

impl Session {
    /// A session; the error names the bad rule knob.
    pub fn new(
        config: SessionConfig,
        llm: Arc<dyn Llm>,
        tools: ToolCatalog,
        gate: Arc<dyn ApprovalGate>,
        observer: Arc<dyn Observer>,
    ) -> Result<Session, String> {
        config.rules.validate()?;
        let shared = Arc::new_cyclic(|this| Shared {
            rules: config.rules.clone(),
            board: background::Board::new(config.seed),
            root_inbox: Arc::new(Inbox::default()),
            config,
            llm,
            tools,
            gate,
            observer,
            this: this.clone(),
        });
        Ok(Session { shared, history: Conversation::new(), turns: 0, children: 0 })
    }

    /// A handle for steering messages.
    pub fn steering(&self) -> Steering {
        Steering { shared: self.shared.clone() }
    }

    /// Runs one user turn at the root with a fresh step budget.
    pub async fn turn(&mut self, message: &str, request_id: &str) -> Outcome {
        self.turns += 1;
        let shared = &self.shared;
        let rules = &shared.rules;
        shared.observer.event(
            &AgentId::root(),
            Event::TurnStarted { turn: self.turns, message: message.to_string(), budget: rules.root_step_budget },
        );
        let mut history = std::mem::take(&mut self.history);
        history.push(Message::user(message));
        let skills = shared.config.skills.clone();
        let profiles = Some(&shared.config.profiles[..]).filter(|_| rules.subagent_tools);
        let root = agent_loop::Loop {
            agent: AgentId::root(),
            depth: 0,
            goal: message.to_string(),
            request_id: request_id.to_string(),
            model: shared.config.model.clone(),
            reasoning_effort: shared.config.reasoning_effort.clone(),
            profile: None,
            system: system_prompt(&shared.config, profiles, None, &skills),
            history,
            budget: Budget { remaining: rules.root_step_budget, recovery: rules.recovery_budget },
            step_index: 0,
            catalog: None,
            skills,
            ask_user: true,
            inbox: shared.root_inbox.clone(),
            children: self.children,
            llm_calls: 0,
        };
        let (outcome, root) = agent_loop::run(shared.clone(), root).await;
        self.history = root.history;
        self.children = root.children;
        shared.observer.event(
            &AgentId::root(),
            Event::TurnEnded {
                turn: self.turns,
                kind: outcome.kind,
                status: outcome.status,
                budget: outcome.budget_left,
            },
        );
        outcome
    }

    /// The root's conversation so far.
    pub fn history(&self) -> Vec<Message> {
        self.history.to_vec()
    }

    /// Sessions still held by the store: named ones (kept) and those of unfinished tasks.
    pub fn live_sessions(&self) -> Vec<String> {
        self.shared.board.live_sessions()
    }

    /// Ends the session: cancels every running or queued child and waits until none of
    /// their tasks is alive.
    pub async fn quit(&self) {
        self.shared.board.quit(&self.shared).await;
    }
}

//! The built-in orchestration core: a real agent runtime, written against the boundary's
//! [`Llm`] trait, [`Tool`](crate::sut::tool::Tool) trait, an approval gate and the tokio
//! clock. [`Builtin`] is its [`SystemUnderTest`] implementation.
//!
//! Architecture Invariant: nothing in `core` knows it is being tested. It never reads the
//! wall clock (only `tokio::time`), never draws OS randomness (task ids come from the
//! session's seed), never iterates a `HashMap`, never does I/O. It depends only on `rules`,
//! `seed` and the boundary types in `sut`; the harness plugs in through those traits alone.
//!
//! A [`Session`] runs user turns at its root agent (`main`). Children are `main/1`, `main/2`,
//! ... in spawn order, their children `main/1/1`, and so on.

#[doc(hidden)]
pub mod approval;
#[doc(hidden)]
pub mod budget;
#[doc(hidden)]
pub mod pseudo;

mod agent_loop;
mod background;
mod foreground;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};

use crate::rules::Rules;
use crate::sut::approval::{ApprovalGate, GateMode};
use crate::sut::event::{Event, Observer};
use crate::sut::llm::{BoxFuture, Llm, Message, ToolSpec, Transcript};
use crate::sut::tool::ToolCatalog;
use crate::sut::{
    AgentId, Capabilities, CoreSession, Harness, Outcome, Profile, SessionConfig, Steer, SystemUnderTest,
};
use approval::{AutoGate, RiskGate};
use budget::Budget;

/// The built-in core, as a system under test: every feature of both rule sets.
pub struct Builtin;

impl SystemUnderTest for Builtin {
    fn name(&self) -> &str {
        "builtin"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    fn start(&self, config: SessionConfig, harness: Harness) -> Result<Box<dyn CoreSession>, crate::sut::Refused> {
        Ok(Box::new(Session::new(config, harness)?))
    }
}

/// Runs a child's `work` until `deadline`: `None` if the time limit ran out first.
///
/// A child whose work ends in the very instant its limit runs out has finished
/// (`core.time.finish-at-limit-wins`): when the deadline fires, the work gets one more round
/// of the scheduler, in which whatever was due in that instant (the reply it was waiting for)
/// arrives, and is polled once more, outside tokio's cooperative budget, before it is stopped.
pub(crate) async fn within_limit<F: Future + Unpin>(deadline: tokio::time::Instant, mut work: F) -> Option<F::Output> {
    tokio::select! {
        biased;
        out = &mut work => return Some(out),
        _ = tokio::time::sleep_until(deadline) => {}
    }
    tokio::task::yield_now().await;
    let last_look = std::future::poll_fn(|cx| std::task::Poll::Ready(std::pin::Pin::new(&mut work).poll(cx)));
    match tokio::task::unconstrained(last_look).await {
        std::task::Poll::Ready(out) => Some(out),
        std::task::Poll::Pending => None,
    }
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
    /// The session id and memory every request carries, shared.
    pub session_id: Arc<str>,
    pub memory: Arc<[String]>,
    pub llm: Arc<dyn Llm>,
    pub tools: ToolCatalog,
    pub gate: Arc<dyn ApprovalGate>,
    pub observer: Arc<dyn Observer>,
    pub board: background::Board,
    /// Messages for the root from outside its loop (steering); kept across turns.
    pub root_inbox: Arc<Inbox>,
    /// The distinct tool lists offered so far, built once each.
    pub offers: Mutex<Vec<(agent_loop::OfferKey, Arc<[ToolSpec]>)>>,
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
#[doc(hidden)]
pub struct Session {
    shared: Arc<Shared>,
    history: Transcript,
    turns: u32,
    /// Children the root has spawned in all turns so far: aliases stay unique across turns,
    /// since a background child may outlive the turn that started it.
    children: u32,
}

/// Sends messages to a session's root from elsewhere (another task, a UI).
#[derive(Clone)]
#[doc(hidden)]
pub struct Steering {
    shared: Arc<Shared>,
}

impl Steer for Steering {
    fn steer(&self, message: &str) {
        self.shared.root_inbox.push(Message::user(message));
        self.shared.board.wake();
        self.shared.observer.event(&AgentId::root(), Event::Steered { message: message.to_string() });
    }
}

impl Session {
    /// A session; the error names the bad rule knob.
    pub fn new(config: SessionConfig, harness: Harness) -> Result<Session, crate::rules::InvalidKnob> {
        config.rules.validate()?;
        let Harness { llm, tools, approval, observer } = harness;
        let gate: Arc<dyn ApprovalGate> = match approval.mode {
            GateMode::Auto => Arc::new(AutoGate),
            GateMode::Risk => Arc::new(RiskGate::new(approval.policy_deny, approval.asker)),
        };
        let shared = Arc::new_cyclic(|this| Shared {
            rules: config.rules.clone(),
            session_id: Arc::from(config.session_id.as_str()),
            memory: Arc::from(config.memory.as_slice()),
            board: background::Board::new(config.seed),
            root_inbox: Arc::new(Inbox::default()),
            offers: Mutex::default(),
            config,
            llm,
            tools,
            gate,
            observer,
            this: this.clone(),
        });
        Ok(Session { shared, history: Transcript::new(), turns: 0, children: 0 })
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
            goal: Arc::from(message),
            request_id: Arc::from(request_id),
            model: shared.config.model.as_deref().map(Arc::from),
            reasoning_effort: shared.config.reasoning_effort.as_deref().map(Arc::from),
            profile: None,
            system: Arc::from(system_prompt(&shared.config, profiles, None, &skills)),
            history,
            budget: Budget { remaining: rules.root_step_budget, recovery: rules.recovery_budget },
            step_index: 0,
            catalog: None,
            skills,
            ask_user: true,
            inbox: shared.root_inbox.clone(),
            children: self.children,
            llm_calls: 0,
            offered: None,
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

impl CoreSession for Session {
    fn turn<'a>(&'a mut self, message: &'a str, request_id: &'a str) -> BoxFuture<'a, Outcome> {
        Box::pin(Session::turn(self, message, request_id))
    }

    fn steerer(&self) -> Arc<dyn Steer> {
        Arc::new(self.steering())
    }

    fn quit(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(Session::quit(self))
    }

    fn live_sessions(&self) -> Vec<String> {
        Session::live_sessions(self)
    }
}

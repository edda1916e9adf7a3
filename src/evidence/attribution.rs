//! Attribution: putting each model request down to one agent, from what a model endpoint sees.
//!
//! API (stable; the wire's server uses it as the in-process mock does):
//!
//! ```text
//! let mut a = Attributor::new(dialect, side_patterns);
//! let (number, attribution) = a.request(messages, tools_offered, model, arrived); // online
//! a.replied(number, &reply_as_assistant_message, at);                         // the reply given
//! a.failed(number);                                                           // no reply will come
//! let record: ModelSide = a.finish();                                         // for the oracles
//! ```
//!
//! [`Attributor::request`] decides when a request arrives, because a model must choose its
//! reply then: it answers [`Attribution::Agent`] (the alias by the rules' numbering, the
//! child's goal and profile as its spawn call gave them), [`Attribution::Side`] (a declared
//! side request: a title or summary call matched by a pattern, answered and not attributed) or
//! [`Attribution::Unattributed`] (no agent accounts for it: a finding, never a guess).
//!
//! How it decides, in this order of precedence (`docs/evidence.md`, "How a request is put down
//! to an agent"); the [`Basis`] of each attribution says which:
//! 1. **The first request** is the root's.
//! 2. **A new child, starting as promised.** Each spawn call the model was made to give
//!    (learned by [`Attributor::replied`], read with the [`Dialect`]) waits for its child. A
//!    request is that child's first when it starts as the call's session says: a fresh child's
//!    first message is the prompt (as the dialect's `wrap` writes it); a forked child's request
//!    is the parent's request that led to the call, the reply holding it (calls compared by name
//!    and arguments, never by id), then the prompt; a named session's run starts from what the
//!    session's last run saw. Among the waiting calls that fit, the earliest call wins; another
//!    that fits and is not its twin (the same parent, tool and arguments) makes the request
//!    **ambiguous**, a finding. Twins are interchangeable: their children's first requests are
//!    identical, and the first child to ask is taken for the earlier call.
//! 3. **A run begun by a send** (a named session's task queued again, or continued).
//! 4. **A handoff.** A request going on from an agent's last request whose reply held one of
//!    the dialect's handoff calls is the first of the agent it handed the conversation to,
//!    numbered as a child of the agent that handed off.
//! 5. **A child departing from its session's promise.** The request ends with user messages one
//!    of which is a waiting call's prompt, or (going on from no agent) holds it within a longer
//!    message: that call's child, with [`Basis::Departed`] saying how its start departs (the
//!    fork snapshot and isolation oracles report it). A departure is evidence that a session
//!    rule is broken, not of another agent. Going on from an agent's last request as well, it is
//!    the child's only when the call is of that very reply; otherwise it is ambiguous.
//! 6. **An agent going on.** The agent, with no request open, whose last request and the reply
//!    it was given (kept as the dialect's [`History`] says the runtime keeps them; or, when it
//!    got none, whose last request alone) are the start of this one;
//!    the longest such start wins. This covers later steps, later turns, retries, and the
//!    continued runs of a named task (`subagent.send`), which keep their alias. A request going
//!    on from a forked child and its parent alike, holding past the child's prompt the result
//!    of the call that made the child, is the parent's: a child is never answered its own spawn
//!    call.
//! 7. **An agent resumed**: the request goes on from one of the agent's earlier requests.
//! 8. **A shared start only** (a guess): the agent that shares the longest start with it, at
//!    least its first message. Always a finding of `oracle.model-side.attribution`.
//! 9. Otherwise **unattributed**: a finding, never a guess.
//!
//! Numbering follows `core.alias.numbering`: a child is `<parent>/<n>`, `n` counting the
//! parent's spawn calls, in call order across turns, that made a child. A call made no child
//! when its result (seen in the parent's next request) is one of the dialect's refusals, when
//! the request that led to it did not offer the tool, when its prompt is empty, or, for a
//! synchronous tool, when a later call of the same reply has a child already (the calls of a
//! reply run one after another, so an earlier child would have asked first; not so in a
//! dialect whose calls of one reply run together, `parallel_calls`). A call on a
//! named session that looks in use (a task of it whose run has not ended, a call on it whose
//! child has not asked, an earlier call or continuing send of the same reply) is foreseen to
//! make none, a guess its result confirms or overrides (and a child asking for it overrides). A call whose outcome nothing shows yet
//! counts as having made a child. A send whose result is a refusal continues nothing. Task ids are read from the
//! results the runtime gave (the dialect's `task_id_field`), never from call ids, whose form is
//! the runtime's.
//!
//! What it deliberately does not do: read aliases, goals or any event a core reports, parse
//! call ids, or revise an attribution once given.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::dialect::{Dialect, History, PromptWrap, ResultMode, SessionKind, SpawnTool, names_within};
use crate::sut::AgentId;
use crate::sut::llm::{Message, Role, Transcript};

use super::same_reply;

/// One exchange as a model endpoint saw it: no alias, no goal, nothing a core reported.
#[derive(Clone, Debug)]
pub struct ModelExchange {
    /// When the request arrived (virtual time since the run began).
    pub arrived: Duration,
    /// The request's system prompt (every system message, joined), which is not one of its
    /// messages.
    pub system: Arc<str>,
    /// The request's messages.
    pub messages: Transcript,
    /// The names of the tools the request offered, in order.
    pub tools: Vec<String>,
    /// The model the request asked for, if it named one.
    pub model: Option<String>,
    /// The reasoning effort the request asked for, if it named one (and the API carries it).
    pub reasoning_effort: Option<String>,
    /// The request's request id and session id, where the runtime's API carries them (in
    /// process, the core's request; Chat Completions carries neither).
    pub ids: Option<(String, String)>,
    /// The reply given, as an assistant message; `None` when none was (a failure, a hang).
    pub reply: Option<Message>,
    /// When the reply was given.
    pub replied: Option<Duration>,
    /// When a reply that ends the agent's loop (a text with no calls, or a lone terminal call,
    /// no error, no hang) was due, whether or not the agent still listened then: the endpoint
    /// knows it when it schedules the reply. `None` where the endpoint does not say (over the
    /// wire).
    pub ends_loop_due: Option<Duration>,
    /// How many requests had arrived when the reply was given: within one virtual instant, the
    /// order of replies and requests the endpoint saw (a reply given before request `i`
    /// arrived has `replied_after <= i`). `None` until a reply is given.
    pub replied_after: Option<usize>,
}

/// Who a request is from.
#[derive(Clone, Debug, PartialEq)]
pub enum Attribution {
    /// An agent's request.
    Agent(Attributed),
    /// A declared side request (the index of the pattern it matched).
    Side(usize),
    /// No agent accounts for it; why.
    Unattributed(String),
}

/// A request put down to an agent.
#[derive(Clone, Debug, PartialEq)]
pub struct Attributed {
    /// The agent's alias.
    pub alias: AgentId,
    /// Its goal: the root's first user message, or the prompt of the call that made it.
    pub goal: Arc<str>,
    /// The profile its spawn call named, if any.
    pub profile: Option<Arc<str>>,
    /// Whether the request begins with the agent's previous request and the reply given to it
    /// (always true of a first request).
    pub extends: bool,
    /// Its number among the agent's requests, from 1.
    pub number: usize,
    /// What the attribution stands on (the precedence of the module doc).
    pub basis: Basis,
    /// Another candidate that fitted as well, and why this one was taken: a finding of
    /// `oracle.model-side.attribution`, never a silent choice.
    pub ambiguous: Option<String>,
}

/// What an attribution stands on, in the order of precedence of the module doc.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Basis {
    /// The run's first request: the root's.
    Root,
    /// A child's first request, starting as its call's session promises.
    Child,
    /// A handed-off agent's first request: it goes on from a reply holding a handoff call.
    Handoff,
    /// A child's first request that holds its call's prompt but does not start as the call's
    /// session promises; why. The oracle of that session rule reports it
    /// (`oracle.model-side.fork-snapshot`, `oracle.model-side.isolation`).
    Departed(String),
    /// The agent's last request and the reply it was given are the start of this one.
    GoesOn,
    /// A new run of the agent that a send began, from its named session's record.
    Restarted,
    /// The agent's last reply stands in the request after another agent's entries, or the
    /// request answers a call the agent made after its child's entries: its conversation was
    /// rewritten (a child's entries written back into it). The append-only and isolation
    /// oracles judge it.
    Rewritten,
    /// One of the agent's earlier requests (not its last) and the reply it was given are the
    /// start of this one: it went on from an earlier point (a failed request dropped, a
    /// named session's earlier record). The append-only oracle judges whether it may.
    Resumed,
    /// Only the longest shared start with the agent's last request (rule 3): no waiting call,
    /// handoff or agent's last request accounts for the request. Always a finding.
    SharedStart,
}

/// A handoff call the model was made to give, and the agent it handed the conversation to.
#[derive(Clone, Debug, PartialEq)]
pub struct Handoff {
    /// The exchange whose reply made it.
    pub exchange: usize,
    /// Its place among that reply's calls.
    pub position: usize,
    /// The agent that handed off.
    pub from: AgentId,
    /// The tool's name.
    pub tool: String,
    /// The agent that took the conversation, once it asked.
    pub to: Option<AgentId>,
}

/// A spawn call the model was made to give, and what became of it.
#[derive(Clone, Debug, PartialEq)]
pub struct SpawnCall {
    /// The exchange whose reply made it.
    pub exchange: usize,
    /// Its place among that reply's calls.
    pub position: usize,
    /// The calling agent.
    pub parent: AgentId,
    /// The tool's name.
    pub tool: String,
    /// Its prompt (trimmed, unless the dialect's tool is `untrimmed`).
    pub prompt: String,
    /// Its arguments, as given.
    pub args: serde_json::Value,
    /// How the runtime wraps the prompt into the child's first message (the dialect's).
    pub wrap: Option<PromptWrap>,
    /// The conversation it starts its child from.
    pub session: SessionKind,
    /// Whether its result comes back synchronously.
    pub sync: bool,
    /// Whether the synchronous calls of its reply run one after another (not at the same
    /// time: the dialect's `parallel_calls`).
    pub in_order: bool,
    /// The profile it names.
    pub profile: Option<String>,
    /// Its time limit argument, in seconds, if it gave a number.
    pub timeout_seconds: Option<f64>,
    /// What became of it.
    pub outcome: CallOutcome,
    /// The id the runtime gave the call in the parent's next request, once seen.
    pub runtime_id: Option<String>,
    /// The task id its result carried, once seen.
    pub task_id: Option<String>,
    /// Its result text, once seen.
    pub result: Option<(String, bool)>,
    /// Whether its child's first run began from a send call, not from this call: the task
    /// was cancelled while queued and a send queued it again (so it was queued anew, at the
    /// send).
    pub first_run_by_send: bool,
}

impl SpawnCall {
    /// Whether `m` is the first message of this call's child: a user message that is the
    /// prompt as the dialect wraps it.
    pub fn opens(&self, m: &Message) -> bool {
        m.role == Role::User && crate::dialect::opens(self.wrap.as_ref(), &self.prompt, &self.args, &m.content)
    }

    /// Whether `m` holds this call's prompt within a longer user message: a wrap the dialect
    /// does not declare.
    pub fn held_in(&self, m: &Message) -> bool {
        m.role == Role::User && !self.prompt.trim().is_empty() && m.content.contains(self.prompt.trim())
    }

    /// Whether a child of `other` would be indistinguishable from and interchangeable with a
    /// child of this call: the same parent, tool and arguments.
    fn twin(&self, other: &SpawnCall) -> bool {
        self.parent == other.parent && self.tool == other.tool && self.args == other.args
    }
}

/// What became of a spawn call.
#[derive(Clone, Debug, PartialEq)]
pub enum CallOutcome {
    /// Nothing shows yet; `refused` when the attributor predicts it made no child.
    Waiting {
        /// Predicted to make no child.
        refused: bool,
    },
    /// Its child asked the model: that agent.
    Child(AgentId),
    /// Its result shows it made a child that has not asked (queued, or granted nothing).
    Made,
    /// It made no child.
    Refused,
}

/// The record of a run as the model saw it, with each exchange's attribution.
#[derive(Clone, Debug, Default)]
pub struct ModelSide {
    /// Every exchange, in arrival order.
    pub exchanges: Vec<ModelExchange>,
    /// Each exchange's attribution.
    pub attributions: Vec<Attribution>,
    /// Every spawn call, in the order the replies gave them.
    pub calls: Vec<SpawnCall>,
    /// Every handoff call, in the order the replies gave them.
    pub handoffs: Vec<Handoff>,
    /// The dialect the record was read with.
    pub dialect: Option<Arc<Dialect>>,
    /// The exchanges' times are wall times (a runtime over the wire, on its own clock), not the
    /// harness's virtual time: an instant is no longer shared, and the time between a child's
    /// final reply and the moment its runtime has taken it in is the runtime's, unseen. Oracles
    /// that order a reply before a request by their times alone do not judge such a record.
    pub wall_times: bool,
    /// The exchanges that a send continuing its finished task began, in order: each starts a
    /// new run of its agent, even where it reads as going on from the agent's last request
    /// (the session's record held that request, then another task's prompt, then the message).
    pub restarts: Vec<usize>,
    /// Whether a tool result says it is an error (`Message::is_error`): true in process, where
    /// the harness hands the model the core's own messages; false over an API that does not
    /// carry it, where a failed tool reads as any other result.
    pub errors_shown: bool,
    /// The first exchange of each user turn after the first, where the harness knows them
    /// (`drive` runs one command per turn); empty where it does not: the run is one turn.
    pub turn_starts: Vec<usize>,
}

impl ModelSide {
    /// The alias of exchange `i`, if it was put down to an agent.
    pub fn alias(&self, i: usize) -> Option<&AgentId> {
        match &self.attributions[i] {
            Attribution::Agent(a) => Some(&a.alias),
            _ => None,
        }
    }

    /// The exchanges of `alias`, in order, with their indices.
    pub fn of<'a>(&'a self, alias: &'a AgentId) -> impl Iterator<Item = (usize, &'a ModelExchange)> + 'a {
        self.exchanges.iter().enumerate().filter(move |(i, _)| self.alias(*i) == Some(alias))
    }
}

#[derive(Debug)]
struct Agent {
    alias: AgentId,
    goal: Arc<str>,
    profile: Option<Arc<str>>,
    /// Its last exchange.
    last: usize,
    open: bool,
    requests: usize,
    /// The named session its runs record into, if any.
    session: Option<String>,
    /// Its time limit in seconds, as the call that made it gave it (a continuation keeps it).
    timeout_seconds: Option<f64>,
    /// When its current run began: its first request, or the first after a reply that ended
    /// its loop.
    run_started: Duration,
    /// Whether its last reply ended its loop (the next request begins a new run).
    ended: bool,
}

/// The online attributor (see the module doc).
pub struct Attributor {
    dialect: Arc<Dialect>,
    side: Vec<String>,
    record: ModelSide,
    agents: Vec<Agent>,
    /// Per named session, the exchange whose request and reply are what the session recorded:
    /// the last that ended a run of it in time (`bub.session.named-recorded-on-end`); `None`
    /// while no run has.
    sessions: BTreeMap<String, Option<Recorded>>,
    /// What the runtime was configured with, when the harness knows it.
    configured: Option<Configured>,
    /// Send calls the model was made to give and no request has taken up yet, unless their
    /// result showed a refusal.
    sends: Vec<SendCall>,
    /// The spawn calls (indices into the record's calls) foreseen to make no child only
    /// because their named session looked in use: their result, once seen, decides.
    in_use_guesses: Vec<usize>,
    /// Cancel calls the model was made to give and whose result no request has shown yet:
    /// the exchange, the call's place, the task id (trimmed).
    cancels: Vec<(usize, usize, String)>,
    /// The task ids whose cancel's result showed no refusal: cancelled by the time the
    /// parent read it (a task that started in the instant before stays a child).
    cancelled: Vec<String>,
}

/// What a named session recorded: the request of `exchange`, and its reply when the run ended
/// with one (a run that failed on a model error ends with its last request).
#[derive(Clone, Copy, Debug)]
struct Recorded {
    exchange: usize,
    replied: bool,
}

/// A send call the model was made to give.
#[derive(Debug)]
struct SendCall {
    /// The exchange whose reply made it, and its place among that reply's calls.
    exchange: usize,
    position: usize,
    /// The task id and the message it sent, both trimmed.
    task: String,
    message: String,
    /// Whether the task's run had ended when the send was made, or its result says it began a
    /// new run: a send that continues a finished task (`bub.send.continue-named`), not one
    /// that hands a running task a message (`bub.send.to-active-task`), which starts nothing.
    continues: bool,
    /// Whether a later call of its reply cancels the same task, in a dialect whose calls run
    /// one after another: a continuation it started was cancelled, likely before it asked.
    cancelled: bool,
}

/// What the harness configured the runtime with, beyond what requests show: its profiles and
/// the root's skills. The attribution reads them to foresee which spawn calls make no child
/// (`bub.spawn.unknown-profile`, `bub.spawn.unknown-tools`, `bub.spawn.unknown-skills`), so
/// that a later call's child gets its number before the parent's next request shows the
/// refusals.
#[derive(Clone, Debug, Default)]
pub struct Configured {
    /// Each profile: its name, the tools and the skills it lists.
    pub profiles: Vec<ConfiguredProfile>,
    /// The skills the root may use.
    pub skills: Vec<String>,
}

impl Configured {
    /// What a session configured with `profiles` and root skills `skills` shows.
    pub fn of(profiles: &[crate::sut::Profile], skills: &[String]) -> Configured {
        let profiles = profiles
            .iter()
            .map(|p| ConfiguredProfile { name: p.name.clone(), tools: p.tools.clone(), skills: p.skills.clone() })
            .collect();
        Configured { profiles, skills: skills.to_vec() }
    }
}

/// A profile as configured.
#[derive(Clone, Debug, Default)]
pub struct ConfiguredProfile {
    /// Its name.
    pub name: String,
    /// The tools it lists, if any.
    pub tools: Option<Vec<String>>,
    /// The skills it lists, if any.
    pub skills: Option<Vec<String>>,
}

impl Attributor {
    /// An attributor reading spawn calls as `dialect` spells them; requests whose last message
    /// contains one of `side` are side requests.
    pub fn new(dialect: Arc<Dialect>, side: Vec<String>) -> Attributor {
        let record = ModelSide { dialect: Some(dialect.clone()), ..ModelSide::default() };
        Attributor {
            dialect,
            side,
            record,
            agents: Vec::new(),
            sessions: BTreeMap::new(),
            configured: None,
            sends: Vec::new(),
            in_use_guesses: Vec::new(),
            cancels: Vec::new(),
            cancelled: Vec::new(),
        }
    }

    /// The same attributor, knowing what the runtime was configured with: the harness set it
    /// up, so the owner of the model endpoint knows it as well.
    pub fn configured(self, configured: Configured) -> Attributor {
        Attributor { configured: Some(configured), ..self }
    }

    /// Whether a call of `tool` with `args`, by `parent` whose request offered `offered`,
    /// grants its child only what its caller has: every tool it (or, when it lists none, its
    /// profile) names was offered and is none of the dialect's own sub-agent tools; with the
    /// configuration known, its profile exists and its skills are the root's.
    fn grants_within(&self, tool: &SpawnTool, args: &serde_json::Value, offered: &[String], parent: &AgentId) -> bool {
        let profile = match (tool.profile_of(args), &self.configured) {
            (Some(name), Some(c)) => match c.profiles.iter().find(|p| p.name == name) {
                Some(p) => Some(p),
                None => return false,
            },
            _ => None,
        };
        let nonempty = |l: &Option<Vec<String>>| l.clone().filter(|l| !l.is_empty());
        let tools = tool.granted_names(args).or_else(|| profile.and_then(|p| nonempty(&p.tools)));
        if let Some(names) = tools
            && !names_within(&names, offered, |n| self.dialect.is_family(n), true)
        {
            return false;
        }
        // Only the root's skills are known; a child's are narrowed by its own call.
        let skills = tool.granted_skills(args).or_else(|| profile.and_then(|p| nonempty(&p.skills)));
        match (skills, &self.configured) {
            (Some(names), Some(c)) if *parent == AgentId::root() => names_within(&names, &c.skills, |_| false, false),
            _ => true,
        }
    }

    /// The dialect it reads.
    pub fn dialect(&self) -> &Arc<Dialect> {
        &self.dialect
    }

    /// A request arrives: its number (arrival order, from 0) and who it is from.
    pub fn request(
        &mut self,
        system: &str,
        messages: &Transcript,
        tools: Vec<String>,
        model: Option<String>,
        arrived: Duration,
    ) -> (usize, Attribution) {
        let number = self.record.exchanges.len();
        self.record.exchanges.push(ModelExchange {
            arrived,
            system: Arc::from(system),
            messages: messages.clone(),
            tools,
            model,
            reasoning_effort: None,
            ids: None,
            reply: None,
            replied: None,
            ends_loop_due: None,
            replied_after: None,
        });
        let attribution = self.attribute(number);
        self.record.attributions.push(attribution.clone());
        (number, attribution)
    }

    /// The reasoning effort request `number` asked for (kept apart from [`Attributor::request`]:
    /// no attribution reads it).
    pub fn reasoning_effort(&mut self, number: usize, effort: Option<String>) {
        self.record.exchanges[number].reasoning_effort = effort;
    }

    /// The request id and session id request `number` carried.
    pub fn ids(&mut self, number: usize, request_id: &str, session_id: &str) {
        self.record.exchanges[number].ids = Some((request_id.to_string(), session_id.to_string()));
    }

    /// The reply given to request `number`, as an assistant message, at virtual time `at`.
    pub fn replied(&mut self, number: usize, reply: &Message, at: Duration) {
        let arrived = self.record.exchanges.len();
        let exchange = &mut self.record.exchanges[number];
        exchange.reply = Some(reply.clone());
        exchange.replied = Some(at);
        exchange.replied_after = Some(arrived);
        let Some(Attribution::Agent(who)) = self.record.attributions.get(number).cloned() else { return };
        let ends = self.dialect.final_text(reply).is_some();
        if let Some(agent) = self.agents.iter_mut().find(|a| a.alias == who.alias) {
            agent.open = false;
            agent.ended = ends;
            // A named session records a run that ended, unless its time limit had passed
            // (then the run was cut short and the session stays as it was).
            let in_time = agent
                .timeout_seconds
                .is_none_or(|limit| limit <= 0.0 || at.saturating_sub(agent.run_started).as_secs_f64() <= limit);
            if ends
                && in_time
                && let Some(name) = &agent.session
            {
                self.sessions.insert(name.clone(), Some(Recorded { exchange: number, replied: true }));
            }
        }
        // The named sessions in use when the reply's calls begin (`bub.session.named-one-at-a-time`):
        // a task of the session whose run has not ended, or a call on it whose child has not
        // asked yet (queued).
        let mut busy: Vec<String> = self
            .agents
            .iter()
            .filter(|a| !a.ended)
            .filter(|a| {
                a.timeout_seconds
                    .is_none_or(|limit| limit <= 0.0 || at.saturating_sub(a.run_started).as_secs_f64() <= limit)
            })
            .filter_map(|a| a.session.clone())
            .chain(self.record.calls.iter().filter_map(|c| match (&c.session, &c.outcome) {
                (SessionKind::Named(name), CallOutcome::Waiting { refused: false } | CallOutcome::Made) => {
                    Some(name.clone())
                }
                _ => None,
            }))
            .collect();
        let offered = self.record.exchanges[number].tools.clone();
        let mut calls = Vec::new();
        let mut guesses = Vec::new();
        // Whether an earlier call of the reply may let time pass (a wait, a synchronous child,
        // any other tool): then a session in use when the reply was given may be free when a
        // later call runs, and no guess is made (fuzz seed 2, case 3153: a wait, then a call on
        // the session the waited-for task held).
        let mut time_passes = false;
        for (position, call) in reply.tool_calls.iter().enumerate() {
            if let Some(cancel) = self.dialect.cancel_tool(&call.name)
                && let Some(task) = call.args.get(&cancel.task_id).and_then(|v| v.as_str())
            {
                self.cancels.push((number, position, task.trim().to_string()));
            }
            if self.dialect.is_handoff(&call.name) {
                self.record.handoffs.push(Handoff {
                    exchange: number,
                    position,
                    from: who.alias.clone(),
                    tool: call.name.clone(),
                    to: None,
                });
                continue;
            }
            let instant = self.dialect.send_tool(&call.name).is_some()
                || self.dialect.spawn_tool(&call.name).is_some_and(|t| t.result != ResultMode::Sync);
            let passed = time_passes;
            time_passes |= !instant;
            if let Some(send) = self.dialect.send_tool(&call.name) {
                let arg =
                    |name: &str| call.args.get(name).and_then(|v| v.as_str()).unwrap_or_default().trim().to_string();
                let (task, message) = (arg(&send.task_id), arg(&send.message));
                // A send that continues a finished task of a named session takes the session.
                let continued = self.session_continued(&task);
                let continues = continued.is_some();
                if !message.is_empty()
                    && let Some(name) = continued
                {
                    busy.push(name);
                }
                let cancelled = !self.dialect.parallel_calls
                    && reply.tool_calls[position + 1..].iter().any(|later| {
                        self.dialect.cancel_tool(&later.name).is_some_and(|cancel| {
                            later.args.get(&cancel.task_id).and_then(|v| v.as_str()).map(str::trim)
                                == Some(task.as_str())
                        })
                    });
                self.sends.push(SendCall { exchange: number, position, task, message, continues, cancelled });
                continue;
            }
            let Some(tool) = self.dialect.spawn_tool(&call.name) else { continue };
            let prompt = tool.prompt_of(&call.args);
            let refused = !offered.contains(&call.name)
                || (prompt.is_empty() && !tool.empty_starts)
                || !self.grants_within(tool, &call.args, &offered, &who.alias);
            let session = tool.session_of(&call.args);
            let in_use = match &session {
                SessionKind::Named(name) if !refused => {
                    let in_use = busy.contains(name) && !passed;
                    busy.push(name.clone());
                    in_use
                }
                _ => false,
            };
            if in_use {
                guesses.push(self.record.calls.len() + calls.len());
            }
            let profile = tool.profile_of(&call.args);
            let timeout = tool.timeout_seconds.as_ref().and_then(|t| call.args.get(t)).and_then(|t| t.as_f64());
            calls.push(SpawnCall {
                exchange: number,
                position,
                parent: who.alias.clone(),
                tool: call.name.clone(),
                prompt,
                args: (*call.args).clone(),
                wrap: tool.wrap.clone(),
                session,
                sync: tool.result == ResultMode::Sync,
                in_order: tool.result == ResultMode::Sync && !self.dialect.parallel_calls,
                profile: profile.map(str::trim).filter(|p| !p.is_empty()).map(String::from),
                timeout_seconds: timeout,
                outcome: CallOutcome::Waiting { refused: refused || in_use },
                runtime_id: None,
                task_id: None,
                result: None,
                first_run_by_send: false,
            });
        }
        self.in_use_guesses.extend(guesses);
        self.record.calls.extend(calls);
    }

    /// The endpoint scheduled, for request `number`, a reply that ends its agent's loop, due
    /// at `at` (whether or not the agent still listens then).
    pub fn ends_loop_due(&mut self, number: usize, at: Duration) {
        self.record.exchanges[number].ends_loop_due = Some(at);
    }

    /// The model answered request `number` with an error: the asking agent's run fails
    /// there, and a named session records the run as it stood, its last request without a
    /// reply (`bub.session.named-recorded-on-end`: a run that fails is recorded).
    pub fn errored(&mut self, number: usize) {
        self.failed(number);
        if let Some(Attribution::Agent(who)) = self.record.attributions.get(number)
            && let Some(agent) = self.agents.iter_mut().find(|a| a.alias == who.alias)
        {
            agent.ended = true;
            if let Some(name) = &agent.session {
                self.sessions.insert(name.clone(), Some(Recorded { exchange: number, replied: false }));
            }
        }
    }

    /// How long the start of `messages` is that a session's record makes: nothing for a
    /// session that recorded nothing yet; `None` when `messages` does not begin with it.
    fn recorded_len(&self, recorded: Option<Recorded>, messages: &Transcript) -> Option<usize> {
        let Some(Recorded { exchange, replied }) = recorded else { return Some(0) };
        let e = &self.record.exchanges[exchange];
        if replied {
            return extension(&self.dialect.history, e, messages);
        }
        (messages.len() > e.messages.len() && messages.starts_with(&e.messages)).then_some(e.messages.len())
    }

    /// Where in `messages` a new run on the named session `name` may begin: after what the
    /// session recorded as far as the model can tell. That is the record it saw made (the
    /// request and final reply that ended a run, or nothing); or, for a run the model never saw
    /// end, its last request and reply, then their results and any notice (a run that ran out
    /// of steps after a reply with calls is recorded so: fuzz seed 3, case 679; seed 4, case
    /// 5615); or the prompts alone of tasks that never asked (granted no step: seed 2, case
    /// 1139).
    fn record_starts(&self, name: &str, messages: &Transcript) -> Vec<usize> {
        let mut starts = Vec::new();
        starts.extend(self.recorded_len(self.sessions.get(name).copied().flatten(), messages));
        // Any answered request of a task on the session may be where a run ended unseen: the
        // last run's, or an earlier run's when a later one was cancelled or timed out and so
        // recorded nothing (fuzz seed 7, case 11219).
        let on_session: Vec<&AgentId> =
            self.agents.iter().filter(|a| a.session.as_deref() == Some(name)).map(|a| &a.alias).collect();
        let notice = |m: &Message| {
            m.role == Role::User && self.dialect.notices.iter().any(|n| m.content.starts_with(n.as_str()))
        };
        for (x, attribution) in self.record.attributions.iter().enumerate() {
            let Attribution::Agent(who) = attribution else { continue };
            if !on_session.contains(&&who.alias) {
                continue;
            }
            if let Some(len) = extension(&self.dialect.history, &self.record.exchanges[x], messages) {
                let after = messages.iter().skip(len).take_while(|m| m.role == Role::Tool || notice(m)).count();
                starts.push(len + after);
            }
        }
        // Tasks that never asked leave their prompts alone, one after another when several ran
        // on the session so (fuzz seed 11, case 16814: two tasks granted no step, then a send
        // continuing the first).
        let never_asked = |m: &Message| {
            m.role == Role::User
                && self.record.calls.iter().any(|d| {
                    d.session == SessionKind::Named(name.to_string()) && d.outcome == CallOutcome::Made && d.opens(m)
                })
        };
        let prompts = messages.iter().take_while(|m| never_asked(m)).count();
        starts.extend(1..=prompts);
        starts.sort_unstable();
        starts.dedup();
        starts
    }

    /// No reply will come for request `number` (the model call failed).
    pub fn failed(&mut self, number: usize) {
        if let Some(Attribution::Agent(who)) = self.record.attributions.get(number)
            && let Some(agent) = self.agents.iter_mut().find(|a| a.alias == who.alias)
        {
            agent.open = false;
        }
    }

    /// A new user turn begins: the next request is its first (a run of several turns where
    /// the harness knows their starts: `drive`).
    pub fn turn_begins(&mut self) {
        let next = self.record.exchanges.len();
        if next > 0 && self.record.turn_starts.last() != Some(&next) {
            self.record.turn_starts.push(next);
        }
    }

    /// The record of the run so far.
    pub fn record(&self) -> &ModelSide {
        &self.record
    }

    /// The record of the run, for the oracles.
    pub fn finish(self) -> ModelSide {
        self.record
    }

    fn attribute(&mut self, number: usize) -> Attribution {
        let messages = self.record.exchanges[number].messages.clone();
        if let Some(last) = messages.last()
            && let Some(i) = self.side.iter().position(|p| last.content.contains(p.as_str()))
        {
            return Attribution::Side(i);
        }
        if self.agents.is_empty() {
            let goal: Arc<str> = messages.iter().find(|m| m.role == Role::User).map_or("", |m| &m.content).into();
            return Attribution::Agent(self.take(None, AgentId::root(), goal, None, number, Basis::Root));
        }
        // An agent going on, the longest start first; else one whose history broke.
        let mut best: Option<(usize, usize, bool)> = None;
        let mut tied = None;
        for (i, agent) in self.agents.iter().enumerate().filter(|(_, a)| !a.open) {
            let last = &self.record.exchanges[agent.last];
            let (len, extends) =
                match extension(&self.dialect.history, last, &messages).or_else(|| retried(last, &messages)) {
                    Some(len) => (len, true),
                    None => (common_start(&last.messages, &messages), false),
                };
            let better = match best {
                None => len > 0 || extends,
                Some((_, l, e)) => (extends, len) > (e, l),
            };
            if better {
                best = Some((i, len, extends));
                tied = None;
            } else if extends && matches!(best, Some((_, l, true)) if l == len) {
                tied = Some(i);
            }
        }
        // Two agents whose last requests and replies this request goes on from alike (a child
        // repeating its parent's words): the one whose last request offered the same tools under
        // the same system prompt; else the first, and the ambiguity is a finding.
        let mut going_ambiguous = None;
        if let (Some((i, len, true)), Some(j)) = (best, tied) {
            let this = &self.record.exchanges[number];
            let like = |k: usize| {
                let last = &self.record.exchanges[self.agents[k].last];
                last.tools == this.tools && last.system == this.system
            };
            match (like(i), like(j)) {
                (false, true) => best = Some((j, len, true)),
                (true, false) => {}
                _ => {
                    going_ambiguous = Some(format!(
                        "it goes on from the last requests of {} (exchange {}) and {} (exchange {}) alike, the same tools offered; taken for {}",
                        self.agents[i].alias,
                        self.agents[i].last,
                        self.agents[j].alias,
                        self.agents[j].last,
                        self.agents[i].alias
                    ))
                }
            }
        }
        // Going on from an agent's last request, but answered the call that made it, or holding
        // another agent's last reply after it: that other agent's, its history rewritten.
        let mut basis = None;
        if let Some((i, len, true)) = best
            && let Some((j, extends)) =
                self.written_back(i, len, &messages).or_else(|| self.latest_reply(i, len, &messages))
        {
            best = Some((j, 0, extends));
            basis = (!extends).then_some(Basis::Rewritten);
        }
        // A fresh child's first request goes on from no exchange; a forked one's does, and is
        // told from its parent's own next request by the prompt after the reply.
        let goes_on = best.is_some_and(|(_, _, extends)| extends);
        if let Some(call) = self.new_child(&messages, goes_on) {
            let ambiguous = self.twins_apart(call, |c| self.fits_start(c, &messages, goes_on));
            let alias = self.alias_of(call);
            let c = &self.record.calls[call];
            let (goal, profile) = (Arc::from(c.prompt.as_str()), c.profile.as_deref().map(Arc::from));
            let mut who = self.take(Some(call), alias, goal, profile, number, Basis::Child);
            who.ambiguous = ambiguous;
            return Attribution::Agent(who);
        }
        // A send to a task of a named session cancelled before its child asked: the task's
        // first run, which starts from the session's record and the sent message.
        if let Some((call, goal)) = self.first_run_by_send(&messages) {
            let alias = self.alias_of(call);
            let profile = self.record.calls[call].profile.as_deref().map(Arc::from);
            return Attribution::Agent(self.take(Some(call), alias, goal, profile, number, Basis::Child));
        }
        // A send's continuation belongs to the sent task's agent, even where the session's
        // record is another agent's last request (two tasks may share a named session).
        if let Some(i) = self.restarted(&messages) {
            let extends =
                extension(&self.dialect.history, &self.record.exchanges[self.agents[i].last], &messages).is_some();
            best = Some((i, 0, extends));
            basis = Some(Basis::Restarted);
            self.record.restarts.push(number);
        }
        if basis.is_none()
            && let Some((i, _, extends)) = best
            && let Some(h) = self.handed_off(i)
            && (extends || self.tools_removed(i, &messages))
        {
            return Attribution::Agent(self.hand_off(h, i, number));
        }
        if basis.is_none()
            && let Some((call, departure, ambiguous)) = self.departed(&messages, best)
        {
            let alias = self.alias_of(call);
            let c = &self.record.calls[call];
            let (goal, profile) = (Arc::from(c.prompt.as_str()), c.profile.as_deref().map(Arc::from));
            let mut who = self.take(Some(call), alias, goal, profile, number, Basis::Departed(departure));
            who.ambiguous = ambiguous;
            return Attribution::Agent(who);
        }
        // Not going on from any agent's last request: one that goes on from an agent's earlier
        // request (the longest such start) is that agent's, resumed.
        if basis.is_none() && !goes_on {
            let resumed = (0..number)
                .filter_map(|x| match &self.record.attributions[x] {
                    Attribution::Agent(w) => Some((x, &w.alias)),
                    _ => None,
                })
                .filter_map(|(x, alias)| {
                    Some((extension(&self.dialect.history, &self.record.exchanges[x], &messages)?, alias))
                })
                .max_by_key(|(len, _)| *len)
                .and_then(|(_, alias)| self.agents.iter().position(|a| &a.alias == alias && !a.open));
            if let Some(i) = resumed {
                best = Some((i, 0, false));
                basis = Some(Basis::Resumed);
            }
        }
        let Some((i, _, extends)) = best else {
            return Attribution::Unattributed(format!(
                "its {} messages start no child of a spawn call and go on from no agent's last request",
                messages.len()
            ));
        };
        let basis = basis.unwrap_or(if extends { Basis::GoesOn } else { Basis::SharedStart });
        self.learn_results(i, &messages);
        let arrived = self.record.exchanges[number].arrived;
        let agent = &mut self.agents[i];
        if agent.ended {
            agent.run_started = arrived;
            agent.ended = false;
        }
        agent.last = number;
        agent.open = true;
        agent.requests += 1;
        Attribution::Agent(Attributed {
            alias: agent.alias.clone(),
            goal: agent.goal.clone(),
            profile: agent.profile.clone(),
            extends,
            number: agent.requests,
            basis,
            ambiguous: going_ambiguous,
        })
    }

    /// When agent `i` is a forked child and `messages`, which go on from its last request,
    /// also go on from its parent's and hold, past the child's prompt, the result of the very
    /// call that made the child: the parent's agent. A child is never answered its own spawn
    /// call; its parent is, and a parent holding its child's entries had them written back
    /// (the isolation oracle names them). `len`: how much of `messages` agent `i`'s last request
    /// and reply make. Returns the parent and whether the request goes on from its last request.
    fn written_back(&self, i: usize, len: usize, messages: &Transcript) -> Option<(usize, bool)> {
        let alias = &self.agents[i].alias;
        let c = self.record.calls.iter().find(|c| c.outcome == CallOutcome::Child(alias.clone()))?;
        let prompt = messages.iter().position(|m| c.opens(m))?;
        // The child's own last reply (where its start ends) is its own, whatever it repeats.
        let answered = self.answered_in(c, messages, prompt + 1, Some(len - 1));
        let parent = self.agents.iter().position(|a| a.alias == c.parent && !a.open)?;
        let extends =
            extension(&self.dialect.history, &self.record.exchanges[self.agents[parent].last], messages).is_some();
        answered.then_some((parent, extends))
    }

    /// Whether `messages` hold, from message `from` on, the result of spawn call `c`. Ids are
    /// compared within this request only: a tool message answers the latest assistant message
    /// before it holding a call of its id, and that message must be the reply holding the call
    /// (compared as a runtime keeps it), its call at the call's place; never the message at
    /// `not_at`.
    fn answered_in(&self, c: &SpawnCall, messages: &Transcript, from: usize, not_at: Option<usize>) -> bool {
        let Some(reply) = self.record.exchanges[c.exchange].reply.as_ref() else { return false };
        let all: Vec<&Message> = messages.iter().collect();
        (from..all.len()).any(|t| {
            let Some(id) = all[t].tool_call_id.as_deref().filter(|_| all[t].role == Role::Tool) else { return false };
            let asked =
                (0..t).rev().find(|&x| all[x].role == Role::Assistant && all[x].tool_calls.iter().any(|k| k.id == id));
            asked.is_some_and(|x| {
                Some(x) != not_at
                    && same_reply(all[x], reply)
                    && all[x].tool_calls.get(c.position).is_some_and(|k| k.id == id)
            })
        })
    }

    /// When `messages` go on from agent `i`'s last request (its first `len` messages) and hold,
    /// after that start, an assistant message that is the reply given to another agent's last
    /// request, followed by the result of one of its calls: that agent, whose conversation had
    /// agent `i`'s entries put before its own (a request of agent `i` going on holds no reply
    /// after its own last one, and only the agent that made a call is answered it). Another
    /// agent's reply followed by no result of its calls is entries written into agent `i`'s
    /// conversation, which stays agent `i`'s (the isolation oracle names them).
    fn latest_reply(&self, i: usize, len: usize, messages: &Transcript) -> Option<(usize, bool)> {
        let all: Vec<&Message> = messages.iter().collect();
        let x = (len..all.len()).rev().find(|&x| all[x].role == Role::Assistant)?;
        let latest = all[x];
        let answered = all[x + 1..].iter().any(|m| {
            m.role == Role::Tool && latest.tool_calls.iter().any(|k| m.tool_call_id.as_deref() == Some(k.id.as_str()))
        });
        if !answered {
            return None;
        }
        let j = self.agents.iter().enumerate().position(|(j, a)| {
            j != i && !a.open && self.record.exchanges[a.last].reply.as_ref().is_some_and(|r| same_reply(latest, r))
        })?;
        Some((j, false))
    }

    /// Whether waiting call `c`'s child would start as `messages` does, by its session's
    /// promise (what [`Attributor::new_child`] asks of each call).
    fn fits_start(&self, c: &SpawnCall, messages: &Transcript, goes_on: bool) -> bool {
        let Some(first) = messages.first() else { return false };
        match &c.session {
            SessionKind::Fresh => !goes_on && c.opens(first),
            SessionKind::Fork => extension(&self.dialect.history, &self.record.exchanges[c.exchange], messages)
                .is_some_and(|n| messages.get(n).is_some_and(|m| c.opens(m))),
            // A named session's start depends on its record: the call that won is the only one
            // whose fit is read; another session's call never shares its record.
            SessionKind::Named(_) => false,
        }
    }

    /// When a request fitted waiting call `taken` and also another waiting call for which
    /// `fits` holds, a call that is not its twin (another parent, tool or arguments): the
    /// ambiguity, naming both and why the earlier was taken. Twins (the same parent, tool and
    /// arguments) are interchangeable: nothing a model sees tells their children apart, and
    /// taking the earlier call's is no guess about anything a rule reads.
    fn twins_apart(&self, taken: usize, fits: impl Fn(&SpawnCall) -> bool) -> Option<String> {
        let c = &self.record.calls[taken];
        let other = self
            .record
            .calls
            .iter()
            .enumerate()
            .find(|(k, d)| *k != taken && self.waiting(*k) && !c.twin(d) && fits(d))?;
        Some(format!(
            "it fits the child of {}'s `{}` call {:?} (exchange {}) and the child of {}'s `{}` call {:?} (exchange {}) alike; \
             taken for the earlier call's",
            c.parent,
            c.tool,
            short(&c.prompt),
            c.exchange,
            other.1.parent,
            other.1.tool,
            short(&other.1.prompt),
            other.1.exchange
        ))
    }

    /// Whether spawn call `k` still waits for its child (or is guessed to have made none only
    /// because its named session looked in use).
    ///
    /// A synchronous call whose result was handed back waits for nothing: its child, if it made
    /// one, has ended (`roku.grant.zero-child-fails`: granted no step, it never asked). Nor does
    /// a call whose queued task was cancelled (`bub.cancel.stops`) until a send queues it again
    /// (read apart, by [`Attributor::first_run_by_send`]).
    fn waiting(&self, k: usize) -> bool {
        let c = &self.record.calls[k];
        let guessed = self.in_use_guesses.contains(&k) && matches!(c.outcome, CallOutcome::Waiting { .. });
        let done = c.sync && c.result.is_some()
            || c.outcome == CallOutcome::Made && c.task_id.as_ref().is_some_and(|t| self.cancelled.contains(t));
        !done && (guessed || matches!(c.outcome, CallOutcome::Waiting { refused: false } | CallOutcome::Made))
    }

    /// A child's first request that does not start as its call's session promises, told by
    /// its prompt: a waiting call's prompt (as the dialect wraps it) is one of the user
    /// messages that end the request, or, when the request goes on from no agent, is held
    /// within one of them (a wrap the dialect does not declare). A departure is evidence that a
    /// session rule is broken, not of another agent.
    ///
    /// A request that goes on from an agent's last request is a child's only when the call is
    /// of that very reply (the agent's loop waits on it, and a new user message equal to its
    /// prompt is none of the agent's); when the call was made earlier, the agent going on with
    /// a message equal to the prompt fits as well: ambiguous, taken for the child.
    ///
    /// Returns the call, how the start departs, and the ambiguity, if any.
    fn departed(
        &self,
        messages: &Transcript,
        best: Option<(usize, usize, bool)>,
    ) -> Option<(usize, String, Option<String>)> {
        let tail = messages.len() - messages.iter().rev().take_while(|m| m.role == Role::User).count();
        let ending: Vec<&Message> = messages.iter().skip(tail).collect();
        if ending.is_empty() {
            return None;
        }
        let going_on = best.filter(|b| b.2).map(|(i, _, _)| &self.agents[i]);
        // Only messages past what the agent going on already held, and none sent to its task
        // (`bub.send.to-active-task`: the message is the agent's own to read).
        let held = best.filter(|b| b.2).map_or(0, |b| b.1);
        let task = going_on.and_then(|a| {
            self.record.calls.iter().find(|c| c.outcome == CallOutcome::Child(a.alias.clone()))?.task_id.clone()
        });
        let sent = |m: &Message| {
            task.as_ref().is_some_and(|t| self.sends.iter().any(|s| &s.task == t && s.message == m.content.trim()))
        };
        let ending: Vec<&Message> = messages.iter().skip(tail.max(held)).filter(|m| !sent(m)).collect();
        if ending.is_empty() {
            return None;
        }
        let exact = |c: &SpawnCall| ending.iter().any(|m| c.opens(m));
        let within = |c: &SpawnCall| going_on.is_none() && ending.iter().any(|m| c.held_in(m));
        // A synchronous call whose result the request holds has no child left to ask.
        let open = |k: usize| {
            let c = &self.record.calls[k];
            self.waiting(k) && !(c.sync && self.answered_in(c, messages, 0, None))
        };
        let found = [&exact as &dyn Fn(&SpawnCall) -> bool, &within].into_iter().find_map(|fits| {
            (0..self.record.calls.len()).find(|&k| open(k) && fits(&self.record.calls[k])).map(|k| (k, fits))
        })?;
        let (call, fits) = found;
        let c = &self.record.calls[call];
        let mut ambiguous = self.twins_apart(call, fits);
        // The tools offered and the system prompt tell an agent's own next request from
        // another agent's: a request offering other tools than the agent's last (a child at
        // the depth limit is offered no spawn tool), or under another system prompt, is not the
        // agent going on.
        let this = self.record.exchanges.last().expect("the request is recorded");
        let like = |agent: &Agent| {
            let last = &self.record.exchanges[agent.last];
            last.tools == this.tools && last.system == this.system
        };
        // Only an agent the user talks to (the root, or an agent a handoff gave the
        // conversation) gains user messages of no call's: a child gains only what is sent to it
        // (set aside above) and the dialect's notices.
        let told = |agent: &Agent| {
            agent.alias == AgentId::root() || self.record.handoffs.iter().any(|h| h.to.as_ref() == Some(&agent.alias))
        };
        if let Some(agent) = going_on
            && agent.last != c.exchange
            && like(agent)
            && told(agent)
        {
            ambiguous.get_or_insert_with(|| {
                format!(
                    "it goes on from {}'s last request (exchange {}) and ends with the prompt of {}'s `{}` call {:?} (exchange {}) alike; \
                     taken for the call's child",
                    agent.alias, agent.last, c.parent, c.tool, short(&c.prompt), c.exchange
                )
            });
        }
        let held = !ending.iter().any(|m| c.opens(m));
        Some((call, self.departure(c, messages, held), ambiguous))
    }

    /// How a child's first request `messages` departs from what call `c`'s session promises,
    /// in numbers.
    fn departure(&self, c: &SpawnCall, messages: &Transcript, held: bool) -> String {
        let at = messages.iter().position(|m| if held { c.held_in(m) } else { c.opens(m) }).unwrap_or(0);
        let wrapped =
            if held { " (the prompt within a longer message, a wrap the dialect does not declare)" } else { "" };
        let parent = &self.record.exchanges[c.exchange];
        match &c.session {
            SessionKind::Fresh => format!(
                "its prompt{wrapped} comes after {at} messages, where a fresh child's request holds none before it"
            ),
            SessionKind::Fork => {
                let snapshot = parent.messages.len() + 1;
                let kept = common_start(&parent.messages, messages);
                format!(
                    "{at} messages before its prompt{wrapped}, where the snapshot at the call holds {snapshot} (the request that made the call and its reply); \
                     the first {kept} are the snapshot's"
                )
            }
            SessionKind::Named(name) => {
                format!("{at} messages before its prompt{wrapped}, which is not where session {name:?}'s record ends")
            }
        }
    }

    /// Whether `messages` are agent `i`'s last request and the reply it was given with every
    /// tool item removed, and nothing else: each tool result dropped, each assistant message's
    /// calls dropped (the message too, when it held nothing else). A handoff whose input filter
    /// removes the tools (openai-agents' `handoff_filters.remove_all_tools`) starts its target
    /// so; every message is accounted for, so this is evidence, not a shared start.
    fn tools_removed(&self, i: usize, messages: &Transcript) -> bool {
        let e = &self.record.exchanges[self.agents[i].last];
        let Some(reply) = &e.reply else { return false };
        let kept: Vec<(Role, &str)> = e
            .messages
            .iter()
            .chain(std::iter::once(reply))
            .filter(|m| m.role != Role::Tool)
            .filter(|m| !(m.role == Role::Assistant && m.content.is_empty() && !m.tool_calls.is_empty()))
            .map(|m| (m.role, m.content.as_ref()))
            .collect();
        let given: Vec<(Role, &str)> = messages.iter().map(|m| (m.role, m.content.as_ref())).collect();
        let removed_some = kept.len() < e.messages.len() + 1 || !reply.tool_calls.is_empty();
        removed_some && messages.iter().all(|m| m.tool_calls.is_empty()) && kept == given
    }

    /// The handoff of agent `i`'s last reply that no agent has taken up yet, if any.
    fn handed_off(&self, i: usize) -> Option<usize> {
        let last = self.agents[i].last;
        self.record.handoffs.iter().position(|h| h.exchange == last && h.to.is_none())
    }

    /// Request `number` is the first of the agent that handoff `h` of agent `i` handed the
    /// conversation to: a new agent numbered as a child of `i`, after the children of `i`'s
    /// earlier calls and handoffs.
    fn hand_off(&mut self, h: usize, i: usize, number: usize) -> Attributed {
        let from = self.agents[i].alias.clone();
        let at = (self.record.handoffs[h].exchange, self.record.handoffs[h].position);
        let calls = self.record.calls.iter().filter(|c| c.parent == from && (c.exchange, c.position) < at);
        let made = calls
            .filter(|c| {
                matches!(c.outcome, CallOutcome::Child(_) | CallOutcome::Made | CallOutcome::Waiting { refused: false })
            })
            .count();
        let handed = self.record.handoffs[..h].iter().filter(|d| d.from == from).count();
        let alias = from.child(u32::try_from(1 + made + handed).expect("fewer than 2^32 children"));
        self.record.handoffs[h].to = Some(alias.clone());
        // The agent that handed off asks no more in this conversation.
        self.agents[i].ended = true;
        let goal = Arc::from(self.record.handoffs[h].tool.as_str());
        self.take(None, alias, goal, None, number, Basis::Handoff)
    }

    /// The alias of spawn call `call`'s child: its parent's next number, counting the earlier
    /// calls of that parent that made a child (`core.alias.numbering`).
    fn alias_of(&self, call: usize) -> AgentId {
        let c = &self.record.calls[call];
        let parent = &c.parent;
        let handed = self
            .record
            .handoffs
            .iter()
            .filter(|h| &h.from == parent && (h.exchange, h.position) < (c.exchange, c.position));
        let n = 1
            + handed.count()
            + self.record.calls[..call].iter().filter(|d| &d.parent == parent).filter(|d| self.counted(d, c)).count();
        parent.child(u32::try_from(n).expect("fewer than 2^32 children"))
    }

    /// A send to a task whose call made it (its result gave the task id) but whose child never
    /// asked, because the task was cancelled while queued: the runtime queues the task again,
    /// and its first request is the named session's record, then the sent message, then the
    /// messages sent to the task while it was queued the first time (a task keeps what it was
    /// handed, `bub.send.queued-first-request`). Returns the spawn call and the sent message
    /// (the child's goal).
    fn first_run_by_send(&mut self, messages: &Transcript) -> Option<(usize, Arc<str>)> {
        let (taken, call, start) = self.sends.iter().enumerate().find_map(|(k, SendCall { task, message, .. })| {
            let call = self.record.calls.iter().position(|c| c.task_id.as_deref() == Some(task.as_str()))?;
            let c = &self.record.calls[call];
            let (CallOutcome::Made, SessionKind::Named(name)) = (&c.outcome, &c.session) else { return None };
            let user = |m: &Message, text: &str| m.role == Role::User && m.content.trim() == text;
            let start = self
                .record_starts(name, messages)
                .into_iter()
                .find(|&start| messages.get(start).is_some_and(|m| user(m, message)))?;
            // The rest: earlier sends to the same task, in the order they were made.
            let earlier = self.sends.iter().enumerate().filter(|(j, s)| *j != k && s.task == *task);
            let mut taken = vec![k];
            let mut rest = messages.iter().skip(start + 1);
            for (j, s) in earlier {
                match rest.clone().next() {
                    Some(m) if user(m, &s.message) => {
                        rest.next();
                        taken.push(j);
                    }
                    _ => break,
                }
            }
            rest.next().is_none().then_some((taken, call, start))
        })?;
        self.drop_sends(&taken);
        self.record.calls[call].first_run_by_send = true;
        let goal = messages.get(start).map_or("", |m| m.content.as_str());
        Some((call, Arc::from(goal)))
    }

    /// The agent of a named session's task that a send call continues: the request is the
    /// session's record (the request and reply that ended its last run in time, which may be
    /// another task's, or nothing when no run recorded any), then the send's message.
    ///
    /// Sends made to a finished task are tried first: a message handed to a running task that
    /// ended without reading it reads just like a continuation's first request when another
    /// task of the session sends the same text (fuzz case 15431). The others are tried after,
    /// for a run over the wire, where a task may end between its final reply and the send.
    /// Sends whose reply cancels the task after them come last of all (fuzz seed 6, case 2962:
    /// `send(task2)`, `cancel(task2)`, `send(task1)`, the same text to one session).
    fn restarted(&mut self, messages: &Transcript) -> Option<usize> {
        let mut order: Vec<usize> = (0..self.sends.len()).collect();
        order.sort_by_key(|&k| (self.sends[k].cancelled, !self.sends[k].continues));
        let (taken, agent) = order.into_iter().find_map(|k| {
            let SendCall { task, message, .. } = &self.sends[k];
            let call = self.record.calls.iter().find(|c| c.task_id.as_deref() == Some(task.as_str()))?;
            let CallOutcome::Child(alias) = &call.outcome else { return None };
            // The agent may still have a request open: a run cancelled or cut by its limit
            // never gets its reply.
            let i = self.agents.iter().position(|a| &a.alias == alias)?;
            let name = self.agents[i].session.as_ref()?;
            let user = |m: &Message, text: &str| m.role == Role::User && m.content.trim() == text;
            // The send's message, then those of later sends to the task, handed to it while
            // the new run was queued (fuzz seed 2, case 11141: two sends in one reply).
            let sent = |start: usize| -> Option<Vec<usize>> {
                if !messages.get(start).is_some_and(|m| user(m, message)) {
                    return None;
                }
                let mut taken = vec![k];
                let mut later = self.sends.iter().enumerate().filter(|(j, s)| *j > k && s.task == *task);
                for m in messages.iter().skip(start + 1) {
                    let (j, _) = later.find(|(_, s)| user(m, &s.message))?;
                    taken.push(j);
                }
                Some(taken)
            };
            self.record_starts(name, messages).into_iter().find_map(sent).map(|taken| (taken, i))
        })?;
        self.drop_sends(&taken);
        self.agents[agent].ended = true;
        Some(agent)
    }

    /// Forgets the sends at `taken` (indices into `sends`): their messages were read.
    fn drop_sends(&mut self, taken: &[usize]) {
        let mut k = 0;
        self.sends.retain(|_| {
            k += 1;
            !taken.contains(&(k - 1))
        });
    }

    /// The named session a send to `task` would continue: the task's agent has a session and
    /// its run has ended.
    fn session_continued(&self, task: &str) -> Option<String> {
        let call = self.record.calls.iter().find(|c| c.task_id.as_deref() == Some(task))?;
        let CallOutcome::Child(alias) = &call.outcome else { return None };
        let agent = self.agents.iter().find(|a| &a.alias == alias)?;
        agent.session.clone().filter(|_| agent.ended)
    }

    /// Whether an earlier call `d` of the same parent as `call` counts as having made a child.
    fn counted(&self, d: &SpawnCall, call: &SpawnCall) -> bool {
        match d.outcome {
            CallOutcome::Child(_) | CallOutcome::Made => true,
            CallOutcome::Refused => false,
            CallOutcome::Waiting { refused } => {
                // The calls of a reply run one after another (unless the dialect runs them
                // together): an earlier synchronous call with no child by the time a later
                // call's child asks made none (fuzz case 7780: a denied `Agent` call before a
                // `subagent` call).
                !(refused || d.in_order && d.exchange == call.exchange)
            }
        }
    }

    /// The earliest waiting spawn call whose child `messages` starts.
    fn new_child(&self, messages: &Transcript, goes_on: bool) -> Option<usize> {
        let first = messages.first()?;
        self.record.calls.iter().enumerate().position(|(k, c)| {
            if !self.waiting(k) {
                return false;
            }
            let prompt_at = |at: usize| messages.get(at).is_some_and(|m| c.opens(m));
            match &c.session {
                SessionKind::Fresh => !goes_on && c.opens(first),
                SessionKind::Fork => {
                    let e = &self.record.exchanges[c.exchange];
                    extension(&self.dialect.history, e, messages).is_some_and(&prompt_at)
                }
                SessionKind::Named(name) => {
                    // The prompt where the session's record ends, then only messages sent to
                    // the task while it was queued (`bub.send.queued-first-request`), never
                    // another call's prompt. From an empty record, a request that goes on from
                    // an agent's is that agent's.
                    // A message sent to this task that continued it (a new run) is not one
                    // handed to it while queued: the request is that run's (fuzz seed 7, case
                    // 3114: a task granted no step, then continued). Nor is a message sent to
                    // another task of the session: that task's continuation reads this task's
                    // prompt in the session's record, then its own message (fuzz seed 11, case
                    // 16814: a task granted no step, then a send continuing the task before it).
                    let task = c.task_id.as_deref();
                    let sent = |m: &Message| {
                        m.role == Role::User
                            && self
                                .sends
                                .iter()
                                .any(|s| m.content.trim() == s.message && Some(s.task.as_str()) == task && !s.continues)
                    };
                    self.record_starts(name, messages).into_iter().any(|start| {
                        prompt_at(start) && !(start == 0 && goes_on) && messages.iter().skip(start + 1).all(sent)
                    })
                }
            }
        })
    }

    fn take(
        &mut self,
        call: Option<usize>,
        alias: AgentId,
        goal: Arc<str>,
        profile: Option<Arc<str>>,
        number: usize,
        basis: Basis,
    ) -> Attributed {
        let (mut session, mut timeout_seconds) = (None, None);
        if let Some(call) = call {
            // A call guessed to find its session in use made this child: the calls after it
            // whose children asked first were numbered as if it made none (fuzz seed 5, case
            // 14185: a session's last run and its parent's reply ended in one instant).
            if self.record.calls[call].outcome == (CallOutcome::Waiting { refused: true }) {
                self.record.calls[call].outcome = CallOutcome::Made;
                let parent = self.record.calls[call].parent.clone();
                self.renumber(&parent);
            }
            let c = &mut self.record.calls[call];
            c.outcome = CallOutcome::Child(alias.clone());
            let exchange = c.exchange;
            timeout_seconds = c.timeout_seconds;
            if let SessionKind::Named(name) = &c.session {
                self.sessions.entry(name.clone()).or_insert(None);
                session = Some(name.clone());
            }
            // The calls of one reply run in order: an earlier synchronous call that has no
            // child by now made none, whatever kind of call made this child.
            if !self.dialect.parallel_calls {
                for d in &mut self.record.calls[..call] {
                    if d.exchange == exchange && d.in_order && matches!(d.outcome, CallOutcome::Waiting { .. }) {
                        d.outcome = CallOutcome::Refused;
                    }
                }
            }
        }
        self.agents.push(Agent {
            alias: alias.clone(),
            goal: goal.clone(),
            profile: profile.clone(),
            last: number,
            open: true,
            requests: 1,
            session,
            timeout_seconds,
            run_started: self.record.exchanges[number].arrived,
            ended: false,
        });
        Attributed { alias, goal, profile, extends: true, number: 1, basis, ambiguous: None }
    }

    /// Gives the children of `parent`'s calls the numbers the rules give them, once a call
    /// counted as making a child turned out refused, or one guessed refused made one: a
    /// later call's child may have asked before the refusal showed (a call denied by an approval gate, whose answer only the
    /// parent's next request shows; fuzz case 7780). The record is corrected, each child's
    /// descendants with it; a lane chosen by alias when the child asked was chosen by the
    /// number it had then.
    fn renumber(&mut self, parent: &AgentId) {
        // Every move first, then all at once: a child may take the number another leaves.
        let moves: Vec<(AgentId, AgentId)> = (0..self.record.calls.len())
            .filter_map(|k| {
                let c = &self.record.calls[k];
                let CallOutcome::Child(old) = &c.outcome else { return None };
                (&c.parent == parent).then(|| (old.clone(), self.alias_of(k))).filter(|(old, new)| old != new)
            })
            .collect();
        if moves.is_empty() {
            return;
        }
        let moved = |a: &AgentId| -> Option<AgentId> {
            moves.iter().find_map(|(old, new)| {
                if a == old {
                    return Some(new.clone());
                }
                let rest = a.as_str().strip_prefix(old.as_str())?.strip_prefix('/')?;
                let mut to = new.clone();
                for n in rest.split('/') {
                    to = to.child(n.parse().expect("an alias is numbers after its root"));
                }
                Some(to)
            })
        };
        for agent in &mut self.agents {
            if let Some(to) = moved(&agent.alias) {
                agent.alias = to;
            }
        }
        for attribution in &mut self.record.attributions {
            if let Attribution::Agent(who) = attribution
                && let Some(to) = moved(&who.alias)
            {
                who.alias = to;
            }
        }
        for call in &mut self.record.calls {
            if let Some(to) = moved(&call.parent) {
                call.parent = to;
            }
            if let CallOutcome::Child(a) = &mut call.outcome
                && let Some(to) = moved(a)
            {
                *a = to;
            }
        }
    }

    /// Reads, in agent `i`'s new request, the results of the spawn calls of its last reply.
    fn learn_results(&mut self, i: usize, messages: &Transcript) {
        let last = self.agents[i].last;
        let at = self.record.exchanges[last].messages.len();
        let Some(kept) = messages.get(at) else { return };
        if kept.role != Role::Assistant {
            return;
        }
        // A cancel whose result refuses nothing cancelled its task.
        let mut k = 0;
        while k < self.cancels.len() {
            let (exchange, position, _) = self.cancels[k];
            if exchange != last {
                k += 1;
                continue;
            }
            let (_, _, task) = self.cancels.remove(k);
            let Some(id) = kept.tool_calls.get(position).map(|c| c.id.as_str()) else { continue };
            let result =
                messages.iter().skip(at + 1).find(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(id));
            if result.is_some_and(|m| !m.is_error && !self.dialect.is_refusal(&m.content)) {
                self.cancelled.push(task);
            }
        }
        // A send refused (a session in use, an empty message) continues nothing.
        let dialect = &self.dialect;
        self.sends.retain(|s| {
            let id = (s.exchange == last).then(|| kept.tool_calls.get(s.position)).flatten().map(|k| &k.id);
            let refused = id.is_some_and(|id| {
                messages.iter().skip(at + 1).any(|m| {
                    m.role == Role::Tool && m.tool_call_id.as_deref() == Some(&**id) && dialect.is_refusal(&m.content)
                })
            });
            !refused
        });
        // A send whose result carries the dialect's continued field started a new run.
        for s in self.sends.iter_mut().filter(|s| s.exchange == last) {
            let Some(call) = kept.tool_calls.get(s.position) else { continue };
            let Some(field) = dialect.send_tool(&call.name).and_then(|t| t.continued_field.as_ref()) else { continue };
            let result = messages
                .iter()
                .skip(at + 1)
                .find(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(&*call.id));
            if let Some(value) = result.and_then(|m| serde_json::from_str::<serde_json::Value>(&m.content).ok())
                && value.get(field).is_some()
            {
                s.continues = true;
            }
        }
        // Whether a call changed from counted to not, or back: the children are renumbered.
        let mut counted_then_refused = false;
        for (k, c) in self.record.calls.iter_mut().enumerate().filter(|(_, c)| c.exchange == last) {
            let Some(id) = kept.tool_calls.get(c.position).map(|k| k.id.clone()) else { continue };
            let Some(result) =
                messages.iter().skip(at + 1).find(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(&*id))
            else {
                continue;
            };
            c.runtime_id = Some(id);
            c.result = Some((result.content.clone(), result.is_error));
            // A call foreseen to make no child (its tool not offered, its grant beyond its
            // caller's) made none, whatever its result says: a runtime may word an unknown
            // tool its own way (`core.knob.unknown-tool-message`).
            // A session foreseen in use is only a guess: the result decides.
            let foreseen = c.outcome == CallOutcome::Waiting { refused: true } && !self.in_use_guesses.contains(&k);
            let refused = foreseen || self.dialect.is_refusal(&result.content);
            if refused && !matches!(c.outcome, CallOutcome::Child(_)) {
                if matches!(c.outcome, CallOutcome::Waiting { refused: false } | CallOutcome::Made) {
                    counted_then_refused = true;
                }
                c.outcome = CallOutcome::Refused;
                continue;
            }
            if matches!(c.outcome, CallOutcome::Waiting { .. }) {
                // A call guessed to find its session in use that made a child after all.
                if c.outcome == (CallOutcome::Waiting { refused: true }) {
                    counted_then_refused = true;
                }
                c.outcome = CallOutcome::Made;
            }
            let field = self.dialect.spawn_tool(&c.tool).and_then(|t| t.task_id_field.clone());
            if let Some(field) = field
                && let Ok(value) = serde_json::from_str::<serde_json::Value>(&result.content)
                && let Some(task) = value.get(&field).and_then(|t| t.as_str())
            {
                c.task_id = Some(task.to_string());
            }
        }
        if counted_then_refused {
            self.renumber(&self.agents[i].alias.clone());
        }
    }
}

/// When `messages` begins with `e`'s request and the reply it was given, as a runtime whose
/// history is written as `history` says keeps them (kept as given: the reply's calls compared
/// by name and arguments; re-rendered: [`super::goes_on`]), how long that start is.
pub fn extension(history: &History, e: &ModelExchange, messages: &Transcript) -> Option<usize> {
    super::goes_on(history, &e.messages, e.reply.as_ref()?, messages)
}

/// A prompt as a finding quotes it: cut to 60 characters.
fn short(text: &str) -> String {
    let cut: String = text.chars().take(60).collect();
    if text.chars().count() > 60 { format!("{cut}…") } else { cut }
}

/// When `e` got no reply (the model call failed or was given up) and `messages` begins with
/// its request: the agent asks again, or goes on past the failure (a new turn). How long that
/// start is.
fn retried(e: &ModelExchange, messages: &Transcript) -> Option<usize> {
    (e.reply.is_none() && messages.len() >= e.messages.len() && messages.starts_with(&e.messages))
        .then_some(e.messages.len())
}

/// How many messages `a` and `b` share from the start.
pub fn common_start(a: &Transcript, b: &Transcript) -> usize {
    a.iter().zip(b.iter()).take_while(|(x, y)| x == y).count()
}

//! The bridge from a request on the wire to the scenario's script: each request is put down
//! to an agent by the [`Attributor`] (what a model endpoint sees, nothing else), and the
//! agent's lane gives its next reply through the same engine an in-process run uses
//! ([`ScriptedLlm`]: lane selection, `when`, request checks, `$taskN`, the run budget).
//!
//! The bridge decides at once; it does not wait. The server waits out the latency in real
//! time and tells the bridge when the reply was given ([`Bridge::replied`]) or that none will
//! be ([`Bridge::failed`]). What this module deliberately does not do: know HTTP, or time.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::dialect::Dialect;
use crate::evidence::Exchange;
use crate::evidence::attribution::{Attribution, Attributor, ModelSide, SidePattern};
use crate::harness::Stop;
use crate::harness::clock::{Clock, Now};
use crate::harness::exchanges::ExchangeLog;
use crate::harness::mock_llm::{Script, ScriptedLlm, Who};
use crate::harness::recorder::Recorder;
use crate::harness::schedule::Schedule;
use crate::scenario::Scenario;
use crate::sut::llm::{LlmReply, LlmRequest, Message};
use crate::wire::runtime::SideRequest;

use super::api::Converted;

/// What the script answers one request with, chosen at once (the server waits out the latency
/// in real time itself, and shapes errors and broken streams for HTTP).
#[derive(Debug)]
pub(crate) struct Answer {
    /// The scripted latency, in virtual milliseconds.
    pub(crate) latency_ms: u64,
    /// What comes after the latency.
    pub(crate) kind: AnswerKind,
}

/// What comes after a scripted latency.
#[derive(Debug)]
pub(crate) enum AnswerKind {
    /// A reply; its stream breaks after this many chunks, if the script says so.
    Reply(LlmReply, Option<usize>),
    /// The call fails: the message, the HTTP status and error type the file gave.
    Error(String, Option<u16>, Option<String>),
    /// No answer ever comes.
    Hang,
}

/// What to do with one request.
#[derive(Debug)]
pub(crate) enum Plan {
    /// Answer as the script says (after its latency).
    Answer(Answer),
    /// A declared side request: answered with its rule's text, not attributed.
    Side(String),
    /// No agent accounts for it: refuse it, with why.
    Unattributed(String),
    /// The script cannot answer it (no lane, an exhausted lane, a `when` that fails): the run
    /// is stopped, with why.
    Halted(String),
}

/// The attributor and the script of one served scenario.
pub(crate) struct Bridge {
    attributor: Attributor,
    engine: ScriptedLlm,
    /// The side requests' replies, by the attributor's pattern index.
    side_replies: Vec<String>,
    stop: Arc<Stop>,
    log: Arc<ExchangeLog>,
    /// The task ids the runtime's spawn results showed, in call order (for `$taskN`).
    task_ids: Arc<Mutex<Vec<String>>>,
    session_id: Arc<str>,
    /// Per exchange: its index in the exchange log (only agents' requests are logged).
    logged: Vec<Option<usize>>,
    /// Per exchange: the runtime's own name for its sender (the agent header), if given.
    labels: Vec<Option<String>>,
    /// The times given are the clock's (virtual), not the server's wall clock.
    pub(crate) virtual_times: bool,
}

impl Bridge {
    /// The bridge of `scenario`, attributing as `dialect` spells spawn calls; requests matching
    /// one of `side` are side requests, answered with its reply.
    pub(crate) fn new(scenario: &Scenario, dialect: Arc<Dialect>, side: Vec<SideRequest>) -> Bridge {
        let (patterns, side_replies): (Vec<SidePattern>, Vec<String>) =
            side.into_iter().map(|s| (s.pattern(), s.reply)).unzip();
        let stop = Arc::new(Stop::default());
        let now = Now::unstarted();
        let recorder = Arc::new(Recorder::new(scenario.limits.max_events, 0, stop.clone(), now.clone()));
        let log = Arc::new(ExchangeLog::default());
        let clock = Clock::new(Schedule::default_order(), now);
        let task_ids = Arc::new(Mutex::new(Vec::new()));
        let engine =
            ScriptedLlm::new(Arc::new(Script::new(&scenario.lanes)), stop.clone(), clock, log.clone(), recorder)
                .for_wire(task_ids.clone());
        Bridge {
            attributor: Attributor::new(dialect, patterns),
            engine,
            side_replies,
            stop,
            log,
            task_ids,
            session_id: scenario.session.id.as_str().into(),
            logged: Vec::new(),
            labels: Vec::new(),
            virtual_times: false,
        }
    }

    /// A request arrives at `arrived` (wall time since the server started): its exchange
    /// number (arrival order, from 0) and what to do.
    /// `label` is the runtime's own name for the sender (the agent header): kept for the
    /// comparison after the run, never read here.
    pub(crate) fn request(
        &mut self,
        converted: &Converted,
        model: Option<&str>,
        arrived: Duration,
        label: Option<String>,
    ) -> (usize, Plan) {
        let tools = converted.tools.iter().map(|t| t.name.clone()).collect();
        let (number, attribution) =
            self.attributor.request(&converted.system, &converted.messages, tools, model.map(String::from), arrived);
        self.attributor.reasoning_effort(number, converted.reasoning_effort.clone());
        self.labels.resize(number, None);
        self.labels.push(label);
        self.learn_task_ids();
        let who = match attribution {
            Attribution::Agent(a) => a,
            Attribution::Side(i) => {
                self.logged.push(None);
                return (number, Plan::Side(self.side_replies.get(i).cloned().unwrap_or_default()));
            }
            Attribution::Unattributed(why) => {
                self.logged.push(None);
                return (number, Plan::Unattributed(why));
            }
        };
        let request = LlmRequest {
            agent: who.alias.clone(),
            goal: who.goal.clone(),
            profile: who.profile.clone(),
            request_id: "".into(),
            session_id: self.session_id.clone(),
            model: model.map(Into::into),
            reasoning_effort: converted.reasoning_effort.as_deref().map(Into::into),
            memory: Arc::from(Vec::new()),
            system: converted.system.as_str().into(),
            messages: converted.messages.clone(),
            tools: converted.tools.clone().into(),
        };
        self.logged.push(Some(self.log.push(Exchange { request: request.clone(), reply: None })));
        let plan = match answer_now(&self.engine, &self.stop, &request, &Who::new(who.alias, who.goal, who.profile)) {
            Ok(answer) => Plan::Answer(answer),
            Err(why) => Plan::Halted(why),
        };
        (number, plan)
    }

    /// The reply to exchange `number` was given at `at`.
    pub(crate) fn replied(&mut self, number: usize, reply: &LlmReply, at: Duration) {
        let message = Message::assistant(reply.text.clone(), reply.tool_calls.clone());
        self.attributor.replied(number, &message, at);
        if let Some(Some(index)) = self.logged.get(number) {
            self.log.set_reply(*index, message);
        }
    }

    /// A new user turn begins (`drive` is about to run the turn's command).
    pub(crate) fn turn_begins(&mut self) {
        self.attributor.turn_begins();
    }

    /// No reply will come for exchange `number`.
    pub(crate) fn failed(&mut self, number: usize) {
        self.attributor.failed(number);
    }

    /// Per exchange: the runtime's own name for its sender, if the request gave one.
    pub(crate) fn labels(&self) -> Vec<Option<String>> {
        let mut labels = self.labels.clone();
        labels.resize(self.attributor.record().exchanges.len(), None);
        labels
    }

    /// Whether the script has nothing left that must be used.
    pub(crate) fn used_up(&self) -> bool {
        self.engine.used_up()
    }

    /// Why the run was stopped, in order (authoring errors, the run budget).
    pub(crate) fn halts(&self) -> Vec<crate::harness::Halted> {
        self.stop.halts()
    }

    /// The request checks that failed.
    pub(crate) fn failed_checks(&self) -> Vec<String> {
        self.stop.failed_checks()
    }

    /// Replies used, per lane; and per lane, per reply.
    pub(crate) fn lane_use(&self) -> (Vec<usize>, Vec<Vec<usize>>) {
        (self.engine.used(), self.engine.reply_use())
    }

    /// The alias exchange `number` was put down to, if an agent's.
    pub(crate) fn alias(&self, number: usize) -> Option<String> {
        self.attributor.record().alias(number).map(ToString::to_string)
    }

    /// The record of the run as the model saw it, on the server's wall clock.
    pub(crate) fn record(&self) -> ModelSide {
        ModelSide { wall_times: !self.virtual_times, ..self.attributor.record().clone() }
    }

    /// The exchanges as the script saw them (agents' requests, with their aliases).
    pub(crate) fn exchanges(&self) -> Vec<Exchange> {
        self.log.with(<[Exchange]>::to_vec)
    }

    /// Copies the task ids the spawn results showed so far, in call order, for `$taskN`.
    fn learn_task_ids(&mut self) {
        let ids: Vec<String> = self.attributor.record().calls.iter().filter_map(|c| c.task_id.clone()).collect();
        *self.task_ids.lock().expect("task id lock poisoned") = ids;
    }
}

/// The script's answer to `request` from `who`, chosen now: the engine's lane choice and
/// reply building without its clock (the server waits in its own time). `Err`: the run is
/// halted, for this reason (also given to the run's [`Stop`]).
fn answer_now(engine: &ScriptedLlm, stop: &Stop, request: &LlmRequest, who: &Who) -> Result<Answer, String> {
    let (lane, call, index, reply) = match engine.next(request, who) {
        Ok(next) => next,
        Err(message) => {
            stop.halt(message.clone());
            return Err(message);
        }
    };
    let kind = if reply.hang {
        AnswerKind::Hang
    } else if let Some(error) = &reply.error {
        AnswerKind::Error(error.clone(), reply.error_status, reply.error_type.clone())
    } else {
        match engine.build(lane, call, index, &reply, request, who) {
            Some(built) => AnswerKind::Reply(built, reply.drop_after_chunks),
            None => {
                return Err(stop.halts().pop().map_or_else(|| "the run was stopped".to_string(), |h| h.reason));
            }
        }
    };
    Ok(Answer { latency_ms: reply.latency_ms, kind })
}

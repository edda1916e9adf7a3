//! One paused run: a scenario through a core on a fresh current-thread tokio runtime with the
//! clock paused, into a [`Run`] (the trace, the outcomes, the exchanges and the facts the
//! oracles read).
//!
//! Every run ends: a virtual-time horizon and an event cap stop it, and so does any authoring
//! error the harness finds on the way. The run does no I/O: profile files and the scenario are
//! read before the runtime starts (by `load`). This module does not judge (that is `judge`)
//! and does not choose orders or repeat runs (that is `runner`).

use crate::evidence::{Due, Evidence, Exchange, Setup};
use crate::harness::asker::ScriptedAsker;
use crate::harness::clock::{Clock, Now};
use crate::harness::exchanges::{ExchangeLog, Recorded};
use crate::harness::mock_llm::{Script, ScriptedLlm};
use crate::harness::recorder::Recorder;
use crate::harness::schedule::Schedule;
use crate::harness::sim_tools::{Declared, SimTool};
use crate::harness::{Halt, Halted, Limit, LimitHit, Stop};
use crate::rules::Rules;
use crate::scenario::{GateMode, Scenario};
use crate::sut::tool::ToolCatalog;
use crate::sut::{AgentId, Approval, Harness, Outcome, Profile, SessionConfig, SystemUnderTest};
use crate::trace::{Trace, What};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Everything a run produced.
#[derive(Debug)]
pub struct Run {
    /// The trace.
    pub trace: Trace,
    /// Each finished turn's outcome, in order.
    pub outcomes: Vec<Outcome>,
    /// Every request the core sent.
    pub exchanges: Vec<Exchange>,
    /// Every reply the script scheduled, with the instant it was due.
    pub due: Vec<Due>,
    /// Virtual time from start to the end of the last turn (or to the stop).
    pub elapsed: Duration,
    /// Sessions the store still held after the session ended.
    pub live_sessions: Vec<String>,
    /// Why the harness stopped the run early, if it did.
    pub halts: Vec<Halted>,
    /// Panics inside the run (the core's or the harness's): the run was stopped at the first.
    pub internal_errors: Vec<String>,
    /// Request checks and authoring rules that failed without stopping the run.
    pub failed_checks: Vec<String>,
    /// Replies used, per lane.
    pub lane_use: Vec<usize>,
    /// Per lane, per scripted reply: how many requests it answered.
    pub reply_use: Vec<Vec<usize>>,
    /// The rules the run used.
    pub rules: crate::rules::Rules,
    /// How the harness set the run up (session context, catalog, request ids, steering).
    pub setup: Setup,
    /// Whether the session ran all its turns and quit.
    pub session_ended: bool,
    /// The run limit that stopped the run (horizon, event cap or budget), if one did.
    pub limit_hit: Option<LimitHit>,
    /// Tokio tasks still alive once the session quit.
    pub alive_tasks: usize,
    /// Instants at which two or more harness waits were due at once: where a tie order can
    /// differ. With none, every tie order runs as this one did, and `--explore` has nothing
    /// to explore.
    pub tied_instants: u64,
    /// In model-side mode: the run as the model saw it, each exchange attributed.
    pub model_side: Option<crate::evidence::attribution::ModelSide>,
    /// What the core said it reports: with [`crate::sut::Reports::NoEvents`] the aliases in
    /// its requests are no truth to compare the attribution with.
    pub reports: crate::sut::Reports,
}

impl Run {
    /// What the oracles read.
    pub fn evidence(&self) -> Evidence<'_> {
        Evidence {
            rules: &self.rules,
            setup: Some(&self.setup),
            trace: &self.trace,
            exchanges: self.judged_exchanges(),
            due: &self.due,
            live_sessions: &self.live_sessions,
            session_ended: self.session_ended,
            limit_hit: self.limit_hit.as_ref().map(|hit| hit.reason.as_str()),
            stopped: !self.halts.is_empty() || !self.internal_errors.is_empty(),
            alive_tasks: self.alive_tasks,
        }
    }

    /// The exchanges the oracles judge: all of them, except in a run the event limit cut,
    /// whose trace stops while the run goes on a little: there, only the requests the trace
    /// still holds (one `llm.request` line each, in order). A request past the cut holds
    /// messages whose events the trace lost, and would read as foreign to its agent (a
    /// fork-isolation violation only the stop caused).
    fn judged_exchanges(&self) -> &[Exchange] {
        let cut = self.limit_hit.as_ref().is_some_and(|hit| hit.limit == Limit::Events);
        if !cut {
            return &self.exchanges;
        }
        let requests = self
            .trace
            .entries
            .iter()
            .filter(|e| matches!(&e.what, What::Core(crate::sut::event::Event::LlmRequest { .. })))
            .count();
        &self.exchanges[..requests.min(self.exchanges.len())]
    }
}

/// What the session's task reports as it goes.
#[derive(Default)]
struct Progress {
    outcomes: Vec<Outcome>,
    /// Virtual time when the last turn ended.
    ended: Option<Duration>,
    live: Vec<String>,
    session_ended: bool,
}

/// How the harness sets up a run of `scenario`: what the oracles read besides the trace and the
/// exchanges. The request ids are those [`run_paused`] gives each turn.
pub(crate) fn setup(scenario: &Scenario, profiles: &[Profile], schedule: Schedule) -> Setup {
    let session = &scenario.session;
    Setup {
        seed: scenario.seed,
        rules_as_written: scenario.rules.clone(),
        session_id: session.id.clone(),
        model: session.model.clone(),
        reasoning_effort: session.reasoning_effort.clone(),
        memory: session.memory.clone(),
        system_prompt: session.system_prompt.clone(),
        skills: session.skills.clone(),
        profiles: profiles.to_vec(),
        profile_files: scenario.profile_files.clone(),
        profile_specs: scenario.profiles.clone(),
        tools: scenario.tools.iter().map(|t| t.name.clone()).collect(),
        tool_tags: scenario
            .tools
            .iter()
            .filter_map(|t| t.risk.map(|risk| (t.name.clone(), vec![risk.tag().to_string()])))
            .collect(),
        risk_gate: scenario.approval.mode == GateMode::Risk,
        policy_deny: scenario.approval.policy_deny.clone(),
        request_ids: scenario.turns.iter().enumerate().map(|(i, turn)| request_id(turn, i)).collect(),
        steering: scenario.steer.iter().map(|s| (Duration::from_millis(s.at_ms), s.message.clone())).collect(),
        default_order: schedule.seed().is_none(),
    }
}

/// What the core is given to start a session: the resolved rules, and the session and profiles
/// of `setup` (the scenario's facts as written, kept apart for the oracles).
fn session_config(setup: &Setup, rules: Rules) -> SessionConfig {
    SessionConfig {
        rules,
        session_id: setup.session_id.clone(),
        model: setup.model.clone(),
        reasoning_effort: setup.reasoning_effort.clone(),
        memory: setup.memory.clone(),
        system_prompt: setup.system_prompt.clone(),
        skills: setup.skills.clone(),
        profiles: setup.profiles.clone(),
        seed: setup.seed,
    }
}

/// The request id of the `i`-th turn (from 0): its own, or `req-<i+1>`.
fn request_id(turn: &crate::scenario::Turn, i: usize) -> String {
    turn.request_id.clone().unwrap_or_else(|| format!("req-{}", i + 1))
}

/// What a run writes to, made before it starts so that a panic cannot lose it.
pub(crate) struct RunSinks {
    pub(crate) stop: Arc<Stop>,
    pub(crate) recorder: Arc<Recorder>,
    pub(crate) log: Arc<ExchangeLog>,
    pub(crate) now: Arc<Now>,
}

/// What a run takes from its prepared scenario.
pub(crate) struct RunInputs<'p> {
    pub(crate) script: Arc<Script>,
    pub(crate) tools: &'p [Arc<Declared>],
    /// Model-side mode: the dialect the attribution reads.
    pub(crate) dialect: Option<Arc<crate::dialect::Dialect>>,
    /// The scenario's rules, resolved once for every run of it.
    pub(crate) rules: &'p Rules,
}

pub(crate) async fn run_paused(
    sinks: RunSinks,
    sut: &dyn SystemUnderTest,
    scenario: &Scenario,
    inputs: RunInputs<'_>,
    profiles: &[Profile],
    schedule: Schedule,
) -> Run {
    let RunSinks { stop, recorder, log, now } = sinks;
    let RunInputs { script, tools: declared, dialect, rules } = inputs;
    // The session context, built once: the facts as written (what the oracles compare with),
    // and from them what the core is given.
    let setup = setup(scenario, profiles, schedule);
    let config = session_config(&setup, rules.clone());
    let clock = Clock::new(schedule, now);
    let clock_driver = tokio::spawn(clock.clone().drive());
    let mock = ScriptedLlm::new(script, stop.clone(), clock.clone(), log.clone(), recorder.clone())
        .explored(schedule.seed().is_some());
    let mock = match dialect {
        Some(dialect) => mock.model_side(
            dialect,
            crate::evidence::attribution::Configured::of(profiles, &scenario.session.skills),
            scenario.session.side_requests.clone(),
        ),
        None => mock,
    };
    let mock = Arc::new(mock);
    let mut tools = ToolCatalog::new();
    for declared in declared {
        tools.add(Arc::new(SimTool::new(declared.clone(), clock.clone(), stop.clone())));
    }
    let asker = ScriptedAsker::new(scenario.approval.answers.clone(), recorder.clone(), stop.clone());
    let harness = Harness {
        llm: Arc::new(Recorded::new(mock.clone(), log.clone())),
        tools,
        approval: Approval {
            mode: scenario.approval.mode,
            policy_deny: scenario.approval.policy_deny.clone(),
            asker: Arc::new(asker),
        },
        observer: recorder.clone(),
    };
    let session = sut.start(config, harness).map_err(|refusal| {
        stop.halt_as(Halt::Refused, format!("the core `{}` refused the session: {refusal}", sut.name()));
    });
    let start = tokio::time::Instant::now();
    let steering: Vec<_> = scenario
        .steer
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let handle = session.as_ref().ok()?.steerer();
            let (at, message) = (Duration::from_millis(s.at_ms), s.message.clone());
            let clock = clock.clone();
            Some((
                i,
                tokio::spawn(async move {
                    clock.sleep_until(start + at, || format!("steer {}", at.as_millis())).await;
                    handle.steer(&message);
                }),
            ))
        })
        .collect();

    // The session runs as a task of its own, like the children it spawns: the runtime then
    // orders the root among the tasks woken in one instant as it orders any task, and a tie
    // order can wake the root before a child due in the same instant (a core must settle
    // the instant itself; `core.instant.settle-before-acting`). The task reports what it got
    // as it goes, so a run stopped halfway keeps the turns that ended.
    let progress = Arc::new(Mutex::new(Progress::default()));
    let turns: Vec<(String, Option<u64>, String)> = scenario
        .turns
        .iter()
        .enumerate()
        .map(|(i, turn)| (turn.user.clone(), turn.at_ms, request_id(turn, i)))
        .collect();
    let work = session.ok().map(|mut session| {
        let (progress, recorder) = (progress.clone(), recorder.clone());
        tokio::spawn(async move {
            for (user, at_ms, request_id) in &turns {
                if let Some(at) = at_ms {
                    tokio::time::sleep_until(start + Duration::from_millis(*at)).await;
                }
                let outcome = session.turn(user, request_id).await;
                progress.lock().unwrap_or_else(|p| p.into_inner()).outcomes.push(outcome);
            }
            progress.lock().unwrap_or_else(|p| p.into_inner()).ended = Some(recorder.elapsed());
            session.quit().await;
            let live = session.live_sessions();
            let mut progress = progress.lock().unwrap_or_else(|p| p.into_inner());
            progress.live = live;
            progress.session_ended = true;
        })
    });
    let (mut work, mut work_done) = (work, false);
    let finished = async {
        match work.as_mut() {
            // A panic in the session's task went to the run's stop already (see `panics`).
            Some(handle) => {
                let _ = handle.await;
                work_done = true;
            }
            None => std::future::pending().await,
        }
    };
    let horizon = Duration::from_millis(scenario.limits.horizon_ms);
    let mut limit_hit = None;
    tokio::select! {
        biased;
        _ = stop.halted() => {}
        _ = tokio::time::sleep(horizon) => {
            let reason = format!(
                "the run did not end within its horizon of {} ms of virtual time (limits.horizon_ms)",
                scenario.limits.horizon_ms
            );
            limit_hit = Some(LimitHit { limit: Limit::Horizon, reason: reason.clone() });
            stop.halt_as(Halt::Limit(Limit::Horizon), reason);
        }
        _ = finished => {}
    }
    // A stopped session's task is dropped with everything it holds; its children's tasks end
    // when they next run, which they do before the runtime is dropped.
    let unfinished = work.filter(|_| !work_done);
    // A steering message timed after the session's last turn ended is never delivered: a
    // failed check, not a silent pass. Only for a session that ended by itself: a
    // stopped run says why it stopped already.
    let ended_at = recorder.elapsed();
    for (i, handle) in &steering {
        if work_done && !handle.is_finished() && stop.halts().is_empty() {
            stop.check_failed(format!(
                "steer[{i}] (at_ms {}) was never delivered: the session's last turn ended at {} ms, before it (steer earlier, or add a turn that is still running then)",
                scenario.steer[*i].at_ms,
                ended_at.as_millis()
            ));
        }
    }
    for handle in steering.into_iter().map(|(_, handle)| handle).chain([clock_driver]).chain(unfinished) {
        handle.abort();
        // An aborted task reports cancellation; either way it is gone once awaited.
        let _ = handle.await;
    }
    let alive_tasks = tokio::runtime::Handle::current().metrics().num_alive_tasks();
    let halts = stop.halts();
    let internal_errors = stop.internal_errors();
    if limit_hit.is_none() {
        limit_hit = stop.run_limit();
    }
    if let Some(error) = internal_errors.first() {
        recorder.record(&AgentId::root(), What::Stopped(format!("internal error: {error}")));
    } else if let Some(reason) = halts.first() {
        recorder.record(&AgentId::root(), What::Stopped(reason.reason.clone()));
    }
    let progress = std::mem::take(&mut *progress.lock().unwrap_or_else(|p| p.into_inner()));
    let halts_empty = halts.is_empty() && internal_errors.is_empty();
    let elapsed = progress.ended.unwrap_or_else(|| recorder.elapsed());
    Run {
        trace: recorder.take_trace(),
        outcomes: progress.outcomes,
        exchanges: log.take(),
        due: log.take_due(),
        elapsed,
        live_sessions: progress.live,
        halts,
        internal_errors,
        failed_checks: stop.failed_checks(),
        lane_use: mock.used(),
        reply_use: mock.reply_use(),
        rules: rules.clone(),
        setup,
        // A session that ran on after the harness stopped the run (the event limit stops
        // recording, not the run) left a cut trace: its end is no evidence against the core.
        session_ended: progress.session_ended && halts_empty,
        limit_hit,
        alive_tasks,
        tied_instants: clock.tied_instants(),
        model_side: mock.model_side_record(),
        reports: sut.reports(),
    }
}

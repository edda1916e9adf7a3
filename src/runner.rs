//! Runs one scenario through the core on a fresh current-thread tokio runtime with the clock
//! paused, and judges the result against the scenario's expectations.
//!
//! Every run ends: a virtual-time horizon and an event cap stop it, and so does any authoring
//! error the harness finds on the way. The run does no I/O: profile files and the scenario are
//! read before the runtime starts. This module does not parse files (that is `scenario`) or
//! render (that is `trace`).

use std::cell::RefCell;
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::core::Builtin;
use crate::evidence::{Evidence, Exchange};
use crate::harness::Stop;
use crate::harness::asker::ScriptedAsker;
use crate::harness::exchanges::{ExchangeLog, Recorded};
use crate::harness::mock_llm::{Script, ScriptedLlm};
use crate::harness::panics;
use crate::harness::recorder::Recorder;
use crate::harness::schedule::Schedule;
use crate::harness::sim_tools::SimTool;
use crate::oracles::{self, Violation};
use crate::profiles;
use crate::scenario::{Scenario, ScenarioError};
use crate::sut::event::Event;
use crate::sut::tool::ToolCatalog;
use crate::sut::{AgentId, Approval, Harness, Outcome, Profile, SessionConfig, SystemUnderTest};
use crate::trace::{Trace, What, printable};

/// Everything a run produced.
#[derive(Debug)]
pub struct Run {
    /// The trace.
    pub trace: Trace,
    /// Each finished turn's outcome, in order.
    pub outcomes: Vec<Outcome>,
    /// Every request the core sent.
    pub exchanges: Vec<Exchange>,
    /// Virtual time from start to the end of the last turn (or to the stop).
    pub elapsed: Duration,
    /// Sessions the store still held after the session ended.
    pub live_sessions: Vec<String>,
    /// Why the harness stopped the run early, if it did.
    pub halts: Vec<String>,
    /// Panics inside the run (the core's or the harness's): the run was stopped at the first.
    pub internal_errors: Vec<String>,
    /// Request checks and authoring rules that failed without stopping the run.
    pub failed_checks: Vec<String>,
    /// Replies used, per lane.
    pub lane_use: Vec<usize>,
    /// The rules the run used.
    pub rules: crate::rules::Rules,
    /// Whether the session ran all its turns and quit.
    pub session_ended: bool,
    /// The run limit that stopped the run (horizon or event cap), if one did.
    pub limit_hit: Option<String>,
    /// Tokio tasks still alive once the session quit.
    pub alive_tasks: usize,
}

impl Run {
    /// What the oracles read.
    pub fn evidence(&self) -> Evidence<'_> {
        Evidence {
            rules: &self.rules,
            trace: &self.trace,
            exchanges: &self.exchanges,
            live_sessions: &self.live_sessions,
            session_ended: self.session_ended,
            limit_hit: self.limit_hit.as_deref(),
            stopped: !self.halts.is_empty() || !self.internal_errors.is_empty(),
            alive_tasks: self.alive_tasks,
        }
    }
}

/// One reason a scenario failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// What failed (the expectation, check or oracle), and how.
    pub what: String,
    /// The trace lines involved.
    pub lines: Vec<String>,
}

/// A judged run: the verdict on a scenario.
///
/// Its `Display` is the report `rehearsal run` prints: a `PASS`/`FAIL` line, then each failure
/// with the trace lines involved.
pub struct Verdict {
    /// The scenario's name.
    pub name: String,
    /// The run (in the default tie order, or in the one order checked).
    pub run: Run,
    /// Why it failed; empty when it passed.
    pub failures: Vec<Failure>,
    /// The tie orders checked: the default one, and any explored ones.
    pub orders: u32,
}

impl Verdict {
    /// Whether every expectation held.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }

    /// Whether something panicked inside the run (the core or the harness): a bug to report,
    /// not a verdict on the scenario.
    pub fn internal_error(&self) -> bool {
        !self.run.internal_errors.is_empty()
    }

    /// Panics with the report unless the scenario passed: one line in a `#[test]`.
    #[track_caller]
    pub fn assert_passed(&self) {
        assert!(self.passed(), "{self}");
    }

    /// The report, naming `file` when the scenario came from one.
    pub fn report(&self, file: Option<&Path>) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let word = if self.passed() { "PASS" } else { "FAIL" };
        let file = file.map(|f| format!("{}; ", printable(&f.to_string_lossy()))).unwrap_or_default();
        // `--explore K` checks K orders besides the default; say so, or the line reads as one run.
        let orders = match self.orders {
            0 | 1 => String::new(),
            n => format!(", {n} tie orders: the default and {} explored", n - 1),
        };
        let _ = writeln!(
            out,
            "{word} {} ({file}{} events, {} ms virtual{orders})",
            printable(&self.name),
            self.run.trace.entries.len(),
            self.run.elapsed.as_millis()
        );
        for failure in &self.failures {
            let _ = writeln!(out, "  - {}", printable(&failure.what));
            for line in &failure.lines {
                let _ = writeln!(out, "      | {}", printable(line));
            }
        }
        out
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.report(None))
    }
}

impl fmt::Debug for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Verdict")
            .field("name", &self.name)
            .field("passed", &self.passed())
            .field("failures", &self.failures)
            .field("events", &self.run.trace.entries.len())
            .field("elapsed", &self.run.elapsed)
            .field("orders", &self.orders)
            .finish()
    }
}

/// Resolves a scenario's profiles: files from home, then workspace (which overrides home),
/// then inline ones (which override both). Reads files; call before a run, never during.
pub fn resolve_profiles(scenario: &Scenario, dir: &Path) -> Result<Vec<Profile>, ScenarioError> {
    let mut by_name: Vec<Profile> = Vec::new();
    let mut add = |profile: Profile| match by_name.iter_mut().find(|p| p.name == profile.name) {
        Some(slot) => *slot = profile,
        None => by_name.push(profile),
    };
    for folder in [&scenario.profile_dirs.home, &scenario.profile_dirs.workspace].into_iter().flatten() {
        for profile in profiles::load_dir(&dir.join(folder).join(".agents").join("agents"))? {
            add(profile);
        }
    }
    for spec in &scenario.profiles {
        add(profiles::from_spec(spec));
    }
    Ok(by_name)
}

/// How scenarios are run and verified: on which core, and whether the two runs of a
/// verification may use two threads.
///
/// Each run has its own current-thread runtime with a paused clock, so running the two runs
/// of the determinism check on separate threads changes nothing in either trace.
#[derive(Clone, Copy)]
pub struct Runner<'a> {
    sut: &'a dyn SystemUnderTest,
    parallel: bool,
    explore: u32,
    only_order: Option<u64>,
}

impl Default for Runner<'static> {
    fn default() -> Runner<'static> {
        Runner { sut: &Builtin, parallel: false, explore: 0, only_order: None }
    }
}

impl<'a> Runner<'a> {
    /// The built-in core, one thread.
    pub fn new() -> Runner<'static> {
        Runner::default()
    }

    /// Runs scenarios on `sut` instead.
    pub fn on<'b>(self, sut: &'b dyn SystemUnderTest) -> Runner<'b> {
        Runner { sut, parallel: self.parallel, explore: self.explore, only_order: self.only_order }
    }

    /// [`Runner::check`] also runs each scenario in `k` seeded orders of same-instant events
    /// (seeds 1 to `k`), checking every oracle in each.
    pub fn explore(self, k: u32) -> Runner<'a> {
        Runner { explore: k, only_order: None, ..self }
    }

    /// [`Runner::check`] runs each scenario in the tie order of `seed` only (to replay a
    /// failing order an exploration found).
    pub fn only_order(self, seed: u64) -> Runner<'a> {
        Runner { explore: 0, only_order: Some(seed), ..self }
    }

    /// Whether the two runs of a verification run on two threads at once.
    pub fn parallel(self, parallel: bool) -> Runner<'a> {
        Runner { parallel, ..self }
    }

    /// The core scenarios run on.
    pub fn sut(&self) -> &'a dyn SystemUnderTest {
        self.sut
    }

    /// Whether this runner's core implements everything `scenario` needs; the error names
    /// what is missing (the scenario is then skipped, not failed).
    pub fn applies(&self, scenario: &Scenario) -> Result<(), String> {
        let missing = self.sut.capabilities().missing(&scenario.requires());
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!("the core `{}` does not implement {}", self.sut.name(), missing.join(", ")))
        }
    }

    /// The one entry for a scenario built in code: validates it exactly as a file is
    /// validated, resolves its profiles (inline, and profile folders relative to the current
    /// folder), and checks it as `rehearsal run` does: two runs, every expectation and oracle,
    /// and the explored tie orders. An invalid scenario, or one this runner's core cannot run,
    /// is an error.
    ///
    /// ```
    /// use rehearsal::runner::Runner;
    /// use rehearsal::scenario::{Lane, Reply, Scenario, Turn};
    ///
    /// let scenario = Scenario::builder("hello")
    ///     .lane(Lane::agent("main").reply(Reply::text("Hi.")))
    ///     .turn(Turn::user("Hello?").expect_message("Hi."))
    ///     .build()
    ///     .unwrap();
    /// Runner::new().explore(4).check(&scenario).unwrap().assert_passed();
    /// ```
    pub fn check(&self, scenario: &Scenario) -> Result<Verdict, ScenarioError> {
        let at = Path::new("(scenario built in code)");
        crate::scenario::validate(scenario).map_err(|(field, message)| ScenarioError::Invalid {
            path: at.to_path_buf(),
            field,
            message,
        })?;
        self.applies(scenario).map_err(|message| ScenarioError::Invalid {
            path: at.to_path_buf(),
            field: ".".into(),
            message,
        })?;
        let profiles = resolve_profiles(scenario, Path::new("."))?;
        Ok(self.prepare(scenario, &profiles).check(None))
    }

    /// Loads a scenario file with its profiles and checks it ([`Runner::check`]); the verdict's
    /// replay hints name the file.
    pub fn check_file(&self, path: &Path) -> Result<(Scenario, Verdict), ScenarioError> {
        let scenario = crate::scenario::load(path)?;
        let profiles = resolve_profiles(&scenario, path.parent().unwrap_or(Path::new(".")))?;
        let verdict = self.prepare(&scenario, &profiles).check(Some(path));
        Ok((scenario, verdict))
    }

    /// A scenario prepared for runs on this runner: its script is built once, however many
    /// runs, orders and verifications follow.
    pub fn prepare<'s>(&self, scenario: &'s Scenario, profiles: &'s [Profile]) -> Prepared<'a, 's> {
        Prepared { runner: *self, scenario, profiles, script: Arc::new(Script::new(&scenario.lanes)) }
    }

    /// Runs a scenario once, breaking same-instant ties as `schedule` says.
    pub fn run(&self, scenario: &Scenario, profiles: &[Profile], schedule: Schedule) -> Run {
        self.prepare(scenario, profiles).run(schedule)
    }

    /// Runs a scenario twice, judges the first run, and fails it if the two traces differ
    /// (the determinism oracle).
    pub fn verify(&self, scenario: &Scenario, profiles: &[Profile]) -> Verdict {
        self.prepare(scenario, profiles).verify()
    }

    /// Runs a scenario twice in one tie order: the first run, and the violations of every
    /// oracle on it plus determinism across the two. Expectations are not checked (they
    /// describe the default order; another legitimate order may log ties differently).
    pub fn check_order(&self, scenario: &Scenario, profiles: &[Profile], schedule: Schedule) -> (Run, Vec<Violation>) {
        self.prepare(scenario, profiles).check_order(schedule)
    }

    /// A scenario in the tie order of `seed`: what stopped the run, and the oracle violations.
    pub fn in_order(&self, scenario: &Scenario, profiles: &[Profile], seed: u64) -> Verdict {
        self.prepare(scenario, profiles).in_order(seed)
    }
}

/// A scenario ready to run on a runner ([`Runner::prepare`]).
pub struct Prepared<'a, 's> {
    runner: Runner<'a>,
    scenario: &'s Scenario,
    profiles: &'s [Profile],
    script: Arc<Script>,
}

impl Prepared<'_, '_> {
    /// One run on a fresh current-thread runtime whose clock is paused, breaking same-instant
    /// ties as `schedule` says.
    ///
    /// A panic anywhere in the run (its main task, a task the core spawned, the harness) stops
    /// it and becomes the run's internal error, with what the trace held so far.
    pub fn run(&self, schedule: Schedule) -> Run {
        let stop = Arc::new(Stop::default());
        let _capture = panics::capture(stop.clone());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("a current-thread runtime builds");
        // The recorder's clock starts on the run's paused clock.
        let recorder =
            runtime.block_on(async { Arc::new(Recorder::new(self.scenario.limits.max_events, stop.clone())) });
        let log = Arc::new(ExchangeLog::default());
        let parts = Parts { stop: stop.clone(), recorder: recorder.clone(), log: log.clone() };
        let run = run_paused(parts, self.runner.sut, self.scenario, self.script.clone(), self.profiles, schedule);
        match std::panic::catch_unwind(AssertUnwindSafe(|| runtime.block_on(run))) {
            Ok(run) => run,
            Err(_) => {
                // The hook recorded the panic; what the run left is all there is.
                drop(runtime);
                let halts = stop.halts();
                let internal_errors = stop.internal_errors();
                if let Some(error) = internal_errors.first() {
                    recorder.record(&AgentId::root(), What::Stopped(format!("internal error: {error}")));
                }
                Run {
                    elapsed: recorder.elapsed_so_far(),
                    trace: recorder.take_trace(),
                    outcomes: Vec::new(),
                    exchanges: log.take(),
                    live_sessions: Vec::new(),
                    halts,
                    internal_errors,
                    failed_checks: stop.failed_checks(),
                    lane_use: Vec::new(),
                    rules: self.scenario.rules.resolve(),
                    session_ended: false,
                    limit_hit: None,
                    alive_tasks: 0,
                }
            }
        }
    }

    /// Two runs in one tie order, on two threads when the runner allows.
    fn twice(&self, schedule: Schedule) -> (Run, Run) {
        if !self.runner.parallel {
            return (self.run(schedule), self.run(schedule));
        }
        std::thread::scope(|scope| {
            let second = std::thread::Builder::new()
                .stack_size(RUN_STACK_BYTES)
                .spawn_scoped(scope, || self.run(schedule))
                .expect("a thread for the second run starts");
            let first = self.run(schedule);
            (first, second.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
        })
    }

    /// Checks the scenario as [`Runner::check`] does (it is already valid): verified in the
    /// default order and in each explored one, or in the runner's one order only. Failures of
    /// an explored order say how to replay it (naming `file` when known).
    pub fn check(&self, file: Option<&Path>) -> Verdict {
        if let Some(seed) = self.runner.only_order {
            return self.in_order(seed);
        }
        let mut verdict = self.verify();
        for order in 1..=u64::from(self.runner.explore) {
            let replay = match file {
                Some(file) => format!("rehearsal run {} --explore-seed {order}", file.display()),
                None => format!("Runner::only_order({order})"),
            };
            for failure in self.in_order(order).failures {
                verdict.failures.push(Failure {
                    what: format!("in tie order {order} (replay: {replay}): {}", failure.what),
                    lines: failure.lines,
                });
            }
        }
        verdict.orders += self.runner.explore;
        verdict
    }

    /// [`Runner::verify`].
    pub fn verify(&self) -> Verdict {
        let (first, second) = self.twice(Schedule::default_order());
        let differs = oracles::determinism(&first.trace, &second.trace);
        let mut verdict = judge(self.scenario, first);
        if let Some(violation) = differs {
            let lines = verdict.run.trace.lines_at(&violation.lines);
            verdict.failures.push(Failure { what: violation.to_string(), lines });
        }
        verdict
    }

    /// [`Runner::check_order`].
    pub fn check_order(&self, schedule: Schedule) -> (Run, Vec<Violation>) {
        let (first, second) = self.twice(schedule);
        let mut violations = oracles::check(&first.evidence());
        violations.extend(oracles::determinism(&first.trace, &second.trace));
        (first, violations)
    }

    /// [`Runner::in_order`].
    pub fn in_order(&self, seed: u64) -> Verdict {
        let (run, violations) = self.check_order(Schedule::seeded(seed));
        let errors = run.internal_errors.iter().map(|error| format!("internal error: {error}"));
        let halts = run.halts.iter().map(|halt| format!("stopped: {halt}"));
        let mut failures: Vec<Failure> =
            errors.chain(halts).map(|what| Failure { what, lines: run.trace.tail(6) }).collect();
        for violation in violations {
            failures.push(Failure { what: violation.to_string(), lines: run.trace.lines_at(&violation.lines) });
        }
        Verdict { name: self.scenario.name.clone(), run, failures, orders: 1 }
    }
}

/// The stack of a thread that runs a scenario. Foreground children run inline, so a deep
/// chain of agents polls deep futures; the main thread's 8 MiB is the floor.
pub const RUN_STACK_BYTES: usize = 8 << 20;

/// Runs a scenario once on the built-in core, in the default tie order.
pub fn run(scenario: &Scenario, profiles: &[Profile]) -> Run {
    Runner::new().run(scenario, profiles, Schedule::default_order())
}

/// Runs a scenario once on the built-in core, breaking same-instant ties as `schedule` says.
pub fn run_scheduled(scenario: &Scenario, profiles: &[Profile], schedule: Schedule) -> Run {
    Runner::new().run(scenario, profiles, schedule)
}

/// What a run writes to, made before it starts so that a panic cannot lose it.
struct Parts {
    stop: Arc<Stop>,
    recorder: Arc<Recorder>,
    log: Arc<ExchangeLog>,
}

async fn run_paused(
    parts: Parts,
    sut: &dyn SystemUnderTest,
    scenario: &Scenario,
    script: Arc<Script>,
    profiles: &[Profile],
    schedule: Schedule,
) -> Run {
    let Parts { stop, recorder, log } = parts;
    let mock = ScriptedLlm::new(script, stop.clone(), schedule, log.clone(), recorder.clone());
    let mock = Arc::new(mock);
    let mut tools = ToolCatalog::new();
    for decl in &scenario.tools {
        tools.add(Arc::new(SimTool::new(decl, schedule)));
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
    let config = SessionConfig {
        rules: scenario.rules.resolve(),
        session_id: scenario.session.id.clone(),
        model: scenario.session.model.clone(),
        reasoning_effort: scenario.session.reasoning_effort.clone(),
        memory: scenario.session.memory.clone(),
        system_prompt: scenario.session.system_prompt.clone(),
        skills: scenario.session.skills.clone(),
        profiles: profiles.to_vec(),
        seed: scenario.seed,
    };
    let session = sut.start(config, harness).map_err(|refusal| {
        stop.halt(format!("the core `{}` refused the session: {refusal}", sut.name()));
    });
    let start = tokio::time::Instant::now();
    let steering: Vec<_> = scenario
        .steer
        .iter()
        .filter_map(|s| {
            let handle = session.as_ref().ok()?.steerer();
            let (at, message) = (Duration::from_millis(s.at_ms), s.message.clone());
            Some(tokio::spawn(async move {
                tokio::time::sleep_until(start + at).await;
                schedule.tie_break(|| format!("steer {}", at.as_millis())).await;
                handle.steer(&message);
            }))
        })
        .collect();

    let outcomes = RefCell::new(Vec::new());
    let ended = RefCell::new(None);
    let live = RefCell::new(Vec::new());
    let session_ended = RefCell::new(false);
    let work = async {
        let Ok(mut session) = session else { return };
        for (i, turn) in scenario.turns.iter().enumerate() {
            if let Some(at) = turn.at_ms {
                tokio::time::sleep_until(start + Duration::from_millis(at)).await;
            }
            let request_id = turn.request_id.clone().unwrap_or_else(|| format!("req-{}", i + 1));
            let outcome = session.turn(&turn.user, &request_id).await;
            outcomes.borrow_mut().push(outcome);
        }
        *ended.borrow_mut() = Some(recorder.elapsed());
        session.quit().await;
        *live.borrow_mut() = session.live_sessions();
        *session_ended.borrow_mut() = true;
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
            limit_hit = Some(reason.clone());
            stop.halt(reason);
        }
        _ = work => {}
    }
    for handle in steering {
        handle.abort();
        // An aborted task reports cancellation; either way it is gone once awaited.
        let _ = handle.await;
    }
    let alive_tasks = tokio::runtime::Handle::current().metrics().num_alive_tasks();
    let halts = stop.halts();
    let internal_errors = stop.internal_errors();
    if limit_hit.is_none() {
        limit_hit = halts.iter().find(|h| h.contains("event limit")).cloned();
    }
    if let Some(error) = internal_errors.first() {
        recorder.record(&AgentId::root(), What::Stopped(format!("internal error: {error}")));
    } else if let Some(reason) = halts.first() {
        recorder.record(&AgentId::root(), What::Stopped(reason.clone()));
    }
    let elapsed = ended.borrow().unwrap_or_else(|| recorder.elapsed());
    Run {
        trace: recorder.take_trace(),
        outcomes: outcomes.into_inner(),
        exchanges: log.take(),
        elapsed,
        live_sessions: live.into_inner(),
        halts,
        internal_errors,
        failed_checks: stop.failed_checks(),
        lane_use: mock.used(),
        rules: scenario.rules.resolve(),
        session_ended: session_ended.into_inner(),
        limit_hit,
        alive_tasks,
    }
}

/// Judges a run against the scenario's expectations.
pub fn judge(scenario: &Scenario, run: Run) -> Verdict {
    let trace = &run.trace;
    let mut failures = Vec::new();
    let mut fail = |what: String, lines: Vec<String>| failures.push(Failure { what, lines });
    // The cause first: a panic, then what stopped the run, then the consequences.
    for error in &run.internal_errors {
        fail(format!("internal error: {error}"), trace.tail(6));
    }
    for halt in &run.halts {
        fail(format!("stopped: {halt}"), trace.tail(6));
    }
    for check in &run.failed_checks {
        fail(format!("check failed: {check}"), Vec::new());
    }
    if run.halts.is_empty() {
        for (i, (lane, used)) in scenario.lanes.iter().zip(&run.lane_use).enumerate() {
            let left = lane.replies.len().saturating_sub(*used);
            if left > 0 {
                let of = plural(lane.replies.len(), "reply was", "replies were");
                fail(
                    format!("unused script: lanes[{i}] ({}): {left} of its {of} not used", lane.selector()),
                    Vec::new(),
                );
            }
        }
    }
    for (i, turn) in scenario.turns.iter().enumerate() {
        let place = format!("turns[{i}].expect");
        let Some(outcome) = run.outcomes.get(i) else {
            if run.halts.is_empty() {
                fail(format!("{place}: the turn never ended"), Vec::new());
            }
            continue;
        };
        // The turn's end, and the root's outcome just before it.
        let turn_number = i as u32 + 1;
        let end = run
            .trace
            .entries
            .iter()
            .position(|e| matches!(&e.what, What::Core(Event::TurnEnded { turn, .. }) if *turn == turn_number));
        let turn_lines = || end.map_or_else(Vec::new, |end| trace.lines_at(&[end.saturating_sub(1), end]));
        let e = &turn.expect;
        let mut mismatch = |field: &str, want: String, got: String| {
            if want != got {
                fail(format!("{place}.{field}: expected {want}, got {got}"), turn_lines());
            }
        };
        if let Some(want) = e.outcome {
            mismatch("outcome", format!("{want:?}"), format!("{:?}", outcome.kind));
        }
        if let Some(want) = e.status {
            mismatch("status", format!("{want:?}"), format!("{:?}", outcome.status));
        }
        if let Some(want) = &e.message {
            mismatch("message", format!("{:?}", want.render()), format!("{:?}", outcome.message));
        }
        if let Some(want) = &e.message_contains
            && !outcome.message.contains(want.as_str())
        {
            mismatch("message_contains", format!("a message containing {want:?}"), format!("{:?}", outcome.message));
        }
        if let Some(want) = e.budget_left {
            mismatch("budget_left", want.to_string(), outcome.budget_left.to_string());
        }
        if let Some(want) = e.steps {
            mismatch("steps", want.to_string(), outcome.steps.to_string());
        }
    }
    for violation in oracles::check(&run.evidence()) {
        // A run limit is the termination oracle's to judge, and already named as the stop.
        let stop = run.limit_hit.as_ref().is_some_and(|limit| violation.message.ends_with(limit.as_str()));
        if !(violation.oracle == oracles::Oracle::Termination && stop) {
            fail(violation.to_string(), trace.lines_at(&violation.lines));
        }
    }
    // The text is rendered only when the scenario has fragments to find in it.
    let lines = if scenario.expect.trace.is_empty() && scenario.expect.trace_absent.is_empty() {
        Vec::new()
    } else {
        trace.lines()
    };
    let text: String = lines.iter().flat_map(|l| [l.as_str(), "\n"]).collect();
    let mut from = 0;
    for (i, fragment) in scenario.expect.trace.iter().enumerate() {
        match text[from..].find(fragment.as_str()) {
            Some(at) => from += at + fragment.len(),
            None => {
                let seen = text[..from].lines().count().saturating_sub(1);
                let context = lines.iter().skip(seen).take(8).cloned().collect();
                let whole = if text.contains(fragment.as_str()) { " (it appears, but earlier)" } else { "" };
                fail(
                    format!("expect.trace[{i}]: {fragment:?} does not appear after the previous fragment{whole}"),
                    context,
                );
            }
        }
    }
    for (i, fragment) in scenario.expect.trace_absent.iter().enumerate() {
        let hits: Vec<String> = lines.iter().filter(|l| l.contains(fragment.as_str())).cloned().collect();
        if !hits.is_empty() {
            fail(format!("expect.trace_absent[{i}]: {fragment:?} appears"), hits);
        }
    }
    if let Some(want) = scenario.expect.elapsed_ms {
        let got = run.elapsed.as_millis() as u64;
        if want != got {
            fail(format!("expect.elapsed_ms: expected {want} ms of virtual time, got {got} ms"), Vec::new());
        }
    }
    if let Some(want) = &scenario.expect.live_sessions
        && *want != run.live_sessions
    {
        fail(format!("expect.live_sessions: expected {want:?}, got {:?}", run.live_sessions), Vec::new());
    }
    Verdict { name: scenario.name.clone(), run, failures, orders: 1 }
}

/// Verifies a scenario on the built-in core ([`Runner::verify`]).
pub fn verify(scenario: &Scenario, profiles: &[Profile]) -> Verdict {
    Runner::new().verify(scenario, profiles)
}

/// Checks one tie order on the built-in core ([`Runner::check_order`]).
pub fn check_order(scenario: &Scenario, profiles: &[Profile], schedule: Schedule) -> (Run, Vec<Violation>) {
    Runner::new().check_order(scenario, profiles, schedule)
}

/// Checks one tie order on the built-in core ([`Runner::in_order`]).
pub fn explore(scenario: &Scenario, profiles: &[Profile], seed: u64) -> Verdict {
    Runner::new().in_order(scenario, profiles, seed)
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Loads a scenario file with its profiles and verifies it on the built-in core.
pub fn verify_file(path: &Path) -> Result<(Scenario, Verdict), ScenarioError> {
    Runner::new().check_file(path)
}

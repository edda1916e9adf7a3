//! Runs one scenario through the core on a fresh current-thread tokio runtime with the clock
//! paused, and judges the result against the scenario's expectations.
//!
//! Every run ends: a virtual-time horizon and an event cap stop it, and so does any authoring
//! error the harness finds on the way. The run does no I/O: profile files and the scenario are
//! read before the runtime starts. This module does not parse files (that is `scenario`) or
//! render (that is `trace`).

use std::fmt;
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::core::Builtin;
use crate::evidence::{Evidence, Exchange, Setup};
use crate::harness::Stop;
use crate::harness::asker::ScriptedAsker;
use crate::harness::clock::{Clock, Now, paused_runtime};
use crate::harness::exchanges::{ExchangeLog, Recorded};
use crate::harness::mock_llm::{Script, ScriptedLlm};
use crate::harness::panics;
use crate::harness::recorder::Recorder;
use crate::harness::schedule::Schedule;
use crate::harness::sim_tools::{Declared, SimTool};
use crate::oracles::model_side::Judge;
use crate::oracles::{self, Violation};
use crate::profiles;
use crate::scenario::with_task_ids;
use crate::scenario::{GateMode, Scenario, ScenarioError};
use crate::sut::event::Event;
use crate::sut::tool::ToolCatalog;
use crate::sut::{AgentId, Approval, Harness, Outcome, Profile, SessionConfig, SystemUnderTest};
use crate::trace::{Trace, What, printable, quoted, text_difference};

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
    /// Per lane, per scripted reply: how many requests it answered.
    pub reply_use: Vec<Vec<usize>>,
    /// The rules the run used.
    pub rules: crate::rules::Rules,
    /// How the harness set the run up (session context, catalog, request ids, steering).
    pub setup: Setup,
    /// Whether the session ran all its turns and quit.
    pub session_ended: bool,
    /// The run limit that stopped the run (horizon or event cap), if one did.
    pub limit_hit: Option<String>,
    /// Tokio tasks still alive once the session quit.
    pub alive_tasks: usize,
    /// In model-side mode: the run as the model saw it, each exchange attributed.
    pub model_side: Option<crate::evidence::attribution::ModelSide>,
}

impl Run {
    /// What the oracles read.
    pub fn evidence(&self) -> Evidence<'_> {
        Evidence {
            rules: &self.rules,
            setup: Some(&self.setup),
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
    /// What kind of check failed, for a machine reading the report (JSON `kind`, JUnit
    /// `type`).
    pub kind: FailureKind,
    /// What failed (the expectation, check or oracle), and how.
    pub what: String,
    /// The trace lines involved.
    pub lines: Vec<String>,
    /// What the file expected and what the run gave, where one value says it (an expected
    /// outcome, message, count or golden line); `None` when only the prose can.
    pub expected: Option<String>,
    /// See `expected`.
    pub actual: Option<String>,
}

/// The kinds of [`Failure`], each named in reports by [`FailureKind::name`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// An expectation of the file (`turns[i].expect`, `expect.*`) did not hold.
    Expectation,
    /// A turn ended in an error no expectation names: the likely cause of what follows.
    UnexpectedError,
    /// An oracle (a rule of `docs/rules/`) was broken.
    Oracle,
    /// Two runs of the same order gave different traces.
    Determinism,
    /// A request check of the script (`expect_request`) failed.
    Check,
    /// Part of the script was never used.
    UnusedScript,
    /// The run was stopped (a run limit, an exhausted script).
    Stopped,
    /// The harness or the core broke an invariant.
    Internal,
    /// The trace differs from its golden file, or has none yet.
    Snapshot,
}

impl FailureKind {
    /// The kind's name in reports: `expectation`, `oracle`, `unused_script`, …
    pub fn name(self) -> &'static str {
        match self {
            FailureKind::Expectation => "expectation",
            FailureKind::UnexpectedError => "unexpected_error",
            FailureKind::Oracle => "oracle",
            FailureKind::Determinism => "determinism",
            FailureKind::Check => "check",
            FailureKind::UnusedScript => "unused_script",
            FailureKind::Stopped => "stopped",
            FailureKind::Internal => "internal",
            FailureKind::Snapshot => "snapshot",
        }
    }
}

impl Failure {
    /// A failure told in prose only.
    pub fn new(kind: FailureKind, what: String, lines: Vec<String>) -> Failure {
        Failure { kind, what, lines, expected: None, actual: None }
    }

    /// The same failure with the values that differ.
    pub fn differing(mut self, expected: impl Into<String>, actual: impl Into<String>) -> Failure {
        self.expected = Some(expected.into());
        self.actual = Some(actual.into());
        self
    }
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
    /// What explored orders skipped, because the file marks it `order_dependent`: each as
    /// its place and the file's reason.
    pub default_only: Vec<String>,
    /// The one explored order checked instead of the default (`--explore-seed`).
    pub only_order: Option<u64>,
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
        let skipped = match self.default_only.len() {
            0 => String::new(),
            n => format!("; {} in the default order only", plural(n, "expectation", "expectations")),
        };
        // `--explore K` checks K orders besides the default; say so, or the line reads as one run.
        let orders = match self.orders {
            _ if self.only_order.is_some() => {
                format!(", tie order {} only{skipped}", self.only_order.unwrap_or_default())
            }
            0 | 1 => String::new(),
            n => format!(", {n} tie orders: the default and {} explored{skipped}", n - 1),
        };
        let _ = writeln!(
            out,
            "{word} {} ({file}{} events, {} ms virtual{orders})",
            printable(&self.name),
            self.run.trace.entries.len(),
            self.run.elapsed.as_millis()
        );
        if self.orders > 1 || self.only_order.is_some() {
            for place in &self.default_only {
                let _ = writeln!(out, "  · not checked in explored orders: {}", printable(place));
            }
        }
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
/// then the files written into the scenario (`profile_files`, read as workspace files), then
/// inline ones (which override all). Reads the folders' files; call before a run, never
/// during. A scenario without `profile_dirs` reads nothing from disk.
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
    for (name, text) in &scenario.profile_files {
        add(profiles::parse(&Path::new("profile_files").join(name), text)?);
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
    judge: Judge,
}

impl Default for Runner<'static> {
    fn default() -> Runner<'static> {
        Runner { sut: &Builtin, parallel: false, explore: 0, only_order: None, judge: Judge::Events }
    }
}

impl<'a> Runner<'a> {
    /// The built-in core, one thread.
    pub fn new() -> Runner<'static> {
        Runner::default()
    }

    /// Runs scenarios on `sut` instead.
    pub fn on<'b>(self, sut: &'b dyn SystemUnderTest) -> Runner<'b> {
        Runner { sut, parallel: self.parallel, explore: self.explore, only_order: self.only_order, judge: self.judge }
    }

    /// Judges from the core's events (the default) or from the model's side alone
    /// (`oracles::model_side`). A core that reports no events is judged from the model's side
    /// whatever this says.
    pub fn judge(self, judge: Judge) -> Runner<'a> {
        Runner { judge, ..self }
    }

    /// How this runner judges its core: `judge`, or the model's side for a core that reports
    /// no events.
    pub fn judging(&self) -> Judge {
        match self.sut.reports() {
            crate::sut::Reports::NoEvents => Judge::ModelSide,
            crate::sut::Reports::Events => self.judge,
        }
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

    /// The dialect the core speaks (its `SystemUnderTest::dialect`); `generic` when that
    /// names neither a built-in dialect nor a readable file.
    pub fn dialect(&self) -> Arc<crate::dialect::Dialect> {
        let dialect = crate::dialect::Dialect::load(&self.sut.dialect());
        Arc::new(dialect.unwrap_or_else(|_| crate::dialect::Dialect::builtin("generic").expect("a built-in dialect")))
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
        crate::scenario::validate(scenario).map_err(|problem| problem.at(at, None))?;
        self.applies(scenario).map_err(|message| crate::scenario::Problem::new(".", message).at(at, None))?;
        let profiles = resolve_profiles(scenario, Path::new("."))?;
        crate::scenario::check_profile_names(scenario, profiles.iter().map(|p| p.name.as_str()))
            .map_err(|problem| problem.at(at, None))?;
        Ok(self.prepare(scenario, &profiles).check(None))
    }

    /// Loads a scenario file with its profiles and checks it ([`Runner::check`]); the verdict's
    /// replay hints name the file.
    pub fn check_file(&self, path: &Path) -> Result<(Scenario, Verdict), ScenarioError> {
        let text = crate::scenario::read_bounded(path, crate::scenario::MAX_FILE_BYTES)?;
        let scenario = crate::scenario::parse(path, &text)?;
        let profiles = resolve_profiles(&scenario, path.parent().unwrap_or(Path::new(".")))?;
        crate::scenario::check_profile_names(&scenario, profiles.iter().map(|p| p.name.as_str()))
            .map_err(|problem| problem.at(path, Some(&text)))?;
        let verdict = self.prepare(&scenario, &profiles).check(Some(path));
        Ok((scenario, verdict))
    }

    /// A scenario prepared for runs on this runner: its script is built once, however many
    /// runs, orders and verifications follow.
    pub fn prepare<'s>(&self, scenario: &'s Scenario, profiles: &'s [Profile]) -> Prepared<'a, 's> {
        let script = Arc::new(Script::new(&scenario.lanes));
        let tools = scenario.tools.iter().map(Declared::new).collect();
        Prepared { runner: *self, scenario, profiles, script, tools, sizes: Default::default() }
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

/// Below this many scripted replies in all, a verify runs its two runs on one thread even
/// when the runner allows two (see `Prepared::small`).
const PARALLEL_MIN_REPLIES: usize = 64;

/// A scenario ready to run on a runner ([`Runner::prepare`]).
pub struct Prepared<'a, 's> {
    runner: Runner<'a>,
    scenario: &'s Scenario,
    profiles: &'s [Profile],
    script: Arc<Script>,
    /// The declared tools, built once for every run.
    tools: Vec<Arc<Declared>>,
    /// The most trace entries and exchanges a run so far recorded: the next run reserves as
    /// much at once, instead of growing its records by copying them over and over.
    sizes: (AtomicUsize, AtomicUsize),
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
        let (runtime, now) = paused_runtime();
        let (entries, exchanges) = (self.sizes.0.load(Ordering::Relaxed), self.sizes.1.load(Ordering::Relaxed));
        let max_events = self.scenario.limits.max_events;
        let recorder = Arc::new(Recorder::new(max_events, entries, stop.clone(), now.clone()));
        let log = Arc::new(ExchangeLog::with_capacity(exchanges));
        let parts = Parts { stop: stop.clone(), recorder: recorder.clone(), log: log.clone(), now };
        let dialect = (self.runner.judging() == Judge::ModelSide).then(|| self.runner.dialect());
        let prepared = PreparedParts { script: self.script.clone(), tools: &self.tools, dialect };
        let run = run_paused(parts, self.runner.sut, self.scenario, prepared, self.profiles, schedule);
        let run = match std::panic::catch_unwind(AssertUnwindSafe(|| runtime.block_on(run))) {
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
                    reply_use: Vec::new(),
                    rules: self.scenario.rules.resolve(),
                    setup: setup(self.scenario, self.profiles, schedule),
                    session_ended: false,
                    limit_hit: None,
                    alive_tasks: 0,
                    model_side: None,
                }
            }
        };
        self.sizes.0.fetch_max(run.trace.entries.len(), Ordering::Relaxed);
        self.sizes.1.fetch_max(run.exchanges.len(), Ordering::Relaxed);
        run
    }

    /// Two runs in one tie order; `then` takes the first as soon as it ends. On two threads
    /// when the runner allows: the second run goes on beside the first and beside `then`
    /// (judging the first), so a verify costs about one run and its judging, not two runs
    /// and then the judging.
    fn twice_then<T>(&self, schedule: Schedule, then: impl FnOnce(Run) -> T) -> (T, Run) {
        if !self.runner.parallel || self.small() {
            let first = then(self.run(schedule));
            return (first, self.run(schedule));
        }
        std::thread::scope(|scope| {
            let second = std::thread::Builder::new()
                .stack_size(RUN_STACK_BYTES)
                .spawn_scoped(scope, || self.run(schedule))
                .expect("a thread for the second run starts");
            let first = then(self.run(schedule));
            (first, second.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
        })
    }

    /// Whether a run of the scenario is too short to be worth a thread of its own: starting
    /// one costs about as much as a run of a few dozen scripted replies (measured by `cargo
    /// bench`: a 4-child, 5-step verify was slower on two threads than on one).
    fn small(&self) -> bool {
        let replies: usize = self.scenario.lanes.iter().map(|lane| lane.replies.len()).sum();
        replies < PARALLEL_MIN_REPLIES
    }

    /// Checks the scenario as [`Runner::check`] does (it is already valid): verified in the
    /// default order and in each explored one, or in the runner's one order only. Failures of
    /// an explored order say how to replay it (naming `file` when known).
    pub fn check(&self, file: Option<&Path>) -> Verdict {
        if let Some(seed) = self.runner.only_order {
            let mut verdict = self.in_order(seed);
            verdict.default_only = default_only(self.scenario);
            verdict.only_order = Some(seed);
            return verdict;
        }
        let mut verdict = self.verify();
        // A failure the default order already shows is not repeated; one that only explored
        // orders show is reported once, with the orders it failed in and the first to replay.
        let mut explored: Vec<(Failure, Vec<u64>)> = Vec::new();
        for order in 1..=u64::from(self.runner.explore) {
            for failure in self.in_order(order).failures {
                if verdict.failures.iter().any(|f| f.what == failure.what) {
                    continue;
                }
                match explored.iter_mut().find(|(f, _)| f.what == failure.what) {
                    Some((_, orders)) => orders.push(order),
                    None => explored.push((failure, vec![order])),
                }
            }
        }
        for (failure, orders) in explored {
            let first = orders[0];
            let replay = match file {
                Some(file) => format!("rehearsal run {} --explore-seed {first}", file.display()),
                None => format!("Runner::only_order({first})"),
            };
            let which = match orders.len() {
                1 => format!("in tie order {first}"),
                n => {
                    let shown: Vec<String> = orders.iter().take(8).map(u64::to_string).collect();
                    let more = if n > 8 { ", …" } else { "" };
                    format!("in {n} of {} tie orders ({}{more})", self.runner.explore, shown.join(", "))
                }
            };
            verdict.failures.push(Failure { what: format!("{which} (replay: {replay}): {}", failure.what), ..failure });
        }
        verdict.orders += self.runner.explore;
        if self.runner.explore > 0 {
            verdict.default_only = default_only(self.scenario);
        }
        verdict
    }

    /// [`Runner::verify`].
    pub fn verify(&self) -> Verdict {
        let (mut verdict, second) = self.twice_then(Schedule::default_order(), |first| judge(self.scenario, first));
        if let Some(violation) = oracles::determinism(&verdict.run.trace, &second.trace) {
            let lines = verdict.run.trace.lines_at(&violation.lines);
            verdict.failures.push(Failure::new(FailureKind::Determinism, violation.to_string(), lines));
        }
        verdict
    }

    /// [`Runner::check_order`].
    pub fn check_order(&self, schedule: Schedule) -> (Run, Vec<Violation>) {
        let ((first, mut violations), second) = self.twice_then(schedule, |first| {
            let violations = match &first.model_side {
                Some(side) => model_side_violations(side, &first),
                None => oracles::check(&first.evidence()),
            };
            (first, violations)
        });
        match (&first.model_side, &second.model_side) {
            (Some(a), Some(b)) => violations
                .extend(crate::oracles::model_side::determinism(a, b).map(|f| model_side_violation(&first, f))),
            _ => violations.extend(oracles::determinism(&first.trace, &second.trace)),
        }
        (first, violations)
    }

    /// [`Runner::in_order`]: the run in the tie order of `seed`, judged on everything the
    /// default order is judged on (expectations, request checks, the script's use, every
    /// oracle, determinism), except what the file marks as holding in the default order only.
    pub fn in_order(&self, seed: u64) -> Verdict {
        let (mut verdict, second) =
            self.twice_then(Schedule::seeded(seed), |first| judge_in(self.scenario, first, Order::Explored));
        if let Some(violation) = oracles::determinism(&verdict.run.trace, &second.trace) {
            let lines = verdict.run.trace.lines_at(&violation.lines);
            verdict.failures.push(Failure::new(FailureKind::Determinism, violation.to_string(), lines));
        }
        verdict
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
fn setup(scenario: &Scenario, profiles: &[Profile], schedule: Schedule) -> Setup {
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

/// The request id of the `i`-th turn (from 0): its own, or `req-<i+1>`.
fn request_id(turn: &crate::scenario::Turn, i: usize) -> String {
    turn.request_id.clone().unwrap_or_else(|| format!("req-{}", i + 1))
}

/// What a run writes to, made before it starts so that a panic cannot lose it.
struct Parts {
    stop: Arc<Stop>,
    recorder: Arc<Recorder>,
    log: Arc<ExchangeLog>,
    now: Arc<Now>,
}

/// What a run takes from its prepared scenario.
struct PreparedParts<'p> {
    script: Arc<Script>,
    tools: &'p [Arc<Declared>],
    /// Model-side mode: the dialect the attribution reads.
    dialect: Option<Arc<crate::dialect::Dialect>>,
}

async fn run_paused(
    parts: Parts,
    sut: &dyn SystemUnderTest,
    scenario: &Scenario,
    prepared: PreparedParts<'_>,
    profiles: &[Profile],
    schedule: Schedule,
) -> Run {
    let Parts { stop, recorder, log, now } = parts;
    let PreparedParts { script, tools: declared, dialect } = prepared;
    let clock = Clock::new(schedule, now);
    let clock_driver = tokio::spawn(clock.clone().drive());
    let mock = ScriptedLlm::new(script, stop.clone(), clock.clone(), log.clone(), recorder.clone())
        .explored(schedule.seed().is_some());
    let mock = match dialect {
        Some(dialect) => mock.model_side(dialect),
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
            let clock = clock.clone();
            Some(tokio::spawn(async move {
                clock.sleep_until(start + at, || format!("steer {}", at.as_millis())).await;
                handle.steer(&message);
            }))
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
            limit_hit = Some(reason.clone());
            stop.halt(reason);
        }
        _ = finished => {}
    }
    // A stopped session's task is dropped with everything it holds; its children's tasks end
    // when they next run, which they do before the runtime is dropped.
    let unfinished = work.filter(|_| !work_done);
    for handle in steering.into_iter().chain([clock_driver]).chain(unfinished) {
        handle.abort();
        // An aborted task reports cancellation; either way it is gone once awaited.
        let _ = handle.await;
    }
    let alive_tasks = tokio::runtime::Handle::current().metrics().num_alive_tasks();
    let halts = stop.halts();
    let internal_errors = stop.internal_errors();
    if limit_hit.is_none() {
        limit_hit = halts.iter().find(|h| crate::harness::is_run_limit(h)).cloned();
    }
    if let Some(error) = internal_errors.first() {
        recorder.record(&AgentId::root(), What::Stopped(format!("internal error: {error}")));
    } else if let Some(reason) = halts.first() {
        recorder.record(&AgentId::root(), What::Stopped(reason.clone()));
    }
    let progress = std::mem::take(&mut *progress.lock().unwrap_or_else(|p| p.into_inner()));
    let halts_empty = halts.is_empty() && internal_errors.is_empty();
    let elapsed = progress.ended.unwrap_or_else(|| recorder.elapsed());
    Run {
        trace: recorder.take_trace(),
        outcomes: progress.outcomes,
        exchanges: log.take(),
        elapsed,
        live_sessions: progress.live,
        halts,
        internal_errors,
        failed_checks: stop.failed_checks(),
        lane_use: mock.used(),
        reply_use: mock.reply_use(),
        rules: scenario.rules.resolve(),
        setup: setup(scenario, profiles, schedule),
        // A session that ran on after the harness stopped the run (the event limit stops
        // recording, not the run) left a cut trace: its end is no evidence against the core.
        session_ended: progress.session_ended && halts_empty,
        limit_hit,
        alive_tasks,
        model_side: mock.model_side_record(),
    }
}

/// What the scenario holds to the default tie order only (`order_dependent`), each as its
/// place and reason.
pub fn default_only(scenario: &Scenario) -> Vec<String> {
    let mut out = Vec::new();
    let mut note = |place: String, reason: &Option<String>| {
        if let Some(reason) = reason {
            out.push(format!("{place} ({reason})"));
        }
    };
    for (i, turn) in scenario.turns.iter().enumerate() {
        note(format!("turns[{i}].expect"), &turn.expect.order_dependent);
    }
    for (i, lane) in scenario.lanes.iter().enumerate() {
        if let Some(check) = &lane.check_every {
            note(format!("lanes[{i}].check_every"), &check.order_dependent);
        }
        for (j, reply) in lane.replies.iter().enumerate() {
            if let Some(check) = &reply.check {
                note(format!("lanes[{i}].replies[{j}].check"), &check.order_dependent);
            }
        }
    }
    note("expect".to_string(), &scenario.expect.order_dependent);
    out
}

/// The model-side findings of a run as violations: the model-side oracles, and, for a core
/// that reports its aliases, whether the attribution gave each exchange the core's alias.
fn model_side_violations(side: &crate::evidence::attribution::ModelSide, run: &Run) -> Vec<Violation> {
    let mut findings = crate::oracles::model_side::check(side, &run.rules, &dialect_of(side));
    findings.extend(crate::oracles::model_side::proof(side, &run.exchanges));
    findings.into_iter().map(|f| model_side_violation(run, f)).collect()
}

fn model_side_violation(run: &Run, f: crate::oracles::model_side::Finding) -> Violation {
    let at = run.model_side.as_ref().and_then(|s| s.exchanges.get(f.exchange)).map_or(Duration::ZERO, |e| e.arrived);
    Violation {
        oracle: oracles::Oracle::ModelSide,
        agent: f.agent.clone(),
        at,
        message: f.to_string(),
        lines: Vec::new(),
    }
}

/// The dialect a model-side record was attributed with.
fn dialect_of(side: &crate::evidence::attribution::ModelSide) -> crate::dialect::Dialect {
    side.dialect
        .as_deref()
        .cloned()
        .unwrap_or_else(|| crate::dialect::Dialect::builtin("rehearsal").expect("a built-in dialect"))
}

/// Which tie order a run was in, for what its judgement skips.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// The default order: everything is checked.
    Default,
    /// An explored order: expectations marked `order_dependent` are not checked.
    Explored,
}

/// Judges a run in the default order against the scenario's expectations.
///
/// The verdict lists causes before consequences: a panic, what stopped the run, then each
/// turn that ended otherwise than expected (or in an error nobody expected, when something
/// else failed), the oracles, the request checks and the expectations on the whole run, and
/// last the script left unused.
pub fn judge(scenario: &Scenario, run: Run) -> Verdict {
    judge_in(scenario, run, Order::Default)
}

/// Judges a run in `order` against the scenario's expectations and the oracles.
pub fn judge_in(scenario: &Scenario, run: Run, order: Order) -> Verdict {
    let explored = order == Order::Explored;
    let trace = &run.trace;
    let mut causes = Vec::new();
    let mut failures = Vec::new();
    let mut consequences = Vec::new();
    let fail = |list: &mut Vec<Failure>, what: String, lines: Vec<String>| {
        list.push(Failure::new(FailureKind::Expectation, what, lines))
    };
    for error in &run.internal_errors {
        causes.push(Failure::new(FailureKind::Internal, format!("internal error: {error}"), trace.tail(6)));
    }
    for halt in &run.halts {
        causes.push(Failure::new(FailureKind::Stopped, format!("stopped: {halt}"), trace.tail(6)));
    }
    let task_ids = queued_task_ids(trace);
    // Turns that ended in an error no expectation mentions: the likely cause of what follows.
    let mut unexpected_errors = Vec::new();
    for (i, turn) in scenario.turns.iter().enumerate() {
        let place = format!("turns[{i}].expect");
        let Some(outcome) = run.outcomes.get(i) else {
            if run.halts.is_empty() {
                fail(&mut causes, format!("{place}: the turn never ended"), Vec::new());
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
        if explored && e.order_dependent.is_some() {
            continue;
        }
        if outcome.status == crate::sut::event::Status::Error && e.outcome.is_none() && e.status.is_none() {
            unexpected_errors.push(Failure::new(
                FailureKind::UnexpectedError,
                format!(
                    "turns[{i}] ended with {} {}: {} (no expectation names this outcome; it is listed first as the likely cause)",
                    word(&outcome.kind),
                    word(&outcome.status),
                    quoted(&outcome.message)
                ),
                turn_lines(),
            ));
        }
        let mut mismatches = Vec::new();
        if let Some(want) = e.outcome {
            mismatches.push(("outcome", word(&want), word(&outcome.kind)));
        }
        if let Some(want) = e.status {
            mismatches.push(("status", word(&want), word(&outcome.status)));
        }
        for (field, want, got) in mismatches.drain(..) {
            if want != got {
                let what = format!("{place}.{field}: expected {want}, got {got}");
                causes.push(Failure::new(FailureKind::Expectation, what, turn_lines()).differing(want, got));
            }
        }
        if let Some(want) = &e.message {
            match with_task_ids(&want.render(), &task_ids) {
                Ok(want) if *want != outcome.message => causes.push(
                    Failure::new(
                        FailureKind::Expectation,
                        format!("{place}.message: {}", text_difference(&want, &outcome.message)),
                        turn_lines(),
                    )
                    .differing(want.as_ref(), outcome.message.as_str()),
                ),
                Ok(_) => {}
                Err(reference) => {
                    fail(&mut causes, unknown_task(&format!("{place}.message"), &reference, &task_ids), Vec::new())
                }
            }
        }
        if let Some(want) = &e.message_contains {
            match with_task_ids(&want.render(), &task_ids) {
                Ok(want) if !outcome.message.contains(want.as_ref()) => causes.push(
                    Failure::new(
                        FailureKind::Expectation,
                        format!(
                            "{place}.message_contains: the final message does not contain {}; it is {}",
                            quoted(&want),
                            quoted(&outcome.message)
                        ),
                        turn_lines(),
                    )
                    .differing(want.as_ref(), outcome.message.as_str()),
                ),
                Ok(_) => {}
                Err(reference) => fail(
                    &mut causes,
                    unknown_task(&format!("{place}.message_contains"), &reference, &task_ids),
                    Vec::new(),
                ),
            }
        }
        if let Some(want) = e.budget_left {
            mismatches.push(("budget_left", want.to_string(), outcome.budget_left.to_string()));
        }
        if let Some(want) = e.steps {
            mismatches.push(("steps", want.to_string(), outcome.steps.to_string()));
        }
        for (field, want, got) in mismatches {
            if want != got {
                let what = format!("{place}.{field}: expected {want}, got {got}");
                causes.push(Failure::new(FailureKind::Expectation, what, turn_lines()).differing(want, got));
            }
        }
    }
    // Judged from the model's side, the core's events are hidden: the model-side oracles
    // judge the exchanges, and no oracle or trace expectation reads the trace.
    let model_side = run.model_side.as_ref().map(|side| model_side_violations(side, &run));
    for violation in model_side.iter().flatten() {
        fail(&mut failures, violation.message.clone(), Vec::new());
    }
    let events = if model_side.is_some() { Vec::new() } else { oracles::check(&run.evidence()) };
    for violation in events {
        // A run limit is the termination oracle's to judge, and already named as the stop.
        let stop = run.limit_hit.as_ref().is_some_and(|limit| violation.message.ends_with(limit.as_str()));
        if !(violation.oracle == oracles::Oracle::Termination && stop) {
            failures.push(Failure::new(FailureKind::Oracle, violation.to_string(), trace.lines_at(&violation.lines)));
        }
    }
    for check in &run.failed_checks {
        failures.push(Failure::new(FailureKind::Check, format!("check failed: {check}"), Vec::new()));
    }
    // Expectations on the whole run the file holds to the default order are not checked in
    // an explored one.
    let whole = !(explored && scenario.expect.order_dependent.is_some());
    if whole && model_side.is_none() {
        failures.extend(fragments(scenario, trace, &task_ids));
    }
    if let Some(want) = scenario.expect.elapsed_ms.filter(|_| whole) {
        let got = run.elapsed.as_millis() as u64;
        if want != got {
            let what = format!("expect.elapsed_ms: expected {want} ms of virtual time, got {got} ms");
            failures.push(
                Failure::new(FailureKind::Expectation, what, Vec::new()).differing(want.to_string(), got.to_string()),
            );
        }
    }
    if let Some(want) = scenario.expect.live_sessions.as_ref().filter(|_| whole) {
        let want: Result<Vec<String>, String> =
            want.iter().map(|name| with_task_ids(name, &task_ids).map(|n| n.into_owned())).collect();
        match want {
            Ok(want) if want != run.live_sessions => {
                let (want, got) = (names(&want), names(&run.live_sessions));
                let what = format!("expect.live_sessions: expected {want}, got {got}");
                failures.push(Failure::new(FailureKind::Expectation, what, Vec::new()).differing(want, got))
            }
            Ok(_) => {}
            Err(reference) => {
                fail(&mut failures, unknown_task("expect.live_sessions", &reference, &task_ids), Vec::new())
            }
        }
    }
    if run.halts.is_empty() {
        consequences.extend(unused_lanes(scenario, &run));
    }
    let mut all = causes;
    if !(all.is_empty() && failures.is_empty() && consequences.is_empty()) {
        all.extend(unexpected_errors);
    }
    all.extend(failures);
    all.extend(consequences);
    Verdict { name: scenario.name.clone(), run, failures: all, orders: 1, default_only: Vec::new(), only_order: None }
}

/// A value's name in the file format (`final_answer`, `error`), not Rust's.
fn word<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) => name,
        _ => "?".to_string(),
    }
}

/// Names for a message: `["a", "b"]` in JSON quoting.
fn names(names: &[String]) -> String {
    format!("[{}]", names.iter().map(|n| quoted(n)).collect::<Vec<_>>().join(", "))
}

/// The task ids of a run in the order the core queued them: what `$taskN` in an expectation
/// refers to.
fn queued_task_ids(trace: &Trace) -> Vec<String> {
    // A set beside the list: a task queued again (a continuation) is found without a scan of
    // every id so far, which made this quadratic in tasks.
    let mut seen: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
    let mut ids: Vec<String> = Vec::new();
    for entry in &trace.entries {
        if let What::Core(Event::TaskQueued { task_id, .. }) = &entry.what
            && seen.insert(task_id)
        {
            ids.push(task_id.clone());
        }
    }
    ids
}

fn unknown_task(place: &str, reference: &str, ids: &[String]) -> String {
    let queued = match ids {
        [] => "it queued none".to_string(),
        ids => format!("it queued {}: {}", plural(ids.len(), "task", "tasks"), ids.join(", ")),
    };
    format!("{place}: {reference} refers to a task the run did not queue ({queued})")
}

/// The script left unused: a lane that selected no agent (with the agents that did ask), and
/// replies no request took.
fn unused_lanes(scenario: &Scenario, run: &Run) -> Vec<Failure> {
    // The agents that asked the model, each once, in order: read only to explain a lane that
    // selected nobody.
    let agents_cell = std::cell::OnceCell::new();
    let agents = || {
        agents_cell.get_or_init(|| {
            let mut seen = std::collections::BTreeSet::new();
            let agents: Vec<&crate::sut::llm::LlmRequest> = run
                .exchanges
                .iter()
                .map(|exchange| &exchange.request)
                .filter(|request| seen.insert(&request.agent))
                .collect();
            agents
        })
    };
    let mut out = Vec::new();
    for (i, (lane, used)) in scenario.lanes.iter().zip(&run.lane_use).enumerate() {
        // Replies marked `optional` or `repeatable` may go unused.
        let uses = run.reply_use.get(i);
        let unused: Vec<usize> = (0..lane.replies.len())
            .filter(|j| uses.and_then(|u| u.get(*j)).copied().unwrap_or(0) == 0)
            .filter(|j| !(lane.replies[*j].optional || lane.replies[*j].repeatable))
            .collect();
        let left = unused.len();
        if left == 0 {
            continue;
        }
        if *used > 0 {
            let of = plural(lane.replies.len(), "reply was", "replies were");
            let which = if left < lane.replies.len() {
                let list: Vec<String> = unused.iter().map(|j| format!("replies[{j}]")).collect();
                format!(" ({})", list.join(", "))
            } else {
                String::new()
            };
            out.push(Failure::new(
                FailureKind::UnusedScript,
                format!("unused script: lanes[{i}] ({}): {left} of its {of} not used{which}", lane.selector()),
                Vec::new(),
            ));
            continue;
        }
        let agents = agents();
        let children = agents.iter().filter(|a| a.agent.depth() > 0);
        let (seen, hint) = match (&lane.agent, &lane.task_contains, &lane.profile) {
            (Some(alias), _, _) => {
                let aliases: Vec<&str> = agents.iter().map(|a| a.agent.as_str()).collect();
                let hint = crate::scenario::did_you_mean(alias, aliases.iter().copied());
                (format!("the agents that asked the model: {}", aliases.join(", ")), hint)
            }
            (_, Some(_), _) => {
                let tasks: Vec<String> = children.map(|a| format!("{} {}", a.agent, quoted(&a.goal))).collect();
                (
                    format!(
                        "the children's tasks: {}",
                        if tasks.is_empty() { "none".into() } else { tasks.join(", ") }
                    ),
                    None,
                )
            }
            _ => {
                let profiles: Vec<String> = children
                    .map(|a| format!("{} {}", a.agent, a.profile.as_deref().map_or("no profile".to_string(), quoted)))
                    .collect();
                let hint = crate::scenario::did_you_mean(
                    lane.profile.as_deref().unwrap_or_default(),
                    agents.iter().filter_map(|a| a.profile.as_deref()),
                );
                let profiles = if profiles.is_empty() { "none".into() } else { profiles.join(", ") };
                (format!("the children's profiles: {profiles}"), hint)
            }
        };
        let hint = hint.map(|h| format!("; {h}")).unwrap_or_default();
        out.push(Failure::new(
            FailureKind::UnusedScript,
            format!(
                "unused script: lanes[{i}] ({}) selected no agent, so none of its {} was used; {seen}{hint}",
                printable(&lane.selector()),
                plural(lane.replies.len(), "reply", "replies")
            ),
            Vec::new(),
        ));
    }
    out
}

/// A trace line with every run of whitespace made one space, trimmed: the columns of the text
/// trace are padding, not content.
fn normalise(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A fragment normalised as the lines are, line by line: runs of whitespace made one space,
/// each line's leading padding dropped, and the end of every line but the last trimmed (a
/// trailing space on the last still asks for a word to end there).
fn normalise_fragment(fragment: &str) -> String {
    let pieces: Vec<&str> = fragment.split('\n').collect();
    let last = pieces.len() - 1;
    let mut out = Vec::with_capacity(pieces.len());
    for (i, piece) in pieces.into_iter().enumerate() {
        let mut normal = normalise(piece);
        if i == last && piece.ends_with(char::is_whitespace) && !normal.is_empty() {
            normal.push(' ');
        }
        out.push(normal);
    }
    out.join("\n")
}

/// Whether a (normalised) fragment starts with a virtual time (`0.150s`): it then matches only
/// at the start of a line, so `0.000s main/4` is not found inside `30.000s main/4`.
fn starts_with_time(fragment: &str) -> bool {
    let first = fragment.split([' ', '\n']).next().unwrap_or_default();
    first.strip_suffix('s').and_then(|t| t.split_once('.')).is_some_and(|(secs, ms)| {
        !secs.is_empty()
            && secs.bytes().all(|b| b.is_ascii_digit())
            && ms.len() == 3
            && ms.bytes().all(|b| b.is_ascii_digit())
    })
}

/// Where a normalised fragment first stands in the normalised text at or after byte `from`;
/// an anchored one only at the start of a line.
fn find_from(text: &str, fragment: &str, from: usize, anchored: bool) -> Option<usize> {
    let mut at = from;
    while let Some(found) = text.get(at..)?.find(fragment) {
        let start = at + found;
        if !anchored || start == 0 || text.as_bytes()[start - 1] == b'\n' {
            return Some(start);
        }
        at = start + 1;
        while !text.is_char_boundary(at) {
            at += 1;
        }
    }
    None
}

/// The line of `lines` nearest to `fragment`: most of its words, then the most alike.
fn nearest_line(lines: &[String], fragment: &str) -> Option<usize> {
    let words: Vec<&str> = fragment.split(' ').collect();
    let score = |line: &str| {
        let shared = words.iter().filter(|w| line.contains(*w)).count();
        (shared, strsim::normalized_levenshtein(fragment, line))
    };
    (0..lines.len()).max_by(|a, b| {
        let (sa, sb) = (score(&lines[*a]), score(&lines[*b]));
        sa.0.cmp(&sb.0).then(sa.1.total_cmp(&sb.1)).then(b.cmp(a))
    })
}

/// `expect.trace` (in order) and `expect.trace_absent`, matched on whitespace-normalised
/// lines.
fn fragments(scenario: &Scenario, trace: &Trace, task_ids: &[String]) -> Vec<Failure> {
    let mut out = Vec::new();
    let expect = &scenario.expect;
    if expect.trace.is_empty() && expect.trace_absent.is_empty() {
        return out;
    }
    let lines = trace.lines();
    let normal: Vec<String> = lines.iter().map(|l| normalise(l)).collect();
    let text = normal.join("\n");
    let starts: Vec<usize> = std::iter::once(0).chain(text.match_indices('\n').map(|(at, _)| at + 1)).collect();
    let line_of = |at: usize| starts.partition_point(|start| *start <= at) - 1;
    let resolve = |place: &str, fragment: &str, out: &mut Vec<Failure>| match with_task_ids(fragment, task_ids) {
        Ok(fragment) => Some(normalise_fragment(&fragment)),
        Err(reference) => {
            out.push(Failure::new(FailureKind::Expectation, unknown_task(place, &reference, task_ids), Vec::new()));
            None
        }
    };
    // Where the previous fragment ended, and on which line it was found.
    let mut from = 0;
    let mut previous_line = None;
    for (i, fragment) in expect.trace.iter().enumerate() {
        let place = format!("expect.trace[{i}]");
        let Some(wanted) = resolve(&place, fragment, &mut out) else { continue };
        let anchored = starts_with_time(&wanted);
        if let Some(at) = find_from(&text, &wanted, from, anchored) {
            from = at + wanted.len();
            previous_line = Some(line_of(at));
            continue;
        }
        let anywhere = find_from(&text, &wanted, 0, anchored).map(line_of);
        let after = match previous_line {
            None => "does not appear in the trace".to_string(),
            Some(line) => {
                format!("does not appear after trace line {}, where expect.trace[{}] was found", line + 1, i - 1)
            }
        };
        let earlier = anywhere.map(|l| format!("; it appears earlier, on trace line {}", l + 1)).unwrap_or_default();
        let anchor = if anchored { " (it starts with a time, so it must start a line)" } else { "" };
        let mut what = format!("{place}: {} {after}{earlier}{anchor}", quoted(fragment));
        let mut shown = Vec::new();
        if anywhere.is_none()
            && let Some(near) = nearest_line(&normal, wanted.split('\n').next().unwrap_or_default())
        {
            what.push_str(&format!("; the nearest is trace line {}", near + 1));
            shown.push(lines[near].clone());
        }
        out.push(Failure::new(FailureKind::Expectation, what, shown));
    }
    for (i, fragment) in expect.trace_absent.iter().enumerate() {
        let place = format!("expect.trace_absent[{i}]");
        let Some(wanted) = resolve(&place, fragment, &mut out) else { continue };
        let anchored = starts_with_time(&wanted);
        let mut hits = Vec::new();
        let mut at = 0;
        while let Some(found) = find_from(&text, &wanted, at, anchored) {
            let line = line_of(found);
            hits.push(lines[line].clone());
            // On to the next line.
            at = text[found..].find('\n').map_or(text.len(), |nl| found + nl + 1);
        }
        if !hits.is_empty() {
            out.push(Failure::new(FailureKind::Expectation, format!("{place}: {} appears", quoted(fragment)), hits));
        }
    }
    out
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

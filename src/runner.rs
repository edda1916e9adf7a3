//! The library's way to check scenarios: a [`Runner`] (which core, which tie orders, how to
//! judge) and a [`Prepared`] scenario, run as often as a verification and its explored orders
//! need, each run judged.
//!
//! This module decides what runs and how often; one run is `run`, its judgement is `judge`,
//! and loading is `load`. It does not parse files (that is `scenario`) or render (that is
//! `trace`).

use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::core::Builtin;
use crate::harness::Stop;
use crate::harness::clock::paused_runtime;
use crate::harness::exchanges::ExchangeLog;
use crate::harness::mock_llm::Script;
use crate::harness::panics;
use crate::harness::recorder::Recorder;
use crate::harness::schedule::Schedule;
use crate::harness::sim_tools::Declared;
pub use crate::judge::{Failure, FailureKind, Judgement, Order, Verdict, default_only, judge, judge_in};
use crate::judge::{judgement, model_side_violation, model_side_violations};
use crate::load::{self, Loaded};
use crate::oracles::model_side::Judge;
use crate::oracles::{self, Violation};
pub use crate::run::Run;
use crate::run::{RunInputs, RunSinks, run_paused, setup};
use crate::scenario::{Scenario, ScenarioError};
use crate::sut::{AgentId, Profile, SystemUnderTest};
use crate::trace::What;

/// A scenario a core cannot run: what it needs and the core lacks ([`Runner::applies`]). A
/// caller that sweeps cores skips the scenario rather than failing it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsupported {
    /// The core's name (`SystemUnderTest::name`).
    pub core: String,
    /// What the scenario needs and the core lacks (`background \`subagent\``, ...).
    pub missing: Vec<&'static str>,
}

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the core `{}` does not implement {}", self.core, self.missing.join(", "))
    }
}

impl std::error::Error for Unsupported {}

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
    pub fn applies(&self, scenario: &Scenario) -> Result<(), Unsupported> {
        let missing = load::unsupported(self.sut, scenario);
        if missing.is_empty() { Ok(()) } else { Err(Unsupported { core: self.sut.name().to_string(), missing }) }
    }

    /// The one entry for a scenario built in code: loads it through the front door
    /// ([`load::built`]: every check a file gets, profiles resolved with profile folders
    /// relative to the current folder), and checks it as `rehearsal run` does: two runs, every expectation and oracle,
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
        Ok(self.check_loaded(&load::built(scenario.clone(), self.sut)?))
    }

    /// Loads a scenario file through the front door ([`load::file`]) and checks it
    /// ([`Runner::check`]); the verdict's replay hints name the file.
    pub fn check_file(&self, path: &Path) -> Result<(Scenario, Verdict), ScenarioError> {
        let loaded = load::file(path, self.sut)?;
        let verdict = self.check_loaded(&loaded);
        Ok((loaded.into_parts().0, verdict))
    }

    /// Checks a scenario the front door loaded ([`Runner::check`]).
    pub fn check_loaded(&self, loaded: &Loaded) -> Verdict {
        self.judge_loaded(loaded).verdict()
    }

    /// Everything that decides the verdict on a scenario the front door loaded, before the
    /// verdict is built: for a caller that has more to add (the golden file's comparison).
    pub fn judge_loaded(&self, loaded: &Loaded) -> Judgement {
        self.prepare(loaded.scenario(), loaded.profiles()).judgement(loaded.file())
    }

    /// A scenario prepared for runs on this runner: its script is built once, however many
    /// runs, orders and verifications follow.
    pub fn prepare<'s>(&self, scenario: &'s Scenario, profiles: &'s [Profile]) -> Prepared<'a, 's> {
        let script = Arc::new(Script::new(&scenario.lanes));
        let tools = scenario.tools.iter().map(Declared::new).collect();
        let rules = scenario.rules.resolve();
        Prepared { runner: *self, scenario, profiles, script, tools, rules, sizes: Default::default() }
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
}

/// Below this many scripted replies in all, a verify runs its two runs on one thread even
/// when the runner allows two (see `Prepared::small`).
const PARALLEL_MIN_REPLIES: usize = 64;

/// A scenario ready to run on a runner ([`Runner::prepare`]).
pub struct Prepared<'a, 's> {
    runner: Runner<'a>,
    scenario: &'s Scenario,
    profiles: &'s [Profile],
    /// The scenario's rules, resolved once.
    rules: crate::rules::Rules,
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
        let sinks = RunSinks { stop: stop.clone(), recorder: recorder.clone(), log: log.clone(), now };
        let dialect = (self.runner.judging() == Judge::ModelSide).then(|| self.runner.dialect());
        let inputs = RunInputs { script: self.script.clone(), tools: &self.tools, dialect, rules: &self.rules };
        let run = run_paused(sinks, self.runner.sut, self.scenario, inputs, self.profiles, schedule);
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
                    due: log.take_due(),
                    live_sessions: Vec::new(),
                    halts,
                    internal_errors,
                    failed_checks: stop.failed_checks(),
                    lane_use: Vec::new(),
                    reply_use: Vec::new(),
                    rules: self.rules.clone(),
                    setup: setup(self.scenario, self.profiles, schedule),
                    session_ended: false,
                    limit_hit: None,
                    alive_tasks: 0,
                    // Unknown for a run a panic cut: as if tied, so it is explored.
                    tied_instants: u64::MAX,
                    model_side: None,
                    reports: self.runner.sut.reports(),
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
        self.judgement(file).verdict()
    }

    /// What decides [`Prepared::check`]'s verdict, before it is built.
    pub fn judgement(&self, file: Option<&Path>) -> Judgement {
        if let Some(seed) = self.runner.only_order {
            let mut judgement = self.in_order(seed);
            judgement.orders(1, default_only(self.scenario), Some(seed), false);
            return judgement;
        }
        let mut judgement = self.verified();
        // A run with no same-instant tie is the same run in every order: exploring would
        // re-run it K times (`--explore 100000` would re-run one order 100,001 times).
        let tied = judgement.run().is_some_and(|run| run.tied_instants > 0);
        let explore = if tied { self.runner.explore } else { 0 };
        // A failure the default order already shows is not repeated; one that only explored
        // orders show is reported once, with the orders it failed in and the first to replay.
        let mut explored: Vec<(Failure, Vec<u64>)> = Vec::new();
        for order in 1..=u64::from(explore) {
            for failure in self.in_order(order).failures().cloned().collect::<Vec<_>>() {
                if judgement.failures().any(|f| f.what == failure.what) {
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
            judgement.explored(Failure { what: format!("{which} (replay: {replay}): {}", failure.what), ..failure });
        }
        let untied = self.runner.explore > 0 && explore == 0;
        let default_only = if explore > 0 { default_only(self.scenario) } else { Vec::new() };
        judgement.orders(1 + explore, default_only, None, untied);
        judgement
    }

    /// [`Runner::verify`].
    pub fn verify(&self) -> Verdict {
        self.verified().verdict()
    }

    /// Two runs in the default order, the first judged, and determinism between them.
    fn verified(&self) -> Judgement {
        let (mut judgement, second) =
            self.twice_then(Schedule::default_order(), |first| judgement(self.scenario, first, Order::Default));
        determinism(&mut judgement, &second);
        judgement
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

    /// The run in the tie order of `seed`, judged on everything the default order is judged
    /// on (expectations, request checks, the script's use, every oracle, determinism), except
    /// what the file marks as holding in the default order only.
    fn in_order(&self, seed: u64) -> Judgement {
        let (mut judgement, second) =
            self.twice_then(Schedule::seeded(seed), |first| judgement(self.scenario, first, Order::Explored));
        determinism(&mut judgement, &second);
        judgement
    }
}

/// Oracle 9 between a judged run and a second run of the same order.
fn determinism(judgement: &mut Judgement, second: &Run) {
    let Some(run) = judgement.run() else { return };
    if let Some(violation) = oracles::determinism(&run.trace, &second.trace) {
        let lines = run.trace.lines_at(&violation.lines);
        let failure = Failure::new(FailureKind::Determinism, violation.to_string(), lines)
            .of_rule("oracle.determinism", violation.agent.clone());
        judgement.determinism(failure);
    }
}

/// The stack of a thread that runs a scenario. Foreground children run inline, so a deep
/// chain of agents polls deep futures; the main thread's 8 MiB is the floor.
pub const RUN_STACK_BYTES: usize = 8 << 20;

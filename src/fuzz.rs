//! `rehearsal fuzz`: run generated scenarios against every oracle, and shrink what breaks one
//! to a minimal scenario file.
//!
//! A case is a generated [`Scenario`] run twice (determinism) and checked by the oracles, in
//! the default tie order and in `explore` seeded orders. A case whose script the core could
//! not follow (an exhausted lane: a generator gap, not a rule violation) is counted as
//! invalid, never as a finding. On a finding the plan is shrunk the proptest way, the lanes
//! are trimmed to the replies the run used, and the result is an ordinary scenario file that
//! `rehearsal run` replays.
//!
//! Case `n` of seed `s` is drawn from its own generator, seeded from `s` and `n` alone, so a
//! case is the same whatever ran before it: cases run on several threads (`jobs`), and the
//! report (counts, the finding: the failing case with the lowest number) is the same for any
//! number of threads.
//!
//! A campaign ([`run_campaign`]) can also run one [`Shard`] of the cases (`--shard I/N`: N
//! machines, disjoint sets of cases whose union is the whole campaign) and stop starting cases
//! when told ([`Stop`]: a time limit, an interrupt). Cases are started in order and every
//! case started is finished, so the cases a stopped campaign ran are always the first ones
//! of its shard ([`Report::case_numbers`]), and their verdicts are those of any other run.

use std::path::Path;
#[cfg(feature = "cli")]
use std::path::PathBuf;

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use crate::coverage::{self, Reached};
use crate::generate::{self, Family};
use crate::harness::Halt;
use crate::harness::schedule::{Schedule, splitmix64};
use crate::oracles::Violation;
use crate::runner;
use crate::scenario::Scenario;
use crate::sut::{Profile, SystemUnderTest};

/// What one case showed.
#[derive(Debug)]
pub enum CaseResult {
    /// Every oracle holds.
    Holds,
    /// Some oracle broke.
    Violates(Vec<Violation>),
    /// Something panicked inside the run (the core, or rehearsal itself): a finding as much
    /// as a broken rule, whatever the oracles say about the part that ran.
    Panics(Vec<String>),
    /// The run stopped on an authoring error of the generated script.
    Invalid(String),
}

/// The case's profiles as the front door resolves them ([`crate::load::built`], every check a
/// file gets): the inline ones and the files written into the scenario (a generated scenario
/// has no profile folders, so nothing is read from disk). A loader that refuses profiles the
/// oracles read as written is a finding; any other refusal is an authoring error of the case.
fn case_profiles(sut: &dyn SystemUnderTest, scenario: &Scenario) -> Result<Vec<Profile>, CaseResult> {
    // `built`'s checks on the borrowed case: no copy of the scenario to check and drop.
    match crate::load::built_profiles(scenario, sut) {
        Ok(profiles) => Ok(profiles),
        Err(e) => {
            // Only a refusal by the profile reader itself can be the loader's fault.
            let by_reader = crate::load::resolve_profiles(scenario, Path::new(".")).err();
            let violation = by_reader.and_then(|refused| {
                crate::oracles::profiles_refused(&scenario.profile_files, &scenario.profiles, &refused.to_string())
            });
            Err(match violation {
                Some(violation) => CaseResult::Violates(vec![violation]),
                None => CaseResult::Invalid(e.to_string()),
            })
        }
    }
}

/// Runs one case in one tie order and checks every oracle.
pub fn check(scenario: &Scenario, schedule: Schedule) -> CaseResult {
    check_judged(scenario, schedule, crate::oracles::model_side::Judge::Events)
}

/// [`check`], judged as `judge` says.
pub fn check_judged(scenario: &Scenario, schedule: Schedule, judge: crate::oracles::model_side::Judge) -> CaseResult {
    check_on(runner::Runner::new().sut(), scenario, schedule, judge)
}

/// `check_judged` on the core `sut` instead of the built-in one.
pub fn check_on(
    sut: &dyn SystemUnderTest,
    scenario: &Scenario,
    schedule: Schedule,
    judge: crate::oracles::model_side::Judge,
) -> CaseResult {
    match case_profiles(sut, scenario) {
        Ok(profiles) => {
            check_prepared(&runner::Runner::new().on(sut).judge(judge).prepare(scenario, &profiles), schedule)
        }
        Err(verdict) => verdict,
    }
}

fn check_prepared(prepared: &runner::Prepared, schedule: Schedule) -> CaseResult {
    let (run, violations) = prepared.check_order(schedule);
    judge(run, violations)
}

fn judge(run: runner::Run, violations: Vec<Violation>) -> CaseResult {
    if !run.internal_errors.is_empty() {
        return CaseResult::Panics(run.internal_errors);
    }
    // Judged from the model's side, a request no agent accounts for stops the run (no lane can
    // answer it) and is a finding, not an invalid case.
    if let Some(halt) = run.halts.iter().find(|h| h.kind == Halt::Unattributed) {
        let violation = Violation {
            oracle: crate::oracles::Oracle::ModelSide,
            agent: "?".to_string(),
            at: run.elapsed,
            message: format!("model-side attribution (oracle.model-side.attribution): {halt}"),
            lines: Vec::new(),
        };
        return CaseResult::Violates(vec![violation]);
    }
    // A run limit blames no one; any other halt is the generator's authoring error.
    if let Some(halt) = run.halts.iter().find(|h| !matches!(h.kind, Halt::Limit(_))) {
        return CaseResult::Invalid(halt.reason.clone());
    }
    if violations.is_empty() { CaseResult::Holds } else { CaseResult::Violates(violations) }
}

/// The tie orders a case is checked in: the default, then `explore` seeded ones drawn from
/// the case's seed.
pub fn schedules(case_seed: u64, explore: u32) -> Vec<Schedule> {
    let mut out = vec![Schedule::default_order()];
    out.extend((1..=u64::from(explore)).map(|k| Schedule::seeded(splitmix64(case_seed ^ k) % 1_000_000)));
    out
}

/// How a fuzz run is set up.
#[derive(Clone, Debug)]
pub struct Options {
    /// Cases to generate.
    pub cases: u64,
    /// The root seed of every draw.
    pub seed: u64,
    /// Seeded tie orders per case, besides the default.
    pub explore: u32,
    /// Which rule sets to draw.
    pub family: Family,
    /// Most shrinking steps.
    pub shrink_steps: u32,
    /// Threads that run cases (at least 1).
    pub jobs: usize,
    /// What judges each case: the core's events, or the model's side alone.
    pub judge: crate::oracles::model_side::Judge,
}

/// A minimal reproduction of a violation or of a panic.
#[derive(Debug)]
pub struct Finding {
    /// The case number (from 0).
    pub case: u64,
    /// The minimal scenario.
    pub scenario: Scenario,
    /// What it breaks (empty when it panics).
    pub violations: Vec<Violation>,
    /// What panicked inside the run, `panicked at FILE:LINE:COLUMN: MESSAGE` (empty when
    /// only rules broke).
    pub panics: Vec<String>,
    /// The tie order it breaks them in.
    pub schedule: Schedule,
}

impl Finding {
    /// One line per problem, panics first: what the summary and the scenario file print.
    pub fn problems(&self) -> Vec<String> {
        let panics = self.panics.iter().map(|p| format!("internal error: {p}"));
        panics.chain(self.violations.iter().map(|v| v.to_string())).collect()
    }
}

/// The part of the case space one machine runs (`rehearsal fuzz --shard I/N`, 1-based like
/// `cargo nextest --partition count:I/N`): case `c` belongs to shard `c % N + 1`. N machines
/// running shards `1/N` to `N/N` with the same seed and case count run disjoint sets of cases
/// whose union is exactly the unsharded campaign; a case is drawn from its seed and number
/// alone, so it is the same case, with the same verdict, on any shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    index: u64,
    count: u64,
}

impl Shard {
    /// Every case: shard `1/1`.
    pub const WHOLE: Shard = Shard { index: 1, count: 1 };

    /// Shard `index` of `count` (`1 <= index <= count`).
    pub fn new(index: u64, count: u64) -> Result<Shard, ShardError> {
        if count == 0 {
            Err(ShardError::NoShards { index })
        } else if index == 0 {
            Err(ShardError::FromZero { count })
        } else if index > count {
            Err(ShardError::PastCount { index, count })
        } else {
            Ok(Shard { index, count })
        }
    }

    /// Which shard this is, from 1.
    pub fn index(self) -> u64 {
        self.index
    }

    /// How many shards the cases are split into.
    pub fn count(self) -> u64 {
        self.count
    }

    /// Whether case `case` belongs to this shard.
    pub fn contains(self, case: u64) -> bool {
        case % self.count == self.index - 1
    }

    /// The case number of this shard's `nth` case (from 0), if it fits in a `u64`.
    pub fn nth(self, nth: u64) -> Option<u64> {
        nth.checked_mul(self.count)?.checked_add(self.index - 1)
    }

    /// How many of the cases `0..cases` belong to this shard.
    pub fn size(self, cases: u64) -> u64 {
        if cases < self.index { 0 } else { (cases - self.index) / self.count + 1 }
    }

    /// The cases of `0..cases` this shard runs, in the order it starts them.
    pub fn cases(self, cases: u64) -> impl Iterator<Item = u64> {
        (0..self.size(cases)).map(move |nth| nth * self.count + self.index - 1)
    }
}

impl Default for Shard {
    fn default() -> Shard {
        Shard::WHOLE
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl std::str::FromStr for Shard {
    type Err = String;

    /// Reads `I/N`, as `--shard` takes it.
    fn from_str(text: &str) -> Result<Shard, String> {
        let number = |part: &str, what: &str| {
            part.trim()
                .parse::<u64>()
                .map_err(|_| format!("`{text}`: {what} is not a whole number (write I/N, e.g. 2/4)"))
        };
        let (index, count) = text.split_once('/').ok_or_else(|| format!("`{text}`: write I/N, e.g. 2/4"))?;
        Shard::new(number(index, "I")?, number(count, "N")?).map_err(|e| e.to_string())
    }
}

/// A shard `I/N` that names no shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShardError {
    /// `N` is 0.
    NoShards {
        /// `I`.
        index: u64,
    },
    /// `I` is 0.
    FromZero {
        /// `N`.
        count: u64,
    },
    /// `I` is past `N`.
    PastCount {
        /// `I`.
        index: u64,
        /// `N`.
        count: u64,
    },
}

impl std::fmt::Display for ShardError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShardError::NoShards { index } => {
                write!(f, "shard {index}/0: there must be at least one shard (N >= 1)")
            }
            ShardError::FromZero { count } => write!(f, "shard 0/{count}: shards count from 1 (I/N with 1 <= I <= N)"),
            ShardError::PastCount { index, count } => {
                write!(f, "shard {index}/{count}: there are only {count} shards (I/N with 1 <= I <= N)")
            }
        }
    }
}

impl std::error::Error for ShardError {}

/// Why a campaign stops starting cases before it has run them all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Its time is up (`--time`).
    TimeLimit,
    /// It was interrupted (Ctrl-C). An interrupt also cuts a finding's shrinking short.
    Interrupted,
}

/// How a campaign ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Ended {
    /// It ran every case of its shard and found nothing.
    #[default]
    AllCases,
    /// It stopped at a finding, shrunk in full.
    Finding,
    /// Its time was up before it had run every case.
    TimeLimit,
    /// It was interrupted before it had run every case, or while it shrank a finding (whose
    /// scenario then still fails but may not be minimal).
    Interrupted,
}

/// A campaign's counts so far, as the progress callback of [`run_campaign`] sees them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Cases finished.
    pub done: u64,
    /// Invalid cases among them.
    pub invalid: u64,
    /// Findings so far (0 or 1: the campaign stops at the first).
    pub findings: u64,
}

/// What a fuzz run did.
#[derive(Debug, Default)]
pub struct Report {
    /// Cases run.
    pub cases: u64,
    /// Cases the generator got wrong (not findings).
    pub invalid: u64,
    /// Why they were invalid: the place of each reason, how often, and one full reason.
    pub invalid_reasons: std::collections::BTreeMap<String, (u64, String)>,
    /// The first violation found, shrunk.
    pub finding: Option<Finding>,
    /// The shard whose cases ran.
    pub shard: Shard,
    /// How the campaign ended.
    pub ended: Ended,
    /// Per clause of [`coverage::clauses`], the first case whose run exercised it (among the
    /// cases that held, in their default tie order); `None` when none did.
    pub reached: Vec<Option<u64>>,
    /// The threads that ran cases: [`Options::jobs`], at most one per case of the shard, and
    /// fewer when the system would not start more (the campaign goes on with those it has).
    pub threads: usize,
    /// Cases drawn that need a feature the core lacks ([`crate::sut::Capabilities`]): not
    /// run, so neither passed nor invalid; always 0 on the built-in core.
    pub skipped: u64,
    /// What the skipped cases needed that the core lacks, by name.
    pub skipped_for: std::collections::BTreeSet<&'static str>,
}

impl Report {
    /// The numbers of the cases counted in `cases`, in order: always the shard's first
    /// `cases` cases, however the campaign ended.
    pub fn case_numbers(&self) -> impl Iterator<Item = u64> {
        let shard = self.shard;
        (0..self.cases).map_while(move |nth| shard.nth(nth))
    }
}

fn runner_for(seed: u64) -> TestRunner {
    let mut bytes = [0u8; 32];
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&splitmix64(seed.wrapping_add(i as u64)).to_le_bytes());
    }
    TestRunner::new_with_rng(Config::default(), TestRng::from_seed(RngAlgorithm::ChaCha, &bytes))
}

/// The generator of case `case` of seed `seed`: its own, so every case can be drawn alone.
fn case_runner(seed: u64, case: u64) -> TestRunner {
    runner_for(splitmix64(seed ^ splitmix64(case.wrapping_add(0xC0FF_EE00))))
}

/// The plan of case `case` of a campaign of `seed` drawing `family`: the one its scenario is
/// compiled from (the same draws, so `case_plan(..).compile()` is the case's scenario). For
/// tests that count what the generator draws without running every case.
pub fn case_plan(seed: u64, case: u64, family: Family) -> generate::Plan {
    case_plan_judged(seed, case, family, crate::oracles::model_side::Judge::Events)
}

/// [`case_plan`] of a campaign judged as `judge` says: judged from the model's side, the plans
/// also draw the model-side shapes ([`generate::Mode::ModelSide`]).
pub fn case_plan_judged(
    seed: u64,
    case: u64,
    family: Family,
    judge: crate::oracles::model_side::Judge,
) -> generate::Plan {
    generate::plan_in(family, mode(judge))
        .new_tree(&mut case_runner(seed, case))
        .expect("plan strategies never reject")
        .current()
}

/// What the generator draws for a campaign judged as `judge` says: the shapes that make the
/// model-side rules visible only when it judges from that side, so an events-judged campaign
/// draws exactly the cases it always drew.
fn mode(judge: crate::oracles::model_side::Judge) -> generate::Mode {
    match judge {
        crate::oracles::model_side::Judge::Events => generate::Mode::Events,
        crate::oracles::model_side::Judge::ModelSide => generate::Mode::ModelSide,
    }
}

/// What one case showed in every tie order checked.
enum Outcome {
    /// Every order holds; the clauses the default order's run exercised.
    Holds(Reached),
    Invalid(String),
    Violates(Schedule),
    /// The case needs these features, which the core lacks: not run.
    Skipped(Vec<&'static str>),
}

fn run_case(
    sut: &dyn SystemUnderTest,
    strategy: &impl Strategy<Value = Scenario>,
    options: &Options,
    case: u64,
) -> Outcome {
    let tree = strategy.new_tree(&mut case_runner(options.seed, case)).expect("scenario strategies never reject");
    let scenario = tree.current();
    let missing = crate::load::unsupported(sut, &scenario);
    if !missing.is_empty() {
        return Outcome::Skipped(missing);
    }
    let profiles = match case_profiles(sut, &scenario) {
        Ok(profiles) => profiles,
        Err(CaseResult::Invalid(reason)) => return Outcome::Invalid(reason),
        Err(_) => return Outcome::Violates(Schedule::default_order()),
    };
    let prepared = runner::Runner::new().on(sut).judge(options.judge).prepare(&scenario, &profiles);
    let mut reached = None;
    for schedule in schedules(options.seed ^ case, options.explore) {
        let (run, violations) = prepared.check_order(schedule);
        reached.get_or_insert_with(|| coverage::reached(&run.evidence()));
        match judge(run, violations) {
            CaseResult::Holds => {}
            CaseResult::Invalid(reason) => return Outcome::Invalid(reason),
            CaseResult::Violates(_) | CaseResult::Panics(_) => return Outcome::Violates(schedule),
        }
    }
    Outcome::Holds(reached.unwrap_or_default())
}

/// Case `case` of the campaign `options` describes, alone, on the built-in core, in every tie
/// order the campaign checks it in: `Ok` when it holds (or is skipped), else what it showed,
/// unshrunk. A campaign's finding, kept as a regression by its case number.
pub fn replay_case(options: &Options, case: u64) -> Result<(), ReplayError> {
    let sut = runner::Runner::new().sut();
    let strategy = generate::scenario_in(options.family, sut.capabilities(), mode(options.judge));
    match run_case(sut, &strategy, options, case) {
        Outcome::Holds(_) | Outcome::Skipped(_) => Ok(()),
        Outcome::Invalid(reason) => Err(ReplayError::Invalid { case, reason }),
        Outcome::Violates(schedule) => {
            let scenario = strategy.new_tree(&mut case_runner(options.seed, case)).expect("never rejects").current();
            let profiles = case_profiles(sut, &scenario).unwrap_or_default();
            let prepared = runner::Runner::new().on(sut).judge(options.judge).prepare(&scenario, &profiles);
            let (run, violations) = prepared.check_order(schedule);
            let shown = match judge(run, violations) {
                CaseResult::Violates(violations) => violations.iter().map(ToString::to_string).collect(),
                CaseResult::Panics(panics) => panics,
                other => vec![format!("{other:?}")],
            };
            Err(ReplayError::Violates { case, schedule, shown })
        }
    }
}

/// What a replayed case showed.
#[derive(Clone, Debug)]
pub enum ReplayError {
    /// The case drawn is not a valid scenario (a bug of the generator).
    Invalid {
        /// The case number.
        case: u64,
        /// Why it is invalid.
        reason: String,
    },
    /// The case breaks a rule in a tie order.
    Violates {
        /// The case number.
        case: u64,
        /// The tie order.
        schedule: Schedule,
        /// What it showed: each violation or panic.
        shown: Vec<String>,
    },
}

impl std::fmt::Display for ReplayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReplayError::Invalid { case, reason } => write!(f, "case {case} is invalid: {reason}"),
            ReplayError::Violates { case, schedule, shown } => {
                write!(f, "case {case} in tie order {schedule:?}: {}", shown.join("; "))
            }
        }
    }
}

impl std::error::Error for ReplayError {}

/// Runs the cases on `options.jobs` threads, calling `progress` with the number of cases
/// done; stops at the first finding (the failing case with the lowest number) and shrinks it.
pub fn run(options: &Options, progress: impl Fn(u64) + Sync) -> Report {
    run_campaign(options, Shard::WHOLE, || None, |tally| progress(tally.done))
}

/// Runs `shard`'s cases among `0..options.cases` on `options.jobs` threads, calling
/// `progress` after each case; stops at the first finding (the failing case with the lowest
/// number) and shrinks it.
///
/// `stop` is asked before each case is started: once it says why to stop, no case is started
/// and the ones in flight are finished, and [`Stop::Interrupted`] also cuts shrinking short.
/// Cases are started in order, so what ran is the shard's first [`Report::cases`] cases, and
/// their counts and finding are the ones any campaign running them reports. Without a stop,
/// the report is [`run`]'s, whatever the number of threads.
pub fn run_campaign(
    options: &Options,
    shard: Shard,
    stop: impl Fn() -> Option<Stop> + Sync,
    progress: impl Fn(Tally) + Sync,
) -> Report {
    run_campaign_on(runner::Runner::new().sut(), options, shard, stop, progress)
}

/// The family a campaign on a core with `capabilities` draws from, for `asked`: `Any` narrows
/// to the one family the core implements (so fewer cases are skipped); a family the core
/// lacks entirely is refused, since every case would be skipped.
#[cfg(feature = "cli")]
pub(crate) fn family_for(asked: Family, capabilities: crate::sut::Capabilities) -> Result<Family, String> {
    match (asked, capabilities.foreground, capabilities.background) {
        (_, false, false) => {
            Err("the core implements neither Roku's `Agent` nor Bub's `subagent`: nothing to fuzz".into())
        }
        (Family::Any, true, false) => Ok(Family::Roku),
        (Family::Any, false, true) => Ok(Family::Bub),
        (Family::Roku, false, _) => Err("--family roku: the core does not implement foreground `Agent`".into()),
        (Family::Bub, _, false) => Err("--family bub: the core does not implement background `subagent`".into()),
        (asked, _, _) => Ok(asked),
    }
}

/// [`run_campaign`] on the core `sut`: cases that need a feature the core lacks are drawn
/// (so case numbers and seeds mean the same on every core) but not run, and counted in
/// [`Report::skipped`]. Give it a family `family_for` allows, or most cases are skipped.
pub fn run_campaign_on(
    sut: &dyn SystemUnderTest,
    options: &Options,
    shard: Shard,
    stop: impl Fn() -> Option<Stop> + Sync,
    progress: impl Fn(Tally) + Sync,
) -> Report {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Mutex, OnceLock};
    // Cases are numbered within the shard here (`nth`); `shard.nth` gives the case number.
    let total = shard.size(options.cases);
    let next = AtomicU64::new(0);
    let done = AtomicU64::new(0);
    let invalid = AtomicU64::new(0);
    // The lowest failing case so far: no case above it needs to run.
    let first_failure = AtomicU64::new(u64::MAX);
    let stopped: OnceLock<Stop> = OnceLock::new();
    let outcomes: Mutex<Vec<(u64, u64, Outcome)>> = Mutex::new(Vec::new());
    let first_reached = Mutex::new(vec![u64::MAX; coverage::clauses().len()]);
    let work = || {
        // Each thread builds its own strategy (proptest's are not shared across threads).
        let strategy = generate::scenario_in(options.family, sut.capabilities(), mode(options.judge));
        let mut mine = Vec::new();
        // The first case (by number in the shard) that reached each clause.
        let mut first = vec![u64::MAX; coverage::clauses().len()];
        loop {
            // Asked before a case is taken, so every case taken is run: what ran is a prefix.
            if let Some(why) = stop() {
                let _ = stopped.set(why);
                break;
            }
            let nth = next.fetch_add(1, Ordering::Relaxed);
            if nth >= total || nth > first_failure.load(Ordering::Relaxed) {
                break;
            }
            let case = shard.nth(nth).expect("a shard's case below the case count fits in a u64");
            let outcome = run_case(sut, &strategy, options, case);
            let mut invalid_so_far = invalid.load(Ordering::Relaxed);
            match &outcome {
                Outcome::Holds(reached) => {
                    for clause in reached.indices() {
                        first[clause] = first[clause].min(nth);
                    }
                }
                Outcome::Skipped(_) => mine.push((nth, case, outcome)),
                Outcome::Invalid(_) => {
                    invalid_so_far = invalid.fetch_add(1, Ordering::Relaxed) + 1;
                    mine.push((nth, case, outcome));
                }
                Outcome::Violates(_) => {
                    first_failure.fetch_min(nth, Ordering::Relaxed);
                    mine.push((nth, case, outcome));
                }
            }
            progress(Tally {
                done: done.fetch_add(1, Ordering::Relaxed) + 1,
                invalid: invalid_so_far,
                findings: u64::from(first_failure.load(Ordering::Relaxed) != u64::MAX),
            });
        }
        outcomes.lock().expect("fuzz results lock poisoned").extend(mine);
        let mut reached = first_reached.lock().expect("fuzz results lock poisoned");
        for (all, mine) in reached.iter_mut().zip(first) {
            *all = (*all).min(mine);
        }
    };
    // No more threads than cases; and a thread the system will not start is one fewer, not a
    // panic (`-j 40000` asks for more than a system starts): every thread runs the same loop.
    let wanted = u64::try_from(options.jobs.max(1)).unwrap_or(u64::MAX).min(total.max(1));
    let mut threads = 1;
    std::thread::scope(|scope| {
        let mut helpers = Vec::new();
        for _ in 1..wanted {
            match std::thread::Builder::new().stack_size(runner::RUN_STACK_BYTES).spawn_scoped(scope, work) {
                Ok(helper) => helpers.push(helper),
                Err(_) => break,
            }
        }
        threads += helpers.len();
        work();
        for helper in helpers {
            helper.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        }
    });
    let mut outcomes = outcomes.into_inner().expect("fuzz results lock poisoned");
    outcomes.sort_by_key(|(nth, _, _)| *nth);
    let last = first_failure.load(Ordering::Relaxed);
    // Every case taken below the first failure ran; a stop leaves the rest untaken.
    let ran = total.min(next.load(Ordering::Relaxed)).min(last.saturating_add(1));
    // Only the cases counted reach clauses, so the report is the same for any number of threads.
    let first_reached = first_reached.into_inner().expect("fuzz results lock poisoned");
    let reached = first_reached.iter().map(|nth| (*nth < ran).then(|| shard.nth(*nth)).flatten()).collect();
    let mut report = Report { cases: ran, shard, reached, threads, ..Report::default() };
    let mut shrink_cut = false;
    for (nth, case, outcome) in outcomes {
        match outcome {
            Outcome::Holds(_) => {}
            Outcome::Invalid(_) | Outcome::Skipped(_) if nth >= ran => {}
            Outcome::Skipped(missing) => {
                report.skipped += 1;
                report.skipped_for.extend(missing);
            }
            Outcome::Invalid(reason) => {
                report.invalid += 1;
                let kind: String = reason.split(':').next().unwrap_or_default().chars().take(60).collect();
                report.invalid_reasons.entry(kind).or_insert((0, reason)).0 += 1;
            }
            Outcome::Violates(schedule) if nth == last => {
                let strategy = generate::scenario_in(options.family, sut.capabilities(), mode(options.judge));
                let mut tree =
                    strategy.new_tree(&mut case_runner(options.seed, case)).expect("scenario strategies never reject");
                let interrupted = || stop() == Some(Stop::Interrupted);
                let (scenario, failure, cut) =
                    shrink_until(sut, &mut tree, schedule, options.shrink_steps, &interrupted, options.judge);
                shrink_cut = cut;
                let (violations, panics) = failure.parts();
                report.finding = Some(Finding { case, scenario, violations, panics, schedule });
            }
            Outcome::Violates(_) => {}
        }
    }
    report.ended = if shrink_cut {
        Ended::Interrupted
    } else if report.finding.is_some() {
        Ended::Finding
    } else if ran < total {
        match stopped.get() {
            Some(Stop::TimeLimit) => Ended::TimeLimit,
            Some(Stop::Interrupted) => Ended::Interrupted,
            None => unreachable!("a campaign without a finding or a stop runs every case"),
        }
    } else {
        Ended::AllCases
    };
    report
}

/// How a case fails: the kind a shrink keeps (a panicking case shrinks to a smaller one that
/// still panics, never to one that merely breaks a rule).
enum Failure {
    Violates(Vec<Violation>),
    Panics(Vec<String>),
}

impl Failure {
    fn of(verdict: CaseResult) -> Option<Failure> {
        match verdict {
            CaseResult::Violates(v) => Some(Failure::Violates(v)),
            CaseResult::Panics(p) => Some(Failure::Panics(p)),
            CaseResult::Holds | CaseResult::Invalid(_) => None,
        }
    }

    fn same_kind(&self, other: &Failure) -> bool {
        matches!((self, other), (Failure::Violates(_), Failure::Violates(_)) | (Failure::Panics(_), Failure::Panics(_)))
    }

    fn parts(self) -> (Vec<Violation>, Vec<String>) {
        match self {
            Failure::Violates(v) => (v, Vec::new()),
            Failure::Panics(p) => (Vec::new(), p),
        }
    }
}

/// Shrinks a failing case as far as it keeps failing the same way, then trims its lanes to
/// what the run used. Returns the minimal scenario, its violations and its panics.
pub fn shrink(
    tree: &mut impl ValueTree<Value = Scenario>,
    schedule: Schedule,
    steps: u32,
) -> (Scenario, Vec<Violation>, Vec<String>) {
    let (scenario, failure, _) = shrink_until(
        runner::Runner::new().sut(),
        tree,
        schedule,
        steps,
        &|| false,
        crate::oracles::model_side::Judge::Events,
    );
    let (violations, panics) = failure.parts();
    (scenario, violations, panics)
}

/// [`shrink`], cut short once `cut` says so (between steps); also says whether it was cut.
fn shrink_until(
    sut: &dyn SystemUnderTest,
    tree: &mut impl ValueTree<Value = Scenario>,
    schedule: Schedule,
    steps: u32,
    cut: &dyn Fn() -> bool,
    judge: crate::oracles::model_side::Judge,
) -> (Scenario, Failure, bool) {
    let mut was_cut = false;
    let mut best = tree.current();
    let check = |s: &Scenario, schedule| check_on(sut, s, schedule, judge);
    let mut best_failure = Failure::of(check(&best, schedule)).expect("shrinking starts from a failing case");
    let failure_of = |s: &Scenario, like: &Failure| Failure::of(check(s, schedule)).filter(|f| f.same_kind(like));
    if tree.simplify() {
        for _ in 0..steps {
            if cut() {
                was_cut = true;
                break;
            }
            let candidate = tree.current();
            let more = match failure_of(&candidate, &best_failure) {
                Some(failure) => {
                    best = candidate;
                    best_failure = failure;
                    tree.simplify()
                }
                None => tree.complicate(),
            };
            if !more {
                break;
            }
        }
    }
    let trimmed = trim_on(sut, &best, schedule);
    match failure_of(&trimmed, &best_failure) {
        Some(failure) => (trimmed, failure, was_cut),
        None => (best, best_failure, was_cut),
    }
}

/// The scenario with every lane cut to the replies its run on the core `sut` used, unused
/// lanes dropped, and tools and profiles no remaining reply names dropped.
fn trim_on(sut: &dyn SystemUnderTest, scenario: &Scenario, schedule: Schedule) -> Scenario {
    // Profiles the loader refuses: no run to trim by.
    let Ok(profiles) = case_profiles(sut, scenario) else { return scenario.clone() };
    let run = runner::Runner::new().on(sut).run(scenario, &profiles, schedule);
    let mut out = scenario.clone();
    out.lanes = scenario
        .lanes
        .iter()
        .zip(&run.lane_use)
        .filter(|(_, used)| **used > 0)
        .map(|(lane, used)| {
            let mut lane = lane.clone();
            lane.replies.truncate(*used);
            lane
        })
        .collect();
    let calls: Vec<&crate::scenario::Call> = out.lanes.iter().flat_map(|l| &l.replies).flat_map(|r| &r.calls).collect();
    out.tools.retain(|t| calls.iter().any(|c| c.tool == t.name));
    let named = |name: &str| calls.iter().any(|c| c.args.get("agent").and_then(|a| a.as_str()) == Some(name));
    out.profiles.retain(|p| named(&p.name));
    out.profile_files.retain(|file, _| named(file.strip_suffix(".md").unwrap_or(file)));
    out
}

/// Names a finding and writes it as a scenario file in `dir`. Returns the path.
#[cfg(feature = "cli")]
pub fn write(finding: &Finding, seed: u64, dir: &Path) -> std::io::Result<PathBuf> {
    let mut scenario = finding.scenario.clone();
    scenario.name = format!("fuzz-seed{seed}-case{}", finding.case);
    let broken = finding.problems();
    scenario.description =
        format!("Found by `rehearsal fuzz --seed {seed}` (case {}): {}", finding.case, broken.join("; "));
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!("{}.json", scenario.name));
    let json = serde_json::to_string_pretty(&scenario).expect("scenarios serialise");
    std::fs::write(&path, json + "\n")?;
    Ok(path)
}

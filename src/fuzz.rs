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

use std::path::{Path, PathBuf};

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use crate::generate::{self, Family};
use crate::harness::schedule::{Schedule, splitmix64};
use crate::oracles::Violation;
use crate::profiles;
use crate::runner;
use crate::scenario::Scenario;
use crate::sut::Profile;

/// What one case showed.
#[derive(Debug)]
pub enum Verdict {
    /// Every oracle holds.
    Holds,
    /// Some oracle broke.
    Violates(Vec<Violation>),
    /// The run stopped on an authoring error of the generated script.
    Invalid(String),
}

fn inline_profiles(scenario: &Scenario) -> Vec<Profile> {
    scenario.profiles.iter().map(profiles::from_spec).collect()
}

/// Runs one case in one tie order and checks every oracle.
pub fn check(scenario: &Scenario, schedule: Schedule) -> Verdict {
    let profiles = inline_profiles(scenario);
    check_prepared(&runner::Runner::new().prepare(scenario, &profiles), schedule)
}

fn check_prepared(prepared: &runner::Prepared, schedule: Schedule) -> Verdict {
    let (run, violations) = prepared.check_order(schedule);
    if let Some(halt) = run.halts.iter().find(|h| run.limit_hit.as_deref() != Some(h.as_str())) {
        return Verdict::Invalid(halt.clone());
    }
    if violations.is_empty() { Verdict::Holds } else { Verdict::Violates(violations) }
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
}

/// A minimal reproduction of a violation.
#[derive(Debug)]
pub struct Finding {
    /// The case number (from 0).
    pub case: u64,
    /// The minimal scenario.
    pub scenario: Scenario,
    /// What it breaks.
    pub violations: Vec<Violation>,
    /// The tie order it breaks them in.
    pub schedule: Schedule,
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

/// What one case showed in every tie order checked.
enum Outcome {
    Holds,
    Invalid(String),
    Violates(Schedule),
}

fn run_case(strategy: &impl Strategy<Value = Scenario>, options: &Options, case: u64) -> Outcome {
    let tree = strategy.new_tree(&mut case_runner(options.seed, case)).expect("scenario strategies never reject");
    let scenario = tree.current();
    let profiles = inline_profiles(&scenario);
    let prepared = runner::Runner::new().prepare(&scenario, &profiles);
    for schedule in schedules(options.seed ^ case, options.explore) {
        match check_prepared(&prepared, schedule) {
            Verdict::Holds => {}
            Verdict::Invalid(reason) => return Outcome::Invalid(reason),
            Verdict::Violates(_) => return Outcome::Violates(schedule),
        }
    }
    Outcome::Holds
}

/// Runs the cases on `options.jobs` threads, calling `progress` with the number of cases
/// done; stops at the first finding (the failing case with the lowest number) and shrinks it.
pub fn run(options: &Options, progress: impl Fn(u64) + Sync) -> Report {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU64, Ordering};
    let next = AtomicU64::new(0);
    let done = AtomicU64::new(0);
    // The lowest failing case so far: no case above it needs to run.
    let first_failure = AtomicU64::new(u64::MAX);
    let outcomes: Mutex<Vec<(u64, Outcome)>> = Mutex::new(Vec::new());
    let work = || {
        // Each thread builds its own strategy (proptest's are not shared across threads).
        let strategy = generate::scenario(options.family);
        let mut mine = Vec::new();
        loop {
            let case = next.fetch_add(1, Ordering::Relaxed);
            if case >= options.cases || case > first_failure.load(Ordering::Relaxed) {
                break;
            }
            let outcome = run_case(&strategy, options, case);
            match &outcome {
                Outcome::Holds => {}
                Outcome::Invalid(_) => mine.push((case, outcome)),
                Outcome::Violates(_) => {
                    first_failure.fetch_min(case, Ordering::Relaxed);
                    mine.push((case, outcome));
                }
            }
            progress(done.fetch_add(1, Ordering::Relaxed) + 1);
        }
        outcomes.lock().expect("fuzz results lock poisoned").extend(mine);
    };
    std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..options.jobs.max(1))
            .map(|_| {
                std::thread::Builder::new()
                    .stack_size(runner::RUN_STACK_BYTES)
                    .spawn_scoped(scope, work)
                    .expect("a fuzz thread starts")
            })
            .collect();
        work();
        for helper in helpers {
            helper.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        }
    });
    let mut outcomes = outcomes.into_inner().expect("fuzz results lock poisoned");
    outcomes.sort_by_key(|(case, _)| *case);
    let last = first_failure.load(Ordering::Relaxed);
    let mut report = Report { cases: options.cases.min(last.saturating_add(1)), ..Report::default() };
    for (case, outcome) in outcomes {
        match outcome {
            Outcome::Holds => {}
            Outcome::Invalid(_) if case > last => {}
            Outcome::Invalid(reason) => {
                report.invalid += 1;
                let kind: String = reason.split(':').next().unwrap_or_default().chars().take(60).collect();
                report.invalid_reasons.entry(kind).or_insert((0, reason)).0 += 1;
            }
            Outcome::Violates(schedule) if case == last => {
                let strategy = generate::scenario(options.family);
                let mut tree =
                    strategy.new_tree(&mut case_runner(options.seed, case)).expect("scenario strategies never reject");
                let (scenario, violations) = shrink(&mut tree, schedule, options.shrink_steps);
                report.finding = Some(Finding { case, scenario, violations, schedule });
            }
            Outcome::Violates(_) => {}
        }
    }
    report
}

/// Shrinks a failing case as far as it keeps failing, then trims its lanes to what the run
/// used. Returns the minimal scenario and its violations.
pub fn shrink(
    tree: &mut impl ValueTree<Value = Scenario>,
    schedule: Schedule,
    steps: u32,
) -> (Scenario, Vec<Violation>) {
    let violations_of = |s: &Scenario| match check(s, schedule) {
        Verdict::Violates(v) => Some(v),
        _ => None,
    };
    let mut best = tree.current();
    let mut best_violations = violations_of(&best).expect("shrinking starts from a failing case");
    if tree.simplify() {
        for _ in 0..steps {
            let candidate = tree.current();
            let more = match violations_of(&candidate) {
                Some(v) => {
                    best = candidate;
                    best_violations = v;
                    tree.simplify()
                }
                None => tree.complicate(),
            };
            if !more {
                break;
            }
        }
    }
    let trimmed = trim(&best, schedule);
    match violations_of(&trimmed) {
        Some(v) => (trimmed, v),
        None => (best, best_violations),
    }
}

/// The scenario with every lane cut to the replies its run used, unused lanes dropped, and
/// tools and profiles no remaining reply names dropped.
pub fn trim(scenario: &Scenario, schedule: Schedule) -> Scenario {
    let run = runner::run_scheduled(scenario, &inline_profiles(scenario), schedule);
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
    out.profiles
        .retain(|p| calls.iter().any(|c| c.args.get("agent").and_then(|a| a.as_str()) == Some(p.name.as_str())));
    out
}

/// Names a finding and writes it as a scenario file in `dir`. Returns the path.
pub fn write(finding: &Finding, seed: u64, dir: &Path) -> std::io::Result<PathBuf> {
    let mut scenario = finding.scenario.clone();
    scenario.name = format!("fuzz-seed{seed}-case{}", finding.case);
    let broken: Vec<String> = finding.violations.iter().map(|v| v.to_string()).collect();
    scenario.description =
        format!("Found by `rehearsal fuzz --seed {seed}` (case {}): {}", finding.case, broken.join("; "));
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!("{}.json", scenario.name));
    let json = serde_json::to_string_pretty(&scenario).expect("scenarios serialise");
    std::fs::write(&path, json + "\n")?;
    Ok(path)
}

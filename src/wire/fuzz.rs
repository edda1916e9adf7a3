//! `rehearsal fuzz --runtime`: property-based fuzzing of a runtime in another process.
//!
//! Each case is drawn within what the runtime's description says it can do ([`plan`]),
//! written as an ordinary scenario file ([`compile`]), driven through the runtime's command as
//! `rehearsal drive` drives a file, and judged by the model-side oracles. A case whose script
//! could not answer the runtime (a generator gap, not a rule) is invalid; a case the harness
//! stopped following (the clock stopped, the turn limit passed, the runtime died) is counted as
//! stopped and never as a finding: neither may be blamed on a rule. A turn's exit code is not
//! judged (a case states no expectation of its own).
//!
//! On a finding the case is shrunk by re-driving smaller candidates ([`shrink`]): a candidate
//! is kept when it still breaks the clause the finding broke first; every candidate's outcome
//! is cached by its scenario's text, candidates are driven `jobs` at a time and the first (in
//! candidate order) that still fails is kept, so the walk is the same for any number of jobs on
//! a deterministic runtime. The minimal case is then replayed `replays` times: a finding is
//! reported with how often it failed, and one that did not fail every time is reported as
//! flaky, with its rate.
//!
//! Cases run `jobs` at a time, in order of their numbers, a batch at a time; the campaign stops
//! starting cases at its first finding (the lowest-numbered failing case of its batch), at its
//! time limit or at an interrupt. Case `n` of seed `s` is the same case whatever ran before it.
//!
//! What is deterministic: the cases drawn, their scenario files, the order they are tried in,
//! and, on virtual time (`--clock`) with a runtime that follows the clock, each verdict. Off
//! the clock a runtime's timing is its own; the replays say how often the finding recurred.

pub(crate) mod compile;
pub(crate) mod plan;
pub(crate) mod shrink;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::coverage;
use crate::fuzz::{Ended, Shard, Stop, Tally};
use crate::judge::FailureKind;
use crate::scenario::{Scenario, Vocabulary};
use crate::wire::drive::{DriveOptions, Driven};
use crate::wire::runtime::RuntimeDescription;
use crate::wire::served::End;
use plan::{Case, Reach};

/// The runtime a campaign fuzzes, and how each case drives it.
#[derive(Clone, Debug)]
pub struct Target {
    /// Its description (dialect, limits, features).
    pub description: RuntimeDescription,
    /// How a case is driven (the command, the clock, the turn limit, the interrupt).
    pub drive: DriveOptions,
}

/// A campaign's size and seed.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Cases to draw (of the whole campaign; a shard runs its share).
    pub cases: u64,
    /// The root seed.
    pub seed: u64,
    /// Cases (and shrinking candidates) driven at once.
    pub jobs: usize,
    /// Which cases run here.
    pub shard: Shard,
    /// How often the shrunk finding is replayed.
    pub replays: u32,
    /// The most runs spent shrinking a finding.
    pub shrink_runs: u32,
}

/// What one driven case showed.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// No model-side oracle broke; the clauses it reached, by index.
    Holds(Vec<usize>),
    /// Model-side oracles broke: their clauses (sorted) and the failures in words.
    Breaks {
        /// The clauses.
        clauses: Vec<String>,
        /// Each failure, in a line.
        problems: Vec<String>,
    },
    /// The script could not answer the runtime: a generator gap.
    Invalid(String),
    /// The harness stopped following the runtime, or the runtime never ended its turn.
    Stopped(String),
}

impl Outcome {
    fn breaks(&self, clause: &str) -> bool {
        matches!(self, Outcome::Breaks { clauses, .. } if clauses.iter().any(|c| c == clause))
    }
}

/// A finding: the failing case, shrunk, and how often it failed again.
#[derive(Clone, Debug)]
pub struct Finding {
    /// The case's number.
    pub case: u64,
    /// The clause it was shrunk on (the first its case broke).
    pub clause: String,
    /// Every clause the case broke.
    pub clauses: Vec<String>,
    /// The case as drawn.
    pub original: Case,
    /// The case shrunk.
    pub minimal: Case,
    /// The shrunk case's scenario file.
    pub scenario: Value,
    /// The failures of the shrunk case's last failing run, a line each.
    pub problems: Vec<String>,
    /// Runs spent shrinking (candidates driven, the cached ones not counted).
    pub shrink_runs: u32,
    /// Candidates answered from the cache.
    pub shrink_cached: u32,
    /// Whether shrinking stopped at its run limit or an interrupt, before it was minimal.
    pub shrink_cut: bool,
    /// Replays of the shrunk case.
    pub replays: u32,
    /// Those that broke the clause again.
    pub reproduced: u32,
}

impl Finding {
    /// Whether it failed on every replay.
    pub fn reproduces(&self) -> bool {
        self.replays > 0 && self.reproduced == self.replays
    }
}

/// What a campaign did.
#[derive(Debug, Default)]
pub struct Report {
    /// Cases run.
    pub cases: u64,
    /// Invalid cases among them.
    pub invalid: u64,
    /// Cases the harness stopped following.
    pub stopped: u64,
    /// Invalid cases by reason: count and an example.
    pub invalid_reasons: BTreeMap<String, (u64, String)>,
    /// Stopped cases by reason: count and an example.
    pub stopped_reasons: BTreeMap<String, (u64, String)>,
    /// The clauses that broke, with the number of cases that broke each.
    pub fired: BTreeMap<String, u64>,
    /// The clauses the holding cases reached, by index of [`coverage::clauses`].
    pub reached: BTreeSet<usize>,
    /// How the campaign ended.
    pub ended: Ended,
    /// The finding, if any.
    pub finding: Option<Finding>,
    /// Runs in all: cases, shrinking and replays.
    pub runs: u64,
}

/// Why a campaign could not run at all.
#[derive(Debug)]
pub enum CampaignError {
    /// The runtime's command could not be run (not found, failed to start).
    NotRun(String),
    /// The harness could not set up around it.
    Setup(String),
}

impl std::fmt::Display for CampaignError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CampaignError::NotRun(why) => write!(f, "the system under test could not be run: {why}"),
            CampaignError::Setup(why) => f.write_str(why),
        }
    }
}

/// The campaign's view of the runtime: what it can do, and how a scenario is driven there.
struct Fuzzer<'a> {
    target: &'a Target,
    reach: Reach,
    vocabulary: Vocabulary,
    jobs: usize,
}

impl Fuzzer<'_> {
    /// The scenario of `case`, named for case `n` of `seed`.
    fn scenario(&self, case: &Case, seed: u64, n: u64, description: &str) -> Value {
        compile::scenario(case, &self.reach, &name(&self.reach.name, seed, n), description)
    }

    /// Drives each scenario (`jobs` at a time); the outcomes in order.
    fn drive_all(&self, files: &[Value]) -> Result<Vec<Outcome>, CampaignError> {
        let mut out: Vec<Option<Result<Outcome, CampaignError>>> = (0..files.len()).map(|_| None).collect();
        crate::jobs::ordered(files, self.jobs, |file| self.drive(file), |i, r| out[i] = Some(r));
        out.into_iter().map(|r| r.expect("every scenario is driven")).collect()
    }

    fn drive(&self, file: &Value) -> Result<Outcome, CampaignError> {
        let text = serde_json::to_string_pretty(file).expect("a JSON value prints");
        let scenario = match crate::scenario::parse_with(Path::new("(generated case)"), &text, &self.vocabulary) {
            Ok(s) => s,
            Err(e) => return Ok(Outcome::Invalid(format!("the generated scenario does not load: {e}"))),
        };
        let missing = self.target.description.missing(&scenario);
        if !missing.is_empty() {
            return Ok(Outcome::Invalid(format!("the runtime lacks {}", missing.join(", "))));
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| CampaignError::Setup(format!("cannot start a runtime: {e}")))?;
        match runtime.block_on(crate::wire::drive::drive(&scenario, &self.target.description, &self.target.drive)) {
            Ok(driven) => Ok(outcome(&scenario, driven)),
            Err(e) if e.is_not_run() => Err(CampaignError::NotRun(e.to_string())),
            Err(e) => Err(CampaignError::Setup(e.to_string())),
        }
    }
}

/// A driven case's outcome: a script that could not answer first (its findings may be the
/// gap's), then a stop, then the model-side oracles.
fn outcome(_scenario: &Scenario, driven: Driven) -> Outcome {
    if driven.wire.end == End::Stopped || !driven.wire.halts.is_empty() {
        let why = driven.wire.halts.first().map_or_else(|| "the script stopped the run".to_string(), |h| h.to_string());
        return Outcome::Invalid(why);
    }
    let verdict = driven.judgement.verdict();
    if let Some(stop) = verdict.failures().iter().find(|f| f.kind == FailureKind::Stopped) {
        return Outcome::Stopped(stop.what.clone());
    }
    let broken: Vec<&crate::judge::Failure> =
        verdict.failures().iter().filter(|f| f.kind == FailureKind::Oracle && f.clause.is_some()).collect();
    if broken.is_empty() {
        let reached = coverage::reached(&verdict.evidence()).model_side();
        return Outcome::Holds(reached.indices().collect());
    }
    let clauses: BTreeSet<String> = broken.iter().filter_map(|f| f.clause.clone()).collect();
    let problems = broken.iter().map(|f| f.what.clone()).collect();
    Outcome::Breaks { clauses: clauses.into_iter().collect(), problems }
}

/// A case's scenario name.
pub fn name(runtime: &str, seed: u64, case: u64) -> String {
    format!("fuzz-{runtime}-seed{seed}-case{case}")
}

/// The first words of a reason, to count reasons alike together.
fn reason_key(why: &str) -> String {
    why.split(|c: char| c.is_ascii_digit() || c == ':').next().unwrap_or(why).trim().to_string()
}

/// Runs a campaign against `target`. `stop` is asked before each batch of cases (and each
/// shrinking step); `progress` gets the counts after each batch.
pub fn run_campaign(
    target: &Target,
    options: &Options,
    stop: &dyn Fn() -> Option<Stop>,
    progress: &mut dyn FnMut(Tally),
) -> Result<Report, CampaignError> {
    let fuzzer = Fuzzer {
        target,
        reach: Reach::of(&target.description, target.drive.clock.is_some()),
        vocabulary: target.description.dialect().vocabulary(),
        jobs: options.jobs.max(1),
    };
    let mut report = Report::default();
    let numbers: Vec<u64> = (0..options.cases).filter(|n| options.shard.contains(*n)).collect();
    for batch in numbers.chunks(fuzzer.jobs) {
        if let Some(why) = stop() {
            report.ended = match why {
                Stop::TimeLimit => Ended::TimeLimit,
                Stop::Interrupted => Ended::Interrupted,
            };
            return Ok(report);
        }
        let cases: Vec<Case> = batch.iter().map(|n| Case::draw(&fuzzer.reach, options.seed, *n)).collect();
        let files: Vec<Value> =
            cases.iter().zip(batch).map(|(c, n)| fuzzer.scenario(c, options.seed, *n, "a generated case")).collect();
        let outcomes = fuzzer.drive_all(&files)?;
        report.runs += outcomes.len() as u64;
        let mut first = None;
        for (i, outcome) in outcomes.iter().enumerate() {
            report.cases += 1;
            match outcome {
                Outcome::Holds(reached) => report.reached.extend(reached.iter().copied()),
                Outcome::Invalid(why) => {
                    report.invalid += 1;
                    let entry = report.invalid_reasons.entry(reason_key(why)).or_insert((0, why.clone()));
                    entry.0 += 1;
                }
                Outcome::Stopped(why) => {
                    report.stopped += 1;
                    let entry = report.stopped_reasons.entry(reason_key(why)).or_insert((0, why.clone()));
                    entry.0 += 1;
                }
                Outcome::Breaks { clauses, .. } => {
                    for clause in clauses {
                        *report.fired.entry(clause.clone()).or_default() += 1;
                    }
                    first.get_or_insert(i);
                }
            }
        }
        progress(Tally { done: report.cases, invalid: report.invalid, findings: u64::from(first.is_some()) });
        if let Some(i) = first {
            let Outcome::Breaks { clauses, problems } = &outcomes[i] else { unreachable!("the first failing case") };
            let finding = shrink_finding(&fuzzer, options, batch[i], &cases[i], clauses, problems, stop, &mut report)?;
            report.ended = if finding.shrink_cut && stop().is_some() { Ended::Interrupted } else { Ended::Finding };
            report.finding = Some(finding);
            return Ok(report);
        }
    }
    Ok(report)
}

/// Shrinks case `n` on the first clause it broke, then replays the result.
#[allow(clippy::too_many_arguments)]
fn shrink_finding(
    fuzzer: &Fuzzer<'_>,
    options: &Options,
    n: u64,
    case: &Case,
    clauses: &[String],
    problems: &[String],
    stop: &dyn Fn() -> Option<Stop>,
    report: &mut Report,
) -> Result<Finding, CampaignError> {
    let clause = clauses[0].clone();
    let mut current = case.clone();
    let mut last_problems = problems.to_vec();
    let mut cache: BTreeMap<String, Outcome> = BTreeMap::new();
    // Every case the walk has stood on: a candidate that is not smaller (a lowered limit) is
    // taken only once, so the walk ends.
    let mut visited: BTreeSet<String> = BTreeSet::new();
    let (mut runs, mut cached, mut cut) = (0u32, 0u32, false);
    'walk: loop {
        visited.insert(fuzzer.scenario(&current, options.seed, n, "").to_string());
        let candidates: Vec<Case> = shrink::candidates(&current, &fuzzer.reach.settable, fuzzer.reach.budget)
            .into_iter()
            .filter(|c| !visited.contains(&fuzzer.scenario(c, options.seed, n, "").to_string()))
            .collect();
        for chunk in candidates.chunks(fuzzer.jobs) {
            if runs >= options.shrink_runs || stop().is_some() {
                cut = true;
                break 'walk;
            }
            let files: Vec<Value> = chunk.iter().map(|c| fuzzer.scenario(c, options.seed, n, "")).collect();
            let texts: Vec<String> = files.iter().map(|f| f.to_string()).collect();
            let new: Vec<usize> = (0..files.len()).filter(|i| !cache.contains_key(&texts[*i])).collect();
            cached += (files.len() - new.len()) as u32;
            let to_drive: Vec<Value> = new.iter().map(|i| files[*i].clone()).collect();
            let outcomes = fuzzer.drive_all(&to_drive)?;
            runs += outcomes.len() as u32;
            report.runs += outcomes.len() as u64;
            for (i, outcome) in new.iter().zip(outcomes) {
                cache.insert(texts[*i].clone(), outcome);
            }
            if let Some(k) = (0..chunk.len()).find(|k| cache[&texts[*k]].breaks(&clause)) {
                if let Outcome::Breaks { problems, .. } = &cache[&texts[k]] {
                    last_problems.clone_from(problems);
                }
                current = chunk[k].clone();
                continue 'walk;
            }
        }
        break;
    }
    let description = format!(
        "Found by `rehearsal fuzz --runtime {} --seed {}`, case {n}, shrunk from {} replies to {}: breaks {clause}.",
        fuzzer.reach.name,
        options.seed,
        case.replies(),
        current.replies()
    );
    let scenario = fuzzer.scenario(&current, options.seed, n, &description);
    let replays: Vec<Value> = (0..options.replays).map(|_| scenario.clone()).collect();
    let outcomes = fuzzer.drive_all(&replays)?;
    report.runs += outcomes.len() as u64;
    let reproduced = outcomes.iter().filter(|o| o.breaks(&clause)).count() as u32;
    Ok(Finding {
        case: n,
        clause,
        clauses: clauses.to_vec(),
        original: case.clone(),
        minimal: current,
        scenario,
        problems: last_problems,
        shrink_runs: runs,
        shrink_cached: cached,
        shrink_cut: cut,
        replays: options.replays,
        reproduced,
    })
}

/// Writes the finding's scenario into `dir` (made if missing) as `NAME.json`.
pub fn write(finding: &Finding, dir: &Path) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let name = finding.scenario["name"].as_str().unwrap_or("fuzz-finding");
    let path = dir.join(format!("{name}.json"));
    let mut text = serde_json::to_string_pretty(&finding.scenario).expect("a JSON value prints");
    text.push('\n');
    std::fs::write(&path, text)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every case drawn for each built-in runtime loads as a scenario for it, and states no
    /// feature the runtime lacks.
    #[test]
    fn every_drawn_case_is_a_scenario_its_runtime_can_run() {
        for runtime in ["py-runtime", "bub", "pydantic-ai", "openai-agents", "smolagents"] {
            let description = RuntimeDescription::builtin(runtime).unwrap();
            let vocabulary = description.dialect().vocabulary();
            for clock in [true, false] {
                let reach = Reach::of(&description, clock);
                for n in 0..300 {
                    let case = Case::draw(&reach, 1, n);
                    let file = compile::scenario(&case, &reach, &name(runtime, 1, n), "");
                    let text = serde_json::to_string_pretty(&file).unwrap();
                    let scenario = crate::scenario::parse_with(Path::new("case"), &text, &vocabulary)
                        .unwrap_or_else(|e| panic!("{runtime} case {n}: {e}\n{text}"));
                    assert_eq!(description.missing(&scenario), Vec::<String>::new(), "{runtime} case {n}");
                    for candidate in shrink::candidates(&case, &reach.settable, reach.budget) {
                        let file = compile::scenario(&candidate, &reach, "c", "");
                        let text = serde_json::to_string_pretty(&file).unwrap();
                        crate::scenario::parse_with(Path::new("candidate"), &text, &vocabulary)
                            .unwrap_or_else(|e| panic!("{runtime} case {n} candidate: {e}\n{text}"));
                    }
                }
            }
        }
    }
}

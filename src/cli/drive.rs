//! `rehearsal drive SCENARIO|DIR --runtime NAME -- CMD ARGS...`: each scenario served on its
//! own port, its runtime's command run once per user turn, the run judged by the model-side
//! oracles and the turns' stdout and exit codes, reported as `rehearsal run` reports. A folder
//! runs in parallel (`--jobs`); the report is the same for any number of jobs (wall times go
//! to stderr only).

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::coverage::Gate;
use super::report::{CoverageEnd, Reporter, Style};
use super::run::{collect, golden_names_apart, snapshot_failure};
use super::style::Terminal;
use super::{ColorChoice, Exit, Format};
use crate::coverage::{self, Tally};
use crate::golden::{self, Store};
use crate::jobs;
use crate::scenario::{Scenario, ScenarioError};
use crate::trace::printable;
use crate::wire::drive::{DriveOptions, Driven, Exited};
use crate::wire::runtime::RuntimeDescription;

/// The options of `rehearsal drive`.
#[derive(clap::Args, Debug)]
pub(super) struct DriveArgs {
    /// Scenario files or folders.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// The runtime: a built-in description (bub, py-runtime, roku, generic, pydantic-ai, openai-agents, smolagents, claude-code) or a description
    /// `.json` file (docs/runtimes.md).
    #[arg(long, value_name = "NAME", default_value = "generic", conflicts_with = "runtime_file")]
    runtime: String,
    /// A runtime description file (docs/runtimes.md); the same as `--runtime FILE.json`.
    #[arg(long, value_name = "FILE")]
    runtime_file: Option<PathBuf>,
    /// Scenarios driven at once, each with its own server port and temp home (default: the
    /// number of cores). The report is the same for any number.
    #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    jobs: Option<u16>,
    /// Real seconds per scripted second of latency (0 answers at once). Not used with --clock.
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    time_scale: f64,
    /// Hold every scripted reply until no request has arrived for QUIET, then release them one
    /// at a time in alias order, waiting for quiet again after each: the same answer order in
    /// every run, on real time (docs/wire.md#--barrier). Costs QUIET per reply. Not with --clock.
    #[arg(long, value_name = "QUIET", num_args = 0..=1, default_missing_value = "200ms",
          value_parser = super::positive_duration, conflicts_with = "clock")]
    barrier: Option<humantime::Duration>,
    /// Run the runtime on the harness's virtual time (docs/clock-protocol.md): latencies and
    /// the runtime's own timers are virtual, the trace shows virtual times. The runtime gets
    /// REHEARSAL_CLOCK, the clock shim first on PYTHONPATH, and PYTHONHASHSEED=0.
    #[arg(long)]
    clock: bool,
    /// The clock shim's folder (default: $REHEARSAL_CLOCK_SHIM, else the shims/python of the
    /// rehearsal checkout this binary was built from).
    #[arg(long, value_name = "DIR", requires = "clock")]
    clock_shim: Option<PathBuf>,
    /// With --clock: also try K seeded orders of the replies (and requests) due at one virtual
    /// instant, besides the default order. A tie between a runtime's own timer and a reply is
    /// not explored: the runtime's timers go first (docs/clock-protocol.md, rule 6).
    #[arg(long, value_name = "K", default_value_t = 0, requires = "clock")]
    explore: u32,
    /// With --clock: run only the tie order of this seed (to replay one --explore found).
    #[arg(long, value_name = "SEED", requires = "clock", conflicts_with = "explore")]
    explore_seed: Option<u64>,
    /// The wall-clock limit of one turn's command; past it its process group is killed.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = super::positive_duration)]
    turn_limit: humantime::Duration,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Print each scenario's exchanges and each turn's stdout and stderr under its verdict.
    #[arg(long)]
    trace: bool,
    /// Print only failures, errors and the summary.
    #[arg(long, short = 'q')]
    quiet: bool,
    /// Name every oracle the verdict was judged by (without it, their count).
    #[arg(long)]
    verbose: bool,
    /// When to colour the text report.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = ColorChoice::Auto)]
    color: ColorChoice,
    /// Print the rule coverage of the passing scenarios, measured from what the model side
    /// shows (a wire run has no core events: clauses judged on events stay unhit).
    #[arg(long)]
    coverage: bool,
    /// Fail (exit 1) unless the passing scenarios exercised at least PERCENT of the
    /// measurable clauses. Implies --coverage.
    #[arg(long, value_name = "PERCENT", value_parser = clap::value_parser!(u8).range(0..=100))]
    coverage_min: Option<u8>,
    /// Compare each scenario's exchanges with its golden file in DIR, as `run --snapshots`
    /// does. Needs --clock or --barrier, the two ways a wire run answers in the same order
    /// every time; without --clock the golden leaves wall times out.
    #[arg(long, value_name = "DIR")]
    snapshots: Option<PathBuf>,
    /// With --snapshots: write every trace as its golden file instead of failing.
    #[arg(long, requires = "snapshots")]
    accept: bool,
    /// Draw the run as seen from the model's side to FILE: SVG, or an HTML page beside the
    /// exchanges for .html (one scenario file only). A row per attributed agent with its model
    /// calls, spawn arrows from the reply that made a child; the runtime's budgets, tools and
    /// ends are not seen over the wire, so they are not drawn. Times are virtual with --clock,
    /// wall times otherwise.
    #[arg(long, value_name = "FILE")]
    timeline: Option<PathBuf>,
    /// The runtime's command and its arguments, after `--`. `{message}` is the turn's user
    /// message, `{turn}` its number (from 1), `{session}` the scenario's session id,
    /// `{home}` and `{workdir}` the temp folders.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

/// `rehearsal drive --help`'s closing part.
pub(super) const DRIVE_AFTER_HELP: &str = "\
Each scenario gets a server on 127.0.0.1 (port 0), a fresh temp home (HOME) and working
directory kept across its turns, and the environment of its runtime description (base URL,
key, model). The command runs once per turn in its own process group; when it exits, passes
--turn-limit or Ctrl-C is pressed, the whole group is killed (platforms without process groups:
the command only). Its stdout is what expect.message is compared with; expect.status: error
means a non-zero exit. Expectations on core events (expect.trace, budget_left, steps,
outcome) are not judged over the wire, and a note says so. A scenario that needs a feature the
runtime lacks is skipped with the reason.

Exit codes:
  0    every scenario passed
  1    a rule was broken, an expectation failed, or the runtime died, hung or never called
  2    bad input or usage: an unreadable or invalid scenario, an unknown runtime
  3    internal error
  4    the system under test could not be run: the command was not found or failed to start
  130  interrupted (Ctrl-C, SIGTERM or SIGHUP): the running command's group was killed, and
       the turn it cut short fails as not judged";

enum Checked {
    Ran(Box<(Scenario, Driven)>),
    Skipped(String, Vec<String>),
    Bad(ScenarioError),
    NotRun(String),
    Setup(String),
}

pub(super) fn drive(args: &DriveArgs, out: &mut dyn Write, err: &mut dyn Write, terminal: Terminal) -> Exit {
    let mut style = Style::plain(args.format, args.quiet, args.color, terminal);
    style.verbose = args.verbose;
    style.coverage_all = args.coverage_min.is_some();
    let mut reporter = Reporter::new(style);
    let with_coverage = args.coverage || args.coverage_min.is_some();
    let gate = Gate::new(args.coverage_min, None).expect("a gate without a file reads nothing");
    if args.snapshots.is_some() && !args.clock && args.barrier.is_none() {
        reporter.error(
            err,
            "--snapshots needs --clock or --barrier: without either, a runtime's agents are answered in whatever order their requests come, and a golden file would flap",
        );
        return Exit::BadInput;
    }
    let chosen = match &args.runtime_file {
        Some(file) => file.to_string_lossy().into_owned(),
        None => args.runtime.clone(),
    };
    let description = match RuntimeDescription::load(&chosen) {
        Ok(d) => d,
        Err(e) => {
            reporter.error(err, &format!("--runtime: {e}"));
            return Exit::BadInput;
        }
    };
    if !(args.time_scale.is_finite() && (0.0..=1000.0).contains(&args.time_scale)) {
        reporter.error(err, &format!("--time-scale {} is not a number from 0 to 1000", args.time_scale));
        return Exit::BadInput;
    }
    if let Some(note) = &description.note {
        reporter.note(err, note);
    }
    let found = collect(&args.paths);
    for problem in &found.problems {
        reporter.bad_input(out, err, problem.path(), problem);
    }
    reporter.skipped = found.skipped.len();
    if found.files.is_empty() && found.problems.is_empty() {
        reporter.error(err, "no scenario file (*.json) under the paths given");
        return Exit::BadInput;
    }
    if args.timeline.is_some() && found.files.len() != 1 {
        let text = format!("--timeline draws one run: give exactly one scenario file ({} given)", found.files.len());
        reporter.error(err, &text);
        return Exit::BadInput;
    }
    // No output may be written over an input (as for `run --timeline`).
    if let Some(timeline) = &args.timeline
        && let Some((input, _)) = found.files.iter().find(|(input, _)| golden::same_file(timeline, input))
    {
        let timeline = printable(&timeline.to_string_lossy()).into_owned();
        let input = printable(&input.to_string_lossy()).into_owned();
        reporter.error(
            err,
            &format!("--timeline {timeline} is the input file {input}: not overwritten (name another file)"),
        );
        return Exit::BadInput;
    }
    let interrupt = Arc::new(AtomicBool::new(false));
    {
        let flag = interrupt.clone();
        // One handler per process; a second `drive` in the same process (tests) keeps the first.
        let _ = ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst));
    }
    let clock = if args.clock {
        match crate::wire::drive::find_clock_shim(args.clock_shim.as_deref()) {
            Ok(shim) => Some(crate::wire::drive::ClockDrive::new(shim)),
            Err(why) => {
                reporter.error(err, &format!("--clock: {why}"));
                return Exit::BadInput;
            }
        }
    } else {
        None
    };
    // The tie seeds each scenario is driven with: the default order (`None`), then K seeded.
    let seeds: Vec<Option<u64>> = match args.explore_seed {
        Some(seed) => vec![Some(seed)],
        None => std::iter::once(None)
            .chain((1..=u64::from(args.explore)).map(|k| Some(crate::seed::splitmix64(k))))
            .collect(),
    };
    let options = DriveOptions {
        command: args.command.clone(),
        time_scale: args.time_scale,
        turn_limit: args.turn_limit.into(),
        interrupt: Some(interrupt.clone()),
        clock,
        barrier: args.barrier.map(Into::into),
        ..DriveOptions::default()
    };
    let jobs = args.jobs.map_or_else(jobs::default_jobs, usize::from);
    let mut not_run = 0;
    let inputs: Vec<PathBuf> = found.files.iter().map(|(file, _)| file.clone()).collect();
    let store = args.snapshots.as_ref().map(|dir| Store::new(dir).protecting(inputs));
    let (files, shared) = if store.is_some() { golden_names_apart(found.files) } else { (found.files, Vec::new()) };
    for problem in &shared {
        reporter.bad_input(out, err, problem.path(), problem);
    }
    let mut tally = Tally::default();
    let vocabulary = description.dialect().vocabulary();
    jobs::ordered(
        &files,
        jobs,
        |(file, _)| {
            let scenario = match crate::load::outside_for(file, &vocabulary) {
                Ok(loaded) => loaded.into_parts().0,
                Err(e) => return Checked::Bad(e),
            };
            let missing = description.missing(&scenario);
            if !missing.is_empty() {
                return Checked::Skipped(scenario.name, missing);
            }
            let runtime = match tokio::runtime::Builder::new_current_thread().enable_io().enable_time().build() {
                Ok(r) => r,
                Err(e) => return Checked::Setup(format!("cannot start a runtime: {e}")),
            };
            // Each tie order in turn; the first that fails is the one reported.
            let mut first = None;
            for (k, seed) in seeds.iter().enumerate() {
                let mut options = options.clone();
                if let Some(clock) = &mut options.clock {
                    clock.tie_seed = *seed;
                }
                match runtime.block_on(crate::wire::drive::drive(&scenario, &description, &options)) {
                    Ok(mut driven) => {
                        let failed = driven.judgement.failures().next().is_some();
                        if let (true, Some(seed)) = (failed, seed) {
                            driven.notes.push(format!(
                                "failed in tie order {k} of {} (tie seed {seed}); replay it with --explore-seed {seed}",
                                seeds.len()
                            ));
                        }
                        if failed || first.is_none() {
                            first = Some(driven);
                        }
                        if failed {
                            break;
                        }
                    }
                    Err(e) if e.is_not_run() => return Checked::NotRun(e.to_string()),
                    Err(e) => return Checked::Setup(e.to_string()),
                }
            }
            let driven = first.expect("at least the default order runs");
            Checked::Ran(Box::new((scenario, driven)))
        },
        |i, checked| {
            let (file, _) = &files[i];
            let shown = printable(&file.to_string_lossy()).into_owned();
            match checked {
                Checked::Bad(e) => reporter.bad_input(out, err, file, &e),
                Checked::Skipped(name, missing) => {
                    reporter.skipped += 1;
                    reporter.note(
                        err,
                        &format!(
                            "skipped {} ({shown}): runtime `{}` lacks {}",
                            printable(&name),
                            description.name,
                            missing.join(", ")
                        ),
                    );
                }
                Checked::NotRun(why) => {
                    not_run += 1;
                    reporter.error(err, &format!("{shown}: the system under test could not be run: {why}"));
                }
                Checked::Setup(why) => {
                    not_run += 1;
                    reporter.error(err, &format!("{shown}: {why}"));
                }
                Checked::Ran(ran) => {
                    let (scenario, driven) = *ran;
                    let mut snapshot = None;
                    if let Some(store) = &store {
                        let (file, root) = &files[i];
                        let name = golden::name(file, root);
                        let body = golden_body(&scenario, &driven, args.clock);
                        match store.compare(&name, file, &scenario.description, &body, args.accept) {
                            Ok(compared) => snapshot = snapshot_failure(&compared, &name),
                            Err(e) => {
                                let problem = ScenarioError::Io {
                                    path: file.clone(),
                                    message: format!("golden file {name}: {e}"),
                                };
                                return reporter.bad_input(out, err, file, &problem);
                            }
                        }
                    }
                    let orders = seeds.len() as u32;
                    let verdict = driven.judgement.checked_orders(orders).snapshot(snapshot).verdict();
                    if with_coverage && verdict.passed() {
                        let reached = coverage::reached(&verdict.evidence()).model_side();
                        tally.add(&reached, &file.to_string_lossy());
                    }
                    for note in &driven.notes {
                        reporter.note(err, &format!("{}: {}", printable(verdict.name()), printable(note)));
                    }
                    let wall: u128 = driven.turns.iter().map(|t| t.elapsed.as_millis()).sum();
                    let virtual_end = match &driven.clock {
                        Some(report) => format!(", ended at {} virtual", crate::wire::clock::seconds(report.now_ns)),
                        None => String::new(),
                    };
                    reporter.note(
                        err,
                        &format!(
                            "{}: {} requests, {} turns, {wall} ms wall time{virtual_end}",
                            printable(verdict.name()),
                            driven.wire.requests,
                            driven.turns.len()
                        ),
                    );
                    reporter.scenario(out, file, &verdict, std::time::Duration::from_millis(wall as u64));
                    if let Some(path) = &args.timeline
                        && let Err(e) = crate::timeline::write_model_side(path, &scenario.name, &driven.wire.side)
                    {
                        // The scenario was judged (its verdict is above); the output path failed.
                        let shown = printable(&path.to_string_lossy()).into_owned();
                        reporter.error(err, &format!("{shown}: cannot write the timeline: {e}"));
                        reporter.usage_errors += 1;
                    }
                    if args.trace && args.format == Format::Text {
                        for line in crate::wire::trace_lines(&driven.wire) {
                            let _ = writeln!(out, "    {}", printable(&line));
                        }
                        for line in driven.clock.iter().flat_map(|report| &report.transcript) {
                            let _ = writeln!(out, "    clock {}", printable(line));
                        }
                        for (t, run) in driven.turns.iter().enumerate() {
                            let how = exited(&run.exited);
                            let _ = writeln!(out, "    turn {}: {how}", t + 1);
                            for line in run.stdout.lines() {
                                let _ = writeln!(out, "    | {}", printable(line));
                            }
                            for line in run.stderr.lines() {
                                let _ = writeln!(out, "    ! {}", printable(line));
                            }
                        }
                    }
                }
            }
        },
    );
    let end = with_coverage.then(|| CoverageEnd { tally: &tally, gate: &gate, unmet: gate.unmet(&tally) });
    reporter.interrupted = interrupt.load(Ordering::SeqCst);
    let exit = reporter.finish(out, err, end);
    match exit {
        Exit::Passed | Exit::Failed if not_run > 0 => Exit::NotRun,
        exit => exit,
    }
}

/// A driven scenario's golden file: each turn's exit, then the exchanges as `--trace` prints
/// them. Off the clock the wall times are left out (they differ in every run); under the clock
/// they are virtual and kept.
fn golden_body(scenario: &Scenario, driven: &Driven, clocked: bool) -> String {
    use std::fmt::Write as _;
    let mut body = String::new();
    let _ = writeln!(body, "scenario: {}", scenario.name);
    for (t, run) in driven.turns.iter().enumerate() {
        let _ = writeln!(body, "turn {}: {}", t + 1, exited(&run.exited));
    }
    let _ = writeln!(body, "---");
    let wall = regex::Regex::new(r"(^\d+ ms wall  | at \d+ ms wall)").expect("a valid pattern");
    for line in crate::wire::trace_lines(&driven.wire) {
        let line = if clocked { line } else { wall.replace_all(&line, "").into_owned() };
        let _ = writeln!(body, "{}", printable(&line));
    }
    body
}

/// How a turn's command ended, as the trace and the golden file say it.
fn exited(how: &Exited) -> String {
    match how {
        Exited::Code(c) => format!("exited {c}"),
        Exited::Signal(s) => format!("died of signal {s}"),
        Exited::TimedOut => "killed at the turn limit".to_string(),
        Exited::Interrupted => "interrupted".to_string(),
        Exited::ClockEnded => "killed after the clock ended".to_string(),
    }
}

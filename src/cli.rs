//! The command line: `rehearsal run` (files, golden traces, reports, rule coverage),
//! `rehearsal fuzz` ([`fuzz`](crate::internals::fuzz)), and for authors `rehearsal new` and
//! `rehearsal schema`. `main.rs` only maps the outcome to an exit code.
//!
//! [`main_with`] is the door for a team with its own core: the whole command line, driving
//! that core (`src/bin/my-rehearsal.rs` is `fn main() -> ExitCode { main_with(&MyCore) }`);
//! the `rehearsal` binary is `main_with(&Builtin)`. What the core's
//! [`Capabilities`](crate::sut::Capabilities) lack decides what runs: `run` refuses such a
//! file (bad input, naming what is missing), `fuzz` draws from the family the core has and
//! counts the cases it skips. `serve` and `drive` run no linked core, so they ignore it.

mod coverage;
mod drive;
mod fuzz;
mod new;
mod record;
mod report;
mod run;
mod schema;
mod serve;
mod style;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use crate::generate::Family;
use crate::jobs;
use crate::sut::SystemUnderTest;

#[doc(hidden)]
pub use run::{Found, collect, is_scenario_text};
#[doc(hidden)]
pub use style::{ColorChoice, Terminal};

/// How a command ended, as an exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// 0: everything passed.
    Passed = 0,
    /// 1: a scenario failed.
    Failed = 1,
    /// 2: bad input or usage.
    BadInput = 2,
    /// 3: something panicked inside a run (a bug in the core or in rehearsal, reported with
    /// the message and the place); the other files still ran.
    Internal = 3,
    /// 4: the system under test could not be run (`serve`: no request arrived; `drive`: the
    /// runtime was not found or failed to start): no verdict on a rule.
    NotRun = 4,
    /// 130: interrupted (Ctrl-C, SIGTERM, SIGHUP) before it was done, as shells report SIGINT.
    Interrupted = 130,
}

/// rehearsal: deterministic simulation and testing of agent orchestration rules.
#[derive(Parser, Debug)]
#[command(name = "rehearsal", version, about, after_help = TOP_AFTER_HELP)]
#[doc(hidden)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The options of `rehearsal run`.
#[derive(clap::Args, Debug)]
struct RunArgs {
    /// Scenario files or folders.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Print each scenario's trace.
    #[arg(long)]
    trace: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// What a JUnit case's `time` is: the wall seconds the scenario took to run (what every
    /// JUnit consumer sums), or its virtual time (the same in every run: a byte-identical
    /// report). The other is kept as a property either way.
    #[arg(long, value_enum, value_name = "CLOCK", default_value_t = JunitTime::Wall)]
    junit_time: JunitTime,
    /// Name every oracle a verdict judged from the model's side was judged by (without it,
    /// their count).
    #[arg(long)]
    verbose: bool,
    /// Also run each scenario under K seeded orders of same-instant events (seeds 1 to K),
    /// checking everything in each: oracles, expectations, request checks, the script's use
    /// (except what the file marks `order_dependent`).
    #[arg(long, value_name = "K", default_value_t = 0)]
    explore: u32,
    /// Run only the tie order of this seed, checking everything in it (to replay a failing
    /// order `--explore` found).
    #[arg(long, value_name = "SEED", conflicts_with = "explore")]
    explore_seed: Option<u64>,
    /// What judges each run: the core's events (`events`, the default), or the model's side
    /// alone (`model-side`): the events and aliases are hidden, each request is attributed
    /// from what a model endpoint sees, the model-side oracles judge, and the attribution is
    /// compared with the aliases the core reported.
    #[arg(long, value_enum, default_value_t = JudgeArg::Events)]
    judge: JudgeArg,
    /// Threads that run scenario files (default: the number of cores). Each run keeps its
    /// own paused clock, so verdicts and output are the same for any number.
    #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    jobs: Option<u16>,
    /// Draw the run as a timeline into FILE: SVG, or an HTML page beside the text trace
    /// when FILE ends in `.html`. Needs exactly one scenario file.
    #[arg(long, value_name = "FILE")]
    timeline: Option<PathBuf>,
    /// Compare each scenario's trace with its golden file in DIR (`<path under the folder
    /// given, / as __>.snap`, insta's format). A missing or different trace fails the scenario
    /// and is written beside it as `.snap.new`, for `cargo insta review` or `--accept`. Files
    /// that would share a golden file (`x/s.json` and `y/s.json` named apart) are refused.
    #[arg(long, value_name = "DIR")]
    snapshots: Option<PathBuf>,
    /// With --snapshots: write every trace as its golden file instead of failing.
    #[arg(long, requires = "snapshots")]
    accept: bool,
    /// Run only the scenarios whose name contains PATTERN, or matches it whole when it holds
    /// a `*` (any text) or `?` (one character). Repeat to run what any of them matches.
    #[arg(long, value_name = "PATTERN")]
    filter: Vec<String>,
    /// Print only failures, errors and the summary.
    #[arg(long, short = 'q')]
    quiet: bool,
    /// When to colour the text report (PASS/FAIL, error prefixes, summary counts). `auto`
    /// colours a terminal unless NO_COLOR is set; JSON and JUnit are never coloured.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = ColorChoice::Auto)]
    color: ColorChoice,
    /// Print the rule coverage: per clause of docs/rules/, how many passing scenarios
    /// exercised it (measured from each run's trace) and one of them.
    #[arg(long)]
    coverage: bool,
    /// List every clause of docs/rules/ in the coverage table and records, also those the
    /// files did not reach (the default lists only the reached ones and counts the rest;
    /// --coverage-min and --require-coverage imply it). Implies --coverage.
    #[arg(long)]
    coverage_all: bool,
    /// Fail (exit 1) unless the passing scenarios exercised at least PERCENT of the
    /// measurable clauses; 100 fails on any unhit clause. Implies --coverage.
    #[arg(long, value_name = "PERCENT", value_parser = clap::value_parser!(u8).range(0..=100))]
    coverage_min: Option<u8>,
    /// Fail (exit 1) unless the passing scenarios exercised every clause FILE lists (one id
    /// per line, `#` comments, `bub.cap.*` for an area). Implies --coverage.
    #[arg(long, value_name = "FILE")]
    require_coverage: Option<PathBuf>,
    /// Let files set limits up to 16 times the hard ceilings (`max_events`, `max_text_chars`,
    /// `max_calls_per_reply`) and give each run 16 times the run budget. Prints a warning: a
    /// run may then take far more time and memory than the defaults allow.
    #[arg(long)]
    raise_ceilings: bool,
}

/// By how much `--raise-ceilings` multiplies the ceilings and the run budget.
const RAISED_CEILINGS: usize = 16;

#[derive(Subcommand, Debug)]
enum Command {
    /// Run scenario files (or folders of them, recursively) and print a verdict for each.
    #[command(after_help = RUN_AFTER_HELP)]
    Run(RunArgs),
    /// Run generated scenarios against every oracle; shrink the first violation to a minimal
    /// scenario file and print the command that replays it.
    #[command(after_help = FUZZ_AFTER_HELP)]
    Fuzz {
        /// How many scenarios to generate [default: 1000, 100 with --runtime, or no limit with
        /// --time].
        #[arg(long, value_name = "N")]
        cases: Option<u64>,
        /// Root seed of every draw; the same seed generates the same cases.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Seeded tie orders to try per case, besides the default one.
        #[arg(long, value_name = "K", default_value_t = 0)]
        explore: u32,
        /// Which rule sets to draw from.
        #[arg(long, value_enum, default_value_t = FamilyArg::Any)]
        family: FamilyArg,
        /// What judges each case: the core's events, or the model's side alone (as `run
        /// --judge`). Judged from the model's side, cases also draw the shapes that make its
        /// rules visible (docs/fuzzing.md); judged from events, a seed draws the cases it
        /// always drew.
        /// [default: events; model-side with --runtime, the only judge of a runtime in another
        /// process]
        #[arg(long, value_enum)]
        judge: Option<JudgeArg>,
        /// Where to write the minimal scenario of a finding.
        #[arg(long, default_value = "fuzz-findings")]
        out: PathBuf,
        /// Most shrinking steps.
        #[arg(long, default_value_t = 4096)]
        shrink_steps: u32,
        /// Threads that run cases (default and most: the number of cores; never more than the
        /// cases). The report, the finding and its shrunk file are the same for any number.
        #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
        jobs: Option<u16>,
        /// Stop starting cases after this long (`30s`, `10m`, `1h30m`) and report the cases
        /// run. With --cases too, whichever comes first.
        #[arg(long, value_name = "DURATION", value_parser = positive_duration)]
        time: Option<humantime::Duration>,
        /// Run only shard I of N (from 1): case C belongs to shard C % N + 1, so N machines
        /// with the same seed and --cases run disjoint cases that together make the whole
        /// campaign.
        #[arg(long, value_name = "I/N")]
        shard: Option<crate::fuzz::Shard>,
        /// How often to print a progress line when stderr is not a terminal (a terminal gets
        /// a progress bar).
        #[arg(long, value_name = "DURATION", value_parser = positive_duration,
              default_value_t = humantime::Duration::from(fuzz::PROGRESS_EVERY))]
        progress_every: humantime::Duration,
        /// A runtime in another process to fuzz instead of the linked core.
        #[command(flatten)]
        outside: fuzz::runtime::OutsideArgs,
    },
    /// Play a scenario's script as an OpenAI-compatible model on 127.0.0.1 for a runtime in
    /// another process; judge the run by the model-side oracles when the script ends.
    #[command(after_help = serve::SERVE_AFTER_HELP)]
    Serve(serve::ServeArgs),
    /// Play each scenario's script as the model for a runtime's command, run once per user
    /// turn in its own process group and temp home; judge the run and the command's output.
    #[command(after_help = drive::DRIVE_AFTER_HELP)]
    Drive(drive::DriveArgs),
    /// Record a real run as a scenario: forward the runtime's requests to an upstream model,
    /// write what it answered (secrets blanked), and judge the recording.
    #[command(after_help = record::RECORD_AFTER_HELP)]
    Record(record::RecordArgs),
    /// Print the JSON Schema of scenario files (for editors; committed as
    /// docs/scenario.schema.json).
    #[command(after_help = SCHEMA_AFTER_HELP)]
    Schema,
    /// Write NAME.json, a commented starting scenario that passes; never overwrites a file.
    #[command(after_help = NEW_AFTER_HELP)]
    New {
        /// The scenario's name; the file is NAME.json.
        name: PathBuf,
        /// Which family it shows: Roku's foreground `Agent`, or Bub's background `subagent`.
        #[arg(long, value_enum, default_value_t = new::Preset::Roku)]
        preset: new::Preset,
    },
}

/// `rehearsal --help`'s closing part: what each command exits with.
const TOP_AFTER_HELP: &str = "\
Exit codes (each command's --help says what they mean for it):
  0    passed: no rule broken
  1    a rule was broken (a scenario failed, a fuzz finding, a recording that broke a rule)
  2    bad input or usage
  3    internal error (a bug of rehearsal's or of the core, reported with its place)
  4    serve, drive, record: the system under test could not be run
  130  fuzz, drive: interrupted (Ctrl-C, SIGTERM, SIGHUP) before it was done";

/// `rehearsal schema --help`'s closing part.
const SCHEMA_AFTER_HELP: &str = "\
Exit codes:
  0    the schema was printed
  2    bad usage";

/// `rehearsal new --help`'s closing part.
const NEW_AFTER_HELP: &str = "\
Exit codes:
  0    NAME.json was written
  2    bad usage, or NAME.json exists (never overwritten) or cannot be written";

/// `rehearsal run --help`'s closing part: the exit codes.
const RUN_AFTER_HELP: &str = "\
Folders are walked for *.json files that are scenarios: a JSON object with a top-level
\"lanes\" or \"turns\" key (a file that is not valid JSON counts when its text names one of
them, so a broken scenario is reported, never skipped). Other *.json files (package.json,
data fixtures) are skipped with a note. A file named on the command line is always run.

Exit codes (the most serious among the files; every file runs and the summary is printed):
  0    every scenario passed (and the rule coverage asked for was met)
  1    a scenario failed (an expectation, an oracle, determinism, or a stop such as the
       horizon), or --coverage-min / --require-coverage was not met
  2    bad input or usage: an unreadable or invalid file, a missing path, no scenario file
       found, a --filter that matches no scenario, a bad --require-coverage file
  3    internal error: something panicked inside a run (message and place in the report)";

/// `rehearsal fuzz --help`'s closing part: the exit codes.
const FUZZ_AFTER_HELP: &str = "\
Exit codes:
  0    no finding: every case ran, or the time limit ended the campaign
  1    a finding (written to --out), however the campaign ended
  2    bad usage (also --cases 0, a shard with no case, a --out no finding could be
       written to: all refused before the first case), or the finding could not be written
  130  interrupted (Ctrl-C) with no finding; a second Ctrl-C exits at once

Ctrl-C stops starting cases, finishes the ones in flight (or cuts a finding's shrinking
short) and prints the summary.";

/// A duration for `--time`, `--progress-every` and every limit: humantime's syntax, above zero,
/// at most ten years.
fn positive_duration(text: &str) -> Result<humantime::Duration, String> {
    let duration = duration(text)?;
    if duration.is_zero() { Err("must be longer than zero".to_string()) } else { Ok(duration) }
}

/// A duration that may be zero, at most ten years: a clock cannot be asked to wait longer
/// (an instant that far ahead overflows), and no run means it.
fn duration(text: &str) -> Result<humantime::Duration, String> {
    const TEN_YEARS: std::time::Duration = std::time::Duration::from_secs(10 * 365 * 24 * 3_600);
    let duration: humantime::Duration = text.parse().map_err(|e| format!("{e} (write e.g. 30s, 10m, 1h30m)"))?;
    if *duration > TEN_YEARS { Err("must be at most ten years".to_string()) } else { Ok(duration) }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum FamilyArg {
    Any,
    Roku,
    Bub,
}

/// What a JUnit case's `time` holds (`--junit-time`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum JunitTime {
    /// The wall seconds the scenario took.
    Wall,
    /// The run's virtual seconds: the same in every run.
    Virtual,
}

/// How `rehearsal run` reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Format {
    /// A verdict line per scenario, its failures, then a summary line.
    Text,
    /// A JSON object per scenario (JSON lines).
    Json,
    /// A JUnit XML report (one test case per scenario), for CI systems.
    Junit,
}

/// Runs the command line on the built-in core and returns the exit code, writing to `out` and `err` as to
/// streams that are not terminals (no colour under `--color auto`, no progress bar).
#[doc(hidden)]
pub fn main(cli: Cli, out: &mut dyn Write, err: &mut dyn Write) -> Exit {
    execute(cli, crate::runner::Runner::new().sut(), out, err, Terminal::default())
}

/// The whole `rehearsal` command line driving `core`: parses the process's arguments, runs the
/// command on `core`, writes to standard output and error, and returns the exit code
/// ([`Exit`]; clap's own 0 for `--help` and 2 for a usage error). Standard output's first
/// write error is kept: a reader that stopped (`| head`) is no error, any other makes the
/// outcome at least [`Exit::BadInput`].
///
/// ```no_run
/// use std::process::ExitCode;
/// # use rehearsal::core::Builtin as MyCore;
///
/// fn main() -> ExitCode {
///     rehearsal::cli::main_with(&MyCore)
/// }
/// ```
pub fn main_with(core: &dyn SystemUnderTest) -> ExitCode {
    // `drive` and `record` start runtimes: their leftovers are re-parented here, to be killed
    // and reaped (crate::wire::process).
    crate::wire::process::become_subreaper();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            // clap exits 0 for --help and --version, 2 for usage errors.
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let terminal = Terminal::detect();
    let mut out = Checked { inner: std::io::stdout().lock(), failed: None };
    let mut code = execute(cli, core, &mut out, &mut std::io::stderr().lock(), terminal) as u8;
    let _ = out.flush();
    match out.failed {
        // A reader that stopped reading (`| head`) wanted no more: not an error.
        Some(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        Some(e) => {
            // `> /dev/full` must not exit 0 with nothing said. The report is lost, so the
            // outcome is bad usage (2) unless something worse already happened.
            eprintln!("error: cannot write the report to standard output: {e}");
            code = code.max(Exit::BadInput as u8);
        }
        None => {}
    }
    ExitCode::from(code)
}

/// Standard output, keeping the first write error: the commands write their reports without
/// stopping at a failed write, and the exit code says it at the end.
struct Checked<W> {
    inner: W,
    failed: Option<std::io::Error>,
}

impl<W: Write> Write for Checked<W> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.inner.write(bytes).inspect_err(|e| self.keep(e))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush().inspect_err(|e| self.keep(e))
    }
}

impl<W> Checked<W> {
    fn keep(&mut self, e: &std::io::Error) {
        if self.failed.is_none() {
            self.failed = Some(std::io::Error::new(e.kind(), e.to_string()));
        }
    }
}

/// A parsed command line run on `core`, told which of `out` and `err` are terminals: what
/// [`main_with`] does after parsing, for tests that give their own writers.
#[doc(hidden)]
pub fn execute(
    cli: Cli,
    core: &dyn SystemUnderTest,
    out: &mut dyn Write,
    err: &mut dyn Write,
    terminal: Terminal,
) -> Exit {
    match cli.command {
        Command::Run(args) => {
            if args.raise_ceilings {
                crate::scenario::raise_ceilings(RAISED_CEILINGS);
                let c = crate::scenario::ceilings();
                let _ = writeln!(
                    err,
                    "warning: --raise-ceilings: files may set limits.max_events up to {}, limits.max_text_chars up to {} and limits.max_calls_per_reply up to {}, and a run may produce {} bytes of text; a run may take far more time and memory",
                    c.max_events, c.max_text_chars, c.max_calls_per_reply, c.run_text_bytes
                );
            }
            run::run(&args, core, out, err, terminal)
        }
        Command::Fuzz {
            cases,
            seed,
            explore,
            family,
            out: dir,
            shrink_steps,
            jobs,
            time,
            shard,
            progress_every,
            judge,
            outside,
        } => {
            if outside.chosen().is_some() {
                // Each case waits on a process: more at once than cores is fine, within reason.
                let jobs = jobs.map_or_else(jobs::default_jobs, usize::from).min(64);
                let campaign = fuzz::runtime::Campaign {
                    outside: &outside,
                    cases: cases.unwrap_or(if time.is_some() { u64::MAX } else { 100 }),
                    seed,
                    jobs,
                    shard: shard.unwrap_or_default(),
                    time: time.map(Into::into),
                    progress_every: progress_every.into(),
                    model_side: judge != Some(JudgeArg::Events),
                };
                return fuzz::runtime::command(&campaign, &dir, out, err);
            }
            if let Some(why) = outside.without_runtime() {
                let _ = writeln!(err, "error: {why}");
                return Exit::BadInput;
            }
            // At most one thread per core: a case is all computation, so more threads only
            // cost memory (`-j 33000` would abort). `run_campaign` caps them at the cases.
            let jobs = jobs.map_or_else(jobs::default_jobs, usize::from).min(jobs::default_jobs());
            let asked = match family {
                FamilyArg::Any => Family::Any,
                FamilyArg::Roku => Family::Roku,
                FamilyArg::Bub => Family::Bub,
            };
            let family = match crate::fuzz::family_for(asked, core.capabilities()) {
                Ok(family) => family,
                Err(why) => {
                    let _ = writeln!(err, "error: {why} (core `{}`)", crate::trace::printable(core.name()));
                    return Exit::BadInput;
                }
            };
            let cases = cases.unwrap_or(if time.is_some() { u64::MAX } else { 1000 });
            let judge = match judge.unwrap_or(JudgeArg::Events) {
                JudgeArg::Events => crate::oracles::model_side::Judge::Events,
                JudgeArg::ModelSide => crate::oracles::model_side::Judge::ModelSide,
            };
            let options = crate::fuzz::Options { cases, seed, explore, family, shrink_steps, jobs, judge };
            let campaign = fuzz::Campaign {
                options,
                shard: shard.unwrap_or_default(),
                time: time.map(Into::into),
                progress_every: progress_every.into(),
            };
            fuzz::fuzz_command(&campaign, core, &dir, out, err)
        }
        Command::Serve(args) => serve::serve(&args, out, err, terminal),
        Command::Drive(args) => drive::drive(&args, out, err, terminal),
        Command::Record(args) => record::record(&args, out, err, terminal),
        Command::Schema => schema::schema(out),
        Command::New { name, preset } => new::new(&name, preset, out, err),
    }
}

/// `--judge`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum JudgeArg {
    /// The core's events.
    Events,
    /// The model's side alone.
    ModelSide,
}

/// Which tie orders `run` checks besides (or instead of) the default.
#[derive(Clone, Copy, Debug)]
struct Orders {
    explore: u32,
    seed: Option<u64>,
}

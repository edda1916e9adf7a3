//! The command line: `rehearsal run` ([`run`]: files, golden traces, reports, rule coverage),
//! `rehearsal fuzz` ([`fuzz`](mod@fuzz)), and for authors `rehearsal new` and
//! `rehearsal schema`. `main.rs` only maps the outcome to an exit code.

mod coverage;
mod fuzz;
mod new;
mod report;
mod run;
mod schema;
mod style;

use std::io::Write;
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::generate::Family;
use crate::jobs;

pub use run::{Found, collect, is_scenario_text};
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
    /// 130: interrupted (Ctrl-C) before it was done, as shells report SIGINT.
    Interrupted = 130,
}

/// rehearsal: deterministic simulation and testing of agent orchestration rules.
#[derive(Parser, Debug)]
#[command(name = "rehearsal", version, about)]
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
    /// and is written beside it as `.snap.new`, for `cargo insta review` or `--accept`.
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
        /// How many scenarios to generate [default: 1000, or no limit with --time].
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
        /// --judge`).
        #[arg(long, value_enum, default_value_t = JudgeArg::Events)]
        judge: JudgeArg,
        /// Where to write the minimal scenario of a finding.
        #[arg(long, default_value = "fuzz-findings")]
        out: PathBuf,
        /// Most shrinking steps.
        #[arg(long, default_value_t = 4096)]
        shrink_steps: u32,
        /// Threads that run cases (default: the number of cores). The report, the finding and
        /// its shrunk file are the same for any number.
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
    },
    /// Print the JSON Schema of scenario files (for editors; committed as
    /// docs/scenario.schema.json).
    Schema,
    /// Write NAME.json, a commented starting scenario that passes; never overwrites a file.
    New {
        /// The scenario's name; the file is NAME.json.
        name: PathBuf,
        /// Which family it shows: Roku's foreground `Agent`, or Bub's background `subagent`.
        #[arg(long, value_enum, default_value_t = new::Preset::Roku)]
        preset: new::Preset,
    },
}

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
  2    bad usage, or the finding could not be written
  130  interrupted (Ctrl-C) with no finding; a second Ctrl-C exits at once

Ctrl-C stops starting cases, finishes the ones in flight (or cuts a finding's shrinking
short) and prints the summary.";

/// A duration for `--time` and `--progress-every`: humantime's syntax, above zero.
fn positive_duration(text: &str) -> Result<humantime::Duration, String> {
    let duration: humantime::Duration = text.parse().map_err(|e| format!("{e} (write e.g. 30s, 10m, 1h30m)"))?;
    if duration.is_zero() { Err("must be longer than zero".to_string()) } else { Ok(duration) }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum FamilyArg {
    Any,
    Roku,
    Bub,
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

/// Runs the command line and returns the exit code, writing to `out` and `err` as to
/// streams that are not terminals (no colour under `--color auto`, no progress bar).
pub fn main(cli: Cli, out: &mut dyn Write, err: &mut dyn Write) -> Exit {
    main_with(cli, out, err, Terminal::default())
}

/// [`main`], told which of `out` and `err` are terminals (the binary passes
/// [`Terminal::detect`]).
pub fn main_with(cli: Cli, out: &mut dyn Write, err: &mut dyn Write, terminal: Terminal) -> Exit {
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
            run::run(&args, out, err, terminal)
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
        } => {
            let jobs = jobs.map_or_else(jobs::default_jobs, usize::from);
            let family = match family {
                FamilyArg::Any => Family::Any,
                FamilyArg::Roku => Family::Roku,
                FamilyArg::Bub => Family::Bub,
            };
            let cases = cases.unwrap_or(if time.is_some() { u64::MAX } else { 1000 });
            let judge = match judge {
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
            fuzz::fuzz_command(&campaign, &dir, out, err)
        }
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

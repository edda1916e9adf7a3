//! The command line: `rehearsal run` and its report. `main.rs` only maps the outcome to an
//! exit code.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand, ValueEnum};
use serde_json::json;

use crate::fuzz;
use crate::generate::Family;
use crate::jobs;
use crate::runner::{self, Verdict};
use crate::scenario::ScenarioError;

/// How a command ended, as an exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// 0: everything passed.
    Passed = 0,
    /// 1: a scenario failed.
    Failed = 1,
    /// 2: bad input or usage.
    BadInput = 2,
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
    /// Also run each scenario under K seeded orders of same-instant events, checking every
    /// oracle in each (expectations describe the default order and are not checked there).
    #[arg(long, value_name = "K", default_value_t = 0)]
    explore: u32,
    /// Run only the tie order of this seed (to replay a failing order `--explore` found).
    #[arg(long, value_name = "SEED", conflicts_with = "explore")]
    explore_seed: Option<u64>,
    /// Threads that run scenario files (default: the number of cores). Each run keeps its
    /// own paused clock, so verdicts and output are the same for any number.
    #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    jobs: Option<u16>,
    /// Draw the run as a timeline into FILE: SVG, or an HTML page beside the text trace
    /// when FILE ends in `.html`. Needs exactly one scenario file.
    #[arg(long, value_name = "FILE")]
    timeline: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run scenario files (or folders of them, recursively) and print a verdict for each.
    Run(RunArgs),
    /// Run generated scenarios against every oracle; shrink the first violation to a minimal
    /// scenario file and print the command that replays it.
    Fuzz {
        /// How many scenarios to generate.
        #[arg(long, default_value_t = 1000)]
        cases: u64,
        /// Root seed of every draw; the same seed generates the same cases.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Seeded tie orders to try per case, besides the default one.
        #[arg(long, value_name = "K", default_value_t = 0)]
        explore: u32,
        /// Which rule sets to draw from.
        #[arg(long, value_enum, default_value_t = FamilyArg::Any)]
        family: FamilyArg,
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
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum FamilyArg {
    Any,
    Roku,
    Bub,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Format {
    Text,
    Json,
}

/// Every `*.json` file under the given paths, each folder's files sorted by path.
pub fn collect(paths: &[PathBuf]) -> Result<Vec<PathBuf>, ScenarioError> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            walk(path, &mut files)?;
        } else if path.exists() {
            files.push(path.clone());
        } else {
            return Err(ScenarioError::Io { path: path.clone(), message: "no such file or folder".into() });
        }
    }
    Ok(files)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), ScenarioError> {
    let io = |e: std::io::Error| ScenarioError::Io { path: dir.to_path_buf(), message: e.to_string() };
    let mut entries: Vec<PathBuf> =
        std::fs::read_dir(dir).map_err(io)?.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if name.starts_with('.') {
            continue;
        }
        if path.is_dir() {
            walk(&path, out)?;
        } else if name.ends_with(".json") {
            out.push(path);
        }
    }
    Ok(())
}

/// Runs the command line and returns the exit code.
pub fn main(cli: Cli, out: &mut dyn Write, err: &mut dyn Write) -> Exit {
    match cli.command {
        Command::Run(args) => run(&args, out, err),
        Command::Fuzz { cases, seed, explore, family, out: dir, shrink_steps, jobs } => {
            let jobs = jobs.map_or_else(jobs::default_jobs, usize::from);
            let family = match family {
                FamilyArg::Any => Family::Any,
                FamilyArg::Roku => Family::Roku,
                FamilyArg::Bub => Family::Bub,
            };
            let options = fuzz::Options { cases, seed, explore, family, shrink_steps, jobs };
            fuzz_command(&options, &dir, out, err)
        }
    }
}

/// Which tie orders `run` checks besides (or instead of) the default.
#[derive(Clone, Copy, Debug)]
struct Orders {
    explore: u32,
    seed: Option<u64>,
}

fn fuzz_command(options: &fuzz::Options, dir: &Path, out: &mut dyn Write, err: &mut dyn Write) -> Exit {
    let bar = indicatif::ProgressBar::new(options.cases);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} cases, {per_sec}, eta {eta}")
            .expect("a valid template"),
    );
    // The wall clock measures the fuzzer's rate for the user; no run reads it.
    let started = std::time::Instant::now();
    let report = fuzz::run(options, |n| bar.set_position(n));
    let threads = if options.jobs == 1 { "one core".to_string() } else { format!("{} threads", options.jobs) };
    bar.finish_and_clear();
    let seconds = started.elapsed().as_secs_f64();
    let rate = report.cases as f64 / seconds.max(1e-9);
    let _ = writeln!(
        out,
        "{} cases in {seconds:.2} s ({rate:.0} cases/s on {threads}), {} finding(s), {} invalid case(s)",
        report.cases,
        u8::from(report.finding.is_some()),
        report.invalid
    );
    for (count, example) in report.invalid_reasons.values() {
        let _ = writeln!(out, "  invalid ({count}), e.g.: {example}");
    }
    let Some(finding) = report.finding else { return Exit::Passed };
    for violation in &finding.violations {
        let _ = writeln!(out, "  - {violation}");
    }
    match fuzz::write(&finding, options.seed, dir) {
        Ok(path) => {
            let _ = writeln!(out, "minimal scenario: {}", path.display());
            let order = finding.schedule.seed().map(|s| format!(" --explore-seed {s}")).unwrap_or_default();
            let _ = writeln!(out, "replay: rehearsal run {}{order}", path.display());
        }
        Err(e) => {
            let _ = writeln!(err, "error: cannot write the finding to {}: {e}", dir.display());
            return Exit::BadInput;
        }
    }
    Exit::Failed
}

fn run(args: &RunArgs, out: &mut dyn Write, err: &mut dyn Write) -> Exit {
    let (paths, show_trace, format) = (&args.paths, args.trace, args.format);
    let orders = Orders { explore: args.explore, seed: args.explore_seed };
    let jobs = args.jobs.map_or_else(jobs::default_jobs, usize::from);
    let timeline = args.timeline.as_deref();
    let files = match collect(paths) {
        Ok(files) => files,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            return Exit::BadInput;
        }
    };
    if timeline.is_some() && files.len() != 1 {
        let _ =
            writeln!(err, "error: --timeline draws one run: give exactly one scenario file ({} given)", files.len());
        return Exit::BadInput;
    }
    let (mut passed, mut failed, mut bad) = (0, 0, 0);
    // Threads go to files first; with fewer files than threads, the two runs of each
    // verification take two.
    let mut runner = runner::Runner::new().parallel(files.len() < jobs).explore(orders.explore);
    if let Some(seed) = orders.seed {
        runner = runner.only_order(seed);
    }
    jobs::ordered(
        &files,
        jobs,
        |file| runner.check_file(file),
        |i, verified| {
            let file = &files[i];
            match verified {
                Err(e) => {
                    bad += 1;
                    let _ = writeln!(err, "error: {e}");
                    if format == Format::Json {
                        let _ =
                            writeln!(out, "{}", json!({"file": file, "verdict": "bad_input", "error": e.to_string()}));
                    }
                }
                Ok((scenario, verdict)) => {
                    if verdict.passed() {
                        passed += 1
                    } else {
                        failed += 1
                    }
                    match format {
                        Format::Text => report_text(out, file, &verdict, show_trace),
                        Format::Json => report_json(out, file, &scenario.name, &verdict, show_trace),
                    }
                    if let Some(path) = timeline
                        && let Err(e) = crate::timeline::write(path, &scenario.name, &verdict.run.trace)
                    {
                        bad += 1;
                        let _ = writeln!(err, "error: cannot write the timeline {}: {e}", path.display());
                    }
                }
            }
        },
    );
    if format == Format::Text {
        let bad_note = if bad > 0 { format!(", {bad} bad input") } else { String::new() };
        let _ = writeln!(out, "{passed} passed, {failed} failed{bad_note}");
    }
    if bad > 0 {
        Exit::BadInput
    } else if failed > 0 {
        Exit::Failed
    } else {
        Exit::Passed
    }
}

fn report_text(out: &mut dyn Write, file: &Path, verdict: &Verdict, show_trace: bool) {
    let _ = write!(out, "{}", verdict.report(Some(file)));
    if show_trace {
        for line in verdict.run.trace.lines() {
            let _ = writeln!(out, "    {line}");
        }
    }
}

fn report_json(out: &mut dyn Write, file: &Path, name: &str, verdict: &Verdict, show_trace: bool) {
    let run = &verdict.run;
    let failures: Vec<_> = verdict.failures.iter().map(|f| json!({"what": f.what, "lines": f.lines})).collect();
    let mut report = json!({
        "file": file,
        "name": name,
        "verdict": if verdict.passed() { "pass" } else { "fail" },
        "failures": failures,
        "events": run.trace.entries.len(),
        "elapsed_ms": run.elapsed.as_millis() as u64,
    });
    if show_trace {
        report["trace"] = run.trace.entries.iter().map(|e| e.json()).collect();
    }
    let _ = writeln!(out, "{report}");
}

//! `rehearsal fuzz --runtime NAME -- CMD ...`: the campaign of [`crate::wire::fuzz`] against a
//! runtime in another process, its progress off the campaign's thread, and its summary: cases a
//! minute, the invalid and stopped cases with an example of each reason, the clauses reached and
//! the oracles that fired, and a finding with its shrinking, its replays and the `rehearsal
//! drive` command that replays it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::super::Exit;
use super::{INTERRUPTS, Live, watch_interrupts, writable_folder};
use crate::fuzz::{Ended, Shard, Stop, Tally};
use crate::trace::printable;
use crate::wire::drive::{ClockDrive, DriveOptions};
use crate::wire::fuzz::{self, Options, Report, Target};
use crate::wire::runtime::RuntimeDescription;

/// The options of `fuzz` that fuzz a runtime in another process.
#[derive(clap::Args, Debug, Default)]
pub(in crate::cli) struct OutsideArgs {
    /// Fuzz a runtime in another process instead of the linked core: a built-in description
    /// (bub, py-runtime, roku, generic, pydantic-ai, openai-agents, smolagents) or a
    /// description `.json` file (docs/runtimes.md). Its command follows `--`.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["runtime_file", "explore", "family"])]
    pub(in crate::cli) runtime: Option<String>,
    /// A runtime description file; the same as `--runtime FILE.json`.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["explore", "family"])]
    pub(in crate::cli) runtime_file: Option<PathBuf>,
    /// With --runtime: drive each case on the harness's virtual time (as `drive --clock`):
    /// time limits and latencies cost nothing, and a runtime that follows the clock gives the
    /// same verdict every time. Off the clock, cases draw no time limit and small latencies.
    #[arg(long)]
    pub(in crate::cli) clock: bool,
    /// With --clock: the clock shim's folder (as `drive --clock-shim`).
    #[arg(long, value_name = "DIR", requires = "clock")]
    pub(in crate::cli) clock_shim: Option<PathBuf>,
    /// With --runtime: the wall-clock limit of one turn's command.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = super::super::positive_duration)]
    pub(in crate::cli) turn_limit: humantime::Duration,
    /// With --runtime: how many times the shrunk finding is driven again; one that does not
    /// fail every time is reported as flaky, with its rate.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub(in crate::cli) replays: u32,
    /// With --runtime: the most runs spent shrinking a finding (cached candidates are free).
    #[arg(long, value_name = "N", default_value_t = 400)]
    pub(in crate::cli) shrink_runs: u32,
    /// With --runtime: the runtime's command and its arguments, after `--` (placeholders as
    /// `drive` fills them: `{message}`, `{turn}`, `{session}`, `{home}`, `{workdir}`).
    #[arg(last = true, value_name = "CMD")]
    pub(in crate::cli) command: Vec<String>,
}

impl OutsideArgs {
    /// The runtime named, if any.
    pub(in crate::cli) fn chosen(&self) -> Option<String> {
        match (&self.runtime_file, &self.runtime) {
            (Some(file), _) => Some(file.to_string_lossy().into_owned()),
            (None, Some(name)) => Some(name.clone()),
            (None, None) => None,
        }
    }

    /// Why these options are wrong without `--runtime`, if any is given.
    pub(in crate::cli) fn without_runtime(&self) -> Option<&'static str> {
        if !self.command.is_empty() {
            Some("a command after `--` is a runtime's: give --runtime NAME (or --runtime-file) to fuzz it")
        } else if self.clock {
            Some("--clock drives a runtime in another process: give --runtime NAME")
        } else {
            None
        }
    }
}

/// The campaign as the command line sets it up.
pub(in crate::cli) struct Campaign<'a> {
    pub(in crate::cli) outside: &'a OutsideArgs,
    pub(in crate::cli) cases: u64,
    pub(in crate::cli) seed: u64,
    pub(in crate::cli) jobs: usize,
    pub(in crate::cli) shard: Shard,
    pub(in crate::cli) time: Option<Duration>,
    pub(in crate::cli) progress_every: Duration,
    pub(in crate::cli) model_side: bool,
}

/// Runs the campaign and prints its summary.
pub(in crate::cli) fn command(campaign: &Campaign<'_>, dir: &Path, out: &mut dyn Write, err: &mut dyn Write) -> Exit {
    let args = campaign.outside;
    let Some(chosen) = args.chosen() else {
        let _ = writeln!(err, "error: no runtime given");
        return Exit::BadInput;
    };
    if !campaign.model_side {
        let _ = writeln!(
            err,
            "error: --judge events: a runtime in another process has no events to judge; it is judged from the model's side (--judge model-side, the default with --runtime)"
        );
        return Exit::BadInput;
    }
    if args.command.is_empty() {
        let _ = writeln!(err, "error: --runtime {}: give the runtime's command after `--`", printable(&chosen));
        return Exit::BadInput;
    }
    if campaign.cases == 0 {
        let _ = writeln!(err, "error: --cases 0 runs no case: a campaign that cannot fail (give at least 1)");
        return Exit::BadInput;
    }
    if campaign.shard.size(campaign.cases) == 0 {
        let _ = writeln!(
            err,
            "error: shard {} holds none of the {} cases (case C is in shard C % N + 1): give at least {} cases, or fewer shards",
            campaign.shard,
            campaign.cases,
            campaign.shard.count()
        );
        return Exit::BadInput;
    }
    if let Err(why) = writable_folder(dir) {
        let _ = writeln!(err, "error: --out {}: {why}", printable(&dir.to_string_lossy()));
        return Exit::BadInput;
    }
    let description = match RuntimeDescription::load(&chosen) {
        Ok(d) => d,
        Err(e) => {
            let _ = writeln!(err, "error: --runtime: {e}");
            return Exit::BadInput;
        }
    };
    let clock = if args.clock {
        match crate::wire::drive::find_clock_shim(args.clock_shim.as_deref()) {
            Ok(shim) => Some(ClockDrive::new(shim)),
            Err(why) => {
                let _ = writeln!(err, "error: --clock: {why}");
                return Exit::BadInput;
            }
        }
    } else {
        None
    };
    watch_interrupts();
    // The drive's own interrupt flag kills a running command at once on Ctrl-C.
    let interrupt = Arc::new(AtomicBool::new(false));
    let target = Target {
        description,
        drive: DriveOptions {
            command: args.command.clone(),
            // Off the clock the scripted latencies are the case's small ones, waited in full.
            time_scale: 1.0,
            turn_limit: args.turn_limit.into(),
            interrupt: Some(interrupt.clone()),
            clock,
            ..DriveOptions::default()
        },
    };
    let options = Options {
        cases: campaign.cases,
        seed: campaign.seed,
        jobs: campaign.jobs,
        shard: campaign.shard,
        replays: args.replays,
        shrink_runs: args.shrink_runs,
    };
    let started = Instant::now();
    let deadline = campaign.time.and_then(|time| started.checked_add(time));
    let stop = || {
        if INTERRUPTS.load(Ordering::SeqCst) > 0 {
            interrupt.store(true, Ordering::SeqCst);
            Some(Stop::Interrupted)
        } else if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            Some(Stop::TimeLimit)
        } else {
            None
        }
    };
    let live = Live::default();
    let result = std::thread::scope(|scope| {
        let (finished, wait) = mpsc::channel::<()>();
        let (stop, live, target, options) = (&stop, &live, &target, &options);
        let worker = scope.spawn(move || {
            let _finished = finished;
            fuzz::run_campaign(target, options, stop, &mut |tally| live.record(tally))
        });
        let mut next_line = started + campaign.progress_every;
        loop {
            let pause = next_line.saturating_duration_since(Instant::now());
            if let Err(mpsc::RecvTimeoutError::Disconnected) = wait.recv_timeout(pause) {
                break;
            }
            if Instant::now() >= next_line {
                let _ = writeln!(err, "{}", progress(campaign.shard, live.get(), started.elapsed()));
                while next_line <= Instant::now() {
                    next_line += campaign.progress_every;
                }
            }
        }
        worker.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    });
    let report = match result {
        Ok(report) => report,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            return match e {
                fuzz::CampaignError::NotRun(_) => Exit::NotRun,
                fuzz::CampaignError::Setup(_) => Exit::Internal,
            };
        }
    };
    summary(campaign, &target, &report, started.elapsed(), dir, out, err)
}

/// A progress line: `fuzz --runtime: 40 cases, 31 cases/min, 0 findings, 2 invalid, 77 s`.
fn progress(shard: Shard, tally: Tally, elapsed: Duration) -> String {
    let which = if shard == Shard::WHOLE { String::new() } else { format!(" (shard {shard})") };
    format!(
        "fuzz --runtime{which}: {} cases, {} cases/min, {} finding(s), {} invalid, {} s",
        tally.done,
        per_minute(tally.done, elapsed),
        tally.findings,
        tally.invalid,
        elapsed.as_secs()
    )
}

fn per_minute(cases: u64, elapsed: Duration) -> String {
    format!("{:.0}", cases as f64 * 60.0 / elapsed.as_secs_f64().max(1e-9))
}

/// The shell words of the `rehearsal drive` command that replays `file`.
fn replay_command(chosen: &str, file: &Path, clock: bool, command: &[String]) -> String {
    let mut words = vec!["rehearsal".to_string(), "drive".to_string(), file.to_string_lossy().into_owned()];
    words.push("--runtime".into());
    words.push(chosen.to_string());
    if clock {
        words.push("--clock".into());
    }
    words.push("--".into());
    words.extend(command.iter().cloned());
    words.iter().map(|w| shell_word(w)).collect::<Vec<_>>().join(" ")
}

/// `word` quoted for a POSIX shell where it needs it.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+{}".contains(c));
    if plain { word.to_string() } else { format!("'{}'", word.replace('\'', r"'\''")) }
}

fn summary(
    campaign: &Campaign<'_>,
    target: &Target,
    report: &Report,
    elapsed: Duration,
    dir: &Path,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Exit {
    let of_shard = if campaign.shard == Shard::WHOLE { String::new() } else { format!(" of shard {}", campaign.shard) };
    let ended = match report.ended {
        Ended::AllCases => "ended: all cases run".to_string(),
        Ended::Finding => format!("ended: finding at case {}", report.finding.as_ref().map_or(0, |f| f.case)),
        Ended::TimeLimit => "ended: time limit".to_string(),
        Ended::Interrupted => "ended: interrupted".to_string(),
    };
    let _ = writeln!(
        out,
        "{} cases{of_shard} of runtime `{}` in {:.1} s ({} cases/min, {} at once{}), {} finding(s), {} invalid, {} stopped; {} runs in all; {ended}",
        report.cases,
        printable(&target.description.name),
        elapsed.as_secs_f64(),
        per_minute(report.cases, elapsed),
        campaign.jobs,
        if target.drive.clock.is_some() { ", virtual time" } else { ", wall time" },
        u8::from(report.finding.is_some()),
        report.invalid,
        report.stopped,
        report.runs,
    );
    for (count, example) in report.invalid_reasons.values() {
        let _ = writeln!(out, "  invalid ({count}), e.g.: {}", printable(example));
    }
    for (count, example) in report.stopped_reasons.values() {
        let _ = writeln!(out, "  stopped, not judged ({count}), e.g.: {}", printable(example));
    }
    let measurable: Vec<usize> = crate::coverage::clauses()
        .iter()
        .enumerate()
        .filter(|(_, c)| crate::coverage::measure(c.id) == Some(crate::coverage::Measure::Detected))
        .filter(|(_, c)| !c.id.starts_with("oracle.") || c.id.starts_with("oracle.model-side."))
        .map(|(i, _)| i)
        .collect();
    let reached = measurable.iter().filter(|i| report.reached.contains(i)).count();
    let _ = writeln!(out, "  rule clauses reached: {reached} of {} measurable from the model's side", measurable.len());
    if !report.fired.is_empty() {
        let fired: Vec<String> = report.fired.iter().map(|(c, n)| format!("{c} ({n})")).collect();
        let _ = writeln!(out, "  oracles that fired: {}", fired.join(", "));
    }
    let Some(finding) = &report.finding else {
        return if report.ended == Ended::Interrupted { Exit::Interrupted } else { Exit::Passed };
    };
    let _ =
        writeln!(out, "finding: case {} of seed {} broke {}", finding.case, campaign.seed, finding.clauses.join(", "));
    for problem in &finding.problems {
        let _ = writeln!(out, "  - {}", printable(problem));
    }
    let cut = if finding.shrink_cut { " (cut short: it may not be minimal)" } else { "" };
    let _ = writeln!(
        out,
        "  shrunk on {} from {} replies to {} in {} runs ({} candidates cached){cut}",
        finding.clause,
        finding.original.replies(),
        finding.minimal.replies(),
        finding.shrink_runs,
        finding.shrink_cached
    );
    if finding.reproduces() {
        let _ = writeln!(
            out,
            "  reproduces: {} of {} replays broke {}",
            finding.reproduced, finding.replays, finding.clause
        );
    } else {
        let _ = writeln!(
            out,
            "  flaky: {} of {} replays broke {} ({:.0}%): not a clean reproduction",
            finding.reproduced,
            finding.replays,
            finding.clause,
            f64::from(finding.reproduced) * 100.0 / f64::from(finding.replays.max(1))
        );
    }
    match fuzz::write(finding, dir) {
        Ok(path) => {
            let _ = writeln!(out, "minimal scenario: {}", path.display());
            let chosen = campaign.outside.chosen().unwrap_or_default();
            let _ = writeln!(
                out,
                "replay: {}",
                replay_command(&chosen, &path, target.drive.clock.is_some(), &campaign.outside.command)
            );
        }
        Err(e) => {
            let _ = writeln!(err, "error: cannot write the finding to {}: {e}", dir.display());
            return Exit::BadInput;
        }
    }
    Exit::Failed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replay_command_quotes_what_a_shell_would_split() {
        assert_eq!(shell_word("python3"), "python3");
        assert_eq!(shell_word("{message}"), "{message}");
        assert_eq!(shell_word("a b"), "'a b'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word(""), "''");
    }
}

//! `rehearsal fuzz`: the campaign's progress, its stops (a time limit, Ctrl-C) and its report.
//!
//! The campaign runs on a thread of its own; this thread alone writes to stderr (a progress bar
//! on a terminal, a plain progress line every [`PROGRESS_EVERY`] elsewhere), so no case ever
//! waits on the terminal. The wall clock is the campaign's budget and measures its rate; no
//! run reads it.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Once, mpsc};
use std::time::{Duration, Instant};

pub(super) mod runtime;

use super::Exit;
use crate::fuzz::{self, Ended, Report, Shard, Stop, Tally};

/// How often a progress line is printed when stderr is not a terminal (`--progress-every`).
pub(super) const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// How often the progress bar is brought up to date on a terminal.
const BAR_EVERY: Duration = Duration::from_millis(100);

/// A fuzz campaign as the command line sets it up.
pub(super) struct Campaign {
    /// The cases, seed, threads.
    pub(super) options: fuzz::Options,
    /// Which of the cases run here.
    pub(super) shard: Shard,
    /// When to stop starting cases (`--time`).
    pub(super) time: Option<Duration>,
    /// How often to print a progress line off a terminal.
    pub(super) progress_every: Duration,
}

/// Ctrl-Cs since the campaign started.
pub(super) static INTERRUPTS: AtomicU64 = AtomicU64::new(0);

/// Counts Ctrl-Cs from now on instead of dying at the first; the second exits at once.
pub(super) fn watch_interrupts() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // ctrlc runs the handler on a thread of its own, not in signal context. It writes
        // nothing: stderr is locked by the thread that prints the progress.
        let installed = ctrlc::set_handler(|| {
            if INTERRUPTS.fetch_add(1, Ordering::SeqCst) > 0 {
                std::process::exit(Exit::Interrupted as i32);
            }
        });
        // Without a handler (one was set already) Ctrl-C keeps its default: the process ends.
        drop(installed);
    });
    INTERRUPTS.store(0, Ordering::SeqCst);
}

/// The counts the campaign's threads report, read by the thread that prints them.
#[derive(Default)]
pub(super) struct Live {
    done: AtomicU64,
    invalid: AtomicU64,
    findings: AtomicU64,
}

impl Live {
    pub(super) fn record(&self, tally: Tally) {
        // Threads report out of order: keep the highest count seen.
        self.done.fetch_max(tally.done, Ordering::Relaxed);
        self.invalid.fetch_max(tally.invalid, Ordering::Relaxed);
        self.findings.fetch_max(tally.findings, Ordering::Relaxed);
    }

    pub(super) fn get(&self) -> Tally {
        Tally {
            done: self.done.load(Ordering::Relaxed),
            invalid: self.invalid.load(Ordering::Relaxed),
            findings: self.findings.load(Ordering::Relaxed),
        }
    }
}

/// Whole cases per second.
fn rate(cases: u64, elapsed: Duration) -> String {
    format!("{:.0}", cases as f64 / elapsed.as_secs_f64().max(1e-9))
}

/// A progress line: `fuzz: 12000 cases, 2890 cases/s, 0 findings, 3 invalid, 41 s`.
fn progress_line(shard: Shard, tally: Tally, elapsed: Duration) -> String {
    let which = if shard == Shard::WHOLE { String::new() } else { format!(" (shard {shard})") };
    let findings = if tally.findings == 1 { "finding" } else { "findings" };
    format!(
        "fuzz{which}: {} cases, {} cases/s, {} {findings}, {} invalid, {} s",
        tally.done,
        rate(tally.done, elapsed),
        tally.findings,
        tally.invalid,
        elapsed.as_secs()
    )
}

fn progress_bar(campaign: &Campaign) -> indicatif::ProgressBar {
    // `{msg}` is the rate, in whole cases per second like the summary (set as it runs).
    let (bar, template) = match campaign.time {
        Some(time) => {
            let limit = humantime::format_duration(Duration::from_secs(time.as_secs().max(1)));
            (
                indicatif::ProgressBar::new_spinner(),
                format!("{{spinner}} {{pos}} cases, {{msg}}, {{elapsed}} of {limit}"),
            )
        }
        None => (
            indicatif::ProgressBar::new(campaign.shard.size(campaign.options.cases)),
            "{bar:40} {pos}/{len} cases, {msg}, eta {eta}".to_string(),
        ),
    };
    bar.set_style(indicatif::ProgressStyle::with_template(&template).expect("a valid template"));
    bar
}

/// The rule clauses the campaign's holding cases exercised, and the measurable ones none did.
fn clauses_reached(report: &Report) -> String {
    use crate::coverage::{Measure, clauses, measure};
    let measurable: Vec<(usize, &str)> = clauses()
        .iter()
        .enumerate()
        .filter(|(_, c)| measure(c.id) == Some(Measure::Detected))
        .map(|(i, c)| (i, c.id))
        .collect();
    let reached = |i: usize| report.reached.get(i).copied().flatten().is_some();
    let never: Vec<&str> = measurable.iter().filter(|(i, _)| !reached(*i)).map(|(_, id)| *id).collect();
    let mut out =
        format!("  rule clauses reached: {} of {} measurable\n", measurable.len() - never.len(), measurable.len());
    out.push_str(&never_reached(&never));
    out
}

/// The summary's line of clauses never reached, if any. A long list is cut: the summary is
/// read by a person (158 ids on one line are not read); `rehearsal run --coverage-all` lists
/// every clause.
fn never_reached(never: &[&str]) -> String {
    const SHOWN: usize = 10;
    if never.is_empty() {
        return String::new();
    }
    let more = never.len().saturating_sub(SHOWN);
    let tail =
        if more > 0 { format!(" and {more} more (rehearsal run --coverage-all lists them)") } else { String::new() };
    let shown: Vec<&str> = never.iter().take(SHOWN).copied().collect();
    format!("  never reached ({}): {}{tail}\n", never.len(), shown.join(", "))
}

/// How the summary line ends.
fn ending(report: &Report, time: Option<Duration>) -> String {
    let case = report.finding.as_ref().map_or(0, |f| f.case);
    match report.ended {
        Ended::AllCases => "ended: all cases run".to_string(),
        Ended::Finding => format!("ended: finding at case {case}"),
        Ended::TimeLimit => {
            let limit = time.map(|t| format!(" ({})", humantime::format_duration(t))).unwrap_or_default();
            format!("ended: time limit{limit}")
        }
        Ended::Interrupted if report.finding.is_some() => {
            format!("ended: interrupted while shrinking case {case} (its scenario fails but may not be minimal)")
        }
        Ended::Interrupted => "ended: interrupted".to_string(),
    }
}

/// Why the campaign cannot start, if it cannot: no case to run (`--cases 0`, or a shard with
/// none of the cases), or a `--out` a finding could not be written to. Checked before the
/// first case, so a CI gate cannot pass by running nothing, and a long campaign does not lose
/// its shrunk finding at the end.
fn refused(campaign: &Campaign, dir: &Path) -> Option<String> {
    let cases = campaign.options.cases;
    if cases == 0 {
        return Some("--cases 0 runs no case: a campaign that cannot fail (give at least 1)".to_string());
    }
    if campaign.shard.size(cases) == 0 {
        return Some(format!(
            "shard {} holds none of the {cases} cases (case C is in shard C % N + 1): give at least {} cases, or fewer shards",
            campaign.shard,
            campaign.shard.count()
        ));
    }
    writable_folder(dir).err().map(|why| format!("--out {}: {why}", crate::trace::printable(&dir.to_string_lossy())))
}

/// Whether a finding can be written into `dir`: it is a folder, or can be made one, and a file
/// can be made there. Probed with a file made and removed at once in `dir`, or in the nearest
/// folder above it that exists (nothing is left behind: the folder itself is made only for a
/// finding).
pub(super) fn writable_folder(dir: &Path) -> Result<(), String> {
    let mut at = dir;
    loop {
        match std::fs::metadata(at) {
            Ok(metadata) if metadata.is_dir() => break,
            Ok(_) => return Err(format!("{} is not a folder", crate::trace::printable(&at.to_string_lossy()))),
            // Not there, or below a file: the file is found on the way up.
            Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) => {
                at = match at.parent() {
                    Some(parent) if !parent.as_os_str().is_empty() => parent,
                    _ => Path::new("."),
                };
            }
            Err(e) => return Err(format!("cannot use {}: {e}", crate::trace::printable(&at.to_string_lossy()))),
        }
    }
    let probe = at.join(format!(".rehearsal-fuzz-probe-{}", std::process::id()));
    match std::fs::OpenOptions::new().write(true).create_new(true).open(&probe) {
        Ok(file) => {
            drop(file);
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(format!(
            "a finding could not be written there ({e} in {})",
            crate::trace::printable(&at.to_string_lossy())
        )),
    }
}

pub(super) fn fuzz_command(
    campaign: &Campaign,
    sut: &dyn crate::sut::SystemUnderTest,
    dir: &Path,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Exit {
    if let Some(why) = refused(campaign, dir) {
        let _ = writeln!(err, "error: {why}");
        return Exit::BadInput;
    }
    let options = &campaign.options;
    watch_interrupts();
    let started = Instant::now();
    let deadline = campaign.time.and_then(|time| started.checked_add(time));
    let stop = || {
        if INTERRUPTS.load(Ordering::SeqCst) > 0 {
            Some(Stop::Interrupted)
        } else if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            Some(Stop::TimeLimit)
        } else {
            None
        }
    };
    let live = Live::default();
    let terminal = std::io::stderr().is_terminal();
    let bar = if terminal { progress_bar(campaign) } else { indicatif::ProgressBar::hidden() };
    let report = std::thread::scope(|scope| {
        let (finished, wait) = mpsc::channel::<()>();
        let (stop, live) = (&stop, &live);
        let worker = std::thread::Builder::new()
            .stack_size(crate::runner::RUN_STACK_BYTES)
            .spawn_scoped(scope, move || {
                // Dropped when the campaign returns (or panics), which ends the wait below.
                let _finished = finished;
                fuzz::run_campaign_on(sut, options, campaign.shard, stop, |tally| live.record(tally))
            })
            .expect("the fuzz campaign's thread starts");
        let mut next_line = started + campaign.progress_every;
        loop {
            let pause = if terminal { BAR_EVERY } else { next_line.saturating_duration_since(Instant::now()) };
            if let Err(mpsc::RecvTimeoutError::Disconnected) = wait.recv_timeout(pause) {
                break;
            }
            let tally = live.get();
            if terminal {
                bar.set_message(format!("{} cases/s", rate(tally.done, started.elapsed())));
                bar.set_position(tally.done);
                bar.tick();
            } else if Instant::now() >= next_line {
                let _ = writeln!(err, "{}", progress_line(campaign.shard, tally, started.elapsed()));
                while next_line <= Instant::now() {
                    next_line += campaign.progress_every;
                }
            }
        }
        worker.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    });
    bar.finish_and_clear();
    let elapsed = started.elapsed();
    let jobs = report.threads;
    let threads = if jobs == 1 { "one core".to_string() } else { format!("{jobs} threads") };
    let of_shard = if campaign.shard == Shard::WHOLE { String::new() } else { format!(" of shard {}", campaign.shard) };
    let _ = writeln!(
        out,
        "{} cases{of_shard} in {:.2} s ({} cases/s on {threads}), {} finding(s), {} invalid case(s); {}",
        report.cases,
        elapsed.as_secs_f64(),
        rate(report.cases, elapsed),
        u8::from(report.finding.is_some()),
        report.invalid,
        ending(&report, campaign.time)
    );
    if matches!(report.ended, Ended::TimeLimit | Ended::Interrupted)
        && report.finding.is_none()
        && let Some(last) = report.case_numbers().last()
    {
        // What ran is the shard's first cases: a case count runs exactly them again.
        let _ = writeln!(out, "  the same cases again: the same options with --cases {} and no --time", last + 1);
    }
    let lacks = sut.capabilities().missing(&crate::sut::Capabilities::ALL);
    if !lacks.is_empty() || report.skipped > 0 {
        // One line, not one per case: a core's missing features are no finding and no noise.
        // The generator leaves out what the core lacks, so the skipped cases are those it
        // could not leave out (a family the core lacks, asked for in the library).
        let needed: Vec<&str> = report.skipped_for.iter().copied().collect();
        let why = if needed.is_empty() { String::new() } else { format!(" (they need {})", needed.join(", ")) };
        let _ = writeln!(
            out,
            "  core `{}` lacks {}: cases are drawn without it; {} case(s) skipped{why}",
            crate::trace::printable(sut.name()),
            if lacks.is_empty() { "nothing".to_string() } else { lacks.join(", ") },
            report.skipped,
        );
    }
    for (count, example) in report.invalid_reasons.values() {
        let _ = writeln!(out, "  invalid ({count}), e.g.: {example}");
    }
    let _ = write!(out, "{}", clauses_reached(&report));
    let Some(finding) = report.finding else {
        return if report.ended == Ended::Interrupted { Exit::Interrupted } else { Exit::Passed };
    };
    for problem in finding.problems() {
        let _ = writeln!(out, "  - {}", crate::trace::printable(&problem));
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

#[cfg(test)]
mod tests {
    #[test]
    fn a_long_list_of_unreached_clauses_is_cut_to_ten() {
        let ids: Vec<String> = (0..158).map(|i| format!("c.{i}")).collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        let line = super::never_reached(&ids);
        assert!(line.starts_with("  never reached (158): c.0, c.1,"), "{line}");
        assert!(line.ends_with("c.9 and 148 more (rehearsal run --coverage-all lists them)\n"), "{line}");
        assert_eq!(super::never_reached(&ids[..2]), "  never reached (2): c.0, c.1\n");
        assert_eq!(super::never_reached(&[]), "");
    }
}

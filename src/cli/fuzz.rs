//! `rehearsal fuzz`: the campaign's progress and report.

use std::io::Write;
use std::path::Path;

use super::Exit;
use crate::fuzz;

pub(super) fn fuzz_command(options: &fuzz::Options, dir: &Path, out: &mut dyn Write, err: &mut dyn Write) -> Exit {
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

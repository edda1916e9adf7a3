//! On-demand benchmark: `cargo bench`. Wall-clock figures belong here, never in tests (CI
//! machines are noisy). Prints the median of repeated measurements.
//!
//! - one run of `scenarios/roku/agent-timeout-121s-child.json` (121 s of a child against the
//!   120 s timeout, 120.2 s of virtual time);
//! - one verified pass over every scenario file (each run twice and judged);
//! - the fuzzer's rate on one core: `rehearsal fuzz --cases 10000 --seed 1`.

use std::path::Path;
use std::time::{Duration, Instant};

use rehearsal::fuzz;
use rehearsal::generate::Family;
use rehearsal::runner;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn time<T>(f: impl FnOnce() -> T) -> (Duration, T) {
    let start = Instant::now();
    let out = f();
    (start.elapsed(), out)
}

fn scenario_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).expect("scenarios/ exists").map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            scenario_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "json") {
            out.push(path);
        }
    }
}

fn main() {
    let file = Path::new("scenarios/roku/agent-timeout-121s-child.json");
    let scenario = rehearsal::scenario::load(file).expect("the timeout scenario loads");
    let profiles = runner::resolve_profiles(&scenario, Path::new("scenarios/roku")).expect("no profiles");
    let samples: Vec<Duration> = (0..500).map(|_| time(|| runner::run(&scenario, &profiles)).0).collect();
    let run = runner::run(&scenario, &profiles);
    println!(
        "timeout scenario ({} ms virtual): median {:?} wall per run (500 runs)",
        run.elapsed.as_millis(),
        median(samples)
    );

    let mut files = Vec::new();
    scenario_files(Path::new("scenarios"), &mut files);
    let samples: Vec<Duration> = (0..10)
        .map(|_| {
            time(|| {
                for f in &files {
                    let (_, verdict) = runner::verify_file(f).expect("scenarios load");
                    assert!(verdict.passed(), "{} fails", f.display());
                }
            })
            .0
        })
        .collect();
    println!(
        "scenario suite ({} files, each run twice and judged): median {:?} wall (10 passes)",
        files.len(),
        median(samples)
    );

    let options = fuzz::Options { cases: 10_000, seed: 1, explore: 0, family: Family::Any, shrink_steps: 4096 };
    let (elapsed, report) = time(|| fuzz::run(&options, |_| {}));
    assert!(report.finding.is_none(), "the correct core has a finding: {:?}", report.finding);
    println!(
        "fuzz --cases 10000 --seed 1: {elapsed:.2?}, {:.0} cases/s on one core, {} invalid",
        report.cases as f64 / elapsed.as_secs_f64(),
        report.invalid
    );
}

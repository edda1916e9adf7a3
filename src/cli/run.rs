//! `rehearsal run`: find the scenario files, check each (on several threads), compare golden
//! traces, and report.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::report::Reporter;
use super::{Exit, Orders, RunArgs};
use crate::golden::{self, Compared, Store};
use crate::jobs;
use crate::runner::{self, Failure};
use crate::scenario::ScenarioError;
use crate::trace::printable;

/// What the paths of a command line hold: the scenario files to run, each with the path
/// argument it was found under, and the paths that cannot be run.
#[derive(Debug, Default)]
pub struct Found {
    /// Scenario files (regular `*.json` files, each once), folder by folder in path order.
    pub files: Vec<(PathBuf, PathBuf)>,
    /// Paths that could not be read, and files that are not regular files (a FIFO or a device
    /// is reported, never opened).
    pub problems: Vec<ScenarioError>,
    /// Links that lead back to a folder being walked: not followed (each file runs once).
    pub loops: Vec<PathBuf>,
}

/// Every scenario file under the given paths. Folders are walked in file-name order, hidden
/// entries (`.name`) skipped, links followed with loop detection; a file reached twice (by a
/// link) runs once. Nothing here stops at a bad path: every other path is still walked.
pub fn collect(paths: &[PathBuf]) -> Found {
    let mut found = Found::default();
    let mut seen = std::collections::BTreeSet::new();
    let io = |path: &Path, message: String| ScenarioError::Io { path: path.to_path_buf(), message };
    for root in paths {
        let metadata = match std::fs::metadata(root) {
            Ok(metadata) => metadata,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                found.problems.push(io(root, "no such file or folder".into()));
                continue;
            }
            Err(e) => {
                found.problems.push(io(root, e.to_string()));
                continue;
            }
        };
        if !metadata.is_dir() {
            if metadata.is_file() {
                found.files.push((root.clone(), root.clone()));
            } else {
                found.problems.push(io(root, NOT_REGULAR.into()));
            }
            continue;
        }
        let walk = walkdir::WalkDir::new(root)
            .follow_links(true)
            .sort_by_file_name()
            .into_iter()
            .filter_entry(|e| e.depth() == 0 || !e.file_name().to_string_lossy().starts_with('.'));
        for entry in walk {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) if e.loop_ancestor().is_some() => {
                    found.loops.push(e.path().map_or_else(|| root.clone(), Path::to_path_buf));
                    continue;
                }
                Err(e) => {
                    let at = e.path().map_or_else(|| root.clone(), Path::to_path_buf);
                    let message = e.io_error().map_or_else(|| e.to_string(), |io| io.to_string());
                    found.problems.push(io(&at, message));
                    continue;
                }
            };
            let path = entry.path();
            if entry.file_type().is_dir() || !path.to_string_lossy().ends_with(".json") {
                continue;
            }
            if !entry.file_type().is_file() {
                found.problems.push(io(path, NOT_REGULAR.into()));
                continue;
            }
            let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
            if seen.insert(canonical) {
                found.files.push((path.to_path_buf(), root.clone()));
            }
        }
    }
    found
}

const NOT_REGULAR: &str = "not a regular file (a FIFO, a socket or a device): not read";

pub(super) fn run(args: &RunArgs, out: &mut dyn Write, err: &mut dyn Write) -> Exit {
    let orders = Orders { explore: args.explore, seed: args.explore_seed };
    let jobs = args.jobs.map_or_else(jobs::default_jobs, usize::from);
    let found = collect(&args.paths);
    for link in &found.loops {
        let link = printable(&link.to_string_lossy()).into_owned();
        let _ = writeln!(err, "note: {link} leads back to a folder being walked; not followed");
    }
    if found.files.is_empty() && found.problems.is_empty() {
        let paths: Vec<String> = args.paths.iter().map(|p| printable(&p.to_string_lossy()).into_owned()).collect();
        let _ = writeln!(err, "error: no scenario file (*.json) under {}", paths.join(", "));
        return Exit::BadInput;
    }
    let files = found.files;
    if args.timeline.is_some() && files.len() != 1 {
        let _ =
            writeln!(err, "error: --timeline draws one run: give exactly one scenario file ({} given)", files.len());
        return Exit::BadInput;
    }
    let store = args.snapshots.as_ref().map(Store::new);
    let mut reporter = Reporter::new(args.format, args.trace);
    // Paths that cannot be run are reported first; every other file still runs.
    for problem in &found.problems {
        let at = match problem {
            ScenarioError::Io { path, .. }
            | ScenarioError::Parse { path, .. }
            | ScenarioError::Invalid { path, .. } => path,
        };
        reporter.bad_input(out, err, at, problem);
    }
    // Threads go to files first; with fewer files than threads, the two runs of each
    // verification take two.
    let mut runner = runner::Runner::new().parallel(files.len() < jobs).explore(orders.explore);
    if let Some(seed) = orders.seed {
        runner = runner.only_order(seed);
    }
    jobs::ordered(
        &files,
        jobs,
        |(file, _)| runner.check_file(file),
        |i, checked| {
            let (file, root) = &files[i];
            let (scenario, mut verdict) = match checked {
                Ok(checked) => checked,
                Err(e) => return reporter.bad_input(out, err, file, &e),
            };
            if let Some(store) = &store {
                let name = golden::name(file, root);
                let body = golden::render(&scenario, &verdict);
                match store.compare(&name, file, &scenario.description, &body, args.accept) {
                    Ok(compared) => verdict.failures.extend(snapshot_failure(&compared, &name)),
                    Err(e) => {
                        let problem =
                            ScenarioError::Io { path: file.clone(), message: format!("golden file {name}: {e}") };
                        return reporter.bad_input(out, err, file, &problem);
                    }
                }
            }
            reporter.scenario(out, file, &verdict);
            if let Some(path) = &args.timeline
                && let Err(e) = crate::timeline::write(path, &scenario.name, &verdict.run.trace)
            {
                let problem =
                    ScenarioError::Io { path: path.clone(), message: format!("cannot write the timeline: {e}") };
                reporter.bad_input(out, err, path, &problem);
            }
        },
    );
    reporter.finish(out)
}

/// The failure a golden-file comparison adds to a verdict, if any.
fn snapshot_failure(compared: &Compared, name: &str) -> Option<Failure> {
    match compared {
        Compared::Same | Compared::Accepted { .. } => None,
        Compared::Missing { pending } => Some(Failure {
            what: format!(
                "snapshot {name}: no golden trace yet; this run's is in {} (review it with `cargo insta review`, or run again with --accept)",
                pending.display()
            ),
            lines: Vec::new(),
        }),
        Compared::Differs { pending, line, golden, now } => Some(Failure {
            what: format!(
                "snapshot {name}: the trace differs from its golden file at line {line}; this run's is in {} (review it with `cargo insta review`, or run again with --accept)",
                pending.display()
            ),
            lines: vec![format!("golden: {golden}"), format!("now:    {now}")],
        }),
    }
}

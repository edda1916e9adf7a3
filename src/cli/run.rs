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

/// Every `*.json` file under the given paths, each folder's files sorted by path, with the
/// path argument it was found under.
pub fn collect(paths: &[PathBuf]) -> Result<Vec<(PathBuf, PathBuf)>, ScenarioError> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut found = Vec::new();
            walk(path, &mut found)?;
            files.extend(found.into_iter().map(|file| (file, path.clone())));
        } else if path.exists() {
            files.push((path.clone(), path.clone()));
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

pub(super) fn run(args: &RunArgs, out: &mut dyn Write, err: &mut dyn Write) -> Exit {
    let orders = Orders { explore: args.explore, seed: args.explore_seed };
    let jobs = args.jobs.map_or_else(jobs::default_jobs, usize::from);
    let files = match collect(&args.paths) {
        Ok(files) => files,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            return Exit::BadInput;
        }
    };
    if args.timeline.is_some() && files.len() != 1 {
        let _ =
            writeln!(err, "error: --timeline draws one run: give exactly one scenario file ({} given)", files.len());
        return Exit::BadInput;
    }
    let store = args.snapshots.as_ref().map(Store::new);
    let mut reporter = Reporter::new(args.format, args.trace);
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

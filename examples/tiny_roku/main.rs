//! Runs scenario files through TinyRoku, the independently written core of `core.rs`:
//!
//! ```text
//! cargo run --example tiny_roku -- scenarios/roku
//! ```
//!
//! Each argument is a scenario file or a folder (searched recursively for `*.json`, in name
//! order). A scenario that needs something TinyRoku does not implement (the background
//! `subagent` family, steering) is skipped and says why; every other one is verified exactly
//! as `rehearsal run` verifies it on the built-in core: its expectations, its request checks,
//! every oracle, and two runs compared for determinism. Exits 1 if any scenario failed.
//!
//! Options: `--model-ids` keeps the model's call ids in the conversation instead of
//! TinyRoku's own `c1`, `c2`, ...; `--bug refund-grant` or `--bug no-truncation-notice` runs
//! the core with that deliberate rule bug.

#[path = "core.rs"]
mod core;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rehearsal::runner::Runner;

use crate::core::{Bug, CallIds, TinyRoku};

fn collect(path: &Path, into: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if !path.is_dir() {
        into.push(path.to_path_buf());
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
    entries.sort();
    for entry in entries {
        if entry.is_dir() {
            collect(&entry, into)?;
        } else if entry.extension().is_some_and(|ext| ext == "json") {
            into.push(entry);
        }
    }
    Ok(())
}

const USAGE: &str = "usage: cargo run --example tiny_roku -- [--model-ids] [--bug refund-grant|no-truncation-notice] <scenario file or folder>...";

fn main() -> ExitCode {
    let mut core = TinyRoku::new();
    let mut ids = CallIds::Own;
    let mut paths: Vec<PathBuf> = Vec::new();
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--model-ids") => ids = CallIds::Model,
            Some("--bug") => match args.next().as_ref().and_then(|b| b.to_str()) {
                Some("refund-grant") => core = TinyRoku::with_bug(Bug::RefundGrant),
                Some("no-truncation-notice") => core = TinyRoku::with_bug(Bug::NoTruncationNotice),
                _ => {
                    eprintln!("{USAGE}");
                    return ExitCode::from(2);
                }
            },
            _ => paths.push(PathBuf::from(arg)),
        }
    }
    if paths.is_empty() {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    }
    let core = core.with_call_ids(ids);
    let mut files = Vec::new();
    for arg in &paths {
        if let Err(e) = collect(arg, &mut files) {
            eprintln!("{}: {e}", arg.display());
            return ExitCode::from(2);
        }
    }

    let runner = Runner::new().on(&core);
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    for file in &files {
        let (scenario, profiles) = match rehearsal::load::file(file, &core) {
            Ok(loaded) => loaded.into_parts(),
            Err(rehearsal::scenario::ScenarioError::Unsupported { core, missing, .. }) => {
                skipped += 1;
                println!("SKIP {}: the core `{core}` does not implement {}", file.display(), missing.join(", "));
                continue;
            }
            Err(e) => {
                failed += 1;
                println!("FAIL {}: {e}", file.display());
                continue;
            }
        };
        let verdict = runner.verify(&scenario, &profiles);
        if verdict.passed() {
            passed += 1;
            println!("PASS {}", file.display());
        } else {
            failed += 1;
            println!("FAIL {}", file.display());
            for failure in verdict.failures() {
                println!("  - {}", failure.what);
                for line in &failure.lines {
                    println!("      | {line}");
                }
            }
        }
    }
    println!(
        "\n{} scenarios on `{}`: {passed} passed, {failed} failed, {skipped} skipped",
        files.len(),
        core_name(&core)
    );
    if failed > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}

fn core_name(core: &TinyRoku) -> &str {
    use rehearsal::sut::SystemUnderTest;
    core.name()
}

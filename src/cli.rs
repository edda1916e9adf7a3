//! The command line: `rehearsal run` and its report. `main.rs` only maps the outcome to an
//! exit code.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand, ValueEnum};
use serde_json::json;

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

#[derive(Subcommand, Debug)]
enum Command {
    /// Run scenario files (or folders of them, recursively) and print a verdict for each.
    Run {
        /// Scenario files or folders.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Print each scenario's trace.
        #[arg(long)]
        trace: bool,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
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
        Command::Run { paths, trace, format } => run(&paths, trace, format, out, err),
    }
}

fn run(paths: &[PathBuf], show_trace: bool, format: Format, out: &mut dyn Write, err: &mut dyn Write) -> Exit {
    let files = match collect(paths) {
        Ok(files) => files,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            return Exit::BadInput;
        }
    };
    let (mut passed, mut failed, mut bad) = (0, 0, 0);
    for file in &files {
        match runner::verify_file(file) {
            Err(e) => {
                bad += 1;
                let _ = writeln!(err, "error: {e}");
                if format == Format::Json {
                    let _ = writeln!(out, "{}", json!({"file": file, "verdict": "bad_input", "error": e.to_string()}));
                }
            }
            Ok((scenario, verdict)) => {
                if verdict.passed() {
                    passed += 1
                } else {
                    failed += 1
                }
                match format {
                    Format::Text => report_text(out, file, &scenario.name, &verdict, show_trace),
                    Format::Json => report_json(out, file, &scenario.name, &verdict, show_trace),
                }
            }
        }
    }
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

fn report_text(out: &mut dyn Write, file: &Path, name: &str, verdict: &Verdict, show_trace: bool) {
    let run = &verdict.run;
    let word = if verdict.passed() { "PASS" } else { "FAIL" };
    let _ = writeln!(
        out,
        "{word} {name} ({}; {} events, {} ms virtual)",
        file.display(),
        run.trace.entries.len(),
        run.elapsed.as_millis()
    );
    for failure in &verdict.failures {
        let _ = writeln!(out, "  - {}", failure.what);
        for line in &failure.lines {
            let _ = writeln!(out, "      | {line}");
        }
    }
    if show_trace {
        for line in run.trace.lines() {
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

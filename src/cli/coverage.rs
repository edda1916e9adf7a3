//! `rehearsal run --coverage`: the rule-coverage table of a suite, and the gate that fails a
//! run whose passing scenarios leave required clauses unexercised (`--coverage-min`,
//! `--require-coverage`).
//!
//! What counts as exercised is [`crate::coverage`]'s business (a detector per clause over each
//! run's evidence); this module only counts passing scenarios, prints, and judges the
//! requirement.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::style::Paint;
use crate::coverage::{self, Measure, Tally};
use crate::trace::printable;

/// What a run must cover, from the command line.
#[derive(Debug, Default)]
pub(super) struct Gate {
    /// `--coverage-min PERCENT`: the least share of the measurable clauses exercised.
    min_percent: Option<u8>,
    /// `--require-coverage FILE`: the file, and the clauses it lists (patterns expanded).
    required: Option<(PathBuf, Vec<&'static str>)>,
}

impl Gate {
    /// The gate of `--coverage-min` and `--require-coverage` (reading the file); an error
    /// names the file and line of a bad entry.
    pub(super) fn new(min_percent: Option<u8>, file: Option<&Path>) -> Result<Gate, String> {
        let required = match file {
            Some(path) => Some((path.to_path_buf(), read_required(path)?)),
            None => None,
        };
        Ok(Gate { min_percent, required })
    }

    /// What the tally leaves unmet, one message per requirement; empty when all are met.
    pub(super) fn unmet(&self, tally: &Tally) -> Vec<String> {
        let unhit = tally.unhit();
        let mut out = Vec::new();
        if let Some(min) = self.min_percent {
            let (exercised, measurable) = counts(tally);
            if exercised * 100 < usize::from(min) * measurable {
                out.push(format!(
                    "{exercised} of {measurable} measurable clauses exercised ({}%), --coverage-min {min} needs {min}%; unhit: {}",
                    exercised * 100 / measurable.max(1),
                    unhit.join(", ")
                ));
            }
        }
        if let Some((file, ids)) = &self.required {
            let missing: Vec<&str> = ids.iter().copied().filter(|id| unhit.contains(id)).collect();
            if !missing.is_empty() {
                out.push(format!(
                    "{} of the {} clauses {} requires unhit: {}",
                    missing.len(),
                    ids.len(),
                    printable(&file.to_string_lossy()),
                    missing.join(", ")
                ));
            }
        }
        out
    }

    /// The requirement as JSON, for the summary record.
    fn json(&self) -> Value {
        json!({
            "min_percent": self.min_percent,
            "file": self.required.as_ref().map(|(file, _)| file.to_string_lossy()),
        })
    }

    /// Whether any requirement was given.
    pub(super) fn any(&self) -> bool {
        self.min_percent.is_some() || self.required.is_some()
    }
}

/// Reads a `--require-coverage` file: one clause id per line; `#` starts a comment; an entry
/// ending in `.*` stands for every measurable clause whose id starts with what precedes it.
fn read_required(path: &Path) -> Result<Vec<&'static str>, String> {
    let shown = printable(&path.to_string_lossy()).into_owned();
    // The front door's bounded reader: a FIFO or a link to a device is refused unread.
    let text = crate::load::read(path, "coverage requirements file").map_err(|e| match e {
        crate::scenario::ScenarioError::Io { message, .. } => format!("{shown}: cannot read: {message}"),
        other => other.to_string(),
    })?;
    let mut ids = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let entry = line.split('#').next().unwrap_or_default().trim();
        if entry.is_empty() {
            continue;
        }
        let at = format!("{shown}:{}", n + 1);
        let matched: Vec<&'static str> = match entry.strip_suffix('*') {
            Some(prefix) => coverage::clauses()
                .iter()
                .map(|c| c.id)
                .filter(|id| id.starts_with(prefix) && coverage::measure(id) == Some(Measure::Detected))
                .collect(),
            None => match coverage::clauses().iter().find(|c| c.id == entry).map(|c| c.id) {
                Some(id) => match coverage::measure(id) {
                    Some(Measure::NotMeasurable(why)) => {
                        return Err(format!("{at}: `{id}` cannot be required: no run can show it ({why})"));
                    }
                    _ => vec![id],
                },
                None => Vec::new(),
            },
        };
        if matched.is_empty() {
            return Err(format!(
                "{at}: `{}` names no measurable clause of docs/rules/ (ids are listed there, e.g. `bub.cap.fifo-queue`)",
                printable(entry)
            ));
        }
        for id in matched {
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
    }
    if ids.is_empty() {
        // An empty list would require nothing and always pass: a gate that cannot fail.
        return Err(format!(
            "{shown}: lists no clause (one id per line, e.g. `bub.cap.fifo-queue`, or `bub.cap.*` for an area)"
        ));
    }
    Ok(ids)
}

/// (exercised, measurable) clauses.
fn counts(tally: &Tally) -> (usize, usize) {
    let lines = tally.lines();
    let measurable = lines.iter().filter(|l| l.measure == Measure::Detected).count();
    let exercised = lines.iter().filter(|l| l.measure == Measure::Detected && l.runs > 0).count();
    (exercised, measurable)
}

/// The coverage table: a header, then a line per clause (only the unhit ones when `quiet`).
/// Unless `all`, only the clauses the files reached are listed, and one line counts the
/// rest: a run of one file is about that file, not the whole catalogue.
pub(super) fn text(tally: &Tally, quiet: bool, all: bool, paint: Paint) -> String {
    let lines = tally.lines();
    let (exercised, measurable) = counts(tally);
    let not_measurable = lines.len() - measurable;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "rule coverage: {exercised} of {measurable} measurable clauses exercised by {} passing scenario{}; {not_measurable} not measurable from a run",
        tally.runs(),
        if tally.runs() == 1 { "" } else { "s" }
    );
    let width = lines.iter().map(|l| l.clause.id.len()).max().unwrap_or(0);
    if !all {
        for line in lines.iter().filter(|l| l.measure == Measure::Detected && l.runs > 0) {
            if !quiet {
                let example = printable(line.example.unwrap_or_default()).into_owned();
                let _ = writeln!(out, "  {:<width$} {:>5}  {example}", line.clause.id, line.runs);
            }
        }
        let _ = writeln!(
            out,
            "  ({} measurable clauses not reached and {not_measurable} not measurable are not listed; --coverage-all lists them)",
            measurable - exercised
        );
        return out;
    }
    for line in &lines {
        let id = line.clause.id;
        match line.measure {
            Measure::Detected if line.runs > 0 => {
                if !quiet {
                    let example = printable(line.example.unwrap_or_default()).into_owned();
                    let _ = writeln!(out, "  {id:<width$} {:>5}  {example}", line.runs);
                }
            }
            Measure::Detected => {
                let _ = writeln!(out, "  {id:<width$} {:>5}  {}", 0, paint.bad("UNHIT"));
            }
            Measure::NotMeasurable(why) => {
                if !quiet {
                    let _ = writeln!(out, "  {id:<width$} {:>5}  not measurable: {why}", "-");
                }
            }
        }
    }
    out
}

/// One JSON record per clause (unless `all`, per clause the files reached).
pub(super) fn records(tally: &Tally, all: bool) -> Vec<Value> {
    tally
        .lines()
        .into_iter()
        .filter(|line| all || (line.measure == Measure::Detected && line.runs > 0))
        .map(|line| match line.measure {
            Measure::Detected => json!({
                "type": "clause", "id": line.clause.id, "page": line.clause.page, "measured": true,
                "scenarios": line.runs, "example": line.example,
            }),
            Measure::NotMeasurable(why) => json!({
                "type": "clause", "id": line.clause.id, "page": line.clause.page, "measured": false, "reason": why,
            }),
        })
        .collect()
}

/// The coverage part of the JSON summary record.
pub(super) fn summary(tally: &Tally, gate: &Gate, unmet: &[String]) -> Value {
    let (exercised, measurable) = counts(tally);
    json!({
        "measurable": measurable,
        "exercised": exercised,
        "not_measurable": tally.lines().len() - measurable,
        "unhit": tally.unhit(),
        "required": gate.json(),
        "met": unmet.is_empty(),
        "unmet": unmet,
    })
}

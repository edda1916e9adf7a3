//! How `rehearsal run` reports: a text line per verdict, JSON lines, or a JUnit XML report.
//!
//! Every format counts the same way: a scenario passed, failed, or could not be used (bad
//! input: the exit code is then 2). The text report may be coloured; JSON lines and JUnit XML
//! never are. JSON lines end with a summary record (`"type": "summary"`).

use std::io::Write;
use std::path::Path;

use std::fmt::Write as _;

use serde_json::json;

use super::coverage::{self as rules_coverage, Gate};
use super::style::Paint;
use super::{Exit, Format, JunitTime};
use crate::coverage::Tally;
use crate::runner::Verdict;
use crate::scenario::ScenarioError;
use crate::trace::printable;

/// How the reporter writes: the format, and what the text report shows and colours.
#[derive(Clone, Copy)]
pub(super) struct Style {
    pub(super) format: Format,
    /// Each scenario's trace under its verdict (`--trace`).
    pub(super) trace: bool,
    /// Only failures and the summary (`--quiet`).
    pub(super) quiet: bool,
    /// Every clause in the coverage table, not only the reached ones (`--coverage-all`, or a
    /// coverage requirement, whose unhit clauses matter).
    pub(super) coverage_all: bool,
    /// Colour for stdout and for stderr.
    pub(super) out: Paint,
    pub(super) err: Paint,
    /// What a JUnit case's `time` is (`--junit-time`).
    pub(super) junit_time: JunitTime,
    /// Name every oracle a model-side verdict was judged by (`--verbose`).
    pub(super) verbose: bool,
}

impl Style {
    /// The style `format` and `--color` give, with no trace, no coverage table, and
    /// `quiet` as given: colour on stdout only for the text format.
    pub(super) fn plain(
        format: Format,
        quiet: bool,
        color: super::style::ColorChoice,
        terminal: super::style::Terminal,
    ) -> Style {
        Style {
            format,
            trace: false,
            quiet,
            coverage_all: false,
            out: if format == Format::Text { Paint::new(color, terminal.stdout) } else { Paint::default() },
            err: Paint::new(color, terminal.stderr),
            junit_time: JunitTime::Wall,
            verbose: false,
        }
    }
}

/// The rule coverage of a run, for the end of the report.
pub(super) struct CoverageEnd<'a> {
    pub(super) tally: &'a Tally,
    pub(super) gate: &'a Gate,
    /// The requirements the tally leaves unmet (a failure when not empty).
    pub(super) unmet: Vec<String>,
}

/// Collects verdicts as they come and writes them in the chosen format.
pub(super) struct Reporter {
    style: Style,
    passed: usize,
    failed: usize,
    bad: usize,
    internal: usize,
    /// Scenarios `--filter` left out.
    pub(super) filtered_out: usize,
    /// `*.json` files found in folders that are not scenarios.
    pub(super) skipped: usize,
    /// Usage errors found while running (a `--filter` that matched nothing): exit 2.
    pub(super) usage_errors: usize,
    /// The system under test could not be run (`not_run`): exit 4.
    not_run: bool,
    /// The run was interrupted (Ctrl-C, SIGTERM, SIGHUP): exit 130, in the summary too.
    pub(super) interrupted: bool,
    /// Trace events and virtual milliseconds of every run, for the JSON summary.
    events: u64,
    elapsed_ms: u64,
    /// The JUnit report's test cases, written at the end.
    cases: Vec<Case>,
}

/// One JUnit test case: a scenario file.
struct Case {
    name: String,
    classname: String,
    /// The wall time the scenario took to run.
    wall_ms: u64,
    /// The run's virtual time (or a wire run's own clock).
    virtual_ms: u64,
    /// `failure` or `error`, its message, its type and its text.
    problem: Option<(&'static str, String, &'static str, String)>,
}

impl Reporter {
    pub(super) fn new(style: Style) -> Reporter {
        Reporter {
            style,
            passed: 0,
            failed: 0,
            bad: 0,
            internal: 0,
            filtered_out: 0,
            skipped: 0,
            usage_errors: 0,
            not_run: false,
            interrupted: false,
            events: 0,
            elapsed_ms: 0,
            cases: Vec::new(),
        }
    }

    /// The report's format.
    pub(super) fn format(&self) -> Format {
        self.style.format
    }

    /// A note on stderr (`note: …`), left out under `--quiet`.
    pub(super) fn note(&self, err: &mut dyn Write, text: &str) {
        if !self.style.quiet {
            let _ = writeln!(err, "{} {text}", self.style.err.note("note:"));
        }
    }

    /// An error on stderr (`error: …`).
    pub(super) fn error(&self, err: &mut dyn Write, text: &str) {
        let _ = writeln!(err, "{} {text}", self.style.err.bad("error:"));
    }

    /// A usage error (a bad `--require-coverage`, no scenario file, a `--filter` that matched
    /// nothing): on stderr, counted (exit 2), and in the machine report as well, so a program
    /// reading it learns why there is nothing else: a JSON `usage_error` record, a JUnit error
    /// case. Otherwise an early usage error would leave JSON and JUnit readers no document.
    pub(super) fn usage_error(&mut self, out: &mut dyn Write, err: &mut dyn Write, text: &str) {
        self.usage_errors += 1;
        self.error(err, text);
        self.machine_error(out, "usage_error", "usage", text);
    }

    /// The system under test could not be run (exit 4): on stderr, and in the machine report
    /// as a JSON `not_run` record or a JUnit error case, so a program reading it learns why.
    pub(super) fn not_run(&mut self, out: &mut dyn Write, err: &mut dyn Write, text: &str) {
        self.not_run = true;
        self.error(err, text);
        self.machine_error(out, "not_run", "not_run", text);
    }

    /// An error with no scenario to hang on, in the machine formats: a JSON record of type
    /// `record`, or a JUnit error case named `case` (class `rehearsal.CASE`).
    fn machine_error(&mut self, out: &mut dyn Write, record: &str, case: &'static str, text: &str) {
        match self.style.format {
            Format::Text => {}
            Format::Json => {
                let _ = writeln!(out, "{}", json!({"type": record, "message": text}));
            }
            Format::Junit => {
                let problem = Some(("error", text.to_string(), case, text.to_string()));
                self.cases.push(Case {
                    name: case.into(),
                    classname: format!("rehearsal.{case}"),
                    wall_ms: 0,
                    virtual_ms: 0,
                    problem,
                });
            }
        }
    }

    /// One scenario's verdict; `wall` is the wall time it took (for JUnit's `time`).
    pub(super) fn scenario(&mut self, out: &mut dyn Write, file: &Path, verdict: &Verdict, wall: std::time::Duration) {
        if verdict.passed() {
            self.passed += 1;
        } else if verdict.internal_error() {
            self.internal += 1;
        } else {
            self.failed += 1;
        }
        self.events += verdict.trace().map_or(0, |trace| trace.entries.len()) as u64;
        self.elapsed_ms += verdict.elapsed().as_millis() as u64;
        let shown = !(self.style.quiet && verdict.passed());
        match self.style.format {
            Format::Text if shown => {
                let report = verdict.report_with(Some(file), self.style.verbose);
                let painted = match (report.strip_prefix("PASS"), report.strip_prefix("FAIL")) {
                    (Some(rest), _) => format!("{}{rest}", self.style.out.good("PASS")),
                    (_, Some(rest)) => format!("{}{rest}", self.style.out.bad("FAIL")),
                    _ => report,
                };
                let _ = write!(out, "{painted}");
                if self.style.trace
                    && let Some(trace) = verdict.trace()
                {
                    for line in trace.lines() {
                        let _ = writeln!(out, "    {}", printable(&line));
                    }
                }
            }
            Format::Text => {}
            Format::Json if shown => {
                let failures: Vec<_> = verdict.failures().iter().map(failure_record).collect();
                let mut report = json!({
                    "type": "scenario",
                    "file": file.to_string_lossy(),
                    "name": verdict.name(),
                    "verdict": if verdict.passed() {
                        "pass"
                    } else if verdict.internal_error() {
                        "internal_error"
                    } else {
                        "fail"
                    },
                    "failures": failures,
                    "events": verdict.trace().map_or(0, |trace| trace.entries.len()),
                    "elapsed_ms": verdict.elapsed().as_millis() as u64,
                    "tie_orders": verdict.orders(),
                });
                if let Some(oracles) = verdict.judged_by() {
                    report["judged_by"] = json!(oracles);
                }
                if self.style.trace {
                    let entries = verdict.trace().map_or(&[][..], |trace| &trace.entries[..]);
                    report["trace"] = entries.iter().map(|e| e.json()).collect();
                }
                let _ = writeln!(out, "{report}");
            }
            Format::Json => {}
            Format::Junit => {
                let element = if verdict.internal_error() { "error" } else { "failure" };
                // A CI system shows one message per case: the first failure's, with a count
                // of the rest; the text holds the whole report.
                let problem = verdict.failures().first().map(|first| {
                    let more = match verdict.failures().len() - 1 {
                        0 => String::new(),
                        n => format!(" (and {n} more)"),
                    };
                    (element, format!("{}{more}", first.what), first.kind.name(), verdict.report(Some(file)))
                });
                let virtual_ms = verdict.elapsed().as_millis() as u64;
                let wall_ms = wall.as_millis() as u64;
                self.cases.push(Case {
                    name: verdict.name().to_string(),
                    classname: classname(file),
                    wall_ms,
                    virtual_ms,
                    problem,
                });
            }
        }
    }

    /// A file that could not be used (exit code 2); the others still run.
    pub(super) fn bad_input(&mut self, out: &mut dyn Write, err: &mut dyn Write, file: &Path, error: &ScenarioError) {
        self.bad += 1;
        self.error(err, &printable(&error.to_string()));
        match self.style.format {
            Format::Text => {}
            Format::Json => {
                let record = json!({
                    "type": "scenario",
                    "file": file.to_string_lossy(),
                    "verdict": "bad_input",
                    "error": structured(error),
                });
                let _ = writeln!(out, "{record}");
            }
            Format::Junit => {
                let name = file.file_stem().map_or_else(|| file.to_string_lossy(), |s| s.to_string_lossy());
                let problem = Some(("error", error.to_string(), "bad_input", error.to_string()));
                self.cases.push(Case {
                    name: name.into_owned(),
                    classname: classname(file),
                    wall_ms: 0,
                    virtual_ms: 0,
                    problem,
                });
            }
        }
    }

    /// The coverage table (if asked for), the summary (or the whole JUnit document), and the
    /// exit code.
    pub(super) fn finish(self, out: &mut dyn Write, err: &mut dyn Write, coverage: Option<CoverageEnd>) -> Exit {
        let (passed, failed, bad, internal) = (self.passed, self.failed, self.bad, self.internal);
        let unmet = coverage.as_ref().map_or(0, |c| c.unmet.len());
        for problem in coverage.iter().flat_map(|c| &c.unmet) {
            self.error(err, &format!("rule coverage: {problem}"));
        }
        let exit = if internal > 0 {
            Exit::Internal
        } else if self.interrupted {
            Exit::Interrupted
        } else if bad > 0 || self.usage_errors > 0 {
            Exit::BadInput
        } else if self.not_run {
            Exit::NotRun
        } else if failed > 0 || unmet > 0 {
            Exit::Failed
        } else {
            Exit::Passed
        };
        match self.style.format {
            Format::Text => {
                if let Some(coverage) = &coverage {
                    let _ = write!(
                        out,
                        "{}",
                        rules_coverage::text(coverage.tally, self.style.quiet, self.style.coverage_all, self.style.out)
                    );
                }
                let paint = self.style.out;
                let mut summary =
                    format!("{}, {}", paint.count(passed, "passed", false), paint.count(failed, "failed", true));
                if bad > 0 {
                    let _ = write!(summary, ", {}", paint.count(bad, "bad input", true));
                }
                if internal > 0 {
                    let _ = write!(summary, ", {}", paint.count(internal, "internal error", true));
                }
                if unmet > 0 {
                    let _ = write!(summary, ", {}", paint.bad("rule coverage not met"));
                }
                if self.filtered_out > 0 {
                    let _ = write!(summary, " ({} not matching --filter)", self.filtered_out);
                }
                let _ = writeln!(out, "{summary}");
            }
            Format::Json => {
                let mut summary = json!({
                    "type": "summary",
                    "passed": passed,
                    "failed": failed,
                    "bad_input": bad,
                    "internal_error": internal,
                    "filtered_out": self.filtered_out,
                    "skipped_files": self.skipped,
                    "events": self.events,
                    "elapsed_ms": self.elapsed_ms,
                    "exit_code": exit as u8,
                });
                if let Some(coverage) = &coverage {
                    for record in rules_coverage::records(coverage.tally, self.style.coverage_all) {
                        let _ = writeln!(out, "{record}");
                    }
                    summary["coverage"] = rules_coverage::summary(coverage.tally, coverage.gate, &coverage.unmet);
                }
                let _ = writeln!(out, "{summary}");
            }
            Format::Junit => {
                let mut cases = self.cases;
                let mut failures = failed;
                if let Some(coverage) = coverage.as_ref().filter(|c| c.gate.any()) {
                    let problem = (!coverage.unmet.is_empty()).then(|| {
                        let text = coverage.unmet.join("\n");
                        ("failure", text.clone(), "coverage", text)
                    });
                    failures += usize::from(problem.is_some());
                    let classname = "rehearsal.coverage".into();
                    cases.push(Case { name: "rule coverage".into(), classname, wall_ms: 0, virtual_ms: 0, problem });
                }
                let errors = bad + internal + self.usage_errors;
                let _ = write!(out, "{}", junit(&cases, failures, errors, self.style.junit_time));
            }
        }
        exit
    }
}

/// A scenario error as a JSON object: its kind, file, place (line, column, the field's JSON
/// path) where known, message, what serde expected there (`expected one of …`) and the hint
/// (what to do, or a did-you-mean) when there are.
fn structured(error: &ScenarioError) -> serde_json::Value {
    let split = |message: &str| match message.split_once(", expected ") {
        Some((message, hint)) => (message.to_string(), Some(format!("expected {hint}"))),
        None => (message.to_string(), None),
    };
    let mut value = match error {
        ScenarioError::Io { path, message } => {
            json!({"kind": "io", "file": path.to_string_lossy(), "message": message})
        }
        ScenarioError::Parse { path, line, column, field, message, hint } => {
            let (message, expected) = split(message);
            json!({"kind": "parse", "file": path.to_string_lossy(), "line": line, "column": column, "field": field, "message": message, "expected": expected, "hint": hint})
        }
        ScenarioError::Invalid { path, place, field, message, hint } => {
            let mut value = json!({"kind": "invalid", "file": path.to_string_lossy(), "field": field, "message": message, "hint": hint});
            if let Some(place) = place {
                value["line"] = json!(place.line);
                value["column"] = json!(place.column);
            }
            value
        }
        ScenarioError::Unsupported { path, core, missing } => {
            json!({"kind": "unsupported", "file": path.to_string_lossy(), "core": core, "missing": missing})
        }
    };
    for key in ["hint", "expected"] {
        if value.get(key).is_some_and(serde_json::Value::is_null) {
            value.as_object_mut().expect("an object").remove(key);
        }
    }
    value["text"] = json!(error.to_string());
    value
}

/// One failure as a JSON record: its kind, the prose and trace lines, what was expected and
/// what the run gave where one value says it, and the rule clause and agent of a broken rule.
fn failure_record(failure: &crate::runner::Failure) -> serde_json::Value {
    let mut record = json!({"kind": failure.kind.name(), "what": failure.what, "lines": failure.lines});
    if let (Some(expected), Some(actual)) = (&failure.expected, &failure.actual) {
        record["expected"] = json!(expected);
        record["actual"] = json!(actual);
    }
    if let Some(clause) = &failure.clause {
        record["clause"] = json!(clause);
    }
    if let Some(agent) = &failure.agent {
        record["agent"] = json!(agent);
    }
    record
}

/// A test case's class: the file's path without its extension, folders joined by dots
/// (`scenarios.roku.agent-budget-from-30`), as Jenkins reads a class name: package, then class.
fn classname(file: &Path) -> String {
    let path = file.with_extension("");
    let parts: Vec<String> = path
        .components()
        .filter_map(|c| match c {
            std::path::Component::Normal(part) => Some(part.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    parts.join(".")
}

/// Milliseconds as JUnit's seconds (`1.250`).
fn seconds(ms: u64) -> String {
    format!("{}.{:03}", ms / 1000, ms % 1000)
}

/// The JUnit XML document: one `testsuite` of every scenario file, in the subset of the
/// format that Jenkins' xunit schema (`tests/fixtures/junit/junit-10.xsd`) accepts. Written by
/// hand because quick-junit, the obvious crate, always writes a `disabled` attribute on
/// `testsuite` that this schema refuses.
fn junit(cases: &[Case], failures: usize, errors: usize, clock: JunitTime) -> String {
    let tests = cases.len();
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    // `time` is what a CI dashboard sums: by default the wall seconds each scenario took;
    // `--junit-time virtual` makes the report the same in every run. The other clock is kept
    // in the suite's properties (the schema allows no properties on a case).
    type Pick = fn(&Case) -> u64;
    let (time_of, other_of, other): (Pick, Pick, &str) = match clock {
        JunitTime::Wall => (|c| c.wall_ms, |c| c.virtual_ms, "virtual"),
        JunitTime::Virtual => (|c| c.virtual_ms, |c| c.wall_ms, "wall"),
    };
    let time = seconds(cases.iter().map(time_of).sum());
    let counts = format!("tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" time=\"{time}\"");
    let _ = writeln!(xml, "<testsuites name=\"rehearsal\" {counts}>");
    let _ = writeln!(xml, "  <testsuite name=\"rehearsal\" {counts}>");
    let clock_name = match clock {
        JunitTime::Wall => "wall",
        JunitTime::Virtual => "virtual",
    };
    let _ = writeln!(xml, "    <properties>");
    let _ = writeln!(xml, "      <property name=\"rehearsal.time\" value=\"{clock_name}\"/>");
    if clock == JunitTime::Wall {
        // Wall times differ from run to run; virtual ones do not, and are worth keeping.
        for case in cases {
            let _ = writeln!(
                xml,
                "      <property name=\"{other}_seconds.{}.{}\" value=\"{}\"/>",
                escape(&case.classname),
                escape(&case.name),
                seconds(other_of(case))
            );
        }
    }
    let _ = writeln!(xml, "    </properties>");
    for case in cases {
        let head = format!(
            "    <testcase name=\"{}\" classname=\"{}\" time=\"{}\"",
            escape(&case.name),
            escape(&case.classname),
            seconds(time_of(case))
        );
        match &case.problem {
            None => {
                let _ = writeln!(xml, "{head}/>");
            }
            Some((element, message, kind, text)) => {
                let _ = writeln!(xml, "{head}>");
                let _ = writeln!(
                    xml,
                    "      <{element} message=\"{}\" type=\"rehearsal.{kind}\">{}</{element}>",
                    escape(message),
                    escape(text)
                );
                let _ = writeln!(xml, "    </testcase>");
            }
        }
    }
    let _ = writeln!(xml, "  </testsuite>\n</testsuites>");
    xml
}

/// Text as XML character data or an attribute value; a message keeps its line breaks.
fn escape(text: &str) -> String {
    crate::markup::escape(text, crate::markup::Breaks::Keep)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn junit_escapes_bidi_controls_as_the_text_report_does() {
        // U+202E must not reach the JUnit report raw while the text report escapes it.
        let name = "ok\u{202e}gpj.exe\u{2066}x\u{2029}y\u{85}z";
        assert_eq!(escape(name), printable(name).into_owned());
        assert_eq!(escape("a<b\u{1}"), "a&lt;b\\u{1}");
    }
}

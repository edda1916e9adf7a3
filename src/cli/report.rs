//! How `rehearsal run` reports: a text line per verdict, JSON lines, or a JUnit XML report.
//!
//! Every format counts the same way: a scenario passed, failed, or could not be used (bad
//! input: the exit code is then 2).

use std::io::Write;
use std::path::Path;

use std::fmt::Write as _;

use serde_json::json;

use super::{Exit, Format};
use crate::runner::Verdict;
use crate::scenario::ScenarioError;
use crate::trace::printable;

/// Collects verdicts as they come and writes them in the chosen format.
pub(super) struct Reporter {
    format: Format,
    show_trace: bool,
    passed: usize,
    failed: usize,
    bad: usize,
    internal: usize,
    /// The JUnit report's test cases, written at the end.
    cases: Vec<Case>,
}

/// One JUnit test case: a scenario file.
struct Case {
    name: String,
    classname: String,
    /// `failure` or `error`, its message, its type and its text.
    problem: Option<(&'static str, String, &'static str, String)>,
}

impl Reporter {
    pub(super) fn new(format: Format, show_trace: bool) -> Reporter {
        Reporter { format, show_trace, passed: 0, failed: 0, bad: 0, internal: 0, cases: Vec::new() }
    }

    /// One scenario's verdict.
    pub(super) fn scenario(&mut self, out: &mut dyn Write, file: &Path, verdict: &Verdict) {
        if verdict.passed() {
            self.passed += 1;
        } else if verdict.internal_error() {
            self.internal += 1;
        } else {
            self.failed += 1;
        }
        match self.format {
            Format::Text => {
                let _ = write!(out, "{}", verdict.report(Some(file)));
                if self.show_trace {
                    for line in verdict.run.trace.lines() {
                        let _ = writeln!(out, "    {line}");
                    }
                }
            }
            Format::Json => {
                let run = &verdict.run;
                let failures: Vec<_> =
                    verdict.failures.iter().map(|f| json!({"what": f.what, "lines": f.lines})).collect();
                let mut report = json!({
                    "file": file.to_string_lossy(),
                    "name": verdict.name,
                    "verdict": if verdict.passed() {
                        "pass"
                    } else if verdict.internal_error() {
                        "internal_error"
                    } else {
                        "fail"
                    },
                    "failures": failures,
                    "events": run.trace.entries.len(),
                    "elapsed_ms": run.elapsed.as_millis() as u64,
                });
                if self.show_trace {
                    report["trace"] = run.trace.entries.iter().map(|e| e.json()).collect();
                }
                let _ = writeln!(out, "{report}");
            }
            Format::Junit => {
                let (element, kind) = if verdict.internal_error() {
                    ("error", "rehearsal.internal")
                } else {
                    ("failure", "rehearsal.failure")
                };
                let problem = verdict
                    .failures
                    .first()
                    .map(|first| (element, first.what.clone(), kind, verdict.report(Some(file))));
                self.cases.push(Case { name: verdict.name.clone(), classname: classname(file), problem });
            }
        }
    }

    /// A file that could not be used (exit code 2); the others still run.
    pub(super) fn bad_input(&mut self, out: &mut dyn Write, err: &mut dyn Write, file: &Path, error: &ScenarioError) {
        self.bad += 1;
        let _ = writeln!(err, "error: {}", printable(&error.to_string()));
        match self.format {
            Format::Text => {}
            Format::Json => {
                let _ = writeln!(
                    out,
                    "{}",
                    json!({"file": file.to_string_lossy(), "verdict": "bad_input", "error": error.to_string()})
                );
            }
            Format::Junit => {
                let name = file.file_stem().map_or_else(|| file.to_string_lossy(), |s| s.to_string_lossy());
                let problem = Some(("error", error.to_string(), "rehearsal.bad_input", error.to_string()));
                self.cases.push(Case { name: name.into_owned(), classname: classname(file), problem });
            }
        }
    }

    /// The summary (or the whole JUnit document), and the exit code.
    pub(super) fn finish(self, out: &mut dyn Write) -> Exit {
        let (passed, failed, bad, internal) = (self.passed, self.failed, self.bad, self.internal);
        match self.format {
            Format::Text => {
                let bad_note = if bad > 0 { format!(", {bad} bad input") } else { String::new() };
                let internal_note = if internal > 0 { format!(", {internal} internal error") } else { String::new() };
                let _ = writeln!(out, "{passed} passed, {failed} failed{bad_note}{internal_note}");
            }
            Format::Json => {}
            Format::Junit => {
                let _ = write!(out, "{}", junit(&self.cases, failed, bad + internal));
            }
        }
        if internal > 0 {
            Exit::Internal
        } else if bad > 0 {
            Exit::BadInput
        } else if failed > 0 {
            Exit::Failed
        } else {
            Exit::Passed
        }
    }
}

fn classname(file: &Path) -> String {
    file.to_string_lossy().replace('\\', "/")
}

/// The JUnit XML document: one `testsuite` of every scenario file, in the subset of the
/// format that Jenkins' xunit schema (`tests/fixtures/junit/junit-10.xsd`) accepts. Written by
/// hand because quick-junit, the obvious crate, always writes a `disabled` attribute on
/// `testsuite` that this schema refuses.
fn junit(cases: &[Case], failures: usize, errors: usize) -> String {
    let tests = cases.len();
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let counts = format!("tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\"");
    let _ = writeln!(xml, "<testsuites name=\"rehearsal\" {counts}>");
    let _ = writeln!(xml, "  <testsuite name=\"rehearsal\" {counts}>");
    for case in cases {
        let head = format!("    <testcase name=\"{}\" classname=\"{}\"", escape(&case.name), escape(&case.classname));
        match &case.problem {
            None => {
                let _ = writeln!(xml, "{head}/>");
            }
            Some((element, message, kind, text)) => {
                let _ = writeln!(xml, "{head}>");
                let _ = writeln!(
                    xml,
                    "      <{element} message=\"{}\" type=\"{kind}\">{}</{element}>",
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

/// Text as XML character data or attribute value: markup characters escaped, and characters
/// XML 1.0 cannot hold at all (most control characters) written as `\u{..}`.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\t' | '\r' => {
                let _ = write!(out, "&#{};", c as u32);
            }
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

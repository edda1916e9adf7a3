//! Golden traces: each scenario's reviewed trace kept in a file, compared on every run.
//!
//! A golden file is an insta snapshot (`<name>.snap`: a `---` header with `source`,
//! `description` and `input_file`, then the body), so `cargo insta review` can show and accept
//! a changed trace, and this repository's own `cargo test` snapshots and
//! `rehearsal run scenarios --snapshots snapshots` read the very same files. A trace that is
//! missing or differs is written next to its golden file as `<name>.snap.new` for review;
//! accepting writes the golden file instead.
//!
//! The body is [`render`]: each turn's outcome, the virtual time, then the text trace. It is
//! a function of the run alone (virtual times, no wall clock), so it is the same on every
//! machine. This module compares and writes files; it does not run anything.

use std::fmt::Write as _;
#[cfg(feature = "cli")]
use std::io;
#[cfg(feature = "cli")]
use std::path::{Path, PathBuf};

use crate::run::Run;
use crate::scenario::Scenario;

/// The body of a scenario's golden file.
pub fn render(scenario: &Scenario, run: &Run) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "scenario: {}", scenario.name);
    for (i, outcome) in run.outcomes.iter().enumerate() {
        let _ = writeln!(
            out,
            "turn {}: {} {} budget_left={} steps={} message={:?}",
            i + 1,
            crate::trace::kind(outcome.kind),
            crate::trace::status(outcome.status),
            outcome.budget_left,
            outcome.steps,
            outcome.message
        );
    }
    let _ = writeln!(out, "elapsed: {} ms virtual", run.elapsed.as_millis());
    let _ = writeln!(out, "---");
    out.push_str(&run.trace.text());
    out
}

/// The name of a scenario file's golden file: its path under `root` (the folder it was
/// found in) with `/` as `__` and without `.json` (`roku/x.json` → `roku__x`); for a file
/// given on its own, its stem.
#[cfg(feature = "cli")]
pub fn name(file: &Path, root: &Path) -> String {
    let relative = file.strip_prefix(root).ok().filter(|r| !r.as_os_str().is_empty());
    let relative = relative.unwrap_or_else(|| Path::new(file.file_name().unwrap_or(file.as_os_str())));
    let without = relative.with_extension("");
    without.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("__")
}

/// How a trace compared with its golden file.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg(feature = "cli")]
pub enum Compared {
    /// The golden file holds this very trace.
    Same,
    /// There is no golden file yet; the trace was written to `pending` for review.
    Missing {
        /// The `.snap.new` file written.
        pending: PathBuf,
    },
    /// The golden file holds another trace; this one was written to `pending`.
    Differs {
        /// The `.snap.new` file written.
        pending: PathBuf,
        /// The first line (from 1, in the body) that differs.
        line: usize,
        /// That line in the golden file, and in this run.
        golden: String,
        /// That line in this run.
        now: String,
    },
    /// The trace was accepted: the golden file was written (or already held it).
    Accepted {
        /// Whether the golden file changed.
        changed: bool,
    },
}

/// The golden files of a folder.
#[derive(Clone, Debug)]
#[cfg(feature = "cli")]
pub struct Store {
    dir: PathBuf,
    /// Files the store must never write over (the run's inputs).
    inputs: Vec<PathBuf>,
}

#[cfg(feature = "cli")]
impl Store {
    /// Golden files kept in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Store {
        Store { dir: dir.into(), inputs: Vec::new() }
    }

    /// The store refuses to write a golden or pending file that is one of `inputs` (a
    /// scenario file called `x.snap`, a link), with an error naming it.
    pub fn protecting(mut self, inputs: Vec<PathBuf>) -> Store {
        self.inputs = inputs;
        self
    }

    /// Writes `text` to `path`, unless `path` is one of the inputs.
    fn write(&self, path: &Path, text: &str) -> io::Result<()> {
        if let Some(input) = self.inputs.iter().find(|input| same_file(path, input)) {
            return Err(io::Error::other(format!(
                "{} is an input of this run ({}): not overwritten",
                path.display(),
                input.display()
            )));
        }
        std::fs::write(path, text)
    }

    fn paths(&self, name: &str) -> (PathBuf, PathBuf) {
        (self.dir.join(format!("{name}.snap")), self.dir.join(format!("{name}.snap.new")))
    }

    /// Compares `body` with the golden file `name`; a new or changed trace is written as a
    /// pending `.snap.new` (or, when `accept`, as the golden file itself). `source` and
    /// `description` go in a new file's header.
    pub fn compare(
        &self,
        name: &str,
        source: &Path,
        description: &str,
        body: &str,
        accept: bool,
    ) -> io::Result<Compared> {
        let (golden, pending) = self.paths(name);
        // Read through the front door's bounded reader: a golden file that is a FIFO or a link
        // to a device is refused, not read until memory runs out.
        let existing = match std::fs::metadata(&golden) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            _ => Some(crate::load::read(&golden, "golden file").map_err(|e| io::Error::other(e.to_string()))?),
        };
        let stored = existing.as_deref().map(split);
        let same = stored.is_some_and(|(_, stored_body)| stored_body.trim_end() == body.trim_end());
        if same {
            remove_if_present(&pending)?;
            return Ok(if accept { Compared::Accepted { changed: false } } else { Compared::Same });
        }
        // A golden file keeps its header when only the trace changed.
        let header = stored.map_or_else(|| header(source, description), |(header, _)| header.to_string());
        let text = format!("{header}{}\n", body.trim_end());
        std::fs::create_dir_all(&self.dir)?;
        if accept {
            self.write(&golden, &text)?;
            remove_if_present(&pending)?;
            return Ok(Compared::Accepted { changed: true });
        }
        self.write(&pending, &text)?;
        Ok(match stored {
            None => Compared::Missing { pending },
            Some((_, stored_body)) => {
                let (mut old, mut new) = (stored_body.lines(), body.lines());
                let mut line = 1;
                loop {
                    match (old.next(), new.next()) {
                        (Some(a), Some(b)) if a == b => line += 1,
                        (a, b) => {
                            let show = |l: Option<&str>| l.map_or("(end of trace)".to_string(), str::to_string);
                            break Compared::Differs { pending, line, golden: show(a), now: show(b) };
                        }
                    }
                }
            }
        })
    }
}

/// Whether `a` and `b` are one file (by device and inode where there are, so a hard link
/// counts; else by canonical path). A path that does not exist is no file yet: false.
#[cfg(feature = "cli")]
pub fn same_file(a: &Path, b: &Path) -> bool {
    let (Ok(ma), Ok(mb)) = (std::fs::metadata(a), std::fs::metadata(b)) else { return false };
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        ma.dev() == mb.dev() && ma.ino() == mb.ino()
    }
    #[cfg(not(unix))]
    {
        let _ = (ma, mb);
        matches!((std::fs::canonicalize(a), std::fs::canonicalize(b)), (Ok(x), Ok(y)) if x == y)
    }
}

#[cfg(feature = "cli")]
fn remove_if_present(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// A new golden file's header, in insta's format. The path is written as it is when it is
/// plain (letters, digits, `/._-+@`, as every path of this repository's suite), and as a
/// quoted YAML string otherwise, so that no path (one holding a `---` line, a `: `, a `#`)
/// cuts the header short or changes what it says.
#[cfg(feature = "cli")]
fn header(source: &Path, description: &str) -> String {
    let source = yaml_scalar(&source.to_string_lossy().replace('\\', "/"));
    let mut out = format!("---\nsource: {source}\n");
    if !description.is_empty() {
        let _ = writeln!(out, "description: {}", serde_json::Value::from(description));
    }
    let _ = writeln!(out, "input_file: {source}\n---");
    out
}

/// `text` as a YAML scalar: plain when it is made of letters, digits and `/._-+@` and starts
/// with none of the characters YAML reads as markup, else a double-quoted string (JSON's
/// quoting, which YAML reads the same: newlines and quotes escaped).
#[cfg(feature = "cli")]
fn yaml_scalar(text: &str) -> String {
    let plain_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-' | '+' | '@');
    let plain_start = text.starts_with(|c: char| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_'));
    if plain_start && text.chars().all(plain_char) {
        text.to_string()
    } else {
        serde_json::Value::from(text).to_string()
    }
}

/// A golden file's header (through its closing `---` line) and body.
#[cfg(feature = "cli")]
fn split(text: &str) -> (&str, &str) {
    let Some(rest) = text.strip_prefix("---\n") else { return ("", text) };
    match rest.find("\n---\n") {
        Some(at) => {
            let end = 4 + at + 5;
            (&text[..end], &text[end..])
        }
        None => ("", text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_folder_path() {
        let root = Path::new("scenarios");
        assert_eq!(name(Path::new("scenarios/roku/x.json"), root), "roku__x");
        assert_eq!(name(Path::new("scenarios/x.json"), root), "x");
        assert_eq!(name(Path::new("one/file.json"), Path::new("one/file.json")), "file");
    }

    #[test]
    fn a_path_holding_a_dash_line_does_not_cut_the_golden_header() {
        // `source: a\n---\nb.json` must not end the header at the path's `---` line.
        let source = Path::new("odd\n---\nname: x.json");
        let text = format!("{}scenario: s\n---\n    line\n", header(source, "d"));
        let (head, body) = split(&text);
        assert_eq!(body, "scenario: s\n---\n    line\n");
        assert!(head.contains("source: \"odd\\n---\\nname: x.json\"\n"), "{head}");
        assert_eq!(
            header(Path::new("scenarios/roku/a-b_c.json"), ""),
            "---\nsource: scenarios/roku/a-b_c.json\ninput_file: scenarios/roku/a-b_c.json\n---\n"
        );
    }

    #[test]
    fn the_header_is_split_off_the_body() {
        let text = "---\nsource: a\n---\nscenario: s\n---\n    line\n";
        assert_eq!(split(text), ("---\nsource: a\n---\n", "scenario: s\n---\n    line\n"));
    }
}

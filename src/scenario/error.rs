//! What a scenario file that cannot be used is told: `ScenarioError` and the `Problem`
//! validation finds.
//!
//! It only says where and what; finding the problem is `parse` and `validate`.

use std::fmt;
use std::path::{Path, PathBuf};

use super::place::{self, Place};

/// A scenario file that cannot be used.
#[derive(Debug)]
pub enum ScenarioError {
    /// The file could not be read.
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// Bad JSON, a wrong type or an unknown field.
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column, in characters.
        column: usize,
        /// JSON path of the field (`lanes[0].replies[2]`), `.` for the top.
        field: String,
        /// What is wrong.
        message: String,
        /// What to do about it (`did you mean `lanes`?`), when there is something to say.
        hint: Option<String>,
    },
    /// Well-formed but inconsistent (an undeclared tool, a lane without selector, ...).
    Invalid {
        /// The file.
        path: PathBuf,
        /// Where the field stands in the file (none for a scenario built in code).
        place: Option<Place>,
        /// JSON path of the field.
        field: String,
        /// What is wrong.
        message: String,
        /// What to do about it, when there is something to say.
        hint: Option<String>,
    },
    /// Well-formed, but the core it is to run on does not implement what it needs (a family,
    /// an approval gate, ...): skipped rather than failed by a caller that sweeps cores.
    Unsupported {
        /// The file.
        path: PathBuf,
        /// The core's name (`SystemUnderTest::name`).
        core: String,
        /// What the scenario needs and the core lacks.
        missing: Vec<&'static str>,
    },
}

impl ScenarioError {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            ScenarioError::Io { path, .. }
            | ScenarioError::Parse { path, .. }
            | ScenarioError::Invalid { path, .. }
            | ScenarioError::Unsupported { path, .. } => path,
        }
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (path, place, field, message, hint) = match self {
            ScenarioError::Io { path, message } => return write!(f, "{}: cannot read: {message}", path.display()),
            ScenarioError::Unsupported { path, core, missing } => {
                return write!(f, "{}: the core `{core}` does not implement {}", path.display(), missing.join(", "));
            }
            ScenarioError::Parse { path, line, column, field, message, hint } => {
                (path, Some(Place { line: *line, column: *column }), field, message, hint)
            }
            ScenarioError::Invalid { path, place, field, message, hint } => (path, *place, field, message, hint),
        };
        write!(f, "{}", path.display())?;
        if let Some(place) = place {
            write!(f, ":{place}")?;
        }
        write!(f, ": at `{field}`: {message}")?;
        if let Some(hint) = hint {
            write!(f, "; {hint}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ScenarioError {}

/// Something validation found wrong: the field's JSON path, what is wrong, and what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// JSON path of the field (`lanes[0].replies[2].calls[1].tool`), `.` for the top.
    pub field: String,
    /// What is wrong.
    pub message: String,
    /// What to do about it (`did you mean `Agent`?`, the accepted names), if anything.
    pub hint: Option<String>,
}

impl Problem {
    /// A problem at `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Problem {
        Problem { field: field.into(), message: message.into(), hint: None }
    }

    /// With a hint.
    pub fn hint(mut self, hint: impl Into<String>) -> Problem {
        self.hint = Some(hint.into());
        self
    }

    /// With a hint, if there is one.
    pub fn maybe_hint(mut self, hint: Option<String>) -> Problem {
        self.hint = hint;
        self
    }

    /// The error of file `path`; with the file's text, it names the line and column too.
    pub fn at(self, path: &Path, text: Option<&str>) -> ScenarioError {
        ScenarioError::Invalid {
            path: path.to_path_buf(),
            place: text.map(|text| place::locate(text.strip_prefix('\u{feff}').unwrap_or(text), &self.field)),
            field: self.field,
            message: self.message,
            hint: self.hint,
        }
    }
}

impl From<(String, String)> for Problem {
    fn from((field, message): (String, String)) -> Problem {
        Problem::new(field, message)
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at `{}`: {}", self.field, self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, "; {hint}")?;
        }
        Ok(())
    }
}

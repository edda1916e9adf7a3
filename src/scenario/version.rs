//! The format version: the newest this rehearsal reads, and the problem a file of another
//! version is told about.
//!
//! It owns only the `format` number; what each version changes is docs/format-versions.md, and
//! the fields themselves are in `format`.

use serde::Deserialize;

use super::error::Problem;

/// The newest scenario format version this rehearsal reads, the one a file without `format`
/// is read as. Version 1 is the format as docs/scenarios.md describes it; version 2 adds
/// `check.recorded` (`rehearsal record`); see docs/format-versions.md for what each version
/// changes.
pub const FORMAT: u32 = 3;

/// The problem with a file's `format`, if it has one this rehearsal cannot read.
pub(super) fn check_format(format: Option<u64>) -> Result<(), Problem> {
    match format {
        None => Ok(()),
        Some(n) if (1..=u64::from(FORMAT)).contains(&n) => Ok(()),
        Some(0) => Err(Problem::new("format", "format versions start at 1")
            .hint(format!("write `\"format\": {FORMAT}` or leave the field out"))),
        Some(n) => Err(Problem::new(
            "format",
            format!("this file is written in scenario format {n}, but this rehearsal reads formats up to {FORMAT}"),
        )
        .hint(format!(
            "use a rehearsal that reads format {n} (docs/format-versions.md says what each version adds), or write the file in format {FORMAT}"
        ))),
    }
}

/// A future format in a file that did not parse: only its top-level `format` is read.
pub(super) fn future_format(json: &str) -> Option<Problem> {
    #[derive(Deserialize)]
    struct Version {
        format: Option<serde_json::Value>,
    }
    let version: Version = serde_json::from_str(json).ok()?;
    let n = version.format?.as_u64()?;
    check_format(Some(n)).err().filter(|_| n > u64::from(FORMAT))
}

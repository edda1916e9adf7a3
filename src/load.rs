//! The front door for input: a scenario file, or a scenario built in code, becomes a
//! [`Loaded`] scenario (the scenario with its resolved profiles) after every check, whoever
//! asks: `rehearsal run`, [`crate::runner::Runner::check`] and `check_file`, the fuzzer and the
//! tests all come in here, so a file one of them refuses is refused by all.
//!
//! The checks, in order: the file is read ([`read`]: a regular file only, under
//! [`MAX_FILE_BYTES`], UTF-8 with the line and column of the first byte that is not); it is
//! parsed and validated (`scenario::parse`, `scenario::validate`); the profile files written
//! into it are read ([`profiles`]); the core can run it (its capabilities cover what the
//! scenario needs: [`ScenarioError::Unsupported`] otherwise); its profiles are resolved from its
//! profile folders, the files written into it and the inline ones ([`resolve_profiles`]); and
//! every profile name it uses names one of them (`scenario::check_profile_names`, with a
//! "did you mean").
//!
//! Bad input and findings are kept apart here. A malformed file (a scenario or a profile file
//! that does not parse, lacks a `description`, or names an unknown profile) is bad input: a
//! [`ScenarioError`], exit 2 on the command line. A well-formed profile that the core's loader
//! refuses, or reads otherwise than it is written, is a finding about the system under test,
//! judged by the oracle `profiles_refused` and `oracle.context.profiles-as-written`
//! ([`crate::internals::oracles`]), never reported as bad input.
//!
//! This module reads files and checks them; it does not run (that is [`crate::runner`]) and it
//! does not define the file format (that is [`crate::scenario`], which imports nothing from
//! here, so the two do not import each other).

use std::path::{Path, PathBuf};

use crate::scenario::{self, Problem, Scenario, ScenarioError};
use crate::sut::{Profile, SystemUnderTest};

pub mod profiles;

/// The largest file read (64 MiB): scenarios, profiles, golden files and coverage
/// requirements. A file past it is refused before it is read, so a link to a device such as
/// `/dev/zero` cannot read forever.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// A scenario after every check of the front door, with its profiles resolved: what the
/// runner runs.
#[derive(Clone, Debug)]
pub struct Loaded {
    scenario: Scenario,
    profiles: Vec<Profile>,
    file: Option<PathBuf>,
}

impl Loaded {
    /// The scenario.
    pub fn scenario(&self) -> &Scenario {
        &self.scenario
    }

    /// Its profiles, resolved ([`resolve_profiles`]).
    pub fn profiles(&self) -> &[Profile] {
        &self.profiles
    }

    /// The file it was loaded from; none for a scenario built in code.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// The scenario and its profiles, taken apart.
    pub fn into_parts(self) -> (Scenario, Vec<Profile>) {
        (self.scenario, self.profiles)
    }
}

/// Reads, parses and checks a scenario file for `sut`; profile folders are relative to the
/// file's folder.
pub fn file(path: &Path, sut: &dyn SystemUnderTest) -> Result<Loaded, ScenarioError> {
    let text = read(path, "scenario file")?;
    let scenario = scenario::parse(path, &text)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let profiles = checked(&scenario, Some(sut), dir, path, Some(&text))?;
    Ok(Loaded { scenario, profiles, file: Some(path.to_path_buf()) })
}

/// Reads, parses and checks a scenario file for a runtime outside this process (`rehearsal
/// serve` and `drive`): every check of [`file()`] but the core's capabilities, which no linked
/// core declares there; the runtime's description decides what applies
/// (`runtime::Description::missing`).
pub fn outside(path: &Path) -> Result<Loaded, ScenarioError> {
    outside_for(path, &scenario::Vocabulary::core())
}

/// [`outside`] for a runtime whose dialect reads the tools of `vocabulary`
/// ([`crate::dialect::Dialect::vocabulary`]): those are called without declaring them, and a
/// built-in core name the runtime has as its own tool may be declared.
pub fn outside_for(path: &Path, vocabulary: &scenario::Vocabulary) -> Result<Loaded, ScenarioError> {
    let text = read(path, "scenario file")?;
    let scenario = scenario::parse_with(path, &text, vocabulary)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let profiles = checked(&scenario, None, dir, path, Some(&text))?;
    Ok(Loaded { scenario, profiles, file: Some(path.to_path_buf()) })
}

/// Checks a scenario built in code exactly as a file is checked, for `sut`; profile folders
/// are relative to the current folder.
pub fn built(scenario: Scenario, sut: &dyn SystemUnderTest) -> Result<Loaded, ScenarioError> {
    let profiles = built_profiles(&scenario, sut)?;
    Ok(Loaded { scenario, profiles, file: None })
}

/// [`built`]'s checks of a borrowed scenario, for a caller that keeps it (the fuzzer, once per
/// case): the resolved profiles, or the same error.
pub(crate) fn built_profiles(scenario: &Scenario, sut: &dyn SystemUnderTest) -> Result<Vec<Profile>, ScenarioError> {
    let at = Path::new("(scenario built in code)");
    scenario::validate(scenario).map_err(|problem| problem.at(at, None))?;
    checked(scenario, Some(sut), Path::new("."), at, None)
}

/// The checks after validation, shared by every door; `path` and `text` place the errors. With
/// no `sut` (a runtime outside this process), the capability check is the runtime's.
fn checked(
    scenario: &Scenario,
    sut: Option<&dyn SystemUnderTest>,
    dir: &Path,
    path: &Path,
    text: Option<&str>,
) -> Result<Vec<Profile>, ScenarioError> {
    check_profile_files(scenario).map_err(|problem| problem.at(path, text))?;
    if let Some(sut) = sut {
        let missing = unsupported(sut, scenario);
        if !missing.is_empty() {
            return Err(ScenarioError::Unsupported { path: path.to_path_buf(), core: sut.name().to_string(), missing });
        }
    }
    let profiles = resolve_profiles(scenario, dir)?;
    scenario::check_profile_names(scenario, profiles.iter().map(|p| p.name.as_str()))
        .map_err(|problem| problem.at(path, text))?;
    Ok(profiles)
}

/// What of `scenario`'s needs `sut` does not implement (empty when it runs it).
pub fn unsupported(sut: &dyn SystemUnderTest, scenario: &Scenario) -> Vec<&'static str> {
    sut.capabilities().missing(&scenario.requires())
}

/// Reads each file written into the scenario (`profile_files`) as a profile folder's file is
/// read, so a file the loader refuses is placed in the scenario file, at its field.
fn check_profile_files(s: &Scenario) -> Result<(), Problem> {
    for (name, text) in &s.profile_files {
        let field = format!("profile_files[{}]", crate::trace::quoted(name));
        let stem = name.strip_suffix(".md").unwrap_or_default();
        if stem.is_empty() || name.contains(['/', '\\']) {
            return Err(Problem::new(
                field,
                "a profile file is named like `reviewer.md`: a name ending in `.md`, without folders",
            ));
        }
        let problem = match profiles::parse(Path::new(name), text) {
            Ok(_) => continue,
            Err(ScenarioError::Parse { line, column, field: part, message, hint, .. }) => {
                Problem { field, message: format!("line {line}, column {column} of the file, {part}: {message}"), hint }
            }
            Err(ScenarioError::Invalid { field: part, message, hint, .. }) => {
                Problem { field, message: format!("{part}: {message}"), hint }
            }
            Err(other @ (ScenarioError::Io { .. } | ScenarioError::Unsupported { .. })) => {
                Problem::new(field, other.to_string())
            }
        };
        return Err(problem);
    }
    Ok(())
}

/// Resolves a scenario's profiles: files from home, then workspace (which overrides home),
/// then the files written into the scenario (`profile_files`, read as workspace files), then
/// inline ones (which override all). Reads the folders' files; call before a run, never
/// during. A scenario without `profile_dirs` reads nothing from disk.
pub fn resolve_profiles(scenario: &Scenario, dir: &Path) -> Result<Vec<Profile>, ScenarioError> {
    let mut by_name: Vec<Profile> = Vec::new();
    let mut add = |profile: Profile| match by_name.iter_mut().find(|p| p.name == profile.name) {
        Some(slot) => *slot = profile,
        None => by_name.push(profile),
    };
    for folder in [&scenario.profile_dirs.home, &scenario.profile_dirs.workspace].into_iter().flatten() {
        for profile in profiles::load_dir(&dir.join(folder).join(".agents").join("agents"))? {
            add(profile);
        }
    }
    for (name, text) in &scenario.profile_files {
        add(profiles::parse(&Path::new("profile_files").join(name), text)?);
    }
    for spec in &scenario.profiles {
        add(profiles::from_spec(spec));
    }
    Ok(by_name)
}

/// The one bounded reader: the text of `path`, read only when it is a regular file (a FIFO, a
/// socket, a device or a link to one is refused unopened, so it cannot hang or read forever)
/// and only up to [`MAX_FILE_BYTES`]. `what` names the kind of file in errors (`scenario file`,
/// `profile file`, `golden file`, `coverage requirements file`). A byte that is not UTF-8 is refused
/// with its line and column.
pub fn read(path: &Path, what: &str) -> Result<String, ScenarioError> {
    use std::io::Read;
    let io = |message: String| ScenarioError::Io { path: path.to_path_buf(), message };
    let metadata = std::fs::metadata(path).map_err(|e| io(e.to_string()))?;
    if !metadata.is_file() {
        return Err(io(format!(
            "not a regular file (a FIFO, a socket, a device or a folder): a {what} is not read from it"
        )));
    }
    let mut bytes = Vec::new();
    let file = std::fs::File::open(path).map_err(|e| io(e.to_string()))?;
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(|e| io(e.to_string()))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(io(format!("larger than {MAX_FILE_BYTES} bytes, the most a {what} may hold")));
    }
    String::from_utf8(bytes).map_err(|e| {
        let bytes = e.as_bytes();
        let at = e.utf8_error().valid_up_to();
        let (line, column) = line_and_column(&bytes[..at]);
        ScenarioError::Parse {
            path: path.to_path_buf(),
            line,
            column,
            field: ".".into(),
            message: format!("byte 0x{:02x} is not UTF-8: a {what} is read as UTF-8 text", bytes[at]),
            hint: Some("save the file as UTF-8 (a Latin-1 `é` is one byte, 0xe9; in UTF-8 it is two)".into()),
        }
    })
}

/// The 1-based line and column (in characters) just past `valid`, a UTF-8 prefix.
fn line_and_column(valid: &[u8]) -> (usize, usize) {
    let text = std::str::from_utf8(valid).expect("the prefix before the first bad byte is UTF-8");
    let line = text.matches('\n').count() + 1;
    let last = text.rfind('\n').map_or(text, |at| &text[at + 1..]);
    (line, last.chars().count() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_byte_is_placed_by_line_and_column() {
        assert_eq!(line_and_column(b""), (1, 1));
        assert_eq!(line_and_column(b"{\n  \"name\": \"caf"), (2, 15));
        assert_eq!(line_and_column("é\n\nab".as_bytes()), (3, 3));
    }
}

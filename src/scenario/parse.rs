//! Reading a scenario file: notes taken out, JSON parsed with the place of any error, then
//! validated.
//!
//! It does not check anything types cannot say (that is `validate`, which it calls).

use std::path::Path;

use super::error::ScenarioError;
use super::format::Scenario;
use super::place::Place;
use super::validate::validate_with;
use super::version::future_format;
use super::vocabulary::Vocabulary;
use super::{place, suggest};

/// Parses scenario JSON; `path` only names the source in errors.
///
/// Notes for readers are taken out first: a `"$comment"` key holding a string in any object
/// (but inside a call's `args`, which are sent as written), and `"$schema"` at the top.
pub fn parse(path: &Path, json: &str) -> Result<Scenario, ScenarioError> {
    parse_with(path, json, &Vocabulary::core())
}

/// [`parse`] for calls answered by `vocabulary`'s runtime (a runtime in another process: its
/// dialect's tool names).
pub fn parse_with(path: &Path, json: &str, vocabulary: &Vocabulary) -> Result<Scenario, ScenarioError> {
    // A byte-order mark is accepted, as in profile files.
    let json = json.strip_prefix('\u{feff}').unwrap_or(json);
    // serde would read a top-level array as the struct's fields by position.
    let start = json.find(|c: char| !c.is_whitespace());
    if let Some(at) = start.filter(|at| !json[*at..].starts_with('{')) {
        let place = Place::of_offset(json, at);
        return Err(ScenarioError::Parse {
            path: path.to_path_buf(),
            line: place.line,
            column: place.column,
            field: ".".into(),
            message: "a scenario file holds one JSON object (`{ \"name\": …, \"lanes\": […], \"turns\": […] }`)".into(),
            hint: None,
        });
    }
    let json = place::without_notes(json);
    let parse_error = |e: serde_json::Error, field: String| {
        let message = e.to_string();
        // serde_json appends " at line L column C"; the place is printed in front instead.
        let message = message.rsplit_once(" at line ").map_or(message.clone(), |(m, _)| m.to_string());
        let place = Place::from_serde(&json, e.line(), e.column());
        ScenarioError::Parse {
            path: path.to_path_buf(),
            line: place.line,
            column: place.column,
            field,
            hint: suggest::hint_for_serde(&message),
            message,
        }
    };
    let de = &mut serde_json::Deserializer::from_str(&json);
    let scenario: Scenario = serde_path_to_error::deserialize(&mut *de).map_err(|e| {
        // A file of a newer format may use fields this version does not know: its version is
        // the error worth reporting, not the first field it does not know.
        if let Some(problem) = future_format(&json) {
            return problem.at(path, Some(&json));
        }
        let field = field_path(&e.path().to_string());
        parse_error(e.into_inner(), field)
    })?;
    // Anything after the scenario object (a stray brace, a second object) is an error too.
    de.end().map_err(|e| parse_error(e, ".".to_string()))?;
    validate_with(&scenario, vocabulary).map_err(|problem| problem.at(path, Some(&json)))?;
    Ok(scenario)
}

/// A JSON path without the `?` segments serde_path_to_error writes where a syntax error left
/// no key; `.` for the top.
fn field_path(path: &str) -> String {
    let kept: Vec<&str> = path.split('.').filter(|segment| *segment != "?" && !segment.is_empty()).collect();
    if kept.is_empty() { ".".to_string() } else { kept.join(".") }
}

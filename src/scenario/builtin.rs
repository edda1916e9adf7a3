//! Scripted calls of the core's built-in tools checked at load against the parameter schemas
//! the core offers the model (`core::pseudo`): an argument the tool does not have, a missing
//! required one, or a value of the wrong JSON type is an authoring error, unless the call says
//! `"bad_args": true` (the model sends bad arguments on purpose).
//!
//! The schemas are the core's own, so this module knows no argument by heart; it only reads
//! the few schema shapes the built-in tools use (`string`, `number`, a list of strings).

use serde_json::Value;

use super::Problem;
use super::suggest;

/// What the author is told to do when the bad argument is meant.
const OPT_OUT: &str = "mark the call `\"bad_args\": true` if the model sends it on purpose";

/// The built-in tool `name`'s parameter schema, if `name` is one.
pub fn parameters(name: &str) -> Option<&'static Value> {
    crate::core::pseudo::all().iter().find(|spec| spec.name == name).map(|spec| &*spec.parameters)
}

/// Names of the built-in tools, in the order the core offers them.
pub fn names() -> impl Iterator<Item = &'static str> {
    crate::core::pseudo::all().iter().map(|spec| spec.name.as_str())
}

/// Names an author of one family writes for the other family's argument.
fn known_confusion(tool: &str, given: &str) -> Option<&'static str> {
    match (tool, given) {
        ("subagent", "task") => Some("prompt"),
        ("Agent", "prompt") => Some("task"),
        _ => None,
    }
}

/// A schema's type, in words.
fn kind(schema: &Value) -> String {
    match schema["type"].as_str() {
        Some("array") => format!("a list of {}s", schema["items"]["type"].as_str().unwrap_or("value")),
        Some("object") => "an object".to_string(),
        Some("integer") => "an integer".to_string(),
        Some(other) => format!("a {other}"),
        None => "a value".to_string(),
    }
}

/// A JSON value's type, in words.
fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Whether `value` has the schema's type (the shapes the built-in tools use).
fn fits(schema: &Value, value: &Value) -> bool {
    match schema["type"].as_str() {
        Some("string") => value.is_string(),
        Some("number") => value.is_number(),
        Some("integer") => value.is_i64() || value.is_u64(),
        Some("boolean") => value.is_boolean(),
        Some("object") => value.is_object(),
        Some("array") => value.as_array().is_some_and(|items| items.iter().all(|item| fits(&schema["items"], item))),
        _ => true,
    }
}

/// The accepted arguments of a tool, for a hint: `prompt` (a string, required), ….
fn accepted(schema: &Value) -> String {
    let required = required(schema);
    let properties = schema["properties"].as_object();
    let list: Vec<String> = properties
        .into_iter()
        .flatten()
        .map(|(name, property)| {
            let need = if required.contains(&name.as_str()) { ", required" } else { "" };
            format!("`{name}` ({}{need})", kind(property))
        })
        .collect();
    if list.is_empty() { "no arguments".to_string() } else { list.join(", ") }
}

fn required(schema: &Value) -> Vec<&str> {
    schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect()
}

/// Checks one scripted call of the built-in tool `tool` (its arguments already known to be an
/// object) at `place` (the call's JSON path).
pub fn check_call(tool: &str, args: &Value, place: impl std::fmt::Display) -> Result<(), Problem> {
    let Some(schema) = parameters(tool) else { return Ok(()) };
    let Some(args) = args.as_object() else { return Ok(()) };
    let no_properties = serde_json::Map::new();
    let properties = schema["properties"].as_object().unwrap_or(&no_properties);
    for (name, value) in args {
        let Some(property) = properties.get(name) else {
            let guess =
                known_confusion(tool, name).or_else(|| suggest::nearest(name, properties.keys().map(String::as_str)));
            let guess = guess.map(|g| format!("did you mean `{g}`? ")).unwrap_or_default();
            return Err(Problem::new(format!("{place}.args.{name}"), format!("`{tool}` has no argument `{name}`"))
                .hint(format!("{guess}It accepts {}; {OPT_OUT}", accepted(schema))));
        };
        if !fits(property, value) {
            return Err(Problem::new(
                format!("{place}.args.{name}"),
                format!("argument `{name}` of `{tool}` is {}, not {}", kind(property), kind_of(value)),
            )
            .hint(OPT_OUT));
        }
    }
    for name in required(schema) {
        if !args.contains_key(name) {
            return Err(Problem::new(
                format!("{place}.args"),
                format!("`{tool}` needs the argument `{name}` ({})", kind(&properties[name])),
            )
            .hint(format!("it accepts {}; {OPT_OUT}", accepted(schema))));
        }
    }
    if tool == "subagent"
        && let Some(session) = args.get("session").and_then(Value::as_str)
        && let Some(kind) = looks_like_session_kind(session)
    {
        return Err(Problem::new(
            format!("{place}.args.session"),
            format!("session `{session}` would name a session of its own, since only `temp` and `fork` are kinds"),
        )
        .hint(format!(
            "did you mean `{kind}`? If a named session is meant, choose a name further from `temp` and `fork`, or {OPT_OUT}"
        )));
    }
    Ok(())
}

/// The session kind (`temp`, `fork`) a session name looks like a slip for: the same word in
/// another case, one edit away, or the word with letters after it (`forked`, `temporary`).
fn looks_like_session_kind(session: &str) -> Option<&'static str> {
    let lower = session.to_lowercase();
    ["temp", "fork"].into_iter().find(|kind| {
        session != *kind
            && (lower == *kind
                || strsim::damerau_levenshtein(&lower, kind) <= 1
                || lower.strip_prefix(kind).is_some_and(|rest| rest.chars().all(|c| c.is_ascii_alphabetic())))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn problem(tool: &str, args: Value) -> Problem {
        check_call(tool, &args, "c").expect_err("a bad call")
    }

    #[test]
    fn good_calls_pass() {
        for (tool, args) in [
            ("subagent", json!({"prompt": "p", "session": "notes", "allowed_tools": ["Read"], "timeout_seconds": -5})),
            ("subagent.wait", json!({"task_ids": ["$task1"], "timeout_seconds": 1.5})),
            ("subagent.wait", json!({})),
            ("Agent", json!({"task": ""})),
            ("subagent", json!({"prompt": "p", "session": "temp/sub-6e789e6a"})),
            ("Read", json!({"anything": 1})),
        ] {
            check_call(tool, &args, "c").unwrap_or_else(|p| panic!("{tool} {args}: {p:?}"));
        }
    }

    #[test]
    fn unknown_arguments_name_the_accepted_ones() {
        let p = problem("subagent", json!({"task": "alpha"}));
        assert_eq!(p.field, "c.args.task");
        assert_eq!(p.message, "`subagent` has no argument `task`");
        let hint = p.hint.unwrap();
        assert!(hint.starts_with("did you mean `prompt`? It accepts `prompt` (a string, required),"), "{hint}");
        let p = problem("subagent.wait", json!({"ids": ["$task1"]}));
        assert!(p.hint.unwrap().starts_with("did you mean `task_ids`?"));
        let p = problem("subagent.wait", json!({"task_ids": [], "timeout": 1}));
        assert!(p.hint.unwrap().starts_with("did you mean `timeout_seconds`?"));
    }

    #[test]
    fn wrong_types_and_missing_arguments() {
        let p = problem("subagent.wait", json!({"timeout_seconds": "soon"}));
        assert_eq!(p.message, "argument `timeout_seconds` of `subagent.wait` is a number, not a string");
        let p = problem("subagent.wait", json!({"task_ids": ["a", 1]}));
        assert_eq!(p.message, "argument `task_ids` of `subagent.wait` is a list of strings, not a list");
        let p = problem("fail", json!({}));
        assert_eq!((p.field.as_str(), p.message.as_str()), ("c.args", "`fail` needs the argument `reason` (a string)"));
    }

    #[test]
    fn session_names_next_to_a_kind_are_refused() {
        for (name, kind) in
            [("forked", "fork"), ("Fork", "fork"), ("tmp", "temp"), ("temporary", "temp"), ("frok", "fork")]
        {
            let p = problem("subagent", json!({"prompt": "p", "session": name}));
            assert!(p.hint.unwrap().starts_with(&format!("did you mean `{kind}`?")), "{name}");
        }
        for name in ["notes", "research", "inherit", "temp/sub-1", "fork-2"] {
            check_call("subagent", &json!({"prompt": "p", "session": name}), "c").unwrap();
        }
    }
}

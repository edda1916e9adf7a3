//! Oracle clause `oracle.context.profiles-as-written`: the profiles the core was given are the
//! ones the scenario writes.
//!
//! Every other oracle judges a run against the profiles the loader produced, so a loader that
//! misreads a profile (a wrong default name, a list left unsplit, seconds read as
//! milliseconds, one field copied into another) would be agreed with everywhere. This clause
//! reads the scenario's own profiles again, by its own code, and compares: each inline profile
//! (`profiles`) and each file written into the scenario (`profile_files`), read as
//! `bub.profile.fields` says (a missing `name` is the file's name minus `.md`; `tools` and
//! `skills` a list or one comma-separated string; `timeout_seconds` in seconds), the inline
//! ones replacing files of the same name (`bub.profile.inline-over-files`). Profiles from
//! profile folders are not read again here (their files are not part of the evidence).
//! Whitespace around a description or a body is not judged: where it matters, in the system
//! prompt, the context oracle judges it. Without the `subagent` family no profile is used, and
//! nothing is judged.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::time::Duration;

use super::{Oracle, Report, Violation};
use crate::evidence::Evidence;
use crate::scenario::ProfileSpec;

/// A profile as the scenario writes it, and where it is written.
#[derive(Debug, PartialEq)]
struct Written {
    source: String,
    name: String,
    description: String,
    model: Option<String>,
    reasoning_effort: Option<String>,
    tools: Option<Vec<String>>,
    skills: Option<Vec<String>>,
    timeout: Option<Duration>,
    body: String,
}

fn seconds(s: f64) -> Duration {
    Duration::from_secs_f64(s.clamp(0.0, crate::rules::MAX_SECONDS))
}

/// An inline profile, field by field. It says what the loader's `profiles::from_spec` says, on
/// purpose: the oracle must not take the loader's word for it.
fn inline(i: usize, spec: &ProfileSpec) -> Written {
    Written {
        source: format!("profiles[{i}]"),
        name: spec.name.clone(),
        description: spec.description.clone(),
        model: spec.model.clone(),
        reasoning_effort: spec.reasoning_effort.clone(),
        tools: spec.tools.clone(),
        skills: spec.skills.clone(),
        timeout: spec.timeout_seconds.map(seconds),
        body: spec.body.clone(),
    }
}

/// Reads a profile file's text: a `---` line, YAML front matter, a `---` line, the body.
#[cfg(feature = "profile-files")]
fn file(file_name: &str, text: &str) -> Result<Written, String> {
    use serde_norway::Value;
    let text = text.trim_start_matches('\u{feff}');
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    if lines.first().map(|l| l.trim_end()) != Some("---") {
        return Err("it does not start with a `---` line".into());
    }
    let close = (1..lines.len()).find(|&i| lines[i].trim_end() == "---").ok_or("its front matter is not closed")?;
    let front: Value = serde_norway::from_str(&lines[1..close].concat()).map_err(|e| e.to_string())?;
    let field = |key: &str| match &front {
        Value::Mapping(map) => map.get(key),
        _ => None,
    };
    let string = |key: &str| field(key).and_then(Value::as_str).map(str::to_string);
    let list = |key: &str| {
        field(key).map(|v| match v {
            Value::Sequence(items) => items.iter().filter_map(Value::as_str).map(str::to_string).collect(),
            Value::String(joined) => {
                joined.split(',').map(str::trim).filter(|n| !n.is_empty()).map(str::to_string).collect()
            }
            _ => Vec::new(),
        })
    };
    let description = string("description").filter(|d| !d.trim().is_empty()).ok_or("it has no description")?;
    let stem = file_name.strip_suffix(".md").unwrap_or(file_name);
    Ok(Written {
        source: format!("profile_files[\"{file_name}\"]"),
        name: string("name").map(|n| n.trim().to_string()).filter(|n| !n.is_empty()).unwrap_or(stem.to_string()),
        description,
        model: string("model"),
        reasoning_effort: string("reasoning_effort"),
        tools: list("tools"),
        skills: list("skills"),
        timeout: field("timeout_seconds").and_then(Value::as_f64).map(seconds),
        body: lines[close + 1..].concat(),
    })
}

#[cfg(not(feature = "profile-files"))]
fn file(_: &str, _: &str) -> Result<Written, String> {
    Err("this build reads no profile files".into())
}

/// The scenario's own profiles, by name, each from the last source that names it: the files
/// written into it in file-name order, then the inline ones.
fn written(files: &BTreeMap<String, String>, specs: &[ProfileSpec]) -> Result<Vec<Written>, String> {
    let mut out: Vec<Written> = Vec::new();
    let read = files.iter().map(|(name, text)| file(name, text).map_err(|e| format!("profile_files[\"{name}\"]: {e}")));
    let declared = specs.iter().enumerate().map(|(i, spec)| Ok(inline(i, spec)));
    for profile in read.chain(declared) {
        let profile = profile?;
        match out.iter_mut().find(|p| p.name == profile.name) {
            Some(slot) => *slot = profile,
            None => out.push(profile),
        }
    }
    Ok(out)
}

pub(super) fn profiles(e: &Evidence, r: &mut Report) {
    // Profiles are the `subagent` family's: without it no profile is listed or used.
    let Some(setup) = e.setup.filter(|_| e.rules.subagent_tools) else { return };
    let expected = match written(&setup.profile_files, &setup.profile_specs) {
        Ok(expected) => expected,
        Err(e) => return r.add_run(Oracle::Context, format!("the core read the scenario's profiles, but {e}")),
    };
    for want in &expected {
        let Some(got) = setup.profiles.iter().find(|p| p.name == want.name) else {
            let read: Vec<String> = setup.profiles.iter().map(|p| format!("`{}`", p.name)).collect();
            let read = if read.is_empty() { "none".to_string() } else { read.join(", ") };
            r.add_run(
                Oracle::Context,
                format!("{} names a profile `{}`; the profiles the core read are {read}", want.source, want.name),
            );
            continue;
        };
        // Compared as values; only a difference is rendered.
        let mut differ = |field: &str, core: &dyn Debug, written: &dyn Debug, same: bool| {
            if !same {
                r.add_run(
                    Oracle::Context,
                    format!(
                        "profile `{}`: the core read its {field} as {core:?}; {} writes {written:?}",
                        want.name, want.source
                    ),
                );
            }
        };
        let (description, body) =
            ((got.description.trim(), want.description.trim()), (got.body.trim(), want.body.trim()));
        differ("description", &description.0, &description.1, description.0 == description.1);
        differ("model", &got.model, &want.model, got.model == want.model);
        differ(
            "reasoning_effort",
            &got.reasoning_effort,
            &want.reasoning_effort,
            got.reasoning_effort == want.reasoning_effort,
        );
        differ("tools", &got.tools, &want.tools, got.tools == want.tools);
        differ("skills", &got.skills, &want.skills, got.skills == want.skills);
        differ("timeout_seconds", &got.timeout, &want.timeout, got.timeout == want.timeout);
        differ("body", &body.0, &body.1, body.0 == body.1);
    }
}

/// The verdict on a scenario whose profiles the core's loader refused (so no run started):
/// a violation when this oracle reads every one of them, `None` when it cannot either (an
/// authoring error, not the core's).
pub fn refused(files: &BTreeMap<String, String>, specs: &[ProfileSpec], error: &str) -> Option<Violation> {
    written(files, specs).ok()?;
    Some(Violation {
        oracle: Oracle::Context,
        agent: "main".into(),
        at: Duration::ZERO,
        message: format!("the core refused the scenario's profiles, which read as written: {error}"),
        lines: Vec::new(),
    })
}

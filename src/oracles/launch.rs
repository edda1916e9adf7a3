//! What a `subagent` call asks for, derived from its arguments, the scenario's setup and the
//! rules (`docs/rules/bub.md` §1.3, §3.2, §5, §6): the refusal it must meet, or the child it
//! starts (profile, tools, skills, model, reasoning effort, time limit).
//!
//! The checks run in the documented order: depth, prompt, profile, tools, skills. Whether the
//! named session is in use depends on the tasks of the moment and is oracle `sessions`'s.

use std::time::Duration;

use serde_json::Value;

use super::DEPTH_ERROR;
use super::index::{list_arg, same_name, seconds_arg, string_arg};
use crate::evidence::Setup;
use crate::rules::Rules;
use crate::sut::Profile;

/// The terminal tools every child keeps; naming them grants nothing more
/// (`bub.child.allowed-tools-terminal`).
const TERMINALS: [&str; 2] = ["final_answer", "fail"];

/// The child a valid `subagent` call starts.
pub(super) struct Launch<'s> {
    /// The profile it runs under.
    pub profile: Option<&'s Profile>,
    /// The catalog tools it is granted, in catalog order.
    pub tools: Vec<&'s str>,
    /// The skills it is granted, in the root's order.
    pub skills: Vec<&'s str>,
    /// The model the call or the profile chose; `None`: the parent's (`bub.child.model`).
    pub model: Option<String>,
    /// The reasoning effort, chosen the same way.
    pub reasoning_effort: Option<String>,
    /// Its time limit (`bub.timeout.precedence`, `bub.timeout.zero-is-none`).
    pub timeout: Option<Duration>,
}

/// The session a call names: `temp` (the default), `fork` (`fork` or `inherit`), or a name.
pub(super) fn session_arg(args: &Value) -> (&'static str, String) {
    match string_arg(args, "session").map(str::trim).unwrap_or("temp") {
        "temp" => ("temp", "temp".into()),
        "fork" | "inherit" => ("fork", "fork".into()),
        name => ("named", name.to_string()),
    }
}

/// The answer a `subagent` call of the root must get, or the child it starts.
pub(super) fn launch<'s>(args: &Value, setup: &'s Setup, rules: &Rules) -> Result<Launch<'s>, String> {
    // `core.depth.guard-error`, `core.depth.subagent-root-only`: only the root calls it.
    if rules.depth_limit == 0 {
        return Err(DEPTH_ERROR.to_string());
    }
    // `bub.spawn.empty-prompt`.
    if string_arg(args, "prompt").unwrap_or_default().trim().is_empty() {
        return Err("error: empty prompt".into());
    }
    // `bub.spawn.unknown-profile`.
    let profile = match string_arg(args, "agent").map(str::trim).filter(|a| !a.is_empty()) {
        None => None,
        Some(name) => match setup.profiles.iter().find(|p| p.name == name) {
            Some(profile) => Some(profile),
            None => return Err(format!("unknown agent profile: '{name}'")),
        },
    };
    // `bub.profile.call-over-profile`, `bub.child.allowed-tools-empty`,
    // `bub.child.allowed-tools-replace-profile`: the call's non-empty list, else the profile's.
    let from_call = |name: &str| Some(list_arg(args, name)).filter(|l| !l.is_empty());
    let from_profile = |list: Option<&Vec<String>>| list.filter(|l| !l.is_empty()).cloned();
    let tools = match from_call("allowed_tools").or_else(|| from_profile(profile.and_then(|p| p.tools.as_ref()))) {
        None => setup.tools.iter().map(String::as_str).collect(),
        Some(requested) => {
            let available: Vec<&str> = setup.tools.iter().map(String::as_str).chain(TERMINALS).collect();
            let granted = resolve(&requested, &available, "tool")?;
            setup.tools.iter().map(String::as_str).filter(|t| granted.contains(t)).collect()
        }
    };
    let skills = match from_call("allowed_skills").or_else(|| from_profile(profile.and_then(|p| p.skills.as_ref()))) {
        None => setup.skills.iter().map(String::as_str).collect(),
        Some(requested) => {
            let available: Vec<&str> = setup.skills.iter().map(String::as_str).collect();
            let granted = resolve(&requested, &available, "skill")?;
            setup.skills.iter().map(String::as_str).filter(|s| granted.contains(s)).collect()
        }
    };
    let chosen =
        |name: &str, of_profile: Option<&String>| string_arg(args, name).map(str::to_string).or(of_profile.cloned());
    Ok(Launch {
        profile,
        tools,
        skills,
        model: chosen("model", profile.and_then(|p| p.model.as_ref())),
        reasoning_effort: chosen("reasoning_effort", profile.and_then(|p| p.reasoning_effort.as_ref())),
        timeout: seconds_arg(args, "timeout_seconds")
            .or(profile.and_then(|p| p.timeout))
            .or(rules.subagent_default_timeout)
            .filter(|limit| !limit.is_zero()),
    })
}

/// The real names `requested` names among `available` (`bub.spawn.name-matching`), or the
/// refusal naming every bad one: trimmed, quoted, sorted, once each (`bub.spawn.unknown-tools`).
fn resolve<'a>(requested: &[String], available: &[&'a str], what: &str) -> Result<Vec<&'a str>, String> {
    let mut granted = Vec::new();
    let mut bad: Vec<&str> = Vec::new();
    for name in requested {
        match available.iter().find(|real| same_name(name, real)) {
            Some(real) => granted.push(*real),
            None => bad.push(name.trim()),
        }
    }
    if bad.is_empty() {
        return Ok(granted);
    }
    bad.sort_unstable();
    bad.dedup();
    let quoted: Vec<String> = bad.iter().map(|name| format!("'{name}'")).collect();
    Err(format!("unknown {what} name(s): {}", quoted.join(", ")))
}

//! Oracle `context` (`oracle.context.*`): what every request carries besides the conversation
//! (request id, session id, model, reasoning effort, memory, system prompt, profile), derived
//! from the scenario's setup and the call that made each child.
//!
//! The root carries the session's context and its turn's request id. A foreground child
//! carries its parent's, with `-sub` after the request id (`roku.child.request-id`,
//! `roku.child.context-passed`). A background child carries the call's model and reasoning
//! effort, else its profile's, else its parent's (`bub.child.model`), the request id
//! `<parent's>-<task id>` (`bub.child.request-id`), and a system prompt of its own: the base
//! prompt, its profile's body, its skills. A continued run keeps what its task started with.
//! Judges nothing without the setup (evidence built by hand).

use std::collections::{BTreeMap, BTreeSet};

use super::index::Index;
use super::launch::launch;
use super::{Oracle, Report, core_events, short};
use crate::evidence::{Evidence, Setup};
use crate::sut::AgentId;
use crate::sut::Profile;
use crate::sut::event::{Event, Family};
use crate::sut::llm::LlmRequest;

/// The context one agent's requests must carry.
#[derive(Clone)]
struct Context {
    request_id: String,
    model: Option<String>,
    reasoning_effort: Option<String>,
    system: String,
    profile: Option<String>,
}

/// The heading of the profile listing (`bub.profile.listed`).
const PROFILES_HEADING: &str = "Agent profiles (pass the name as `agent` to `subagent`):";

/// A system prompt as `core.context.system-prompt` lays it out: the base prompt, the profile
/// listing (`bub.profile.listed`), a profile's body (`bub.profile.body`), the skills line
/// (`bub.prompt.skills-line`), each part present after a blank line, with no leading
/// whitespace.
fn system_prompt(base: &str, profiles: &[Profile], body: Option<&str>, skills: &[&str]) -> String {
    let mut system = base.to_string();
    if !profiles.is_empty() {
        system.push_str("\n\n");
        system.push_str(PROFILES_HEADING);
        for profile in profiles {
            system.push_str(&format!("\n- {}: {}", profile.name, profile.description));
        }
    }
    if let Some(body) = body.map(str::trim).filter(|b| !b.is_empty()) {
        system.push_str("\n\n");
        system.push_str(body);
    }
    if !skills.is_empty() {
        system.push_str(&format!("\n\nSkills: {}", skills.join(", ")));
    }
    system.trim_start().to_string()
}

pub(super) fn context(e: &Evidence, index: &Index, r: &mut Report) {
    let Some(setup) = e.setup else { return };
    let rules = e.rules;
    let mut contexts: BTreeMap<&AgentId, Context> = BTreeMap::new();
    // A background child between its spawn and its `task.queued` (which gives its task id).
    let mut pending: BTreeMap<&AgentId, Context> = BTreeMap::new();
    let mut spawning: Option<&serde_json::Value> = None;
    let mut reported: BTreeSet<(&AgentId, &str)> = BTreeSet::new();
    let root_skills: Vec<&str> = setup.skills.iter().map(String::as_str).collect();
    let listed: &[Profile] = if rules.subagent_tools { &setup.profiles } else { &[] };
    for (i, entry, event) in core_events(e.trace) {
        let agent = &entry.agent;
        match event {
            Event::TurnStarted { turn, .. } => {
                let request_id = setup.request_ids.get(*turn as usize - 1).cloned().unwrap_or_default();
                contexts.insert(
                    agent,
                    Context {
                        request_id,
                        model: setup.model.clone(),
                        reasoning_effort: setup.reasoning_effort.clone(),
                        system: system_prompt(&setup.system_prompt, listed, None, &root_skills),
                        profile: None,
                    },
                );
            }
            Event::ToolStarted { tool, args, .. } if index.agents.is_root(i) => {
                spawning = (tool == "subagent").then_some(&**args);
            }
            Event::Spawned { child, family: Family::Foreground, .. } => {
                let Some(parent) = contexts.get(agent) else { continue };
                let child_context =
                    Context { request_id: format!("{}-sub", parent.request_id), profile: None, ..parent.clone() };
                contexts.insert(child, child_context);
            }
            Event::Spawned { child, family: Family::Background, .. } => {
                // A continuation (`subagent.send`) keeps its task's context.
                let (Some(args), Some(parent)) = (spawning, contexts.get(agent)) else { continue };
                let Ok(launch) = launch(args, setup, rules) else { continue };
                let body = launch.profile.map(|p| p.body.as_str());
                pending.insert(
                    child,
                    Context {
                        request_id: parent.request_id.clone(),
                        model: launch.model.or_else(|| parent.model.clone()),
                        reasoning_effort: launch.reasoning_effort.or_else(|| parent.reasoning_effort.clone()),
                        system: system_prompt(&setup.system_prompt, &[], body, &launch.skills),
                        profile: launch.profile.map(|p| p.name.clone()),
                    },
                );
            }
            Event::TaskQueued { task_id, child, .. } => {
                if let Some(mut child_context) = pending.remove(child) {
                    child_context.request_id = format!("{}-{task_id}", child_context.request_id);
                    contexts.insert(child, child_context);
                }
            }
            Event::LlmRequest { .. } => {
                let (Some(exchange), Some(want)) = (index.exchange(i), contexts.get(agent)) else { continue };
                for (field, got, expected) in differences(&exchange.request, want, setup) {
                    if reported.insert((agent, field)) {
                        r.add(
                            Oracle::Context,
                            i,
                            format!("{agent}'s request carries {field} {got}; the rules give {expected}"),
                            vec![],
                        );
                    }
                }
            }
            _ => {}
        }
    }
}

/// The fields of `request` that differ from the context it must carry: (field, got, wanted),
/// compared whole and shown shortened.
fn differences(request: &LlmRequest, want: &Context, setup: &Setup) -> Vec<(&'static str, String, String)> {
    let show = |s: Option<&str>| s.map_or("none".to_string(), |s| format!("{:?}", short(s)));
    let mut found = Vec::new();
    let mut compare = |field, got: Option<&str>, expected: Option<&str>| {
        if got != expected {
            found.push((field, show(got), show(expected)));
        }
    };
    compare("request id", Some(&request.request_id), Some(&want.request_id));
    compare("session id", Some(&request.session_id), Some(&setup.session_id));
    compare("model", request.model.as_deref(), want.model.as_deref());
    compare("reasoning effort", request.reasoning_effort.as_deref(), want.reasoning_effort.as_deref());
    compare("system prompt", Some(&request.system), Some(&want.system));
    compare("profile", request.profile.as_deref(), want.profile.as_deref());
    if request.memory[..] != setup.memory[..] {
        found.push(("memory", format!("{:?}", &request.memory[..]), format!("{:?}", setup.memory)));
    }
    found
}

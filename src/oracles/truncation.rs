//! Oracle 3, `truncation` (`oracle.truncation.*`): a result handed to a parent is the
//! child's message, or exactly `limit` characters and the notice.
//!
//! It derives the expected result on its own (`expected_result`, which the model-side
//! oracles read too); it does not check when or how the result arrives (`delivery`).

use std::collections::BTreeMap;

use crate::evidence::Evidence;
use crate::sut::AgentId;
use crate::sut::event::{Event, Family, TaskStatus};

use super::{Oracle, Report, core_events};

/// The result a parent must receive for a child's final message (`oracle.truncation.expected`), derived
/// from the reference independently of the core.
pub fn expected_result(message: &str, limit: Option<usize>) -> String {
    match limit {
        Some(limit) if message.chars().count() > limit => {
            let kept: String = message.chars().take(limit).collect();
            format!("{kept}...\n[Sub-agent response truncated to {limit} chars]")
        }
        _ => message.to_string(),
    }
}

/// Oracle 3. A foreground child's result is paired with its parent's `Agent` result through
/// the spawn inside that call, so a result handed over without a `child.result` record is
/// still checked.
pub(super) fn truncation(e: &Evidence, r: &mut Report) {
    let limit = e.rules.result_limit_chars;
    let mut last_message: BTreeMap<&AgentId, (&str, usize)> = BTreeMap::new();
    // Per parent: the child spawned inside its running `Agent` call, and that spawn's line.
    let mut open: BTreeMap<AgentId, Option<(AgentId, usize)>> = BTreeMap::new();
    for (i, entry, event) in core_events(e.trace) {
        match event {
            Event::AgentEnded { message, .. } => {
                last_message.insert(&entry.agent, (message, i));
            }
            Event::ToolStarted { tool, .. } if tool == "Agent" => {
                open.insert(entry.agent.clone(), None);
            }
            Event::Spawned { child, family: Family::Foreground, .. } => {
                open.insert(entry.agent.clone(), Some((child.clone(), i)));
            }
            Event::ChildResult { child, chars, truncated_to, .. } => {
                let Some((message, line)) = last_message.get(child) else { continue };
                let length = message.chars().count();
                if *chars != length {
                    r.add(
                        Oracle::Truncation,
                        i,
                        format!("{child}'s result has {length} chars, reported {chars}"),
                        vec![*line],
                    );
                }
                let cut = limit.filter(|l| length > *l);
                if *truncated_to != cut {
                    r.add(
                        Oracle::Truncation,
                        i,
                        format!("{child}'s result reports truncated_to {truncated_to:?}, expected {cut:?}"),
                        vec![*line],
                    );
                }
            }
            Event::ToolEnded { tool, result, .. } if tool == "Agent" => {
                let Some(Some((child, spawn))) = open.remove(&entry.agent) else { continue };
                // A child that did not end (timed out) hands over the timeout error instead.
                let Some((message, line)) = last_message.get(&child).filter(|(_, line)| *line > spawn) else {
                    continue;
                };
                let want = expected_result(message, limit);
                if *result != want {
                    r.add(Oracle::Truncation, i, truncation_message(result, &want, limit), vec![*line]);
                }
            }
            Event::TaskEnded { child, status: TaskStatus::Completed | TaskStatus::Failed, body, .. } => {
                let Some((message, line)) = last_message.get(child) else { continue };
                let want = expected_result(message, limit);
                if *body != want {
                    r.add(Oracle::Truncation, i, truncation_message(body, &want, limit), vec![*line]);
                }
            }
            _ => {}
        }
    }
}

fn truncation_message(got: &str, want: &str, limit: Option<usize>) -> String {
    format!(
        "the parent received {} chars ({} bytes) where the limit {limit:?} gives {} chars ({} bytes); they first differ at char {}",
        got.chars().count(),
        got.len(),
        want.chars().count(),
        want.len(),
        got.chars()
            .zip(want.chars())
            .position(|(a, b)| a != b)
            .unwrap_or(got.chars().count().min(want.chars().count()))
    )
}

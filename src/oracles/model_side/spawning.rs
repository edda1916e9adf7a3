//! `oracle.model-side.spawning`: a spawn call is refused exactly when the rules refuse it, with
//! the rules' words.
//!
//! Read off each spawn call and its result (the built-in core's dialects only: the texts and
//! the order of the checks are its rules). A call the gate denied, one answered as an unknown
//! tool and one made at the depth limit are other oracles' (`approval`, `depth`). Then, in the
//! order the rules check (`bub.spawn.*`, "depth, prompt, profile, tools, skills, session"):
//! a blank prompt or task is refused with the empty-prompt text and only a blank one
//! (`bub.spawn.empty-prompt`, `roku.agent.empty-task`); a profile the model side cannot read
//! ends the judging; and the tools a call names are refused exactly when one of them is not the
//! caller's catalog tool nor `final_answer` / `fail`, matched trimmed, without regard to case,
//! `.` and `_` alike, the refusal listing every bad name trimmed, quoted and sorted
//! (`bub.spawn.unknown-tools`, `bub.spawn.name-matching`, `bub.child.tools-at-most-parent`).
//! And a call of a name its caller was not offered, none of the sub-agent tools' own names, is
//! answered as an unknown tool (`roku.calls.unknown-tool`), not by a tool of a similar name.

use std::collections::BTreeSet;

use crate::dialect::{Dialect, normalized};
use crate::evidence::attribution::ModelSide;
use crate::rules::Rules;
use crate::rules::words::{DEPTH_ERROR, NO_TASK};
use crate::sut::llm::Message;

use super::{DENIED, Out, builtin_rules, cite_next, keeps_reply, result_in};

/// The background family's refusal of a blank prompt (`bub.spawn.empty-prompt`).
const EMPTY_PROMPT: &str = "error: empty prompt";

/// The refusal of tools a call may not grant begins so (`bub.spawn.unknown-tools`).
const UNKNOWN_TOOLS: &str = "unknown tool name(s): ";

/// `oracle.model-side.spawning`.
pub(super) fn spawning(side: &ModelSide, rules: &Rules, dialect: &Dialect, out: &mut Out) {
    if !builtin_rules(dialect) {
        return;
    }
    let mut findings = Vec::new();
    for c in &side.calls {
        let Some((result, _)) = &c.result else { continue };
        let Some(tool) = dialect.spawn_tool(&c.tool) else { continue };
        if result.starts_with(DENIED) || *result == rules.unknown_tool(&c.tool) || result == DEPTH_ERROR {
            continue;
        }
        if c.parent.depth() >= rules.depth_limit {
            continue;
        }
        let Some(args) =
            side.exchanges[c.exchange].reply.as_ref().and_then(|r| r.tool_calls.get(c.position)).map(|t| &t.args)
        else {
            continue;
        };
        let blank = args.get(&tool.prompt).and_then(|v| v.as_str()).is_none_or(|p| p.trim().is_empty());
        let empty = if c.sync { NO_TASK } else { EMPTY_PROMPT };
        if blank != (result == empty) {
            findings.push((
                c.exchange,
                if blank {
                    format!(
                        "the `{}` call's prompt is blank, so it is refused with {empty:?}; its result is {result:?}",
                        c.tool
                    )
                } else {
                    format!("the `{}` call's prompt is not blank, yet it is refused with {empty:?}", c.tool)
                },
            ));
            continue;
        }
        if blank || tool.profile_of(args).is_some() {
            continue;
        }
        let Some(names) = tool.granted_names(args) else { continue };
        let offered = &side.exchanges[c.exchange].tools;
        let catalog: Vec<String> = offered
            .iter()
            .filter(|t| {
                dialect.spawn_tool(t).is_none()
                    && !dialect.is_family(t)
                    && !dialect.root_only.contains(t)
                    && !dialect.terminal.iter().any(|x| x.name == **t)
            })
            .map(|t| normalized(t))
            .chain(["final_answer".to_string(), "fail".to_string()])
            .collect();
        let bad: BTreeSet<String> =
            names.iter().filter(|n| !catalog.contains(&normalized(n))).map(|n| n.trim().to_string()).collect();
        let want = (!bad.is_empty())
            .then(|| format!("{UNKNOWN_TOOLS}{}", bad.iter().map(|n| format!("'{n}'")).collect::<Vec<_>>().join(", ")));
        match want {
            Some(want) if *result != want => findings.push((
                c.exchange,
                format!("the `{}` call names tools its caller may not grant, so it is refused with {want:?}; its result is {result:?}", c.tool),
            )),
            None if result.starts_with(UNKNOWN_TOOLS) => findings.push((
                c.exchange,
                format!(
                    "the `{}` call names only tools its caller was offered ({names:?}, matched trimmed, without regard to case, `.` and `_` alike), yet it is refused with {result:?}",
                    c.tool
                ),
            )),
            _ => {}
        }
    }
    findings.extend(unknown_names(side, rules, dialect, out));
    // A finding is cited at the request that holds the result: the caller's next one.
    for (x, message) in findings {
        out.at("spawning", "oracle.model-side.spawning", cite_next(side, out.agents, x), message, None::<&Message>);
    }
}

/// A call of a name its caller was not offered, and that is none of the sub-agent tools' own
/// names, is answered as an unknown tool (`roku.calls.unknown-tool`, with the run's
/// `unknown_tool_message`), never by a tool of a similar name (semantic mutant 334: `subagent.status`
/// taken for the family by its prefix); the gate may deny it first (`roku.agent.gate-first`:
/// the gate sees every call). Each as (the exchange whose reply held the call, what is wrong).
fn unknown_names(side: &ModelSide, rules: &Rules, dialect: &Dialect, out: &Out) -> Vec<(usize, String)> {
    let own = |name: &str| {
        dialect.spawn_tool(name).is_some()
            || dialect.send_tool(name).is_some()
            || dialect.wait.as_deref() == Some(name)
            || dialect.cancel.iter().any(|c| c.name == name)
            || dialect.terminal.iter().any(|t| t.name == name)
    };
    let mut findings = Vec::new();
    for list in out.agents.of.values() {
        for pair in list.windows(2) {
            let ((x, _), (y, _)) = (pair[0], pair[1]);
            let e = &side.exchanges[x];
            let Some(reply) = e.reply.as_ref().filter(|_| keeps_reply(side, x, y)) else { continue };
            for call in reply.tool_calls.iter().filter(|c| !e.tools.contains(&c.name) && !own(&c.name)) {
                let Some((_, result)) = result_in(side, x, y, &call.id) else { continue };
                let want = rules.unknown_tool(&call.name);
                if result.content != want && !result.content.starts_with(DENIED) {
                    findings.push((
                        x,
                        format!(
                            "`{}` was not offered to its caller, so it is answered {want:?} as an unknown tool; its result is {:?}",
                            call.name,
                            super::short(&result.content)
                        ),
                    ));
                }
            }
        }
    }
    findings
}

//! `oracle.model-side.task-ids`: the task ids the model reads, and the sessions its spawn
//! results name (the built-in core's background family).
//!
//! - Each task made (a spawn call answered with a task id) has the next id the scenario's seed
//!   gives (`bub.task-id.seeded`, drawn again here from the rules' words by
//!   [`super::super::task_ids::seeded`]); a refused call draws none. In process only, where
//!   the setup holds the seed.
//! - A send or cancel naming an id no task of the session has (trimmed, compared exactly) is
//!   answered `unknown task id: 'x'` (`bub.task-id.unknown`, `bub.task-id.trimmed`).
//! - A spawn's result names its session as `temp/<id>`, `fork/<id>` or the name itself
//!   (`bub.spawn.session-key`).

use crate::dialect::{Dialect, SessionKind};
use crate::evidence::Setup;
use crate::evidence::attribution::{CallOutcome, ModelSide};

use super::{DENIED, Out, builtin_rules, cite_next, result_in};

/// `oracle.model-side.task-ids`.
pub(super) fn task_ids(side: &ModelSide, dialect: &Dialect, setup: Option<&Setup>, out: &mut Out) {
    // The background family's own rules (the built-in core's dialects that have it).
    if !builtin_rules(dialect) || dialect.wait.is_none() {
        return;
    }
    let mut findings = Vec::new();
    // The ids in the order the tasks were made, against the seed's.
    if let Some(setup) = setup {
        let mut want = super::super::task_ids::seeded(setup.seed);
        for c in side.calls.iter().filter(|c| !c.sync && !matches!(c.outcome, CallOutcome::Refused)) {
            let Some(id) = &c.task_id else { break };
            let expected = want.next().unwrap_or_default();
            if *id != expected {
                findings.push((
                    c.exchange,
                    format!(
                        "the `{}` call's task has the id {id}, where seed {} gives {expected} to the run's task {} (a refused call draws none)",
                        c.tool,
                        setup.seed,
                        side.calls.iter().filter(|d| !d.sync && !matches!(d.outcome, CallOutcome::Refused) && d.exchange <= c.exchange).count()
                    ),
                ));
                break;
            }
        }
    }
    let known: Vec<&str> = side.calls.iter().filter_map(|c| c.task_id.as_deref()).collect();
    for (x, e) in side.exchanges.iter().enumerate() {
        let Some(reply) = &e.reply else { continue };
        for call in &reply.tool_calls {
            let arg = dialect
                .send_tool(&call.name)
                .map(|t| t.task_id.as_str())
                .or_else(|| dialect.cancel.iter().find(|t| t.name == call.name).map(|t| t.task_id.as_str()));
            let Some(id) = arg.and_then(|a| call.args.get(a)).and_then(|v| v.as_str()).map(str::trim) else {
                continue;
            };
            if known.contains(&id) {
                continue;
            }
            let Some((_, result)) = result_in(side, x, cite_next(side, out.agents, x), &call.id) else { continue };
            let result = result.content.as_str();
            let want = format!("unknown task id: '{id}'");
            // The gate sees the call first (`roku.agent.gate-first`); another answer is the
            // unknown tool's, where the caller lacks the family.
            if result != want && !result.starts_with(DENIED) && e.tools.contains(&call.name) {
                findings.push((
                    x,
                    format!("`{}` names {id:?}, which no task of the session has, so it is answered {want:?}; its result is {:?}", call.name, super::short(result)),
                ));
            }
        }
    }
    // The session each spawn result names.
    for c in side.calls.iter().filter(|c| !c.sync) {
        let (Some((result, _)), Some(id)) = (&c.result, &c.task_id) else { continue };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(result) else { continue };
        let Some(named) = v.get("session").and_then(|s| s.as_str()) else { continue };
        let Some(tool) = dialect.spawn_tool(&c.tool) else { continue };
        let Some(args) =
            side.exchanges[c.exchange].reply.as_ref().and_then(|r| r.tool_calls.get(c.position)).map(|t| &t.args)
        else {
            continue;
        };
        // A blank session is read differently by the rules' words and the core: not judged.
        if tool.session.as_ref().and_then(|a| args.get(a)).and_then(|s| s.as_str()).is_some_and(|s| s.trim().is_empty())
        {
            continue;
        }
        let want = match &c.session {
            SessionKind::Fresh => format!("temp/{id}"),
            SessionKind::Fork => format!("fork/{id}"),
            SessionKind::Named(name) => name.clone(),
        };
        if named != want {
            findings.push((
                c.exchange,
                format!("the `{}` call's result names the session {named:?}; its session is {want:?}", c.tool),
            ));
        }
    }
    for (x, message) in findings {
        // Cited at the caller's request holding the result.
        out.at("task-ids", "oracle.model-side.task-ids", cite_next(side, out.agents, x), message, None);
    }
}

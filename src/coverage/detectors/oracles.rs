//! The detectors of the oracle clauses (docs/rules/core.md §6): each oracle had something to
//! check in the run.
//!
//! They say the oracle was exercised, never that it passed (that is the oracles' own verdict).

use std::time::Duration;

use crate::coverage::facts::*;
use crate::sut::AgentId;
use crate::sut::event::{Event, TaskStatus, Via};

use super::Detector;
use super::queries::{
    ActKind, batches, first_request_of_run, in_use_refused, named_runs, notified_at_turn_start, quit_cancelled,
    root_acts, spawning_call, wait_entries,
};

/// Every measured clause of the page and its detector.
pub(super) const DETECTORS: &[(&str, Detector)] = &[
    // --- §6: the oracles (each check had something to check) ---
    // --- §6, oracle 17: the model's side (each had something to judge) ---
    ("oracle.model-side.attribution", |f| !f.e.exchanges.is_empty()),
    ("oracle.model-side.depth", |f| !f.spawns.is_empty() || f.calls.iter().any(|c| c.result == DEPTH_ERROR)),
    ("oracle.model-side.truncation", |f| f.any(|e| matches!(e, Event::ChildResult { .. }))),
    ("oracle.model-side.fork-snapshot", |f| f.bg_children().any(|(r, ..)| r.session.starts_with("fork/"))),
    ("oracle.model-side.isolation", |f| !f.spawns.is_empty()),
    ("oracle.model-side.append-only", |f| f.root_requests().len() >= 2),
    ("oracle.model-side.concurrency", |f| f.runs.iter().any(|r| r.started.is_some())),
    ("oracle.model-side.budget", |f| !f.spawns.is_empty()),
    ("oracle.model-side.timeouts", |f| f.any(|e| matches!(e, Event::TimedOut { .. }))),
    ("oracle.model-side.delivery", |f| f.runs.iter().any(|r| !r.delivered.is_empty())),
    ("oracle.model-side.context", |f| !f.spawns.is_empty()),
    // A regular call's result reached a later request.
    ("oracle.model-side.call-results", |f| !f.calls.is_empty() && f.root_requests().len() >= 2),
    // A child asked: its offered tools had a grant to be within.
    ("oracle.model-side.child-tools", |f| !f.spawns.is_empty()),
    // A named session served two runs (each must wait for the other to end).
    ("oracle.model-side.sessions", |f| named_runs(f).values().any(|runs| runs.len() >= 2)),
    // A reply held a terminal call and its agent asked again later.
    ("oracle.model-side.terminal", |f| {
        let ex = f.e.exchanges;
        ex.iter().enumerate().any(|(i, x)| {
            x.reply.as_ref().is_some_and(|r| r.tool_calls.iter().any(|c| c.name == "final_answer" || c.name == "fail"))
                && ex[i + 1..].iter().any(|y| y.request.agent == x.request.agent)
        })
    }),
    // An exhaustion nudge reached a request (its being due, and its numbers, were judged).
    ("oracle.model-side.nudges", |f| {
        f.e.exchanges
            .iter()
            .any(|x| x.request.messages.iter().any(|m| m.content.starts_with("System: step budget exhausted (")))
    }),
    // A call went through the risk gate, whose classes and policy the model reads in denials.
    ("oracle.model-side.approval", |f| f.e.setup.is_some_and(|s| s.risk_gate) && !f.calls.is_empty()),
    // The harness steered the root and the root asked the model again afterwards.
    ("oracle.model-side.steering", |f| {
        let root = AgentId::root();
        f.e.setup
            .is_some_and(|s| s.steering.iter().any(|(t, _)| f.e.due.iter().any(|d| d.agent == root && d.asked >= *t)))
    }),
    // A spawn call's result reached a later request of its caller (refused or not).
    ("oracle.model-side.spawning", |f| f.calls_to("Agent").chain(f.calls_to("subagent")).next().is_some()),
    // A wait answered.
    ("oracle.model-side.waiting", |f| f.calls_to("subagent.wait").next().is_some()),
    // The session's last turn ended with `fail` or `ask_user` while the root had tasks.
    ("oracle.model-side.quit", |f| quit_cancelled(f).next().is_some()),
    // A background task was made: its id and its session's name reached the model.
    ("oracle.model-side.task-ids", |f| f.calls_to("subagent").any(|c| c.result.starts_with("{\"task_id\""))),
    ("oracle.depth.no-agent-beyond-limit", |f| !f.spawns.is_empty() || f.calls.iter().any(|c| c.result == DEPTH_ERROR)),
    ("oracle.depth.refused-at-limit", |f| f.calls_to("Agent").any(|c| c.agent.depth() == f.rules.depth_limit)),
    ("oracle.depth.not-refused-below-limit", |f| f.fg_spawns().next().is_some()),
    ("oracle.depth.alias-numbering", |f| !f.spawns.is_empty()),
    ("oracle.budget.turn-start", |f| f.any(|e| matches!(e, Event::TurnStarted { .. }))),
    ("oracle.budget.spawn-cost", |f| !f.spawns.is_empty()),
    ("oracle.budget.grant", |f| !f.spawns.is_empty()),
    ("oracle.budget.deducted", |f| !f.spawns.is_empty()),
    ("oracle.budget.child-starts-with-grant", |f| f.any(|e| matches!(e, Event::AgentStarted { .. }))),
    ("oracle.budget.never-rises", |f| {
        f.events().any(|(i, e)| budget_of(e.event).is_some() && f.prev_budget[i].is_some())
    }),
    ("oracle.budget.no-request-at-zero", |f| f.events().any(|(_, e)| budget_of(e.event) == Some(0))),
    ("oracle.truncation.expected", |f| {
        f.rules.result_limit_chars.is_some()
            && (f.fg_spawns().any(|s| f.fg_result(s).is_some())
                || f.runs.iter().any(|r| matches!(r.status, Some(TaskStatus::Completed | TaskStatus::Failed))))
    }),
    ("oracle.truncation.foreground", |f| f.fg_spawns().any(|s| f.fg_result(s).is_some())),
    ("oracle.truncation.background", |f| {
        f.runs.iter().any(|r| matches!(r.status, Some(TaskStatus::Completed | TaskStatus::Failed)))
    }),
    ("oracle.truncation.reported-length", |f| f.any(|e| matches!(e, Event::ChildResult { .. }))),
    ("oracle.timeouts.exact-instant", |f| f.any(|e| matches!(e, Event::TimedOut { .. }))),
    ("oracle.timeouts.only-with-limit", |f| {
        f.runs.iter().any(|r| r.timeout.is_some()) || (f.agent_limit().is_some() && f.fg_spawns().next().is_some())
    }),
    ("oracle.timeouts.no-overrun", |f| {
        f.runs.iter().any(|r| r.timeout.is_some() && r.ended.is_some())
            || (f.agent_limit().is_some() && f.fg_spawns().any(|s| f.fg_outcome(s).is_some()))
    }),
    ("oracle.timeouts.children-stop", |f| {
        let stopped: Vec<&AgentId> =
            f.ev.iter()
                .filter_map(|e| match e.event {
                    Event::TimedOut { child, .. } => Some(child),
                    Event::TaskEnded { child, status: TaskStatus::Cancelled, .. } => Some(child),
                    _ => None,
                })
                .collect();
        stopped.iter().any(|c| f.spawns.iter().any(|s| s.parent == *c))
    }),
    ("oracle.timeouts.finish-at-limit-wins", |f| {
        // A reply that ends a child's loop, asked before its deadline, due in the deadline's
        // very instant: whichever way the core broke the tie.
        let raced = |child: &AgentId, start: Duration, deadline: Duration| {
            f.e.due.iter().any(|d| {
                d.agent == *child && d.ends_loop && d.due == deadline && d.asked >= start && d.asked < deadline
            })
        };
        let fg = f
            .agent_limit()
            .is_some_and(|limit| f.fg_spawns().any(|s| raced(s.child, f.ev[s.at].at, f.ev[s.at].at + limit)));
        let bg = f.runs.iter().any(|r| {
            let (Some(start), Some(limit)) = (r.started, r.timeout) else { return false };
            raced(r.child, f.ev[start].at, f.ev[start].at + limit)
        });
        fg || bg
    }),
    ("oracle.concurrency.cap", |f| f.runs.iter().any(|r| r.started.is_some())),
    ("oracle.concurrency.fifo", |f| f.runs_started_later().next().is_some()),
    ("oracle.concurrency.no-idle-slot", |f| f.runs.iter().any(|r| f.queued_behind(r))),
    ("oracle.fork-isolation.snapshot", |f| f.bg_children().any(|(r, ..)| r.session.starts_with("fork/"))),
    ("oracle.fork-isolation.snapshot-kept", |f| {
        f.runs.iter().any(|r| r.session.starts_with("fork/") && f.requests(r.child).len() >= 2)
    }),
    ("oracle.fork-isolation.history-kept", |f| f.root_requests().len() >= 2),
    ("oracle.fork-isolation.provenance", |f| f.root_requests().iter().any(|x| x.request.messages.len() >= 2)),
    ("oracle.fork-isolation.temp-starts-empty", |f| f.bg_children().any(|(r, ..)| r.session.starts_with("temp/"))),
    ("oracle.fork-isolation.sessions-after-run", |f| {
        f.e.session_ended && f.any(|e| matches!(e, Event::SessionOpened { .. }))
    }),
    ("oracle.delivery.exactly-once", |f| f.runs.iter().any(|r| r.ended.is_some())),
    ("oracle.delivery.status", |f| f.any(|e| matches!(e, Event::Delivered { .. }))),
    ("oracle.delivery.before-next-step", |f| {
        f.runs.iter().any(|r| {
            r.ended.is_some_and(|e| f.after(&AgentId::root(), e).any(|(_, n)| matches!(n, Event::LlmRequest { .. })))
        })
    }),
    ("oracle.delivery.completion-order", |f| batches(f).iter().any(|b| b.len() >= 2)),
    ("oracle.delivery.instant-settled", |f| {
        root_acts(f).any(|act| {
            act.kind != ActKind::Answered
                && f.arrivals_in_instant_of(act.at).iter().any(|a| f.under_way_before(a, act.since))
        })
    }),
    ("oracle.delivery.text-in-next-request", |f| {
        f.runs.iter().any(|r| {
            r.delivered.iter().any(|(d, via)| {
                *via == Via::Notification
                    && f.after(&AgentId::root(), *d).any(|(_, n)| matches!(n, Event::LlmRequest { .. }))
            })
        })
    }),
    ("oracle.delivery.turn-message-first", notified_at_turn_start),
    ("oracle.delivery.intake-before-request", |f| {
        // A root loop found its budget at 0 while a result waited to be taken in.
        f.events().any(|(i, e)| {
            e.agent.depth() == 0
                && matches!(e.event, Event::AgentEnded { message, .. } if is_exhausted(message))
                && f.runs
                    .iter()
                    .any(|r| r.ended.is_some_and(|x| x < i) && r.delivered.first().is_none_or(|(d, _)| *d > i))
        })
    }),
    ("oracle.termination.within-limits", |f| f.e.session_ended && f.e.limit_hit.is_none()),
    ("oracle.termination.no-task-alive", |f| f.e.session_ended),
    ("oracle.termination.every-task-ended", |f| f.e.session_ended && !f.runs.is_empty()),
    ("oracle.termination.quit-queued-first", |f| {
        // Quitting found a task queued and another running.
        let cancelled: Vec<&TaskRun> = quit_cancelled(f).collect();
        cancelled.iter().any(|r| r.started.is_none()) && cancelled.iter().any(|r| r.started.is_some())
    }),
    ("oracle.termination.quit-cancels-all", |f| quit_cancelled(f).any(|r| r.started.is_some())),
    ("oracle.termination.cancelled-on-request", |f| {
        f.e.session_ended && f.runs.iter().any(|r| r.status == Some(TaskStatus::Cancelled))
    }),
    // Every run rehearsal judges is run twice and the traces compared.
    ("oracle.determinism.byte-identical", |f| !f.ev.is_empty()),
    ("oracle.costs.ordinary-call", |f| {
        f.ended_calls().any(|c| !spawning_call(c)) || f.any(|e| matches!(e, Event::Denied { .. }))
    }),
    ("oracle.costs.spawning-call", |f| f.ended_calls().any(spawning_call)),
    ("oracle.costs.replies", |f| {
        let answers = f.responses.iter().any(|r| {
            let ends = r.calls.is_empty() || r.calls.iter().any(|c| TERMINAL.contains(&c.as_str()));
            ends && (r.ended.is_some() || r.held.is_some())
        });
        answers || f.any(|e| matches!(e, Event::LlmFailed { .. }))
    }),
    ("oracle.costs.step-index", |f| f.responses.iter().any(|r| r.step.is_some())),
    ("oracle.costs.step-event", |f| f.responses.iter().any(|r| r.step.is_some())),
    ("oracle.costs.nudge", |f| {
        // A call left a budget at 0: a nudge is owed after it, or (not regular) none is.
        f.ended_calls().any(|c| c.budget == 0 || c.recovery == 0)
            || f.any(|e| matches!(e, Event::Nudge { .. } | Event::Denied { budget: 0, .. }))
    }),
    ("oracle.texts.loop-end", |f| f.any(|e| matches!(e, Event::AgentEnded { .. }))),
    ("oracle.texts.bodies", |f| {
        f.runs.iter().any(|r| matches!(r.status, Some(TaskStatus::TimedOut | TaskStatus::Cancelled)))
            || f.fg_spawns().any(|s| f.fg_timed_out(s).is_some())
    }),
    ("oracle.texts.refusals", |f| {
        // A call reached its family and was refused: it made no child, and its answer is an error.
        f.ended_calls().any(|c| Facts::reached_family(c) && c.is_error && c.spawn.is_none())
    }),
    ("oracle.texts.immediate-results", |f| {
        ["subagent", "subagent.send", "subagent.cancel"].iter().any(|t| f.calls_to(t).any(|c| !c.is_error))
    }),
    ("oracle.texts.unknown-and-denied", |f| {
        f.ended_calls().any(|c| c.start.is_none()) || f.any(|e| matches!(e, Event::Denied { .. }))
    }),
    ("oracle.texts.nudge", |f| {
        f.events().any(|(i, e)| matches!(e.event, Event::Nudge { .. }) && f.request_pos_after(e.agent, i).is_some())
    }),
    // Oracle 12 reads the catalog and what each call launches from the setup.
    ("oracle.precedence.time-limit", |f| f.e.setup.is_some() && f.runs.iter().any(|r| r.started.is_some())),
    ("oracle.precedence.offered-tools", |f| f.e.setup.is_some() && !f.e.exchanges.is_empty()),
    ("oracle.precedence.known-names", |f| f.e.setup.is_some() && f.ended_calls().next().is_some()),
    ("oracle.precedence.approval", |f| {
        // The risk gate settled a call of a tool the policy lists, or asked about one.
        f.e.setup.is_some_and(|s| s.risk_gate)
            && (!f.asked.is_empty()
                || f.ended_calls().any(|c| f.e.setup.is_some_and(|s| s.policy_deny.iter().any(|t| t == c.tool)))
                || f.any(|e| matches!(e, Event::Denied { .. })))
    }),
    ("oracle.precedence.held-turn", |f| {
        // The root answered while some of its tasks were outstanding: held, or its turn ended.
        f.responses.iter().any(|r| {
            r.agent.is_some_and(|a| a.depth() == 0) && (r.held.is_some() || r.ended.is_some_and(|i| f.unfinished_at(i)))
        })
    }),
    ("oracle.precedence.wake", |f| {
        f.events().any(|(i, e)| {
            e.agent.depth() == 0
                && matches!(e.event, Event::AwaitingChildren { .. })
                && f.request_pos_after(e.agent, i).is_some()
        })
    }),
    ("oracle.wait.returns", |f| f.calls_to("subagent.wait").any(|c| !c.is_error)),
    ("oracle.wait.reads-only-covered", |f| {
        // A wait that lists its tasks while another task exists.
        f.calls_to("subagent.wait").any(|c| {
            let Some(ids) = list(c.args, "task_ids").filter(|ids| !ids.is_empty()) else { return false };
            !c.is_error
                && f.runs.iter().any(|r| r.queued < c.start.unwrap_or(0) && !ids.iter().any(|i| i.trim() == r.id))
        })
    }),
    ("oracle.wait.reads-every-ready", |f| f.runs.iter().any(|r| r.delivered.iter().any(|(_, via)| *via == Via::Wait))),
    ("oracle.wait.result-order", |f| {
        f.calls_to("subagent.wait").any(|c| wait_entries(c).is_some_and(|e| e.len() >= 2))
    }),
    // Oracle 14 reads what each request must carry from the setup.
    ("oracle.context.root", |f| f.e.setup.is_some() && !f.root_requests().is_empty()),
    ("oracle.context.foreground", |f| f.e.setup.is_some() && f.fg_spawns().any(|s| !f.requests(s.child).is_empty())),
    ("oracle.context.background", |f| f.e.setup.is_some() && f.bg_children().next().is_some()),
    ("oracle.texts.task-ids", |f| {
        f.e.setup.is_some() && f.events().any(|(_, e)| matches!(e.event, Event::TaskQueued { .. }))
    }),
    ("oracle.context.rules-as-written", |f| f.e.setup.is_some()),
    ("oracle.context.profiles-as-written", |f| {
        f.e.rules.subagent_tools
            && f.e.setup.is_some_and(|s| !s.profile_files.is_empty() || !s.profile_specs.is_empty())
    }),
    ("oracle.routing.steering-reported", |f| {
        f.e.setup.is_some_and(|s| !s.steering.is_empty()) || f.arrivals.iter().any(|a| a.run.is_none())
    }),
    ("oracle.routing.send-reported", |f| {
        // A `send` handed a message over to a task that had not finished (it continued none).
        f.calls_to("subagent.send").any(|c| !c.is_error && c.spawn.is_none())
    }),
    ("oracle.routing.reaches-next-request", |f| {
        f.events().any(|(i, e)| matches!(e.event, Event::Steered { .. }) && f.request_pos_after(e.agent, i).is_some())
    }),
    ("oracle.routing.child-start", |f| {
        f.fg_spawns().any(|s| !f.requests(s.child).is_empty())
            || f.bg_children().any(|(run, ..)| run.session.starts_with("temp/"))
    }),
    ("oracle.routing.provenance", |f| {
        // A foreground, temp or named child's run asked the model again: its later requests
        // hold messages past the conversation it started from.
        let fg = f.fg_spawns().any(|s| f.requests(s.child).len() >= 2);
        let bg = f.runs.iter().filter(|r| !r.session.starts_with("fork/")).any(|r| {
            let Some(started) = r.started else { return false };
            let ended = r.ended.unwrap_or(f.ev.len());
            f.requests_before(r.child, ended) >= f.requests_before(r.child, started) + 2
        });
        fg || bg
    }),
    ("oracle.sessions.one-run-at-a-time", |f| {
        // A name served more than one run, or a call asked for a name in use.
        named_runs(f).values().any(|runs| runs.len() >= 2) || in_use_refused(f)
    }),
    ("oracle.sessions.in-use-refused", |f| {
        // A `subagent` call named a session a run was on at that moment, or a call met the refusal.
        let on = |name: &str, at: usize| {
            f.runs.iter().any(|r| r.session == name && r.queued < at && r.ended.is_none_or(|e| e > at))
        };
        let named = f.calls_to("subagent").any(|c| {
            let name = arg_str(c.args, "session").map(str::trim).unwrap_or("temp");
            !matches!(name, "temp" | "fork" | "inherit") && c.start.is_some_and(|s| on(name, s))
        });
        named || in_use_refused(f)
    }),
    ("oracle.sessions.continuity", |f| {
        // A later run on a name asked the model: it starts from what the name recorded.
        named_runs(f).values().any(|runs| runs[1..].iter().any(|r| first_request_of_run(f, *r).is_some()))
    }),
];

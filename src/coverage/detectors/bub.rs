//! The detectors of docs/rules/bub.md, the `subagent` family: the calls, sessions, running
//! in the background (the cap, time limits, quitting), notifications, the held turn, wait,
//! send, cancel, profiles and what a child inherits.
//!
//! Each says only whether a run showed its clause; the shared questions are in `queries`, and
//! whether the behaviour was right is the oracles' business.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use crate::coverage::facts::*;
use crate::evidence::fork_mismatch;
use crate::sut::AgentId;
use crate::sut::event::{Event, OutcomeKind, TaskStatus, Via};
use crate::sut::llm::Role;

use super::Detector;
use super::queries::{
    batches, call_timeout, cancelled_by_call, first_request_of_run, held, named_runs, notified_at_turn_start,
    quit_cancelled, sections, wait_entries,
};

/// Every measured clause of the page and its detector.
pub(super) const DETECTORS: &[(&str, Detector)] = &[
    // --- bub.md §1: the subagent family ---
    ("bub.tools.family", |f| {
        f.root_requests().iter().any(|x| {
            let names = Facts::tool_names(&x.request);
            names.windows(4).any(|w| w == FAMILY)
                && names.iter().position(|n| *n == "subagent") > names.iter().position(|n| *n == "fail")
        })
    }),
    ("bub.tools.root-only", |f| {
        let root = f.root_requests().iter().any(|x| Facts::tool_names(&x.request).contains(&"subagent"));
        root && f
            .e
            .exchanges
            .iter()
            .any(|x| x.request.agent.depth() >= 1 && !Facts::tool_names(&x.request).iter().any(|n| FAMILY.contains(n)))
    }),
    ("bub.spawn.params", |f| {
        const OPTIONAL: [&str; 7] =
            ["agent", "session", "model", "reasoning_effort", "allowed_tools", "allowed_skills", "timeout_seconds"];
        f.task_calls().any(|c| !c.is_error && OPTIONAL.iter().any(|k| arg(c.args, k).is_some()))
    }),
    ("bub.spawn.returns-at-once", |f| {
        f.task_calls().any(|c| {
            let (Some(start), Some(end)) = (c.start, c.end) else { return false };
            !c.is_error
                && f.ev[start].at == f.ev[end].at
                && f.run_of_call(c).is_some_and(|r| r.ended.is_none_or(|e| f.ev[e].at > f.ev[end].at))
        })
    }),
    ("bub.spawn.immediate-result", |f| {
        f.task_calls().any(|c| {
            !c.is_error
                && json(c.result)
                    .and_then(|v| v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()))
                    .is_some_and(|k| k == ["task_id", "status", "session"])
        })
    }),
    ("bub.spawn.status-queued", |f| {
        f.task_calls().any(|c| {
            !c.is_error
                && json(c.result).is_some_and(|v| v["status"] == "queued")
                && f.run_of_call(c).is_some_and(|r| f.queued_behind(r))
        })
    }),
    ("bub.spawn.session-key", |f| {
        f.task_calls().any(|c| {
            let Some(v) = json(c.result).filter(|_| !c.is_error) else { return false };
            let (Some(id), Some(session)) = (v["task_id"].as_str(), v["session"].as_str()) else { return false };
            match arg_str(c.args, "session").map(str::trim).unwrap_or("temp") {
                "temp" => session == format!("temp/{id}"),
                "fork" | "inherit" => session == format!("fork/{id}"),
                name => session == name,
            }
        })
    }),
    ("bub.spawn.grant", |f| f.bg_spawns().any(|s| s.grant > 0 && s.after == s.before - s.cost - s.grant)),
    ("bub.task-id.format", |f| {
        f.runs.iter().any(|r| {
            r.id.len() == 12
                && r.id.starts_with("sub-")
                && r.id[4..].chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        })
    }),
    // Drawn from the seed: every run is run twice and its traces compared (determinism), so
    // a run that drew an id shows the id did not come from the clock or the OS.
    ("bub.task-id.seeded", |f| !f.runs.is_empty()),
    ("bub.task-id.unknown", |f| {
        ["subagent.wait", "subagent.send", "subagent.cancel"].iter().any(|t| f.result_starts(t, "unknown task id: '"))
    }),
    // A padded id found its task: the call did not answer `unknown task id`.
    ("bub.task-id.trimmed", |f| {
        let padded = |id: &str| id.trim() != id && !id.trim().is_empty();
        ["subagent.wait", "subagent.send", "subagent.cancel"].iter().any(|t| {
            f.calls_to(t).any(|c| {
                let ids = list(c.args, "task_ids").unwrap_or_default();
                let mut named = arg_str(c.args, "task_id").into_iter().chain(ids.iter().map(String::as_str));
                named.any(padded) && !c.result.starts_with("unknown task id: '")
            })
        })
    }),
    ("bub.spawn.empty-prompt", |f| f.calls_to("subagent").any(|c| c.is_error && c.result == "error: empty prompt")),
    ("bub.spawn.unknown-profile", |f| f.result_starts("subagent", "unknown agent profile: '")),
    ("bub.spawn.unknown-tools", |f| f.result_starts("subagent", "unknown tool name(s): '")),
    ("bub.spawn.name-matching", |f| {
        f.bg_children().any(|(_, first, args)| {
            let offered = Facts::tool_names(&first.request);
            list(args, "allowed_tools").is_some_and(|names| {
                names
                    .iter()
                    .any(|n| !offered.contains(&n.as_str()) && offered.iter().any(|o| normalize(o) == normalize(n)))
            })
        })
    }),
    ("bub.spawn.unknown-skills", |f| f.result_starts("subagent", "unknown skill name(s): '")),
    // --- §2: sessions ---
    ("bub.session.temp-empty", |f| {
        f.bg_children().any(|(run, first, _)| {
            run.session.starts_with("temp/")
                && first
                    .request
                    .messages
                    .first()
                    .is_some_and(|m| m.role == Role::User && *m.content == *first.request.goal)
                && first.request.messages.iter().all(|m| m.role == Role::User)
        })
    }),
    ("bub.session.temp-discarded", |f| {
        f.any(|e| matches!(e, Event::SessionClosed { name, kept: false } if name.starts_with("temp/")))
    }),
    ("bub.session.fork-alias", |f| {
        f.task_calls().any(|c| {
            arg_str(c.args, "session").map(str::trim) == Some("inherit")
                && f.run_of_call(c).is_some_and(|r| r.session.starts_with("fork/"))
        })
    }),
    ("bub.session.fork-snapshot", |f| {
        f.bg_children().any(|(run, first, _)| {
            run.session.starts_with("fork/") && fork_mismatch(f.e.exchanges, &first.request, &[]).is_none()
        })
    }),
    ("bub.session.fork-snapshot-when-queued", |f| {
        // A fork child waited in the queue while its parent asked the model again, and its
        // first request is still the snapshot of its call.
        f.bg_children().any(|(run, first, _)| {
            let (Some(started), Some(parent)) = (run.started, run.child.parent()) else { return false };
            run.session.starts_with("fork/")
                && f.requests_before(&parent, started) > f.requests_before(&parent, run.queued)
                && fork_mismatch(f.e.exchanges, &first.request, &[]).is_none()
        })
    }),
    ("bub.session.fork-no-later-parent", |f| {
        // The parent's conversation grew after the fork, and the fork asked again later.
        f.runs.iter().filter(|r| r.session.starts_with("fork/")).any(|r| {
            let mine: Vec<usize> =
                f.e.exchanges.iter().enumerate().filter(|(_, x)| x.request.agent == *r.child).map(|(i, _)| i).collect();
            let (Some(first), Some(last)) = (mine.first(), mine.last()) else { return false };
            f.e.exchanges[*first..*last].iter().any(|x| x.request.agent.depth() == 0)
        })
    }),
    ("bub.session.fork-no-leak", |f| {
        f.runs.iter().filter(|r| r.session.starts_with("fork/")).any(|r| {
            let wrote = f.e.exchanges.iter().position(|x| x.request.agent == *r.child && x.reply.is_some());
            wrote.is_some_and(|w| f.e.exchanges[w..].iter().any(|x| x.request.agent.depth() == 0))
        })
    }),
    ("bub.session.fork-discarded", |f| {
        f.any(|e| matches!(e, Event::SessionClosed { name, kept: false } if name.starts_with("fork/")))
    }),
    ("bub.session.named-kept", |f| {
        f.any(|e| matches!(e, Event::SessionClosed { name, kept: true } if f.e.live_sessions.contains(name)))
            && f.e.session_ended
    }),
    ("bub.session.namespaces-apart", |f| {
        f.any(|e| matches!(e, Event::SessionOpened { name, kind } if *kind == "named" && (name.starts_with("temp/") || name.starts_with("fork/"))))
    }),
    ("bub.session.named-shared", |f| {
        // A later run on a name begins with what an earlier run on it recorded.
        named_runs(f).values().any(|runs| {
            runs.windows(2).any(|w| {
                let (Some((_, a)), Some((_, b))) = (first_request_of_run(f, w[0]), first_request_of_run(f, w[1]))
                else {
                    return false;
                };
                matches!(f.runs[w[0]].status, Some(TaskStatus::Completed | TaskStatus::Failed))
                    && a.request.messages.first().is_some_and(|m| b.request.messages.iter().any(|n| n == m))
            })
        })
    }),
    ("bub.session.named-one-at-a-time", |f| {
        ["subagent", "subagent.send"].iter().any(|t| {
            f.calls_to(t).any(|c| {
                c.is_error && c.result.starts_with("session '") && c.result.contains("' is in use by task sub-")
            })
        })
    }),
    ("bub.session.named-recorded-on-end", |f| {
        // A run on a name ended, and a later run on the name shows what was kept.
        named_runs(f).values().any(|runs| {
            runs.windows(2).any(|w| f.runs[w[0]].ended.is_some() && first_request_of_run(f, w[1]).is_some())
        })
    }),
    // --- §3: running in the background ---
    ("bub.background.parallel", |f| {
        let root_asked_meanwhile = f
            .events()
            .any(|(i, e)| e.agent.depth() == 0 && matches!(e.event, Event::LlmRequest { .. }) && f.running_at(i) > 0);
        let several = f.events().any(|(i, _)| f.running_at(i) >= 2);
        root_asked_meanwhile && several
    }),
    ("bub.task.lifecycle", |f| {
        f.runs.iter().any(|r| r.started.is_some() && r.ended.is_some() && !r.delivered.is_empty())
    }),
    ("bub.child.request-id", |f| {
        f.bg_children().any(|(run, first, _)| {
            let parent = run.spawn.and_then(|s| f.request_before(f.spawns[s].parent, f.spawns[s].at));
            parent.is_some_and(|p| *first.request.request_id == format!("{}-{}", p.request.request_id, run.id))
        })
    }),
    ("bub.child.depth", |f| {
        f.runs
            .iter()
            .any(|r| f.after(r.child, r.queued).any(|(_, e)| matches!(e, Event::AgentStarted { depth: 1, .. })))
    }),
    // --- §3.1: the cap ---
    ("bub.cap.max-running", |f| {
        f.runs.iter().any(|r| f.queued_behind(r) && f.running_at(r.queued + 1) == f.rules.max_concurrency)
    }),
    ("bub.cap.fifo-queue", |f| {
        // Two children waited at once, and both started later, the first queued first.
        let waited: Vec<&TaskRun> = f.runs_started_later().collect();
        waited
            .iter()
            .enumerate()
            .any(|(i, a)| waited[i + 1..].iter().any(|b| b.queued < a.started.unwrap_or(0) && a.started < b.started))
    }),
    ("bub.cap.slot-refilled-at-once", |f| {
        f.runs_started_later().any(|r| {
            let start = r.started.expect("started");
            f.ev[..start]
                .iter()
                .rev()
                .take_while(|e| e.at == f.ev[start].at)
                .any(|e| matches!(e.event, Event::TaskEnded { .. }))
        })
    }),
    // --- §3.2: time limits ---
    ("bub.timeout.precedence", |f| {
        f.bg_children().any(|(run, _, args)| {
            // Two sources were present, and the first one decided (not the smaller one).
            let profile = arg_str(args, "agent").is_some();
            let default = f.rules.subagent_default_timeout;
            match call_timeout(args) {
                Some(limit) => (profile || default.is_some()) && run.started.is_some() && run.timeout == limit,
                None => profile && default.is_some() && run.timeout.is_some() && run.timeout != default,
            }
        })
    }),
    ("bub.timeout.none-by-default", |f| {
        f.rules.subagent_default_timeout.is_none()
            && f.bg_children()
                .any(|(run, _, args)| call_timeout(args).is_none() && run.started.is_some() && run.timeout.is_none())
    }),
    ("bub.timeout.invalid-ignored", |f| {
        f.bg_children().any(|(run, _, args)| {
            let invalid =
                arg(args, "timeout_seconds").is_some_and(|v| v.as_f64().is_none_or(|s| s < 0.0 || !s.is_finite()));
            invalid && run.started.is_some()
        })
    }),
    ("bub.timeout.zero-is-none", |f| {
        let call_zero = f.bg_children().any(|(run, _, args)| {
            arg(args, "timeout_seconds").and_then(Value::as_f64) == Some(0.0)
                && run.started.is_some()
                && run.timeout.is_none()
        });
        let default_zero = f.rules.subagent_default_timeout == Some(Duration::ZERO)
            && f.runs.iter().any(|r| r.started.is_some() && r.timeout.is_none());
        call_zero || default_zero
    }),
    ("bub.timeout.clamped", |f| {
        f.bg_children().any(|(run, _, args)| {
            arg(args, "timeout_seconds").and_then(Value::as_f64).is_some_and(|s| s > crate::rules::MAX_SECONDS)
                && run.timeout == Some(Duration::from_secs_f64(crate::rules::MAX_SECONDS))
        })
    }),
    ("bub.timeout.from-start", |f| {
        f.runs_started_later().any(|r| {
            let (Some(start), Some(end), Some(limit)) = (r.started, r.ended, r.timeout) else { return false };
            r.status == Some(TaskStatus::TimedOut)
                && f.ev[end].at == f.ev[start].at + limit
                && f.ev[start].at > f.ev[r.queued].at
        })
    }),
    ("bub.timeout.exact", |f| {
        f.runs.iter().any(|r| {
            let (Some(start), Some(end), Some(limit)) = (r.started, r.ended, r.timeout) else { return false };
            r.status == Some(TaskStatus::TimedOut) && f.ev[end].at == f.ev[start].at + limit
        })
    }),
    ("bub.timeout.outcome", |f| {
        f.runs.iter().any(|r| {
            r.status == Some(TaskStatus::TimedOut)
                && r.timeout.is_some_and(|l| r.body == format!("Timed out after {} seconds.", seconds(l)))
        })
    }),
    // --- §3.3: quitting ---
    ("bub.quit.cancels-children", |f| quit_cancelled(f).next().is_some()),
    ("bub.quit.queued-first", |f| {
        let cancelled: Vec<&TaskRun> = quit_cancelled(f).collect();
        let queued = cancelled.iter().filter(|r| r.started.is_none()).filter_map(|r| r.ended).max();
        let running = cancelled.iter().filter(|r| r.started.is_some()).filter_map(|r| r.ended).min();
        matches!((queued, running), (Some(q), Some(r)) if q < r)
    }),
    ("bub.quit.named-kept", |f| {
        quit_cancelled(f).any(|r| {
            !r.session.starts_with("temp/")
                && !r.session.starts_with("fork/")
                && f.e.live_sessions.iter().any(|s| s == r.session)
        })
    }),
    // --- §4.1: notifications ---
    ("bub.delivery.notification-format", |f| {
        f.runs.iter().any(|r| {
            r.delivered.iter().any(|(_, via)| *via == Via::Notification)
                && r.status.is_some_and(|s| {
                    let text = notification(r.id, s.as_str(), r.body);
                    f.root_requests()
                        .iter()
                        .any(|x| x.request.messages.iter().any(|m| m.role == Role::User && *m.content == text))
                })
        })
    }),
    ("bub.delivery.status-values", |f| {
        f.events().any(|(i, e)| matches!(e.event, Event::Delivered { task_id, status, .. } if f.runs.iter().any(|r| r.id == task_id && r.status == Some(*status) && r.delivered.iter().any(|(d, _)| *d == i))))
    }),
    ("bub.delivery.final-answer-only", |f| {
        f.runs.iter().any(|r| {
            let did_more = r.ended.is_some_and(|end| {
                f.calls.iter().any(|c| c.agent == r.child && c.end.is_some_and(|e| e > r.queued && e < end))
            });
            let final_message = f.final_message(r.child, r.queued).map(|(m, _)| m);
            did_more && !r.delivered.is_empty() && final_message == Some(r.body)
        })
    }),
    ("bub.delivery.before-next-step", |f| {
        f.events().any(|(i, e)| {
            matches!(e.event, Event::Delivered { via: Via::Notification, .. })
                && f.after(e.agent, i).find(|(_, n)| matches!(n, Event::LlmRequest { .. })).is_some_and(|(p, _)| {
                    let n = f.requests_before(e.agent, p);
                    f.requests(e.agent).get(n).is_some_and(|x| {
                        x.request.messages.last().is_some_and(|m| m.content.starts_with("<subagent-notification "))
                    })
                })
        })
    }),
    ("bub.delivery.completion-order", |f| {
        batches(f).iter().any(|batch| {
            batch.windows(2).any(|w| f.runs[w[0]].spawn > f.runs[w[1]].spawn && f.runs[w[0]].ended < f.runs[w[1]].ended)
        })
    }),
    ("bub.delivery.tie-spawn-order", |f| {
        batches(f).iter().any(|batch| {
            batch.windows(2).any(|w| {
                let (a, b) = (&f.runs[w[0]], &f.runs[w[1]]);
                matches!((a.ended, b.ended), (Some(x), Some(y)) if f.ev[x].at == f.ev[y].at) && a.spawn < b.spawn
            })
        })
    }),
    ("bub.delivery.once", |f| f.runs.iter().any(|r| r.delivered.len() == 1)),
    ("bub.delivery.result-record", |f| {
        let mut by_id: BTreeMap<&str, usize> = BTreeMap::new();
        for r in f.runs.iter().filter(|r| !r.delivered.is_empty()) {
            *by_id.entry(r.id).or_default() += 1;
        }
        // Two runs of one task delivered, the second begun before the first was read.
        by_id.values().any(|n| *n >= 2)
            && f.runs
                .windows(2)
                .any(|w| w[0].id == w[1].id && w[0].delivered.first().is_some_and(|(d, _)| *d > w[1].queued))
    }),
    // --- §4.2: the held turn ---
    ("bub.turn.held-while-children", |f| held(f, |r| r.calls.is_empty())),
    ("bub.turn.held-final-answer", |f| held(f, |r| r.calls.first().is_some_and(|c| c == "final_answer"))),
    ("bub.turn.held-reply-costs-one", |f| {
        f.responses.iter().any(|r| {
            r.held.is_some_and(|h| {
                let agent = r.agent.expect("a response has an agent");
                matches!(f.after(agent, h).find(|(_, e)| matches!(e, Event::LlmRequest { .. })), Some((_, Event::LlmRequest { budget, .. })) if Some(budget + 1) == r.budget)
            })
        })
    }),
    ("bub.turn.fail-ask-user-not-held", |f| {
        f.events().any(|(i, e)| e.agent.depth() == 0 && matches!(e.event, Event::AgentEnded { kind: OutcomeKind::Fail | OutcomeKind::AwaitingUser, message, .. } if !is_exhausted(message) && !message.starts_with("LLM call failed")) && f.unfinished_at(i))
    }),
    ("bub.turn.no-step-left-not-held", |f| {
        f.responses.iter().any(|r| {
            r.agent.is_some_and(|a| a.depth() == 0)
                && r.held.is_none()
                && r.ended.is_some_and(|i| {
                    matches!(f.ev[i].event, Event::AgentEnded { kind: OutcomeKind::FinalAnswer, budget: 0, .. })
                        && f.unfinished_at(i)
                })
        })
    }),
    ("bub.turn.budget-checked-before-intake", |f| {
        f.events().any(|(i, e)| {
            e.agent.depth() == 0
                && matches!(e.event, Event::AgentEnded { message, .. } if is_exhausted(message))
                && f.runs
                    .iter()
                    .any(|r| r.ended.is_some_and(|x| x < i) && r.delivered.first().is_some_and(|(d, _)| *d > i))
        })
    }),
    ("bub.turn.unfinished-next-turn", notified_at_turn_start),
    ("bub.steer.reaches-parent-only", |f| {
        f.events().any(|(i, e)| {
            let Event::Steered { message } = e.event else { return false };
            let child_running =
                f.running_at(i) > 0 || f.fg_spawns().any(|s| s.at < i && f.fg_outcome(s).is_some_and(|(o, _)| o > i));
            e.agent.depth() == 0
                && child_running
                && !f
                    .e
                    .exchanges
                    .iter()
                    .any(|x| x.request.agent.depth() >= 1 && x.request.messages.iter().any(|m| m.content == *message))
        })
    }),
    ("bub.steer.wakes-held-root", |f| {
        f.events().any(|(i, e)| {
            e.agent.depth() == 0 && matches!(e.event, Event::AwaitingChildren { .. }) && {
                let next: Vec<&Event> = f
                    .after(e.agent, i)
                    .map(|(_, n)| n)
                    .take_while(|n| !matches!(n, Event::LlmRequest { .. }))
                    .collect();
                next.iter().any(|n| matches!(n, Event::Steered { .. }))
                    && !next.iter().any(|n| matches!(n, Event::Delivered { .. }))
                    && f.after(e.agent, i).any(|(_, n)| matches!(n, Event::LlmRequest { .. }))
            }
        })
    }),
    // --- §4.3: subagent.wait ---
    ("bub.wait.params", |f| {
        f.calls_to("subagent.wait")
            .any(|c| !c.is_error && (arg(c.args, "task_ids").is_some() || arg(c.args, "timeout_seconds").is_some()))
    }),
    ("bub.wait.listed", |f| {
        f.calls_to("subagent.wait").any(|c| {
            let Some(ids) = list(c.args, "task_ids").filter(|ids| !ids.is_empty()) else { return false };
            let others =
                f.runs.iter().any(|r| r.queued < c.start.unwrap_or(0) && !ids.iter().any(|i| i.trim() == r.id));
            !c.is_error
                && others
                && wait_entries(c)
                    .is_some_and(|entries| entries.iter().all(|(id, ..)| ids.iter().any(|i| i.trim() == id)))
        })
    }),
    ("bub.wait.without-ids", |f| {
        f.calls_to("subagent.wait")
            .any(|c| !c.is_error && arg(c.args, "task_ids").is_none() && wait_entries(c).is_some_and(|e| e.len() >= 2))
    }),
    ("bub.wait.deadline", |f| {
        f.calls_to("subagent.wait").any(|c| {
            let (Some(start), Some(end)) = (c.start, c.end) else { return false };
            let limit = arg(c.args, "timeout_seconds")
                .and_then(Value::as_f64)
                .unwrap_or(crate::rules::WAIT_DEFAULT_SECONDS as f64);
            let waited = (f.ev[end].at - f.ev[start].at).as_secs_f64();
            limit > 0.0
                && (waited - limit).abs() < 1e-9
                && wait_entries(c).is_some_and(|e| e.iter().any(|(_, s, _)| s == "running" || s == "queued"))
        })
    }),
    ("bub.wait.peek", |f| {
        f.calls_to("subagent.wait").any(|c| {
            arg(c.args, "timeout_seconds").and_then(Value::as_f64) == Some(0.0)
                && matches!((c.start, c.end), (Some(s), Some(e)) if f.ev[s].at == f.ev[e].at)
                && !c.is_error
        })
    }),
    ("bub.wait.result-shape", |f| f.calls_to("subagent.wait").any(|c| wait_entries(c).is_some_and(|e| !e.is_empty()))),
    ("bub.wait.unfinished-listed", |f| {
        f.calls_to("subagent.wait")
            .any(|c| wait_entries(c).is_some_and(|e| e.iter().any(|(_, s, _)| s == "running" || s == "queued")))
    }),
    ("bub.wait.not-notified-again", |f| {
        f.runs.iter().any(|r| {
            r.delivered.first().is_some_and(|(d, via)| {
                *via == Via::Wait && f.after(&AgentId::root(), *d).any(|(_, e)| matches!(e, Event::LlmRequest { .. }))
            })
        })
    }),
    // --- §4.4: subagent.send ---
    ("bub.send.to-active-task", |f| {
        f.calls_to("subagent.send").any(|c| {
            let status = json(c.result).and_then(|v| v["status"].as_str().map(str::to_string));
            !c.is_error
                && matches!(status.as_deref(), Some("running" | "queued"))
                && json(c.result).is_some_and(|v| v.get("session").is_none())
        })
    }),
    ("bub.send.queued-first-request", |f| {
        f.runs.iter().any(|r| {
            let Some(first) = f.request_pos_after(r.child, r.queued) else { return false };
            f.ev[r.queued..first].iter().any(|e| e.agent == r.child && matches!(e.event, Event::Steered { .. }))
        })
    }),
    ("bub.send.continue-named", |f| {
        f.runs.iter().enumerate().any(|(i, r)| {
            f.runs[..i].iter().any(|p| p.id == r.id)
                && r.spawn.is_some_and(|s| f.spawn_call(&f.spawns[s]).is_some_and(|c| c.tool == "subagent.send"))
        })
    }),
    ("bub.send.continue-keeps-launch", |f| {
        // A task launched with something of its own (a profile, a model or effort other than
        // the root's, a time limit) was continued, and its new run asked the model with all
        // of it, though the `send` carried none.
        f.runs.iter().enumerate().any(|(i, r)| {
            let Some(first) = f.runs[..i].iter().position(|p| p.id == r.id) else { return false };
            let continued = r.spawn.and_then(|s| f.spawn_call(&f.spawns[s])).is_some_and(|c| c.tool == "subagent.send");
            let (Some((_, a)), Some((_, b))) = (first_request_of_run(f, first), first_request_of_run(f, i)) else {
                return false;
            };
            let (a, b) = (&a.request, &b.request);
            let root = f.root_requests().first().map(|x| &x.request);
            let own = a.profile.is_some()
                || f.runs[first].timeout.is_some()
                || root.is_some_and(|p| p.model != a.model || p.reasoning_effort != a.reasoning_effort);
            continued
                && own
                && a.request_id == b.request_id
                && a.model == b.model
                && a.reasoning_effort == b.reasoning_effort
                && a.profile == b.profile
                && a.system == b.system
                && Facts::tool_names(a) == Facts::tool_names(b)
                && f.runs[first].timeout == r.timeout
        })
    }),
    ("bub.send.continue-same-alias", |f| {
        f.runs.iter().enumerate().any(|(i, r)| {
            f.runs[..i].iter().any(|p| p.id == r.id && p.child == r.child)
                && f.after(r.child, r.queued)
                    .find(|(_, e)| matches!(e, Event::LlmRequest { .. }))
                    .is_some_and(|(_, e)| matches!(e, Event::LlmRequest { call: 1, .. }))
        })
    }),
    ("bub.send.finished-discarded", |f| {
        f.calls_to("subagent.send")
            .any(|c| c.is_error && c.result.ends_with(" has finished and its session was discarded"))
    }),
    ("bub.send.empty-message", |f| {
        f.calls_to("subagent.send").any(|c| c.is_error && c.result == "error: empty message")
    }),
    // --- §4.5: subagent.cancel ---
    ("bub.cancel.stops", |f| cancelled_by_call(f).any(|r| r.body == "Cancelled.")),
    ("bub.cancel.frees-slot", |f| {
        cancelled_by_call(f).any(|r| {
            let end = r.ended.expect("cancelled runs ended");
            let refilled = r.started.is_some()
                && f.ev[end..]
                    .iter()
                    .take_while(|e| e.at == f.ev[end].at)
                    .any(|e| matches!(e.event, Event::TaskStarted { .. }));
            refilled || r.started.is_none()
        })
    }),
    ("bub.cancel.result", |f| {
        f.calls_to("subagent.cancel").any(|c| {
            !c.is_error
                && json(c.result)
                    .is_some_and(|v| v["status"] == "cancelled" && v.as_object().is_some_and(|o| o.len() == 2))
        })
    }),
    ("bub.cancel.no-notification", |f| {
        cancelled_by_call(f).any(|r| {
            r.delivered.is_empty()
                && r.ended
                    .is_some_and(|e| f.after(&AgentId::root(), e).any(|(_, n)| matches!(n, Event::LlmRequest { .. })))
        })
    }),
    ("bub.cancel.finished-error", |f| {
        f.calls_to("subagent.cancel").any(|c| c.is_error && c.result.ends_with(" has already finished"))
    }),
    // --- §5: profiles ---
    ("bub.profile.fields", |f| {
        // A child ran under a profile whose settings show: its model, effort or tools differ
        // from what a child without one gets.
        f.bg_children().any(|(run, first, args)| {
            let root = f.root_requests().first().map(|x| &x.request);
            let profile = first.request.profile.is_some();
            let from_call = ["model", "reasoning_effort", "allowed_tools"].iter().any(|k| arg(args, k).is_some());
            let shows = root.is_some_and(|p| {
                p.model != first.request.model
                    || p.reasoning_effort != first.request.reasoning_effort
                    || f.default_child_tools(&Facts::tool_names(p), run.child.depth())
                        != Facts::tool_names(&first.request)
            });
            profile && !from_call && shows
        })
    }),
    ("bub.profile.call-over-profile", |f| {
        f.bg_children().any(|(run, first, args)| {
            let profile = first.request.profile.is_some();
            let model = arg_str(args, "model").is_some_and(|m| first.request.model.as_deref() == Some(m));
            let effort =
                arg_str(args, "reasoning_effort").is_some_and(|m| first.request.reasoning_effort.as_deref() == Some(m));
            let timeout = arg(args, "timeout_seconds")
                .and_then(Value::as_f64)
                .filter(|s| *s > 0.0)
                .is_some_and(|s| run.timeout == Some(Duration::from_secs_f64(s.min(crate::rules::MAX_SECONDS))));
            profile && (model || effort || timeout)
        })
    }),
    ("bub.profile.body", |f| {
        let Some(base) = f.root_system().map(|s| sections(s).0) else { return false };
        f.e.exchanges.iter().any(|x| {
            let (own, _) = sections(&x.request.system);
            x.request.profile.is_some() && own.starts_with(base) && own.len() > base.len()
        })
    }),
    ("bub.profile.listed", |f| {
        f.root_system().is_some_and(|s| s.contains("Agent profiles (pass the name as `agent` to `subagent`):\n- "))
    }),
    ("bub.prompt.skills-line", |f| {
        f.e.exchanges.iter().any(|x| sections(&x.request.system).1.is_some_and(|s| !s.contains('\n')))
    }),
    // --- §6: what a child inherits and may use ---
    ("bub.child.model", |f| {
        let root = f.root_requests().first().map(|x| &x.request);
        f.bg_children().any(|(_, first, _)| {
            root.is_some_and(|p| p.model != first.request.model || p.reasoning_effort != first.request.reasoning_effort)
        })
    }),
    ("bub.child.tools-default", |f| {
        f.bg_children().any(|(run, first, args)| {
            let plain = arg(args, "allowed_tools").is_none() && arg(args, "agent").is_none();
            let parent = run.spawn.and_then(|s| f.request_before(f.spawns[s].parent, f.spawns[s].at));
            plain
                && parent.is_some_and(|p| {
                    Facts::tool_names(&first.request)
                        == f.default_child_tools(&Facts::tool_names(&p.request), run.child.depth())
                })
        })
    }),
    ("bub.child.tools-narrowed", |f| {
        f.bg_children().any(|(run, first, args)| {
            let parent = run.spawn.and_then(|s| f.request_before(f.spawns[s].parent, f.spawns[s].at));
            let names = Facts::tool_names(&first.request);
            let narrowed = parent.is_some_and(|p| {
                names.len() < f.default_child_tools(&Facts::tool_names(&p.request), run.child.depth()).len()
            });
            let asked = list(args, "allowed_tools").is_some_and(|l| !l.is_empty()) || first.request.profile.is_some();
            asked && narrowed && names.contains(&"final_answer") && names.contains(&"fail")
        })
    }),
    ("bub.child.tools-at-most-parent", |f| {
        f.calls_to("subagent").any(|c| {
            let Some(names) = c.result.strip_prefix("unknown tool name(s): ").filter(|_| c.is_error) else {
                return false;
            };
            let parent = f
                .request_before(c.agent, c.start.unwrap_or(0))
                .map(|x| Facts::tool_names(&x.request))
                .unwrap_or_default();
            names.split(", ").map(|n| n.trim_matches('\'')).any(|n| {
                Facts::family_tool(n)
                    || (!parent.contains(&n)
                        && f.e.exchanges.iter().any(|x| Facts::tool_names(&x.request).contains(&n)))
            })
        })
    }),
    ("bub.child.allowed-tools-string", |f| {
        f.bg_children().any(|(_, _, args)| arg(args, "allowed_tools").is_some_and(Value::is_string))
    }),
    ("bub.child.allowed-tools-empty", |f| {
        f.bg_children()
            .any(|(_, _, args)| arg(args, "allowed_tools").is_some_and(|v| v.as_array().is_some_and(Vec::is_empty)))
    }),
    ("bub.child.allowed-tools-replace-profile", |f| {
        f.bg_children().any(|(_, first, args)| {
            let Some(asked) = list(args, "allowed_tools").filter(|l| !l.is_empty()) else { return false };
            let offered: Vec<String> = Facts::tool_names(&first.request)
                .into_iter()
                .filter(|n| !TERMINAL.contains(n))
                .map(normalize)
                .collect();
            let mut wanted: Vec<String> =
                asked.iter().map(|n| normalize(n)).filter(|n| !TERMINAL.contains(&n.as_str())).collect();
            wanted.sort();
            wanted.dedup();
            let mut offered_sorted = offered.clone();
            offered_sorted.sort();
            first.request.profile.is_some() && wanted == offered_sorted
        })
    }),
    ("bub.child.allowed-tools-terminal", |f| {
        f.bg_children().any(|(_, _, args)| {
            list(args, "allowed_tools").is_some_and(|l| l.iter().any(|n| TERMINAL.contains(&normalize(n).as_str())))
        })
    }),
    ("bub.child.tools-catalog-order", |f| {
        f.bg_children().any(|(_, first, args)| {
            let Some(asked) = list(args, "allowed_tools") else { return false };
            let offered: Vec<String> = Facts::tool_names(&first.request)
                .into_iter()
                .map(normalize)
                .filter(|n| asked.iter().any(|a| normalize(a) == *n) && !TERMINAL.contains(&n.as_str()))
                .collect();
            let asked_order: Vec<String> = asked.iter().map(|a| normalize(a)).filter(|a| offered.contains(a)).collect();
            offered.len() >= 2 && offered != asked_order
        })
    }),
    ("bub.child.tools-enforced", |f| {
        let root_tools: Vec<&str> = f.root_requests().iter().flat_map(|x| Facts::tool_names(&x.request)).collect();
        f.ended_calls().any(|c| {
            c.agent.depth() >= 1
                && f.unknown(c)
                && root_tools.contains(&c.tool)
                && !Facts::family_tool(c.tool)
                && c.tool != "ask_user"
        })
    }),
    ("bub.child.skills", |f| {
        let root = f.root_system().and_then(|s| sections(s).1);
        f.bg_children().any(|(_, first, _)| root.is_some() && sections(&first.request.system).1.is_some())
    }),
    ("bub.child.cannot-spawn", |f| {
        f.ended_calls().any(|c| {
            c.agent.depth() >= 1
                && FAMILY.contains(&c.tool)
                && f.unknown(c)
                && f.runs.iter().any(|r| r.child == c.agent)
        })
    }),
    ("bub.child.aliases-unique", |f| {
        let turn_of = |pos: usize| f.ev[..=pos].iter().filter(|e| matches!(e.event, Event::TurnStarted { .. })).count();
        f.spawns.iter().any(|s| {
            s.parent.depth() == 0
                && turn_of(s.at) >= 2
                && f.spawns.iter().any(|p| p.parent.depth() == 0 && turn_of(p.at) < turn_of(s.at))
        })
    }),
];

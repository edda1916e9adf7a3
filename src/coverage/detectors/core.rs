//! The detectors of docs/rules/core.md §1–§5, what both families share: one core, the knobs,
//! depth, budget and costs, time and one instant.
//!
//! The oracle clauses of §6 are in `oracles`; the shared questions in `queries`.

use std::time::Duration;

use crate::coverage::facts::*;
use crate::rules::Rules;
use crate::sut::AgentId;
use crate::sut::event::{Event, TaskStatus, Via};

use super::Detector;
use super::queries::{PROFILES_HEADING, batches, root_acts_by_instant, sections, truncated_background};

/// Every measured clause of the page and its detector.
pub(super) const DETECTORS: &[(&str, Detector)] = &[
    // --- core.md §1: one core, both families ---
    ("core.family.presets", |f| *f.rules != Rules::preset(f.rules.preset)),
    ("core.family.mix", |f| {
        f.rules.agent_tool && f.rules.subagent_tools && f.fg_spawns().next().is_some() && f.bg_spawns().next().is_some()
    }),
    ("core.family.off-is-unknown", |f| f.ended_calls().any(|c| Facts::family_tool(c.tool) && f.unknown(c))),
    ("core.context.system-prompt", |f| {
        // A prompt made of more than the base: the profile listing, a profile's body or the
        // skills line is in it.
        f.e.exchanges.iter().any(|x| {
            let system = &*x.request.system;
            let listing = system.contains(PROFILES_HEADING);
            let skills = sections(system).1.is_some();
            let body = x.request.profile.as_deref().is_some_and(|name| {
                f.e.setup
                    .and_then(|s| s.profiles.iter().find(|p| p.name == name))
                    .is_some_and(|p| !p.body.trim().is_empty() && system.contains(p.body.trim()))
            });
            listing || skills || body
        })
    }),
    ("core.alias.numbering", |f| {
        f.spawns.iter().any(|s| {
            f.spawns.iter().filter(|p| p.parent == s.parent).count() >= 2 && s.child.parent().as_ref() == Some(s.parent)
        }) && f.spawns.iter().all(|s| s.child.parent().as_ref() == Some(s.parent))
    }),
    // --- §2: the knobs ---
    ("core.knob.root-step-budget", |f| {
        f.any(|e| matches!(e, Event::TurnStarted { budget, .. } if *budget == f.rules.root_step_budget))
    }),
    ("core.knob.recovery-budget", |f| {
        f.ended_calls()
            .any(|c| c.recovery_before == Some(f.rules.recovery_budget) && c.recovery + 1 == f.rules.recovery_budget)
    }),
    ("core.knob.depth-limit", |f| {
        f.calls.iter().any(|c| c.result == DEPTH_ERROR) || f.spawns.iter().any(|s| s.child.depth() >= 2)
    }),
    ("core.knob.child-step-cap", |f| {
        f.spawns.iter().any(|s| s.grant == f.rules.child_step_cap && s.before.saturating_sub(s.cost) > s.grant)
    }),
    ("core.knob.spawn-cost", |f| f.spawns.iter().any(|s| s.cost == f.rules.spawn_cost)),
    ("core.knob.result-limit-chars", |f| {
        f.fg_spawns().any(|s| f.fg_result(s).is_some_and(|(_, _, _, cut)| cut.is_some())) || truncated_background(f)
    }),
    ("core.knob.agent-timeout", |f| f.fg_spawns().any(|s| f.fg_timed_out(s).is_some())),
    ("core.knob.subagent-default-timeout", |f| {
        f.rules.subagent_default_timeout.is_some_and(|d| !d.is_zero())
            && f.bg_children().any(|(run, _, args)| {
                arg(args, "timeout_seconds").is_none()
                    && arg(args, "agent").is_none()
                    && run.timeout == f.rules.subagent_default_timeout
            })
    }),
    ("core.knob.max-concurrency", |f| f.runs.iter().any(|r| f.queued_behind(r))),
    ("core.knob.agent-tool", |f| {
        f.root_requests().iter().any(|x| Facts::tool_names(&x.request).contains(&"Agent") == f.rules.agent_tool)
    }),
    ("core.knob.subagent-tools", |f| {
        f.root_requests().iter().any(|x| {
            Facts::tool_names(&x.request).contains(&"subagent") == (f.rules.subagent_tools && f.rules.depth_limit > 0)
        })
    }),
    ("core.knob.unknown-tool-message", |f| f.ended_calls().any(|c| f.unknown(c))),
    // --- §3: depth ---
    ("core.depth.no-agent-beyond-limit", |f| {
        f.calls.iter().any(|c| c.result == DEPTH_ERROR && c.agent.depth() == f.rules.depth_limit)
    }),
    ("core.depth.guard-error", |f| {
        f.events().any(|(i, e)| {
            matches!(e.event, Event::SpawnRefused { reason, .. } if reason == DEPTH_ERROR)
                && f.calls.iter().any(|c| {
                    c.agent == e.agent
                        && c.start.is_some_and(|s| s < i)
                        && c.end.is_some_and(|x| x > i)
                        && c.is_error
                        && c.result == DEPTH_ERROR
                })
        })
    }),
    ("core.depth.agent-offered-below-limit", |f| {
        f.rules.agent_tool
            && f.e.exchanges.iter().any(|x| {
                x.request.agent.depth() >= 1
                    && Facts::tool_names(&x.request).contains(&"Agent")
                        == (x.request.agent.depth() < f.rules.depth_limit)
            })
    }),
    ("core.depth.subagent-root-only", |f| {
        let zero = f.rules.subagent_tools
            && f.rules.depth_limit == 0
            && f.root_requests().iter().any(|x| !Facts::tool_names(&x.request).iter().any(|n| FAMILY.contains(n)));
        let child = f.rules.subagent_tools
            && f.e.exchanges.iter().any(|x| {
                x.request.agent.depth() >= 1
                    && x.request.agent.depth() < f.rules.depth_limit
                    && !Facts::tool_names(&x.request).contains(&"subagent")
            });
        zero || child
    }),
    ("core.depth.subagent-child-unknown", |f| {
        f.ended_calls().any(|c| c.agent.depth() >= 1 && FAMILY.contains(&c.tool) && f.unknown(c))
    }),
    // --- §4: budget and costs ---
    ("core.budget.pre-deduction-both-families", |f| {
        let ok = |s: &&Spawn| {
            s.after == s.before.saturating_sub(s.cost).saturating_sub(s.grant)
                && s.grant == s.before.saturating_sub(s.cost).min(f.rules.child_step_cap)
        };
        f.fg_spawns().any(|s| ok(&s)) && f.bg_spawns().any(|s| ok(&s))
    }),
    ("core.budget.queued-deducted", |f| {
        f.runs.iter().any(|r| {
            f.queued_behind(r)
                && r.spawn.is_some_and(|s| f.spawns[s].grant > 0 && f.spawns[s].after < f.spawns[s].before)
        })
    }),
    ("core.budget.never-refunded", |f| {
        let cut = f.runs.iter().any(|r| {
            matches!(r.status, Some(TaskStatus::Cancelled | TaskStatus::TimedOut))
                && r.spawn.is_some_and(|s| f.spawns[s].grant > 0)
        });
        let unspent = f.runs.iter().any(|r| {
            r.status == Some(TaskStatus::Completed)
                && matches!(f.end_of(r.child, r.queued), Some((_, Event::AgentEnded { budget, .. })) if *budget > 0)
        });
        cut || unspent
    }),
    ("core.budget.continuation-fresh-grant", |f| {
        f.spawns.iter().any(|s| {
            f.spawn_call(s).is_some_and(|c| c.tool == "subagent.send")
                && s.grant == s.before.saturating_sub(s.cost).min(f.rules.child_step_cap)
        })
    }),
    ("core.budget.child-within-grant", |f| {
        f.spawns.iter().any(|s| {
            f.after(s.child, s.at)
                .find(|(_, e)| matches!(e, Event::AgentStarted { .. }))
                .is_some_and(|(_, e)| matches!(e, Event::AgentStarted { budget, .. } if *budget == s.grant))
        })
    }),
    ("core.budget.never-rises", |f| {
        f.events().any(|(i, e)| budget_of(e.event).is_some_and(|b| f.prev_budget[i].is_some_and(|p| b < p)))
    }),
    ("core.budget.spawn-cost-even-refused", |f| {
        // A spawning call the gate let through was refused, created no child, and still paid.
        f.ended_calls().any(|c| {
            let spawning = matches!(c.tool, "Agent" | "subagent") && c.start.is_some() && c.is_error;
            spawning
                && c.spawn.is_none()
                && f.rules.spawn_cost > 0
                && c.budget_before.is_some_and(|b| c.budget + f.rules.spawn_cost == b)
        })
    }),
    ("core.cost.family-calls-one", |f| {
        ["subagent.wait", "subagent.send", "subagent.cancel"].iter().any(|t| {
            f.calls_to(t).any(|c| c.budget_before.is_some_and(|b| b > 0 && c.budget == b - 1) && c.spawn.is_none())
        })
    }),
    ("core.spawn.no-recovery", |f| {
        f.ended_calls().any(|c| {
            Facts::reached_family(c) && c.is_error && c.recovery_before.is_some_and(|r| r > 0 && c.recovery == r)
        })
    }),
    ("core.spawn.no-step-index", |f| {
        f.responses.iter().any(|r| {
            let only_family =
                !r.ran.is_empty() && r.denied.is_empty() && r.ran.iter().all(|c| Facts::reached_family(&f.calls[*c]));
            let agent = r.agent.expect("a response has an agent");
            let earlier = f
                .responses
                .iter()
                .filter(|p| p.agent == Some(agent) && p.at < r.at)
                .filter_map(|p| p.step)
                .next_back()
                .map_or(0, |(_, i)| i);
            only_family && r.step.is_some_and(|(_, i)| i == earlier)
        })
    }),
    ("core.spawn.no-nudge", |f| {
        f.ended_calls().any(|c| {
            Facts::reached_family(c)
                && c.budget == 0
                && c.end.is_some_and(|e| !matches!(f.next_of(c.agent, e), Some(Event::Nudge { .. })))
        })
    }),
    ("core.result.limit-applies-to-background", truncated_background),
    // --- §5: time ---
    ("core.time.tokio-clock", |f| {
        // A limit of the core's own (not a scripted latency) ended something on the clock.
        let timed_out = f.any(|e| matches!(e, Event::TimedOut { .. }));
        let deadline = f
            .calls_to("subagent.wait")
            .any(|c| matches!((c.start, c.end), (Some(s), Some(e)) if f.ev[e].at > f.ev[s].at));
        timed_out || deadline
    }),
    ("core.time.paused-clock", |f| f.ev.last().is_some_and(|e| e.at > Duration::ZERO)),
    ("core.time.same-instant-order", |f| {
        let ended_together = f.runs.iter().enumerate().any(|(i, a)| {
            f.runs[i + 1..].iter().any(|b| matches!((a.ended, b.ended), (Some(x), Some(y)) if f.ev[x].at == f.ev[y].at))
        });
        let started_together = f.runs_started_later().count() >= 2
            && f.runs_started_later().any(|a| {
                f.runs_started_later()
                    .any(|b| !std::ptr::eq(a, b) && a.started.map(|s| f.ev[s].at) == b.started.map(|s| f.ev[s].at))
            });
        ended_together || started_together
    }),
    ("core.time.finish-at-limit-wins", |f| {
        let fg = f.agent_limit().is_some_and(|limit| {
            f.fg_spawns().any(|s| f.fg_result(s).is_some_and(|(i, ..)| f.ev[i].at == f.ev[s.at].at + limit))
        });
        let bg = f.runs.iter().any(|r| {
            let (Some(start), Some(end), Some(limit)) = (r.started, r.ended, r.timeout) else { return false };
            matches!(r.status, Some(TaskStatus::Completed | TaskStatus::Failed))
                && f.ev[end].at == f.ev[start].at + limit
        });
        fg || bg
    }),
    ("core.time.timed-out-child-dropped", |f| {
        let fg = f.fg_spawns().any(|s| f.fg_timed_out(s).is_some() && f.end_of(s.child, s.at).is_none());
        let bg = f.runs.iter().any(|r| {
            r.status == Some(TaskStatus::TimedOut)
                && r.ended.is_some_and(|e| {
                    !f.ev[r.queued..e].iter().any(|x| x.agent == r.child && matches!(x.event, Event::AgentEnded { .. }))
                })
        });
        fg || bg
    }),
    ("core.time.seconds-format", |f| {
        let fg = f.fg_spawns().any(|s| {
            f.fg_timed_out(s).is_some_and(|(_, after)| {
                f.spawn_call(s).is_some_and(|c| c.result.ends_with(&format!(" {} seconds.", seconds(after))))
            })
        });
        let bg = f.runs.iter().any(|r| {
            r.status == Some(TaskStatus::TimedOut)
                && r.timeout.is_some_and(|l| r.body.ends_with(&format!(" {} seconds.", seconds(l))))
        });
        fg || bg
    }),
    // --- §5.3: one instant ---
    ("core.instant.settle-before-acting", |f| {
        // The root acted in an instant in which two things were due: a result or a steering
        // message besides what first made it act there (the model answering, its own step, a
        // wait's deadline), or two of them. One result that wakes the root, and whatever the
        // root does next in that instant, is one thing.
        root_acts_by_instant(f).iter().any(|acts| {
            let since = acts.iter().map(|a| a.since).max().unwrap_or(0);
            let due = f.arrivals_in_instant_of(acts[0].at).iter().filter(|a| f.under_way_before(a, since)).count();
            due >= 1 && due + usize::from(acts[0].own) >= 2
        })
    }),
    ("core.instant.ties-together", |f| {
        // Two results that ended in one instant taken in together in that very instant (one
        // request's notifications, or one wait's answer) ...
        let in_its_instant = |run: usize| {
            let run = &f.runs[run];
            run.ended.is_some_and(|e| run.delivered.first().is_some_and(|(d, _)| f.ev[*d].at == f.ev[e].at))
        };
        let results = batches(f).iter().any(|batch| {
            batch.iter().enumerate().any(|(i, a)| {
                batch[i + 1..].iter().any(|b| {
                    in_its_instant(*a)
                        && in_its_instant(*b)
                        && matches!((f.runs[*a].ended, f.runs[*b].ended), (Some(x), Some(y)) if f.ev[x].at == f.ev[y].at)
                })
            })
        });
        // ... or a result and a steering message of one instant, in one request of it.
        let root = AgentId::root();
        let steered = f.arrivals.iter().filter(|a| a.run.is_none()).any(|s| {
            let request = f.request_pos_after(&root, s.at).filter(|r| f.ev[*r].at == f.ev[s.at].at);
            f.arrivals_in_instant_of(s.at).iter().filter_map(|a| a.run).any(|r| {
                f.runs[r].delivered.iter().any(|(d, via)| {
                    *via == Via::Notification && request.is_some() && f.request_pos_after(&root, *d) == request
                })
            })
        });
        results || steered
    }),
    ("core.instant.how", |f| {
        // A child started in an instant in which the root then sent a request, and the child
        // asked the model in that instant too.
        let root = AgentId::root();
        f.runs.iter().any(|r| {
            let Some(started) = r.started else { return false };
            let at = f.ev[started].at;
            let child = f.request_pos_after(r.child, started).is_some_and(|c| f.ev[c].at == at);
            let root_asked = f.request_pos_after(&root, started).is_some_and(|q| f.ev[q].at == at);
            child && root_asked
        })
    }),
];

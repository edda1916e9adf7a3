//! The detectors: one per measured clause, in the order of the pages, and the few clauses no
//! run can show, each with the reason.
//!
//! A detector answers one question about one run: did the trace and the exchanges show the
//! behaviour the clause states? It fires on the situation the clause is about (a child queued
//! behind the cap that started later, a result landing at exactly its limit), never on a
//! scenario's say-so. Whether the behaviour was right is the oracles' and the expectations'
//! question, not this one's.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use super::facts::*;
use crate::evidence::{Exchange, fork_mismatch, same_reply};
use crate::rules::Rules;
use crate::sut::AgentId;
use crate::sut::event::{Event, Family, OutcomeKind, Status, TaskStatus, Via};
use crate::sut::llm::Role;

/// Whether a run's facts show a clause exercised.
pub(super) type Detector = fn(&Facts) -> bool;

/// Every measured clause and its detector.
pub(super) const DETECTORS: &[(&str, Detector)] = &[
    // --- roku.md §1.1: what a loop offers ---
    ("roku.tools.visible-set", |f| {
        // A loop offered fewer tools than its parent: something was taken away.
        f.e.exchanges.iter().any(|x| {
            let names = Facts::tool_names(&x.request);
            let catalog_then_pseudo = names.iter().position(|n| TERMINAL.contains(n)).is_some_and(|p| p > 0);
            let parent = x.request.agent.parent().and_then(|p| f.requests(&p).first().copied());
            catalog_then_pseudo && parent.is_some_and(|p| p.request.tools.len() > names.len())
        })
    }),
    ("roku.tools.pseudo-order", |f| {
        f.e.exchanges.iter().any(|x| {
            let names = Facts::tool_names(&x.request);
            names.windows(4).any(|w| w == ["final_answer", "ask_user", "fail", "Agent"])
        })
    }),
    ("roku.tools.root-offers-agent", |f| {
        f.rules.agent_tool && f.root_requests().iter().any(|x| Facts::tool_names(&x.request).contains(&"Agent"))
    }),
    // --- §1.2: one iteration ---
    ("roku.loop.budget-zero-fails", |f| {
        f.any(|e| matches!(e, Event::AgentEnded { kind: OutcomeKind::Fail, status: Status::Error, message, budget: 0, .. } if is_exhausted(message)))
    }),
    ("roku.loop.budget-zero-no-llm-call", |f| {
        f.events().any(|(i, e)| match e.event {
            Event::AgentEnded { message, budget: 0, .. } if is_exhausted(message) => {
                // The loop's previous event is no request: it failed at the top.
                f.ev[..i]
                    .iter()
                    .rev()
                    .find(|p| p.agent == e.agent)
                    .is_some_and(|p| !matches!(p.event, Event::LlmRequest { .. }))
            }
            _ => false,
        })
    }),
    ("roku.loop.budget-checked-at-top-only", |f| {
        // A call of a response ran after an earlier one had spent the last step.
        f.responses.iter().any(|r| r.ran.windows(2).any(|w| f.calls[w[0]].budget == 0 && f.calls[w[1]].end.is_some()))
    }),
    ("roku.loop.llm-error-fails", |f| {
        f.events().any(|(i, e)| {
            matches!(e.event, Event::LlmFailed { .. })
                && matches!(f.next_of(e.agent, i), Some(Event::AgentEnded { kind: OutcomeKind::Fail, status: Status::Error, message, .. }) if message.starts_with("LLM call failed for goal: "))
        })
    }),
    ("roku.loop.llm-error-costs-nothing", |f| {
        f.events().any(|(i, e)| {
            matches!(e.event, Event::LlmFailed { .. })
                && matches!(f.next_of(e.agent, i), Some(Event::AgentEnded { budget, .. }) if Some(*budget) == f.prev_budget[i])
        })
    }),
    ("roku.loop.assistant-appended", |f| {
        f.exchanges.values().any(|xs| {
            xs.windows(2).any(|w| {
                let (Some(reply), n) = (&w[0].reply, w[0].request.messages.len()) else { return false };
                !reply.tool_calls.is_empty() && w[1].request.messages.get(n).is_some_and(|m| same_reply(m, reply))
            })
        })
    }),
    ("roku.loop.text-reply-final-answer", |f| {
        f.responses.iter().any(|r| {
            r.calls.is_empty()
                && !r.text.is_empty()
                && r.ended.is_some_and(|i| matches!(f.ev[i].event, Event::AgentEnded { kind: OutcomeKind::FinalAnswer, status: Status::Ok, message, budget, .. } if message == r.text && Some(budget + 1) == r.budget))
        })
    }),
    ("roku.loop.empty-text-completed", |f| {
        f.responses.iter().any(|r| {
            r.calls.is_empty()
                && r.text.is_empty()
                && r.ended.is_some_and(|i| matches!(f.ev[i].event, Event::AgentEnded { message, .. } if message == "Runtime loop completed."))
        })
    }),
    // --- §1.3: terminal calls ---
    ("roku.terminal.scan-first", |f| {
        f.responses.iter().any(|r| {
            let terminals: Vec<&String> = r.calls.iter().filter(|c| TERMINAL.contains(&c.as_str())).collect();
            let want = match terminals.first().map(|c| c.as_str()) {
                Some("fail") => OutcomeKind::Fail,
                Some("ask_user") => OutcomeKind::AwaitingUser,
                _ => OutcomeKind::FinalAnswer,
            };
            terminals.len() >= 2
                && terminals[0] != terminals[1]
                && r.ended.is_some_and(|i| matches!(f.ev[i].event, Event::AgentEnded { kind, .. } if *kind == want))
        })
    }),
    ("roku.terminal.no-other-call-runs", |f| {
        f.responses.iter().any(|r| {
            r.calls.iter().any(|c| TERMINAL.contains(&c.as_str()))
                && r.calls.iter().any(|c| !TERMINAL.contains(&c.as_str()))
                && r.ran.is_empty()
                && r.denied.is_empty()
                && r.ended.is_some()
        })
    }),
    ("roku.terminal.final-answer", |f| {
        terminal_ended(f, "final_answer", Some("message"), |kind, status, message, arg| {
            kind == OutcomeKind::FinalAnswer && status == Status::Ok && arg.is_some_and(|a| a == message)
        })
    }),
    ("roku.terminal.final-answer-default", |f| {
        terminal_ended(f, "final_answer", Some("message"), |kind, _, message, arg| {
            kind == OutcomeKind::FinalAnswer && arg.is_none() && message.is_empty()
        })
    }),
    ("roku.terminal.fail", |f| {
        terminal_ended(f, "fail", Some("reason"), |kind, status, message, arg| {
            kind == OutcomeKind::Fail && status == Status::Error && arg.is_some_and(|a| a == message)
        })
    }),
    ("roku.terminal.fail-default", |f| {
        terminal_ended(f, "fail", Some("reason"), |kind, _, message, arg| {
            kind == OutcomeKind::Fail && arg.is_none() && message == "LLM reported failure."
        })
    }),
    ("roku.terminal.ask-user", |f| {
        f.responses.iter().any(|r| {
            r.calls.first().is_some_and(|c| c == "ask_user")
                && r.ended.is_some_and(|i| matches!(f.ev[i].event, Event::AgentEnded { kind: OutcomeKind::AwaitingUser, status: Status::Ok, budget, .. } if Some(*budget) == r.budget))
        })
    }),
    // --- §1.4: running the other calls ---
    ("roku.calls.serial-in-order", |f| {
        f.responses.iter().any(|r| {
            r.ran.len() >= 2
                && r.ran.windows(2).all(|w| {
                    let (a, b) = (&f.calls[w[0]], &f.calls[w[1]]);
                    a.end.is_some_and(|end| b.start.or(b.end).is_some_and(|s| end < s))
                })
        })
    }),
    ("roku.calls.catalog-cost", |f| {
        f.ended_calls().any(|c| Facts::catalog(c) && c.budget_before.is_some_and(|b| b > 0 && c.budget == b - 1))
    }),
    ("roku.calls.failed-tool-recovery", |f| {
        f.ended_calls()
            .any(|c| Facts::catalog(c) && c.is_error && c.recovery_before.is_some_and(|r| r > 0 && c.recovery == r - 1))
    }),
    ("roku.calls.unknown-tool", |f| f.ended_calls().any(|c| f.unknown(c))),
    ("roku.calls.unknown-tool-cost", |f| {
        f.ended_calls().any(|c| {
            f.unknown(c)
                && c.budget_before.is_some_and(|b| b > 0 && c.budget == b - 1)
                && c.recovery_before.is_some_and(|r| r > 0 && c.recovery == r - 1)
        })
    }),
    ("roku.calls.budget-saturates", |f| {
        f.responses.iter().any(|r| {
            let spent = r.ran.iter().position(|c| f.calls[*c].budget == 0);
            let later = spent
                .is_some_and(|p| r.ran[p + 1..].iter().any(|c| f.calls[*c].end.is_some() && f.calls[*c].budget == 0));
            later
                && r.agent.is_some_and(|a| {
                    f.end_of(a, r.at)
                        .is_some_and(|(_, e)| matches!(e, Event::AgentEnded { message, .. } if is_exhausted(message)))
                })
        })
    }),
    // --- §1.5: the step index and the nudge ---
    ("roku.step.index-regular-only", |f| {
        let mut last: BTreeMap<&AgentId, u32> = BTreeMap::new();
        let mut shown = false;
        for r in &f.responses {
            let Some((_, index)) = r.step else { continue };
            let agent = r.agent.expect("a response has an agent");
            let before = if f.ev[..r.at]
                .iter()
                .rev()
                .find(|e| e.agent == agent)
                .is_some_and(|e| matches!(e.event, Event::LlmRequest { call: 1, .. }))
            {
                0
            } else {
                last.get(agent).copied().unwrap_or(0)
            };
            let regular = r.ran.iter().filter(|c| f.regular(&f.calls[**c])).count();
            let only_other =
                regular == 0 && (!r.denied.is_empty() || r.ran.iter().any(|c| Facts::reached_family(&f.calls[*c])));
            shown |= (regular >= 2 && index == before + 1) || (only_other && index == before);
            last.insert(agent, index);
        }
        shown
    }),
    ("roku.step.event-per-turn", |f| f.responses.iter().any(|r| !r.ran.is_empty() && r.step.is_some())),
    ("roku.nudge.after-regular-call", |f| {
        f.ended_calls().any(|c| {
            f.regular(c)
                && (c.budget == 0 || c.recovery == 0)
                && c.end.is_some_and(|e| matches!(f.next_of(c.agent, e), Some(Event::Nudge { .. })))
        })
    }),
    ("roku.nudge.each-regular-call", |f| f.responses.iter().any(|r| r.nudges.len() >= 2)),
    ("roku.nudge.regular-only", |f| {
        let family = f.ended_calls().any(|c| {
            Facts::reached_family(c)
                && c.tool == "Agent"
                && c.budget == 0
                && c.end.is_some_and(|e| !matches!(f.next_of(c.agent, e), Some(Event::Nudge { .. })))
        });
        let denied = f.events().any(|(i, e)| {
            matches!(e.event, Event::Denied { budget: 0, .. })
                && !matches!(f.next_of(e.agent, i), Some(Event::Nudge { .. }))
        });
        family || denied
    }),
    ("roku.nudge.recovery-does-not-stop", |f| {
        f.events().any(|(i, e)| {
            matches!(e.event, Event::Nudge { recovery: 0, budget, .. } if *budget > 0)
                && f.after(e.agent, i).any(|(_, n)| matches!(n, Event::LlmRequest { .. }))
        })
    }),
    // --- §2: the Agent sub-agent ---
    ("roku.agent.model-initiated", |f| f.fg_spawns().any(|s| f.spawn_call(s).is_some_and(|c| c.tool == "Agent"))),
    ("roku.agent.serial", |f| {
        f.responses.iter().any(|r| {
            let fg: Vec<&Spawn> =
                r.spawns.iter().map(|s| &f.spawns[*s]).filter(|s| s.family == Family::Foreground).collect();
            fg.windows(2).any(|w| f.fg_outcome(w[0]).is_some_and(|(end, _)| end < w[1].at))
        })
    }),
    ("roku.agent.gate-first", |f| f.any(|e| matches!(e, Event::Denied { tool, .. } if tool == "Agent"))),
    ("roku.agent.spawn-cost", |f| f.fg_spawns().any(|s| s.cost == f.rules.spawn_cost && s.cost > 0)),
    ("roku.agent.depth-refused", |f| f.calls_to("Agent").any(|c| c.is_error && c.result == DEPTH_ERROR)),
    ("roku.agent.empty-task", |f| f.calls_to("Agent").any(|c| c.is_error && c.result == NO_TASK)),
    ("roku.agent.refusal-pays-cost-only", |f| {
        f.calls_to("Agent").any(|c| {
            c.is_error
                && (c.result == DEPTH_ERROR || c.result == NO_TASK)
                && f.rules.spawn_cost > 0
                && c.budget_before.is_some_and(|b| b > f.rules.spawn_cost && c.budget == b - f.rules.spawn_cost)
        })
    }),
    ("roku.grant.min-remaining-cap", |f| {
        // The remaining budget, not the cap, set the grant.
        f.fg_spawns().any(|s| {
            let remaining = s.before.saturating_sub(s.cost);
            remaining < f.rules.child_step_cap && s.grant == remaining
        })
    }),
    ("roku.grant.deducted-at-spawn", |f| {
        f.fg_spawns().any(|s| {
            s.grant > 0
                && s.after == s.before - s.cost - s.grant
                && f.after(s.child, s.at)
                    .next()
                    .is_some_and(|(_, e)| matches!(e, Event::AgentStarted { budget, .. } if *budget == s.grant))
        })
    }),
    ("roku.grant.never-refunded", |f| {
        f.fg_spawns().any(|s| {
            let unused = f.final_message(s.child, s.at).is_some()
                && matches!(f.end_of(s.child, s.at), Some((_, Event::AgentEnded { budget, .. })) if *budget > 0);
            let unused = unused || f.fg_timed_out(s).is_some();
            unused && f.spawn_call(s).is_some_and(|c| c.end.is_some() && c.budget == s.after)
        })
    }),
    ("roku.grant.examples", |f| {
        let defaults = f.rules.child_step_cap == 10 && f.rules.spawn_cost == 1;
        let single = f
            .fg_spawns()
            .any(|s| matches!((s.before, s.after, s.grant), (30, 19, 10) | (11, 0, 10) | (5, 0, 4) | (1, 0, 0)));
        let two = f.responses.iter().any(|r| {
            let fg: Vec<(u32, u32)> = r
                .spawns
                .iter()
                .map(|s| &f.spawns[*s])
                .filter(|s| s.family == Family::Foreground)
                .map(|s| (s.before, s.after))
                .collect();
            fg.windows(2).any(|w| w == [(30, 19), (19, 8)])
        });
        defaults && (single || two)
    }),
    ("roku.grant.zero-child-fails", |f| {
        f.fg_spawns().any(|s| {
            s.grant == 0
                && f.requests(s.child).is_empty()
                && f.final_message(s.child, s.at)
                    .is_some_and(|(m, _)| m.starts_with("Step budget exhausted after 0 steps; goal: "))
                && f.spawn_call(s).is_some_and(|c| c.is_error)
        })
    }),
    ("roku.child.fresh-history", |f| {
        f.fg_spawns().any(|s| {
            f.requests(s.child).first().is_some_and(|x| {
                x.request.messages.len() == 1
                    && x.request.messages.first().is_some_and(|m| m.role == Role::User && *m.content == *x.request.goal)
            })
        })
    }),
    ("roku.child.request-id", |f| {
        f.fg_spawns().any(|s| {
            let parent = f.request_before(s.parent, s.at);
            let child = f.requests(s.child).first();
            matches!((parent, child), (Some(p), Some(c)) if *c.request.request_id == format!("{}-sub", p.request.request_id))
        })
    }),
    ("roku.child.context-passed", |f| {
        f.fg_spawns().any(|s| {
            let (Some(p), Some(c)) = (f.request_before(s.parent, s.at), f.requests(s.child).first()) else {
                return false;
            };
            let (p, c) = (&p.request, &c.request);
            let something = p.model.is_some() || p.reasoning_effort.is_some() || !p.memory.is_empty();
            something
                && p.session_id == c.session_id
                && p.model == c.model
                && p.reasoning_effort == c.reasoning_effort
                && p.memory == c.memory
        })
    }),
    ("roku.child.system-prompt", |f| {
        f.fg_spawns().any(|s| {
            let (Some(p), Some(c)) = (f.request_before(s.parent, s.at), f.requests(s.child).first()) else {
                return false;
            };
            !p.request.system.is_empty() && p.request.system == c.request.system
        })
    }),
    ("roku.child.own-counters", |f| {
        f.fg_spawns().any(|s| {
            // The parent had spent recovery or advanced its step index; the child starts afresh.
            let parent_recovery = f
                .calls
                .iter()
                .rev()
                .find(|c| c.agent == s.parent && c.end.is_some_and(|e| e < s.at))
                .map(|c| c.recovery);
            let parent_steps = f
                .responses
                .iter()
                .filter(|r| r.agent == Some(s.parent) && r.at < s.at)
                .filter_map(|r| r.step)
                .map(|(_, i)| i)
                .next_back();
            let child_first = f.calls.iter().find(|c| c.agent == s.child && c.end.is_some());
            let recovery_afresh = parent_recovery.is_some_and(|r| r < f.rules.recovery_budget)
                && child_first.is_some_and(|c| c.recovery_before == Some(f.rules.recovery_budget));
            let child_step = f
                .responses
                .iter()
                .find(|r| r.agent == Some(s.child) && r.step.is_some())
                .and_then(|r| r.step)
                .map(|(_, i)| i);
            let index_afresh = parent_steps.is_some_and(|p| p >= 1) && child_step.is_some_and(|c| c <= 1);
            recovery_afresh || index_afresh
        })
    }),
    ("roku.child.tools", |f| {
        f.fg_spawns().any(|s| {
            let (Some(p), Some(c)) = (f.request_before(s.parent, s.at), f.requests(s.child).first()) else {
                return false;
            };
            let want = f.default_child_tools(&Facts::tool_names(&p.request), s.child.depth());
            Facts::tool_names(&c.request) == want && Facts::tool_names(&p.request).contains(&"ask_user")
        })
    }),
    ("roku.child.tools-arg-ignored", |f| {
        f.fg_spawns().any(|s| {
            let with_tools = f.spawn_call(s).is_some_and(|c| arg(c.args, "tools").is_some());
            let (Some(p), Some(c)) = (f.request_before(s.parent, s.at), f.requests(s.child).first()) else {
                return false;
            };
            with_tools
                && Facts::tool_names(&c.request)
                    == f.default_child_tools(&Facts::tool_names(&p.request), s.child.depth())
        })
    }),
    ("roku.child.agent-call-refused", |f| {
        f.calls_to("Agent").any(|c| {
            c.agent.depth() >= 1
                && c.result == DEPTH_ERROR
                && f.requests(c.agent).iter().all(|x| !Facts::tool_names(&x.request).contains(&"Agent"))
        })
    }),
    ("roku.child.ask-user-refused", |f| {
        f.ended_calls().any(|c| {
            c.agent.depth() >= 1
                && c.tool == "ask_user"
                && f.unknown(c)
                && c.end.is_some_and(|e| f.after(c.agent, e).any(|(_, n)| matches!(n, Event::LlmRequest { .. })))
        })
    }),
    // --- §2.4: the time limit ---
    ("roku.timeout.exact-120s", |f| {
        f.fg_spawns().any(|s| {
            f.fg_timed_out(s)
                .is_some_and(|(i, after)| Some(after) == f.agent_limit() && f.ev[i].at == f.ev[s.at].at + after)
        })
    }),
    ("roku.timeout.whole-run", |f| {
        // The child answered at least once (a whole request) before its limit stopped it.
        f.fg_spawns().any(|s| {
            f.fg_timed_out(s).is_some_and(|(i, _)| {
                f.ev[s.at..i].iter().any(|e| e.agent == s.child && matches!(e.event, Event::LlmReply { .. }))
            })
        })
    }),
    ("roku.timeout.error-text", |f| {
        f.fg_spawns().any(|s| {
            f.fg_timed_out(s).is_some_and(|(_, after)| {
                f.spawn_call(s).is_some_and(|c| {
                    c.is_error && c.result == format!("[Sub-agent error] Timed out after {} seconds.", seconds(after))
                })
            })
        })
    }),
    ("roku.timeout.parent-continues", |f| {
        f.fg_spawns().any(|s| {
            f.fg_timed_out(s).is_some_and(|(i, _)| {
                f.spawn_call(s).is_some_and(|c| c.budget == s.after)
                    && f.after(s.parent, i)
                        .any(|(_, e)| matches!(e, Event::LlmRequest { .. } | Event::StepCompleted { .. }))
            })
        })
    }),
    ("roku.timeout.under-limit-untouched", |f| {
        f.agent_limit().is_some_and(|limit| {
            f.fg_spawns().any(|s| f.fg_result(s).is_some_and(|(i, ..)| f.ev[i].at - f.ev[s.at].at < limit))
        })
    }),
    ("roku.timeout.zero-is-none", |f| f.agent_limit().is_none() && f.fg_spawns().any(|s| f.fg_result(s).is_some())),
    // --- §2.5: what the parent gets back ---
    ("roku.result.final-message", |f| {
        f.fg_spawns().any(|s| {
            f.fg_result(s).is_some_and(|(_, _, _, cut)| cut.is_none())
                && matches!((f.final_message(s.child, s.at), f.spawn_call(s)), (Some((m, _)), Some(c)) if c.result == m)
        })
    }),
    ("roku.result.error-flag", |f| {
        f.fg_spawns().any(|s| {
            f.final_message(s.child, s.at).is_some_and(|(_, status)| status == Status::Error)
                && f.fg_result(s).is_some_and(|(_, e, ..)| e)
                && f.spawn_call(s).is_some_and(|c| c.is_error)
        })
    }),
    ("roku.result.string-only", |f| {
        // The child did more than answer, and the parent asked the model again afterwards.
        f.fg_spawns().any(|s| {
            let busy = f.calls.iter().any(|c| c.agent == s.child && c.end.is_some());
            busy && f
                .fg_outcome(s)
                .is_some_and(|(i, _)| f.after(s.parent, i).any(|(_, e)| matches!(e, Event::LlmRequest { .. })))
        })
    }),
    ("roku.result.errors-verbatim", |f| {
        f.rules.result_limit_chars.is_some_and(|limit| {
            f.calls_to("Agent").any(|c| c.is_error && (c.result.starts_with("[Sub-agent error] ") || c.result.starts_with("[Tool denied] ")) && c.result.chars().count() > limit)
        }) || f.rules.result_limit_chars.is_some_and(|limit| f.any(|e| matches!(e, Event::Denied { tool, reason, .. } if tool == "Agent" && reason.chars().count() + 14 > limit)))
    }),
    ("roku.truncation.limit-4000", |f| {
        f.fg_spawns().any(|s| {
            f.fg_result(s).is_some_and(|(_, _, _, cut)| {
                cut.is_some_and(|n| {
                    f.spawn_call(s).is_some_and(|c| {
                        c.result.ends_with(&format!("...\n[Sub-agent response truncated to {n} chars]"))
                    })
                })
            })
        })
    }),
    ("roku.truncation.exact-limit-unchanged", |f| {
        f.rules.result_limit_chars.is_some_and(|limit| {
            f.fg_spawns().any(|s| f.fg_result(s).is_some_and(|(_, _, chars, cut)| chars == limit && cut.is_none()))
        })
    }),
    ("roku.truncation.scalar-values", |f| {
        // A result whose bytes pass the limit but whose characters do not was not cut.
        f.rules.result_limit_chars.is_some_and(|limit| {
            f.fg_spawns().any(|s| {
                let Some((m, _)) = f.final_message(s.child, s.at) else { return false };
                let kept =
                    f.fg_result(s).is_some_and(|(_, _, chars, cut)| cut.is_none() && chars <= limit && m.len() > limit);
                // Or cut after `limit` characters that are more than `limit` bytes.
                let cut = f.fg_result(s).is_some_and(|(_, _, _, cut)| cut == Some(limit))
                    && f.spawn_call(s).is_some_and(|c| {
                        c.result.chars().take(limit).map(char::len_utf8).sum::<usize>() > limit
                            && c.result.starts_with(&m.chars().take(limit).collect::<String>())
                    });
                kept || cut
            })
        })
    }),
    ("roku.truncation.no-split", |f| {
        f.fg_spawns().any(|s| {
            f.fg_result(s).is_some_and(|(_, _, _, cut)| {
                cut.is_some_and(|n| {
                    f.final_message(s.child, s.at)
                        .is_some_and(|(m, _)| m.chars().skip(n.saturating_sub(1)).take(2).any(|c| c.len_utf8() > 1))
                })
            })
        })
    }),
    // --- §3: approval ---
    ("roku.approval.deny-result", |f| {
        f.events().any(|(i, e)| {
            matches!(e.event, Event::Denied { budget, .. } if f.prev_budget[i].is_some_and(|b| b > 0 && *budget == b - 1))
                && f.requests(e.agent).iter().any(|x| x.request.messages.iter().any(|m| m.role == Role::Tool && m.is_error && m.content.starts_with("[Tool denied] ")))
        })
    }),
    ("roku.approval.auto", |f| {
        // Calls ran that the risk gate would have asked about, and nobody was asked.
        f.asked.is_empty()
            && !f.any(|e| matches!(e, Event::Denied { .. }))
            && f.ended_calls().any(|c| {
                Facts::reached_family(c)
                    || (Facts::catalog(c)
                        && f.tool_tags(c.agent, c.tool).is_some_and(|tags| !tags.iter().any(|t| t == "risk:safe")))
            })
    }),
    ("roku.approval.risk-classes", |f| {
        // The gate put calls of two different classes where the rule says.
        let tagged = |agent: &AgentId, tool: &str, tag: &str| {
            f.tool_tags(agent, tool).is_some_and(|tags| tags.iter().any(|t| t == tag))
        };
        let gated: Vec<(&AgentId, &str)> = f
            .asked
            .iter()
            .map(|(_, a, t, _)| (*a, *t))
            .chain(f.ev.iter().filter_map(|e| match e.event {
                Event::Denied { tool, .. } => Some((e.agent, tool.as_str())),
                _ => None,
            }))
            .collect();
        let write = gated.iter().any(|(a, t)| tagged(a, t, "risk:write"));
        let other = gated.iter().any(|(a, t)| !tagged(a, t, "risk:write") && !tagged(a, t, "risk:safe"));
        let safe = !gated.is_empty()
            && f.ended_calls().any(|c| {
                Facts::catalog(c) && tagged(c.agent, c.tool, "risk:safe") && !gated.contains(&(c.agent, c.tool))
            });
        [write, other, safe].iter().filter(|x| **x).count() >= 2
    }),
    ("roku.approval.policy-deny", |f| {
        f.any(|e| matches!(e, Event::Denied { tool, reason, .. } if *reason == format!("Tool `{tool}` is denied by the current security policy.")))
    }),
    ("roku.approval.user-deny", |f| {
        f.asked.iter().any(|(i, agent, tool, approve)| {
            !approve && f.ev[*i..].iter().find(|e| e.agent == *agent).is_some_and(|e| matches!(e.event, Event::Denied { tool: t, reason, .. } if t == tool && reason == "User denied the operation."))
        })
    }),
    ("roku.approval.shared-gate", |f| {
        f.asked.iter().any(|(_, a, ..)| a.depth() == 0) && f.asked.iter().any(|(_, a, ..)| a.depth() >= 1)
    }),
    // --- §4: events ---
    ("roku.events.tool-start-end", |f| {
        f.ended_calls().any(|c| c.start.is_some() && (c.tool == "Agent" || Facts::catalog(c)))
    }),
    ("roku.events.child-inside-agent-call", |f| {
        f.fg_spawns().any(|s| {
            f.spawn_call(s).is_some_and(|c| {
                let (Some(start), Some(end)) = (c.start, c.end) else { return false };
                let child_events: Vec<usize> = f
                    .events()
                    .filter(|(_, e)| e.agent == s.child || e.agent.descends_from(s.child))
                    .map(|(i, _)| i)
                    .collect();
                !child_events.is_empty() && child_events.iter().all(|i| start < *i && *i < end)
            })
        })
    }),
    ("roku.events.one-end-per-loop", |f| f.any(|e| matches!(e, Event::AgentEnded { .. }))),
    ("roku.events.agent-named", |f| f.ev.iter().any(|e| e.agent.depth() >= 1)),
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

/// The clauses no single run can show, and why. Kept small: each is checked elsewhere.
pub(super) const NOT_MEASURABLE: &[(&str, &str)] = &[
    (
        "bub.profile.locations",
        "where a profile file was found is settled before the run; the evidence shows only the profile a child ran under (tests/suite/bad_input.rs, scenarios/bub/profile-workspace-over-home.json)",
    ),
    (
        "bub.profile.invalid-file",
        "a bad profile file stops the run before it starts: bad input, never evidence (tests/suite/bad_input.rs)",
    ),
    (
        "bub.profile.workspace-over-home",
        "which of two same-named profile files won is settled before the run; the evidence holds only the winner (scenarios/bub/profile-workspace-over-home.json checks its body)",
    ),
    (
        "bub.profile.inline-over-files",
        "which of two same-named profiles won is settled before the run; the evidence holds only the winner (scenarios/bub/profile-call-arguments-over-profile.json checks it)",
    ),
    (
        "core.knob.validated",
        "a rule set that breaks a knob's limit is refused before the run: bad input, never evidence (tests/suite/bad_input.rs, tests/suite/hostile.rs)",
    ),
    (
        "core.time.run-limits",
        "a run that reaches its horizon or event cap is stopped and fails, so no passing run shows it (tests/fixtures/hostile/stops/, tests/suite/hostile.rs)",
    ),
    (
        "core.never.wall-clock",
        "a property of the core's code: a run cannot show an absence; the determinism oracle compares two runs of every scenario",
    ),
    (
        "core.never.os-random",
        "a property of the core's code: a run cannot show an absence; the determinism oracle compares two runs of every scenario",
    ),
    (
        "core.never.hashmap-order",
        "a property of the core's code: a run cannot show an absence; the determinism oracle compares two runs of every scenario",
    ),
    (
        "core.never.blocking",
        "a property of the core's code: a run cannot show an absence; a blocked thread stalls the paused clock, which the termination oracle's horizon catches",
    ),
    (
        "core.never.unbiased-select",
        "a property of the core's code: a run cannot show an absence; the determinism oracle compares two runs of every scenario",
    ),
];

// --- helpers of several detectors ---

/// A loop ended by the first terminal call `tool` of a response: `check(kind, status,
/// message, the call's argument)`.
fn terminal_ended(
    f: &Facts,
    tool: &str,
    key: Option<&str>,
    check: fn(OutcomeKind, Status, &str, Option<&str>) -> bool,
) -> bool {
    f.responses.iter().any(|r| {
        let first = r.calls.iter().position(|c| TERMINAL.contains(&c.as_str()));
        let Some(first) = first.filter(|p| r.calls[*p] == tool) else { return false };
        let Some(ended) = r.ended else { return false };
        let Event::AgentEnded { kind, status, message, .. } = f.ev[ended].event else { return false };
        // The call's arguments, from the reply the model gave.
        let agent = r.agent.expect("a response has an agent");
        let n = f.requests_before(agent, r.at);
        let Some(reply) = n.checked_sub(1).and_then(|n| f.requests(agent).get(n)).and_then(|x| x.reply.as_ref()) else {
            return false;
        };
        let args = reply.tool_calls.get(first).map(|c| &*c.args);
        let value = key.and_then(|k| arg_str(args, k));
        check(*kind, *status, message, value)
    })
}

/// Named sessions' runs, in order, by name.
fn named_runs<'f>(f: &'f Facts) -> BTreeMap<&'f str, Vec<usize>> {
    let mut out: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, r) in f.runs.iter().enumerate() {
        if !r.session.starts_with("temp/") && !r.session.starts_with("fork/") {
            out.entry(r.session).or_default().push(i);
        }
    }
    out
}

fn first_request_of_run<'a>(f: &Facts<'a>, run: usize) -> Option<(usize, &'a Exchange)> {
    let r = &f.runs[run];
    let started = f.after(r.child, r.queued).find(|(_, e)| matches!(e, Event::AgentStarted { .. }))?.0;
    Some((started, f.first_request_after(r.child, started)?))
}

/// Runs cancelled when the session quit (after the last turn ended).
fn quit_cancelled<'f, 'a>(f: &'f Facts<'a>) -> impl Iterator<Item = &'f TaskRun<'a>> + 'f {
    let last_turn = f.ev.iter().rposition(|e| matches!(e.event, Event::TurnEnded { .. }));
    f.runs.iter().filter(move |r| {
        r.status == Some(TaskStatus::Cancelled)
            && r.delivered.is_empty()
            && last_turn.is_some_and(|t| r.ended.is_some_and(|e| e > t))
            && f.e.session_ended
    })
}

/// Runs a `subagent.cancel` call cancelled.
fn cancelled_by_call<'f, 'a>(f: &'f Facts<'a>) -> impl Iterator<Item = &'f TaskRun<'a>> + 'f {
    f.runs.iter().filter(move |r| {
        r.status == Some(TaskStatus::Cancelled)
            && r.ended.is_some_and(|e| {
                f.calls_to("subagent.cancel").any(|c| {
                    c.start.is_some_and(|s| s < e)
                        && c.end.is_some_and(|x| x > e)
                        && arg_str(c.args, "task_id").map(str::trim) == Some(r.id)
                })
            })
    })
}

/// The deliveries taken in together (one notification batch before one root request, or
/// one `subagent.wait`), as runs in delivery order.
fn batches(f: &Facts) -> Vec<Vec<usize>> {
    let mut by_delivery: Vec<(usize, Via, usize)> = Vec::new();
    for (i, r) in f.runs.iter().enumerate() {
        for (d, via) in &r.delivered {
            by_delivery.push((*d, *via, i));
        }
    }
    by_delivery.sort_by_key(|(d, _, run)| (*d, *run));
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut last: Option<(usize, Via)> = None;
    for (d, via, run) in by_delivery {
        // Consecutive `delivered` lines of the root, nothing else of the root between.
        let together = last.is_some_and(|(p, v)| {
            v == via
                && !f.ev[p + 1..d].iter().any(|e| e.agent.depth() == 0 && !matches!(e.event, Event::Delivered { .. }))
        });
        match out.last_mut() {
            Some(batch) if together => batch.push(run),
            _ => out.push(vec![run]),
        }
        last = Some((d, via));
    }
    out
}

/// A root reply that would have ended the turn was held while children were unfinished.
fn held(f: &Facts, reply: fn(&Response) -> bool) -> bool {
    f.responses.iter().any(|r| {
        r.agent.is_some_and(|a| a.depth() == 0)
            && reply(r)
            && r.held.is_some_and(|h| f.after(&AgentId::root(), h).any(|(_, e)| matches!(e, Event::LlmRequest { .. })))
    })
}

/// A background result was truncated to the limit before it was recorded.
fn truncated_background(f: &Facts) -> bool {
    f.rules.result_limit_chars.is_some_and(|n| {
        f.runs.iter().any(|r| r.body.ends_with(&format!("...\n[Sub-agent response truncated to {n} chars]")))
    })
}

/// A system prompt's base, before the profile list or a profile body, and its skills line.
fn sections(system: &str) -> (&str, Option<&str>) {
    let (rest, skills) = match system.strip_prefix("Skills: ") {
        Some(skills) => ("", Some(skills)),
        None => match system.rsplit_once("\n\nSkills: ") {
            Some((rest, skills)) => (rest, Some(skills)),
            None => (system, None),
        },
    };
    let base = match rest.find("Agent profiles (pass the name") {
        Some(at) => rest[..at].trim_end(),
        None => rest,
    };
    (base, skills)
}

/// The limit a `subagent` call's `timeout_seconds` sets, as the rules read it: `None` when it
/// is absent or invalid (the next source applies), `Some(None)` for 0 (no limit).
fn call_timeout(args: Option<&Value>) -> Option<Option<Duration>> {
    let seconds = arg(args, "timeout_seconds")?.as_f64().filter(|s| s.is_finite() && *s >= 0.0)?;
    Some((seconds > 0.0).then(|| Duration::from_secs_f64(seconds.min(crate::rules::MAX_SECONDS))))
}

/// The entries of a `subagent.wait` result: (task id, status, whether it carries a result).
fn wait_entries(call: &Call) -> Option<Vec<(String, String, bool)>> {
    let Value::Array(items) = json(call.result)? else { return None };
    items
        .iter()
        .map(|item| {
            let id = item.get("task_id")?.as_str()?.to_string();
            let status = item.get("status")?.as_str()?.to_string();
            Some((id, status, item.get("result").is_some()))
        })
        .collect()
}

/// The heading of the profile listing in the root's system prompt (`bub.profile.listed`).
const PROFILES_HEADING: &str = "Agent profiles (pass the name as `agent` to `subagent`):";

/// A started `Agent` or `subagent` call, or a `subagent.send` that continued a task: a
/// spawning call (oracle 10), whether or not it was refused.
fn spawning_call(call: &Call) -> bool {
    (call.start.is_some() && matches!(call.tool, "Agent" | "subagent")) || call.spawn.is_some()
}

/// A `subagent` or `subagent.send` call met the session-in-use refusal.
fn in_use_refused(f: &Facts) -> bool {
    ["subagent", "subagent.send"].iter().any(|t| {
        f.calls_to(t)
            .any(|c| c.is_error && c.result.starts_with("session '") && c.result.contains("' is in use by task sub-"))
    })
}

/// What the root does that must wait for its instant to settle (`core.instant.settle-before-acting`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum ActKind {
    /// It sends a model request.
    Requests,
    /// The model answered it: it runs the reply's calls, or holds or ends its turn.
    Answered,
    /// A `subagent.wait` of its answers.
    WaitAnswers,
}

/// One act of the root.
#[derive(Clone, Copy)]
struct Act {
    kind: ActKind,
    /// Its trace position.
    at: usize,
    /// Results count as due at it when their runs started before this position (for a wait,
    /// its start).
    since: usize,
    /// Whether the act has a reason of its own in the instant (the model answered, the loop
    /// went on from its own step, a wait's deadline came), besides the arrivals: a held
    /// root's wake and a wait's return on its last result have none.
    own: bool,
}

/// The root's acts, grouped by instant, each group in trace order.
fn root_acts_by_instant(f: &Facts) -> Vec<Vec<Act>> {
    let mut acts: Vec<Act> = root_acts(f).collect();
    acts.sort_by_key(|a| a.at);
    acts.chunk_by(|a, b| f.ev[a.at].at == f.ev[b.at].at).map(<[Act]>::to_vec).collect()
}

/// The root's acts: its requests and the replies it got, in trace order, then its waits'
/// answers.
fn root_acts<'f>(f: &'f Facts) -> impl Iterator<Item = Act> + 'f {
    let root = AgentId::root();
    let loop_acts = f.events().filter(|(_, e)| e.agent.depth() == 0).filter_map(|(i, e)| match e.event {
        Event::LlmRequest { .. } => Some(Act { kind: ActKind::Requests, at: i, since: i, own: !f.woke_held_root(i) }),
        Event::LlmReply { .. } => Some(Act { kind: ActKind::Answered, at: i, since: i, own: true }),
        _ => None,
    });
    let waits = f.calls_to("subagent.wait").filter(move |c| *c.agent == root && !c.is_error).filter_map(|c| {
        let (start, end) = (c.start?, c.end?);
        let limit = arg(c.args, "timeout_seconds")
            .and_then(Value::as_f64)
            .filter(|s| s.is_finite() && *s >= 0.0)
            .unwrap_or(crate::rules::WAIT_DEFAULT_SECONDS as f64);
        let waited = (f.ev[end].at - f.ev[start].at).as_secs_f64();
        let at_deadline = (waited - limit).abs() < 1e-9;
        Some(Act { kind: ActKind::WaitAnswers, at: end, since: start, own: at_deadline })
    });
    loop_acts.chain(waits)
}

/// A result of a task spawned in an earlier turn was notified at the start of a later turn,
/// before its first request (`bub.turn.unfinished-next-turn`).
fn notified_at_turn_start(f: &Facts) -> bool {
    f.runs.iter().any(|r| {
        let turn_of = |pos: usize| f.ev[..=pos].iter().filter(|e| matches!(e.event, Event::TurnStarted { .. })).count();
        r.delivered.iter().any(|(d, via)| {
            let turn_start = f.ev[..*d].iter().rposition(|e| matches!(e.event, Event::TurnStarted { .. }));
            let first_request = turn_start.is_some_and(|t| {
                !f.ev[t..*d].iter().any(|e| e.agent.depth() == 0 && matches!(e.event, Event::LlmRequest { .. }))
            });
            *via == Via::Notification && turn_of(*d) > turn_of(r.queued) && first_request
        })
    })
}

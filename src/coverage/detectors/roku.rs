//! The detectors of docs/rules/roku.md, the `Agent` family: what a loop offers, one
//! iteration, terminal and other calls, the step index and the nudge, the `Agent` sub-agent
//! and its time limit and result, approval, events.
//!
//! Each says only whether a run showed its clause; the shared questions are in `queries`, and
//! whether the behaviour was right is the oracles' business.

use std::collections::BTreeMap;

use crate::coverage::facts::*;
use crate::evidence::same_reply;
use crate::sut::AgentId;
use crate::sut::event::{Event, Family, OutcomeKind, Status};
use crate::sut::llm::Role;

use super::Detector;
use super::queries::terminal_ended;

/// Every measured clause of the page and its detector.
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
];

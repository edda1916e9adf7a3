//! `oracle.model-side.waiting`: what a wait answers and when, and that a held turn never ends
//! while a child's result is unread.
//!
//! A wait (the dialect's wait tool, `subagent.wait`) is judged where it is its reply's only
//! call, so nothing else runs before or after it: its answer is in the caller's next request,
//! which comes in the instant the wait returns. On virtual time:
//! - it returns by its deadline, `timeout_seconds` after it began (default 60; 0 looks without
//!   waiting; a value that is not a number of 0 or more counts as not given; `bub.wait.params`,
//!   `bub.wait.deadline`, `bub.wait.peek`);
//! - it returns before its deadline only once every task it covers has finished
//!   (`bub.wait.listed`, `bub.wait.without-ids`): an entry still `running` or `queued` in an
//!   answer that came early is the finding (`bub.wait.unfinished-listed`);
//! - the results it reads come in completion order, ties in spawn order
//!   (`bub.wait.result-shape`), where both children's final replies are seen.
//!
//! `held`: a root that answers (a text, or `final_answer`) while one of its tasks is queued,
//! running or unread does not end its turn (`bub.turn.held-while-children`,
//! `bub.turn.held-final-answer`) unless that answer spent its last step
//! (`bub.turn.no-step-left-not-held`, read from the budgets the nudge oracle reckons). So a run
//! whose root's last request ends in such an answer, with steps to spare in every reading, has
//! read every task the root started and did not cancel.

use std::time::Duration;

use crate::dialect::Dialect;
use crate::evidence::attribution::{CallOutcome, ModelSide};
use crate::sut::llm::{Message, Role};

use super::nudges::Reckoned;
use super::{Out, keeps_reply, result_in, wait_entries};

/// A wait's deadline when its call gives none (`bub.wait.params`).
const DEFAULT_WAIT: Duration = Duration::from_secs(60);

/// Statuses of a task that has not finished.
const UNFINISHED: [&str; 2] = ["running", "queued"];

/// `oracle.model-side.waiting`: each wait's answer, against its deadline and the order its
/// tasks finished in.
pub(super) fn waiting(side: &ModelSide, dialect: &Dialect, out: &mut Out) {
    let Some(wait) = &dialect.wait else { return };
    if side.wall_times {
        return;
    }
    let mut findings = Vec::new();
    for list in out.agents.of.values() {
        for pair in list.windows(2) {
            let ((x, _), (y, _)) = (pair[0], pair[1]);
            let e = &side.exchanges[x];
            let (Some(reply), Some(began)) = (&e.reply, e.replied) else { continue };
            if !keeps_reply(side, x, y) {
                continue;
            }
            let (next, at) = (&side.exchanges[y], e.messages.len());
            for call in reply.tool_calls.iter().filter(|c| c.name == *wait) {
                // Its instants are the reply's only when it is the reply's only call.
                let alone = reply.tool_calls.len() == 1;
                let Some((_, answer)) = result_in(side, x, y, &call.id) else { continue };
                let entries = wait_entries(&answer.content);
                // The next request goes on from the wait (no new turn, no message from outside).
                let goes_on = next.messages.iter().skip(at + 1).all(|m| {
                    m.role == Role::Tool
                        || dialect.notified(&m.content).is_some()
                        || dialect.notices.iter().any(|n| m.content.starts_with(n.as_str()))
                });
                if entries.is_empty() {
                    continue;
                }
                if alone && goes_on {
                    let deadline = call
                        .args
                        .get("timeout_seconds")
                        .and_then(serde_json::Value::as_f64)
                        .filter(|s| *s >= 0.0)
                        .map_or(DEFAULT_WAIT, |s| Duration::from_secs_f64(s.min(1e9)));
                    let returned = next.arrived;
                    if returned > began + deadline {
                        findings.push((
                            y,
                            format!(
                                "the wait began at {} ms with a deadline of {} s and answered only at {} ms",
                                began.as_millis(),
                                deadline.as_secs_f64(),
                                returned.as_millis()
                            ),
                            answer.clone(),
                        ));
                        continue;
                    }
                    if let Some((id, status, _)) = entries.iter().find(|(_, s, _)| UNFINISHED.contains(&s.as_str()))
                        && returned < began + deadline
                    {
                        findings.push((
                    y,
                    format!(
                        "the wait answered at {} ms, before its deadline at {} ms, with task {id} still {status}: it returns early only once every task it covers has finished",
                        returned.as_millis(),
                        (began + deadline).as_millis()
                    ),
                    answer.clone(),
                ));
                        continue;
                    }
                }
                // The results read, in completion order (ties in spawn order), where both
                // children's final replies are seen.
                let read: Vec<(usize, Option<Duration>, &str)> = entries
                    .iter()
                    .filter(|(_, _, result)| result.is_some())
                    .filter_map(|(id, _, _)| {
                        let k = side.calls.iter().position(|c| c.task_id.as_deref() == Some(id.as_str()))?;
                        Some((k, finished(side, out, dialect, k), id.as_str()))
                    })
                    .collect();
                for w in read.windows(2) {
                    let ((k1, t1, id1), (k2, t2, id2)) = (w[0], w[1]);
                    let (Some(t1), Some(t2)) = (t1, t2) else { continue };
                    if t2 < t1 || t2 == t1 && k2 < k1 {
                        findings.push((
                        y,
                        format!(
                            "the wait reads {id1} (finished at {} ms) before {id2} (finished at {} ms{}): results come in completion order, ties in spawn order",
                            t1.as_millis(),
                            t2.as_millis(),
                            if t1 == t2 { ", spawned first" } else { "" }
                        ),
                        answer.clone(),
                    ));
                        break;
                    }
                }
            }
        }
    }
    for (i, message, m) in findings {
        out.at("waiting", "oracle.model-side.waiting", i, message, Some(&m));
    }
}

/// When the child of spawn call `k` gave its final reply, if it ran once and the endpoint saw
/// the reply.
fn finished(side: &ModelSide, out: &Out, dialect: &Dialect, k: usize) -> Option<Duration> {
    let child = super::child_of(&side.calls[k])?;
    let runs = super::runs(out.agents, child, dialect);
    let [run] = runs.as_slice() else { return None };
    let e = &side.exchanges[run.last()?.0];
    e.reply.as_ref().filter(|r| dialect.final_text(r).is_some()).and(e.replied)
}

/// `oracle.model-side.waiting`, the held turn: a root's last answer leaves no task of its unread.
pub(super) fn held(side: &ModelSide, dialect: &Dialect, budgets: &Reckoned, out: &mut Out) {
    if dialect.wait.is_none() || dialect.notification.is_none() {
        return;
    }
    let Some(root) = out.agents.of.keys().find(|a| a.depth() == 0) else { return };
    let Some(&(last, _)) = out.agents.exchanges(root).last() else { return };
    let e = &side.exchanges[last];
    let Some(reply) = &e.reply else { return };
    // An answer that holds: a text, or `final_answer` (not `fail`, not `ask_user`).
    let answers = reply.tool_calls.is_empty() || reply.tool_calls.iter().any(|c| c.name == "final_answer");
    if !answers || reply.tool_calls.iter().any(|c| c.name == "fail" || dialect.root_only.contains(&c.name)) {
        return;
    }
    // Steps to spare after the answer's own step, in every reading.
    let Some(Some(readings)) = budgets.get(&last) else { return };
    if readings.is_empty() || readings.iter().any(|&(steps, _)| steps < 2) {
        return;
    }
    let requests: Vec<usize> = out.agents.exchanges(root).iter().map(|p| p.0).collect();
    let cancelled = |task: &str| {
        requests.iter().any(|&i| {
            side.exchanges[i].messages.iter().any(|m| {
                m.role == Role::Tool
                    && serde_json::from_str::<serde_json::Value>(&m.content).is_ok_and(|v| {
                        v.get("task_id").and_then(|t| t.as_str()) == Some(task)
                            && v.get("status").and_then(|s| s.as_str()) == Some("cancelled")
                    })
            })
        })
    };
    let read = |task: &str| {
        requests.iter().any(|&i| {
            side.exchanges[i].messages.iter().any(|m| {
                dialect.notifications(&m.content).iter().any(|n| n.task_id == task)
                    || m.role == Role::Tool
                        && wait_entries(&m.content).iter().any(|(id, _, r)| id == task && r.is_some())
            })
        })
    };
    for c in side.calls.iter().filter(|c| !c.sync && c.parent == *root) {
        if !matches!(c.outcome, CallOutcome::Child(_) | CallOutcome::Made) {
            continue;
        }
        let Some(task) = c.task_id.as_deref() else { continue };
        // The task was queued, running or unread when the root answered, and the run went on
        // until its result existed: its child's final reply was given (at any time: the run
        // was alive then, and a held root would have read it), or was due by the root's answer
        // (in process, where the endpoint records when a reply ending a loop was due). A child
        // whose end never came may have been cut off by a stop of the harness's, which is no
        // runtime's doing, and is not judged.
        let Some(k) = side.calls.iter().position(|d| std::ptr::eq(d, c)) else { continue };
        let due = super::child_of(c)
            .and_then(|a| out.agents.exchanges(a).last())
            .and_then(|&(i, _)| side.exchanges[i].ends_loop_due);
        let ready = finished(side, out, dialect, k).is_some() || due.is_some_and(|d| e.replied.is_some_and(|r| d <= r));
        if !ready || read(task) || cancelled(task) {
            continue;
        }
        out.at(
            "waiting",
            "oracle.model-side.waiting",
            last,
            format!(
                "the root's turn ends with this answer while task {task} (its call in exchange {}) was never read, with steps to spare ({}): a root with a task queued, running or unread is held",
                c.exchange,
                readings.iter().map(|(s, _)| s.to_string()).collect::<Vec<_>>().join(" or ")
            ),
            None::<&Message>,
        );
    }
}

/// `oracle.model-side.quit`: ending the session cancels every task still queued or running
/// (`bub.quit.cancels-children`). The session ends when its last turn does; a turn that ends
/// with `fail` or `ask_user` is never held (`bub.turn.fail-ask-user-not-held`), so it ends in
/// the instant of that reply. After it no background child asks the model, nor is given a
/// reply (a cancelled child no longer listens). Judged in process on virtual time, where the
/// record has the request ids that tell the session's last turn (`Setup::request_ids`).
pub(super) fn quit(side: &ModelSide, dialect: &Dialect, setup: Option<&crate::evidence::Setup>, out: &mut Out) {
    let Some(last_turn) = setup.and_then(|s| s.request_ids.last()) else { return };
    if side.wall_times {
        return;
    }
    let Some(root) = out.agents.of.keys().find(|a| a.depth() == 0) else { return };
    let Some(&(last, _)) = out.agents.exchanges(root).last() else { return };
    let e = &side.exchanges[last];
    let (Some(reply), Some(ended)) = (&e.reply, e.replied) else { return };
    // The first terminal call decides how the loop ends (`roku.terminal.scan-first`).
    let decides = reply
        .tool_calls
        .iter()
        .find(|c| dialect.terminal.iter().any(|t| t.name == c.name) || dialect.root_only.contains(&c.name));
    let Some(decides) = decides else { return };
    let unheld = decides.name == "fail" || dialect.root_only.contains(&decides.name);
    if !unheld || e.ids.as_ref().is_none_or(|(id, _)| id != last_turn) {
        return;
    }
    for c in side.calls.iter().filter(|c| !c.sync && c.parent == *root) {
        let Some(child) = super::child_of(c) else { continue };
        let after = out.agents.exchanges(child).iter().find(|&&(i, _)| {
            let x = &side.exchanges[i];
            x.arrived > ended || x.replied.is_some_and(|r| r > ended)
        });
        if let Some(&(i, n)) = after {
            let x = &side.exchanges[i];
            let what = if x.arrived > ended {
                format!("asks the model at {} ms", x.arrived.as_millis())
            } else {
                format!("is given the reply to its request #{n} at {} ms", x.replied.unwrap_or_default().as_millis())
            };
            out.at(
                "quit",
                "oracle.model-side.quit",
                i,
                format!(
                    "{child} {what}, after the session's last turn ended with `{}` at {} ms: ending the session cancels every task still queued or running",
                    decides.name,
                    ended.as_millis()
                ),
                None,
            );
        }
    }
}

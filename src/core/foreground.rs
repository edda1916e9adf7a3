//! Roku's foreground `Agent` sub-agent (`docs/rules/roku.md`, `roku.agent.*`, `roku.grant.*`).
//!
//! The parent pays the spawn cost, passes the depth guard and the empty-task check, then
//! pre-deducts the child's grant (never refunded) and runs the child to its end, inline,
//! under the child timeout. The parent sees one string and an error flag, truncated to the
//! result limit. This module does not queue, notify or keep sessions: that is `background`.

use std::time::Duration;

use super::Shared;
use super::agent_loop::{self, Loop, string_arg};
use super::budget::truncate_result;
use crate::sut::Outcome;
use crate::sut::event::{Event, Family, Status};
use crate::sut::llm::ToolCall;
use crate::sut::tool::ToolOutput;

pub(crate) const DEPTH_ERROR: &str = "[Sub-agent error] Sub-agents cannot spawn further sub-agents.";
pub(crate) const EMPTY_TASK_ERROR: &str = "[Sub-agent error] No task provided.";

fn error(content: impl Into<String>) -> ToolOutput {
    ToolOutput { content: content.into(), is_error: true }
}

/// Runs one `Agent` call of `parent` (already approved by the gate).
pub(crate) async fn call(parent: &mut Loop, shared: &Shared, call: &ToolCall) -> ToolOutput {
    let rules = &shared.rules;
    let budget_before = parent.budget.remaining;
    parent.budget.spend(rules.spawn_cost);
    let refuse = |reason: &str| {
        shared
            .observer
            .event(&parent.agent, Event::SpawnRefused { tool: call.name.clone(), reason: reason.to_string() });
        tracing::warn!(alias = %parent.agent, reason, "spawn refused");
        error(reason)
    };
    if parent.depth >= rules.depth_limit {
        return refuse(DEPTH_ERROR);
    }
    let task = string_arg(&call.args, "task").unwrap_or_default();
    let task = task.trim();
    if task.is_empty() {
        return refuse(EMPTY_TASK_ERROR);
    }
    // The `tools` argument is reserved: parsed by the model's schema, ignored here.

    let grant = parent.budget.grant(rules.child_step_cap);
    parent.children += 1;
    let child_id = parent.agent.child(parent.children);
    shared.observer.event(
        &parent.agent,
        Event::Spawned {
            child: child_id.clone(),
            family: Family::Foreground,
            task: task.to_string(),
            cost: rules.spawn_cost,
            grant,
            budget_before,
            budget_after: parent.budget.remaining,
        },
    );
    tracing::info!(parent = %parent.agent, child = %child_id, grant, budget_left = parent.budget.remaining, "spawn");

    let child = parent.child(child_id.clone(), task, grant, shared);
    let run = OwnStack(agent_loop::run(shared.arc(), child));
    let outcome = match rules.agent_timeout.filter(|limit| !limit.is_zero()) {
        None => run.await.0,
        Some(limit) => match super::within_limit(tokio::time::Instant::now() + limit, run).await {
            Some((outcome, _)) => outcome,
            None => {
                shared.observer.event(&parent.agent, Event::TimedOut { child: child_id.clone(), after: limit });
                tracing::warn!(alias = %child_id, after_s = limit.as_secs_f64(), "sub-agent timed out");
                return error(format!("[Sub-agent error] Timed out after {} seconds.", seconds(limit)));
            }
        },
    };
    hand_over(shared, parent, &child_id, &outcome)
}

/// The child's final message as its parent sees it: truncated to the result limit, an error
/// when the child ended with status Error.
fn hand_over(shared: &Shared, parent: &Loop, child: &crate::sut::AgentId, outcome: &Outcome) -> ToolOutput {
    let (content, truncated) = truncate_result(&outcome.message, shared.rules.result_limit_chars);
    let chars = outcome.message.chars().count();
    let truncated_to = shared.rules.result_limit_chars.filter(|_| truncated);
    if truncated {
        tracing::info!(alias = %child, chars, "sub-agent result truncated");
    }
    let is_error = outcome.status == Status::Error;
    shared.observer.event(&parent.agent, Event::ChildResult { child: child.clone(), is_error, chars, truncated_to });
    ToolOutput { content, is_error }
}

/// Seconds as Roku prints them: `120`, or `0.5` for a fractional limit (a whole `f64`
/// prints without a fraction).
pub(crate) fn seconds(d: Duration) -> String {
    d.as_secs_f64().to_string()
}

/// A child's loop, polled with enough stack: each foreground level polls the next one from
/// inside its own poll, so a deep chain would otherwise overflow the thread's stack. When
/// less than [`RED_ZONE`] is left, the poll continues on a fresh [`SEGMENT`] from the heap.
struct OwnStack<F>(F);

/// The stack one level may use between two checks (generous: debug builds use more).
const RED_ZONE: usize = 256 * 1024;
/// A fresh segment's size: room for dozens of levels before the next one.
const SEGMENT: usize = 4 * 1024 * 1024;

impl<F: Future + Unpin> Future for OwnStack<F> {
    type Output = F::Output;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<F::Output> {
        stacker::maybe_grow(RED_ZONE, SEGMENT, || std::pin::Pin::new(&mut self.0).poll(cx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_print_whole_or_fractional() {
        assert_eq!(seconds(Duration::from_secs(120)), "120");
        assert_eq!(seconds(Duration::from_millis(1500)), "1.5");
        assert_eq!(seconds(Duration::from_millis(100)), "0.1");
    }
}

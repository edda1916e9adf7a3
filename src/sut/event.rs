//! What the core reports as it runs: a closed enum of events and the observer that receives
//! them.
//!
//! Events are the runtime's own event stream (Roku's ToolStart/ToolEnd/StepComplete, Bub's
//! task lifecycle), each tagged with the agent it belongs to. The core does not timestamp,
//! format or store them: an [`Observer`] does (the harness's trace recorder is one).

use std::time::Duration;

use super::AgentId;

/// How an agent loop ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeKind {
    /// A final answer (text without calls, or `final_answer`).
    FinalAnswer,
    /// A failure (`fail`, an exhausted budget, an LLM error).
    Fail,
    /// The loop waits for the user (`ask_user`).
    AwaitingUser,
}

/// Whether an outcome is a success.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Success.
    Ok,
    /// Error.
    Error,
}

/// Which family a child belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Roku's foreground `Agent`.
    Foreground,
    /// Bub's background `subagent`.
    Background,
}

/// The end state of a background task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TaskStatus {
    /// The child gave a final answer.
    Completed,
    /// The child failed.
    Failed,
    /// The child ran out of time.
    TimedOut,
    /// The task was cancelled (by `subagent.cancel` or by quitting the session).
    Cancelled,
}

impl TaskStatus {
    /// The status word of notifications and tool results.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::TimedOut => "timed_out",
            TaskStatus::Cancelled => "cancelled",
        }
    }
}

/// How a finished background result reached its parent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// A `<subagent-notification>` message before the parent's next step.
    Notification,
    /// The result of a `subagent.wait` call.
    Wait,
}

/// Everything the core reports. One `match` in the trace renders it.
///
/// Budgets in events are what the agent has left after the event.
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs)] // fields are named for what they hold; each variant says when it fires
pub enum Event {
    /// A user turn begins at the root.
    TurnStarted { turn: u32, message: String, budget: u32 },
    /// A user turn ended.
    TurnEnded { turn: u32, kind: OutcomeKind, status: Status, budget: u32 },
    /// A child loop begins (foreground or background), reported at the child's alias.
    AgentStarted { depth: u32, goal: String, budget: u32, request_id: String },
    /// A loop asks the model. `call` counts this loop's requests from 1: the root's count
    /// starts again at each user turn (scenario traces expect `llm.request #1` per turn).
    LlmRequest { call: u32, messages: usize, tools: usize, budget: u32 },
    /// The model answered.
    LlmReply { text: String, calls: Vec<String> },
    /// The model call failed.
    LlmFailed { error: String },
    /// The approval gate denied a call, leaving `budget`. A denied call has no
    /// `ToolStarted` or `ToolEnded`.
    Denied { tool: String, reason: String, budget: u32 },
    /// A catalog tool, `Agent` or a `subagent` tool starts.
    ToolStarted { call_id: String, tool: String, args: std::sync::Arc<serde_json::Value> },
    /// It ended; `budget` and `recovery` are what the caller has left. A call to a name the
    /// agent does not have reports only this event (no `ToolStarted`), carrying the
    /// unknown-tool answer as an error.
    ToolEnded { call_id: String, tool: String, is_error: bool, result: String, budget: u32, recovery: u32 },
    /// The exhaustion nudge was appended.
    Nudge { budget: u32, recovery: u32 },
    /// A response that ran calls without ending the loop is done: one per such response,
    /// after its last call; `step_index` as it stands after the response.
    StepCompleted { step_index: u32, budget: u32 },
    /// A child was created and granted steps, reported at the parent. `budget_before` is the
    /// parent's budget before the spawn cost; `budget_after` is what is left after the cost
    /// and the grant. For `Agent` it follows the call's `ToolStarted`.
    Spawned {
        child: AgentId,
        family: Family,
        task: String,
        cost: u32,
        grant: u32,
        budget_before: u32,
        budget_after: u32,
    },
    /// A spawning call was refused; no child exists.
    SpawnRefused { tool: String, reason: String },
    /// A foreground child's result is handed to its parent (not after a timeout). `chars` is
    /// the child's final message length in Unicode scalar values; `truncated_to` is the limit
    /// when the message was cut to it.
    ChildResult { child: AgentId, is_error: bool, chars: usize, truncated_to: Option<usize> },
    /// A child ran out of time and was stopped, reported at the parent; the child then reports
    /// no `AgentEnded`.
    TimedOut { child: AgentId, after: Duration },
    /// A loop ended: a child's, and the root's at the end of each turn, before `TurnEnded`.
    AgentEnded { kind: OutcomeKind, status: Status, message: String, steps: u32, budget: u32 },
    /// A background task waits for a free slot.
    TaskQueued { task_id: String, child: AgentId, session: String },
    /// A background task started running.
    TaskStarted { task_id: String, child: AgentId, timeout: Option<Duration> },
    /// A background task ended.
    TaskEnded { task_id: String, child: AgentId, status: TaskStatus, body: String },
    /// A finished background result reached its parent.
    Delivered { task_id: String, status: TaskStatus, via: Via },
    /// A message reached an agent from outside its own loop (steering, `subagent.send`).
    Steered { message: String },
    /// A finished root turn waits for running children before it may end.
    AwaitingChildren { unfinished: usize },
    /// A session (conversation record) was opened for a child.
    SessionOpened { name: String, kind: &'static str },
    /// A child's session was closed: kept (named) or discarded (temp, fork).
    SessionClosed { name: String, kept: bool },
}

impl Event {
    /// The child the event names (a spawn, a task's life, a child's result or timeout).
    pub fn child(&self) -> Option<&AgentId> {
        match self {
            Event::Spawned { child, .. }
            | Event::TaskQueued { child, .. }
            | Event::TaskStarted { child, .. }
            | Event::TaskEnded { child, .. }
            | Event::TimedOut { child, .. }
            | Event::ChildResult { child, .. } => Some(child),
            _ => None,
        }
    }
}

/// Receives the core's events, in the order they happen.
pub trait Observer: Send + Sync {
    /// One event of `agent`.
    fn event(&self, agent: &AgentId, event: Event);
}

/// An observer that drops everything.
pub struct NoObserver;

impl Observer for NoObserver {
    fn event(&self, _: &AgentId, _: Event) {}
}

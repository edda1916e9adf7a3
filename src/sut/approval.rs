//! Approval: the gate a core consults before each call, and the person who answers when a
//! call needs approval.
//!
//! The gate's policy is the core's business (Roku's risk-based classification lives in the
//! built-in core); who answers is the harness's (a scripted user).

use serde::{Deserialize, Serialize};

use super::AgentId;
use super::llm::{BoxFuture, ToolCall};

/// A gate's verdict on one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The call may run.
    Approve,
    /// The call may not run; the reason reaches the model as `[Tool denied] <reason>`.
    Deny(String),
}

/// Decides per call whether it may run.
pub trait ApprovalGate: Send + Sync {
    /// Decides on one call of `agent`. `tags` are the tool's tags (empty for pseudo and
    /// unknown tools).
    fn check<'a>(&'a self, agent: &'a AgentId, call: &'a ToolCall, tags: &'a [String]) -> BoxFuture<'a, Decision>;
}

/// Asks a person whether a call that needs approval may run.
pub trait Asker: Send + Sync {
    /// `true` when the person approves.
    fn ask<'a>(&'a self, agent: &'a AgentId, call: &'a ToolCall) -> BoxFuture<'a, bool>;
}

/// Which gate a session uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GateMode {
    /// Approve everything.
    #[default]
    Auto,
    /// Roku's risk-based gate.
    Risk,
}

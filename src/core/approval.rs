//! The built-in core's approval gates: approve everything, or Roku's risk-based gate.
//!
//! One gate object serves a whole session: a child uses its parent's very gate (an `Arc`
//! clone, never a copy), so a recording gate sees both loops' calls in execution order.
//! Asking a person is behind [`Asker`]; the gate itself decides nothing about who answers.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::sut::AgentId;
use crate::sut::approval::{ApprovalGate, Asker, Decision};
use crate::sut::llm::{BoxFuture, ToolCall};

/// How risky a call is, as the risk-based gate classifies it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Risk {
    /// Runs without asking.
    Safe,
    /// Needs approval.
    NeedsApproval,
}

/// Approves everything and classifies nothing.
pub struct AutoGate;

impl ApprovalGate for AutoGate {
    fn check<'a>(&'a self, _: &'a AgentId, _: &'a ToolCall, _: &'a [String]) -> BoxFuture<'a, Decision> {
        Box::pin(async { Decision::Approve })
    }
}

/// Roku's risk-based gate: safe calls pass, others are refused by policy or asked about.
pub struct RiskGate {
    policy_denied: BTreeSet<String>,
    asker: Arc<dyn Asker>,
}

impl RiskGate {
    /// A gate that refuses `policy_denied` tools outright and asks `asker` about the rest of
    /// the calls that need approval.
    pub fn new(policy_denied: impl IntoIterator<Item = String>, asker: Arc<dyn Asker>) -> RiskGate {
        RiskGate { policy_denied: policy_denied.into_iter().collect(), asker }
    }

    /// Roku's classification: terminal pseudo tools are safe; `risk:write` (checked first)
    /// needs approval; `risk:safe` is safe; anything else (unknown tools, `Agent`) needs it.
    pub fn classify(name: &str, tags: &[String]) -> Risk {
        if matches!(name, "final_answer" | "ask_user" | "fail") {
            return Risk::Safe;
        }
        if tags.iter().any(|t| t == "risk:write") {
            return Risk::NeedsApproval;
        }
        if tags.iter().any(|t| t == "risk:safe") {
            return Risk::Safe;
        }
        Risk::NeedsApproval
    }
}

impl ApprovalGate for RiskGate {
    fn check<'a>(&'a self, agent: &'a AgentId, call: &'a ToolCall, tags: &'a [String]) -> BoxFuture<'a, Decision> {
        Box::pin(async move {
            if RiskGate::classify(&call.name, tags) == Risk::Safe {
                return Decision::Approve;
            }
            if self.policy_denied.contains(&call.name) {
                return Decision::Deny(format!("Tool `{}` is denied by the current security policy.", call.name));
            }
            if self.asker.ask(agent, call).await {
                Decision::Approve
            } else {
                Decision::Deny("User denied the operation.".to_string())
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_tag_is_checked_before_safe_tag() {
        let tags = vec!["risk:safe".to_string(), "risk:write".to_string()];
        assert_eq!(RiskGate::classify("Edit", &tags), Risk::NeedsApproval);
        assert_eq!(RiskGate::classify("Read", &["risk:safe".to_string()]), Risk::Safe);
        assert_eq!(RiskGate::classify("Agent", &[]), Risk::NeedsApproval);
        assert_eq!(RiskGate::classify("fail", &[]), Risk::Safe);
    }
}

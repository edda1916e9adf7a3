//! The simulated tools a scenario declares: their specs, results and risk tags.
//!
//! It does not run a tool (the harness does) nor know the built-in tools' parameters
//! (`builtin` does; this only asks it).

use std::fmt;

use serde::{Deserialize, Serialize};

#[cfg(feature = "wire")]
use super::builtin;
use super::format::is_zero;
use super::text::Text;

/// How risky a simulated tool is, for the risk gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RiskTag {
    /// `risk:safe`.
    Safe,
    /// `risk:write`.
    Write,
}

impl RiskTag {
    /// The tag the tool carries (`risk:safe`, `risk:write`).
    pub fn tag(self) -> &'static str {
        match self {
            RiskTag::Safe => "risk:safe",
            RiskTag::Write => "risk:write",
        }
    }
}

/// A simulated tool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    /// Its name.
    pub name: String,
    /// Its description.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Virtual time each call takes.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub latency_ms: u64,
    /// Results of successive calls; the last one repeats. Empty: the text `ok`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub results: Vec<ToolResult>,
    /// Risk tag for the risk gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk: Option<RiskTag>,
    /// A Rust function that answers every call instead of `results` (scenarios built in code
    /// only; never read from or written to a file).
    #[serde(skip)]
    pub handler: Option<ToolFn>,
}

/// A Rust function acting as a simulated tool: the call's arguments in, a result out.
#[derive(Clone)]
pub struct ToolFn(pub std::sync::Arc<dyn Fn(&serde_json::Value) -> ToolResult + Send + Sync>);

impl fmt::Debug for ToolFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ToolFn(..)")
    }
}

impl PartialEq for ToolFn {
    fn eq(&self, other: &ToolFn) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

/// One result of a simulated tool: `{"text": ...}` or `{"error": ...}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolResult {
    /// A successful result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<Text>,
    /// A failed result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Text>,
    /// Overrides the tool's latency for this call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
}

/// Whether a call of `tool` with `args` is one the built-in tool's parameters accept: `None`
/// when `tool` is not a built-in tool (a file must declare it or mark the call).
#[cfg(feature = "wire")]
pub(crate) fn builtin_call_fits(tool: &str, args: &serde_json::Value) -> Option<bool> {
    builtin::parameters(tool)?;
    Some(builtin::check_call(tool, args, "").is_ok())
}

//! The rule knobs: every limit of both sub-agent families, with its default in one place.
//!
//! The `roku` and `bub` presets are two sets of values for the same struct (see
//! `docs/rules/core.md`, `core.knob.*`). A scenario starts from a preset and may override any
//! knob; the property tests fuzz them, so nothing in the core may be a hidden constant.
//! This module holds values only; it does not decide anything.

use std::time::Duration;

/// Which preset a rule set started from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    /// Roku: a foreground `Agent` tool.
    Roku,
    /// Bub: the background `subagent` tool family.
    Bub,
}

/// Every rule the orchestration core follows, as named limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rules {
    /// The preset these values started from (used only for naming).
    pub preset: Preset,
    /// Steps the root agent may spend in one turn. 30 in both presets; 0 is a
    /// configuration error.
    pub root_step_budget: u32,
    /// Initial recovery budget of every loop (failed tools and unknown names draw on it). 5.
    pub recovery_budget: u32,
    /// Deepest agent that may run: the root has depth 0, its children depth 1. A spawn from an
    /// agent already at this depth is refused. 1 in both presets.
    pub depth_limit: u32,
    /// Most steps one child is granted. 10 in both presets.
    pub child_step_cap: u32,
    /// Steps the parent pays for the spawning call itself. 1 in both presets.
    pub spawn_cost: u32,
    /// Longest foreground child result, in Unicode scalar values, before truncation.
    /// `Some(4000)` for roku; `None` (no truncation) for bub.
    pub result_limit_chars: Option<usize>,
    /// How long a foreground `Agent` child may run. 120 s for roku; `None` means no limit.
    pub agent_timeout: Option<Duration>,
    /// Default time limit of a background child when neither the call nor its profile sets
    /// one. `None` in both presets.
    pub subagent_default_timeout: Option<Duration>,
    /// Most background children running at once. 4.
    pub max_concurrency: usize,
    /// Whether the root is offered the foreground `Agent` tool (roku: yes, bub: no).
    pub agent_tool: bool,
    /// Whether the root is offered the `subagent` family (roku: no, bub: yes).
    pub subagent_tools: bool,
    /// How an unknown tool name is answered; `{name}` is replaced by the name.
    /// Roku: ``tool `{name}` is not enabled in the current runtime inventory``;
    /// Bub: `Unknown tool name: {name}.`
    pub unknown_tool_message: String,
}

/// The longest time limit, in seconds, the core takes from a model or a profile (about 31.7
/// years): larger values are clamped to it, so no number can overflow the clock.
pub const MAX_SECONDS: f64 = 1e9;

/// The default wait of `subagent.wait` when the call gives no `timeout_seconds`.
pub const WAIT_DEFAULT_SECONDS: u64 = 60;

impl Rules {
    /// Roku's rules (`docs/rules/roku.md`).
    pub fn roku() -> Rules {
        Rules {
            preset: Preset::Roku,
            root_step_budget: 30,
            recovery_budget: 5,
            depth_limit: 1,
            child_step_cap: 10,
            spawn_cost: 1,
            result_limit_chars: Some(4000),
            agent_timeout: Some(Duration::from_secs(120)),
            subagent_default_timeout: None,
            max_concurrency: 4,
            agent_tool: true,
            subagent_tools: false,
            unknown_tool_message: "tool `{name}` is not enabled in the current runtime inventory".to_string(),
        }
    }

    /// Bub's rules (`docs/rules/bub.md`).
    pub fn bub() -> Rules {
        Rules {
            preset: Preset::Bub,
            result_limit_chars: None,
            agent_timeout: None,
            agent_tool: false,
            subagent_tools: true,
            unknown_tool_message: "Unknown tool name: {name}.".to_string(),
            ..Rules::roku()
        }
    }

    /// The rules of a preset.
    pub fn preset(preset: Preset) -> Rules {
        match preset {
            Preset::Roku => Rules::roku(),
            Preset::Bub => Rules::bub(),
        }
    }

    /// Checks the values against each other; the error names the knob.
    pub fn validate(&self) -> Result<(), String> {
        if self.root_step_budget == 0 {
            return Err("root_step_budget: must be at least 1 (0 is a configuration error)".into());
        }
        if self.max_concurrency == 0 {
            return Err("max_concurrency: must be at least 1".into());
        }
        if self.result_limit_chars == Some(0) {
            return Err("result_limit_chars: must be at least 1, or null for no limit".into());
        }
        if !self.unknown_tool_message.contains("{name}") {
            return Err("unknown_tool_message: must contain {name}".into());
        }
        Ok(())
    }

    /// The answer to a call of a tool nobody offered.
    pub fn unknown_tool(&self, name: &str) -> String {
        self.unknown_tool_message.replace("{name}", name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_differ_only_where_core_knobs_say() {
        let (r, b) = (Rules::roku(), Rules::bub());
        assert_eq!(r.root_step_budget, b.root_step_budget);
        assert_eq!(r.depth_limit, 1);
        assert_eq!(b.depth_limit, 1);
        assert_eq!(r.child_step_cap, 10);
        assert_eq!(r.result_limit_chars, Some(4000));
        assert_eq!(b.result_limit_chars, None);
        assert_eq!(r.agent_timeout, Some(Duration::from_secs(120)));
        assert_eq!(b.max_concurrency, 4);
        assert!(r.agent_tool && !r.subagent_tools);
        assert!(!b.agent_tool && b.subagent_tools);
    }

    #[test]
    fn zero_root_budget_is_a_configuration_error() {
        let rules = Rules { root_step_budget: 0, ..Rules::roku() };
        assert!(rules.validate().unwrap_err().contains("root_step_budget"));
    }
}

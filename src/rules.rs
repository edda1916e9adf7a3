//! The rule knobs: every limit of both sub-agent families, with its default in one place.
//!
//! The `roku` and `bub` presets are two sets of values for the same struct (see
//! `docs/rules/core.md`, `core.knob.*`). A scenario starts from a preset and may override any
//! knob; the property tests fuzz them, so nothing in the core may be a hidden constant.
//! This module holds values only; it does not decide anything.

pub mod words;

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
    pub fn validate(&self) -> Result<(), InvalidKnob> {
        let invalid = |knob, why| Err(InvalidKnob { knob, why });
        if self.root_step_budget == 0 {
            return invalid("root_step_budget", "must be at least 1 (0 is a configuration error)");
        }
        if self.max_concurrency == 0 {
            return invalid("max_concurrency", "must be at least 1");
        }
        if self.result_limit_chars == Some(0) {
            return invalid("result_limit_chars", "must be at least 1, or null for no limit");
        }
        if !self.unknown_tool_message.contains("{name}") {
            return invalid("unknown_tool_message", "must contain {name}");
        }
        Ok(())
    }

    /// The answer to a call of a tool nobody offered.
    pub fn unknown_tool(&self, name: &str) -> String {
        self.unknown_tool_message.replace("{name}", name)
    }
}

/// A knob whose value the rules cannot run with: which knob, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidKnob {
    /// The knob's name, as a scenario's `rules` spells it.
    pub knob: &'static str,
    /// What its value must be.
    pub why: &'static str,
}

impl std::fmt::Display for InvalidKnob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.knob, self.why)
    }
}

impl std::error::Error for InvalidKnob {}

#[cfg(test)]
pub(crate) mod tests {
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

    /// The knob clauses of `docs/rules/core.md` (`core.knob.*`): per knob name, the value the
    /// page gives each preset, as written there (`30`, `` `null` ``, `true`, a message).
    fn documented_knobs() -> Vec<(String, String, String)> {
        /// The value at the start of `text`: bold (`**30**`, `` **`null`** ``) or code.
        fn value(text: &str) -> Option<(String, &str)> {
            let (open, close) = if text.starts_with("**") {
                ("**", "**")
            } else if text.starts_with("``") {
                ("``", "``")
            } else {
                ("`", "`")
            };
            let rest = text.strip_prefix(open)?;
            let end = rest.find(close)?;
            Some((rest[..end].trim().to_string(), &rest[end + close.len()..]))
        }
        let page = include_str!("../docs/rules/core.md");
        let mut knobs = Vec::new();
        for line in page.lines().filter(|l| l.starts_with("- **`core.knob.")) {
            let Some((_, text)) = line.split_once(" — `") else { continue };
            let name = text.split('`').next().unwrap_or_default().to_string();
            let Some((_, roku)) = text.split_once(" roku ") else { continue };
            let (roku, rest) = value(roku).unwrap_or_else(|| panic!("no roku value in {line}"));
            let rest = rest.trim_start_matches(" ms");
            let bub = rest.strip_prefix(", bub ").unwrap_or_else(|| panic!("no bub value in {line}"));
            let (bub, _) = value(bub).unwrap_or_else(|| panic!("no bub value in {line}"));
            knobs.push((name, roku, bub));
        }
        knobs
    }

    /// A knob's value written as `docs/rules/core.md` writes it.
    fn as_documented(rules: &Rules) -> Vec<(&'static str, String)> {
        // Destructured, so a new knob cannot be left out of this test.
        let Rules {
            preset: _,
            root_step_budget,
            recovery_budget,
            depth_limit,
            child_step_cap,
            spawn_cost,
            result_limit_chars,
            agent_timeout,
            subagent_default_timeout,
            max_concurrency,
            agent_tool,
            subagent_tools,
            unknown_tool_message,
        } = rules;
        let null = || "`null`".to_string();
        let ms = |t: &Option<Duration>| t.map_or_else(null, |t| t.as_millis().to_string());
        vec![
            ("root_step_budget", root_step_budget.to_string()),
            ("recovery_budget", recovery_budget.to_string()),
            ("depth_limit", depth_limit.to_string()),
            ("child_step_cap", child_step_cap.to_string()),
            ("spawn_cost", spawn_cost.to_string()),
            ("result_limit_chars", result_limit_chars.map_or_else(null, |n| n.to_string())),
            ("agent_timeout", ms(agent_timeout)),
            ("subagent_default_timeout", ms(subagent_default_timeout)),
            ("max_concurrency", max_concurrency.to_string()),
            ("agent_tool", agent_tool.to_string()),
            ("subagent_tools", subagent_tools.to_string()),
            ("unknown_tool_message", unknown_tool_message.clone()),
        ]
    }

    /// Every field of both presets is the value `core.knob.*` documents: a preset cannot drift
    /// from the page (or take the other family's value) silently.
    #[test]
    fn every_preset_field_is_the_documented_value() {
        assert_documented(&Rules::roku(), &Rules::bub());
    }

    /// Asserts that `roku` and `bub` hold, field by field, the values `core.knob.*` documents
    /// for the two presets (also used by the oracle that keeps its own table).
    pub(crate) fn assert_documented(roku: &Rules, bub: &Rules) {
        let documented = documented_knobs();
        let (roku_rules, bub_rules) = (roku, bub);
        let (roku, bub) = (as_documented(roku), as_documented(bub));
        assert_eq!(documented.len(), roku.len(), "the page documents {documented:?}");
        for ((name, want_roku, want_bub), ((field, got_roku), (_, got_bub))) in
            documented.iter().zip(roku.iter().zip(&bub))
        {
            assert_eq!(name, field, "the knobs are documented in the order of `Rules`");
            assert_eq!(got_roku, want_roku, "roku preset, `{name}`");
            assert_eq!(got_bub, want_bub, "bub preset, `{name}`");
        }
        assert_eq!(roku_rules.preset, Preset::Roku);
        assert_eq!(bub_rules.preset, Preset::Bub);
    }

    #[test]
    fn the_wait_default_is_the_documented_one() {
        let page = include_str!("../docs/rules/core.md");
        assert!(page.contains(&format!("`subagent.wait` waits **{WAIT_DEFAULT_SECONDS}** s")));
    }

    #[test]
    fn zero_root_budget_is_a_configuration_error() {
        let rules = Rules { root_step_budget: 0, ..Rules::roku() };
        assert_eq!(rules.validate().unwrap_err().knob, "root_step_budget");
    }
}

//! Oracle clause `oracle.context.rules-as-written`: the rules the core was given are the
//! scenario's preset, as the rules page documents it, with the scenario's own overrides.
//!
//! Every other oracle judges a run against the rules the loader resolved, so a preset that
//! silently takes the other family's value (Roku's `Agent` limit or unknown-tool message in
//! the bub preset) would be agreed with everywhere. This clause keeps its own table of both
//! presets, every knob written out from `docs/rules/core.md` §2 (no preset built from the
//! other), applies the knobs the scenario sets, and compares each field with the core's.

use std::fmt::Debug;
use std::time::Duration;

use super::{Oracle, Report};
use crate::evidence::Evidence;
use crate::rules::{Preset, Rules};
use crate::scenario::{PresetName, RulesSpec};

/// Both presets as `core.knob.*` documents them, each written out in full. The Roku table says
/// what `Rules::roku` says, on purpose: the oracle must not take the core's word for it.
fn documented(preset: PresetName) -> Rules {
    match preset {
        PresetName::Roku => Rules {
            preset: Preset::Roku,
            root_step_budget: 30,
            recovery_budget: 5,
            depth_limit: 1,
            child_step_cap: 10,
            spawn_cost: 1,
            result_limit_chars: Some(4000),
            agent_timeout: Some(Duration::from_millis(120_000)),
            subagent_default_timeout: None,
            max_concurrency: 4,
            agent_tool: true,
            subagent_tools: false,
            unknown_tool_message: "tool `{name}` is not enabled in the current runtime inventory".into(),
        },
        PresetName::Bub => Rules {
            preset: Preset::Bub,
            root_step_budget: 30,
            recovery_budget: 5,
            depth_limit: 1,
            child_step_cap: 10,
            spawn_cost: 1,
            result_limit_chars: None,
            agent_timeout: None,
            subagent_default_timeout: None,
            max_concurrency: 4,
            agent_tool: false,
            subagent_tools: true,
            unknown_tool_message: "Unknown tool name: {name}.".into(),
        },
    }
}

pub(super) fn presets(e: &Evidence, r: &mut Report) {
    let Some(setup) = e.setup else { return };
    let RulesSpec {
        preset,
        root_step_budget,
        recovery_budget,
        depth_limit,
        child_step_cap,
        spawn_cost,
        result_limit_chars,
        agent_timeout_ms,
        subagent_default_timeout_ms,
        max_concurrency,
        agent_tool,
        subagent_tools,
        unknown_tool_message,
    } = &setup.rules_as_written;
    let (base, core) = (documented(*preset), e.rules);
    let name = match preset {
        PresetName::Roku => "roku",
        PresetName::Bub => "bub",
    };
    // Each knob: the scenario's value if it sets one, else the preset's; compared as values,
    // rendered only when they differ.
    let mut knob = |field: &str, set: bool, want: &dyn Debug, got: &dyn Debug, same: bool| {
        if !same {
            let from = if set { "the scenario sets" } else { "the preset gives" };
            r.add_run(
                Oracle::Context,
                format!("rule `{field}`: the core was given {got:?}; {from} {want:?} ({name} preset)"),
            );
        }
    };
    let ms = |limit: Option<u64>| limit.map(Duration::from_millis);
    macro_rules! check {
        ($field:ident, $set:expr, $want:expr) => {{
            let want = $want;
            knob(stringify!($field), $set, &want, &core.$field, want == core.$field);
        }};
    }
    check!(preset, false, base.preset);
    check!(root_step_budget, root_step_budget.is_some(), root_step_budget.unwrap_or(base.root_step_budget));
    check!(recovery_budget, recovery_budget.is_some(), recovery_budget.unwrap_or(base.recovery_budget));
    check!(depth_limit, depth_limit.is_some(), depth_limit.unwrap_or(base.depth_limit));
    check!(child_step_cap, child_step_cap.is_some(), child_step_cap.unwrap_or(base.child_step_cap));
    check!(spawn_cost, spawn_cost.is_some(), spawn_cost.unwrap_or(base.spawn_cost));
    check!(result_limit_chars, result_limit_chars.is_some(), result_limit_chars.unwrap_or(base.result_limit_chars));
    check!(agent_timeout, agent_timeout_ms.is_some(), agent_timeout_ms.map_or(base.agent_timeout, ms));
    check!(
        subagent_default_timeout,
        subagent_default_timeout_ms.is_some(),
        subagent_default_timeout_ms.map_or(base.subagent_default_timeout, ms)
    );
    check!(max_concurrency, max_concurrency.is_some(), max_concurrency.unwrap_or(base.max_concurrency));
    check!(agent_tool, agent_tool.is_some(), agent_tool.unwrap_or(base.agent_tool));
    check!(subagent_tools, subagent_tools.is_some(), subagent_tools.unwrap_or(base.subagent_tools));
    check!(
        unknown_tool_message,
        unknown_tool_message.is_some(),
        unknown_tool_message.clone().unwrap_or(base.unknown_tool_message)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table is the page's: `rules::tests` holds every field of the core's presets to
    /// `core.knob.*`, so the two tables agree exactly when both agree with the page.
    #[test]
    fn the_oracle_s_presets_are_the_documented_ones() {
        crate::rules::tests::assert_documented(&documented(PresetName::Roku), &documented(PresetName::Bub));
    }
}

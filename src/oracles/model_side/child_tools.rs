//! `oracle.model-side.child-tools`: the tools a child is offered, read from its first request
//! against its parent's request that made the call and the call's own grant.

use crate::dialect::{Dialect, normalized};
use crate::evidence::attribution::ModelSide;
use crate::rules::Rules;

use super::{Out, builtin_rules, child_of};

/// `oracle.model-side.child-tools`: a child is offered at most what its call granted
/// ([`bub.child.tools-at-most-parent`], [`bub.child.tools-narrowed`], [`roku.child.tools`]):
/// where the dialect says children narrow their parent's tools, no tool its parent's request
/// was not offered (the dialect's terminal tools aside), and,
/// where the call lists tools (the dialect's `tools` argument, a non-empty list), none outside
/// that list (names matched as the dialect's runtime matches them), the sub-agent tools aside
/// (those are offered by depth, [`core.depth.agent-offered-below-limit`]); nor one of the
/// dialect's root-only tools (`ask_user`).
pub(super) fn child_tools(side: &ModelSide, rules: &Rules, dialect: &Dialect, out: &mut Out) {
    let mut findings = Vec::new();
    for c in &side.calls {
        let Some(child) = child_of(c) else { continue };
        let Some(&(first, _)) = out.agents.exchanges(child).first() else { continue };
        let parent = &side.exchanges[c.exchange].tools;
        let terminal = |t: &str| dialect.terminal.iter().any(|x| x.name == t);
        let granted = dialect.spawn_tool(&c.tool).and_then(|tool| tool.granted_names(&c.args));
        // The sub-agent tools are offered by depth, not by grant (`core.depth.agent-offered-below-limit`).
        let sub_agent = |t: &str| dialect.spawn_tool(t).is_some() || dialect.is_family(t);
        let root_only = side.exchanges[first].tools.iter().find(|t| dialect.root_only.contains(t));
        if let Some(tool) = root_only {
            findings.push((first, format!("{child} is offered `{tool}`, which only the root is offered")));
            continue;
        }
        let beyond = side.exchanges[first].tools.iter().find(|t| {
            !terminal(t)
                && (dialect.child_tools_within_parent && !parent.contains(t)
                    || !sub_agent(t)
                        && granted
                            .as_ref()
                            .is_some_and(|g| !crate::dialect::names_within(&[t.to_string()], g, |_| false, false)))
        });
        if let Some(tool) = beyond {
            let why = if parent.contains(tool) {
                format!("its call granted only {:?}", granted.as_deref().unwrap_or_default())
            } else {
                "its parent's request that made the call was not offered it".to_string()
            };
            findings.push((first, format!("{child} is offered `{tool}`, but {why}")));
            continue;
        }
        if let Some(want) = exact(c, rules, dialect, parent, child.depth())
            && side.exchanges[first].tools != want
        {
            findings.push((
                first,
                format!(
                    "{child} is offered [{}], where its call gives it [{}]: {}",
                    side.exchanges[first].tools.join(", "),
                    want.join(", "),
                    if granted.is_some() {
                        "the catalog tools it names (matched trimmed, without regard to case, `.` and `_` alike), in its parent's order, then `final_answer` and `fail`"
                    } else {
                        "its parent's tools in order, without `ask_user` and the background family"
                    }
                ),
            ));
        }
    }
    for (i, message) in findings {
        out.at("child-tools", "oracle.model-side.child-tools", i, message, None);
    }
}

/// The exact tools the built-in core's rules give the child of `c` in its first request, where
/// they can be read off the traffic: its parent's tools, in order (`roku.child.tools`,
/// `bub.child.tools-default`, `bub.child.tools-catalog-order`), without the root-only tools
/// (`ask_user`) and the background family (`core.depth.subagent-root-only`), a synchronous
/// spawn tool kept only while the child is below the depth limit
/// (`core.depth.agent-offered-below-limit`), and, where the call names tools (a non-empty list,
/// `bub.child.allowed-tools-empty`), only the catalog tools it names
/// (`bub.child.tools-narrowed`, `bub.spawn.name-matching`). `None` where the rules are not the
/// built-in core's (another runtime's dialect) or a profile may narrow the child.
fn exact(
    c: &crate::evidence::attribution::SpawnCall,
    rules: &Rules,
    dialect: &Dialect,
    parent: &[String],
    depth: u32,
) -> Option<Vec<String>> {
    if !builtin_rules(dialect) || c.profile.is_some() {
        return None;
    }
    let granted = dialect.spawn_tool(&c.tool)?.granted_names(&c.args);
    let want = parent.iter().filter(|t| {
        let t = t.as_str();
        if dialect.terminal.iter().any(|x| x.name == t) {
            return true;
        }
        if dialect.root_only.iter().any(|x| x == t) {
            return false;
        }
        if let Some(spawn) = dialect.spawn_tool(t) {
            return spawn.may_run_sync() && depth < rules.depth_limit;
        }
        if dialect.is_family(t) {
            return false;
        }
        granted.as_ref().is_none_or(|g| g.iter().any(|n| normalized(n) == normalized(t)))
    });
    Some(want.cloned().collect())
}

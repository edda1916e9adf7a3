//! `oracle.model-side.approval`: the denials the model reads are the gate's rules, with the
//! safe class before the policy.
//!
//! The model reads a denial as a call's result (`[Tool denied] <reason>`,
//! `roku.approval.deny-result`); the harness knows the gate it set up (the auto gate or Roku's
//! risk gate, the catalog's tags, the policy's list). From those alone: under the auto gate no
//! call is denied (`roku.approval.auto`); under the risk gate a safe call (`final_answer`,
//! `ask_user`, `fail`, a tool tagged `risk:safe` and not `risk:write`) is never denied, the
//! policy's list notwithstanding (`roku.approval.risk-classes`); a call that needs approval and
//! is on the list is denied, with the policy's reason (`roku.approval.policy-deny`); and a call
//! that needs approval and is not on the list is denied only by the user, with the user's reason
//! (`roku.approval.user-deny`). Which answers the user gave is not judged here: they are consumed
//! across agents in the order the calls run, which the model side does not see.

use crate::evidence::Setup;
use crate::evidence::attribution::ModelSide;

use super::{DENIED, Out, keeps_reply, result_in};

/// The user's reason (`roku.approval.user-deny`).
const USER: &str = "User denied the operation.";

/// `oracle.model-side.approval`; judges nothing without the run's setup (a run over the wire,
/// whose runtime keeps its own gate).
pub(super) fn approval(side: &ModelSide, setup: Option<&Setup>, out: &mut Out) {
    let Some(setup) = setup else { return };
    let mut findings = Vec::new();
    for list in out.agents.of.values() {
        for pair in list.windows(2) {
            let ((x, _), (y, _)) = (pair[0], pair[1]);
            let Some(reply) = side.exchanges[x].reply.as_ref().filter(|_| keeps_reply(side, x, y)) else { continue };
            for call in &reply.tool_calls {
                let Some((_, result)) = result_in(side, x, y, &call.id) else { continue };
                if let Some(why) = wrong(&call.name, &result.content, setup) {
                    findings.push((y, format!("the result of `{}` {why}", call.name), result.clone()));
                }
            }
        }
    }
    // A spawn call the policy denies makes no child, whether or not its result was seen
    // (`roku.agent.gate-first`: the gate sees an `Agent` call before anything else).
    let mut made = Vec::new();
    for c in &side.calls {
        let Some(child) = super::child_of(c) else { continue };
        let Some(&(first, _)) = out.agents.exchanges(child).first() else { continue };
        if setup.risk_gate && !safe(&c.tool, setup) && setup.policy_deny.contains(&c.tool) {
            made.push((
                first,
                format!(
                    "{child} asks the model, but the `{}` call that made it is on the policy's list and needs approval: the gate denies it before it spawns anything",
                    c.tool
                ),
            ));
        }
    }
    for (i, message, m) in findings {
        out.at("approval", "oracle.model-side.approval", i, message, Some(&m));
    }
    for (i, message) in made {
        out.at("approval", "oracle.model-side.approval", i, message, None);
    }
}

/// Whether a call of `name` is in the risk gate's safe class (`roku.approval.risk-classes`).
fn safe(name: &str, setup: &Setup) -> bool {
    let tags = setup.tool_tags.get(name).map_or(&[][..], Vec::as_slice);
    let tagged = |t: &str| tags.iter().any(|x| x == t);
    matches!(name, "final_answer" | "ask_user" | "fail") || !tagged("risk:write") && tagged("risk:safe")
}

/// What is wrong with `result` as the answer to a call of `name` under the gate `setup` set up.
fn wrong(name: &str, result: &str, setup: &Setup) -> Option<String> {
    let reason = result.strip_prefix(DENIED);
    if !setup.risk_gate {
        return reason
            .map(|_| "is a denial, but the run's gate is the auto gate, which approves every call".to_string());
    }
    let tags = setup.tool_tags.get(name).map_or(&[][..], Vec::as_slice);
    let safe = safe(name, setup);
    let listed = setup.policy_deny.iter().any(|p| p == name);
    let policy = format!("Tool `{name}` is denied by the current security policy.");
    match (safe, listed, reason) {
        (true, _, Some(_)) => Some(format!(
            "is a denial, but `{name}` is in the safe class{}, which the gate approves before any policy{}",
            if tags.is_empty() { String::new() } else { format!(" (tagged {})", tags.join(", ")) },
            if listed { " (the policy's list names it)" } else { "" }
        )),
        (false, true, r) if r != Some(policy.as_str()) => Some(format!(
            "should be the policy's denial `{DENIED}{policy}`: `{name}` needs approval and the policy's list names it"
        )),
        (false, false, Some(r)) if r != USER => Some(format!(
            "is denied with {r:?}, but `{name}` is not on the policy's list: only the user denies it, with {USER:?}"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(risk_gate: bool, deny: &[&str], tags: &[(&str, &str)]) -> Setup {
        Setup {
            risk_gate,
            policy_deny: deny.iter().map(|s| s.to_string()).collect(),
            tool_tags: tags.iter().map(|(n, t)| (n.to_string(), vec![t.to_string()])).collect(),
            ..Setup::default()
        }
    }

    #[test]
    fn the_safe_class_comes_before_the_policy_and_the_policy_before_the_user() {
        let s = setup(true, &["Read", "Write"], &[("Read", "risk:safe"), ("Write", "risk:write")]);
        let denied = |n: &str| format!("[Tool denied] Tool `{n}` is denied by the current security policy.");
        assert!(wrong("Read", &denied("Read"), &s).unwrap().contains("safe class (tagged risk:safe)"));
        assert_eq!(wrong("Read", "contents", &s), None);
        assert_eq!(wrong("Write", &denied("Write"), &s), None);
        assert!(wrong("Write", "written", &s).unwrap().contains("should be the policy's denial"));
        assert!(wrong("Write", "[Tool denied] User denied the operation.", &s).is_some());
        assert_eq!(wrong("Grep", "[Tool denied] User denied the operation.", &s), None);
        assert!(wrong("Grep", &denied("Grep"), &s).unwrap().contains("not on the policy's list"));
        assert!(wrong("final_answer", "[Tool denied] x", &s).is_some());
        let auto = setup(false, &["Write"], &[]);
        assert!(wrong("Write", &denied("Write"), &auto).unwrap().contains("auto gate"));
        assert_eq!(wrong("Write", "written", &auto), None);
    }
}

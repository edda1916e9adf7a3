//! `oracle.model-side.nudges`: the budget exhaustion nudge is there exactly when it is due, and
//! prints the budgets the calls the model made have left.
//!
//! The rules (`roku.nudge.after-regular-call`, `roku.nudge.each-regular-call`,
//! `roku.nudge.regular-only`, `core.spawn.no-nudge`) are re-derived from the replies alone. An
//! agent's budgets are reckoned from the start of its run (the root: `root_step_budget` and
//! `recovery_budget` each turn; a child: its grant, `min(what its parent had left after the spawn
//! cost, child_step_cap)`, `core.budget.pre-deduction-both-families`) by the cost of each call the
//! model made (`roku.calls.catalog-cost`, `roku.calls.failed-tool-recovery`,
//! `roku.calls.unknown-tool-cost`, `roku.approval.deny-result`, `core.cost.family-calls-one`,
//! `core.budget.spawn-cost-even-refused`, `core.spawn.no-recovery`,
//! `bub.turn.held-reply-costs-one`), each read from the call and its result as the agent's next
//! request shows them.
//!
//! Where the model side cannot tell one reading from another (a root request after a final reply:
//! a new turn or the held root going on; a failed catalog tool over an API that does not mark
//! errors; a `send` refused before or after it was known to continue a task), the reckoning keeps
//! every candidate, and a finding needs all of them to agree: a missing nudge when every
//! candidate makes it due, a nudge no candidate makes due, or numbers no candidate prints. Where
//! nothing can be reckoned (a continued run; a call answered in a way no rule names), the
//! agent's budgets are unknown until a nudge prints them again. So the oracle never guesses.

use std::collections::{BTreeMap, BTreeSet};

use crate::dialect::Dialect;
use crate::evidence::attribution::{CallOutcome, ModelExchange, ModelSide};
use crate::rules::Rules;
use crate::sut::AgentId;
use crate::sut::llm::{Message, Role, ToolCall};

use super::{DENIED, Out, keeps_reply, result_in};

/// The nudge's text begins so (`roku.nudge.after-regular-call`).
const NUDGE: &str = "System: step budget exhausted (";

/// The budgets (steps, recovery) an agent may have at one point of its run: every reading the
/// model side cannot tell apart.
pub(super) type Budgets = BTreeSet<(u32, u32)>;

/// The nudge for budgets `(steps, recovery)`, byte for byte.
fn nudge_text(steps: u32, recovery: u32) -> String {
    format!(
        "System: step budget exhausted (remaining: {steps}, recovery: {recovery}). Please call final_answer or fail now."
    )
}

/// The budgets a nudge prints: `None` when `text` is no nudge, `Some(None)` when it begins as
/// one but is not the rule's text.
fn printed(text: &str) -> Option<Option<(u32, u32)>> {
    let rest = text.strip_prefix(NUDGE)?;
    let parse = || {
        let rest = rest.strip_prefix("remaining: ")?;
        let (steps, rest) = rest.split_once(", recovery: ")?;
        let (recovery, _) = rest.split_once(')')?;
        let budgets = (steps.parse().ok()?, recovery.parse().ok()?);
        (nudge_text(budgets.0, budgets.1) == text).then_some(budgets)
    };
    Some(parse())
}

/// What a call costs, as its result shows.
enum Cost {
    /// A regular call (a catalog tool, or a name answered as unknown): 1 step, and 1 recovery
    /// when it failed (`None`: the API does not say whether it did); a nudge follows it when it
    /// leaves a budget at 0.
    Regular(Option<bool>),
    /// A call that is not regular (denied, or one of the sub-agent family's) costing these
    /// steps, any of them (the model side cannot always tell which); no nudge follows it.
    Steps(Vec<u32>),
    /// A spawn (or a `send` that continued a task) that made a child: the spawn cost, then the
    /// grant; the child, where it asked the model.
    Grant(Option<AgentId>),
    /// Nothing the rules name: the budgets are unknown from here.
    Unknown,
}

/// Each agent's budgets at each of its requests, as the nudge oracle reckons them (the
/// exchange's number to every reading; `None`: unknown).
pub(super) type Reckoned = BTreeMap<usize, Option<Budgets>>;

/// `oracle.model-side.nudges`; returns the budgets it reckoned (none where the dialect has no
/// nudge).
pub(super) fn nudges(side: &ModelSide, rules: &Rules, dialect: &Dialect, out: &mut Out) -> Reckoned {
    let mut reckoned = Reckoned::new();
    if !dialect.notices.iter().any(|n| NUDGE.starts_with(n.as_str()) || n.starts_with(NUDGE)) {
        return reckoned;
    }
    let fresh: Budgets = [(rules.root_step_budget, rules.recovery_budget)].into();
    // A child's budgets at the start of its first run, as its parent's spawn call granted them.
    let mut starts: BTreeMap<AgentId, Option<Budgets>> = BTreeMap::new();
    let mut findings: Vec<(usize, String, Option<Message>)> = Vec::new();
    // Parents before their children: a grant is reckoned from the parent's run.
    let mut agents: Vec<&AgentId> = out.agents.of.keys().collect();
    agents.sort_by_key(|a| a.depth());
    for alias in agents {
        let list = out.agents.exchanges(alias);
        let root = alias.depth() == 0;
        let mut state = if root {
            Some(fresh.clone())
        } else if super::first_run_continued(out.agents, alias, dialect) {
            None
        } else {
            starts.get(alias).cloned().flatten()
        };
        for (k, &(x, _)) in list.iter().enumerate() {
            let next = list.get(k + 1).map(|&(y, _)| y).filter(|y| !side.restarts.contains(y));
            let reckon = Reckoning { side, rules, dialect, x, next };
            reckoned.insert(x, state.clone());
            state = reckon.reply(state, root, &fresh, &mut starts, &mut findings);
        }
    }
    for (i, message, m) in findings {
        out.at("nudges", "oracle.model-side.nudges", i, message, m.as_ref());
    }
    reckoned
}

/// One reply of an agent, reckoned with the agent's next request (when it made one).
struct Reckoning<'a> {
    side: &'a ModelSide,
    rules: &'a Rules,
    dialect: &'a Dialect,
    /// The exchange whose reply is reckoned.
    x: usize,
    /// The agent's next request in the same run, if any.
    next: Option<usize>,
}

impl Reckoning<'_> {
    fn ex(&self, i: usize) -> &ModelExchange {
        &self.side.exchanges[i]
    }

    /// The budgets at the agent's next request, from `state` at this one; findings for the
    /// nudges the next request holds or lacks.
    fn reply(
        &self,
        state: Option<Budgets>,
        root: bool,
        fresh: &Budgets,
        starts: &mut BTreeMap<AgentId, Option<Budgets>>,
        findings: &mut Vec<(usize, String, Option<Message>)>,
    ) -> Option<Budgets> {
        let e = self.ex(self.x);
        let Some(reply) = &e.reply else {
            // A failed request costs nothing (`roku.loop.llm-error-costs-nothing`); the same
            // messages again are its retry; anything else begins a new run (the root: a new
            // turn).
            let retry = self.next.is_some_and(|y| self.ex(y).messages == e.messages);
            return if retry {
                state
            } else if root {
                state.map(|s| s.union(fresh).copied().collect())
            } else {
                None
            };
        };
        let ends = self.dialect.final_text(reply).is_some()
            || reply.tool_calls.iter().any(|c| self.dialect.root_only.contains(&c.name) && e.tools.contains(&c.name));
        if ends {
            // The loop ended, or the root is held (its answer costs 1 step,
            // `bub.turn.held-reply-costs-one`) until a notification or a new turn.
            return match (root, state) {
                (true, Some(s)) => {
                    Some(s.iter().map(|&(st, rc)| (st.saturating_sub(1), rc)).chain(fresh.iter().copied()).collect())
                }
                _ => None,
            };
        }
        let kept = self.next.filter(|&y| keeps_reply(self.side, self.x, y));
        let mut state = state;
        for (position, call) in reply.tool_calls.iter().enumerate() {
            let result = self.result(kept, call);
            let cost = self.cost(position, call, result.map(|(_, m)| m));
            let regular = matches!(cost, Cost::Regular(_));
            state = self.pay(state, cost, starts);
            if let (Some(y), Some((at, _))) = (kept, result) {
                state = self.judge(y, at, call, regular, state, findings);
            }
        }
        // Without the next request, the calls' results (and the nudges) are not seen.
        kept?;
        // A root whose steps are gone asks no more in this turn (`roku.loop.budget-zero-fails`):
        // its next request, if any, begins a new turn.
        match (root, state) {
            (true, Some(s)) if s.iter().any(|&(st, _)| st == 0) => {
                let going_on = s.iter().filter(|&&(st, _)| st > 0).copied();
                Some(going_on.chain(fresh.iter().copied()).collect())
            }
            (_, state) => state,
        }
    }

    /// The result of `call` in the agent's next request: its index there and the message.
    fn result(&self, kept: Option<usize>, call: &ToolCall) -> Option<(usize, &Message)> {
        result_in(self.side, self.x, kept?, &call.id)
    }

    /// What the call at `position` cost, read from its result (or, for a spawn call, from what
    /// the attribution saw of it).
    fn cost(&self, position: usize, call: &ToolCall, result: Option<&Message>) -> Cost {
        let (rules, dialect) = (self.rules, self.dialect);
        let spawn = self.side.calls.iter().find(|c| c.exchange == self.x && c.position == position);
        let text = result.map(|m| m.content.as_str()).or(spawn.and_then(|c| c.result.as_ref()).map(|r| r.0.as_str()));
        let Some(text) = text else {
            // A spawn call whose result the model side never saw still shows what it made.
            return match spawn.map(|c| &c.outcome) {
                Some(CallOutcome::Child(child)) => Cost::Grant(Some(child.clone())),
                Some(CallOutcome::Made) => Cost::Grant(None),
                _ => Cost::Unknown,
            };
        };
        let offered = self.ex(self.x).tools.contains(&call.name);
        if text == rules.unknown_tool(&call.name) {
            return Cost::Regular(Some(true));
        }
        if text.starts_with(DENIED) {
            return Cost::Steps(vec![1]);
        }
        if dialect.spawn_tool(&call.name).is_some() {
            return match spawn.map(|c| &c.outcome) {
                Some(CallOutcome::Child(child)) => Cost::Grant(Some(child.clone())),
                Some(CallOutcome::Made) => Cost::Grant(None),
                Some(CallOutcome::Refused) => Cost::Steps(vec![rules.spawn_cost]),
                _ => Cost::Unknown,
            };
        }
        if let Some(send) = dialect.send_tool(&call.name) {
            let continued = send.continued_field.as_ref().is_some_and(|field| {
                serde_json::from_str::<serde_json::Value>(text).is_ok_and(|v| v.get(field).is_some())
            });
            // Otherwise a hand-over costs 1 step, and a continuation refused (an empty message,
            // a session in use) the spawn cost (`core.cost.family-calls-one`); which it was
            // does not always show.
            return if continued { Cost::Grant(None) } else { Cost::Steps(vec![1, rules.spawn_cost]) };
        }
        if dialect.is_family(&call.name) {
            return Cost::Steps(vec![1]);
        }
        if !offered {
            return Cost::Unknown;
        }
        Cost::Regular(self.side.errors_shown.then_some(result.is_some_and(|m| m.is_error)))
    }

    /// `state` after a call costing `cost`; a grant's child gets its first run's budgets.
    fn pay(
        &self,
        state: Option<Budgets>,
        cost: Cost,
        starts: &mut BTreeMap<AgentId, Option<Budgets>>,
    ) -> Option<Budgets> {
        let rules = self.rules;
        let state = state?;
        let mut after = Budgets::new();
        match cost {
            Cost::Unknown => return None,
            Cost::Regular(failed) => {
                for &(st, rc) in &state {
                    for f in failed.map_or(vec![false, true], |f| vec![f]) {
                        after.insert((st.saturating_sub(1), rc.saturating_sub(u32::from(f))));
                    }
                }
            }
            Cost::Steps(steps) => {
                for &(st, rc) in &state {
                    for s in &steps {
                        after.insert((st.saturating_sub(*s), rc));
                    }
                }
            }
            Cost::Grant(child) => {
                let mut grants = Budgets::new();
                for &(st, rc) in &state {
                    let left = st.saturating_sub(rules.spawn_cost);
                    let grant = left.min(rules.child_step_cap);
                    grants.insert((grant, rules.recovery_budget));
                    after.insert((left - grant, rc));
                }
                if let Some(child) = child {
                    starts.entry(child).or_insert(Some(grants));
                }
            }
        }
        Some(after)
    }

    /// Judges what stands right after the result at `at` of the agent's next request `y`: a
    /// nudge is there exactly when every reading makes it due, with numbers one of them prints.
    fn judge(
        &self,
        y: usize,
        at: usize,
        call: &ToolCall,
        regular: bool,
        state: Option<Budgets>,
        findings: &mut Vec<(usize, String, Option<Message>)>,
    ) -> Option<Budgets> {
        let after = self.ex(y).messages.get(at + 1).filter(|m| m.role == Role::User);
        let shown = after.and_then(|m| printed(&m.content).map(|p| (m, p)));
        let name = &call.name;
        if !regular {
            if let Some((m, _)) = shown {
                findings.push((
                    y,
                    format!("a nudge follows the result of `{name}`, which is no regular call (a denied call, or one of the sub-agent family's): no nudge follows it"),
                    Some(m.clone()),
                ));
            }
            return state;
        }
        let due = |&(st, rc): &(u32, u32)| st == 0 || rc == 0;
        match (state, shown) {
            (_, Some((m, None))) => {
                findings.push((
                    y,
                    format!("the nudge after the result of `{name}` is not the rule's text `System: step budget exhausted (remaining: R, recovery: C). Please call final_answer or fail now.`"),
                    Some(m.clone()),
                ));
                None
            }
            (None, Some((_, Some(budgets)))) => Some([budgets].into()),
            (None, None) => None,
            (Some(s), Some((m, Some(budgets)))) => {
                if !s.iter().any(due) {
                    findings.push((
                        y,
                        format!(
                            "a nudge follows the result of `{name}`, which leaves {}: neither budget is at 0",
                            readings(&s)
                        ),
                        Some(m.clone()),
                    ));
                } else if !s.contains(&budgets) {
                    findings.push((
                        y,
                        format!(
                            "the nudge after the result of `{name}` prints remaining {}, recovery {}, where the calls the model made leave {}",
                            budgets.0,
                            budgets.1,
                            readings(&s.iter().filter(|b| due(b)).copied().collect())
                        ),
                        Some(m.clone()),
                    ));
                }
                Some([budgets].into())
            }
            (Some(s), None) => {
                if !s.is_empty() && s.iter().all(due) {
                    findings.push((
                        y,
                        format!(
                            "no nudge follows the result of `{name}`, which leaves {}: a regular call that leaves a budget at 0 is followed by the nudge",
                            readings(&s)
                        ),
                        after.cloned(),
                    ));
                }
                Some(s.into_iter().filter(|b| !due(b)).collect())
            }
        }
    }
}

/// Budgets as a finding prints them: `remaining 0, recovery 3` (or several, `or`-joined).
fn readings(s: &Budgets) -> String {
    let all: Vec<String> = s.iter().map(|(st, rc)| format!("remaining {st}, recovery {rc}")).collect();
    all.join(" or ")
}

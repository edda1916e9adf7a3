//! Oracle `precedence` (`oracle.precedence.*`): where several sources or states decide one
//! thing, the one the rules name decides.
//!
//! - A background child's time limit: the call's, else its profile's, else the default; 0 none.
//! - The tools a loop is offered: its catalog tools (the root's whole catalog, a foreground
//!   child's parent's, a background child's as `allowed_tools` or its profile resolve them),
//!   then the pseudo tools its depth allows, in the documented order.
//! - Which calls reach something: a name the loop has starts; any other is answered as unknown.
//! - The held turn: a root that answers without calls (or with `final_answer`) while tasks are
//!   outstanding and a step is left waits, and asks again in the very instant a result or a
//!   message arrives; otherwise, and after `fail` or `ask_user`, its turn ends.
//!
//! What the texts of refusals say is oracle `texts`'s; what calls cost is oracle `costs`'s.

use std::collections::BTreeSet;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use super::index::{Agents, FAMILY, Index, PerAgent, Tasks, first_terminal};
use super::launch::launch;
use super::{Oracle, Report, core_events};
use crate::evidence::{Evidence, Setup};
use crate::sut::AgentId;
use crate::sut::event::{Event, Family};
use crate::trace::What;

/// What the root's last answer must lead to.
enum Next {
    /// Held: `awaiting unfinished=N`.
    Held(usize),
    /// The turn ends.
    Ends,
}

/// A held root, waiting since `line`; `wake` is when something arrived for it.
struct Waiting {
    line: usize,
    wake: Option<Duration>,
}

pub(super) fn precedence(e: &Evidence, index: &Index, r: &mut Report) {
    approval(e, &index.agents, r);
    let rules = e.rules;
    let setup = e.setup;
    let mut tasks = Tasks::new(index);
    // Per agent: its catalog tools, in catalog order (unknown without the setup).
    let agents = &index.agents;
    let mut catalogs: PerAgent<Rc<Catalog>> = PerAgent::new(agents);
    // The whole catalog, built once: every turn's root has it, and so does every background
    // child granted all of it (the usual case), which would otherwise build its own set of
    // every name, so many children with many tools cost their product.
    let whole = setup.map(|setup| Catalog::new(setup.tools.iter().map(String::as_str).collect()));
    let mut offer_reported: PerAgent<()> = PerAgent::new(agents);
    let mut judged: PerAgent<Arc<[crate::sut::llm::ToolSpec]>> = PerAgent::new(agents);
    // Per background child: the time limit its task's runs must have.
    let mut limits: PerAgent<Option<Duration>> = PerAgent::new(agents);
    // The root's `subagent` call running, with its arguments.
    let mut spawning: Option<&serde_json::Value> = None;
    let mut root_budget = rules.root_step_budget;
    let mut next: Option<(Next, usize)> = None;
    let mut waiting: Option<Waiting> = None;
    let mut steered = false;
    // Agents whose current call started (its `tool.start` seen, its end not yet).
    let mut started: PerAgent<()> = PerAgent::new(agents);
    for (i, entry, event) in core_events(e.trace) {
        let agent = &entry.agent;
        let number = agents.at(i);
        tasks.observe(i, entry, event);
        // A steering message, or a child's time limit running out, is recorded (on the root)
        // when it happens, which may fall between an answer and what the loop does about it
        // (the loop settles its instant first): neither is the loop's act.
        let at_root = agents.is_root(i);
        if at_root
            && !matches!(event, Event::Steered { .. } | Event::TimedOut { .. })
            && let Some((want, line)) = next.take()
        {
            match (want, event) {
                (Next::Held(n), Event::AwaitingChildren { unfinished }) if *unfinished == n => {}
                (Next::Held(n), _) => r.add(
                    Oracle::Precedence,
                    i,
                    format!(
                        "main answered with a step left while {n} of its tasks were outstanding (queued, running or unread); its turn must wait for them (`awaiting unfinished={n}`)"
                    ),
                    vec![line],
                ),
                (Next::Ends, Event::AgentEnded { .. }) => {}
                (Next::Ends, _) => r.add(
                    Oracle::Precedence,
                    i,
                    "main's answer ends its turn (nothing outstanding, no step left, or `fail` / `ask_user`), but the turn went on".into(),
                    vec![line],
                ),
            }
        }
        match event {
            Event::TurnStarted { budget, .. } => {
                if let Some(whole) = &whole {
                    catalogs.insert(number, whole.clone());
                }
                root_budget = *budget;
            }
            Event::LlmRequest { budget, .. } => {
                if at_root {
                    root_budget = *budget;
                    steered = false;
                    if let Some(held) = waiting.take() {
                        match held.wake {
                            None => r.add(
                                Oracle::Precedence,
                                i,
                                "main, held for its tasks, asked the model again before any result or message arrived".into(),
                                vec![held.line],
                            ),
                            Some(wake) if wake != entry.at => r.add(
                                Oracle::Precedence,
                                i,
                                format!(
                                    "a result or a message reached the held main at {wake:?}, but it asked the model again only at {:?}",
                                    entry.at
                                ),
                                vec![held.line],
                            ),
                            Some(_) => {}
                        }
                    }
                }
                let (Some(exchange), Some(catalog)) = (index.exchange(i), catalogs.get(number)) else { continue };
                // A loop offers one list for all its requests: a list already judged for this
                // agent (the same shared list) needs no second look.
                let tools = &exchange.request.tools;
                if judged.get(number).is_some_and(|last| Arc::ptr_eq(last, tools)) {
                    continue;
                }
                judged.insert(number, tools.clone());
                let want = offered(catalog, agent, rules);
                if !tools.iter().map(|t| t.name.as_str()).eq(want.iter().copied())
                    && offer_reported.insert(number, ()).is_none()
                {
                    let got: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
                    r.add(
                        Oracle::Precedence,
                        i,
                        format!("{agent} is offered [{}]; the rules give [{}]", got.join(", "), want.join(", ")),
                        vec![],
                    );
                }
            }
            Event::LlmReply { .. } if at_root => {
                let Some(reply) = index.reply(i) else { continue };
                let terminal = first_terminal(&reply.tool_calls, agent).map(|c| c.name.as_str());
                let answers = reply.tool_calls.is_empty() || terminal == Some("final_answer");
                let want = if answers && root_budget > 1 && tasks.outstanding() > 0 {
                    Next::Held(tasks.outstanding())
                } else if answers || terminal.is_some() {
                    Next::Ends
                } else {
                    continue;
                };
                next = Some((want, i));
            }
            Event::AwaitingChildren { .. } => {
                let ready = !tasks.unread.is_empty() || steered || tasks.active() == 0;
                waiting = Some(Waiting { line: i, wake: ready.then_some(entry.at) });
            }
            Event::Steered { .. } if at_root => {
                steered = true;
                if let Some(held) = waiting.as_mut() {
                    held.wake.get_or_insert(entry.at);
                }
            }
            Event::TaskEnded { .. } => {
                if let Some(held) = waiting.as_mut()
                    && (!tasks.unread.is_empty() || tasks.active() == 0)
                {
                    held.wake.get_or_insert(entry.at);
                }
            }
            Event::ToolStarted { tool, args, .. } => {
                started.insert(number, ());
                if at_root && tool == "subagent" {
                    spawning = Some(args);
                }
                if let Some(catalog) = catalogs.get(number)
                    && !reaches(catalog, agent, tool, rules)
                {
                    r.add(
                        Oracle::Precedence,
                        i,
                        format!(
                            "`{tool}` ran for {agent}, which does not have it: it must be answered as an unknown tool"
                        ),
                        vec![],
                    );
                }
            }
            Event::ToolEnded { tool, .. } => {
                if at_root {
                    spawning = None;
                }
                // A call that never started was answered as unknown.
                if started.remove(number).is_none()
                    && let Some(catalog) = catalogs.get(number)
                    && reaches(catalog, agent, tool, rules)
                {
                    r.add(
                        Oracle::Precedence,
                        i,
                        format!("`{tool}` of {agent} was answered as an unknown tool, but {agent} has it"),
                        vec![],
                    );
                }
            }
            Event::Denied { .. } => {
                started.remove(number);
            }
            Event::Spawned { child, family: Family::Foreground, .. } => {
                if let (Some(catalog), Some(child)) = (catalogs.get(number).cloned(), agents.number(child)) {
                    catalogs.insert(child, catalog);
                }
            }
            Event::Spawned { child, family: Family::Background, .. } => {
                let (Some(setup), Some(args), Some(child)) = (setup, spawning, agents.number(child)) else { continue };
                let Ok(launch) = launch(args, setup, rules) else { continue };
                let catalog = match &whole {
                    Some(whole) if whole.order == launch.tools => whole.clone(),
                    _ => Catalog::new(launch.tools),
                };
                catalogs.insert(child, catalog);
                limits.insert(child, launch.timeout);
            }
            Event::TaskStarted { task_id, child, timeout } => {
                let Some(want) = agents.number(child).and_then(|child| limits.get(child)) else { continue };
                if timeout != want {
                    let show = |t: &Option<Duration>| t.map_or("none".to_string(), |t| format!("{t:?}"));
                    r.add(
                        Oracle::Precedence,
                        i,
                        format!(
                            "task {task_id} runs with the time limit {}; the call, its profile and the default give {}",
                            show(timeout),
                            show(want)
                        ),
                        vec![],
                    );
                }
            }
            _ => {}
        }
    }
}

/// An agent's catalog tools: in catalog order, and as a set to look a name up in.
struct Catalog<'a> {
    order: Vec<&'a str>,
    names: BTreeSet<&'a str>,
}

impl<'a> Catalog<'a> {
    fn new(order: Vec<&'a str>) -> Rc<Catalog<'a>> {
        let names = order.iter().copied().collect();
        Rc::new(Catalog { order, names })
    }
}

/// `oracle.precedence.approval`: under Roku's risk gate a call's class decides before the
/// policy, and the policy before the user (`roku.approval.risk-classes`,
/// `roku.approval.policy-deny`, `roku.approval.user-deny`); the auto gate asks nobody and
/// denies nothing (`roku.approval.auto`). A call is judged where it is settled: its `denied`,
/// its `tool.start`, or the `tool.end` of a name nothing answered to; a question the harness
/// recorded for the agent since its last call belongs to it.
fn approval(e: &Evidence, agents: &Agents, r: &mut Report) {
    let Some(setup) = e.setup else { return };
    // Per agent: the question asked about its pending call (tool, answer, line).
    let mut asked: PerAgent<(&str, bool, usize)> = PerAgent::new(agents);
    let mut started: PerAgent<()> = PerAgent::new(agents);
    for (i, entry) in e.trace.entries.iter().enumerate() {
        let agent = &entry.agent;
        let number = agents.at(i);
        let (tool, denied) = match &entry.what {
            What::Asked { tool, approve } => {
                asked.insert(number, (tool, *approve, i));
                continue;
            }
            What::Core(Event::Denied { tool, .. }) => (tool, true),
            What::Core(Event::ToolStarted { tool, .. }) => {
                started.insert(number, ());
                (tool, false)
            }
            What::Core(Event::ToolEnded { tool, .. }) if started.remove(number).is_none() => (tool, false),
            _ => continue,
        };
        let question = asked.remove(number);
        let want = if !setup.risk_gate || safe_to_gate(setup, tool) {
            Gate::Approved
        } else if setup.policy_deny.iter().any(|t| t == tool) {
            Gate::Denied
        } else {
            Gate::Asked
        };
        let problem = match (want, question, denied) {
            (Gate::Approved, None, false) | (Gate::Denied, None, true) => continue,
            (Gate::Asked, Some((asked_tool, approve, _)), _) if asked_tool == tool && denied != approve => continue,
            (Gate::Approved, ..) if !setup.risk_gate => "the auto gate approves every call and asks nobody",
            (Gate::Approved, ..) => {
                "it is safe to the risk gate (a terminal tool, or tagged `risk:safe` and not `risk:write`): it runs without asking"
            }
            (Gate::Denied, ..) => "it needs approval and the policy refuses it: it is denied without asking",
            (Gate::Asked, None, _) => "it needs approval and the policy does not refuse it: the user must be asked",
            (Gate::Asked, Some(_), _) => "the user's answer decides it: denied exactly when refused",
        };
        let what = match (question, denied) {
            (Some((_, approve, _)), true) => format!("was denied after the user answered {approve}"),
            (Some((_, approve, _)), false) => format!("went on after the user answered {approve}"),
            (None, true) => "was denied without asking".to_string(),
            (None, false) => "went on without asking".to_string(),
        };
        r.add(
            Oracle::Precedence,
            i,
            format!("`{tool}` of {agent} {what}; {problem}"),
            question.map(|(_, _, line)| vec![line]).unwrap_or_default(),
        );
    }
}

/// What the approval gate must do with a call.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Gate {
    Approved,
    Denied,
    Asked,
}

/// Whether the risk gate lets a call of `tool` run without asking (`roku.approval.risk-classes`):
/// the terminal tools do; a catalog tool tagged `risk:write` (checked first) does not, one
/// tagged `risk:safe` does; every other name needs approval.
fn safe_to_gate(setup: &Setup, tool: &str) -> bool {
    if matches!(tool, "final_answer" | "ask_user" | "fail") {
        return true;
    }
    let tags = setup.tool_tags.get(tool).map_or(&[][..], Vec::as_slice);
    !tags.iter().any(|t| t == "risk:write") && tags.iter().any(|t| t == "risk:safe")
}

/// The tools a loop at `agent`'s depth with `catalog` is offered, in order
/// (`roku.tools.visible-set`, `roku.tools.pseudo-order`, `bub.tools.family`, `roku.child.tools`,
/// `core.depth.agent-offered-below-limit`, `core.depth.subagent-root-only`).
fn offered<'a>(catalog: &Catalog<'a>, agent: &AgentId, rules: &crate::rules::Rules) -> Vec<&'a str> {
    let depth = agent.depth();
    let mut tools = catalog.order.clone();
    tools.push("final_answer");
    if depth == 0 {
        tools.push("ask_user");
    }
    tools.push("fail");
    if rules.agent_tool && depth < rules.depth_limit {
        tools.push("Agent");
    }
    if rules.subagent_tools && depth == 0 && depth < rules.depth_limit {
        tools.extend(FAMILY);
    }
    tools
}

/// Whether a call of `tool` by `agent` reaches something: a catalog tool it has, `Agent`
/// whenever the family is on (its depth guard answers at the limit), the `subagent` family at
/// the root (`core.family.off-is-unknown`, `core.depth.subagent-child-unknown`,
/// `bub.child.tools-enforced`).
fn reaches(catalog: &Catalog, agent: &AgentId, tool: &str, rules: &crate::rules::Rules) -> bool {
    catalog.names.contains(tool)
        || (tool == "Agent" && rules.agent_tool)
        || (FAMILY.contains(&tool) && rules.subagent_tools && agent.depth() == 0)
}

//! `oracle.model-side.requests`: a runtime that promises a request limit makes no request
//! past it.
//!
//! Agent frameworks bound a run by counting its model requests, not by Roku's step grants:
//! openai-agents' `max_turns` counts one run's model calls (a handoff goes on in the same run,
//! an agent used as a tool runs its own); smolagents' `max_steps` counts one agent's steps;
//! pydantic-ai's `UsageLimits.request_limit` is shared by a parent and every delegate handed its
//! `ctx.usage`. A runtime description states such limits (`limits.request_limits`: a name, a
//! number of requests and a scope), and this oracle counts what the model was asked:
//!
//! - `agent`: one agent's requests in one user turn;
//! - `run`: an agent's and those of the agents it handed the conversation to (and they to
//!   others), in one user turn;
//! - `shared`: every agent's of the turn together.
//!
//! `agents` narrows whose requests count (the root's, or the sub-agents'), `checked_at: root`
//! says the runtime checks the limit only before the root's requests (a finding only there),
//! and `extra` allows requests the runtime makes past the limit by design.
//!
//! A request that repeats its agent's previous request after that one got no reply (a scripted
//! error, a hang: the HTTP client's own retry) asks for the same step again, and is not counted.
//! Turns are told apart where the harness knows them (`ModelSide::turn_starts`: `drive` runs one
//! command per turn); elsewhere the run is one turn. Side requests and requests no agent
//! accounts for count for no scope (the attribution oracle reports the latter).

use serde::{Deserialize, Serialize};

use crate::evidence::attribution::ModelSide;
use crate::sut::AgentId;

use super::Out;

/// A limit on the model requests a runtime makes, as its description states it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestLimit {
    /// The runtime's own name for it (`max_turns`, `request_limit`, `max_steps`).
    pub name: String,
    /// The most requests the scope may make.
    pub requests: u32,
    /// What the requests are counted over.
    pub scope: RequestScope,
    /// Whose requests count (and are checked): every agent's (default), the root's only, or
    /// the sub-agents' only (smolagents' manager and its managed agents have limits of their
    /// own).
    #[serde(default, skip_serializing_if = "is_default")]
    pub agents: Agents,
    /// Which requests the runtime checks the limit before: every counted request (default), or
    /// only the root's (pydantic-ai checks `request_limit` at the start of each step of the run
    /// it was given to; a delegate run handed `ctx.usage` adds to the count but is not stopped
    /// by it).
    #[serde(default, skip_serializing_if = "is_default")]
    pub checked_at: CheckedAt,
    /// Requests the runtime makes past `requests` by design: smolagents asks once more, with no
    /// tools, for a final answer after `max_steps` steps.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub extra: u32,
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Whose requests a [`RequestLimit`] counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Agents {
    /// Every agent's.
    #[default]
    All,
    /// The root's (and, under `run`, the agents it handed off to).
    Root,
    /// Every sub-agent's.
    Children,
}

/// Which requests the runtime checks a [`RequestLimit`] before.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckedAt {
    /// Every counted request.
    #[default]
    Every,
    /// The root's requests only.
    Root,
}

/// What a [`RequestLimit`] counts over, within one user turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestScope {
    /// One agent's requests.
    Agent,
    /// An agent's and those of the agents it handed the conversation to.
    Run,
    /// Every agent's requests together.
    Shared,
}

impl RequestScope {
    fn words(self) -> &'static str {
        match self {
            RequestScope::Agent => "per agent",
            RequestScope::Run => "per run (an agent and the agents it handed off to)",
            RequestScope::Shared => "shared by every agent",
        }
    }
}

/// `oracle.model-side.requests`.
pub(super) fn requests(side: &ModelSide, limits: &[RequestLimit], out: &mut Out) {
    for limit in limits {
        // (turn, scope key) -> requests counted so far; a BTreeMap keeps findings in order.
        let mut counted: std::collections::BTreeMap<(usize, String), u32> = Default::default();
        let mut over = std::collections::BTreeSet::new();
        let allowed = limit.requests.saturating_add(limit.extra);
        for i in 0..side.exchanges.len() {
            let Some(alias) = side.alias(i) else { continue };
            if retry(side, out, i) {
                continue;
            }
            let root = run_of(side, alias).depth() == 0;
            let whose = match limit.agents {
                Agents::All => true,
                Agents::Root => root,
                Agents::Children => !root,
            };
            if !whose {
                continue;
            }
            let turn = side.turn_starts.iter().filter(|&&s| s <= i).count();
            let key = match limit.scope {
                RequestScope::Agent => alias.to_string(),
                RequestScope::Run => run_of(side, alias).to_string(),
                RequestScope::Shared => String::new(),
            };
            let n = counted.entry((turn, key.clone())).or_default();
            *n += 1;
            let checked = limit.checked_at == CheckedAt::Every || root;
            if *n > allowed && checked && over.insert((turn, key.clone())) {
                let whose = match limit.scope {
                    RequestScope::Agent => format!("{alias}'s"),
                    RequestScope::Run if key == alias.to_string() => format!("the run of {alias}"),
                    RequestScope::Run => format!("the run of {key} (handed to {alias})"),
                    RequestScope::Shared => "the agents'".to_string(),
                };
                let turn = if side.turn_starts.is_empty() { String::new() } else { format!(" in turn {}", turn + 1) };
                out.at(
                    "requests",
                    "oracle.model-side.requests",
                    i,
                    format!(
                        "request {n} of {whose}{turn}: `{}` allows {} model requests {}{}",
                        limit.name,
                        allowed,
                        limit.scope.words(),
                        if limit.extra > 0 {
                            format!(" ({} and {} more by design)", limit.requests, limit.extra)
                        } else {
                            String::new()
                        }
                    ),
                    None,
                );
            }
        }
    }
}

/// Whether request `i` repeats its agent's previous request, which got no reply.
fn retry(side: &ModelSide, out: &Out, i: usize) -> bool {
    let Some(alias) = side.alias(i) else { return false };
    let Some(&(before, _)) = out.agents.exchanges(alias).iter().rev().find(|(x, _)| *x < i) else { return false };
    let (b, e) = (&side.exchanges[before], &side.exchanges[i]);
    b.reply.is_none() && b.messages == e.messages && b.system == e.system
}

/// The agent whose run `alias`'s requests count toward: the first of the chain of handoffs
/// that led to it.
fn run_of<'a>(side: &'a ModelSide, alias: &'a AgentId) -> &'a AgentId {
    let mut at = alias;
    // A chain is finite (each handoff makes a new agent), but a bad record must not loop.
    for _ in 0..side.handoffs.len() {
        match side.handoffs.iter().find(|h| h.to.as_ref() == Some(at)) {
            Some(h) => at = &h.from,
            None => break,
        }
    }
    at
}

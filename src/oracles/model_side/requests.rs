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
        for i in 0..side.exchanges.len() {
            let Some(alias) = side.alias(i) else { continue };
            if retry(side, out, i) {
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
            if *n > limit.requests && over.insert((turn, key.clone())) {
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
                        "request {n} of {whose}{turn}: `{}` allows {} model requests {}",
                        limit.name,
                        limit.requests,
                        limit.scope.words()
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

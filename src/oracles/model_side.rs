//! The model-side oracles: rules judged from a run's exchanges alone, as a model endpoint saw
//! them ([`ModelSide`]: each request's messages, tools and model, when it arrived, the reply
//! given and when), each exchange put down to an agent by the attribution. No event of the
//! core is read, nor any alias or goal it reported: a core that reports nothing
//! (`sut::Reports::NoEvents`) is judged by these alone, and `rehearsal run --judge model-side`
//! judges the built-in core this way to prove them where the truth is known.
//!
//! Each oracle is one clause `oracle.model-side.*` of `docs/rules/core.md`; a finding cites the
//! exchange (agent, the agent's request number, the run's exchange number, the message that
//! breaks the rule), never a trace line. Which rules cannot be judged from this side, and why,
//! is written in `docs/evidence.md` ("judged from the model's side").
//!
//! What this module deliberately does not do: read the trace, the setup's profiles, or any
//! budget the core reports; a rule that needs them is left to the event oracles.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use crate::dialect::{Dialect, History, SessionKind};
use crate::evidence::attribution::{Attribution, Basis, CallOutcome, ModelExchange, ModelSide, SpawnCall, extension};
use crate::evidence::{Setup, kept_as};
use crate::rules::Rules;
use crate::sut::AgentId;
use crate::sut::llm::{Message, Role};

mod approval;
mod child_tools;
mod nudges;
mod requests;
mod spawning;
mod steering;
mod task_ids;
mod waiting;

use super::expected_result;
use super::index::seconds_text;

/// How a run is judged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Judge {
    /// From the events the core reports (every oracle of `docs/rules/core.md` §6).
    #[default]
    Events,
    /// From the model's side alone: the core's events and aliases are hidden from the judge,
    /// and the mock's call ids carry no alias.
    ModelSide,
}

/// The model-side oracles, by name, in the order they run: what a verdict judged from the
/// model's side says applied.
pub const ORACLES: [&str; 23] = [
    "attribution",
    "depth",
    "truncation",
    "fork-snapshot",
    "isolation",
    "append-only",
    "concurrency",
    "budget",
    "timeouts",
    "delivery",
    "context",
    "call-results",
    "terminal",
    "sessions",
    "child-tools",
    "nudges",
    "approval",
    "steering",
    "spawning",
    "waiting",
    "quit",
    "task-ids",
    "requests",
];

/// The clause of each oracle of [`ORACLES`], in the same order.
pub const CLAUSES: [&str; 23] = [
    "oracle.model-side.attribution",
    "oracle.model-side.depth",
    "oracle.model-side.truncation",
    "oracle.model-side.fork-snapshot",
    "oracle.model-side.isolation",
    "oracle.model-side.append-only",
    "oracle.model-side.concurrency",
    "oracle.model-side.budget",
    "oracle.model-side.timeouts",
    "oracle.model-side.delivery",
    "oracle.model-side.context",
    "oracle.model-side.call-results",
    "oracle.model-side.terminal",
    "oracle.model-side.sessions",
    "oracle.model-side.child-tools",
    "oracle.model-side.nudges",
    "oracle.model-side.approval",
    "oracle.model-side.steering",
    "oracle.model-side.spawning",
    "oracle.model-side.waiting",
    "oracle.model-side.quit",
    "oracle.model-side.task-ids",
    "oracle.model-side.requests",
];

/// One broken rule, as the model saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The oracle (one of [`ORACLES`]).
    pub oracle: &'static str,
    /// Its clause in `docs/rules/core.md`.
    pub clause: &'static str,
    /// The agent, or `?` for a request put down to none.
    pub agent: String,
    /// The agent's request number (from 1); 0 when none applies.
    pub request: usize,
    /// The run's exchange number (arrival order, from 0).
    pub exchange: usize,
    /// What is wrong.
    pub message: String,
    /// The offending message, shortened, when one stands out.
    pub offending: Option<String>,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "model-side {} ({}): {}", self.oracle, self.clause, self.agent)?;
        if self.request > 0 {
            write!(f, " request #{}", self.request)?;
        }
        write!(f, " (exchange {}): {}", self.exchange, self.message)?;
        if let Some(m) = &self.offending {
            write!(f, "; the message: {m}")?;
        }
        Ok(())
    }
}

/// A message as a finding shows it: role and text, cut to 160 characters.
fn show(m: &Message) -> String {
    let text: String = m.content.chars().take(160).collect();
    let cut = if m.content.chars().count() > 160 { "…" } else { "" };
    let calls: Vec<&str> = m.tool_calls.iter().map(|c| c.name.as_str()).collect();
    let calls = if calls.is_empty() { String::new() } else { format!(" calls [{}]", calls.join(", ")) };
    format!("{:?} {:?}{cut}{calls}", m.role, text)
}

/// The run's exchanges grouped per agent, in arrival order: (exchange number, request number).
struct Agents<'a> {
    side: &'a ModelSide,
    of: BTreeMap<AgentId, Vec<(usize, usize)>>,
}

impl<'a> Agents<'a> {
    fn new(side: &'a ModelSide) -> Agents<'a> {
        let mut of: BTreeMap<AgentId, Vec<(usize, usize)>> = BTreeMap::new();
        for (i, a) in side.attributions.iter().enumerate() {
            if let Attribution::Agent(a) = a {
                of.entry(a.alias.clone()).or_default().push((i, a.number));
            }
        }
        Agents { side, of }
    }

    fn exchanges(&self, alias: &AgentId) -> &[(usize, usize)] {
        self.of.get(alias).map_or(&[], Vec::as_slice)
    }

    fn ex(&self, i: usize) -> &'a ModelExchange {
        &self.side.exchanges[i]
    }
}

/// A denied call's result begins so (`roku.approval.deny-result`).
const DENIED: &str = "[Tool denied] ";

/// Whether the rules are the built-in core's (its dialects), whose exact texts, lists and
/// orders the checks that read them may hold a runtime to.
fn builtin_rules(dialect: &Dialect) -> bool {
    matches!(dialect.name.as_str(), "roku" | "bub" | "rehearsal")
}

/// How the record's runtime writes history (its dialect's; kept as given without one).
fn history(side: &ModelSide) -> &History {
    static KEPT: History = History::Kept;
    side.dialect.as_deref().map_or(&KEPT, |d| &d.history)
}

/// Whether request `y` goes on from request `x` and the reply `x` was given (kept right where
/// `x`'s messages end, as the runtime keeps a reply).
fn keeps_reply(side: &ModelSide, x: usize, y: usize) -> bool {
    let e = &side.exchanges[x];
    e.reply.as_ref().is_some_and(|reply| {
        side.exchanges[y].messages.get(e.messages.len()).is_some_and(|m| kept_as(history(side), m, reply))
    })
}

/// The result of the call with id `id` in request `y`, past request `x`'s messages and its
/// kept reply: its index in `y` and the message.
fn result_in<'a>(side: &'a ModelSide, x: usize, y: usize, id: &str) -> Option<(usize, &'a Message)> {
    let from = side.exchanges[x].messages.len() + 1;
    side.exchanges[y]
        .messages
        .iter()
        .enumerate()
        .skip(from)
        .find(|(_, m)| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(id))
}

/// The request after exchange `x` of the same agent, where a finding about `x`'s reply is
/// cited (it holds the reply's results); `x` itself when there is none.
fn cite_next(side: &ModelSide, agents: &Agents, x: usize) -> usize {
    side.alias(x).and_then(|a| agents.exchanges(a).iter().map(|p| p.0).find(|&i| i > x)).unwrap_or(x)
}

struct Out<'a> {
    findings: Vec<Finding>,
    agents: &'a Agents<'a>,
}

impl Out<'_> {
    fn at(
        &mut self,
        oracle: &'static str,
        clause: &'static str,
        exchange: usize,
        message: String,
        offending: Option<&Message>,
    ) {
        let (agent, request) = match &self.agents.side.attributions[exchange] {
            Attribution::Agent(a) => (a.alias.to_string(), a.number),
            _ => ("?".to_string(), 0),
        };
        self.findings.push(Finding {
            oracle,
            clause,
            agent,
            request,
            exchange,
            message,
            offending: offending.map(show),
        });
    }
}

/// Every model-side oracle on `side`, under `rules`, reading spawn calls as `dialect` spells
/// them. `setup` is how the harness set the run up (the gate, the steering it sent), where it
/// set it up: the oracles that read it judge nothing without it.
pub fn check(side: &ModelSide, rules: &Rules, dialect: &Dialect, setup: Option<&Setup>) -> Vec<Finding> {
    let agents = Agents::new(side);
    let mut out = Out { findings: Vec::new(), agents: &agents };
    attribution(side, &mut out);
    depth(side, rules, dialect, &mut out);
    truncation(side, rules, dialect, &mut out);
    fork_snapshot(side, &mut out);
    isolation(side, dialect, &mut out);
    append_only(side, dialect, &mut out);
    concurrency(side, rules, dialect, &mut out);
    budget(side, rules, dialect, &mut out);
    timeouts(side, rules, dialect, &mut out);
    delivery(side, dialect, &mut out);
    context(side, dialect, &mut out);
    profiles_listed(side, rules, setup, &mut out);
    call_results(side, dialect, &mut out);
    terminal(side, dialect, &mut out);
    sessions(side, dialect, &mut out);
    child_tools::child_tools(side, rules, dialect, &mut out);
    let budgets = nudges::nudges(side, rules, dialect, &mut out);
    approval::approval(side, setup, &mut out);
    steering::steering(side, dialect, setup, &mut out);
    spawning::spawning(side, rules, dialect, &mut out);
    waiting::waiting(side, dialect, &mut out);
    waiting::held(side, dialect, &budgets, &mut out);
    waiting::quit(side, dialect, setup, &mut out);
    task_ids::task_ids(side, dialect, setup, &mut out);
    out.findings
}

pub use requests::{Agents as LimitedAgents, CheckedAt, RequestLimit, RequestScope};

/// `oracle.model-side.requests` on `side`: the request limits a runtime's description states
/// (the built-in core has none, so [`check`] never runs it).
pub fn check_requests(side: &ModelSide, limits: &[RequestLimit]) -> Vec<Finding> {
    let agents = Agents::new(side);
    let mut out = Out { findings: Vec::new(), agents: &agents };
    requests::requests(side, limits, &mut out);
    out.findings
}

/// `oracle.model-side.attribution`: every request is some agent's (or a declared side
/// request), by evidence: a request no agent accounts for, one that fitted two candidates
/// alike, and one put down to an agent only by a shared start (rule 3 of the attribution, a
/// guess) are each a finding, never silent.
fn attribution(side: &ModelSide, out: &mut Out) {
    for (i, a) in side.attributions.iter().enumerate() {
        let last = side.exchanges[i].messages.last().cloned();
        let message = match a {
            Attribution::Unattributed(why) => format!("unattributed request: {why}"),
            Attribution::Agent(who) if who.ambiguous.is_some() => {
                format!("ambiguous request: {}", who.ambiguous.as_deref().unwrap_or_default())
            }
            Attribution::Agent(who) if who.basis == Basis::SharedStart => {
                let shared =
                    out.agents.exchanges(&who.alias).iter().take_while(|(x, _)| *x < i).last().map_or(0, |(x, _)| {
                        crate::evidence::attribution::common_start(
                            &side.exchanges[*x].messages,
                            &side.exchanges[i].messages,
                        )
                    });
                format!(
                    "put down to {} only by the start it shares with the agent's last request ({shared} messages): \
                     no waiting call, handoff or agent's last request and reply accounts for it",
                    who.alias
                )
            }
            _ => continue,
        };
        out.at("attribution", "oracle.model-side.attribution", i, message, last.as_ref());
    }
}

/// The child a call made, if it asked the model.
fn child_of(c: &SpawnCall) -> Option<&AgentId> {
    match &c.outcome {
        CallOutcome::Child(a) => Some(a),
        _ => None,
    }
}

/// `oracle.model-side.depth`.
fn depth(side: &ModelSide, rules: &Rules, dialect: &Dialect, out: &mut Out) {
    let limit = rules.depth_limit;
    for (alias, list) in &out.agents.of.clone() {
        let d = alias.depth();
        for &(i, _) in list {
            let e = &side.exchanges[i];
            if d > limit {
                out.at(
                    "depth",
                    "oracle.model-side.depth",
                    i,
                    format!("an agent at depth {d} asks the model; the depth limit is {limit}"),
                    e.messages.first(),
                );
                break;
            }
            if d == limit
                && let Some(t) = e.tools.iter().find(|t| dialect.spawn_tool(t).is_some())
            {
                out.at(
                    "depth",
                    "oracle.model-side.depth",
                    i,
                    format!("an agent at the depth limit ({limit}) is offered the spawn tool `{t}`"),
                    None,
                );
            }
        }
    }
    // A request no agent accounts for that begins with the prompt of a call made at the limit
    // is that call's child asking the model, one level too deep.
    for (i, a) in side.attributions.iter().enumerate() {
        let Attribution::Unattributed(_) = a else { continue };
        let first = side.exchanges[i].messages.first().filter(|m| m.role == Role::User);
        let Some(c) = side.calls.iter().find(|c| {
            c.exchange < i && c.parent.depth() >= limit && first.is_some_and(|m| m.content.trim() == c.prompt)
        }) else {
            continue;
        };
        out.at(
            "depth",
            "oracle.model-side.depth",
            i,
            format!(
                "the request begins with the prompt of the `{}` call {} made at the depth limit {limit}: a child at depth {} asks the model",
                c.tool,
                c.parent,
                c.parent.depth() + 1
            ),
            first,
        );
    }
    for c in &side.calls {
        if c.parent.depth() < limit {
            continue;
        }
        let made = matches!(c.outcome, CallOutcome::Child(_) | CallOutcome::Made);
        // A call of a tool the request did not offer is an unknown tool's call, answered as
        // the runtime words those (`core.knob.unknown-tool-message`); only an offered spawn
        // tool owes the refusal.
        let offered = side.exchanges[c.exchange].tools.contains(&c.tool);
        let answered = offered && c.result.as_ref().is_some_and(|(text, _)| !dialect.is_refusal(text));
        // An unoffered tool's call is answered as an unknown tool's, which never names a task:
        // a result that does started a child (`core.depth.subagent-root-only`).
        let started = !offered && c.result.as_ref().is_some_and(|(text, _)| starts_task(dialect, c, text));
        if made || answered || started {
            let what = match (&c.outcome, &c.result) {
                (CallOutcome::Child(a), _) => format!("made the child {a}"),
                (_, Some((text, _))) => format!("was answered {:?}, not a refusal", text),
                _ => "made a child".to_string(),
            };
            let reply = side.exchanges[c.exchange].reply.clone();
            out.at(
                "depth",
                "oracle.model-side.depth",
                c.exchange,
                format!(
                    "its `{}` call (call {} of the reply), made at the depth limit {limit}, {what}",
                    c.tool,
                    c.position + 1
                ),
                reply.as_ref(),
            );
        }
    }
}

/// Whether `text`, the result of spawn call `c`, names the task it started (the dialect's task
/// id field of a JSON result, or the word after its `task_id_after`).
fn starts_task(dialect: &Dialect, c: &SpawnCall, text: &str) -> bool {
    dialect.spawn_tool(&c.tool).and_then(|t| t.task_id_in(text)).is_some()
}

/// A child's runs: its exchanges split after each reply that ends its loop, and before each
/// request that a send continuing its finished task began (a run the runtime ended without a
/// final reply, as when its grant ran out, shows no reply that ends it): one whose result
/// says so, or one the attribution put down to a send's continuation (fuzz seed 11, case
/// 16814).
fn runs(agents: &Agents, alias: &AgentId, dialect: &Dialect) -> Vec<Vec<(usize, usize)>> {
    let continued = continuations(agents.side, alias, dialect);
    let mut runs = vec![Vec::new()];
    let mut previous: Option<usize> = None;
    for &(i, n) in agents.exchanges(alias) {
        let e = agents.ex(i);
        let from = previous.and_then(|p| extension(history(agents.side), agents.ex(p), &e.messages)).unwrap_or(0);
        // A run asks again only once answered: after a request that got no reply (cut by its
        // limit, cancelled, a model error), a request that is not its retry (the same
        // messages) begins a new run, whether or not the send that began it showed its result
        // (fuzz seed 9, case 8734: the parent never asked again after the sends).
        let unanswered = previous.is_some_and(|p| agents.ex(p).reply.is_none() && agents.ex(p).messages != e.messages);
        let begins = unanswered
            || agents.side.restarts.contains(&i)
            || previous.is_some()
                && (from..e.messages.len())
                    .filter_map(|k| e.messages.get(k))
                    .any(|m| m.role == Role::User && continued.iter().any(|c| c == m.content.trim()));
        if begins && runs.last().is_some_and(|r| !r.is_empty()) {
            runs.push(Vec::new());
        }
        runs.last_mut().expect("one run at least").push((i, n));
        if e.reply.as_ref().is_some_and(|r| dialect.final_text(r).is_some()) {
            runs.push(Vec::new());
        }
        previous = Some(i);
    }
    runs.retain(|r| !r.is_empty());
    runs
}

/// Whether `alias`'s first request may already be a continued run: it holds a message a send
/// gave its task (the task's own first run may never have asked: granted nothing, it failed at
/// once, and a send continued it; fuzz `--judge model-side --seed 5`, case 9907). Where the
/// send's result was never seen, a message handed to the task while it was queued reads the
/// same (seed 2, case 2579). Its spawn call's grant then may say nothing of the run the model
/// sees, which a fresh grant began.
fn first_run_continued(agents: &Agents, alias: &AgentId, dialect: &Dialect) -> bool {
    let Some(&(first, _)) = agents.exchanges(alias).first() else { return false };
    let side = agents.side;
    let mut sent = continuations(side, alias, dialect);
    for c in side.calls.iter().filter(|c| child_of(c) == Some(alias)) {
        sent.extend(c.task_id.iter().flat_map(|t| sent_to(side, dialect, t)).map(|m| m.trim().to_string()));
    }
    !sent.is_empty()
        && agents.ex(first).messages.iter().any(|m| m.role == Role::User && sent.iter().any(|c| c == m.content.trim()))
}

/// The messages (trimmed) of the send calls that continued `alias`'s finished task in a new
/// run, as their results (in the caller's next request) show by the dialect's
/// `continued_field`.
fn continuations(side: &ModelSide, alias: &AgentId, dialect: &Dialect) -> Vec<String> {
    let tasks: Vec<&str> = side
        .calls
        .iter()
        .filter(|c| matches!(&c.outcome, CallOutcome::Child(a) if a == alias))
        .filter_map(|c| c.task_id.as_deref())
        .collect();
    let mut out = Vec::new();
    if tasks.is_empty() {
        return out;
    }
    for (i, e) in side.exchanges.iter().enumerate() {
        let Some(reply) = &e.reply else { continue };
        for (position, call) in reply.tool_calls.iter().enumerate() {
            let Some(send) = dialect.send_tool(&call.name) else { continue };
            let Some(field) = &send.continued_field else { continue };
            let arg = |name: &str| call.args.get(name).and_then(|v| v.as_str()).unwrap_or_default().trim();
            if !tasks.contains(&arg(&send.task_id)) {
                continue;
            }
            // Its result, in the caller's next request (the kept reply's call id is the runtime's).
            let caller = side.alias(i);
            let result =
                side.exchanges.iter().enumerate().skip(i + 1).filter(|(j, _)| side.alias(*j) == caller).find_map(
                    |(_, later)| {
                        let n = extension(history(side), e, &later.messages)?;
                        let id = later.messages.get(n - 1)?.tool_calls.get(position)?.id.clone();
                        later.messages.iter().find(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(&*id))
                    },
                );
            let continued = result
                .and_then(|m| serde_json::from_str::<serde_json::Value>(&m.content).ok())
                .is_some_and(|v| v.get(field).is_some());
            if continued {
                out.push(arg(&send.message).to_string());
            }
        }
    }
    out
}

/// What the parent received for task `task`: each delivered (status, body), from its last
/// request (a conversation only grows, so the last holds every delivery), with the exchange.
fn deliveries(
    side: &ModelSide,
    agents: &Agents,
    parent: &AgentId,
    task: &str,
    dialect: &Dialect,
) -> Option<(usize, Vec<(String, String)>)> {
    let &(last, _) = agents.exchanges(parent).last()?;
    let mut got = Vec::new();
    for m in side.exchanges[last].messages.iter() {
        if m.role == Role::User {
            for n in dialect.notifications(&m.content).into_iter().filter(|n| n.task_id == task) {
                got.push((n.status.to_string(), n.body.to_string()));
            }
        }
        if m.role == Role::Tool && m.content.starts_with('[') {
            for entry in wait_entries(&m.content) {
                if entry.0 == task
                    && let Some(result) = entry.2
                {
                    got.push((entry.1, result));
                }
            }
        }
    }
    Some((last, got))
}

/// The entries of a wait tool's answer: (task id, status, result if it carries one).
fn wait_entries(text: &str) -> Vec<(String, String, Option<String>)> {
    let Ok(serde_json::Value::Array(items)) = serde_json::from_str::<serde_json::Value>(text) else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|e| {
            let id = e.get("task_id")?.as_str()?.to_string();
            let status = e.get("status").and_then(|s| s.as_str()).unwrap_or_default().to_string();
            let result = e.get("result").and_then(|r| r.as_str()).map(String::from);
            Some((id, status, result))
        })
        .collect()
}

/// Whether the parent sent messages to `task` (a continuation or a hand-over).
fn sent_to(side: &ModelSide, dialect: &Dialect, task: &str) -> Vec<String> {
    let mut sent = Vec::new();
    for e in &side.exchanges {
        for c in e.reply.iter().flat_map(|r| &r.tool_calls) {
            if let Some(t) = dialect.send_tool(&c.name)
                && c.args.get(&t.task_id).and_then(|v| v.as_str()).map(str::trim) == Some(task)
            {
                sent.push(c.args.get(&t.message).and_then(|v| v.as_str()).unwrap_or_default().to_string());
            }
        }
    }
    sent
}

/// `oracle.model-side.truncation`.
fn truncation(side: &ModelSide, rules: &Rules, dialect: &Dialect, out: &mut Out) {
    for c in &side.calls {
        let Some(child) = child_of(c) else { continue };
        let Some(&(last, _)) = out.agents.exchanges(child).last() else { continue };
        let Some(final_text) = side.exchanges[last].reply.as_ref().and_then(|r| dialect.final_text(r)) else {
            continue;
        };
        // An empty final reply hands back the run's latest non-empty text where the runtime
        // says so (`empty_falls_back`): the last request holds every earlier message of the run.
        let falls_back = final_text.is_empty() && dialect.spawn_tool(&c.tool).is_some_and(|t| t.empty_falls_back);
        let final_text = if falls_back {
            side.exchanges[last]
                .messages
                .iter()
                .rev()
                .filter(|m| matches!(m.role, Role::Assistant | Role::Tool))
                .map(|m| m.content.to_string())
                .find(|text| !text.is_empty())
                .unwrap_or_default()
        } else {
            final_text
        };
        let want = expected_result(&final_text, rules.result_limit_chars);
        // A result that is the runtime's timeout text stands for no reply of the child (its
        // final reply, if any, came too late): oracle.model-side.timeouts judges it.
        let timed_out = timeout_text(c, rules, dialect).filter(|t| *t != final_text);
        let limit = rules.result_limit_chars.map_or("no limit".to_string(), |n| format!("limit {n}"));
        if c.sync {
            let Some((got, _)) = &c.result else { continue };
            // A runtime that frames the reply (`hand_back`) is judged on what the frame holds.
            let report = dialect.spawn_tool(&c.tool).and_then(|t| t.report_in(got));
            if report.as_ref() != Some(&want) && timed_out.as_ref() != Some(got) {
                // The parent's first request that holds the result.
                let at = out
                    .agents
                    .exchanges(&c.parent)
                    .iter()
                    .find(|(i, _)| {
                        c.runtime_id.is_some()
                            && side.exchanges[*i]
                                .messages
                                .iter()
                                .any(|m| m.role == Role::Tool && m.tool_call_id == c.runtime_id)
                    })
                    .map_or(c.exchange, |x| x.0);
                let shown = Message::tool(c.runtime_id.as_deref().unwrap_or(""), got.clone(), false);
                out.at(
                    "truncation",
                    "oracle.model-side.truncation",
                    at,
                    format!(
                        "the result of the `{}` call that made {child} is not {child}'s final reply cut as the rules say ({} characters, {limit}): expected {:?}",
                        c.tool,
                        final_text.chars().count(),
                        short(&want)
                    ),
                    Some(&shown),
                );
            }
            continue;
        }
        let Some(task) = &c.task_id else { continue };
        if !sent_to(side, dialect, task).is_empty() {
            continue;
        }
        let Some((at, got)) = deliveries(side, out.agents, &c.parent, task, dialect) else { continue };
        for (status, body) in got {
            if (status == "completed" || status == "failed") && body != want && timed_out.as_ref() != Some(&body) {
                out.at(
                    "truncation",
                    "oracle.model-side.truncation",
                    at,
                    format!(
                        "the result of task {task} ({child}) is {:?}, not {child}'s final reply cut as the rules say: expected {:?}",
                        short(&body),
                        short(&want)
                    ),
                    None,
                );
            }
        }
    }
}

/// The timeout text the parent of `c` would read if its child timed out, when the model side
/// can know the child's limit.
fn timeout_text(c: &SpawnCall, rules: &Rules, dialect: &Dialect) -> Option<String> {
    let template = dialect.spawn_tool(&c.tool)?.timeout_text.as_ref()?;
    let limit = limit_of(c, rules).ok()??;
    Some(template.replace("{seconds}", &seconds_text(limit)))
}

fn short(text: &str) -> String {
    let cut: String = text.chars().take(120).collect();
    if text.chars().count() > 120 { format!("{cut}…") } else { cut }
}

/// `oracle.model-side.fork-snapshot`.
fn fork_snapshot(side: &ModelSide, out: &mut Out) {
    for c in &side.calls {
        if c.session != SessionKind::Fork {
            continue;
        }
        let Some(child) = child_of(c) else { continue };
        let Some(&(first, _)) = out.agents.exchanges(child).first() else { continue };
        let parent = &side.exchanges[c.exchange];
        let got = &side.exchanges[first].messages;
        let ok = extension(history(side), parent, got).is_some_and(|n| {
            got.get(n).is_some_and(|m| c.opens(m)) && got.iter().skip(n + 1).all(|m| m.role == Role::User)
        });
        if !ok {
            let at = (0..got.len()).find(|&k| {
                let want = if k < parent.messages.len() {
                    parent.messages.get(k).cloned()
                } else if k == parent.messages.len() {
                    parent.reply.clone()
                } else {
                    None
                };
                match want {
                    Some(w) if k == parent.messages.len() => !got.get(k).is_some_and(|g| kept_as(history(side), g, &w)),
                    Some(w) => got.get(k) != Some(&w),
                    None => k == parent.messages.len() + 1 && !got.get(k).is_some_and(|g| c.opens(g)),
                }
            });
            // The snapshot in numbers: what the child got before its prompt, against the
            // parent's request and reply at the call.
            let before = got.iter().position(|m| c.opens(m) || c.held_in(m)).unwrap_or(got.len());
            let snapshot = parent.messages.len() + 1;
            let numbers = if before == snapshot {
                String::new()
            } else {
                format!(
                    "; {before} messages before its prompt where the snapshot at the call holds {snapshot}{}",
                    if before < snapshot {
                        format!(" (it lacks {} the parent held)", snapshot - before)
                    } else {
                        format!(" ({} the parent gained after the call, or another's)", before - snapshot)
                    }
                )
            };
            out.at(
                "fork-snapshot",
                "oracle.model-side.fork-snapshot",
                first,
                format!(
                    "the forked child's first request is not its parent's request #{} as of the call, the reply holding it and the prompt{}",
                    out.agents.exchanges(&c.parent).iter().find(|(i, _)| *i == c.exchange).map_or(0, |x| x.1),
                    at.map_or(String::new(), |k| format!(" (it differs at message {k})")),
                )+ &numbers,
                at.and_then(|k| got.get(k)),
            );
        }
    }
}

/// A reply's identity as a core keeps it: text, call names and arguments (never ids).
fn reply_key(m: &Message) -> (String, Vec<(String, String)>) {
    (m.content.clone(), m.tool_calls.iter().map(|c| (c.name.clone(), c.args.to_string())).collect())
}

/// The replies given to `alias`'s requests, in order.
fn replies<'a>(agents: &Agents<'a>, alias: &AgentId) -> Vec<&'a Message> {
    agents.exchanges(alias).iter().filter_map(|(i, _)| agents.ex(*i).reply.as_ref()).collect()
}

/// `oracle.model-side.isolation`.
fn isolation(side: &ModelSide, dialect: &Dialect, out: &mut Out) {
    let replies_of = |alias: &AgentId| -> BTreeSet<(String, Vec<(String, String)>)> {
        out.agents
            .exchanges(alias)
            .iter()
            .filter_map(|(i, _)| side.exchanges[*i].reply.as_ref())
            .map(reply_key)
            .collect()
    };
    let mut findings = Vec::new();
    for c in &side.calls {
        let Some(child) = child_of(c) else { continue };
        if matches!(c.session, SessionKind::Named(_)) {
            continue;
        }
        let list = out.agents.exchanges(child);
        let Some(&(first, _)) = list.first() else { continue };
        let own = replies_of(child);
        let sent: Vec<String> = c.task_id.as_deref().map(|t| sent_to(side, dialect, t)).unwrap_or_default();
        // A child taken by its prompt although its start departs from its session's promise:
        // the fork snapshot's own oracle judges a forked child; a fresh or named one breaks
        // isolation here.
        let departed = match &side.attributions[first] {
            Attribution::Agent(who) => match &who.basis {
                Basis::Departed(how) if c.session != SessionKind::Fork => Some(how.clone()),
                _ => None,
            },
            _ => None,
        };
        let departed = departed.map(|how| {
            let kind = match &c.session {
                SessionKind::Named(name) => format!("a run on session {name:?}"),
                _ => "a fresh child".to_string(),
            };
            findings.push((
                first,
                format!("{child}'s first request does not start as {kind} must: {how}"),
                side.exchanges[first].messages.first().cloned(),
            ));
        });
        let departed = departed.is_some();
        // Where the child's own conversation begins: past its prompt (and its snapshot).
        let start = side.exchanges[first].messages.iter().position(|m| c.opens(m) || c.held_in(m));
        let Some(start) = start else { continue };
        if c.session == SessionKind::Fresh && start != 0 && !departed {
            findings.push((
                first,
                "a fresh child's first request holds messages before its prompt".to_string(),
                side.exchanges[first].messages.first().cloned(),
            ));
        }
        // Re-rendered history (smolagents): a reply is kept as text, and the results of its calls
        // (or its error) are the runtime's own user message right after it.
        let rendered = !history(side).is_kept();
        let own_replies = replies(out.agents, child);
        'requests: for &(i, _) in list {
            let messages: Vec<&Message> = side.exchanges[i].messages.iter().collect();
            let mut ids: BTreeSet<&str> = BTreeSet::new();
            for (k, m) in messages.iter().enumerate().skip(start + 1) {
                let fine = match m.role {
                    Role::Assistant if rendered => own_replies.iter().any(|r| kept_as(history(side), m, r)),
                    Role::Assistant => {
                        ids.extend(m.tool_calls.iter().map(|c| c.id.as_str()));
                        own.contains(&reply_key(m))
                    }
                    Role::Tool => m.tool_call_id.as_deref().is_some_and(|id| ids.contains(id)),
                    Role::User => {
                        dialect.notices.iter().any(|n| m.content.starts_with(n.as_str()))
                            || sent.contains(&m.content)
                            || rendered && messages[k - 1].role == Role::Assistant
                    }
                };
                if !fine {
                    findings.push((
                        i,
                        format!(
                            "{child}'s request holds a message its own loop did not make nor was sent (a {:?} message)",
                            m.role
                        ),
                        Some((*m).clone()),
                    ));
                    break 'requests;
                }
            }
        }
        // The parent never sees the child's own replies.
        let parent_own = replies_of(&c.parent);
        let parent_replies = replies(out.agents, &c.parent);
        let holds = |m: &Message, of: &[&Message]| of.iter().any(|r| kept_as(history(side), m, r));
        let childs = |m: &Message| {
            if rendered {
                !holds(m, &parent_replies) && holds(m, &own_replies)
            } else {
                !parent_own.contains(&reply_key(m)) && own.contains(&reply_key(m))
            }
        };
        for &(i, _) in out.agents.exchanges(&c.parent) {
            if side.exchanges[i].arrived < side.exchanges[first].arrived {
                continue;
            }
            if let Some(m) = side.exchanges[i].messages.iter().find(|m| m.role == Role::Assistant && childs(m)) {
                findings.push((
                    i,
                    format!("{}'s request holds a reply of its child {child}", c.parent),
                    Some(m.clone()),
                ));
                break;
            }
        }
    }
    for (i, message, m) in findings {
        out.at("isolation", "oracle.model-side.isolation", i, message, m.as_ref());
    }
}

/// `oracle.model-side.append-only`.
fn append_only(side: &ModelSide, dialect: &Dialect, out: &mut Out) {
    let mut findings = Vec::new();
    for list in out.agents.of.values() {
        for pair in list.windows(2) {
            let (a, b) = (&side.exchanges[pair[0].0], &side.exchanges[pair[1].0]);
            let Some(reply) = &a.reply else { continue };
            if extension(history(side), a, &b.messages).is_some() {
                continue;
            }
            // A named session's run continued by a send after runs that recorded nothing
            // (each cut by its limit) starts from the message alone.
            let alias = side.alias(pair[1].0);
            let named = side.calls.iter().any(|c| {
                matches!(c.session, SessionKind::Named(_))
                    && matches!(&c.outcome, CallOutcome::Child(a) if Some(a) == alias)
            });
            // A run that started again from an earlier record of a named session goes on from
            // an earlier exchange of the same agent (or from a declared compaction, below).
            // Only there: another agent going on from an earlier request of its own had its
            // last step rewritten or dropped (blind review 39: a runtime eliding an earlier tool
            // output passed).
            let from_earlier = named
                && list
                    .iter()
                    .take_while(|x| x.0 < pair[0].0)
                    .any(|x| extension(history(side), &side.exchanges[x.0], &b.messages).is_some());
            let from_nothing =
                named && b.messages.len() == 1 && b.messages.first().is_some_and(|m| m.role == Role::User);
            let compacted = dialect.compaction.as_ref().is_some_and(|c| {
                b.messages.first().is_some_and(|m| m.role == Role::User && m.content.starts_with(&c.summary_prefix))
            });
            if from_earlier || from_nothing || compacted {
                continue;
            }
            let mut expected: Vec<Message> = a.messages.to_vec();
            expected.push(reply.clone());
            let at = (0..expected.len()).find(|&k| match (expected.get(k), b.messages.get(k)) {
                (Some(w), Some(g)) if k == a.messages.len() => !kept_as(history(side), g, w),
                (Some(w), Some(g)) => w != g,
                _ => true,
            });
            let k = at.unwrap_or(expected.len());
            findings.push((
                pair[1].0,
                format!(
                    "request #{} does not begin with request #{} and the reply it was given: message {k} is {}, expected {}",
                    pair[1].1,
                    pair[0].1,
                    b.messages.get(k).map_or("missing".to_string(), show),
                    expected.get(k).map_or("nothing".to_string(), show)
                ),
                b.messages.get(k).cloned(),
            ));
        }
    }
    for (i, message, m) in findings {
        out.at("append-only", "oracle.model-side.append-only", i, message, m.as_ref());
    }
}

/// Each child's runs that hold a slot (a background child's; a synchronous one's too where a
/// reply's calls run at once) as (call, first exchange, start, end): from its first
/// request to its final reply (or, for a run cut short, its last request).
fn open_runs<'a>(
    side: &'a ModelSide,
    agents: &Agents,
    dialect: &Dialect,
) -> Vec<(&'a SpawnCall, usize, Duration, Duration, bool)> {
    let mut out = Vec::new();
    // A synchronous child runs while its call does: beside its siblings of one reply where the
    // runtime runs a reply's calls at once (`parallel_calls`: openai-agents' agent tools under
    // `max_tool_concurrency`), so it holds a slot as a background child does.
    for c in side.calls.iter().filter(|c| !c.sync || dialect.parallel_calls) {
        let Some(child) = child_of(c) else { continue };
        for run in runs(agents, child, dialect) {
            let (first, last) = (run[0].0, run[run.len() - 1].0);
            let e = &side.exchanges[last];
            // The run's end is known when its last request was answered with a final reply or
            // a model error (answered with none): a reply with calls ends a run only after
            // its tools (out of steps: fuzz seed 8, case 14297).
            let known = e.replied.is_some() && e.reply.as_ref().is_none_or(|r| dialect.final_text(r).is_some());
            out.push((c, first, side.exchanges[first].arrived, e.replied.unwrap_or(e.arrived), known));
        }
    }
    out
}

/// `oracle.model-side.concurrency`: the cap, and first-come first-started.
fn concurrency(side: &ModelSide, rules: &Rules, dialect: &Dialect, out: &mut Out) {
    let runs = open_runs(side, out.agents, dialect);
    let cap = rules.max_concurrency;
    for (k, (_, first, start, ..)) in runs.iter().enumerate() {
        let open = runs
            .iter()
            .enumerate()
            .filter(|(j, (_, f, s, e, _))| (*s < *start || (*s == *start && f <= first)) && *e > *start || *j == k)
            .count();
        if open > cap {
            out.at(
                "concurrency",
                "oracle.model-side.concurrency",
                *first,
                format!("{open} children have their run open at {:?} (from their first request to their final reply); the cap is {cap}", start),
                side.exchanges[*first].messages.first(),
            );
            break;
        }
    }
    // No slot stays free while a task waits (`bub.cap.slot-refilled-at-once`): in the instant a
    // run ends with its final reply, fewer runs open than the cap leave no task waiting that
    // was made before that instant (its first run first asks later, or a later answer still
    // says it is queued). Judged on virtual time; a run whose end is not seen stays open.
    if !side.wall_times {
        for (_, _, _, end, _) in runs.iter().filter(|r| r.4) {
            let open = runs.iter().filter(|(_, _, s, e, k)| *s <= *end && (*e > *end || !*k)).count();
            if open >= cap {
                continue;
            }
            if let Some((c, why)) = waiting_at(side, out.agents, dialect, *end) {
                let task = match (&c.task_id, child_of(c)) {
                    (Some(id), _) => format!("task {id}"),
                    (None, Some(child)) => format!("the child {child} of a call beside others"),
                    (None, None) => "a call's child".to_string(),
                };
                out.at(
                    "concurrency",
                    "oracle.model-side.concurrency",
                    c.exchange,
                    format!(
                        "at {end:?} a run ended and {open} of {cap} slots were in use, yet {task} waited ({why}): a freed slot goes to the next queued task in that instant"
                    ),
                    None,
                );
                break;
            }
        }
    }
    // Children start in the order of the calls that made them: a later call's child never
    // asks first at an earlier instant (first runs only; continued runs are queued anew, and
    // so is a first run that a send queued after the task was cancelled while queued).
    // Nor a child whose first request ends with a message sent to its task after the prompt:
    // sent while the task was queued, or the start of a later run after a first run that never
    // asked (granted no step), and the two read alike (fuzz seed 7, case 3114).
    let handed =
        |first: usize, c: &SpawnCall| side.exchanges[first].messages.last().is_some_and(|m| m.content != c.prompt);
    let mut firsts: Vec<(&SpawnCall, usize, Duration)> = Vec::new();
    for (c, first, start, ..) in runs.iter().filter(|(c, first, ..)| !c.first_run_by_send && !handed(*first, c)) {
        if !firsts.iter().any(|(d, _, _)| std::ptr::eq(*d, *c)) {
            firsts.push((c, *first, *start));
        }
    }
    // On wall time a child's first request is not its start: children started in one instant
    // ask in whatever order the runtime's scheduler and the network give (py_runtime, CI run of
    // 627a7d2). There the later child's start proves the earlier one waited only when the runs
    // seen open at that start fill the cap without the earlier child: had it started, one more
    // than the cap would have run.
    let full_without = |s: Duration| {
        let open = runs.iter().filter(|(_, _, b, e, _)| *b <= s && s < *e).count();
        (open >= cap).then_some(open)
    };
    for (k, (c, first, start)) in firsts.iter().enumerate() {
        let found = firsts[k + 1..].iter().find_map(|(d, _, s)| {
            if d.parent != c.parent || s >= start {
                return None;
            }
            if !side.wall_times {
                return Some((d, s, String::new()));
            }
            full_without(*s).map(|open| {
                (
                    d,
                    s,
                    format!(" ({open} runs were open then without this one, and the cap is {cap}: it had not started)"),
                )
            })
        });
        if let Some((d, s, why)) = found {
            let later = child_of(d).map_or(String::new(), ToString::to_string);
            out.at(
                "concurrency",
                "oracle.model-side.concurrency",
                *first,
                format!("this child first asks at {:?}, after {later}, whose call came later, asked at {:?}{why}: the queue is first come, first started", start, s),
                None,
            );
            break;
        }
    }
}

/// A task made before `at` that was waiting in the queue at `at`: its first run first asks
/// later, or an answer after `at` (a wait entry, a notification) still says `queued`.
fn waiting_at<'a>(
    side: &'a ModelSide,
    agents: &Agents,
    dialect: &Dialect,
    at: Duration,
) -> Option<(&'a SpawnCall, String)> {
    // A synchronous child of a reply whose calls run at once waits for a slot as a task does.
    side.calls.iter().filter(|c| (!c.sync || dialect.parallel_calls) && !c.first_run_by_send).find_map(|c| {
        let made = made_at(side, dialect, c).is_some_and(|t| t < at);
        if !made || matches!(c.outcome, CallOutcome::Refused | CallOutcome::Waiting { .. }) {
            return None;
        }
        if let Some(child) = child_of(c) {
            let first = runs(agents, child, dialect).into_iter().next()?[0].0;
            let asked = side.exchanges[first].arrived;
            return (asked > at).then(|| (c, format!("its child first asked at {asked:?}")));
        }
        let task = c.task_id.as_deref()?;
        let queued = |m: &Message| {
            m.role == Role::Tool && wait_entries(&m.content).iter().any(|(id, s, _)| id == task && s == "queued")
        };
        // An answer first seen after `at` (a request's history holds the answers before it).
        let seen_before =
            |m: &Message| side.exchanges.iter().filter(|e| e.arrived <= at).any(|e| e.messages.iter().any(|x| x == m));
        let later = side
            .exchanges
            .iter()
            .enumerate()
            .filter(|(_, e)| e.arrived > at)
            .find(|(_, e)| e.messages.iter().any(|m| queued(m) && !seen_before(m)));
        later.map(|(i, e)| (c, format!("request {i} at {:?} is still told it is queued", e.arrived)))
    })
}

/// When spawn call `c` ran, where the traffic shows it: its reply's instant, when every call
/// before it in the reply is an asynchronous spawn call too (those return at once,
/// `bub.spawn.returns-at-once`); `None` otherwise (a tool's latency or a foreground child's
/// run, unseen, came first: fuzz seed 5, case 1682).
fn made_at(side: &ModelSide, dialect: &Dialect, c: &SpawnCall) -> Option<Duration> {
    let e = &side.exchanges[c.exchange];
    let reply = e.reply.as_ref()?;
    // Every call before it takes no time: an asynchronous spawn, or any spawn of a reply whose
    // calls start at once (`parallel_calls`).
    let instant = |name: &str, args: &serde_json::Value| {
        dialect
            .spawn_tool(name)
            .is_some_and(|t| t.result_of(args) == crate::dialect::ResultMode::Async || dialect.parallel_calls)
    };
    reply.tool_calls.iter().take(c.position).all(|x| instant(&x.name, &x.args)).then_some(e.replied).flatten()
}

/// `oracle.model-side.budget`: a child never asks more often in one run than its grant can
/// allow (each request needs a step left). A child's first run is bounded by its grant as the
/// parent's own replies bound it ([`grant_bounds`]); a continued run by `child_step_cap`.
/// The root asks no more once its turn's steps are spent and granted away ([`grant_bounds`]).
fn budget(side: &ModelSide, rules: &Rules, dialect: &Dialect, out: &mut Out) {
    let (bounds, mut findings) = grant_bounds(side, rules, dialect);
    for alias in out.agents.of.keys().filter(|a| a.depth() > 0) {
        let continued = first_run_continued(out.agents, alias, dialect);
        for (r, run) in runs(out.agents, alias, dialect).iter().enumerate() {
            let cap = rules.child_step_cap;
            let (allowed, why) = match bounds.get(alias).filter(|_| r == 0 && !continued) {
                Some(b) if b.grant < cap => (
                    b.grant,
                    format!(
                        "its grant is at most {}: min(what {} had left after the spawn cost, at most {}, child_step_cap {cap}; {})",
                        b.grant, b.parent, b.left, b.how
                    ),
                ),
                _ => (cap, format!("a child is granted at most {cap} steps")),
            };
            // Each reply costs a step at least, except one holding only spawn calls when a
            // spawn costs nothing (a refused spawn pays the spawn cost alone,
            // `roku.agent.refusal-pays-cost-only`): a request comes only while steps are left.
            let mut spent = 0u64;
            for (k, &(i, n)) in run.iter().enumerate() {
                if spent >= u64::from(allowed) {
                    findings.push((
                        i,
                        format!("request #{n} is the run's {}th, after replies that spent {spent} steps; {why}", k + 1),
                    ));
                    break;
                }
                let reply = side.exchanges[i].reply.as_ref();
                let free = reply.is_some_and(|r| {
                    !r.tool_calls.is_empty()
                        && r.tool_calls.iter().all(|c| dialect.spawn_tool(&c.name).is_some())
                        && rules.spawn_cost == 0
                });
                spent += u64::from(!free);
            }
        }
    }
    for (i, message) in findings {
        out.at("budget", "oracle.model-side.budget", i, message, None);
    }
}

/// What bounds a child's first grant, as read from its parent's replies.
struct GrantBound {
    /// The most the grant can be (`roku.grant.min-remaining-cap`: min(remaining after the
    /// spawn cost, `child_step_cap`)).
    grant: u32,
    /// The parent.
    parent: AgentId,
    /// The most the parent had left after the spawn cost.
    left: u32,
    /// How that was reckoned.
    how: String,
}

/// An upper bound on each child's first grant, from the parent's own replies alone: a parent
/// starts its run (the root: each turn, with `root_step_budget`; a child: with its grant's
/// bound) and pays at least 1 step for each regular call it made before the spawn call
/// (`roku.calls.catalog-cost`; an unknown or denied call costs 1 too) and `spawn_cost` for each
/// spawn call that made a child (`core.budget.pre-deduction-both-families`, its grant not
/// counted). Calls of the dialect's own sub-agent tools otherwise, and replies holding a
/// terminal call, count nothing. A root request that gains a user message other than a
/// notification or a notice may start a new turn: the root's count starts again there.
///
/// The root is judged by the same count (`core.budget.pre-deduction-both-families`,
/// `core.budget.never-refunded`, `roku.loop.budget-zero-no-llm-call`): each grant leaves it at
/// the spawn and never returns, so a root request that arrives when its turn's count of steps
/// spent and granted has reached `root_step_budget` is a finding (exchange, message). The
/// count is a lower bound: a grant is `min(left, child_step_cap)` of a `left` reckoned from
/// the least spent, and spent + that grant never falls as the true spend rises.
fn grant_bounds(
    side: &ModelSide,
    rules: &Rules,
    dialect: &Dialect,
) -> (BTreeMap<AgentId, GrantBound>, Vec<(usize, String)>) {
    // Per agent: (the most its run started with, the least it has spent, what was counted,
    // the least granted away).
    let mut state: BTreeMap<AgentId, (u32, u32, usize, u32)> = BTreeMap::new();
    let mut root_findings: Vec<(usize, String)> = Vec::new();
    let mut bounds: BTreeMap<AgentId, GrantBound> = BTreeMap::new();
    let mut previous: BTreeMap<AgentId, usize> = BTreeMap::new();
    for (i, e) in side.exchanges.iter().enumerate() {
        let Some(alias) = side.alias(i).cloned() else { continue };
        let root = alias.depth() == 0;
        let prev = previous.insert(alias.clone(), i);
        let ended =
            prev.is_some_and(|p| side.exchanges[p].reply.as_ref().is_some_and(|r| dialect.final_text(r).is_some()));
        // What the request gained since the agent's previous one: from the end of that
        // request's messages, reply or not (a turn that ended on a model error appends no
        // reply, and the next turn's user message comes right after; fuzz case 728).
        let from = prev.map_or(0, |p| side.exchanges[p].messages.len());
        let new_turn = root
            && e.messages.iter().skip(from).any(|m| {
                m.role == Role::User
                    && dialect.notified(&m.content).is_none()
                    && !dialect.notices.iter().any(|n| m.content.starts_with(n.as_str()))
            });
        if prev.is_none() || new_turn || (!root && ended) {
            let start = if root {
                rules.root_step_budget
            } else if prev.is_none() {
                bounds.get(&alias).map_or(rules.child_step_cap, |b| b.grant)
            } else {
                rules.child_step_cap
            };
            state.insert(alias.clone(), (start, 0, 0, 0));
        } else if root
            && let Some(s) = state.get(&alias)
            && s.1.saturating_add(s.3) >= s.0
            && !root_findings.iter().any(|(j, _)| side.alias(*j) == Some(&alias))
        {
            root_findings.push((
                i,
                format!(
                    "{alias} asks the model after its turn's budget of {} is gone: at least {} steps spent by {} calls and {} granted to children, which never return",
                    s.0, s.1, s.2, s.3
                ),
            ));
        }
        let Some(reply) = &e.reply else { continue };
        if dialect.final_text(reply).is_some() {
            continue;
        }
        let Some(s) = state.get_mut(&alias) else { continue };
        for (position, call) in reply.tool_calls.iter().enumerate() {
            if dialect.spawn_tool(&call.name).is_some() {
                let made = side.calls.iter().find(|c| c.exchange == i && c.position == position);
                if let Some(c) = made
                    && let Some(child) = child_of(c)
                {
                    let left = s.0.saturating_sub(s.1).saturating_sub(rules.spawn_cost);
                    let how = format!(
                        "{} steps at the start of its run, at least {} spent by {} earlier calls, {} for the spawn",
                        s.0, s.1, s.2, rules.spawn_cost
                    );
                    bounds.insert(
                        child.clone(),
                        GrantBound { grant: left.min(rules.child_step_cap), parent: alias.clone(), left, how },
                    );
                    s.1 += rules.spawn_cost;
                    s.2 += 1;
                    // What left the parent for the grant, reckoned from all it spent and granted.
                    let granted = s.0.saturating_sub(s.1).saturating_sub(s.3).min(rules.child_step_cap);
                    s.3 += granted;
                }
            } else if !dialect.is_family(&call.name) {
                s.1 += 1;
                s.2 += 1;
            }
        }
    }
    (bounds, root_findings)
}

/// The time limit of the child of `c`, as the model side can know it: `None` when it has
/// none, `Err(())` when the model side cannot tell (a profile may set it).
fn limit_of(c: &SpawnCall, rules: &Rules) -> Result<Option<Duration>, ()> {
    let limit = if c.sync {
        rules.agent_timeout
    } else if let Some(s) = c.timeout_seconds.filter(|s| *s >= 0.0) {
        Some(Duration::from_secs_f64(s.min(1e9)))
    } else if c.profile.is_some() {
        return Err(());
    } else {
        rules.subagent_default_timeout
    };
    Ok(limit.filter(|l| !l.is_zero()))
}

/// `oracle.model-side.timeouts`.
fn timeouts(side: &ModelSide, rules: &Rules, dialect: &Dialect, out: &mut Out) {
    let mut findings = Vec::new();
    for c in &side.calls {
        let Some(tool) = dialect.spawn_tool(&c.tool) else { continue };
        let Some(template) = &tool.timeout_text else { continue };
        let Ok(limit) = limit_of(c, rules) else { continue };
        let prefix = template.split("{seconds}").next().unwrap_or_default();
        // What the parent was handed, and the exchange it first stands in.
        let handed: Vec<(String, usize)> = if c.sync {
            let first = out.agents.exchanges(&c.parent).iter().map(|x| x.0).find(|&i| {
                side.exchanges[i]
                    .messages
                    .iter()
                    .any(|m| m.role == Role::Tool && m.tool_call_id == c.runtime_id && c.runtime_id.is_some())
            });
            c.result.iter().zip(first).map(|((t, _), i)| (t.clone(), i)).collect()
        } else {
            let Some(task) = &c.task_id else { continue };
            let mut got = Vec::new();
            for &(i, _) in out.agents.exchanges(&c.parent) {
                for m in side.exchanges[i].messages.iter() {
                    for n in dialect.notifications(&m.content) {
                        if n.task_id == task
                            && n.status == "timed_out"
                            && !got.iter().any(|(b, _): &(String, usize)| *b == n.body)
                        {
                            got.push((n.body.to_string(), i));
                        }
                    }
                    // A wait's answer hands the result over the same way (`bub.wait.result-shape`).
                    if m.role == Role::Tool && dialect.wait.is_some() {
                        for (id, status, body) in wait_entries(&m.content) {
                            if let Some(body) = body
                                .filter(|b| id == *task && status == "timed_out" && !got.iter().any(|(x, _)| x == b))
                            {
                                got.push((body, i));
                            }
                        }
                    }
                }
            }
            got
        };
        let child = child_of(c);
        if !c.sync
            && let (Some(task), Some(limit)) = (&c.task_id, limit)
        {
            findings.extend(timeout_status(
                side,
                out.agents,
                dialect,
                c,
                task,
                child,
                &template.replace("{seconds}", &seconds_text(limit)),
            ));
        }
        let start = child.and_then(|a| out.agents.exchanges(a).first()).map(|x| side.exchanges[x.0].arrived);
        for (text, at) in handed {
            if !text.starts_with(prefix) || prefix.is_empty() {
                continue;
            }
            match limit {
                None => findings.push((
                    at,
                    "the parent is told its child timed out, but the child has no time limit".to_string(),
                    text,
                )),
                Some(limit) => {
                    let want = template.replace("{seconds}", &seconds_text(limit));
                    if text != want {
                        findings.push((
                            at,
                            format!("the timeout is reported as {:?}, expected {:?}", text, want),
                            text.clone(),
                        ));
                    }
                    // A reply that ends the child's loop, due at the limit or before it, wins:
                    // the child finished (`core.time.finish-at-limit-wins`). Its own final text
                    // being the timeout text is no timeout.
                    let one_run = |a: &&AgentId| runs(out.agents, a, dialect).len() == 1;
                    let finished = child.filter(|_| !side.wall_times).filter(one_run).and_then(|a| {
                        let first = out.agents.exchanges(a).first()?.0;
                        let deadline = side.exchanges[first].arrived + limit;
                        out.agents.exchanges(a).iter().map(|(i, _)| &side.exchanges[*i]).find_map(|e| {
                            let due = e.ends_loop_due.filter(|&d| d <= deadline && e.arrived < deadline)?;
                            let own = e.reply.as_ref().and_then(|r| dialect.final_text(r));
                            (own.as_deref() != Some(text.as_str())).then_some(due)
                        })
                    });
                    if let (Some(due), Some(start)) = (finished, start) {
                        findings.push((
                            at,
                            format!(
                                "the parent is told its child timed out, but the reply that ends the child's loop was due at {due:?}, within its limit of {} s from its first request at {start:?}: a reply at the limit wins",
                                seconds_text(limit)
                            ),
                            text.clone(),
                        ));
                    }
                    if let Some(start) = start
                        && side.exchanges[at].arrived < start + limit
                    {
                        findings.push((
                            at,
                            format!(
                                "the parent hears at {:?} that a child timed out, before its limit of {} s from its first request at {:?}",
                                side.exchanges[at].arrived,
                                seconds_text(limit),
                                start
                            ),
                            text,
                        ));
                    }
                }
            }
        }
        // A child never asks the model after its limit.
        if let (Some(child), Some(start), Some(limit)) = (child, start, limit) {
            if let Some(&(i, _)) =
                out.agents.exchanges(child).iter().find(|(i, _)| side.exchanges[*i].arrived > start + limit)
            {
                if runs(out.agents, child, dialect).len() == 1 {
                    findings.push((
                        i,
                        format!("{child} asks the model after its time limit of {} s", seconds_text(limit)),
                        String::new(),
                    ));
                }
            }
        }
    }
    for (i, message, text) in findings {
        let m = (!text.is_empty()).then(|| Message::user(text));
        out.at("timeouts", "oracle.model-side.timeouts", i, message, m.as_ref());
    }
}

/// The timeout text `want` delivered for `task` under a status other than `timed_out`
/// (`bub.timeout.outcome`, `bub.delivery.status-values`: a stopped child's task ends
/// `timed_out`), in a notification or a wait entry, unless the child's own final reply is that
/// text. Each as (exchange, message, text), once per status.
fn timeout_status(
    side: &ModelSide,
    agents: &Agents,
    dialect: &Dialect,
    c: &SpawnCall,
    task: &str,
    child: Option<&AgentId>,
    want: &str,
) -> Vec<(usize, String, String)> {
    let own = child.is_some_and(|a| {
        agents
            .exchanges(a)
            .iter()
            .any(|x| side.exchanges[x.0].reply.as_ref().and_then(|r| dialect.final_text(r)).is_some_and(|f| f == want))
    });
    let mut found: Vec<(usize, String, String)> = Vec::new();
    if own {
        return found;
    }
    for &(i, _) in agents.exchanges(&c.parent) {
        let mut got: Vec<String> = Vec::new();
        for m in side.exchanges[i].messages.iter() {
            if m.role == Role::User {
                for n in dialect.notifications(&m.content) {
                    if n.task_id == task && n.body == want {
                        got.push(n.status.to_string());
                    }
                }
            }
            if m.role == Role::Tool && m.content.starts_with('[') {
                got.extend(
                    wait_entries(&m.content)
                        .into_iter()
                        .filter(|e| e.0 == task && e.2.as_deref() == Some(want))
                        .map(|e| e.1),
                );
            }
        }
        for status in got.into_iter().filter(|s| s != "timed_out") {
            if !found.iter().any(|(_, m, _)| m.contains(&format!("status `{status}`"))) {
                found.push((
                    i,
                    format!(
                        "task {task} is reported timed out ({want:?}) with status `{status}`; a timed-out task's status is `timed_out`"
                    ),
                    want.to_string(),
                ));
            }
        }
    }
    found
}

/// `oracle.model-side.delivery`: each result at most once per run, results due at one instant
/// together, the notifications new in one request and a wait's results in completion order.
fn delivery(side: &ModelSide, dialect: &Dialect, out: &mut Out) {
    let mut findings = Vec::new();
    let runs = open_runs(side, out.agents, dialect);
    for c in side.calls.iter().filter(|c| !c.sync) {
        let Some(task) = &c.task_id else { continue };
        let Some((at, got)) = deliveries(side, out.agents, &c.parent, task, dialect) else { continue };
        let allowed = 1 + sent_to(side, dialect, task).len();
        if got.len() > allowed {
            findings.push((
                at,
                format!(
                    "the result of task {task} reaches the parent {} times; it ran at most {allowed} times",
                    got.len()
                ),
            ));
        }
    }
    // Over the wire a final reply's time is when the server gave it, not when the runtime took
    // it in: "before the parent's next request" cannot be read from wall times.
    if !side.wall_times {
        findings.extend(delivered_before_next_request(side, out.agents, dialect));
    }
    findings.extend(notification_last(side, out.agents, dialect));
    findings.extend(cancelled_never_delivered(side, out.agents, dialect));
    // Ties: results whose final replies were given in one instant reach the parent together.
    // When a task's run ended, as a request arriving `before` reports it, for the `j`-th of `k`
    // results of the task it lists: a continued task (`subagent.send`) has several runs, and the
    // `k` results read then are those of its last `k` runs ended by then, in order (fuzz case
    // 2586: a wait listed a continuation's result by its second run, judged by its first).
    // Only a run whose last request got a final reply or a model error has a known end: one
    // cut by its time limit or cancelled, or out of steps after a reply with calls, ends some
    // time after, so is judged by neither check (fuzz case 18425: a wait listed a failed child's
    // result before a timed-out one's, judged by the timed-out child's last request).
    // Only runs that began before request `request`: a run its reply started (by a send) ended
    // after it, even in the same instant (fuzz seed 11, case 16814).
    let done_nth = |task: &str, request: usize, before: Duration, j: usize, k: usize| -> Option<Duration> {
        let c = side.calls.iter().find(|c| c.task_id.as_deref() == Some(task))?;
        let all: Vec<(usize, Duration, bool)> = runs
            .iter()
            .filter(|(d, ..)| std::ptr::eq(*d, c))
            .map(|(_, first, _, end, replied)| (*first, *end, *replied))
            .collect();
        let ended: Vec<(Duration, bool)> = all
            .iter()
            .filter(|(first, end, _)| *first < request && *end <= before)
            .map(|(_, end, replied)| (*end, *replied))
            .collect();
        // Fewer ended runs than the answer lists: the first run, if it began before the
        // request (a run that never asked, granted no step, shows no end at all).
        let first = all.first().filter(|(first, ..)| *first < request).map(|(_, end, replied)| (*end, *replied));
        let (end, replied) = match ended.len().checked_sub(k) {
            Some(skip) => ended.get(skip + j).copied(),
            None => first,
        }?;
        replied.then_some(end)
    };
    // The end of a task's first run (ties between results taken in at once).
    let done_at = |task: &str| -> Option<Duration> {
        let c = side.calls.iter().find(|c| c.task_id.as_deref() == Some(task))?;
        let (_, _, _, end, replied) = runs.iter().find(|(d, ..)| std::ptr::eq(*d, c))?;
        replied.then_some(*end)
    };
    for (parent, list) in &out.agents.of {
        // Only results of this agent's own children: a forked child's first request holds its
        // parent's conversation, and the results its parent took in there are not its own
        // (fuzz case 6770: a fork child judged by its parent's notifications).
        let own = |task: &str| side.calls.iter().any(|c| c.task_id.as_deref() == Some(task) && &c.parent == parent);
        let mut seen: BTreeSet<String> = BTreeSet::new();
        // The wait answers judged already: each is judged in the first request that holds it,
        // by the runs ended when that request came (fuzz seed 4, case 6933: a later request
        // held the same answer after a listed task had run again).
        let mut waits_judged: BTreeSet<(String, String)> = BTreeSet::new();
        for &(i, n) in list {
            let e = &side.exchanges[i];
            let mut here: BTreeSet<String> = BTreeSet::new();
            let mut wait_orders: Vec<Vec<String>> = Vec::new();
            // The notifications this request takes in for the first time, in message order.
            let mut notified: Vec<String> = Vec::new();
            for m in e.messages.iter() {
                for x in dialect.notifications(&m.content).into_iter().filter(|x| own(x.task_id)) {
                    if !seen.contains(x.task_id) && !notified.iter().any(|t| t == x.task_id) {
                        notified.push(x.task_id.to_string());
                    }
                    here.insert(x.task_id.to_string());
                }
                if m.role == Role::Tool && m.content.starts_with('[') {
                    let read: Vec<String> = wait_entries(&m.content)
                        .into_iter()
                        .filter(|x| x.2.is_some() && own(&x.0))
                        .map(|x| x.0)
                        .collect();
                    here.extend(read.iter().cloned());
                    if waits_judged.insert((m.tool_call_id.clone().unwrap_or_default(), m.content.clone())) {
                        wait_orders.push(read);
                    }
                }
            }
            let new: Vec<&String> = here.iter().filter(|t| !seen.contains(*t)).collect();
            for t in &new {
                let Some(when) = done_at(t) else { continue };
                for c in side.calls.iter().filter(|c| !c.sync && &c.parent == parent) {
                    let Some(other) = &c.task_id else { continue };
                    let last = child_of(c).and_then(|a| out.agents.exchanges(a).last()).map(|x| &side.exchanges[x.0]);
                    let finished_final =
                        last.is_some_and(|x| x.reply.as_ref().is_some_and(|r| dialect.final_text(r).is_some()));
                    // The final reply reached the runtime before this request: in process the
                    // endpoint knows when it was due (the core settles an instant before it
                    // asks); over the wire, within one instant, only a reply given before the
                    // request arrived could be in it (fuzz --runtime, py_runtime seed 1 case 4:
                    // a child started and done in the instant its sibling ended, its reply
                    // released with the root's next request).
                    let reached_first = last.is_some_and(|x| {
                        x.ends_loop_due.is_some() || x.replied_after.is_some_and(|before| before <= i)
                    });
                    // A child its parent started by the reply to this request, or a later one,
                    // was not due here however soon it answered (fuzz case 8762: a child started
                    // and done in the instant of the request that started it).
                    if !side.wall_times
                        && other != *t
                        && c.exchange < i
                        && finished_final
                        && reached_first
                        && done_at(other) == Some(when)
                        && !here.contains(other)
                        && !seen.contains(other)
                        && sent_to(side, dialect, other).is_empty()
                        && e.arrived >= when
                    {
                        findings.push((i, format!("request #{n} holds the result of task {t} but not that of task {other}, whose child gave its final reply in the same instant ({when:?})")));
                    }
                }
            }
            // `bub.delivery.completion-order`: results taken in at once (several notifications
            // new in one request) are in the order their children finished, ties in call order.
            // Only tasks whose child's last request got its final reply: a run that ended
            // otherwise (out of steps after a slow tool, stopped) ends after its last reply.
            let times: Vec<(Duration, usize)> = notified
                .iter()
                .filter_map(|t| {
                    let at = side.calls.iter().position(|c| c.task_id.as_deref() == Some(t))?;
                    let last = child_of(&side.calls[at]).and_then(|a| out.agents.exchanges(a).last())?;
                    side.exchanges[last.0].reply.as_ref().and_then(|r| dialect.final_text(r))?;
                    Some((done_at(t)?, at))
                })
                .collect();
            if times.windows(2).any(|w| out_of_order(w[0], w[1], side.wall_times)) {
                findings.push((
                    i,
                    format!(
                        "request #{n} takes in notifications out of completion order (ties in call order): {}",
                        notified.join(", ")
                    ),
                ));
            }
            for order in wait_orders {
                let times: Vec<(Duration, usize)> = order
                    .iter()
                    .enumerate()
                    .filter_map(|(i, t)| {
                        let k = order.iter().filter(|x| *x == t).count();
                        let j = order[..i].iter().filter(|x| *x == t).count();
                        Some((
                            done_nth(t, i, e.arrived, j, k)?,
                            side.calls.iter().position(|c| c.task_id.as_deref() == Some(t))?,
                        ))
                    })
                    .collect();
                if times.windows(2).any(|w| out_of_order(w[0], w[1], side.wall_times)) {
                    findings.push((i, format!("a wait answer in request #{n} lists its results out of completion order (ties in call order): {}", order.join(", "))));
                }
            }
            seen.extend(here);
        }
    }
    findings.sort();
    findings.dedup();
    for (i, message) in findings {
        out.at("delivery", "oracle.model-side.delivery", i, message, None);
    }
}

/// How far apart two final replies given on the server's wall clock must be before the order a
/// runtime takes them in is judged: over the wire, a reply given is not yet a reply read, and
/// children that end within this of each other may be read in either order (the example Python
/// runtime read four results given in one millisecond up to 57 ms apart on a loaded machine).
const WALL_SLACK: Duration = Duration::from_millis(100);

/// Whether `first`, listed before `second`, is out of completion order: by (final reply, call)
/// on virtual times; on wall times only when it ended later by more than [`WALL_SLACK`].
fn out_of_order(first: (Duration, usize), second: (Duration, usize), wall_times: bool) -> bool {
    if wall_times { first.0 > second.0 + WALL_SLACK } else { first > second }
}

/// Each run of a background task whose final reply the endpoint gave reaches the parent by the
/// parent's first request after it (`bub.delivery.before-next-step`: "every result that has
/// arrived is taken in by the parent before its next model request"; `bub.delivery.result-record`):
/// that request holds at least as many results of the task (notifications or wait entries) as
/// the task had runs ended before it arrived. Requests in the instant of the final reply are not
/// judged (the result may be due after them).
fn delivered_before_next_request(side: &ModelSide, agents: &Agents, dialect: &Dialect) -> Vec<(usize, String)> {
    let mut findings = Vec::new();
    for c in side.calls.iter().filter(|c| !c.sync) {
        let (Some(task), Some(child)) = (&c.task_id, child_of(c)) else { continue };
        let ends: Vec<(Duration, usize, usize)> = runs(agents, child, dialect)
            .iter()
            .filter_map(|run| {
                let &(i, n) = run.last()?;
                let e = &side.exchanges[i];
                e.reply.as_ref().filter(|r| dialect.final_text(r).is_some())?;
                Some((e.replied?, i, n))
            })
            .collect();
        for (k, &(end, _, n)) in ends.iter().enumerate() {
            let Some(&(at, m)) = agents.exchanges(&c.parent).iter().find(|(i, _)| side.exchanges[*i].arrived > end)
            else {
                continue;
            };
            let arrived = side.exchanges[at].arrived;
            let due = ends.iter().filter(|x| x.0 < arrived).count();
            let held = delivered_in(side, at, task, dialect);
            if held < due {
                findings.push((
                    at,
                    format!(
                        "request #{m} of {} ({:?}) holds {held} result(s) of task {task}, but {child} gave {due} final repl{} before it (run {} ended with request #{n}, replied at {end:?})",
                        c.parent,
                        arrived,
                        if due == 1 { "y" } else { "ies" },
                        k + 1
                    ),
                ));
                break;
            }
        }
    }
    findings
}

/// `bub.cancel.no-notification`: a task whose cancel the model was told succeeded (the cancel
/// call's result `{"task_id":…,"status":"cancelled"}`, `bub.cancel.result`) is never notified
/// as cancelled after it, nor listed cancelled with a result by a wait, unless a message was
/// sent to it after the cancel (a new run). Read from each request's own conversation, in its order; one finding per
/// task. (Found missing by a bug switch written blind to the runtime fuzzer, issue 41.)
fn cancelled_never_delivered(side: &ModelSide, agents: &Agents, dialect: &Dialect) -> Vec<(usize, String)> {
    let mut findings = Vec::new();
    let mut reported: BTreeSet<String> = BTreeSet::new();
    for list in agents.of.values() {
        for &(i, n) in list {
            let mut cancels: BTreeSet<String> = BTreeSet::new();
            let mut waits: BTreeSet<String> = BTreeSet::new();
            // A send's call id and the task it names: its result (after a cancel's of the same
            // reply) may start a new run of the task.
            let mut sends: BTreeMap<String, String> = BTreeMap::new();
            let mut cancelled: BTreeSet<String> = BTreeSet::new();
            for m in side.exchanges[i].messages.iter() {
                for c in &m.tool_calls {
                    if dialect.cancel_tool(&c.name).is_some() {
                        cancels.insert(c.id.clone());
                    } else if dialect.wait.as_deref() == Some(c.name.as_str()) {
                        waits.insert(c.id.clone());
                    } else if let Some(t) = dialect.send_tool(&c.name)
                        && let Some(task) = c.args.get(&t.task_id).and_then(|v| v.as_str())
                    {
                        sends.insert(c.id.clone(), task.trim().to_string());
                    }
                }
                let id = m.tool_call_id.as_deref().unwrap_or_default();
                if m.role == Role::Tool
                    && let Some(task) = sends.get(id)
                {
                    cancelled.remove(task);
                    continue;
                }
                if m.role == Role::Tool && cancels.contains(id) {
                    let result: Option<serde_json::Value> = serde_json::from_str(&m.content).ok();
                    let field =
                        |f: &str| result.as_ref().and_then(|r| r.get(f)).and_then(|v| v.as_str()).map(str::to_string);
                    if field("status").as_deref() == Some("cancelled")
                        && let Some(task) = field("task_id")
                    {
                        cancelled.insert(task);
                    }
                    continue;
                }
                // Only the cancelled run's own end: an earlier run of the task that ended before a
                // send continued it is still delivered (fuzz --judge model-side, seed 8, case 5991).
                let delivered: Vec<String> = if m.role == Role::Tool && waits.contains(id) {
                    wait_entries(&m.content)
                        .into_iter()
                        .filter(|x| x.1 == "cancelled" && x.2.is_some())
                        .map(|x| x.0)
                        .collect()
                } else if m.role == Role::User {
                    dialect
                        .notifications(&m.content)
                        .into_iter()
                        .filter(|x| x.status == "cancelled")
                        .map(|x| x.task_id.to_string())
                        .collect()
                } else {
                    Vec::new()
                };
                for task in delivered.into_iter().filter(|t| cancelled.contains(t)) {
                    if reported.insert(task.clone()) {
                        findings.push((
                            i,
                            format!(
                                "request #{n} holds a result of task {task} after the model was told it was cancelled: a cancelled task is never notified nor returned with a result by a wait"
                            ),
                        ));
                    }
                }
            }
        }
    }
    findings
}

/// The messages a request gains after its agent's previous request and reply end with the
/// notifications: no other user message (a steering message, a message sent to the task)
/// follows a notification among them (`bub.delivery.before-next-step`: results are taken in
/// "after any message sent to it, so that request ends with the notification"). A runtime
/// notice (a budget nudge) may follow.
fn notification_last(side: &ModelSide, agents: &Agents, dialect: &Dialect) -> Vec<(usize, String)> {
    let mut findings = Vec::new();
    for list in agents.of.values() {
        for pair in list.windows(2) {
            let (a, (b, n)) = (&side.exchanges[pair[0].0], pair[1]);
            let new = side.exchanges[b].messages.iter().skip(a.messages.len() + 1);
            let mut notified = None;
            for m in new {
                if m.role != Role::User || dialect.notices.iter().any(|p| m.content.starts_with(p.as_str())) {
                    continue;
                }
                match (dialect.notifications(&m.content).pop(), &notified) {
                    (Some(x), _) => notified = Some(x.task_id.to_string()),
                    (None, Some(task)) => {
                        findings.push((
                            b,
                            format!(
                                "request #{n} takes in the result of task {task} before the user message {}: a result is taken in after any message sent, so the request ends with the notification",
                                show(m)
                            ),
                        ));
                        break;
                    }
                    (None, None) => {}
                }
            }
        }
    }
    findings
}

/// How many results of `task` exchange `at`'s request holds (notifications and wait entries).
fn delivered_in(side: &ModelSide, at: usize, task: &str, dialect: &Dialect) -> usize {
    side.exchanges[at]
        .messages
        .iter()
        .map(|m| {
            let notified = if m.role == Role::User {
                dialect.notifications(&m.content).iter().filter(|n| n.task_id == task).count()
            } else {
                0
            };
            let waited = if m.role == Role::Tool && m.content.starts_with('[') {
                wait_entries(&m.content).iter().filter(|e| e.0 == task && e.2.is_some()).count()
            } else {
                0
            };
            notified + waited
        })
        .sum()
}

/// `oracle.model-side.context`: a child asks for the model its call named, else its parent's.
fn context(side: &ModelSide, dialect: &Dialect, out: &mut Out) {
    let mut findings = Vec::new();
    for c in &side.calls {
        let Some(child) = child_of(c) else { continue };
        if c.profile.is_some() {
            continue;
        }
        let parent = &side.exchanges[c.exchange];
        let named = dialect
            .spawn_tool(&c.tool)
            .and_then(|t| t.model_of(&parent.reply.as_ref()?.tool_calls.get(c.position)?.args));
        let want = named.or_else(|| parent.model.clone());
        let Some(&(i, n)) = out.agents.exchanges(child).first() else { continue };
        if side.exchanges[i].model != want {
            findings.push((
                i,
                format!(
                    "{child}'s request #{n} asks for model {:?}; its call names {:?} and its parent asked for {:?}",
                    side.exchanges[i].model, want, parent.model
                ),
            ));
        }
        // The reasoning effort is handed down the same way (`roku.child.context-passed`,
        // `bub.child.model`): judged where the rules are the built-in core's.
        if !builtin_rules(dialect) {
            continue;
        }
        let named = dialect
            .spawn_tool(&c.tool)
            .and_then(|t| t.effort_of(&parent.reply.as_ref()?.tool_calls.get(c.position)?.args));
        let want = named.or_else(|| parent.reasoning_effort.clone());
        // The request id and session id, where the record has them (in process):
        // `roku.child.request-id` (the parent's and `-sub`), `bub.child.request-id` (the
        // parent's, `-` and the task id), `roku.child.context-passed` (the session id unchanged).
        // A first request that a send began is another turn's, perhaps: not judged.
        let begun_by_send = c.first_run_by_send || first_run_continued(out.agents, child, dialect);
        if let (Some((parent_id, parent_session)), Some((id, session)), false) =
            (&parent.ids, &side.exchanges[i].ids, begun_by_send)
        {
            let want_id = if c.sync {
                Some(format!("{parent_id}-sub"))
            } else {
                c.task_id.as_ref().map(|t| format!("{parent_id}-{t}"))
            };
            if want_id.as_ref().is_some_and(|w| w != id) || session != parent_session {
                findings.push((
                    i,
                    format!(
                        "{child}'s request #{n} carries request id {id:?} and session id {session:?}; its parent's request carried {parent_id:?} and {parent_session:?}, so it carries {:?} and {parent_session:?}",
                        want_id.unwrap_or_default()
                    ),
                ));
            }
        }
        if side.exchanges[i].reasoning_effort != want {
            findings.push((
                i,
                format!(
                    "{child}'s request #{n} asks for reasoning effort {:?}; its call names {:?} and its parent asked for {:?}",
                    side.exchanges[i].reasoning_effort,
                    want,
                    parent.reasoning_effort
                ),
            ));
        }
    }
    for (i, message) in findings {
        out.at("context", "oracle.model-side.context", i, message, None);
    }
}

/// `oracle.model-side.context`, the root's system prompt: with the `subagent` family switched
/// on and profiles configured, every request of the root lists them
/// (`core.context.system-prompt`, `bub.profile.listed`: the line ``Agent profiles (pass the
/// name as `agent` to `subagent`):`` and `- name: description` for each), whether or not the
/// family is offered at the root's depth. In process, where the setup holds the profiles.
fn profiles_listed(side: &ModelSide, rules: &Rules, setup: Option<&Setup>, out: &mut Out) {
    let Some(setup) = setup.filter(|s| rules.subagent_tools && !s.profiles.is_empty()) else { return };
    let Some(root) = out.agents.of.keys().find(|a| a.depth() == 0) else { return };
    let header = "Agent profiles (pass the name as `agent` to `subagent`):";
    let lines: Vec<String> = std::iter::once(header.to_string())
        .chain(setup.profiles.iter().map(|p| format!("- {}: {}", p.name, p.description)))
        .collect();
    let Some(&(i, n)) = out.agents.exchanges(root).first() else { return };
    let system = &side.exchanges[i].system;
    if let Some(missing) = lines.iter().find(|l| !system.lines().any(|x| x == l.as_str())) {
        out.at(
            "context",
            "oracle.model-side.context",
            i,
            format!("the root's request #{n} has a system prompt without the line {missing:?}: with the subagent family on, the root's prompt lists the profiles"),
            None,
        );
    }
}

/// `oracle.model-side.terminal`: a reply holding one of the dialect's terminal calls
/// (`final_answer`, `fail`) runs none of its calls and ends its agent's loop
/// ([`roku.terminal.no-other-call-runs`], [`roku.terminal.scan-first`]): the agent's next
/// request that keeps the reply gains something besides answers to its calls (a new turn's
/// message, a notification, a message sent to it), or the loop went on as if the terminal call
/// were a tool. Answers to the reply's calls beside something new are not read as runs: a
/// runtime that goes on with the conversation (a held root woken by a notification) must answer
/// every call before the API takes it; whether such an answer is a run's result the traffic
/// does not say.
fn terminal(side: &ModelSide, dialect: &Dialect, out: &mut Out) {
    let mut findings = Vec::new();
    for list in out.agents.of.values() {
        for (k, &(x, n)) in list.iter().enumerate() {
            let e = &side.exchanges[x];
            let Some(reply) = &e.reply else { continue };
            let Some(call) = reply.tool_calls.iter().find(|c| dialect.terminal.iter().any(|t| t.name == c.name)) else {
                continue;
            };
            let Some(&(y, _)) = list.get(k + 1) else { continue };
            let later: Vec<&Message> = side.exchanges[y].messages.iter().collect();
            let at = e.messages.len();
            let Some(kept) = later.get(at).filter(|m| kept_as(history(side), m, reply)) else { continue };
            let rest = &later[at + 1..];
            let answers_a_call = |m: &&&Message| {
                m.role == Role::Tool && kept.tool_calls.iter().any(|c| m.tool_call_id.as_deref() == Some(c.id.as_str()))
            };
            // Answers beside something new (a notification waking a held root) are what Chat
            // Completions demands before a conversation goes on (every call answered), not runs.
            let gains_more = rest.iter().any(|m| !answers_a_call(&m));
            if let Some(answer) = rest.iter().find(answers_a_call).filter(|_| !gains_more) {
                findings.push((
                    y,
                    format!(
                        "its request #{n}'s reply holds the terminal call `{}`, which ends the loop and runs none of the reply's calls, yet this request answers one of them as a tool",
                        call.name
                    ),
                    Some((*answer).clone()),
                ));
            } else if rest.is_empty() {
                findings.push((
                    y,
                    format!(
                        "its request #{n}'s reply holds the terminal call `{}`, which ends the loop, yet it asks again with nothing new",
                        call.name
                    ),
                    None,
                ));
            }
        }
    }
    for (i, message, m) in findings {
        out.at("terminal", "oracle.model-side.terminal", i, message, m.as_ref());
    }
}

/// `oracle.model-side.sessions`: a named session serves one run at a time
/// ([`bub.session.named-one-at-a-time`]): no run on a session first asks while another run on it
/// has begun and not yet ended (its final reply given; a run whose end the endpoint never saw is
/// counted until its last request or reply only, so an overlap is never assumed).
fn sessions(side: &ModelSide, dialect: &Dialect, out: &mut Out) {
    // (session, agent, first exchange, start, end) of every run on a named session.
    let mut on: Vec<(&str, &AgentId, usize, Duration, Duration)> = Vec::new();
    for c in &side.calls {
        let (SessionKind::Named(name), Some(child)) = (&c.session, child_of(c)) else { continue };
        if on.iter().any(|(_, a, ..)| *a == child) {
            continue;
        }
        for run in runs(out.agents, child, dialect) {
            let (first, last) = (run[0].0, run[run.len() - 1].0);
            let e = &side.exchanges[last];
            on.push((name, child, first, side.exchanges[first].arrived, e.replied.unwrap_or(e.arrived)));
        }
    }
    let mut findings = Vec::new();
    for &(name, agent, first, start, _) in &on {
        let earlier = on.iter().find(|&&(n, a, f, s, end)| {
            n == name && (a != agent || f != first) && (s < start || s == start && f < first) && start < end
        });
        if let Some(&(_, other, _, s, end)) = earlier {
            findings.push((
                first,
                format!(
                    "a run on session {name:?} first asks at {start:?}, while {other}'s run on it (from {s:?} to {end:?}) has not ended: a named session serves one run at a time"
                ),
            ));
        }
    }
    findings.extend(in_use_accepted(side, out.agents, dialect));
    for (i, message) in findings {
        out.at("sessions", "oracle.model-side.sessions", i, message, None);
    }
}

/// A spawn call on a named session accepted while an earlier call's task on it had not ended
/// (`bub.session.named-one-at-a-time`: the session is in use from the call that takes it, queued
/// or running, until its run ends): the task was still queued at the later call (its child
/// first asked after it) or still running (its run's final reply came after it). Instants equal
/// to the later call's are no evidence either way. Cited at the later call's child's first
/// request, or at the caller's request holding the result.
fn in_use_accepted(side: &ModelSide, agents: &Agents, dialect: &Dialect) -> Vec<(usize, String)> {
    let mut findings = Vec::new();
    for (k, later) in side.calls.iter().enumerate() {
        let SessionKind::Named(name) = &later.session else { continue };
        if later.sync || matches!(later.outcome, CallOutcome::Refused | CallOutcome::Waiting { .. }) {
            continue;
        }
        let Some(at) = made_at(side, dialect, later) else { continue };
        let busy = side.calls[..k].iter().find_map(|earlier| {
            if earlier.sync || earlier.parent != later.parent || earlier.session != later.session {
                return None;
            }
            let child = child_of(earlier)?;
            let run = runs(agents, child, dialect).into_iter().next()?;
            let first = side.exchanges[run[0].0].arrived;
            let last = &side.exchanges[run[run.len() - 1].0];
            let ended = last.reply.as_ref().filter(|r| dialect.final_text(r).is_some()).and(last.replied);
            let queued = first > at && !earlier.first_run_by_send;
            let running = first <= at && (ended.is_some_and(|t| t > at) || last.arrived > at);
            (queued || running).then(|| (child.clone(), if queued { "queued" } else { "running" }))
        });
        let Some((other, state)) = busy else { continue };
        let cite = child_of(later).and_then(|c| agents.exchanges(c).first()).map_or(later.exchange, |x| x.0);
        findings.push((
            cite,
            format!(
                "the call for session {name:?} (exchange {}) was accepted while {other}'s task on it was still {state}: a named session in use refuses the call",
                later.exchange
            ),
        ));
    }
    findings
}

/// `oracle.model-side.call-results`: in every request, the results of an assistant message's
/// tool calls come right after it, before any other message (Chat Completions requires it;
/// `roku.nudge.after-regular-call` puts a nudge after its call's result, so a runtime notice
/// right after a result is allowed). A call left unanswered (a
/// fork snapshot taken at the call, a terminal call held while children run) is no finding:
/// only a message inserted before a result that does come.
fn call_results(side: &ModelSide, dialect: &Dialect, out: &mut Out) {
    let mut findings = Vec::new();
    for (i, e) in side.exchanges.iter().enumerate() {
        let messages: Vec<&Message> = e.messages.iter().collect();
        'request: for (k, m) in messages.iter().enumerate() {
            if m.role != Role::Assistant || m.tool_calls.is_empty() {
                continue;
            }
            let mut open: Vec<&str> = m.tool_calls.iter().map(|c| c.id.as_str()).collect();
            for next in k + 1..messages.len() {
                if open.is_empty() {
                    break;
                }
                let r = messages[next];
                if r.role == Role::Tool {
                    open.retain(|id| r.tool_call_id.as_deref() != Some(*id));
                    continue;
                }
                // A runtime notice right after a regular call's result (a nudge, one per call).
                let notice = r.role == Role::User
                    && messages[next - 1].role == Role::Tool
                    && dialect.notices.iter().any(|n| r.content.starts_with(n.as_str()));
                if notice {
                    continue;
                }
                let late = open.iter().find(|id| {
                    messages[next..].iter().any(|x| x.role == Role::Tool && x.tool_call_id.as_deref() == Some(**id))
                });
                if let Some(id) = late {
                    findings.push((
                        i,
                        format!(
                            "message {next} stands between the assistant message {k} and the results of its calls (call {id} is answered only after it)"
                        ),
                        r.clone(),
                    ));
                    break 'request;
                }
                break;
            }
        }
    }
    for (i, message, m) in findings {
        out.at("call-results", "oracle.model-side.call-results", i, message, Some(&m));
    }
}

/// The proof on a core that reports its aliases (the built-in core under `--judge
/// model-side`): every exchange's attribution is the alias the core put on the request.
/// Reads `exchanges` (the harness's record, with the core's aliases) only to compare.
///
/// One difference is not a finding: a child numbered higher than the core numbered it by
/// spawn calls of its parent, made before its own, whose fate the model never saw (a call the
/// approval gate denied, in a reply after which the parent never asked again: fuzz case
/// 14317). Whether such a call made a child shows nowhere the model can read, so the number
/// is the attributor's best reading; the requests are still the same agent's, under the same
/// parent, and each alias stands for one agent of the core's and no other.
pub fn proof(side: &ModelSide, exchanges: &[crate::evidence::Exchange]) -> Vec<Finding> {
    let mut out = Vec::new();
    // Each alias read as another: one core alias for each, and no core alias twice.
    let mut read_as: BTreeMap<String, String> = BTreeMap::new();
    for (i, e) in exchanges.iter().enumerate() {
        let (got, explained) = match side.attributions.get(i) {
            Some(Attribution::Agent(a)) => {
                let want = &e.request.agent;
                let consistent = match read_as.get(a.alias.as_str()) {
                    Some(was) => was == want.as_str(),
                    None => !read_as.values().any(|v| v == want.as_str()),
                };
                let explained = consistent && unseen_calls_explain(side, &a.alias, want);
                if explained {
                    read_as.insert(a.alias.to_string(), want.to_string());
                }
                (a.alias.to_string(), explained)
            }
            Some(Attribution::Side(_)) => ("a side request".to_string(), false),
            Some(Attribution::Unattributed(_)) | None => continue,
        };
        if got != e.request.agent.as_str() && !explained {
            out.push(Finding {
                oracle: "attribution",
                clause: "oracle.model-side.attribution",
                agent: e.request.agent.to_string(),
                request: 0,
                exchange: i,
                message: format!("the request is put down to {got}, but the core sent it as {}", e.request.agent),
                offending: e.request.messages.last().map(show),
            });
        }
    }
    out
}

/// Whether the attributor's `got` and the core's `want` name one agent, numbered apart only
/// by spawn calls whose fate never showed: the same at the root, or parents that so agree and
/// a last number that is higher by no more than the calls of that parent, made before
/// `got`'s own, still waiting when the run ended.
fn unseen_calls_explain(side: &ModelSide, got: &AgentId, want: &AgentId) -> bool {
    if got == want {
        return true;
    }
    let (Some(gp), Some(wp)) = (got.parent(), want.parent()) else { return false };
    if !unseen_calls_explain(side, &gp, &wp) {
        return false;
    }
    let number = |a: &AgentId| a.as_str().rsplit('/').next().and_then(|n| n.parse::<usize>().ok());
    let (Some(g), Some(w)) = (number(got), number(want)) else { return false };
    if g == w {
        return true;
    }
    let Some(own) = side.calls.iter().position(|c| c.outcome == CallOutcome::Child(got.clone())) else { return false };
    let unseen =
        side.calls[..own].iter().filter(|c| c.parent == gp && matches!(c.outcome, CallOutcome::Waiting { .. })).count();
    g > w && g - w <= unseen
}

/// Two runs of one scenario and seed as the model saw them: the same requests, attributed
/// alike, in the same order.
pub fn determinism(a: &ModelSide, b: &ModelSide) -> Option<Finding> {
    let at =
        (0..a.exchanges.len().max(b.exchanges.len())).find(|&i| match (a.exchanges.get(i), b.exchanges.get(i)) {
            (Some(x), Some(y)) => {
                x.messages != y.messages || x.arrived != y.arrived || a.attributions[i] != b.attributions[i]
            }
            _ => true,
        })?;
    Some(Finding {
        oracle: "determinism",
        clause: "oracle.determinism.byte-identical",
        agent: a.alias(at.min(a.exchanges.len().saturating_sub(1))).map_or("?".to_string(), ToString::to_string),
        request: 0,
        exchange: at,
        message: "two runs of the same scenario and seed differ as the model saw them from this exchange on"
            .to_string(),
        offending: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On virtual times order is exact (ties in call order); on the wire's wall times two
    /// results within the slack are not judged, and a later one listed first beyond it is.
    #[test]
    fn completion_order_has_a_slack_on_wall_times_only() {
        let ms = Duration::from_millis;
        assert!(out_of_order((ms(110), 0), (ms(100), 1), false));
        assert!(out_of_order((ms(100), 1), (ms(100), 0), false));
        assert!(!out_of_order((ms(100), 0), (ms(100), 1), false));
        assert!(!out_of_order((ms(157), 0), (ms(100), 1), true));
        assert!(!out_of_order((ms(100), 1), (ms(100), 0), true));
        assert!(out_of_order((ms(201), 0), (ms(100), 1), true));
    }
}

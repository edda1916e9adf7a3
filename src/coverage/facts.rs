//! What a run shows, indexed once for all the detectors: the core events with each agent's
//! budget before them, every tool call with its start and end, every model reply with what
//! followed it, every spawn, every run of a background task from its queueing to its
//! delivery, and what reached the root from outside its loop, instant by instant. Built from
//! the evidence alone; it never reads the core.
//!
//! It is not the oracles' index (`oracles::index`), on purpose: the two answer different
//! questions (which clauses a run shows, against whether it broke one), and sharing the
//! matching would let one mistake both hide a violation and credit its clause as shown. What
//! they do share is the rules' fixed words, [`crate::rules::words`].

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use crate::evidence::{Evidence, Exchange};
use crate::rules::Rules;
use crate::sut::AgentId;
use crate::sut::event::{Event, Family, Status, TaskStatus, Via};
use crate::sut::llm::LlmRequest;
use crate::trace::What;

pub(super) use crate::rules::words::{DEPTH_ERROR, EXHAUSTED, NO_TASK, SUBAGENT_FAMILY as FAMILY, TERMINAL};

/// One core event of the trace.
#[derive(Clone, Copy)]
pub(super) struct Ev<'a> {
    pub(super) at: Duration,
    pub(super) agent: &'a AgentId,
    pub(super) event: &'a Event,
}

/// One tool call that reached the dispatcher: a `tool.start` / `tool.end` pair, or a lone
/// `tool.end` (an unknown name), or a lone `tool.start` (a child dropped at its limit).
pub(super) struct Call<'a> {
    pub(super) agent: &'a AgentId,
    pub(super) tool: &'a str,
    pub(super) args: Option<&'a Value>,
    pub(super) start: Option<usize>,
    pub(super) end: Option<usize>,
    pub(super) is_error: bool,
    pub(super) result: &'a str,
    pub(super) budget: u32,
    pub(super) recovery: u32,
    /// What the caller had before the call (its last reported budget and recovery).
    pub(super) budget_before: Option<u32>,
    pub(super) recovery_before: Option<u32>,
    pub(super) response: Option<usize>,
    /// The spawn the call made (a child created, or a named task continued), if it made one.
    pub(super) spawn: Option<usize>,
}

/// One model reply and what followed it in the same agent, until its next request.
#[derive(Default)]
pub(super) struct Response<'a> {
    pub(super) agent: Option<&'a AgentId>,
    pub(super) at: usize,
    pub(super) text: &'a str,
    pub(super) calls: &'a [String],
    /// The budget the request answered had (what the agent had before this reply).
    pub(super) budget: Option<u32>,
    pub(super) ran: Vec<usize>,
    pub(super) denied: Vec<usize>,
    pub(super) nudges: Vec<usize>,
    pub(super) step: Option<(usize, u32)>,
    pub(super) ended: Option<usize>,
    pub(super) held: Option<usize>,
    pub(super) spawns: Vec<usize>,
}

/// A child created by a spawn (a new child, or a continued named task).
pub(super) struct Spawn<'a> {
    pub(super) at: usize,
    pub(super) parent: &'a AgentId,
    pub(super) child: &'a AgentId,
    pub(super) family: Family,
    pub(super) cost: u32,
    pub(super) grant: u32,
    pub(super) before: u32,
    pub(super) after: u32,
    pub(super) call: Option<usize>,
}

/// Something that reached the root from outside its own loop, in the instant it happened: a
/// background run's result (the run ended by anything but a cancel, which the root asked for
/// and reads from its call), or a steering message.
#[derive(Clone, Copy)]
pub(super) struct Arrival {
    /// Its trace position (the `task.ended`, or the root's `steered`).
    pub(super) at: usize,
    /// The run whose result it is; `None` for a steering message.
    pub(super) run: Option<usize>,
}

/// One run of a background task: queued, perhaps started, perhaps ended, perhaps delivered.
pub(super) struct TaskRun<'a> {
    pub(super) id: &'a str,
    pub(super) child: &'a AgentId,
    pub(super) session: &'a str,
    pub(super) queued: usize,
    pub(super) started: Option<usize>,
    pub(super) timeout: Option<Duration>,
    pub(super) ended: Option<usize>,
    pub(super) status: Option<TaskStatus>,
    pub(super) body: &'a str,
    pub(super) delivered: Vec<(usize, Via)>,
    pub(super) spawn: Option<usize>,
}

pub(super) struct Facts<'a> {
    pub(super) e: &'a Evidence<'a>,
    pub(super) rules: &'a Rules,
    pub(super) ev: Vec<Ev<'a>>,
    /// The risk gate's questions: (trace order among `ev`, agent, tool, approved).
    pub(super) asked: Vec<(usize, &'a AgentId, &'a str, bool)>,
    pub(super) prev_budget: Vec<Option<u32>>,
    pub(super) calls: Vec<Call<'a>>,
    pub(super) responses: Vec<Response<'a>>,
    pub(super) spawns: Vec<Spawn<'a>>,
    pub(super) runs: Vec<TaskRun<'a>>,
    /// What reached the root from outside its loop, in trace order.
    pub(super) arrivals: Vec<Arrival>,
    pub(super) exchanges: BTreeMap<&'a AgentId, Vec<&'a Exchange>>,
    /// Each agent's event positions, and its `llm.request` positions, in order.
    by_agent: BTreeMap<&'a AgentId, Vec<usize>>,
    requests_at: BTreeMap<&'a AgentId, Vec<usize>>,
    /// Each background run that asked the model: (the run, its first request, the arguments
    /// of the call that started it).
    children: Vec<(usize, &'a Exchange, Option<&'a Value>)>,
}

pub(super) fn budget_of(event: &Event) -> Option<u32> {
    match event {
        Event::TurnStarted { budget, .. }
        | Event::TurnEnded { budget, .. }
        | Event::AgentStarted { budget, .. }
        | Event::LlmRequest { budget, .. }
        | Event::Denied { budget, .. }
        | Event::ToolEnded { budget, .. }
        | Event::Nudge { budget, .. }
        | Event::StepCompleted { budget, .. }
        | Event::AgentEnded { budget, .. } => Some(*budget),
        Event::Spawned { budget_after, .. } => Some(*budget_after),
        _ => None,
    }
}

impl<'a> Facts<'a> {
    pub(super) fn new(e: &'a Evidence<'a>) -> Facts<'a> {
        let mut f = Facts {
            e,
            rules: e.rules,
            ev: Vec::new(),
            asked: Vec::new(),
            prev_budget: Vec::new(),
            calls: Vec::new(),
            responses: Vec::new(),
            spawns: Vec::new(),
            runs: Vec::new(),
            arrivals: Vec::new(),
            exchanges: BTreeMap::new(),
            by_agent: BTreeMap::new(),
            requests_at: BTreeMap::new(),
            children: Vec::new(),
        };
        for entry in &e.trace.entries {
            match &entry.what {
                What::Core(event) => f.ev.push(Ev { at: entry.at, agent: &entry.agent, event }),
                What::Asked { tool, approve } => f.asked.push((f.ev.len(), &entry.agent, tool, *approve)),
                What::Stopped(_) => {}
            }
        }
        for exchange in e.exchanges {
            f.exchanges.entry(&exchange.request.agent).or_default().push(exchange);
        }
        for (i, ev) in f.ev.iter().enumerate() {
            f.by_agent.entry(ev.agent).or_default().push(i);
            if matches!(ev.event, Event::LlmRequest { .. }) {
                f.requests_at.entry(ev.agent).or_default().push(i);
            }
        }
        f.index();
        f.children = (0..f.runs.len())
            .filter_map(|r| {
                let run = &f.runs[r];
                let started = f.after(run.child, run.queued).find(|(_, e)| matches!(e, Event::AgentStarted { .. }))?.0;
                let first = f.first_request_after(run.child, started)?;
                let args = run.spawn.and_then(|s| f.spawn_call(&f.spawns[s])).and_then(|c| c.args);
                Some((r, first, args))
            })
            .collect();
        f
    }

    fn index(&mut self) {
        let mut budget: BTreeMap<&AgentId, u32> = BTreeMap::new();
        let mut recovery: BTreeMap<&AgentId, u32> = BTreeMap::new();
        let mut open: BTreeMap<(&AgentId, &str), usize> = BTreeMap::new();
        let mut current: BTreeMap<&AgentId, usize> = BTreeMap::new();
        let mut last_call: BTreeMap<&AgentId, usize> = BTreeMap::new();
        let mut runs_of: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        let initial_recovery = self.rules.recovery_budget;
        for pos in 0..self.ev.len() {
            let Ev { agent, event, .. } = self.ev[pos];
            let before = budget.get(agent).copied();
            self.prev_budget.push(match event {
                Event::TurnStarted { .. } | Event::AgentStarted { .. } => None,
                Event::Spawned { budget_before, .. } => Some(*budget_before),
                _ => before,
            });
            match event {
                Event::TurnStarted { .. } | Event::AgentStarted { .. } => {
                    recovery.insert(agent, initial_recovery);
                    current.remove(agent);
                }
                Event::LlmRequest { .. } | Event::LlmFailed { .. } => {
                    current.remove(agent);
                }
                Event::LlmReply { text, calls } => {
                    current.insert(agent, self.responses.len());
                    self.responses.push(Response {
                        agent: Some(agent),
                        at: pos,
                        text,
                        calls,
                        budget: before,
                        ..Response::default()
                    });
                }
                Event::ToolStarted { call_id, tool, args } => {
                    open.insert((agent, call_id.as_str()), self.calls.len());
                    last_call.insert(agent, self.calls.len());
                    self.calls.push(Call {
                        agent,
                        tool,
                        args: Some(args),
                        start: Some(pos),
                        end: None,
                        is_error: false,
                        result: "",
                        budget: before.unwrap_or(0),
                        recovery: recovery.get(agent).copied().unwrap_or(initial_recovery),
                        budget_before: before,
                        recovery_before: recovery.get(agent).copied(),
                        response: current.get(agent).copied(),
                        spawn: None,
                    });
                }
                Event::ToolEnded { call_id, tool, is_error, result, budget: left, recovery: rec_left } => {
                    let index = match open.remove(&(agent, call_id.as_str())) {
                        Some(index) => index,
                        None => {
                            self.calls.push(Call {
                                agent,
                                tool,
                                args: None,
                                start: None,
                                end: None,
                                is_error: false,
                                result: "",
                                budget: 0,
                                recovery: 0,
                                budget_before: before,
                                recovery_before: recovery.get(agent).copied(),
                                response: current.get(agent).copied(),
                                spawn: None,
                            });
                            self.calls.len() - 1
                        }
                    };
                    let call = &mut self.calls[index];
                    call.end = Some(pos);
                    call.is_error = *is_error;
                    call.result = result;
                    call.budget = *left;
                    call.recovery = *rec_left;
                    if let Some(r) = call.response {
                        self.responses[r].ran.push(index);
                    }
                    recovery.insert(agent, *rec_left);
                }
                Event::Nudge { recovery: rec_left, .. } => {
                    recovery.insert(agent, *rec_left);
                }
                Event::Spawned { child, family, cost, grant, budget_before, budget_after, .. } => {
                    let call = last_call.get(agent).copied().filter(|c| self.calls[*c].end.is_none());
                    if let Some(r) = current.get(agent) {
                        self.responses[*r].spawns.push(self.spawns.len());
                    }
                    if let Some(c) = call {
                        self.calls[c].spawn = Some(self.spawns.len());
                    }
                    self.spawns.push(Spawn {
                        at: pos,
                        parent: agent,
                        child,
                        family: *family,
                        cost: *cost,
                        grant: *grant,
                        before: *budget_before,
                        after: *budget_after,
                        call,
                    });
                }
                Event::TaskQueued { task_id, child, session } => {
                    let spawn = self.spawns.iter().rposition(|s| s.child == child);
                    runs_of.entry(task_id.as_str()).or_default().push(self.runs.len());
                    self.runs.push(TaskRun {
                        id: task_id,
                        child,
                        session,
                        queued: pos,
                        started: None,
                        timeout: None,
                        ended: None,
                        status: None,
                        body: "",
                        delivered: Vec::new(),
                        spawn,
                    });
                }
                Event::TaskStarted { task_id, timeout, .. } => {
                    if let Some(r) = runs_of.get(task_id.as_str()).and_then(|r| r.last()) {
                        self.runs[*r].started = Some(pos);
                        self.runs[*r].timeout = *timeout;
                    }
                }
                Event::TaskEnded { task_id, status, body, .. } => {
                    if let Some(r) = runs_of.get(task_id.as_str()).and_then(|r| r.last()) {
                        self.runs[*r].ended = Some(pos);
                        self.runs[*r].status = Some(*status);
                        self.runs[*r].body = body;
                        if *status != TaskStatus::Cancelled {
                            self.arrivals.push(Arrival { at: pos, run: Some(*r) });
                        }
                    }
                }
                Event::Delivered { task_id, via, .. } => {
                    let runs = runs_of.get(task_id.as_str()).map(Vec::as_slice).unwrap_or_default();
                    let run =
                        runs.iter().find(|r| self.runs[**r].ended.is_some() && self.runs[**r].delivered.is_empty());
                    if let Some(r) = run.or(runs.last()) {
                        self.runs[*r].delivered.push((pos, *via));
                    }
                }
                Event::Steered { .. } if agent.depth() == 0 => {
                    self.arrivals.push(Arrival { at: pos, run: None });
                }
                _ => {}
            }
            if let Some(r) = current.get(agent).copied() {
                let response = &mut self.responses[r];
                match event {
                    Event::Denied { .. } => response.denied.push(pos),
                    Event::Nudge { .. } => response.nudges.push(pos),
                    Event::StepCompleted { step_index, .. } => response.step = Some((pos, *step_index)),
                    Event::AgentEnded { .. } => response.ended = Some(pos),
                    Event::AwaitingChildren { .. } => response.held = Some(pos),
                    _ => {}
                }
            }
            if let Some(left) = budget_of(event) {
                budget.insert(agent, left);
            }
        }
    }

    // --- small queries ---

    pub(super) fn events(&self) -> impl Iterator<Item = (usize, &Ev<'a>)> + '_ {
        self.ev.iter().enumerate()
    }

    pub(super) fn any(&self, p: impl Fn(&Event) -> bool) -> bool {
        self.ev.iter().any(|e| p(e.event))
    }

    /// The events of `agent` after position `from`.
    pub(super) fn after<'s>(
        &'s self,
        agent: &'s AgentId,
        from: usize,
    ) -> impl Iterator<Item = (usize, &'a Event)> + 's {
        let mine = self.by_agent.get(agent).map_or(&[][..], Vec::as_slice);
        let at = mine.partition_point(|i| *i <= from);
        mine[at..].iter().map(|i| (*i, self.ev[*i].event))
    }

    /// The next event of `agent` after position `from`.
    pub(super) fn next_of(&self, agent: &AgentId, from: usize) -> Option<&'a Event> {
        self.after(agent, from).next().map(|(_, e)| e)
    }

    /// Where `agent`'s loop ended after `from`: the position and the event.
    pub(super) fn end_of(&self, agent: &AgentId, from: usize) -> Option<(usize, &'a Event)> {
        self.after(agent, from).find(|(_, e)| matches!(e, Event::AgentEnded { .. }))
    }

    pub(super) fn requests(&self, agent: &AgentId) -> &[&'a Exchange] {
        self.exchanges.get(agent).map_or(&[], Vec::as_slice)
    }

    pub(super) fn root_requests(&self) -> &[&'a Exchange] {
        self.requests(&AgentId::root())
    }

    pub(super) fn family_tool(name: &str) -> bool {
        name == "Agent" || FAMILY.contains(&name)
    }

    /// A call that reached the `Agent` tool or the `subagent` family (not an unknown name).
    pub(super) fn reached_family(call: &Call) -> bool {
        call.start.is_some() && Self::family_tool(call.tool)
    }

    /// A catalog tool call: it started, and is no spawning or family tool.
    pub(super) fn catalog(call: &Call) -> bool {
        call.start.is_some() && !Self::family_tool(call.tool)
    }

    /// A call answered as an unknown name.
    pub(super) fn unknown(&self, call: &Call) -> bool {
        call.start.is_none() && call.is_error && call.result == self.rules.unknown_tool(call.tool)
    }

    /// A regular call (`roku.md` §1.5): a catalog call or an unknown name.
    pub(super) fn regular(&self, call: &Call) -> bool {
        Self::catalog(call) || self.unknown(call)
    }

    pub(super) fn ended_calls(&self) -> impl Iterator<Item = &Call<'a>> + '_ {
        self.calls.iter().filter(|c| c.end.is_some())
    }

    pub(super) fn calls_to<'s>(&'s self, tool: &'s str) -> impl Iterator<Item = &'s Call<'a>> + 's {
        self.ended_calls().filter(move |c| c.tool == tool && c.start.is_some())
    }

    pub(super) fn result_starts(&self, tool: &str, prefix: &str) -> bool {
        self.calls_to(tool).any(|c| c.is_error && c.result.starts_with(prefix))
    }

    pub(super) fn fg_spawns(&self) -> impl Iterator<Item = &Spawn<'a>> + '_ {
        self.spawns.iter().filter(|s| s.family == Family::Foreground)
    }

    pub(super) fn bg_spawns(&self) -> impl Iterator<Item = &Spawn<'a>> + '_ {
        self.spawns.iter().filter(|s| s.family == Family::Background)
    }

    /// The `tool.end` of the call that made `spawn`.
    pub(super) fn spawn_call(&self, spawn: &Spawn) -> Option<&Call<'a>> {
        spawn.call.map(|c| &self.calls[c])
    }

    /// A foreground child's `child.result` or `timeout` at its parent, after the spawn.
    pub(super) fn fg_outcome(&self, spawn: &Spawn) -> Option<(usize, &'a Event)> {
        self.after(spawn.parent, spawn.at).find(|(_, e)| match e {
            Event::ChildResult { child, .. } | Event::TimedOut { child, .. } => child == spawn.child,
            _ => false,
        })
    }

    pub(super) fn fg_result(&self, spawn: &Spawn) -> Option<(usize, bool, usize, Option<usize>)> {
        match self.fg_outcome(spawn)? {
            (i, Event::ChildResult { is_error, chars, truncated_to, .. }) => {
                Some((i, *is_error, *chars, *truncated_to))
            }
            _ => None,
        }
    }

    pub(super) fn fg_timed_out(&self, spawn: &Spawn) -> Option<(usize, Duration)> {
        match self.fg_outcome(spawn)? {
            (i, Event::TimedOut { after, .. }) => Some((i, *after)),
            _ => None,
        }
    }

    /// The final message of a child's loop ended after `from`.
    pub(super) fn final_message(&self, child: &AgentId, from: usize) -> Option<(&'a str, Status)> {
        self.ev.iter().skip(from + 1).filter(|e| e.agent == child).find_map(|e| match e.event {
            Event::AgentEnded { message, status, .. } => Some((message.as_str(), *status)),
            _ => None,
        })
    }

    pub(super) fn agent_limit(&self) -> Option<Duration> {
        self.rules.agent_timeout.filter(|t| !t.is_zero())
    }

    pub(super) fn task_calls(&self) -> impl Iterator<Item = &Call<'a>> + '_ {
        self.calls_to("subagent")
    }

    /// The run a `subagent` call started, if it started one.
    pub(super) fn run_of_call(&self, call: &Call) -> Option<&TaskRun<'a>> {
        let spawn = call.spawn?;
        self.runs.iter().find(|r| r.spawn == Some(spawn))
    }

    pub(super) fn runs_started_later(&self) -> impl Iterator<Item = &TaskRun<'a>> + '_ {
        self.runs
            .iter()
            .filter(|r| r.started.is_some_and(|s| self.ev[s].at > self.ev[r.queued].at || self.queued_behind(r)))
    }

    /// Whether a run waited in the queue: it did not start in the instant and the call that
    /// queued it (another event of the parent came between).
    pub(super) fn queued_behind(&self, run: &TaskRun) -> bool {
        let Some(started) = run.started else { return true };
        self.ev[run.queued + 1..started].iter().any(|e| matches!(e.event, Event::ToolEnded { .. }))
    }

    pub(super) fn running_at(&self, pos: usize) -> usize {
        self.runs.iter().filter(|r| r.started.is_some_and(|s| s < pos) && r.ended.is_none_or(|e| e > pos)).count()
    }

    pub(super) fn unfinished_at(&self, pos: usize) -> bool {
        self.runs.iter().any(|r| r.queued < pos && r.ended.is_none_or(|e| e > pos))
    }

    /// The first request of `agent`'s run that began at `started` (its `agent.start`).
    pub(super) fn first_request_after(&self, agent: &AgentId, started: usize) -> Option<&'a Exchange> {
        self.requests(agent).get(self.requests_before(agent, started)).copied()
    }

    pub(super) fn root_system(&self) -> Option<&'a str> {
        self.root_requests().first().map(|e| &*e.request.system)
    }

    pub(super) fn tool_names(request: &LlmRequest) -> Vec<&str> {
        request.tools.iter().map(|t| t.name.as_str()).collect()
    }

    /// The last request `agent` sent before trace position `pos`.
    pub(super) fn request_before(&self, agent: &AgentId, pos: usize) -> Option<&'a Exchange> {
        let n = self.requests_before(agent, pos);
        n.checked_sub(1).and_then(|n| self.requests(agent).get(n).copied())
    }

    /// A background child's first request and the spawn's call arguments.
    pub(super) fn bg_children(&self) -> impl Iterator<Item = (&TaskRun<'a>, &'a Exchange, Option<&'a Value>)> + '_ {
        self.children.iter().map(|(r, first, args)| (&self.runs[*r], *first, *args))
    }

    /// How many `llm.request` events `agent` reported before position `pos`.
    pub(super) fn requests_before(&self, agent: &AgentId, pos: usize) -> usize {
        self.requests_at.get(agent).map_or(0, |at| at.partition_point(|i| *i < pos))
    }

    /// The tools a child of `parent_tools` is offered by default (`bub.child.tools-default`,
    /// `roku.child.tools`): without `ask_user`, the `subagent` family, and `Agent` when the
    /// child sits at the depth limit.
    pub(super) fn default_child_tools<'t>(&self, parent_tools: &[&'t str], child_depth: u32) -> Vec<&'t str> {
        parent_tools
            .iter()
            .copied()
            .filter(|t| {
                *t != "ask_user" && !FAMILY.contains(t) && (*t != "Agent" || child_depth < self.rules.depth_limit)
            })
            .collect()
    }
}

pub(super) fn arg<'v>(args: Option<&'v Value>, key: &str) -> Option<&'v Value> {
    args.and_then(|a| a.get(key))
}

pub(super) fn arg_str<'v>(args: Option<&'v Value>, key: &str) -> Option<&'v str> {
    arg(args, key).and_then(Value::as_str)
}

/// A list argument as the core reads it: an array of strings, or one comma-separated string.
pub(super) fn list(args: Option<&Value>, key: &str) -> Option<Vec<String>> {
    match arg(args, key)? {
        Value::Array(items) => Some(items.iter().filter_map(Value::as_str).map(str::to_string).collect()),
        Value::String(s) => Some(s.split(',').map(str::to_string).filter(|s| !s.trim().is_empty()).collect()),
        _ => None,
    }
}

pub(super) fn normalize(name: &str) -> String {
    name.trim().to_lowercase().replace('.', "_")
}

/// A time limit as the rules print it (`core.time.seconds-format`): whole seconds, or the
/// shortest decimal.
pub(super) fn seconds(limit: Duration) -> String {
    limit.as_secs_f64().to_string()
}

pub(super) fn json(text: &str) -> Option<Value> {
    serde_json::from_str(text).ok()
}

pub(super) fn notification(id: &str, status: &str, body: &str) -> String {
    format!("<subagent-notification task_id=\"{id}\" status=\"{status}\">\n{body}\n</subagent-notification>")
}

pub(super) fn is_exhausted(message: &str) -> bool {
    message.starts_with(EXHAUSTED) && message.contains(" steps; goal: ")
}

impl Facts<'_> {
    /// The tags of `tool` as offered to `agent`.
    pub(super) fn tool_tags(&self, agent: &AgentId, tool: &str) -> Option<&[String]> {
        self.requests(agent)
            .iter()
            .flat_map(|x| x.request.tools.iter())
            .find(|t| t.name == tool)
            .map(|t| t.tags.as_slice())
    }

    /// The position of `agent`'s first `llm.request` after `from`.
    pub(super) fn request_pos_after(&self, agent: &AgentId, from: usize) -> Option<usize> {
        self.after(agent, from).find(|(_, e)| matches!(e, Event::LlmRequest { .. })).map(|(i, _)| i)
    }

    /// The arrivals of the instant of trace position `pos` (the same virtual time), in order.
    pub(super) fn arrivals_in_instant_of(&self, pos: usize) -> &[Arrival] {
        let at = self.ev[pos].at;
        let from = self.arrivals.partition_point(|a| self.ev[a.at].at < at);
        let to = self.arrivals.partition_point(|a| self.ev[a.at].at <= at);
        &self.arrivals[from..to]
    }

    /// Whether `arrival` was under way before trace position `pos`: a steering message always
    /// is; a result is when its run had started before `pos` (a child the root starts at
    /// `pos` or later is a consequence of what it does there, not something due).
    pub(super) fn under_way_before(&self, arrival: &Arrival, pos: usize) -> bool {
        arrival.run.is_none_or(|r| self.runs[r].started.is_some_and(|s| s < pos))
    }

    /// Whether the root's request at `pos` woke it from a held turn: its last act before it
    /// (arrivals and deliveries are not its acts) was `awaiting`.
    pub(super) fn woke_held_root(&self, pos: usize) -> bool {
        let root = AgentId::root();
        let mine = self.by_agent.get(&root).map_or(&[][..], Vec::as_slice);
        let at = mine.partition_point(|i| *i < pos);
        mine[..at]
            .iter()
            .rev()
            .map(|i| self.ev[*i].event)
            .find(|e| !matches!(e, Event::Steered { .. } | Event::Delivered { .. } | Event::TimedOut { .. }))
            .is_some_and(|e| matches!(e, Event::AwaitingChildren { .. }))
    }
}

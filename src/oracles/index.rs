//! What several oracles read alike, built in one pass each: every model request matched to
//! the trace line that announced it, every call of a reply matched to the events that answer
//! it, and the background tasks as the trace shows them at each line.
//!
//! The matching follows the evidence contract (`docs/evidence.md`) and the rules alone: the
//! `k`-th `llm.request` of an agent announces its `k`-th exchange; the calls of a reply without
//! a terminal call run in order, each ending in one `denied` or one `tool.end` (a `tool.start`
//! before it when something started); a reply with a terminal call runs none of them
//! (`roku.terminal.no-other-call-runs`). Nothing here judges: an event no call explains is
//! simply left unmatched, for the oracles to report in their own words.
//!
//! Coverage keeps its own index (`coverage::facts`), on purpose: a matching mistake shared
//! by both would hide a violation and credit its clause as shown at once.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use crate::evidence::{Evidence, Exchange};
use crate::sut::AgentId;
use crate::sut::event::{Event, TaskStatus};
use crate::sut::llm::{Message, ToolCall};
use crate::trace::{Entry, What};

use super::core_events;

/// The terminal calls of an agent: `ask_user` is one only where it is offered, at the root
/// (`roku.child.ask-user-refused`).
pub(super) fn is_terminal(name: &str, agent: &AgentId) -> bool {
    matches!(name, "final_answer" | "fail") || (name == "ask_user" && agent.depth() == 0)
}

/// The first terminal call of a reply, which decides how the loop ends (`roku.terminal.scan-first`).
pub(super) fn first_terminal<'a>(calls: &'a [ToolCall], agent: &AgentId) -> Option<&'a ToolCall> {
    calls.iter().find(|c| is_terminal(&c.name, agent))
}

/// The names of the `subagent` family (`bub.tools.family`).
pub(super) use crate::rules::words::SUBAGENT_FAMILY as FAMILY;

/// Every agent the evidence names, numbered densely: at the trace lines, in the events (a
/// spawned child, a task's child) and in the requests. The oracles keep their per-agent state
/// in a [`PerAgent`] indexed by these numbers: with hundreds of agents, a map keyed by alias
/// searched at every event was most of the time judging took.
pub(super) struct Agents<'a> {
    numbers: BTreeMap<&'a AgentId, usize>,
    /// Per trace line: the number of its agent.
    of_line: Vec<usize>,
    /// Per exchange: the number of the agent that asked.
    of_exchange: Vec<usize>,
    /// The number of the root, `main`, if the evidence names it. Asking whether a line is the
    /// root's by number saves comparing its alias with a fresh `main`, whose text (another
    /// allocation than the trace's) an equality reads at every root line.
    root: Option<usize>,
}

impl<'a> Agents<'a> {
    fn new(e: &Evidence<'a>) -> Agents<'a> {
        let mut numbers: BTreeMap<&AgentId, usize> = BTreeMap::new();
        let mut number = |agent: &'a AgentId| {
            let next = numbers.len();
            *numbers.entry(agent).or_insert(next)
        };
        let mut of_line = Vec::with_capacity(e.trace.entries.len());
        let mut last: Option<(&AgentId, usize)> = None;
        for entry in &e.trace.entries {
            // Consecutive lines often share an agent: no search for those.
            let n = match last {
                Some((agent, n)) if *agent == entry.agent => n,
                _ => number(&entry.agent),
            };
            last = Some((&entry.agent, n));
            of_line.push(n);
            if let What::Core(event) = &entry.what
                && let Some(child) = event.child()
            {
                number(child);
            }
        }
        let of_exchange = e.exchanges.iter().map(|exchange| number(&exchange.request.agent)).collect();
        let root = numbers.get(&AgentId::root()).copied();
        Agents { numbers, of_line, of_exchange, root }
    }

    /// The number of the agent of trace line `line`.
    pub fn at(&self, line: usize) -> usize {
        self.of_line[line]
    }

    /// The number of the agent that asked in exchange `exchange` (its place in the evidence).
    pub fn asking(&self, exchange: usize) -> usize {
        self.of_exchange[exchange]
    }

    /// Whether trace line `line` is the root's.
    pub fn is_root(&self, line: usize) -> bool {
        Some(self.of_line[line]) == self.root
    }

    /// The number of the root, if the evidence names it.
    pub fn root(&self) -> Option<usize> {
        self.root
    }

    /// The number of `agent`, if the evidence names it.
    pub fn number(&self, agent: &AgentId) -> Option<usize> {
        self.numbers.get(agent).copied()
    }

    /// How many agents the evidence names.
    pub fn len(&self) -> usize {
        self.numbers.len()
    }
}

/// Per-agent state, by agent number ([`Agents`]): a map's lookups at the cost of an index.
pub(super) struct PerAgent<V>(Vec<Option<V>>);

impl<V> PerAgent<V> {
    pub fn new(agents: &Agents) -> PerAgent<V> {
        PerAgent(std::iter::repeat_with(|| None).take(agents.len()).collect())
    }

    pub fn get(&self, agent: usize) -> Option<&V> {
        self.0[agent].as_ref()
    }

    pub fn get_mut(&mut self, agent: usize) -> Option<&mut V> {
        self.0[agent].as_mut()
    }

    pub fn contains(&self, agent: usize) -> bool {
        self.0[agent].is_some()
    }

    /// Sets the state of `agent`, returning what it was.
    pub fn insert(&mut self, agent: usize, value: V) -> Option<V> {
        self.0[agent].replace(value)
    }

    pub fn remove(&mut self, agent: usize) -> Option<V> {
        self.0[agent].take()
    }

    /// The state of `agent`, made with `make` if it has none.
    pub fn or_insert_with(&mut self, agent: usize, make: impl FnOnce() -> V) -> &mut V {
        self.0[agent].get_or_insert_with(make)
    }
}

/// Requests and calls matched to trace lines.
pub(super) struct Index<'a> {
    /// Every agent, numbered.
    pub agents: Agents<'a>,
    /// Per trace line: the exchange an `llm.request` line announced.
    exchange: Vec<Option<&'a Exchange>>,
    /// Per trace line: the call a `tool.start`, `tool.end` or `denied` line belongs to.
    call: Vec<Option<&'a ToolCall>>,
    /// Per trace line: the reply an `llm.reply` line reports, as the model gave it.
    reply: Vec<Option<&'a Message>>,
    /// Per agent: its replies, in the order the model gave them.
    replies: PerAgent<Vec<&'a Message>>,
    /// The background tasks, numbered in the order of their first `task.queued`.
    task_numbers: BTreeMap<&'a str, usize>,
    /// Per task: the kind of the session last opened at its child before that first
    /// `task.queued` (`temp`, `fork`, `named`; empty if none).
    task_kinds: Vec<&'a str>,
    /// Per trace line: the task a `task.queued`, `task.start`, `task.end` or `delivered` line
    /// names, if it has been queued by then.
    task: Vec<Option<usize>>,
}

impl<'a> Index<'a> {
    pub fn new(e: &Evidence<'a>) -> Index<'a> {
        let n = e.trace.entries.len();
        let agents = Agents::new(e);
        let mut requests: PerAgent<VecDeque<&Exchange>> = PerAgent::new(&agents);
        let mut replies: PerAgent<Vec<&Message>> = PerAgent::new(&agents);
        for (k, exchange) in e.exchanges.iter().enumerate() {
            let number = agents.asking(k);
            requests.or_insert_with(number, VecDeque::new).push_back(exchange);
            if let Some(reply) = &exchange.reply {
                replies.or_insert_with(number, Vec::new).push(reply);
            }
        }
        let mut current: PerAgent<&Exchange> = PerAgent::new(&agents);
        let mut pending: PerAgent<VecDeque<&ToolCall>> = PerAgent::new(&agents);
        let mut opened: PerAgent<&str> = PerAgent::new(&agents);
        let mut index = Index {
            agents,
            exchange: vec![None; n],
            call: vec![None; n],
            reply: vec![None; n],
            replies,
            task_numbers: BTreeMap::new(),
            task_kinds: Vec::new(),
            task: vec![None; n],
        };
        for (i, entry, event) in core_events(e.trace) {
            let agent = index.agents.at(i);
            match event {
                Event::LlmRequest { .. } => {
                    let Some(exchange) = requests.get_mut(agent).and_then(VecDeque::pop_front) else { continue };
                    index.exchange[i] = Some(exchange);
                    current.insert(agent, exchange);
                }
                Event::LlmReply { .. } => {
                    let Some(reply) = current.get(agent).and_then(|x| x.reply.as_ref()) else { continue };
                    index.reply[i] = Some(reply);
                    let calls = pending.or_insert_with(agent, VecDeque::new);
                    calls.clear();
                    if first_terminal(&reply.tool_calls, &entry.agent).is_none() {
                        calls.extend(reply.tool_calls.iter());
                    }
                }
                Event::ToolStarted { tool, .. } => {
                    index.call[i] = pending.get(agent).and_then(|c| c.front().copied()).filter(|c| c.name == *tool);
                }
                Event::Denied { tool, .. } | Event::ToolEnded { tool, .. } => {
                    let Some(calls) = pending.get_mut(agent) else { continue };
                    if calls.front().is_some_and(|c| c.name == *tool) {
                        index.call[i] = calls.pop_front();
                    }
                }
                Event::SessionOpened { kind, .. } => {
                    opened.insert(agent, kind);
                }
                Event::TaskQueued { task_id, child, .. } => {
                    let next = index.task_kinds.len();
                    let task = *index.task_numbers.entry(task_id).or_insert(next);
                    if task == next {
                        let child = index.agents.number(child).expect("every child is numbered");
                        index.task_kinds.push(opened.get(child).copied().unwrap_or(""));
                    }
                    index.task[i] = Some(task);
                }
                Event::TaskStarted { task_id, .. }
                | Event::TaskEnded { task_id, .. }
                | Event::Delivered { task_id, .. } => {
                    index.task[i] = index.task_numbers.get(task_id.as_str()).copied();
                }
                _ => {}
            }
        }
        index
    }

    /// The exchange the `llm.request` on `line` announced.
    pub fn exchange(&self, line: usize) -> Option<&'a Exchange> {
        self.exchange.get(line).copied().flatten()
    }

    /// The reply the `llm.reply` on `line` reports.
    pub fn reply(&self, line: usize) -> Option<&'a Message> {
        self.reply.get(line).copied().flatten()
    }

    /// The replies of the agent numbered `agent`, in the order the model gave them.
    pub fn replies_of(&self, agent: usize) -> &[&'a Message] {
        self.replies.get(agent).map_or(&[], Vec::as_slice)
    }

    /// The call the `tool.start`, `tool.end` or `denied` on `line` belongs to.
    pub fn call(&self, line: usize) -> Option<&'a ToolCall> {
        self.call.get(line).copied().flatten()
    }

    /// The number of the task `id` names, if the trace ever queues it.
    pub fn task_number(&self, id: &str) -> Option<usize> {
        self.task_numbers.get(id).copied()
    }

    /// How many tasks the trace queues.
    pub fn task_count(&self) -> usize {
        self.task_kinds.len()
    }
}

/// Where a background task stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TaskState {
    Queued,
    Running,
    Done(TaskStatus),
}

impl TaskState {
    /// The status word results print (`queued`, `running`, `completed`, …).
    pub fn word(self) -> &'static str {
        match self {
            TaskState::Queued => "queued",
            TaskState::Running => "running",
            TaskState::Done(status) => status_word(status),
        }
    }

    pub fn active(self) -> bool {
        !matches!(self, TaskState::Done(_))
    }
}

/// One background task as the trace shows it.
pub(super) struct Task<'a> {
    pub id: &'a str,
    pub alias: &'a AgentId,
    /// Spawn order, from 0: the task's number in the index.
    pub seq: usize,
    /// The session key `task.queued` shows (`temp/<id>`, `fork/<id>` or the name).
    pub session: &'a str,
    /// The kind `session.open` showed (`temp`, `fork`, `named`).
    pub kind: &'a str,
    pub state: TaskState,
    /// Runs that ended with a result (completed, failed or timed out).
    pub results: usize,
    /// The line of its last `task.queued` (its current run's).
    pub queued_line: usize,
}

/// A finished run's result not yet read by the parent.
pub(super) struct Unread<'a> {
    pub task_id: &'a str,
    pub status: TaskStatus,
    pub body: &'a str,
    pub at: Duration,
    pub seq: usize,
    pub line: usize,
}

/// The background tasks at the current line, fed event by event. The index has numbered
/// them and matched the lines to them, so following one costs no search by id.
pub(super) struct Tasks<'a> {
    index: &'a Index<'a>,
    /// By task number: each task the trace has queued so far.
    tasks: Vec<Option<Task<'a>>>,
    by_alias: BTreeMap<&'a AgentId, &'a str>,
    /// Finished results not yet delivered, in completion order.
    pub unread: Vec<Unread<'a>>,
}

impl<'a> Tasks<'a> {
    /// No task yet.
    pub fn new(index: &'a Index<'a>) -> Tasks<'a> {
        let tasks = std::iter::repeat_with(|| None).take(index.task_count()).collect();
        Tasks { index, tasks, by_alias: BTreeMap::new(), unread: Vec::new() }
    }

    /// Follows one core event.
    #[inline]
    pub fn observe(&mut self, line: usize, entry: &'a Entry, event: &'a Event) {
        // Six oracles follow the tasks through every event, and most events are not about
        // them: those cost this test, not a call.
        if let Some(task) = self.index.task[line] {
            self.follow(task, line, entry, event);
        }
    }

    fn follow(&mut self, number: usize, line: usize, entry: &'a Entry, event: &'a Event) {
        match event {
            Event::TaskQueued { task_id, child, session } => {
                let kind = self.index.task_kinds[number];
                let task = self.tasks[number].get_or_insert(Task {
                    id: task_id,
                    alias: child,
                    seq: number,
                    session,
                    kind,
                    state: TaskState::Queued,
                    results: 0,
                    queued_line: line,
                });
                task.state = TaskState::Queued;
                task.queued_line = line;
                self.by_alias.insert(child, task_id);
            }
            Event::TaskStarted { .. } => {
                if let Some(task) = self.tasks[number].as_mut() {
                    task.state = TaskState::Running;
                }
            }
            Event::TaskEnded { task_id, status, body, .. } => {
                let Some(task) = self.tasks[number].as_mut() else { return };
                task.state = TaskState::Done(*status);
                if *status != TaskStatus::Cancelled {
                    task.results += 1;
                    let (seq, at) = (task.seq, entry.at);
                    self.unread.push(Unread { task_id, status: *status, body, at, seq, line });
                }
            }
            Event::Delivered { .. } => {
                // A result's `seq` is its task's number.
                if let Some(at) = self.unread.iter().position(|u| u.seq == number) {
                    self.unread.remove(at);
                }
            }
            _ => {}
        }
    }

    /// The task `id` names, if the trace has shown it.
    pub fn get(&self, id: &str) -> Option<&Task<'a>> {
        self.tasks[self.index.task_number(id)?].as_ref()
    }

    /// Every task the trace has shown, in spawn order.
    pub fn all(&self) -> impl Iterator<Item = &Task<'a>> {
        self.tasks.iter().flatten()
    }

    /// The task id of the background child `alias`.
    pub fn id_of(&self, alias: &AgentId) -> Option<&'a str> {
        self.by_alias.get(alias).copied()
    }

    /// Tasks queued or running.
    pub fn active(&self) -> usize {
        self.all().filter(|t| t.state.active()).count()
    }

    /// Tasks queued or running, plus results not yet read: what holds a root's turn
    /// (`bub.turn.held-while-children`).
    pub fn outstanding(&self) -> usize {
        self.active() + self.unread.len()
    }

    /// Whether `id` has a result the parent has not read.
    pub fn has_unread(&self, id: &str) -> bool {
        self.unread.iter().any(|u| u.task_id == id)
    }
}

/// The field `name` of an arguments object, as `Value::get` finds it, by a scan of its few
/// entries: the map behind `Value::get` hashes the name with SipHash first, which cost more
/// than the scan at every call the oracles read.
pub(super) fn field<'v>(args: &'v serde_json::Value, name: &str) -> Option<&'v serde_json::Value> {
    args.as_object()?.iter().find(|(key, _)| key.as_str() == name).map(|(_, value)| value)
}

/// A string argument of a call, as the core reads it.
pub(super) fn string_arg<'v>(args: &'v serde_json::Value, name: &str) -> Option<&'v str> {
    field(args, name).and_then(serde_json::Value::as_str)
}

/// A list argument (`allowed_tools`, `task_ids`, …): a JSON array of strings, or one string
/// of comma-separated names with the blank pieces dropped (`bub.child.allowed-tools-string`).
pub(super) fn list_arg(args: &serde_json::Value, name: &str) -> Vec<String> {
    match field(args, name) {
        Some(serde_json::Value::Array(items)) => {
            items.iter().filter_map(serde_json::Value::as_str).map(str::to_string).collect()
        }
        Some(serde_json::Value::String(s)) => {
            s.split(',').filter(|piece| !piece.trim().is_empty()).map(str::to_string).collect()
        }
        _ => Vec::new(),
    }
}

/// A time limit in seconds as the rules read one from a model or a profile: a number of 0 or
/// more, at most 1,000,000,000 s (`bub.timeout.invalid-ignored`, `bub.timeout.clamped`);
/// anything else is "not given".
pub(super) fn seconds_arg(args: &serde_json::Value, name: &str) -> Option<Duration> {
    let seconds = field(args, name).and_then(serde_json::Value::as_f64).filter(|s| *s >= 0.0)?;
    Some(Duration::from_secs_f64(seconds.min(1e9)))
}

/// A time limit as messages print it (`core.time.seconds-format`): whole seconds without a
/// fraction (`120`), else the exact decimal without trailing zeros (`0.25`, `1.5`).
pub(super) fn seconds_text(limit: Duration) -> String {
    let nanos = limit.subsec_nanos();
    if nanos == 0 {
        return limit.as_secs().to_string();
    }
    let fraction = format!("{nanos:09}");
    format!("{}.{}", limit.as_secs(), fraction.trim_end_matches('0'))
}

/// Bub's name matching: trimmed, without regard to case, `.` and `_` alike
/// (`bub.spawn.name-matching`).
pub(super) fn same_name(requested: &str, real: &str) -> bool {
    let norm = |s: &str| s.trim().to_lowercase().replace('.', "_");
    norm(requested) == norm(real)
}

/// The status word of a finished task as `bub.delivery.status-values` spells it. The oracles
/// keep their own spelling rather than the core's (`TaskStatus::as_str`), so a core that
/// misspells a word cannot make them agree with it.
pub(super) fn status_word(status: TaskStatus) -> &'static str {
    match status {
        TaskStatus::Completed => "completed",
        TaskStatus::Failed => "failed",
        TaskStatus::TimedOut => "timed_out",
        TaskStatus::Cancelled => "cancelled",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_print_as_core_time_seconds_format_says() {
        assert_eq!(seconds_text(Duration::from_secs(120)), "120");
        assert_eq!(seconds_text(Duration::from_millis(250)), "0.25");
        assert_eq!(seconds_text(Duration::from_millis(1500)), "1.5");
        assert_eq!(seconds_text(Duration::from_millis(100)), "0.1");
        assert_eq!(seconds_text(Duration::from_secs(1_000_000_000)), "1000000000");
    }
}

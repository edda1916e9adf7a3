//! A picture of a finished run: its trace drawn on the virtual time axis as one deterministic,
//! self-contained SVG document, or as an HTML page holding the picture beside the text trace.
//!
//! The picture has a row per agent, nested under its parent in spawn order and labelled with
//! the alias (and a background child's task ids). In a row: the agent's life (the root's
//! turns, a foreground child from its spawn to its end or timeout, a background task's
//! **queued** and **running** spans, with the end status as a cap; a task that never waited
//! has no queued span), its model and tool calls, the held turn (`awaiting` until the root's
//! next request) and a step line of the budget it has left, labelled where it changes. Between
//! rows: spawn arrows, and hand-over arrows from a child's end to its parent (`delivered` by
//! notification or by wait, `child.result`). Markers show timeouts, truncations, steering,
//! denials, approval questions, refused spawns and nudges; guides show turn boundaries and a
//! harness stop. Above the rows, when there are background tasks, a strip counts how many run
//! and how many wait at each moment. Every element carries the trace lines it stands for as a
//! hover `<title>`; in the HTML page it also links to its line. Spans say what they are in
//! their `class` (`queued`, `running`, `fg`, `llm`, `tool err`, ...) and when in `data-t0` and
//! `data-t1` (virtual microseconds), so a test or a script can read the picture back.
//!
//! A run over the wire has no core events: `model_side` turns what the model saw (each
//! attributed exchange a model call, each spawn call whose child asked a spawn arrow) into a
//! trace of the same events, and the picture draws that without budgets or lives, which the
//! model does not see.
//!
//! It deliberately does not judge, re-derive or run anything (the runner and the oracles do),
//! and reads nothing but the [`Trace`], the core's [`Event`] enum and, for a wire run, the
//! model side's record. The output is a pure
//! function of the trace: rows, spans and labels come in trace order, nothing iterates a hash
//! map, every coordinate is rounded to one decimal and printed with a fixed format, so the same
//! trace gives byte-identical output. It loads no fonts, scripts or images (text uses the
//! viewer's monospace font, its width is estimated, not measured), and all text is escaped for
//! XML, control characters included. A linear axis is kept even when a run has long quiet
//! stretches: the picture shows real proportions, and instantaneous events get a minimum width
//! so that what happens at one instant stays visible.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use crate::evidence::attribution::ModelSide;
use crate::sut::AgentId;
use crate::sut::event::{Event, Family, OutcomeKind, Status, TaskStatus, Via};
use crate::trace::{Trace, What};

mod model_side;

/// The run as a standalone SVG document, titled `title` (the scenario's name).
pub fn svg(title: &str, trace: &Trace) -> String {
    svg_of(&Model::build(trace, trace.lines(), Evidence::Core), title)
}

fn svg_of(m: &Model, title: &str) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out.push_str(&render(m, title, false));
    out
}

/// A self-contained HTML page: the picture on the left, the text trace on the right. Clicking
/// an element of the picture highlights its line in the trace.
pub fn html(title: &str, trace: &Trace) -> String {
    let lines = trace.lines();
    html_of(&Model::build(trace, lines.clone(), Evidence::Core), &lines, title)
}

fn html_of(m: &Model, lines: &[String], title: &str) -> String {
    let picture = render(m, title, true);
    let mut out = String::new();
    let _ = write!(
        out,
        concat!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n",
            "<title>timeline: {title}</title>\n<style>\n",
            "body{{margin:0;font-family:ui-monospace,'DejaVu Sans Mono',Menlo,Consolas,monospace;color:#222}}\n",
            ".wrap{{display:flex;height:100vh}}\n",
            ".picture{{flex:0 1 auto;overflow:auto;border-right:1px solid #ccc}}\n",
            ".trace{{flex:1 1 0;min-width:30em;overflow:auto;margin:0;padding:8px;font-size:11px;line-height:1.4}}\n",
            ".trace span{{display:block;white-space:pre}}\n",
            ".trace span:target{{background:#ffe58a}}\n",
            "</style>\n</head>\n<body>\n<div class=\"wrap\">\n<div class=\"picture\">\n"
        ),
        title = esc(title)
    );
    out.push_str(&picture);
    out.push_str("</div>\n<pre class=\"trace\">");
    for (i, line) in lines.iter().enumerate() {
        let _ = write!(out, "<span id=\"L{i}\">{}</span>", esc(line));
    }
    out.push_str("</pre>\n</div>\n</body>\n</html>\n");
    out
}

/// Whether `path` asks for the HTML page (`.html`, `.htm`) rather than the bare SVG.
pub fn wants_html(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("html") || e.eq_ignore_ascii_case("htm"))
}

/// Writes the picture of `trace` to `path`: the HTML page for `.html`/`.htm`, SVG otherwise.
pub fn write(path: &Path, title: &str, trace: &Trace) -> std::io::Result<()> {
    let text = if wants_html(path) { html(title, trace) } else { svg(title, trace) };
    std::fs::write(path, text)
}

/// Writes the picture of a run seen from the model's side alone (a runtime over the wire):
/// a row per attributed agent with its model calls, and spawn arrows from the reply that
/// made a child to the child's row. The runtime's own events (tools, budgets, ends) are
/// unseen, so none is drawn. Unattributed and side requests have no row.
pub fn write_model_side(path: &Path, title: &str, side: &ModelSide) -> std::io::Result<()> {
    let (trace, lines) = model_side::trace(side);
    let m = Model::build(&trace, lines.clone(), Evidence::ModelSide { wall: side.wall_times });
    let text = if wants_html(path) { html_of(&m, &lines, title) } else { svg_of(&m, title) };
    std::fs::write(path, text)
}

/// What the trace drawn stands for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Evidence {
    /// A core's own events: lives, budgets, tools.
    Core,
    /// Model calls and spawn calls, as the model saw them: no budgets and no lives; `wall`:
    /// stamped in wall time (a runtime on its own clock), not virtual time.
    ModelSide { wall: bool },
}

// ---------------------------------------------------------------------------------------------
// The model: what to draw, in trace terms (rows, times, entry indices), before any geometry.

/// One row: an agent.
struct Row {
    agent: AgentId,
    /// Nesting depth in the picture (0 for a root).
    depth: usize,
    /// The background task ids it ran, in order, each once.
    tasks: Vec<String>,
    /// Its task or goal, for the hover title.
    goal: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SpanKind {
    /// A user turn of the root.
    Turn,
    /// A foreground child, from its spawn to its end or timeout.
    Foreground,
    /// A loop whose family the trace does not say (not spawned in the trace).
    Run,
    /// A background task waiting for a free slot.
    Queued,
    /// A background task running.
    Running,
    /// A finished root turn held for its children.
    Held,
    /// A model call.
    Llm,
    /// A tool call.
    Tool,
}

impl SpanKind {
    fn class(self) -> &'static str {
        match self {
            SpanKind::Turn => "turn",
            SpanKind::Foreground => "fg",
            SpanKind::Run => "run",
            SpanKind::Queued => "queued",
            SpanKind::Running => "running",
            SpanKind::Held => "held",
            SpanKind::Llm => "llm",
            SpanKind::Tool => "tool",
        }
    }

    /// Whether the span is the agent's life (drawn full height) rather than an activity in it.
    fn is_life(self) -> bool {
        !matches!(self, SpanKind::Llm | SpanKind::Tool)
    }
}

struct Span {
    row: usize,
    t0: Duration,
    t1: Duration,
    kind: SpanKind,
    /// A failed model call or an error result.
    error: bool,
    /// It did not end on its own: cut by a timeout or cancellation, or open when the trace ends.
    cut: bool,
    /// Text drawn inside when it fits.
    label: String,
    /// Hover text, one item a line.
    title: Vec<String>,
    /// The trace entry it links to.
    entry: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    Ok,
    Error,
    AwaitingUser,
    Completed,
    Failed,
    TimedOut,
    Cancelled,
}

impl End {
    fn of_outcome(kind: OutcomeKind, status: Status) -> End {
        match (kind, status) {
            (OutcomeKind::AwaitingUser, _) => End::AwaitingUser,
            (_, Status::Ok) => End::Ok,
            (_, Status::Error) => End::Error,
        }
    }

    fn of_task(status: TaskStatus) -> End {
        match status {
            TaskStatus::Completed => End::Completed,
            TaskStatus::Failed => End::Failed,
            TaskStatus::TimedOut => End::TimedOut,
            TaskStatus::Cancelled => End::Cancelled,
        }
    }

    fn class(self) -> &'static str {
        match self {
            End::Ok | End::Completed => "end-ok",
            End::Error | End::Failed => "end-err",
            End::AwaitingUser => "end-ask",
            End::TimedOut => "end-timeout",
            End::Cancelled => "end-cancel",
        }
    }

    /// The word written beside the cap; nothing for a plain success.
    fn word(self) -> &'static str {
        match self {
            End::Ok | End::Completed => "",
            End::Error => "error",
            End::Failed => "failed",
            End::AwaitingUser => "awaiting user",
            // The timeout marker beside it says so, with the limit.
            End::TimedOut => "",
            End::Cancelled => "cancelled",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MarkKind {
    Timeout,
    Truncated,
    Steered,
    Denied,
    Refused,
    Nudge,
    Ask(bool),
    End(End),
}

struct Mark {
    row: usize,
    t: Duration,
    kind: MarkKind,
    label: String,
    title: Vec<String>,
    entry: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ArrowKind {
    Spawn(Family),
    Notification,
    Wait,
    ChildResult,
}

impl ArrowKind {
    fn class(self) -> &'static str {
        match self {
            ArrowKind::Spawn(Family::Foreground) => "a-spawn-fg",
            ArrowKind::Spawn(Family::Background) => "a-spawn-bg",
            ArrowKind::Notification => "a-notify",
            ArrowKind::Wait => "a-wait",
            ArrowKind::ChildResult => "a-result",
        }
    }
}

struct Arrow {
    from: (usize, Duration),
    to: (usize, Duration),
    kind: ArrowKind,
    title: Vec<String>,
    entry: usize,
}

/// A vertical guide across all rows: a turn boundary or a harness stop.
struct Guide {
    t: Duration,
    kind: GuideKind,
    label: String,
    title: Vec<String>,
    entry: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GuideKind {
    TurnStart,
    TurnEnd,
    Stop,
}

struct BudgetPoint {
    t: Duration,
    value: u32,
    /// The first point of a run (a turn or a child's loop): the line does not join the last one.
    starts_run: bool,
}

struct Model {
    rows: Vec<Row>,
    spans: Vec<Span>,
    marks: Vec<Mark>,
    arrows: Vec<Arrow>,
    guides: Vec<Guide>,
    budgets: Vec<Vec<BudgetPoint>>,
    end: Duration,
    events: usize,
    /// What the trace stands for (the header says it).
    evidence: Evidence,
}

/// A span still open while the trace is read.
struct Open {
    t: Duration,
    entry: usize,
    label: String,
}

/// The child an event names, if any.
fn child_named(what: &What) -> Option<&AgentId> {
    match what {
        What::Core(event) => event.child(),
        _ => None,
    }
}

/// Agents in first-appearance order, then as a tree: each child under its parent, siblings in
/// the order they appeared (which is spawn order).
fn order_rows(trace: &Trace) -> Vec<Row> {
    let mut seen: Vec<AgentId> = Vec::new();
    let mut index: BTreeMap<AgentId, usize> = BTreeMap::new();
    for entry in &trace.entries {
        for agent in std::iter::once(&entry.agent).chain(child_named(&entry.what)) {
            if !index.contains_key(agent) {
                index.insert(agent.clone(), seen.len());
                seen.push(agent.clone());
            }
        }
    }
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); seen.len()];
    let mut roots = Vec::new();
    for (i, agent) in seen.iter().enumerate() {
        match agent.parent().and_then(|p| index.get(&p).copied()) {
            Some(parent) => children[parent].push(i),
            None => roots.push(i),
        }
    }
    let mut rows = Vec::with_capacity(seen.len());
    let mut stack: Vec<(usize, usize)> = roots.iter().rev().map(|&r| (r, 0)).collect();
    while let Some((i, depth)) = stack.pop() {
        rows.push(Row { agent: seen[i].clone(), depth, tasks: Vec::new(), goal: None });
        stack.extend(children[i].iter().rev().map(|&c| (c, depth + 1)));
    }
    rows
}

/// Reads the trace into the model.
struct Builder<'a> {
    lines: Vec<String>,
    evidence: Evidence,
    trace: &'a Trace,
    row_of: BTreeMap<AgentId, usize>,
    m: Model,
    llm: BTreeMap<usize, Open>,
    tools: BTreeMap<(usize, String), Open>,
    life: BTreeMap<usize, (SpanKind, Open)>,
    held: BTreeMap<usize, Open>,
    /// Where and when each task id last ended, for the delivery arrow.
    task_end: BTreeMap<String, (usize, Duration)>,
    /// When each agent last ended, for the `child.result` arrow.
    agent_end: BTreeMap<usize, Duration>,
}

impl Model {
    /// The model of `trace`, whose entries `lines` render one each (hover titles).
    fn build(trace: &Trace, lines: Vec<String>, evidence: Evidence) -> Model {
        let rows = order_rows(trace);
        let row_of = rows.iter().enumerate().map(|(i, r)| (r.agent.clone(), i)).collect();
        let end = trace.entries.iter().map(|e| e.at).max().unwrap_or_default();
        let budgets = rows.iter().map(|_| Vec::new()).collect();
        let mut b = Builder {
            lines,
            evidence,
            trace,
            row_of,
            m: Model {
                rows,
                spans: Vec::new(),
                marks: Vec::new(),
                arrows: Vec::new(),
                guides: Vec::new(),
                budgets,
                end,
                events: trace.entries.len(),
                evidence,
            },
            llm: BTreeMap::new(),
            tools: BTreeMap::new(),
            life: BTreeMap::new(),
            held: BTreeMap::new(),
            task_end: BTreeMap::new(),
            agent_end: BTreeMap::new(),
        };
        for i in 0..trace.entries.len() {
            b.entry(i);
        }
        b.finish();
        b.m
    }
}

impl Builder<'_> {
    fn row(&self, agent: &AgentId) -> usize {
        self.row_of[agent]
    }

    fn line(&self, i: usize) -> String {
        self.lines[i].trim_start().to_string()
    }

    fn budget(&mut self, row: usize, t: Duration, value: u32, starts_run: bool) {
        if matches!(self.evidence, Evidence::ModelSide { .. }) {
            return; // the model does not see a budget
        }
        self.m.budgets[row].push(BudgetPoint { t, value, starts_run });
    }

    /// Carries the last budget of `row` to `t` (a run ended without a last budget report).
    fn budget_until(&mut self, row: usize, t: Duration) {
        if let Some(last) = self.m.budgets[row].last()
            && last.t < t
        {
            let value = last.value;
            self.budget(row, t, value, false);
        }
    }

    fn mark(&mut self, row: usize, t: Duration, kind: MarkKind, label: String, entry: usize) {
        let title = vec![self.line(entry)];
        self.m.marks.push(Mark { row, t, kind, label, title, entry });
    }

    /// Closes an open span at `t`, by entry `end` (or cut short, with `why`).
    fn close(&mut self, row: usize, kind: SpanKind, open: Open, t: Duration, end: Result<usize, &str>, error: bool) {
        if kind == SpanKind::Queued && t == open.t {
            return; // it never waited
        }
        let mut title = vec![self.line(open.entry)];
        match end {
            Ok(e) if e != open.entry => title.push(self.line(e)),
            Ok(_) => {}
            Err(why) => title.push(format!("({why} at {})", secs(t))),
        }
        let cut = end.is_err();
        self.m.spans.push(Span {
            row,
            t0: open.t,
            t1: t,
            kind,
            error,
            cut,
            label: open.label,
            title,
            entry: open.entry,
        });
    }

    fn close_life(&mut self, row: usize, t: Duration, end: Result<usize, &str>) -> Option<SpanKind> {
        let (kind, open) = self.life.remove(&row)?;
        self.close(row, kind, open, t, end, false);
        self.budget_until(row, t);
        Some(kind)
    }

    fn close_held(&mut self, row: usize, t: Duration, end: Result<usize, &str>) {
        if let Some(open) = self.held.remove(&row) {
            self.close(row, SpanKind::Held, open, t, end, false);
        }
    }

    /// Cuts what `agent` and its descendants still have open (a timeout or cancellation
    /// stopped them), except `agent`'s own life, which the caller closes.
    fn cut(&mut self, agent: &AgentId, t: Duration, why: &str) {
        let prefix = format!("{}/", agent.as_str());
        let rows: Vec<usize> = (0..self.m.rows.len())
            .filter(|&r| {
                let a = self.m.rows[r].agent.as_str();
                a == agent.as_str() || a.starts_with(&prefix)
            })
            .collect();
        for &r in &rows {
            if let Some(open) = self.llm.remove(&r) {
                self.close(r, SpanKind::Llm, open, t, Err(why), false);
            }
            let keys: Vec<(usize, String)> =
                self.tools.range((r, String::new())..).take_while(|(k, _)| k.0 == r).map(|(k, _)| k.clone()).collect();
            for key in keys {
                let open = self.tools.remove(&key).expect("a listed key");
                self.close(r, SpanKind::Tool, open, t, Err(why), false);
            }
            self.close_held(r, t, Err(why));
            if self.m.rows[r].agent != *agent {
                self.close_life(r, t, Err(why));
            }
        }
    }

    fn open_life(&mut self, row: usize, kind: SpanKind, t: Duration, entry: usize, label: &str) {
        // A life still open (a trace the core would not write) ends where the next begins.
        self.close_life(row, t, Err("superseded"));
        self.life.insert(row, (kind, Open { t, entry, label: label.to_string() }));
    }

    fn entry(&mut self, i: usize) {
        let entry = &self.trace.entries[i];
        let (t, row) = (entry.at, self.row(&entry.agent));
        let event = match &entry.what {
            What::Core(event) => event,
            What::Asked { tool, approve } => {
                let word = if *approve { "approve" } else { "deny" };
                self.mark(row, t, MarkKind::Ask(*approve), format!("ask {tool}: {word}"), i);
                return;
            }
            What::Stopped(reason) => {
                let title = vec![self.line(i)];
                self.m.guides.push(Guide {
                    t,
                    kind: GuideKind::Stop,
                    label: format!("stopped: {reason}"),
                    title,
                    entry: i,
                });
                return;
            }
        };
        match event {
            Event::TurnStarted { turn, budget, .. } => {
                self.open_life(row, SpanKind::Turn, t, i, "");
                self.budget(row, t, *budget, true);
                let title = vec![self.line(i)];
                self.m.guides.push(Guide {
                    t,
                    kind: GuideKind::TurnStart,
                    label: format!("turn {turn}"),
                    title,
                    entry: i,
                });
            }
            Event::TurnEnded { kind, status, budget, .. } => {
                self.close_held(row, t, Ok(i));
                self.budget(row, t, *budget, false);
                self.close_life(row, t, Ok(i));
                let end = End::of_outcome(*kind, *status);
                self.mark(row, t, MarkKind::End(end), end.word().to_string(), i);
                let title = vec![self.line(i)];
                self.m.guides.push(Guide { t, kind: GuideKind::TurnEnd, label: String::new(), title, entry: i });
            }
            Event::AgentStarted { goal, budget, .. } => {
                if !self.life.contains_key(&row) {
                    self.open_life(row, SpanKind::Run, t, i, "");
                }
                self.m.rows[row].goal.get_or_insert_with(|| goal.clone());
                self.budget(row, t, *budget, true);
            }
            Event::LlmRequest { call, budget, .. } => {
                self.close_held(row, t, Ok(i));
                if let Some(open) = self.llm.remove(&row) {
                    self.close(row, SpanKind::Llm, open, t, Err("superseded"), false);
                }
                self.llm.insert(row, Open { t, entry: i, label: format!("#{call}") });
                self.budget(row, t, *budget, false);
            }
            Event::LlmReply { .. } | Event::LlmFailed { .. } => {
                let error = matches!(event, Event::LlmFailed { .. });
                let open = self.llm.remove(&row).unwrap_or(Open { t, entry: i, label: String::new() });
                self.close(row, SpanKind::Llm, open, t, Ok(i), error);
            }
            Event::Denied { tool, budget, .. } => {
                self.mark(row, t, MarkKind::Denied, format!("denied {tool}"), i);
                self.budget(row, t, *budget, false);
            }
            Event::ToolStarted { call_id, tool, .. } => {
                self.tools.insert((row, call_id.clone()), Open { t, entry: i, label: tool.clone() });
            }
            Event::ToolEnded { call_id, tool, is_error, budget, .. } => {
                let open =
                    self.tools.remove(&(row, call_id.clone())).unwrap_or(Open { t, entry: i, label: tool.clone() });
                self.close(row, SpanKind::Tool, open, t, Ok(i), *is_error);
                self.budget(row, t, *budget, false);
            }
            Event::Nudge { budget, .. } => {
                self.mark(row, t, MarkKind::Nudge, "nudge".into(), i);
                self.budget(row, t, *budget, false);
            }
            Event::StepCompleted { budget, .. } => self.budget(row, t, *budget, false),
            Event::Spawned { child, family, task, budget_after, .. } => {
                let c = self.row(child);
                let title = vec![self.line(i)];
                self.m.arrows.push(Arrow {
                    from: (row, t),
                    to: (c, t),
                    kind: ArrowKind::Spawn(*family),
                    title,
                    entry: i,
                });
                self.m.rows[c].goal.get_or_insert_with(|| task.clone());
                if *family == Family::Foreground && matches!(self.evidence, Evidence::Core) {
                    self.open_life(c, SpanKind::Foreground, t, i, "");
                }
                self.budget(row, t, *budget_after, false);
            }
            Event::SpawnRefused { tool, .. } => self.mark(row, t, MarkKind::Refused, format!("refused {tool}"), i),
            Event::ChildResult { child, truncated_to, .. } => {
                let c = self.row(child);
                let from = self.agent_end.get(&c).copied().unwrap_or(t);
                let title = vec![self.line(i)];
                self.m.arrows.push(Arrow {
                    from: (c, from),
                    to: (row, t),
                    kind: ArrowKind::ChildResult,
                    title,
                    entry: i,
                });
                if let Some(limit) = truncated_to {
                    self.mark(row, t, MarkKind::Truncated, format!("truncated to {limit}"), i);
                }
            }
            Event::TimedOut { child, after } => {
                let c = self.row(child);
                self.mark(c, t, MarkKind::Timeout, format!("timeout {}", secs(*after)), i);
                self.cut(child, t, "cut by the timeout");
                if matches!(self.life.get(&c), Some((SpanKind::Foreground | SpanKind::Run, _))) {
                    self.close_life(c, t, Ok(i));
                    self.mark(c, t, MarkKind::End(End::TimedOut), String::new(), i);
                }
            }
            Event::AgentEnded { kind, status, budget, .. } => {
                self.agent_end.insert(row, t);
                self.budget(row, t, *budget, false);
                if matches!(self.life.get(&row), Some((SpanKind::Foreground | SpanKind::Run, _))) {
                    self.close_life(row, t, Ok(i));
                    let end = End::of_outcome(*kind, *status);
                    self.mark(row, t, MarkKind::End(end), end.word().to_string(), i);
                }
            }
            Event::TaskQueued { task_id, child, .. } => {
                let c = self.row(child);
                if !self.m.rows[c].tasks.contains(task_id) {
                    self.m.rows[c].tasks.push(task_id.clone());
                }
                self.open_life(c, SpanKind::Queued, t, i, "queued");
            }
            Event::TaskStarted { child, .. } => {
                let c = self.row(child);
                if let Some((SpanKind::Queued, _)) = self.life.get(&c) {
                    self.close_life(c, t, Ok(i));
                }
                self.open_life(c, SpanKind::Running, t, i, "");
            }
            Event::TaskEnded { task_id, child, status, .. } => {
                let c = self.row(child);
                self.cut(child, t, &format!("cut: task {}", status.as_str()));
                self.close_life(c, t, Ok(i));
                let end = End::of_task(*status);
                self.mark(c, t, MarkKind::End(end), end.word().to_string(), i);
                self.task_end.insert(task_id.clone(), (c, t));
            }
            Event::Delivered { task_id, via, .. } => {
                let kind = match via {
                    Via::Notification => ArrowKind::Notification,
                    Via::Wait => ArrowKind::Wait,
                };
                // From where the task last ended (a trace the core writes always has that).
                if let Some(from) = self.task_end.get(task_id).copied() {
                    let title = vec![self.line(i)];
                    self.m.arrows.push(Arrow { from, to: (row, t), kind, title, entry: i });
                }
            }
            Event::Steered { .. } => self.mark(row, t, MarkKind::Steered, "steered".into(), i),
            Event::AwaitingChildren { unfinished } => {
                self.close_held(row, t, Err("superseded"));
                self.held.insert(row, Open { t, entry: i, label: format!("held: {unfinished} running") });
            }
            Event::SessionOpened { .. } | Event::SessionClosed { .. } => {}
        }
    }

    /// Closes what the trace left open, at its last instant.
    fn finish(&mut self) {
        let end = self.m.end;
        let why = "still open when the trace ends";
        for (row, open) in std::mem::take(&mut self.llm) {
            self.close(row, SpanKind::Llm, open, end, Err(why), false);
        }
        for ((row, _), open) in std::mem::take(&mut self.tools) {
            self.close(row, SpanKind::Tool, open, end, Err(why), false);
        }
        for (row, open) in std::mem::take(&mut self.held) {
            self.close(row, SpanKind::Held, open, end, Err(why), false);
        }
        let rows: Vec<usize> = self.life.keys().copied().collect();
        for row in rows {
            self.close_life(row, end, Err(why));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Geometry and drawing.

/// Row height and the bands inside a row (offsets from its top).
const ROW_H: f64 = 38.0;
const LIFE_Y: f64 = 3.0;
const LIFE_H: f64 = 18.0;
const ACT_Y: f64 = 6.0;
const ACT_H: f64 = 12.0;
const BUDGET_TOP: f64 = 24.0;
const BUDGET_BOTTOM: f64 = 33.0;
/// Width of the time axis.
const PLOT_W: f64 = 1000.0;
const MARGIN: f64 = 12.0;
const RIGHT: f64 = 110.0;
/// Where the first row starts.
const TOP: f64 = 86.0;
/// Height of the strip counting running and queued background tasks (when there are any).
const SLOTS_H: f64 = 34.0;
/// Least width of a span, so that an instant stays visible.
const MIN_W: f64 = 3.0;
/// Estimated advance of one character of the monospace font at 11, 9 and 8 px.
const CW11: f64 = 6.7;
const CW9: f64 = 5.5;
const CW8: f64 = 4.9;
/// Least horizontal distance between two markers of one row.
const MARK_GAP: f64 = 7.0;

/// Text labels carry a fill and never a stroke: a `paint-order: stroke` halo, which cairosvg
/// and some other renderers ignore, drew the white stroke over the glyphs (white on white).
const STYLE: &str = "\
text{fill:#222}\
.title{font-size:16px;font-weight:bold}\
.sub{font-size:11px;fill:#666}\
.band0{fill:#ffffff}.band1{fill:#f3f5f8}\
.grid{stroke:#e2e5ea;stroke-width:1}\
.tick{font-size:10px;fill:#555}\
.tree{stroke:#b8bec8;fill:none}\
.alias{font-weight:bold}\
.tid{fill:#777;font-size:10px}\
.turn{fill:#e3eaf4;stroke:#7d93b2}\
.fg{fill:#e7e1f7;stroke:#6a5acd}\
.run{fill:#eeeeee;stroke:#999999}\
.running{fill:#d3ecd8;stroke:#3a7d44}\
.queued{fill:url(#hatch-queued);stroke:#c98a00;stroke-dasharray:4 2}\
.held{fill:url(#hatch-held);stroke:#8a8f99;stroke-dasharray:2 2}\
.llm{fill:#3f6fba;stroke:#fff;stroke-width:0.6}\
.tool{fill:#23907f;stroke:#fff;stroke-width:0.6}\
.err{fill:#d1495b}\
.cut{stroke:#d1495b;stroke-dasharray:3 2;stroke-width:1.2}\
.in{font-size:9px;fill:#fff;pointer-events:none}\
.inl{font-size:9px;fill:#333;pointer-events:none}\
.ml{font-size:9px;fill:#333}\
.budget{fill:none;stroke:#b5651d;stroke-width:1.3}\
.bl{font-size:8px;fill:#8a4b12}\
.a-spawn-fg{stroke:#6a5acd;fill:none;stroke-width:1.3}\
.a-spawn-bg{stroke:#3a7d44;fill:none;stroke-width:1.3}\
.a-notify{stroke:#c98a00;fill:none;stroke-width:1.3;stroke-dasharray:5 3}\
.a-wait{stroke:#1d4e89;fill:none;stroke-width:1.5}\
.a-result{stroke:#6a5acd;fill:none;stroke-width:1.5;stroke-dasharray:1.5 2}\
.slot-run{fill:#8cc79a}\
.slot-queue{fill:url(#hatch-queued)}\
.end-ok{fill:#2e7d32}.end-err{fill:#c62828}.end-ask{fill:#e0a000}.end-timeout{fill:#e65100}.end-cancel{fill:#777777}\
.m-timeout{stroke:#e65100;stroke-width:2.4;fill:none}\
.m-trunc{fill:#8e24aa;stroke:#fff;stroke-width:0.8}\
.m-steer{fill:#00838f;stroke:#fff;stroke-width:0.8}\
.m-denied{fill:#c62828;stroke:#fff;stroke-width:0.8}\
.m-refused{fill:#fff;stroke:#c62828;stroke-width:1.8}\
.m-nudge{fill:#e0a000;stroke:#fff;stroke-width:0.8}\
.m-ask-yes{fill:#fff;stroke:#2e7d32;stroke-width:1.8}\
.m-ask-no{fill:#fff;stroke:#c62828;stroke-width:1.8}\
.g-turn{stroke:#7d93b2;stroke-width:1;stroke-dasharray:6 3}\
.g-turn-end{stroke:#7d93b2;stroke-width:1;stroke-dasharray:1 3}\
.g-stop{stroke:#c62828;stroke-width:2}\
.gl{font-size:9px;fill:#4a5d7a}\
.gl-stop{font-size:9px;fill:#c62828;font-weight:bold}\
.legend{font-size:10px}\
.lbox{fill:none;stroke:#d5d9e0}\
a:hover>*{opacity:0.75}\
";

struct Layout {
    label_w: f64,
    x0: f64,
    width: f64,
    rows_top: f64,
    rows_bottom: f64,
    end_us: u128,
}

impl Layout {
    fn x(&self, t: Duration) -> f64 {
        if self.end_us == 0 {
            return self.x0;
        }
        self.x0 + (t.as_micros() as f64) / (self.end_us as f64) * PLOT_W
    }

    fn row_y(&self, row: usize) -> f64 {
        self.rows_top + row as f64 * ROW_H
    }
}

/// Horizontal stretches already taken in one band of one row, so that labels do not overlap.
#[derive(Default)]
struct Taken(Vec<(f64, f64)>);

impl Taken {
    /// Takes `[a, b]` if it is free.
    fn take(&mut self, a: f64, b: f64) -> bool {
        if self.0.iter().any(|&(x, y)| a < y && x < b) {
            return false;
        }
        self.0.push((a, b));
        true
    }
}

/// The SVG text being written, with the picture-to-trace links of the HTML page.
struct Out {
    s: String,
    links: bool,
}

impl Out {
    /// Writes `element` (which may hold a `<title>`), linked to trace entry `entry`.
    fn linked(&mut self, entry: usize, element: &str) {
        if self.links {
            let _ = writeln!(self.s, "<a href=\"#L{entry}\">{element}</a>");
        } else {
            let _ = writeln!(self.s, "{element}");
        }
    }

    fn line(&mut self, element: &str) {
        let _ = writeln!(self.s, "{element}");
    }
}

/// A `<title>` element of hover lines.
fn title(lines: &[String]) -> String {
    let text: Vec<String> = lines.iter().map(|l| esc(l)).collect();
    format!("<title>{}</title>", text.join("\n"))
}

fn row_label(row: &Row) -> (String, String) {
    (row.agent.as_str().to_string(), row.tasks.join(","))
}

fn render(m: &Model, name: &str, links: bool) -> String {
    let label_chars = |r: &Row| {
        let (alias, tasks) = row_label(r);
        let n = alias.chars().count() as f64 * CW11;
        let t = if tasks.is_empty() { 0.0 } else { 6.0 + tasks.chars().count() as f64 * 6.0 };
        16.0 + r.depth as f64 * 14.0 + n + t
    };
    let label_w = m.rows.iter().map(label_chars).fold(150.0, f64::max).min(360.0);
    let x0 = MARGIN + label_w;
    let slots = Slots::of(m);
    let rows_top = if slots.is_some() { TOP + SLOTS_H + 4.0 } else { TOP };
    let lay = Layout {
        label_w,
        x0,
        width: x0 + PLOT_W + RIGHT,
        rows_top,
        rows_bottom: rows_top + m.rows.len() as f64 * ROW_H,
        end_us: m.end.as_micros(),
    };
    let mut out = Out { s: String::new(), links };
    let legend = Legend::of(m);
    let legend_h = legend.height(lay.width - 2.0 * MARGIN);
    let height = lay.rows_bottom + 28.0 + legend_h + MARGIN;
    let _ = writeln!(
        out.s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" \
         font-family=\"ui-monospace,'DejaVu Sans Mono',Menlo,Consolas,monospace\" font-size=\"11\">",
        w = coord(lay.width),
        h = coord(height)
    );
    out.line(&format!("<title>timeline: {}</title>", esc(name)));
    out.line(&format!("<style>{STYLE}</style>"));
    out.line(concat!(
        "<defs>",
        "<pattern id=\"hatch-queued\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">",
        "<rect width=\"6\" height=\"6\" fill=\"#fff6dc\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#e0a000\" stroke-width=\"2.5\"/></pattern>",
        "<pattern id=\"hatch-held\" width=\"5\" height=\"5\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(-45)\">",
        "<rect width=\"5\" height=\"5\" fill=\"#f4f4f4\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"5\" stroke=\"#a0a6b0\" stroke-width=\"1.2\"/></pattern>",
    ));
    // One arrowhead per arrow colour, named after the arrow's class.
    for (id, colour) in [
        ("spawn-fg", "#6a5acd"),
        ("spawn-bg", "#3a7d44"),
        ("notify", "#c98a00"),
        ("wait", "#1d4e89"),
        ("result", "#6a5acd"),
    ] {
        out.line(&format!(
            "<marker id=\"ah-{id}\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" \
             markerUnits=\"userSpaceOnUse\" orient=\"auto\"><path d=\"M0,0L10,5L0,10z\" fill=\"{colour}\"/></marker>"
        ));
    }
    out.line("</defs>");
    let _ = writeln!(out.s, "<rect width=\"{}\" height=\"{}\" fill=\"#fff\"/>", coord(lay.width), coord(height));
    draw_header(&mut out, m, name);
    draw_rows(&mut out, m, &lay);
    draw_axis(&mut out, m, &lay);
    if let Some(slots) = &slots {
        slots.draw(&mut out, &lay);
    }
    draw_guides(&mut out, m, &lay);
    // Labels in a row's bar never overlap: the markers' labels are placed first, then the end
    // words, then the names inside spans; one that does not fit at its place is left out (its
    // element keeps the hover text).
    let mut labels: Vec<Taken> = m.rows.iter().map(|_| Taken::default()).collect();
    let mut marks = Out { s: String::new(), links };
    draw_marks(&mut marks, m, &lay, &mut labels);
    draw_spans(&mut out, m, &lay, &mut labels);
    draw_budgets(&mut out, m, &lay);
    draw_arrows(&mut out, m, &lay);
    out.s.push_str(&marks.s);
    legend.draw(&mut out, MARGIN, lay.rows_bottom + 28.0, lay.width - 2.0 * MARGIN);
    out.line("</svg>");
    out.s
}

fn draw_header(out: &mut Out, m: &Model, name: &str) {
    out.line(&format!("<text class=\"title\" x=\"{}\" y=\"24\">{}</text>", coord(MARGIN), esc(name)));
    let agents = m.rows.len();
    let (events, time) = match m.evidence {
        Evidence::Core => ("events", "virtual time"),
        Evidence::ModelSide { wall: false } => ("model-side events", "virtual time"),
        Evidence::ModelSide { wall: true } => ("model-side events", "wall time"),
    };
    let sub = format!(
        "{agents} agent{}, {} {events}, {} of {time}",
        if agents == 1 { "" } else { "s" },
        m.events,
        secs(m.end)
    );
    out.line(&format!("<text class=\"sub\" x=\"{}\" y=\"42\">{}</text>", coord(MARGIN), esc(&sub)));
}

fn draw_rows(out: &mut Out, m: &Model, lay: &Layout) {
    for i in 0..m.rows.len() {
        let y = lay.row_y(i);
        out.line(&format!(
            "<rect class=\"band{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>",
            i % 2,
            coord(MARGIN),
            coord(y),
            coord(lay.width - 2.0 * MARGIN),
            coord(ROW_H)
        ));
    }
    // Tree connectors: from a parent's label down to each child's.
    for (i, row) in m.rows.iter().enumerate() {
        let Some(parent) = row.agent.parent() else { continue };
        let Some(p) = m.rows[..i].iter().rposition(|r| r.agent == parent) else { continue };
        let px = MARGIN + 10.0 + m.rows[p].depth as f64 * 14.0;
        let cx = MARGIN + 6.0 + row.depth as f64 * 14.0;
        let cy = lay.row_y(i) + LIFE_Y + LIFE_H / 2.0;
        out.line(&format!(
            "<path class=\"tree\" d=\"M{},{}V{}H{}\"/>",
            coord(px),
            coord(lay.row_y(p) + LIFE_Y + LIFE_H / 2.0 + 6.0),
            coord(cy),
            coord(cx)
        ));
    }
    for (i, row) in m.rows.iter().enumerate() {
        let x = MARGIN + 8.0 + row.depth as f64 * 14.0;
        let y = lay.row_y(i) + LIFE_Y + LIFE_H / 2.0 + 4.0;
        let (alias, tasks) = row_label(row);
        let room = ((lay.label_w - (x - MARGIN) - 8.0) / 6.0).max(0.0) as usize;
        let alias_chars = alias.chars().count();
        let tasks =
            if tasks.is_empty() { String::new() } else { shorten(&tasks, room.saturating_sub(alias_chars + 1)) };
        let mut hover = vec![format!("agent {alias}")];
        if !row.tasks.is_empty() {
            hover.push(format!("background task {}", row.tasks.join(", ")));
        }
        if let Some(goal) = &row.goal {
            hover.push(format!("task: {goal}"));
        }
        let tspan =
            if tasks.is_empty() { String::new() } else { format!(" <tspan class=\"tid\">{}</tspan>", esc(&tasks)) };
        out.line(&format!(
            "<text x=\"{}\" y=\"{}\">{}<tspan class=\"alias\">{}</tspan>{tspan}</text>",
            coord(x),
            coord(y),
            title(&hover),
            esc(&alias)
        ));
    }
}

/// A tick step of 1, 2 or 5 times a power of ten milliseconds giving at most ~10 ticks.
fn tick_step_ms(end_ms: u64) -> u64 {
    let raw = end_ms.div_ceil(10).max(1);
    let mut p = 1u64;
    loop {
        for f in [1, 2, 5] {
            if f * p >= raw {
                return f * p;
            }
        }
        p *= 10;
    }
}

/// `ms` as seconds with as many decimals as `step` needs.
fn tick_label(ms: u64, step: u64) -> String {
    let decimals = if step % 1000 == 0 {
        0
    } else if step % 100 == 0 {
        1
    } else if step % 10 == 0 {
        2
    } else {
        3
    };
    let whole = ms / 1000;
    if decimals == 0 {
        return format!("{whole}s");
    }
    let frac = format!("{:03}", ms % 1000);
    format!("{whole}.{}s", &frac[..decimals])
}

fn draw_axis(out: &mut Out, m: &Model, lay: &Layout) {
    let end_ms = m.end.as_millis() as u64;
    let step = tick_step_ms(end_ms);
    let mut ms = 0;
    while ms <= end_ms {
        let x = lay.x(Duration::from_millis(ms));
        out.line(&format!(
            "<line class=\"grid\" x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{}\"/>",
            coord(TOP - 4.0),
            coord(lay.rows_bottom + 4.0),
            x = coord(x)
        ));
        let label = esc(&tick_label(ms, step));
        out.line(&format!(
            "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{label}</text>",
            coord(x),
            coord(TOP - 20.0)
        ));
        out.line(&format!(
            "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{label}</text>",
            coord(x),
            coord(lay.rows_bottom + 16.0)
        ));
        ms += step;
    }
}

/// How many background tasks run and wait at each moment: one step per change.
struct Slots {
    /// `(from, to, running, queued)`.
    steps: Vec<(Duration, Duration, usize, usize)>,
    most: usize,
    most_running: usize,
}

impl Slots {
    fn of(m: &Model) -> Option<Slots> {
        // (instant, running change, queued change); ends and starts at one instant are
        // counted together, so a slot handed over at an instant is not counted twice.
        let mut changes: Vec<(Duration, i64, i64)> = Vec::new();
        for s in &m.spans {
            match s.kind {
                SpanKind::Running => changes.extend([(s.t0, 1, 0), (s.t1, -1, 0)]),
                SpanKind::Queued => changes.extend([(s.t0, 0, 1), (s.t1, 0, -1)]),
                _ => {}
            }
        }
        if changes.is_empty() {
            return None;
        }
        changes.sort_by_key(|c| c.0);
        let (mut running, mut queued) = (0i64, 0i64);
        let mut steps = Vec::new();
        let mut i = 0;
        while i < changes.len() {
            let t = changes[i].0;
            while i < changes.len() && changes[i].0 == t {
                running += changes[i].1;
                queued += changes[i].2;
                i += 1;
            }
            if let Some(&(next, _, _)) = changes.get(i)
                && running + queued > 0
            {
                steps.push((t, next, running.max(0) as usize, queued.max(0) as usize));
            }
        }
        let most = steps.iter().map(|s| s.2 + s.3).max().unwrap_or(0).max(1);
        let most_running = steps.iter().map(|s| s.2).max().unwrap_or(0);
        Some(Slots { steps, most, most_running })
    }

    fn draw(&self, out: &mut Out, lay: &Layout) {
        let top = TOP;
        out.line(&format!(
            "<rect class=\"band1\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>",
            coord(MARGIN),
            coord(top),
            coord(lay.width - 2.0 * MARGIN),
            coord(SLOTS_H)
        ));
        out.line(&format!(
            "<text x=\"{}\" y=\"{}\"><tspan class=\"alias\">background</tspan></text>",
            coord(MARGIN + 8.0),
            coord(top + 14.0)
        ));
        out.line(&format!(
            "<text class=\"tid\" x=\"{}\" y=\"{}\">at most {} running</text>",
            coord(MARGIN + 8.0),
            coord(top + 27.0),
            self.most_running
        ));
        let base = top + SLOTS_H - 3.0;
        let unit = ((SLOTS_H - 6.0) / self.most as f64).min(8.0);
        let mut taken = Taken::default();
        for &(from, to, running, queued) in &self.steps {
            let (x0, x1) = (lay.x(from), lay.x(to));
            let w = x1 - x0;
            let hover = title(&[format!("{} → {}: {running} running, {queued} queued", secs(from), secs(to))]);
            if running > 0 {
                let h = running as f64 * unit;
                out.line(&format!(
                    "<rect class=\"slot-run\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\">{hover}</rect>",
                    coord(x0),
                    coord(base - h),
                    coord(w),
                    coord(h)
                ));
            }
            if queued > 0 {
                let h = queued as f64 * unit;
                out.line(&format!(
                    "<rect class=\"slot-queue\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\">{hover}</rect>",
                    coord(x0),
                    coord(base - running as f64 * unit - h),
                    coord(w),
                    coord(h)
                ));
            }
            // The count, long form if it fits.
            let texts = if queued > 0 {
                vec![format!("{running} running, {queued} queued"), format!("{running}+{queued}q")]
            } else {
                vec![format!("{running} running"), running.to_string()]
            };
            let fits = texts.into_iter().find(|t| t.chars().count() as f64 * CW9 + 3.0 <= w);
            if let Some(text) = fits
                && taken.take(x0 + 2.0, x0 + 2.0 + text.chars().count() as f64 * CW9)
            {
                out.line(&format!(
                    "<text class=\"ml\" x=\"{}\" y=\"{}\">{}</text>",
                    coord(x0 + 2.0),
                    coord(top + 11.0),
                    esc(&text)
                ));
            }
        }
    }
}

fn draw_guides(out: &mut Out, m: &Model, lay: &Layout) {
    let mut taken = Taken::default();
    for g in &m.guides {
        let x = lay.x(g.t);
        let (class, label_class) = match g.kind {
            GuideKind::TurnStart => ("g-turn", "gl"),
            GuideKind::TurnEnd => ("g-turn-end", "gl"),
            GuideKind::Stop => ("g-stop", "gl-stop"),
        };
        let line = format!(
            "<line class=\"{class}\" x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{}\">{}</line>",
            coord(TOP - 12.0),
            coord(lay.rows_bottom),
            title(&g.title),
            x = coord(x)
        );
        out.linked(g.entry, &line);
        if !g.label.is_empty() {
            // Right of the line, or left of it where the picture ends.
            let label = shorten(&g.label, 90);
            let w = label.chars().count() as f64 * CW9;
            let (at, anchor) = if x + 2.0 + w > lay.width - MARGIN { (x - 2.0 - w, "end") } else { (x + 2.0, "start") };
            if taken.take(at, at + w) {
                let tx = if anchor == "end" { x - 2.0 } else { x + 2.0 };
                out.line(&format!(
                    "<text class=\"{label_class}\" x=\"{}\" y=\"{}\" text-anchor=\"{anchor}\">{}</text>",
                    coord(tx),
                    coord(TOP - 6.0),
                    esc(&label)
                ));
            }
        }
    }
}

fn draw_spans(out: &mut Out, m: &Model, lay: &Layout, labels: &mut [Taken]) {
    // Lives first (under), then the held turns, then model and tool calls.
    let passes: [&dyn Fn(SpanKind) -> bool; 3] =
        [&|k| k.is_life() && k != SpanKind::Held, &|k| k == SpanKind::Held, &|k| !k.is_life()];
    for pass in passes {
        for s in m.spans.iter().filter(|s| pass(s.kind)) {
            let y = lay.row_y(s.row);
            let (top, h) = if s.kind.is_life() { (y + LIFE_Y, LIFE_H) } else { (y + ACT_Y, ACT_H) };
            let x0 = lay.x(s.t0);
            let w = (lay.x(s.t1) - x0).max(MIN_W);
            let mut class = s.kind.class().to_string();
            if s.error {
                class.push_str(" err");
            }
            if s.cut {
                class.push_str(" cut");
            }
            let mut hover = s.title.clone();
            hover.insert(0, format!("{} {} → {} ({})", s.kind.class(), secs(s.t0), secs(s.t1), secs(s.t1 - s.t0)));
            let rect = format!(
                "<rect class=\"{class}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" data-t0=\"{}\" data-t1=\"{}\">{}</rect>",
                coord(x0),
                coord(top),
                coord(w),
                coord(h),
                s.t0.as_micros(),
                s.t1.as_micros(),
                title(&hover)
            );
            out.linked(s.entry, &rect);
            // The label inside, when it fits.
            let text_w = s.label.chars().count() as f64 * CW9;
            if !s.label.is_empty() && text_w + 4.0 <= w && labels[s.row].take(x0 + 2.0, x0 + 2.0 + text_w) {
                let class = if s.kind.is_life() { "inl" } else { "in" };
                out.line(&format!(
                    "<text class=\"{class}\" x=\"{}\" y=\"{}\">{}</text>",
                    coord(x0 + 2.0),
                    coord(top + h / 2.0 + 3.0),
                    esc(&s.label)
                ));
            }
        }
    }
}

fn draw_budgets(out: &mut Out, m: &Model, lay: &Layout) {
    for (row, points) in m.budgets.iter().enumerate() {
        if points.is_empty() {
            continue;
        }
        let y = lay.row_y(row);
        let max = points.iter().map(|p| p.value).max().unwrap_or(0).max(1) as f64;
        let by = |v: u32| y + BUDGET_BOTTOM - (v as f64 / max) * (BUDGET_BOTTOM - BUDGET_TOP);
        let mut d = String::new();
        let mut prev: Option<u32> = None;
        let mut hover = Vec::new();
        // The pen's position, as printed: a step repeats neither.
        let mut pen = (String::new(), String::new());
        for p in points {
            let (px, py) = (coord(lay.x(p.t)), coord(by(p.value)));
            if p.starts_run || prev.is_none() {
                let _ = write!(d, "M{px},{py}");
            } else {
                if px != pen.0 {
                    let _ = write!(d, "H{px}");
                }
                if py != pen.1 {
                    // Falls at one instant make one fall.
                    if let Some(v) = d.rfind('V')
                        && !d[v..].contains(['H', 'M'])
                    {
                        d.truncate(v);
                    }
                    let _ = write!(d, "V{py}");
                }
            }
            pen = (px, py);
            if p.starts_run || prev != Some(p.value) {
                hover.push(format!("{} budget {}", secs(p.t), p.value));
            }
            prev = Some(p.value);
        }
        out.line(&format!("<path class=\"budget\" d=\"{d}\">{}</path>", title(&hover)));
        for (x, value) in budget_labels(points, lay) {
            out.line(&format!(
                "<text class=\"bl\" x=\"{}\" y=\"{}\">{value}</text>",
                coord(x + 1.0),
                coord(y + BUDGET_BOTTOM + 1.0)
            ));
        }
    }
}

/// Where to write the budget of one row, left to right. Each instant that changes it gets one
/// label, the value it leaves (a spawn and the tool's end at one instant are one fall). Where
/// labels would overlap, a run's last value wins, then its first, then the others in order.
fn budget_labels(points: &[BudgetPoint], lay: &Layout) -> Vec<(f64, u32)> {
    let mut runs: Vec<Vec<(f64, u32)>> = Vec::new();
    for (i, p) in points.iter().enumerate() {
        if p.starts_run || runs.is_empty() {
            runs.push(Vec::new());
        }
        let last_at_instant = points.get(i + 1).is_none_or(|q| q.t != p.t || q.starts_run);
        let run = runs.last_mut().expect("a run was pushed");
        if last_at_instant && run.last().is_none_or(|&(_, v)| v != p.value) {
            run.push((lay.x(p.t), p.value));
        }
    }
    let mut taken = Taken::default();
    let mut placed = Vec::new();
    for run in runs {
        let n = run.len();
        let order = std::iter::once(n - 1).chain((n > 1).then_some(0)).chain(1..n.saturating_sub(1));
        for i in order {
            let (x, value) = run[i];
            let w = value.to_string().len() as f64 * CW8;
            if taken.take(x + 1.0, x + 2.0 + w) {
                placed.push((x, value));
            }
        }
    }
    placed.sort_by(|a, b| a.0.total_cmp(&b.0));
    placed
}

fn draw_arrows(out: &mut Out, m: &Model, lay: &Layout) {
    for a in &m.arrows {
        let (fx, tx) = (lay.x(a.from.1), lay.x(a.to.1));
        let (fy, ty) = (lay.row_y(a.from.0), lay.row_y(a.to.0));
        let d = match a.kind {
            ArrowKind::Spawn(_) => {
                // Down from the parent's bar to the top of the child's.
                let (y1, y2) = if a.to.0 > a.from.0 {
                    (fy + LIFE_Y + LIFE_H, ty + LIFE_Y)
                } else {
                    (fy + LIFE_Y, ty + LIFE_Y + LIFE_H)
                };
                format!("M{},{}V{}", coord(fx), coord(y1), coord(y2))
            }
            _ => {
                // From the child's end up into the bottom of the parent's bar.
                let y1 = fy + LIFE_Y + LIFE_H / 2.0;
                let y2 = if a.to.0 < a.from.0 { ty + LIFE_Y + LIFE_H } else { ty + LIFE_Y };
                let mx = (fx + tx) / 2.0;
                format!(
                    "M{},{}C{},{} {},{} {},{}",
                    coord(fx),
                    coord(y1),
                    coord(mx),
                    coord(y1),
                    coord(tx),
                    coord((y1 + y2) / 2.0),
                    coord(tx),
                    coord(y2)
                )
            }
        };
        let class = a.kind.class();
        let marker = &class[2..];
        let path =
            format!("<path class=\"{class}\" d=\"{d}\" marker-end=\"url(#ah-{marker})\">{}</path>", title(&a.title));
        out.linked(a.entry, &path);
    }
}

fn mark_shape(kind: MarkKind, x: f64, y: f64) -> String {
    let cy = y + LIFE_Y + LIFE_H / 2.0;
    match kind {
        MarkKind::Timeout => format!(
            "<path class=\"m-timeout\" d=\"M{},{}L{},{}M{},{}L{},{}\">",
            coord(x - 4.5),
            coord(cy - 4.5),
            coord(x + 4.5),
            coord(cy + 4.5),
            coord(x - 4.5),
            coord(cy + 4.5),
            coord(x + 4.5),
            coord(cy - 4.5)
        ),
        MarkKind::Truncated => format!(
            "<path class=\"m-trunc\" d=\"M{},{}L{},{}L{},{}L{},{}Z\">",
            coord(x),
            coord(cy - 6.0),
            coord(x + 5.0),
            coord(cy),
            coord(x),
            coord(cy + 6.0),
            coord(x - 5.0),
            coord(cy)
        ),
        MarkKind::Steered => format!(
            "<path class=\"m-steer\" d=\"M{},{}L{},{}L{},{}Z\">",
            coord(x - 5.0),
            coord(y + LIFE_Y - 2.0),
            coord(x + 5.0),
            coord(y + LIFE_Y - 2.0),
            coord(x),
            coord(y + LIFE_Y + 7.0)
        ),
        MarkKind::Denied => {
            format!(
                "<rect class=\"m-denied\" x=\"{}\" y=\"{}\" width=\"9\" height=\"9\">",
                coord(x - 4.5),
                coord(cy - 4.5)
            )
        }
        MarkKind::Refused => format!(
            "<path class=\"m-refused\" d=\"M{},{}a4.5,4.5 0 1,0 9,0a4.5,4.5 0 1,0 -9,0M{},{}L{},{}\">",
            coord(x - 4.5),
            coord(cy),
            coord(x - 3.2),
            coord(cy + 3.2),
            coord(x + 3.2),
            coord(cy - 3.2)
        ),
        MarkKind::Nudge => format!("<circle class=\"m-nudge\" cx=\"{}\" cy=\"{}\" r=\"3.5\">", coord(x), coord(cy)),
        MarkKind::Ask(yes) => format!(
            "<circle class=\"{}\" cx=\"{}\" cy=\"{}\" r=\"3.5\">",
            if yes { "m-ask-yes" } else { "m-ask-no" },
            coord(x),
            coord(cy)
        ),
        MarkKind::End(end) => format!(
            "<rect class=\"{}\" x=\"{}\" y=\"{}\" width=\"3\" height=\"{}\">",
            end.class(),
            coord(x - 1.5),
            coord(y + LIFE_Y - 1.0),
            coord(LIFE_H + 2.0)
        ),
    }
}

fn mark_close(kind: MarkKind) -> &'static str {
    match kind {
        MarkKind::Timeout | MarkKind::Truncated | MarkKind::Steered | MarkKind::Refused => "</path>",
        MarkKind::Denied | MarkKind::End(_) => "</rect>",
        MarkKind::Nudge | MarkKind::Ask(_) => "</circle>",
    }
}

fn draw_marks(out: &mut Out, m: &Model, lay: &Layout, labels: &mut [Taken]) {
    // End caps sit at their instant; the other markers of one row step aside so that markers
    // of one instant stay apart, and are drawn over the caps.
    let mut last: BTreeMap<usize, f64> = BTreeMap::new();
    let is_cap = |k: &&Mark| matches!(k.kind, MarkKind::End(_));
    let mut texts: Vec<(usize, f64, &str)> = Vec::new();
    let mut cap_texts = Vec::new();
    for k in m.marks.iter().filter(is_cap).chain(m.marks.iter().filter(|k| !is_cap(k))) {
        let y = lay.row_y(k.row);
        let mut x = lay.x(k.t);
        if !is_cap(&k) {
            if let Some(&l) = last.get(&k.row)
                && x < l + MARK_GAP
            {
                x = l + MARK_GAP;
            }
            last.insert(k.row, x);
        }
        let element = format!("{}{}{}", mark_shape(k.kind, x, y), title(&k.title), mark_close(k.kind));
        out.linked(k.entry, &element);
        if !k.label.is_empty() {
            if is_cap(&k) {
                cap_texts.push((k.row, x, k.label.as_str()))
            } else {
                texts.push((k.row, x, k.label.as_str()))
            }
        }
    }
    // Labels last, over every marker: the markers' own first, then the end words.
    for (row, x, text) in texts.into_iter().chain(cap_texts) {
        let w = text.chars().count() as f64 * CW9;
        if labels[row].take(x + 6.0, x + 6.0 + w) {
            out.line(&format!(
                "<text class=\"ml\" x=\"{}\" y=\"{}\">{}</text>",
                coord(x + 6.0),
                coord(lay.row_y(row) + LIFE_Y + LIFE_H / 2.0 + 3.0),
                esc(text)
            ));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The legend: only what the picture uses.

#[derive(Clone, Copy, PartialEq, Eq)]
enum Swatch {
    Span(&'static str),
    Line(&'static str),
    Mark(MarkKind),
    Budget,
    Guide(&'static str),
}

struct Legend(Vec<(Swatch, &'static str)>);

impl Legend {
    fn of(m: &Model) -> Legend {
        let span = |k: SpanKind| m.spans.iter().any(|s| s.kind == k);
        let span_err = m.spans.iter().any(|s| s.error);
        let cut = m.spans.iter().any(|s| s.cut);
        let arrow = |k: ArrowKind| m.arrows.iter().any(|a| a.kind == k);
        let mark = |f: &dyn Fn(MarkKind) -> bool| m.marks.iter().any(|k| f(k.kind));
        let guide = |k: GuideKind| m.guides.iter().any(|g| g.kind == k);
        let mut items = Vec::new();
        let mut add = |present: bool, swatch: Swatch, text: &'static str| {
            if present {
                items.push((swatch, text));
            }
        };
        add(span(SpanKind::Turn), Swatch::Span("turn"), "root turn");
        add(span(SpanKind::Foreground), Swatch::Span("fg"), "foreground child");
        add(span(SpanKind::Queued), Swatch::Span("queued"), "queued (waiting for a slot)");
        add(span(SpanKind::Running), Swatch::Span("running"), "background running");
        add(span(SpanKind::Run), Swatch::Span("run"), "agent loop");
        add(span(SpanKind::Held), Swatch::Span("held"), "turn held for children");
        add(span(SpanKind::Llm), Swatch::Span("llm"), "model call");
        add(span(SpanKind::Tool), Swatch::Span("tool"), "tool call");
        add(span_err, Swatch::Span("tool err"), "error result / model error");
        add(cut, Swatch::Span("run cut"), "cut short / still open");
        add(!m.budgets.iter().all(Vec::is_empty), Swatch::Budget, "steps left (budget)");
        add(arrow(ArrowKind::Spawn(Family::Foreground)), Swatch::Line("a-spawn-fg"), "spawn (foreground)");
        add(arrow(ArrowKind::Spawn(Family::Background)), Swatch::Line("a-spawn-bg"), "spawn (background)");
        add(arrow(ArrowKind::ChildResult), Swatch::Line("a-result"), "child.result");
        add(arrow(ArrowKind::Notification), Swatch::Line("a-notify"), "delivered: notification");
        add(arrow(ArrowKind::Wait), Swatch::Line("a-wait"), "delivered: wait");
        let ends = |e: &[End]| mark(&|k| matches!(k, MarkKind::End(x) if e.contains(&x)));
        add(ends(&[End::Ok, End::Completed]), Swatch::Mark(MarkKind::End(End::Ok)), "ended ok");
        add(ends(&[End::Error, End::Failed]), Swatch::Mark(MarkKind::End(End::Error)), "ended with error");
        add(ends(&[End::AwaitingUser]), Swatch::Mark(MarkKind::End(End::AwaitingUser)), "awaiting user");
        add(ends(&[End::TimedOut]), Swatch::Mark(MarkKind::End(End::TimedOut)), "timed out");
        add(ends(&[End::Cancelled]), Swatch::Mark(MarkKind::End(End::Cancelled)), "cancelled");
        add(mark(&|k| k == MarkKind::Timeout), Swatch::Mark(MarkKind::Timeout), "timeout");
        add(mark(&|k| k == MarkKind::Truncated), Swatch::Mark(MarkKind::Truncated), "truncated");
        add(mark(&|k| k == MarkKind::Steered), Swatch::Mark(MarkKind::Steered), "steered");
        add(mark(&|k| k == MarkKind::Denied), Swatch::Mark(MarkKind::Denied), "denied");
        add(mark(&|k| matches!(k, MarkKind::Ask(_))), Swatch::Mark(MarkKind::Ask(true)), "approval asked");
        add(mark(&|k| k == MarkKind::Refused), Swatch::Mark(MarkKind::Refused), "spawn refused");
        add(mark(&|k| k == MarkKind::Nudge), Swatch::Mark(MarkKind::Nudge), "nudge");
        add(guide(GuideKind::TurnStart), Swatch::Guide("g-turn"), "turn start");
        add(guide(GuideKind::TurnEnd), Swatch::Guide("g-turn-end"), "turn end");
        add(guide(GuideKind::Stop), Swatch::Guide("g-stop"), "harness stop");
        Legend(items)
    }

    /// Each item's position, flowing left to right in lines of at most `width`.
    fn places(&self, width: f64) -> Vec<(f64, f64)> {
        let (mut x, mut y) = (8.0, 0.0);
        let mut out = Vec::new();
        for (_, text) in &self.0 {
            let w = 30.0 + text.chars().count() as f64 * 6.1 + 18.0;
            if x + w > width && x > 8.0 {
                x = 8.0;
                y += 18.0;
            }
            out.push((x, y));
            x += w;
        }
        out
    }

    fn height(&self, width: f64) -> f64 {
        self.places(width).last().map_or(0.0, |&(_, y)| y + 30.0)
    }

    fn draw(&self, out: &mut Out, x0: f64, y0: f64, width: f64) {
        if self.0.is_empty() {
            return;
        }
        let h = self.height(width);
        out.line("<g class=\"key\">");
        out.line(&format!(
            "<rect class=\"lbox\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>",
            coord(x0),
            coord(y0),
            coord(width),
            coord(h)
        ));
        for ((swatch, text), (dx, dy)) in self.0.iter().zip(self.places(width)) {
            let (x, y) = (x0 + dx, y0 + 8.0 + dy);
            let shape = match swatch {
                Swatch::Span(class) => {
                    format!(
                        "<rect class=\"{class}\" x=\"{}\" y=\"{}\" width=\"24\" height=\"12\"/>",
                        coord(x),
                        coord(y)
                    )
                }
                Swatch::Line(class) => format!(
                    "<path class=\"{class}\" d=\"M{},{}H{}\" marker-end=\"url(#ah-{})\"/>",
                    coord(x),
                    coord(y + 6.0),
                    coord(x + 24.0),
                    &class[2..]
                ),
                Swatch::Budget => format!(
                    "<path class=\"budget\" d=\"M{},{}H{}V{}H{}\"/>",
                    coord(x),
                    coord(y + 2.0),
                    coord(x + 12.0),
                    coord(y + 10.0),
                    coord(x + 24.0)
                ),
                Swatch::Guide(class) => {
                    format!(
                        "<line class=\"{class}\" x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{}\"/>",
                        coord(y - 2.0),
                        coord(y + 14.0),
                        x = coord(x + 12.0)
                    )
                }
                Swatch::Mark(kind) => {
                    let element = mark_shape(*kind, x + 12.0, y + 6.0 - LIFE_Y - LIFE_H / 2.0);
                    format!("{element}{}", mark_close(*kind))
                }
            };
            out.line(&shape);
            out.line(&format!(
                "<text class=\"legend\" x=\"{}\" y=\"{}\">{}</text>",
                coord(x + 30.0),
                coord(y + 10.0),
                esc(text)
            ));
        }
        out.line("</g>");
    }
}

// ---------------------------------------------------------------------------------------------
// Formatting.

/// A coordinate rounded to one decimal, printed the same way everywhere (`12`, `12.5`).
fn coord(v: f64) -> String {
    let tenths = (v * 10.0).round() as i64;
    let (whole, frac) = (tenths / 10, (tenths % 10).abs());
    let sign = if tenths < 0 && whole == 0 { "-" } else { "" };
    if frac == 0 { format!("{sign}{whole}") } else { format!("{sign}{whole}.{frac}") }
}

/// Virtual time as the trace writes it.
fn secs(d: Duration) -> String {
    format!("{}.{:03}s", d.as_secs(), d.subsec_millis())
}

/// At most `max` characters of `s`, with an ellipsis when shortened.
fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    if max == 0 {
        return String::new();
    }
    let mut t: String = s.chars().take(max - 1).collect();
    t.push('…');
    t
}

/// `s` escaped for XML text and attribute values: every label is one line.
fn esc(s: &str) -> String {
    crate::markup::escape(s, crate::markup::Breaks::Show)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coordinates_print_with_one_fixed_decimal() {
        assert_eq!(coord(12.0), "12");
        assert_eq!(coord(12.04), "12");
        assert_eq!(coord(12.06), "12.1");
        assert_eq!(coord(-0.01), "0");
        assert_eq!(coord(-0.5), "-0.5");
        assert_eq!(coord(-3.25), "-3.3");
    }

    #[test]
    fn ticks_are_1_2_5_steps_labelled_with_the_decimals_they_need() {
        assert_eq!(tick_step_ms(2200), 500);
        assert_eq!(tick_step_ms(120_200), 20_000);
        assert_eq!(tick_step_ms(0), 1);
        assert_eq!(tick_step_ms(400), 50);
        assert_eq!(tick_label(2500, 500), "2.5s");
        assert_eq!(tick_label(40_000, 20_000), "40s");
        assert_eq!(tick_label(150, 50), "0.15s");
        assert_eq!(tick_label(7, 1), "0.007s");
    }

    #[test]
    fn html_is_chosen_by_extension() {
        assert!(wants_html(Path::new("out.html")));
        assert!(wants_html(Path::new("OUT.HTM")));
        assert!(!wants_html(Path::new("out.svg")));
        assert!(!wants_html(Path::new("out")));
    }
}

//! The record of a run: every core event and every harness event, stamped with virtual time.
//! (The harness's `Recorder` writes it during a run.)
//!
//! One line per event: virtual time, agent alias, event name, the few fields that matter.
//! The same input gives byte-identical text (nothing here reads a clock other than tokio's,
//! and nothing is ordered by a hash). The JSON-lines form carries every field in full; the
//! text form shortens long strings in the middle, keeping both ends, so notices at the end of
//! a 4000-character result stay visible. This module records and renders; it judges nothing.

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::{Value, json};

use crate::sut::AgentId;
use crate::sut::event::{Event, Family, OutcomeKind, Status, Via};

/// What happened, from the core or from the harness.
#[derive(Clone, Debug, PartialEq)]
pub enum What {
    /// An event of the core.
    Core(Event),
    /// The risk gate asked the (scripted) user about a call.
    Asked {
        /// The tool asked about.
        tool: String,
        /// The scripted answer.
        approve: bool,
    },
    /// The harness stopped the run (authoring error, horizon, event cap).
    Stopped(String),
}

/// One trace entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// Virtual time since the run began.
    pub at: Duration,
    /// The agent it belongs to.
    pub agent: AgentId,
    /// What happened.
    pub what: What,
}

/// A whole run's record.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trace {
    /// Entries in the order they happened.
    pub entries: Vec<Entry>,
}

/// Whether [`printable`] escapes `c`: control characters, bidi overrides and isolates, line
/// and paragraph separators (what could reorder or split a line a person reads). Every
/// report that shows a file's text to a person (text, JUnit) escapes the same set.
pub(crate) fn unprintable(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}')
}

/// Text made safe for a terminal or a CI log: control characters (newlines, escapes, bells),
/// and the Unicode controls that reorder a line, written as `\n`, `\t`, `\r` or `\u{..}`, so a
/// scenario name or a file name can neither forge a `PASS` line nor colour the output.
#[doc(hidden)]
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = unprintable;
    if !text.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if unsafe_char(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `s` as a JSON string, whole (`"a\"b"`), written straight into one string.
#[doc(hidden)]
pub fn json_string(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

/// A string quoted for a message (JSON quoting, control characters escaped), shortened in the
/// middle past 160 characters as in the text trace.
#[doc(hidden)]
pub fn quoted(s: &str) -> String {
    printable(&q(s)).into_owned()
}

/// How an expected text and the text found differ, readably at any length: both texts when
/// short; else both lengths, the first character where they differ (from 1) and a short
/// window of each around it.
#[doc(hidden)]
pub fn text_difference(expected: &str, got: &str) -> String {
    const SHORT: usize = 60;
    let (want_chars, got_chars) = (expected.chars().count(), got.chars().count());
    if want_chars <= SHORT && got_chars <= SHORT {
        return format!("expected {}, got {}", quoted(expected), quoted(got));
    }
    let first = expected.chars().zip(got.chars()).take_while(|(a, b)| a == b).count();
    let window = |text: &str| {
        let start = first.saturating_sub(12);
        let piece: String = text.chars().skip(start).take(36).collect();
        let before = if start > 0 { "…" } else { "" };
        let after = if text.chars().count() > start + 36 { "…" } else { "" };
        format!("{before}{}{after}", quoted(&piece))
    };
    let lengths = format!("expected {want_chars} characters, got {got_chars}");
    if first == want_chars.min(got_chars) {
        let (longer, which) =
            if got_chars > want_chars { (got, "the text found") } else { (expected, "the expected text") };
        return format!(
            "{lengths}: the shorter is the start of the longer, which goes on at character {} with {}",
            first + 1,
            window(longer)
        ) + &format!(" ({which})");
    }
    format!(
        "{lengths}; they first differ at character {}: expected {}, got {}",
        first + 1,
        window(expected),
        window(got)
    )
}

/// Quotes a string for the text trace, shortening it in the middle past 160 characters.
fn q(s: &str) -> String {
    let n = s.chars().count();
    if n <= 160 {
        return json_string(s);
    }
    let head: String = s.chars().take(70).collect();
    let tail: String = s.chars().skip(n - 70).collect();
    let (head, tail) = (json_string(&head), json_string(&tail));
    format!("{}…{} ({n} chars)", &head[..head.len() - 1], &tail[1..])
}

fn secs(d: Duration) -> String {
    format!("{}.{:03}s", d.as_secs(), d.subsec_millis())
}

/// How the trace spells an outcome kind (`final_answer`); golden files spell it the same.
pub(crate) fn kind(k: OutcomeKind) -> &'static str {
    match k {
        OutcomeKind::FinalAnswer => "final_answer",
        OutcomeKind::Fail => "fail",
        OutcomeKind::AwaitingUser => "awaiting_user",
    }
}

/// How the trace spells a status (`ok`); golden files spell it the same.
pub(crate) fn status(s: Status) -> &'static str {
    match s {
        Status::Ok => "ok",
        Status::Error => "error",
    }
}

/// The event name and its fields, for one entry.
fn describe(what: &What) -> (&'static str, String) {
    match what {
        What::Asked { tool, approve } => {
            ("ask", format!("{tool} answer={}", if *approve { "approve" } else { "deny" }))
        }
        What::Stopped(reason) => ("stopped", q(reason)),
        What::Core(event) => match event {
            Event::TurnStarted { turn, message, budget } => {
                ("turn.start", format!("#{turn} budget={budget} {}", q(message)))
            }
            Event::TurnEnded { turn, kind: k, status: s, budget } => {
                ("turn.end", format!("#{turn} {} {} budget={budget}", kind(*k), status(*s)))
            }
            Event::AgentStarted { depth, goal, budget, request_id } => {
                ("agent.start", format!("depth={depth} budget={budget} request={request_id} goal={}", q(goal)))
            }
            Event::LlmRequest { call, messages, tools, budget } => {
                ("llm.request", format!("#{call} messages={messages} tools={tools} budget={budget}"))
            }
            Event::LlmReply { text, calls } => ("llm.reply", format!("calls=[{}] text={}", calls.join(", "), q(text))),
            Event::LlmFailed { error } => ("llm.error", q(error)),
            Event::Denied { tool, reason, budget } => ("denied", format!("{tool} budget={budget} {}", q(reason))),
            Event::ToolStarted { tool, args, .. } => ("tool.start", format!("{tool} {args}")),
            Event::ToolEnded { tool, is_error, result, budget, recovery, .. } => (
                "tool.end",
                format!(
                    "{tool} {} budget={budget} recovery={recovery} {}",
                    if *is_error { "error" } else { "ok" },
                    q(result)
                ),
            ),
            Event::Nudge { budget, recovery } => ("nudge", format!("budget={budget} recovery={recovery}")),
            Event::StepCompleted { step_index, budget } => ("step", format!("index={step_index} budget={budget}")),
            Event::Spawned { child, family, task, cost, grant, budget_before, budget_after } => (
                "spawn",
                format!(
                    "{child} {} cost={cost} grant={grant} budget={budget_before}→{budget_after} task={}",
                    match family {
                        Family::Foreground => "foreground",
                        Family::Background => "background",
                    },
                    q(task)
                ),
            ),
            Event::SpawnRefused { tool, reason } => ("spawn.refused", format!("{tool} {}", q(reason))),
            Event::ChildResult { child, is_error, chars, truncated_to } => (
                "child.result",
                format!(
                    "{child} {} chars={chars}{}",
                    if *is_error { "error" } else { "ok" },
                    truncated_to.map(|t| format!(" truncated_to={t}")).unwrap_or_default()
                ),
            ),
            Event::TimedOut { child, after } => ("timeout", format!("{child} after={}", secs(*after))),
            Event::AgentEnded { kind: k, status: s, message, steps, budget } => {
                ("agent.end", format!("{} {} steps={steps} budget={budget} {}", kind(*k), status(*s), q(message)))
            }
            Event::TaskQueued { task_id, session, .. } => ("task.queued", format!("{task_id} session={session}")),
            Event::TaskStarted { task_id, timeout, .. } => (
                "task.started",
                format!("{task_id}{}", timeout.map(|t| format!(" timeout={}", secs(t))).unwrap_or_default()),
            ),
            Event::TaskEnded { task_id, status: s, body, .. } => {
                ("task.ended", format!("{task_id} {} {}", s.as_str(), q(body)))
            }
            Event::Delivered { task_id, status: s, via } => (
                "delivered",
                format!(
                    "{task_id} {} via={}",
                    s.as_str(),
                    match via {
                        Via::Notification => "notification",
                        Via::Wait => "wait",
                    }
                ),
            ),
            Event::Steered { message } => ("steered", q(message)),
            Event::AwaitingChildren { unfinished } => ("awaiting", format!("unfinished={unfinished}")),
            Event::SessionOpened { name, kind } => ("session.open", format!("{name} kind={kind}")),
            Event::SessionClosed { name, kept } => {
                ("session.close", format!("{name} {}", if *kept { "kept" } else { "discarded" }))
            }
        },
    }
}

impl Entry {
    /// The entry as one text line.
    pub fn line(&self) -> String {
        let (name, fields) = describe(&self.what);
        format!("{:>10} {:<8} {:<14} {fields}", secs(self.at), self.agent.as_str(), name).trim_end().to_string()
    }

    /// The entry as a JSON object with every field in full.
    pub fn json(&self) -> Value {
        let (name, _) = describe(&self.what);
        let mut fields = match &self.what {
            What::Asked { tool, approve } => json!({"tool": tool, "approve": approve}),
            What::Stopped(reason) => json!({"reason": reason}),
            What::Core(event) => core_json(event),
        };
        let object = fields.as_object_mut().expect("fields are an object");
        object.insert("t_ms".into(), json!(self.at.as_millis() as u64));
        object.insert("agent".into(), json!(self.agent.as_str()));
        object.insert("event".into(), json!(name));
        fields
    }
}

fn core_json(event: &Event) -> Value {
    match event {
        Event::TurnStarted { turn, message, budget } => json!({"turn": turn, "message": message, "budget": budget}),
        Event::TurnEnded { turn, kind: k, status: s, budget } => {
            json!({"turn": turn, "outcome": kind(*k), "status": status(*s), "budget": budget})
        }
        Event::AgentStarted { depth, goal, budget, request_id } => {
            json!({"depth": depth, "goal": goal, "budget": budget, "request_id": request_id})
        }
        Event::LlmRequest { call, messages, tools, budget } => {
            json!({"call": call, "messages": messages, "tools": tools, "budget": budget})
        }
        Event::LlmReply { text, calls } => json!({"text": text, "calls": calls}),
        Event::LlmFailed { error } => json!({"error": error}),
        Event::Denied { tool, reason, budget } => json!({"tool": tool, "reason": reason, "budget": budget}),
        Event::ToolStarted { call_id, tool, args } => json!({"call_id": call_id, "tool": tool, "args": args}),
        Event::ToolEnded { call_id, tool, is_error, result, budget, recovery } => json!({
            "call_id": call_id, "tool": tool, "is_error": is_error, "result": result, "budget": budget, "recovery": recovery
        }),
        Event::Nudge { budget, recovery } => json!({"budget": budget, "recovery": recovery}),
        Event::StepCompleted { step_index, budget } => json!({"step_index": step_index, "budget": budget}),
        Event::Spawned { child, family, task, cost, grant, budget_before, budget_after } => json!({
            "child": child, "family": format!("{family:?}").to_lowercase(), "task": task, "cost": cost, "grant": grant,
            "budget_before": budget_before, "budget_after": budget_after
        }),
        Event::SpawnRefused { tool, reason } => json!({"tool": tool, "reason": reason}),
        Event::ChildResult { child, is_error, chars, truncated_to } => {
            json!({"child": child, "is_error": is_error, "chars": chars, "truncated_to": truncated_to})
        }
        Event::TimedOut { child, after } => json!({"child": child, "after_ms": after.as_millis() as u64}),
        Event::AgentEnded { kind: k, status: s, message, steps, budget } => {
            json!({"outcome": kind(*k), "status": status(*s), "message": message, "steps": steps, "budget": budget})
        }
        Event::TaskQueued { task_id, child, session } => {
            json!({"task_id": task_id, "child": child, "session": session})
        }
        Event::TaskStarted { task_id, child, timeout } => {
            json!({"task_id": task_id, "child": child, "timeout_ms": timeout.map(|t| t.as_millis() as u64)})
        }
        Event::TaskEnded { task_id, child, status: s, body } => {
            json!({"task_id": task_id, "child": child, "status": s.as_str(), "body": body})
        }
        Event::Delivered { task_id, status: s, via } => {
            json!({"task_id": task_id, "status": s.as_str(), "via": format!("{via:?}").to_lowercase()})
        }
        Event::Steered { message } => json!({"message": message}),
        Event::AwaitingChildren { unfinished } => json!({"unfinished": unfinished}),
        Event::SessionOpened { name, kind } => json!({"name": name, "kind": kind}),
        Event::SessionClosed { name, kept } => json!({"name": name, "kept": kept}),
    }
}

impl Trace {
    /// One text line per entry.
    pub fn lines(&self) -> Vec<String> {
        self.entries.iter().map(Entry::line).collect()
    }

    /// The text lines of the entries at `indices` (those that exist), rendered on demand.
    pub fn lines_at(&self, indices: &[usize]) -> Vec<String> {
        indices.iter().filter_map(|i| self.entries.get(*i)).map(Entry::line).collect()
    }

    /// The text lines of the last `n` entries.
    pub fn tail(&self, n: usize) -> Vec<String> {
        self.entries[self.entries.len().saturating_sub(n)..].iter().map(Entry::line).collect()
    }

    /// The text trace.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for line in self.lines() {
            let _ = writeln!(out, "{line}");
        }
        out
    }

    /// The trace as JSON lines.
    pub fn json_lines(&self) -> String {
        let mut out = String::new();
        for entry in &self.entries {
            let _ = writeln!(out, "{}", entry.json());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sut::event::TaskStatus;

    /// One entry of every event, with the values docs/trace-format.md shows. The match has no
    /// wildcard: a new event does not compile until it has a sample here, and then the page
    /// test asks for its section.
    fn samples() -> Vec<Entry> {
        let main = AgentId::root();
        let child = main.child(1);
        let ms = Duration::from_millis;
        let core = |at: u64, agent: &AgentId, event: Event| Entry {
            at: ms(at),
            agent: agent.clone(),
            what: What::Core(event),
        };
        let events = vec![
            core(0, &main, Event::TurnStarted { turn: 1, message: "go".into(), budget: 30 }),
            core(0, &main, Event::LlmRequest { call: 1, messages: 1, tools: 7, budget: 30 }),
            core(100, &main, Event::LlmReply { text: "".into(), calls: vec!["subagent".into()] }),
            core(100, &main, Event::LlmFailed { error: "rate limited".into() }),
            core(100, &main, Event::Denied { tool: "shell".into(), reason: "denied by the user".into(), budget: 29 }),
            core(
                100,
                &main,
                Event::ToolStarted {
                    call_id: "call-1".into(),
                    tool: "subagent".into(),
                    args: std::sync::Arc::new(serde_json::json!({"prompt": "alpha"})),
                },
            ),
            core(
                100,
                &main,
                Event::Spawned {
                    child: child.clone(),
                    family: Family::Background,
                    task: "alpha".into(),
                    cost: 1,
                    grant: 10,
                    budget_before: 30,
                    budget_after: 19,
                },
            ),
            core(100, &child, Event::SessionOpened { name: "temp/sub-e220a839".into(), kind: "temp" }),
            core(
                100,
                &child,
                Event::TaskQueued {
                    task_id: "sub-e220a839".into(),
                    child: child.clone(),
                    session: "temp/sub-e220a839".into(),
                },
            ),
            core(
                100,
                &child,
                Event::TaskStarted { task_id: "sub-e220a839".into(), child: child.clone(), timeout: Some(ms(30000)) },
            ),
            core(
                100,
                &main,
                Event::ToolEnded {
                    call_id: "call-1".into(),
                    tool: "subagent".into(),
                    is_error: false,
                    result: "{\"task_id\":\"sub-e220a839\"}".into(),
                    budget: 19,
                    recovery: 5,
                },
            ),
            core(100, &main, Event::StepCompleted { step_index: 0, budget: 19 }),
            core(
                100,
                &child,
                Event::AgentStarted {
                    depth: 1,
                    goal: "alpha".into(),
                    budget: 10,
                    request_id: "req-1-sub-e220a839".into(),
                },
            ),
            core(200, &main, Event::Nudge { budget: 18, recovery: 4 }),
            core(200, &main, Event::SpawnRefused { tool: "Agent".into(), reason: "depth limit 2 reached".into() }),
            core(200, &main, Event::AwaitingChildren { unfinished: 1 }),
            core(300, &main, Event::Steered { message: "hurry up".into() }),
            core(30100, &main, Event::TimedOut { child: child.clone(), after: ms(30000) }),
            core(
                30100,
                &main,
                Event::ChildResult { child: child.clone(), is_error: false, chars: 4000, truncated_to: Some(2000) },
            ),
            core(
                30100,
                &child,
                Event::AgentEnded {
                    kind: OutcomeKind::FinalAnswer,
                    status: Status::Ok,
                    message: "ok".into(),
                    steps: 0,
                    budget: 9,
                },
            ),
            core(
                30100,
                &child,
                Event::TaskEnded {
                    task_id: "sub-e220a839".into(),
                    child: child.clone(),
                    status: TaskStatus::Completed,
                    body: "ok".into(),
                },
            ),
            core(30100, &child, Event::SessionClosed { name: "temp/sub-e220a839".into(), kept: false }),
            core(
                30100,
                &main,
                Event::Delivered {
                    task_id: "sub-e220a839".into(),
                    status: TaskStatus::Completed,
                    via: Via::Notification,
                },
            ),
            core(
                30200,
                &main,
                Event::TurnEnded { turn: 1, kind: OutcomeKind::FinalAnswer, status: Status::Ok, budget: 17 },
            ),
            Entry { at: ms(100), agent: main.clone(), what: What::Asked { tool: "shell".into(), approve: false } },
            Entry { at: ms(900000), agent: main.clone(), what: What::Stopped("the run passed its horizon".into()) },
        ];
        // Exhaustive on purpose (see above).
        for entry in &events {
            if let What::Core(event) = &entry.what {
                match event {
                    Event::TurnStarted { .. }
                    | Event::TurnEnded { .. }
                    | Event::AgentStarted { .. }
                    | Event::LlmRequest { .. }
                    | Event::LlmReply { .. }
                    | Event::LlmFailed { .. }
                    | Event::Denied { .. }
                    | Event::ToolStarted { .. }
                    | Event::ToolEnded { .. }
                    | Event::Nudge { .. }
                    | Event::StepCompleted { .. }
                    | Event::Spawned { .. }
                    | Event::SpawnRefused { .. }
                    | Event::ChildResult { .. }
                    | Event::TimedOut { .. }
                    | Event::AgentEnded { .. }
                    | Event::TaskQueued { .. }
                    | Event::TaskStarted { .. }
                    | Event::TaskEnded { .. }
                    | Event::Delivered { .. }
                    | Event::Steered { .. }
                    | Event::AwaitingChildren { .. }
                    | Event::SessionOpened { .. }
                    | Event::SessionClosed { .. } => {}
                }
            }
        }
        events
    }

    /// docs/trace-format.md has a section per event (`` ### `llm.reply` ``), and each section's
    /// example is exactly what the renderer writes for the sample: a change to a line's format
    /// fails here until the page says it.
    #[test]
    fn the_trace_format_page_shows_every_event_as_the_renderer_writes_it() {
        let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/trace-format.md")).unwrap();
        let sections: Vec<(&str, &str)> = page
            .split("\n### `")
            .skip(1)
            .map(|section| section.split_once('`').expect("a heading names its event in backticks"))
            .collect();
        let samples = samples();
        let mut names: Vec<&str> = samples.iter().map(|e| describe(&e.what).0).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), samples.len(), "one sample per event");
        let mut documented: Vec<&str> = sections.iter().map(|(name, _)| *name).collect();
        documented.sort_unstable();
        assert_eq!(documented, names, "the page's sections are the renderer's events");
        for entry in &samples {
            let name = describe(&entry.what).0;
            let (_, body) = sections.iter().find(|(n, _)| *n == name).unwrap();
            let line = entry.line();
            assert!(
                body.lines().any(|l| l.strip_prefix("    ") == Some(line.as_str())),
                "docs/trace-format.md's `{name}` section should show the line\n    {line}"
            );
        }
    }

    #[test]
    fn short_differences_show_both_texts() {
        assert_eq!(text_difference("All clear.", "All clear"), r#"expected "All clear.", got "All clear""#);
    }

    #[test]
    fn long_differences_show_lengths_position_and_window() {
        let expected = format!("{}x{}", "é".repeat(4000), "é".repeat(100));
        let got = "é".repeat(4101);
        let d = text_difference(&expected, &got);
        assert!(
            d.starts_with(
                "expected 4101 characters, got 4101; they first differ at character 4001: expected …\"ééééééééééééx"
            ),
            "{d}"
        );
        assert!(d.len() < 300, "{d}");
        let d = text_difference(&"a".repeat(100), &"a".repeat(101));
        assert!(d.starts_with("expected 100 characters, got 101: the shorter is the start of the longer, which goes on at character 101"), "{d}");
        assert!(!d.contains("Some("));
    }

    #[test]
    fn long_strings_keep_both_ends() {
        let s = format!("{}END", "a".repeat(300));
        let quoted = q(&s);
        assert!(quoted.starts_with("\"aaaa"));
        assert!(quoted.ends_with("END\" (303 chars)"), "{quoted}");
        assert_eq!(q("short\nline"), "\"short\\nline\"");
    }
}

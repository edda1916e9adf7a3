//! Oracle `wait` (`oracle.wait.*`): what a `subagent.wait` covers, when it returns, what it
//! reads and in which order its result lists it (`docs/rules/bub.md` §4.3).
//!
//! The delivery oracle checks that each result is delivered once; this one checks the wait's
//! own answer: every unread result of a covered task read by it, and no other task's, in
//! completion order (ties in spawn order), then the other covered tasks in spawn order with
//! their status; returned in the instant the last covered task finished, or at the deadline,
//! whichever is first.

use std::time::Duration;

use serde_json::{Value, json};

use super::index::{Index, Tasks, list_arg, seconds_arg, status_word};
use super::{Oracle, Report, core_events};
use crate::evidence::Evidence;
use crate::sut::AgentId;
use crate::sut::event::{Event, TaskStatus, Via};

/// `bub.wait.params`: the wait when the call gives no `timeout_seconds`.
const DEFAULT_WAIT: Duration = Duration::from_secs(60);

/// A result a wait read: its task, status, body, and completion order.
struct Read<'a> {
    task_id: &'a str,
    status: TaskStatus,
    body: &'a str,
    order: (Duration, usize),
}

/// A `subagent.wait` under way.
struct Wait<'a> {
    line: usize,
    /// The covered tasks, by id.
    covered: Vec<&'a str>,
    deadline: Duration,
    /// When the last covered task still unfinished at the start finished, once all have.
    done: Option<Duration>,
    read: Vec<Read<'a>>,
}

pub(super) fn wait(e: &Evidence, index: &Index, r: &mut Report) {
    let root = AgentId::root();
    let mut tasks = Tasks::new(index);
    let mut current: Option<Wait> = None;
    for (i, entry, event) in core_events(e.trace) {
        match event {
            Event::ToolStarted { tool, args, .. } if tool == "subagent.wait" && entry.agent == root => {
                let listed = list_arg(args, "task_ids");
                // `bub.wait.listed`, `bub.wait.without-ids`.
                let mut covered: Vec<&str> = Vec::new();
                if listed.is_empty() {
                    covered.extend(tasks.all().filter(|t| t.state.active() || tasks.has_unread(t.id)).map(|t| t.id));
                } else {
                    for id in &listed {
                        // An unknown id makes the call an error (oracle `texts`).
                        let Some(known) = tasks.get(id.trim()).map(|t| t.id) else {
                            covered.clear();
                            break;
                        };
                        if !covered.contains(&known) {
                            covered.push(known);
                        }
                    }
                }
                covered.sort_by_key(|id| tasks.get(id).map(|t| t.seq));
                let limit = seconds_arg(args, "timeout_seconds").unwrap_or(DEFAULT_WAIT);
                let all_done = covered.iter().all(|id| tasks.get(id).is_some_and(|t| !t.state.active()));
                current = Some(Wait {
                    line: i,
                    covered,
                    deadline: entry.at.saturating_add(limit),
                    done: all_done.then_some(entry.at),
                    read: Vec::new(),
                });
            }
            Event::Delivered { task_id, via: Via::Wait, .. } => {
                // `bub.wait.listed`: a wait reads the results of the tasks it covers, and no
                // other task's, which stay for a notification or a later wait.
                if let Some(w) = current.as_ref()
                    && !w.covered.contains(&task_id.as_str())
                {
                    r.add(
                        Oracle::Wait,
                        i,
                        format!("`subagent.wait` read the result of {task_id}, which it does not cover"),
                        vec![w.line],
                    );
                }
                if let (Some(w), Some(unread)) =
                    (current.as_mut(), tasks.unread.iter().find(|u| u.task_id == task_id.as_str()))
                {
                    w.read.push(Read {
                        task_id: unread.task_id,
                        status: unread.status,
                        body: unread.body,
                        order: (unread.at, unread.seq),
                    });
                }
            }
            Event::ToolEnded { tool, result, is_error: false, .. }
                if tool == "subagent.wait" && entry.agent == root =>
            {
                if let Some(w) = current.take()
                    && !w.covered.is_empty()
                {
                    judge(r, i, entry.at, &w, result, &tasks);
                }
            }
            _ => {}
        }
        tasks.observe(i, entry, event);
        if let (Event::TaskEnded { .. }, Some(w)) = (event, current.as_mut())
            && w.done.is_none()
            && w.covered.iter().all(|id| tasks.get(id).is_some_and(|t| !t.state.active()))
        {
            w.done = Some(entry.at);
        }
    }
}

fn judge(r: &mut Report, line: usize, at: Duration, w: &Wait, result: &str, tasks: &Tasks) {
    // `bub.wait.deadline`, `bub.wait.peek`, `bub.wait.listed`: back when all covered tasks
    // have finished, at the latest at the deadline.
    let want_at = w.done.map_or(w.deadline, |done| done.min(w.deadline));
    if at != want_at {
        let why = match w.done {
            Some(done) if done <= w.deadline => format!("its last covered task finished at {done:?}"),
            _ => format!("its deadline was {:?}", w.deadline),
        };
        r.add(Oracle::Wait, line, format!("`subagent.wait` returned at {at:?}, but {why}"), vec![w.line]);
    }
    // `bub.wait.listed`: every unread result of a covered task is read by the call.
    if let Some(left) = tasks.unread.iter().find(|u| w.covered.contains(&u.task_id)) {
        r.add(
            Oracle::Wait,
            line,
            format!("`subagent.wait` left the result of covered task {} unread", left.task_id),
            vec![w.line, left.line],
        );
    }
    // `bub.wait.result-shape`: results read, in completion order (ties in spawn order), then
    // the other covered tasks in spawn order.
    let mut read: Vec<&Read> = w.read.iter().collect();
    read.sort_by_key(|x| x.order);
    let mut want: Vec<Value> =
        read.iter().map(|x| json!({"task_id": x.task_id, "status": status_word(x.status), "result": x.body})).collect();
    for id in w.covered.iter().filter(|id| !w.read.iter().any(|x| x.task_id == **id)) {
        let Some(task) = tasks.get(id) else { continue };
        let mut entry = json!({"task_id": id, "status": task.state.word()});
        if !task.state.active() && task.results > 0 {
            entry["already_delivered"] = json!(true);
        }
        want.push(entry);
    }
    let want = Value::Array(want).to_string();
    if result != want {
        r.add(Oracle::Wait, line, format!("`subagent.wait` answered {result}; the rules give {want}"), vec![w.line]);
    }
}

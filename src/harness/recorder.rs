//! The trace recorder: the core's [`Observer`] during a run, stamping every event with virtual
//! time and stopping the run past the event cap, and counting the text every event carries
//! against the run budget ([`Stop::count_text`]): text a core makes of its own (the
//! unknown-tool answer, a result it wraps) is counted where it first reaches the harness.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::sut::AgentId;
use crate::sut::event::{Event, Observer};
use crate::trace::{Entry, Trace, What};

use super::Stop;
use super::clock::Now;

/// Collects entries during a run; the core's [`Observer`].
pub struct Recorder {
    now: Arc<Now>,
    entries: Mutex<Vec<Entry>>,
    max_events: usize,
    stop: Arc<Stop>,
    /// Whether the event cap was reported (once; the run stops at its next await).
    capped: AtomicBool,
    /// Background task ids the core reported, in the order they were first queued, with a
    /// set for lookups.
    task_ids: Mutex<(Vec<String>, BTreeSet<String>)>,
}

impl Recorder {
    /// A recorder stamping entries with the run's virtual time, `now`, which stops the run
    /// past `max_events` entries, with room for `expected` entries (a capacity only: a run of
    /// the same scenario recorded as many).
    pub fn new(max_events: usize, expected: usize, stop: Arc<Stop>, now: Arc<Now>) -> Recorder {
        Recorder {
            now,
            entries: Mutex::new(Vec::with_capacity(expected.min(max_events))),
            max_events,
            stop,
            capped: Default::default(),
            task_ids: Mutex::default(),
        }
    }

    /// Virtual time since the run began.
    pub fn elapsed(&self) -> Duration {
        self.now.elapsed()
    }

    /// The virtual time of the last entry (for a run whose clock is gone).
    pub fn elapsed_so_far(&self) -> Duration {
        self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).last().map_or(Duration::ZERO, |e| e.at)
    }

    /// Records a harness entry.
    pub fn record(&self, agent: &AgentId, what: What) {
        self.stop.count_text(text_bytes(&what));
        let mut entries = self.entries.lock().expect("trace lock poisoned");
        if entries.len() >= self.max_events {
            drop(entries);
            if !self.capped.swap(true, Ordering::Relaxed) {
                let reason = format!("the run exceeded the event limit of {} events", self.max_events);
                self.stop.halt_as(super::Halt::Limit(super::Limit::Events), reason);
            }
            return;
        }
        entries.push(Entry { at: self.elapsed(), agent: agent.clone(), what });
    }

    /// Takes the trace out at the end of a run.
    pub fn take_trace(&self) -> Trace {
        Trace { entries: std::mem::take(&mut *self.entries.lock().expect("trace lock poisoned")) }
    }
}

/// The bytes of text an entry carries: what the run produced, for the run budget. Numbers,
/// ids and names the script gave are not counted; the texts are.
fn text_bytes(what: &What) -> usize {
    let event = match what {
        What::Core(event) => event,
        What::Asked { tool, .. } => return tool.len(),
        What::Stopped(reason) => return reason.len(),
    };
    match event {
        Event::TurnStarted { message, .. } | Event::Steered { message } => message.len(),
        Event::AgentStarted { goal, .. } => goal.len(),
        Event::LlmReply { text, calls } => text.len() + calls.iter().map(String::len).sum::<usize>(),
        Event::LlmFailed { error } => error.len(),
        Event::Denied { tool, reason, .. } | Event::SpawnRefused { tool, reason } => tool.len() + reason.len(),
        Event::ToolStarted { call_id, tool, .. } => call_id.len() + tool.len(),
        Event::ToolEnded { call_id, tool, result, .. } => call_id.len() + tool.len() + result.len(),
        Event::Spawned { task, .. } => task.len(),
        Event::AgentEnded { message, .. } => message.len(),
        Event::TaskQueued { task_id, session, .. } => task_id.len() + session.len(),
        Event::TaskStarted { task_id, .. } | Event::Delivered { task_id, .. } => task_id.len(),
        Event::TaskEnded { task_id, body, .. } => task_id.len() + body.len(),
        Event::SessionOpened { name, .. } | Event::SessionClosed { name, .. } => name.len(),
        Event::TurnEnded { .. }
        | Event::LlmRequest { .. }
        | Event::Nudge { .. }
        | Event::StepCompleted { .. }
        | Event::ChildResult { .. }
        | Event::TimedOut { .. }
        | Event::AwaitingChildren { .. } => 0,
    }
}

impl Recorder {
    /// Background task ids the core reported so far, in the order first queued.
    pub fn task_ids(&self) -> Vec<String> {
        self.task_ids.lock().expect("task id lock poisoned").0.clone()
    }
}

impl Observer for Recorder {
    fn event(&self, agent: &AgentId, event: Event) {
        if let Event::TaskQueued { task_id, .. } = &event {
            let mut ids = self.task_ids.lock().expect("task id lock poisoned");
            if ids.1.insert(task_id.clone()) {
                ids.0.push(task_id.clone());
            }
        }
        self.record(agent, What::Core(event));
    }
}

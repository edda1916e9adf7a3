//! Oracle 5, `concurrency` (`oracle.concurrency.*`): at most `cap` background children run,
//! they start in FIFO order, and no slot stays free while a child is queued.
//!
//! It reads task states only; what each task delivers is `delivery`.

use std::collections::{BTreeSet, VecDeque};

use crate::evidence::Evidence;
use crate::sut::event::Event;

use super::{Oracle, Report, core_events};

/// Oracle 5.
pub(super) fn concurrency(e: &Evidence, r: &mut Report) {
    let cap = e.rules.max_concurrency;
    let mut running: BTreeSet<&str> = BTreeSet::new();
    let mut queue: VecDeque<(&str, usize)> = VecDeque::new();
    let mut events = core_events(e.trace).peekable();
    while let Some((i, entry, event)) = events.next() {
        match event {
            Event::TaskQueued { task_id, .. } => queue.push_back((task_id, i)),
            Event::TaskStarted { task_id, .. } => {
                if let Some((first, line)) = queue.front()
                    && first != task_id
                {
                    r.add(
                        Oracle::Concurrency,
                        i,
                        format!("{task_id} started while {first}, queued before it, was still waiting (FIFO)"),
                        vec![*line],
                    );
                }
                queue.retain(|(id, _)| id != task_id);
                running.insert(task_id);
                if running.len() > cap {
                    r.add(
                        Oracle::Concurrency,
                        i,
                        format!("{} background children running at once, above the cap {cap}", running.len()),
                        vec![],
                    );
                }
            }
            // A task that ends without running was cancelled in the queue.
            Event::TaskEnded { task_id, .. } if !running.remove(task_id.as_str()) => {
                queue.retain(|(id, _)| id != task_id)
            }
            _ => {}
        }
        // The last instant of a stopped run may be unfinished: nothing is judged there.
        let instant_ends = match events.peek() {
            Some((_, next, _)) => next.at != entry.at,
            None => !e.stopped,
        };
        if instant_ends
            && running.len() < cap
            && let Some((waiting, line)) = queue.front()
        {
            r.add(
                Oracle::Concurrency,
                i,
                format!("{waiting} stays queued while only {} of {cap} slots are taken", running.len()),
                vec![*line],
            );
        }
    }
}

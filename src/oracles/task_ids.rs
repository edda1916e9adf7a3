//! Oracle clause `oracle.texts.task-ids`: each new task's id is the next one the scenario's
//! seed gives (`bub.task-id.seeded`).
//!
//! Every other oracle takes task ids from the trace, so an id in the wrong form (upper-case
//! digits, no `sub-`), drawn from the wrong place (a counter advanced first, the low bits) or
//! repeated would be agreed with everywhere. This clause draws the ids again, by its own code,
//! from the rules' words: the top 32 bits of SplitMix64 over a counter that starts at the seed,
//! as `sub-` and 8 lower-case hex digits, drawn again on a collision. A task is new at the
//! first `task.queued` of its child; a continued task is queued again for the same child.

use std::collections::BTreeSet;

use super::{Oracle, Report, core_events};
use crate::evidence::Evidence;
use crate::sut::AgentId;
use crate::sut::event::Event;

/// SplitMix64's increment (the golden ratio in 64 bits) and its output mix.
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The ids `seed` gives, in order, each new (`bub.task-id.seeded`): the model-side oracles
/// draw them too.
pub(crate) fn seeded(seed: u64) -> impl Iterator<Item = String> {
    Ids { counter: seed, drawn: BTreeSet::new() }
}

/// The ids the seed gives, in order, each new.
struct Ids {
    counter: u64,
    drawn: BTreeSet<String>,
}

impl Iterator for Ids {
    type Item = String;

    fn next(&mut self) -> Option<String> {
        loop {
            self.counter = self.counter.wrapping_add(GAMMA);
            let id = format!("sub-{:08x}", mix(self.counter) >> 32);
            if self.drawn.insert(id.clone()) {
                return Some(id);
            }
        }
    }
}

pub(super) fn task_ids(e: &Evidence, r: &mut Report) {
    let Some(setup) = e.setup else { return };
    let mut ids = Ids { counter: setup.seed, drawn: BTreeSet::new() };
    // A task is new when its child is: a continuation is queued again for the same child.
    let mut seen: BTreeSet<&AgentId> = BTreeSet::new();
    for (i, _, event) in core_events(e.trace) {
        let Event::TaskQueued { task_id, child, .. } = event else { continue };
        if !seen.insert(child) {
            continue;
        }
        let want = ids.next().unwrap_or_default();
        if *task_id != want {
            r.add(
                Oracle::Texts,
                i,
                format!(
                    "the run's task {} has the id {task_id}; seed {} gives {want} (`bub.task-id.seeded`)",
                    seen.len(),
                    setup.seed
                ),
                vec![],
            );
            // One finding says it; the ids after it would all differ too.
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_zero_gives_the_documented_ids() {
        let ids: Vec<String> = Ids { counter: 0, drawn: BTreeSet::new() }.take(3).collect();
        assert_eq!(ids, ["sub-e220a839", "sub-6e789e6a", "sub-06c45d18"]);
    }
}

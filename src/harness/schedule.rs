//! The one object through which every same-instant ordering choice of the harness passes.
//!
//! With the clock paused, many tasks can wake at one virtual instant (two children ending in
//! the same millisecond, a reply arriving exactly at a timeout). Tokio runs them in an order
//! of its own. Where the rules leave that order open, [`Schedule::seeded`] varies it on
//! purpose: after each harness wake-up (a reply's or a tool's latency, a steering message)
//! the waking task yields a seeded number of times, letting others at the same instant go
//! first. The default schedule never yields, so default traces stay byte-identical from run
//! to run. The core is not involved: it only sees its futures complete in some order.

pub use crate::seed::{fnv1a, splitmix64};

/// How same-instant ties are broken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Schedule {
    seed: Option<u64>,
}

impl Schedule {
    /// Tokio's own order; no yields.
    pub fn default_order() -> Schedule {
        Schedule { seed: None }
    }

    /// A tie order drawn from `seed`; the same seed replays the same order.
    pub fn seeded(seed: u64) -> Schedule {
        Schedule { seed: Some(seed) }
    }

    /// The seed, if this is an explored order.
    pub fn seed(&self) -> Option<u64> {
        self.seed
    }

    /// Called by a harness task that just woke at `site` (a stable name such as
    /// `llm main/1 #2`, made only when exploring): lets other tasks of this instant run first,
    /// as often as the seed says.
    pub async fn tie_break(&self, site: impl FnOnce() -> String) {
        let Some(seed) = self.seed else { return };
        let yields = splitmix64(seed ^ fnv1a(&site())) % 4;
        for _ in 0..yields {
            tokio::task::yield_now().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_and_site_draw_the_same_yields() {
        assert_eq!(splitmix64(1 ^ fnv1a("a")), splitmix64(1 ^ fnv1a("a")));
        assert_ne!(fnv1a("llm main/1 #1"), fnv1a("llm main/2 #1"));
    }
}

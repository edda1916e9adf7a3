//! The one object through which every same-instant ordering choice of the harness passes.
//!
//! With the clock paused, many things can be due at one virtual instant (two children's
//! replies in the same millisecond, a reply and a steering message). The harness's
//! `harness::clock::Clock` delivers each instant's waits in one go, in the order of
//! their [`Schedule::rank`]: registration order by default, so default traces stay
//! byte-identical from run to run; a seeded permutation under [`Schedule::seeded`], which
//! changes which waiting task the runtime runs first. The schedule never splits an instant:
//! the core may rely on everything due now having arrived once the runtime had its round.
//! The core is not involved: it only sees its futures complete in some order.

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

    /// The rank of the wait named `site` (`llm main/1 #2`, made only when exploring) among
    /// the waits of its instant: lower goes first, equal ranks go in registration order.
    pub fn rank(&self, site: impl FnOnce() -> String) -> u64 {
        match self.seed {
            None => 0,
            Some(seed) => splitmix64(seed ^ fnv1a(&site())),
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

//! The rooms a user of the library never needs, re-exported for the crate's own tests,
//! benchmarks and examples, and for advanced users who want to take a run apart.
//!
//! **No stability promise.** Anything here may be renamed, moved or removed in any release;
//! the front page of the crate (the re-exports and the public modules) is the API. What is
//! here: the harness that plugs into the boundary under test, the evidence and the oracles that
//! judge it, one run and its judgement, the coverage detectors, golden files, the job pool, the
//! seed, the timeline picture, and (with their features) the fuzzer, its generators and the
//! driver of outside runtimes.
//!
//! Nothing in this module adds code: each module here re-exports every public item of the
//! crate's private module of the same name, so `rehearsal::internals::harness::mock_llm` is the
//! module the runner itself uses. (A private module cannot be re-exported whole; its public items
//! can.)

pub mod coverage {
    //! Which rule clauses a run exercised: a detector per clause over its evidence.
    pub use crate::coverage::*;
}

pub mod evidence {
    //! What the oracles judge: the trace plus the exchanges the model saw, and attribution.
    pub use crate::evidence::*;
}

#[cfg(feature = "fuzz")]
pub mod fuzz {
    //! `rehearsal fuzz`: generated cases against every oracle, shrunk to a file.
    pub use crate::fuzz::*;
}

#[cfg(feature = "fuzz")]
pub mod generate {
    //! Proptest strategies producing valid scenarios across both rule sets.
    pub use crate::generate::*;
}

pub mod golden {
    //! Golden traces: each scenario's reviewed trace in an insta snapshot file.
    pub use crate::golden::*;
}

pub mod harness {
    //! What plugs into the boundary under test: mock LLM, simulated tools, recorder, schedule.
    pub use crate::harness::*;
}

pub mod jobs {
    //! Independent runs spread over threads, results handed back in order.
    pub use crate::jobs::*;
}

pub mod judge {
    //! A finished run against the scenario's expectations and every oracle, into a verdict.
    pub use crate::judge::*;
}

pub mod oracles {
    //! The oracles, each a rule of `docs/rules/core.md` §6, checked on the evidence of a run.
    pub use crate::oracles::*;
}

pub mod run {
    //! One paused run of a scenario on a core.
    pub use crate::run::*;
}

pub mod seed {
    //! SplitMix64, the one source of every draw of a run.
    pub use crate::seed::*;
}

pub mod timeline {
    //! A picture of a finished run's trace on the virtual time axis (SVG or HTML).
    pub use crate::timeline::*;
}

//! The rooms a user of the library never needs, re-exported by name for the crate's own tests,
//! benchmarks and examples, and for advanced users who want to take a run apart.
//!
//! **No stability promise**, and hidden from the documentation: anything here may be renamed,
//! moved or removed in any release; the crate's front page is the API
//! (`tests/suite/face.txt`). What is here: the harness that plugs into the boundary under
//! test, the evidence and the oracles that judge it, the coverage detectors, golden files, the
//! seed, the timeline picture, and (with their features) the fuzzer and its generators.
//!
//! Nothing in this module adds code, and nothing is re-exported by glob: each name below is
//! one the crate's tests, benchmarks or examples use, so what this door opens is a list a
//! reader can see. `rehearsal::internals::harness::mock_llm` is the module the runner itself
//! uses.

pub mod coverage {
    //! Which rule clauses a run exercised: a detector per clause over its evidence.
    pub use crate::coverage::{Measure, clauses, measure, reached};
}

pub mod evidence {
    //! What the oracles judge: the trace plus the exchanges the model saw, and attribution.
    pub use crate::evidence::{Due, Evidence, Exchange, Setup, attribution};
}

#[cfg(feature = "fuzz")]
pub mod fuzz {
    //! `rehearsal fuzz`: generated cases against every oracle, shrunk to a file.
    pub use crate::fuzz::{
        CaseResult, Ended, Options, ReplayError, Report, Shard, ShardError, Stop, case_plan, case_plan_judged, check,
        check_judged, check_on, replay_case, run, run_campaign, run_campaign_on, shrink,
    };
}

#[cfg(feature = "fuzz")]
pub mod generate {
    //! Proptest strategies producing valid scenarios across both rule sets.
    pub use crate::generate::{Family, Mode, Rare, Shape, scenario, scenario_for, scenario_in};
}

pub mod golden {
    //! Golden traces: each scenario's reviewed trace in an insta snapshot file.
    pub use crate::golden::render;
}

pub mod harness {
    //! What plugs into the boundary under test: mock LLM, simulated tools, recorder, schedule.
    pub use crate::harness::{Halt, mock_llm, schedule};
}

pub mod oracles {
    //! The oracles, each a rule of `docs/rules/core.md` §6, checked on the evidence of a run.
    pub use crate::oracles::{Evidence, Oracle, Violation, check, determinism, model_side, profiles_refused};
}

pub mod seed {
    //! SplitMix64, the one source of every draw of a run.
    pub use crate::seed::splitmix64;
}

pub mod timeline {
    //! A picture of a finished run's trace on the virtual time axis (SVG or HTML).
    pub use crate::timeline::{html, svg};
}

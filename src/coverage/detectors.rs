//! The detectors: one per measured clause, in the order of the pages, and the few clauses no
//! run can show, each with the reason. Each page's detectors have a file of their own
//! (`roku`, `bub`, `core`, `oracles`); what several of them ask is in `queries`.
//!
//! A detector answers one question about one run: did the trace and the exchanges show the
//! behaviour the clause states? It fires on the situation the clause is about (a child queued
//! behind the cap that started later, a result landing at exactly its limit), never on a
//! scenario's say-so. Whether the behaviour was right is the oracles' and the expectations'
//! question, not this one's.

use std::sync::LazyLock;

use super::facts::Facts;

mod bub;
mod core;
mod oracles;
mod queries;
mod roku;

/// Whether a run's facts show a clause exercised.
pub(super) type Detector = fn(&Facts) -> bool;

/// Every measured clause and its detector, page by page in the order of the pages: roku.md,
/// bub.md, core.md, then the oracle clauses of core.md §6.
pub(super) static DETECTORS: LazyLock<Vec<(&str, Detector)>> =
    LazyLock::new(|| [roku::DETECTORS, bub::DETECTORS, self::core::DETECTORS, oracles::DETECTORS].concat());

/// The clauses no single run can show, and why. Kept small: each is checked elsewhere.
pub(super) const NOT_MEASURABLE: &[(&str, &str)] = &[
    (
        "bub.profile.locations",
        "where a profile file was found is settled before the run; the evidence shows only the profile a child ran under (tests/suite/load/bad_input.rs, scenarios/bub/profile-workspace-over-home.json)",
    ),
    (
        "bub.profile.invalid-file",
        "a bad profile file stops the run before it starts: bad input, never evidence (tests/suite/load/bad_input.rs)",
    ),
    (
        "bub.profile.workspace-over-home",
        "which of two same-named profile files won is settled before the run; the evidence holds only the winner (scenarios/bub/profile-workspace-over-home.json checks its body)",
    ),
    (
        "bub.profile.inline-over-files",
        "which of two same-named profiles won is settled before the run; the evidence holds only the winner (scenarios/bub/profile-call-arguments-over-profile.json checks it)",
    ),
    (
        "core.knob.validated",
        "a rule set that breaks a knob's limit is refused before the run: bad input, never evidence (tests/suite/load/bad_input.rs, tests/suite/load/hostile.rs)",
    ),
    (
        "core.time.run-limits",
        "a run that reaches its horizon or event cap is stopped and fails, so no passing run shows it (tests/fixtures/hostile/stops/, tests/suite/load/hostile.rs)",
    ),
    (
        "oracle.model-side.requests",
        "the built-in core states no request limit, so no in-process run has one to count; a runtime description's `request_limits` set it over the wire (tests/suite/oracles/model_side_rules.rs, conformance/pydantic-ai/)",
    ),
    (
        "core.never.wall-clock",
        "a property of the core's code: a run cannot show an absence; the determinism oracle compares two runs of every scenario",
    ),
    (
        "core.never.os-random",
        "a property of the core's code: a run cannot show an absence; the determinism oracle compares two runs of every scenario",
    ),
    (
        "core.never.hashmap-order",
        "a property of the core's code: a run cannot show an absence; the determinism oracle compares two runs of every scenario",
    ),
    (
        "core.never.blocking",
        "a property of the core's code: a run cannot show an absence; a blocked thread stalls the paused clock, which the termination oracle's horizon catches",
    ),
    (
        "core.never.unbiased-select",
        "a property of the core's code: a run cannot show an absence; the determinism oracle compares two runs of every scenario",
    ),
];

// --- helpers of several detectors ---

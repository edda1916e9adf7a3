//! rehearsal: a deterministic simulation and testing harness for agent orchestration.
//!
//! The map, in reading order:
//!
//! - [`rules`]: the rule knobs of both sub-agent families, with the `roku` and `bub` presets.
//! - [`seed`]: SplitMix64, the one source of every draw of a run.
//! - [`sut`]: the system-under-test boundary: the traits through which the harness drives any
//!   orchestration core (`SystemUnderTest`, `Llm`, `Tool`, `Asker`, `Observer`) and the event
//!   vocabulary a core reports in. Types only.
//! - [`core`]: the built-in orchestration core, a real agent runtime behind that boundary. It
//!   does not know it is being tested.
//! - [`scenario`]: the scenario file format (JSON): parsing, validation, errors with places
//!   and hints, and its JSON Schema (derived from the same types).
//! - [`profiles`]: agent profile files (`.agents/agents/*.md`), read before a run.
//! - [`trace`]: the record of a run, one line per event, as text and as JSON lines.
//! - [`dialect`]: how a runtime spells sub-agents to the model (spawn tools, prompts, results), as
//!   data: what attribution and the model-side oracles read.
//! - [`evidence`]: what the oracles judge: the trace plus the exchanges the model saw, and
//!   [`evidence::attribution`], which puts each exchange down to an agent from the model's side.
//! - [`harness`]: what plugs into the boundary under test: the scripted mock LLM
//!   ([`harness::mock_llm`]), simulated tools ([`harness::sim_tools`]), the scripted approval
//!   answers ([`harness::asker`]), the trace recorder and exchange log, and the one object that
//!   breaks same-instant ties ([`harness::schedule`]).
//! - [`timeline`]: a picture of a finished run's trace on the virtual time axis (SVG, or an
//!   HTML page beside the text trace), for `rehearsal run FILE --timeline out.svg`.
//! - [`runner`]: runs one scenario on a core, on a fresh paused-clock runtime, and judges it
//!   against its expectations and the oracles.
//! - [`oracles`]: the oracles, each a rule of `docs/rules/core.md` §6, checked on the evidence
//!   of every run.
//! - [`coverage`]: which rule clauses of `docs/rules/` a run exercised, by a detector per
//!   clause over its evidence; counted over a suite (`run --coverage`) or a fuzz campaign.
//! - [`generate`]: proptest strategies producing valid scenarios across both rule sets.
//! - [`fuzz`]: `rehearsal fuzz`: generated cases against every oracle, shrunk to a file.
//! - [`golden`]: golden traces: each scenario's reviewed trace in an insta snapshot file.
//! - [`jobs`]: independent runs spread over threads, results handed back in order.
//! - [`cli`]: the `rehearsal` command line; `main.rs` maps its outcome to an exit code.
//!
//! Architecture Invariants:
//! - `sut` depends on nothing else in this crate but `rules`; `core` only on `rules`, `seed`
//!   and `sut`. The harness and the oracles never import `core`, and the runner drives a core
//!   only through `sut::SystemUnderTest`; it names `core::Builtin` once, as the default.
//! - `evidence` sits below `harness`, `oracles` and `coverage`: the harness writes it, the
//!   oracles and the coverage detectors read it, and none imports another.
//! - Nothing on the run path reads the wall clock, draws OS randomness, iterates a `HashMap`
//!   or does I/O: files are read before a run starts, time is tokio's paused clock, and every
//!   draw comes from the scenario's seed.
//! - The oracles never call the core's arithmetic; they re-derive each rule on their own.
//! - `scenario` reads one thing of the built-in core: the parameter schemas of its built-in
//!   tools (`core::pseudo`), to check scripted arguments at load and to put them in the JSON
//!   Schema. It calls nothing of the core.
#![deny(missing_docs)]

#[cfg(feature = "cli")]
pub mod cli;
pub mod core;
pub mod coverage;
pub mod dialect;
pub mod evidence;
#[cfg(feature = "fuzz")]
pub mod fuzz;
#[cfg(feature = "fuzz")]
pub mod generate;
pub mod golden;
pub mod harness;
pub mod jobs;
pub mod oracles;
pub mod profiles;
pub mod rules;
pub mod runner;
pub mod scenario;
pub mod seed;
pub mod sut;
pub mod timeline;
pub mod trace;

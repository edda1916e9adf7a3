//! rehearsal: a deterministic simulation and testing harness for agent orchestration.
//!
//! The map, in reading order:
//!
//! - [`rules`]: the rule knobs of both sub-agent families, with the `roku` and `bub` presets.
//! - [`core`]: the orchestration core, a real agent runtime against an LLM trait, a tool
//!   trait, an approval gate and the tokio clock. It does not know it is being tested.
//! - [`scenario`]: the scenario file format (JSON): parsing, validation, errors with places.
//! - [`profiles`]: agent profile files (`.agents/agents/*.md`), read before a run.
//! - [`harness`]: what plugs into the core's traits under test: the scripted mock LLM
//!   ([`harness::mock_llm`]), simulated tools ([`harness::sim_tools`]), the scripted approval
//!   answers ([`harness::asker`]) and the one object that breaks same-instant ties
//!   ([`harness::schedule`]).
//! - [`trace`]: the record of a run, one line per event, as text and as JSON lines.
//! - [`timeline`]: a picture of a finished run's trace on the virtual time axis (SVG, or an
//!   HTML page beside the text trace), for `rehearsal run FILE --timeline out.svg`.
//! - [`runner`]: runs one scenario on a fresh paused-clock runtime and judges it against its
//!   expectations and the oracles.
//! - [`oracles`]: the nine rules of core.md, checked on the evidence of every run.
//! - [`generate`]: proptest strategies producing valid scenarios across both rule sets.
//! - [`fuzz`]: `rehearsal fuzz`: generated cases against every oracle, shrunk to a file.
//! - [`cli`]: the `rehearsal` command line; `main.rs` maps its outcome to an exit code.
//!
//! Architecture Invariants:
//! - `core` depends on nothing else in this crate but `rules`: the harness reaches it only
//!   through its traits (`Llm`, `Tool`, `ApprovalGate`/`Asker`, `Observer`).
//! - Nothing on the run path reads the wall clock, draws OS randomness, iterates a `HashMap`
//!   or does I/O: files are read before a run starts, time is tokio's paused clock, and every
//!   draw comes from the scenario's seed.
//! - The oracles never call the core's arithmetic; they re-derive each rule on their own.
#![deny(missing_docs)]

pub mod cli;
pub mod core;
pub mod fuzz;
pub mod generate;
pub mod harness;
pub mod oracles;
pub mod profiles;
pub mod rules;
pub mod runner;
pub mod scenario;
pub mod timeline;
pub mod trace;

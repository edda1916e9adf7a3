//! rehearsal: a deterministic simulation and testing harness for agent orchestration.
//!
//! The map, in reading order:
//!
//! - [`rules`]: the rule knobs of both sub-agent families, with the `roku` and `bub` presets.
//! - [`core`]: the orchestration core, a real agent runtime against an LLM trait, a tool
//!   trait and the tokio clock. It does not know it is being tested.
//! - [`scenario`]: the scenario file format (JSON): parsing, validation, errors with places.
//! - [`harness`]: what plugs into the core's traits under test: the scripted mock LLM
//!   ([`harness::mock_llm`]), simulated tools ([`harness::sim_tools`]) and the scripted
//!   approval answers ([`harness::asker`]).
//! - [`profiles`]: agent profile files (`.agents/agents/*.md`), read before a run.
//! - [`trace`]: the record of a run, one line per event, as text and as JSON lines.
//! - [`generate`]: proptest strategies producing valid scenarios across both rule sets.
//! - [`oracles`]: the nine rules of core.md, checked on the evidence of every run.
//! - [`runner`]: runs one scenario on a fresh paused-clock runtime and checks its
//!   expectations; the verdict.
//!
//! - [`fuzz`]: `rehearsal fuzz`: generated cases against every oracle, shrunk to a file.
//! - [`cli`]: the `rehearsal` command line; `main.rs` maps its outcome to an exit code.
//!
//! Architecture Invariant: `core` depends on nothing else in this crate but `rules`.
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
pub mod trace;

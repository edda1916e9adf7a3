//! rehearsal: a deterministic simulation and testing harness for agent orchestration.
//!
//! A scenario scripts the model's replies and what each user turn must end in; a [`Runner`]
//! loads it through the front door ([`load`]), runs it twice on a core under a paused tokio
//! clock, and judges it against its expectations and every oracle:
//!
//! ```
//! use rehearsal::{Lane, Reply, Runner, Scenario, Turn};
//!
//! let scenario = Scenario::builder("hello")
//!     .lane(Lane::agent("main").reply(Reply::text("Hi.")))
//!     .turn(Turn::user("Hello?").expect_message("Hi."))
//!     .build()
//!     .unwrap();
//! let verdict = Runner::new().check(&scenario).unwrap();
//! assert!(verdict.passed(), "{verdict}");
//! assert!(verdict.trace().unwrap().text().contains("final_answer ok"));
//! ```
//!
//! A file goes through the same door: `Runner::new().check_file(path)`, or
//! [`load::file`] and then [`Runner::check_loaded`]. Another core plugs in by implementing
//! [`SystemUnderTest`](sut::SystemUnderTest) (`Runner::new().on(&core)`), and gets the whole `rehearsal` command
//! line on it with one call, `rehearsal::cli::main_with(&core)` in its own `src/bin/` (feature
//! `cli`; `examples/tiny_roku/cli.rs` does it for a second core): `run` with text, JSON and
//! JUnit, `--explore`, `--coverage`, `--timeline`, `--snapshots`/`--accept`, `fuzz`, `new`,
//! `schema`, where the core's [`Capabilities`](sut::Capabilities) decide what runs.
//!
//! To depend on the crate (it is not on crates.io), name it by git or by path:
//!
//! ```toml
//! [dev-dependencies]
//! rehearsal = { git = "<URL of this repository>" }   # or: path = "../rehearsal"
//! # The library alone (Runner, load, oracles), no command line, fuzzer or HTTP stack:
//! # rehearsal = { path = "../rehearsal", default-features = false }
//! ```
//!
//! Features: `cli` (the command line and `cli::main_with`; implies `fuzz` and `wire`),
//! `fuzz` (the generators and the fuzz engine, proptest), `wire` (`serve` and `drive`: the
//! OpenAI-compatible server and the runtime driver), `profile-files` (agent profile files,
//! `.agents/agents/*.md`). The default is all four; docs/own-core.md says more.
//!
//! The map, in reading order. The public modules and the root's re-exports are the API
//! (`tests/suite/face.txt` lists it); the others are private to the crate, and the names of
//! theirs that the tests, benchmarks and examples use are re-exported one by one, with no
//! stability promise, under the hidden `internals`:
//!
//! - [`rules`]: the rule knobs of both sub-agent families, with the `roku` and `bub` presets, and
//!   the rules' fixed words the judges read (`rules::words`: tool names, refusal texts).
//! - `seed`: SplitMix64, the one source of every draw of a run.
//! - [`sut`]: the system-under-test boundary: the traits through which the harness drives any
//!   orchestration core (`SystemUnderTest`, `Llm`, `Tool`, `Asker`, `Observer`) and the event
//!   vocabulary a core reports in. Types only.
//! - [`core`]: the built-in orchestration core, a real agent runtime behind that boundary. It does
//!   not know it is being tested.
//! - [`scenario`]: the scenario file format (JSON): parsing, validation, errors with places and
//!   hints, and its JSON Schema (derived from the same types).
//! - [`load`]: the front door: a scenario file, or one built in code, with its profiles
//!   ([`load::profiles`]: `.agents/agents/*.md`) after every check, for every caller; and the one
//!   bounded reader of every file rehearsal reads.
//! - [`trace`]: the record of a run, one line per event, as text and as JSON lines.
//! - [`dialect`]: how a runtime spells sub-agents to the model (spawn tools, prompts, results), as
//!   data: what attribution and the model-side oracles read.
//! - `evidence`: what the oracles judge: the trace plus the exchanges the
//!   model saw, and `evidence::attribution`, which puts each exchange down to an agent from the
//!   model's side.
//! - `harness`: what plugs into the boundary under test: the scripted mock
//!   LLM (`harness::mock_llm`), simulated tools (`harness::sim_tools`), the scripted approval
//!   answers (`harness::asker`), the trace recorder and exchange log, and the one object that
//!   breaks same-instant ties (`harness::schedule`).
//! - `markup`: the one escaping of text written into the XML-family reports (JUnit, the
//!   timeline's SVG and HTML).
//! - `timeline`: a picture of a finished run's trace on the virtual time
//!   axis (SVG, or an HTML page beside the text trace), for `rehearsal run FILE --timeline
//!   out.svg`; and of a wire run from the model's side, for `rehearsal drive FILE --timeline`.
//! - `run`: one paused run of a scenario on a core, into a [`Run`]: the session
//!   context is built once, the facts as written kept apart from what the core is given.
//! - `judge`: a finished run against the scenario's expectations, its unused
//!   script, its trace fragments and every oracle, into a [`Verdict`].
//! - [`runner`]: the [`Runner`] API: which core, which tie orders, how to judge; a prepared
//!   scenario run as often as a verification and its explored orders need.
//! - `oracles`: the oracles, each a rule of `docs/rules/core.md` §6, checked
//!   on the evidence of every run.
//! - `clauses`: the clause ids of `docs/rules/`, read from the pages at build time; a leaf that
//!   `scenario` (cited ids, checked at load) and `coverage` both read.
//! - `coverage`: which rule clauses of `docs/rules/` a run exercised, by a
//!   detector per clause over its evidence; counted over a suite (`run --coverage`) or a fuzz
//!   campaign.
//! - `generate`: proptest strategies producing valid scenarios across both
//!   rule sets.
//! - `fuzz`: `rehearsal fuzz`: generated cases against every oracle, shrunk to a
//!   file.
//! - `golden`: golden traces: each scenario's reviewed trace in an insta
//!   snapshot file.
//! - `jobs`: independent runs spread over threads, results handed back in order.
//! - [`wire`] (feature `wire`), the wing for runtimes in other processes, with one door: only
//!   `cli` imports it. rehearsal plays the model over OpenAI Chat Completions and judges what
//!   the model saw: the server and the bridge from a request to its lane, the judgement of a
//!   served run by the model-side oracles, [`wire::clock`] (virtual time across the process
//!   boundary, docs/clock-protocol.md), [`wire::runtime`] (runtime descriptions: how a runtime
//!   is started, its own limits, its features), [`wire::drive`] (a scenario played against a
//!   runtime's command, once per user turn, then judged), [`wire::record`] (a real run through
//!   a proxy to an upstream model, written as a scenario) and the process helpers they share.
//! - [`cli`]: the `rehearsal` command line on any core ([`cli::main_with`]); `main.rs` is it on
//!   the built-in core.
//! - `internals` (hidden): names of the private rooms above, re-exported one by one for the
//!   tests, benchmarks and examples; no stability promise.
//!
//! Architecture Invariants:
//! - `sut` depends on nothing else in this crate but `rules`; `core` only on `rules`, `seed`
//!   and `sut`. The harness and the oracles never import `core`, and the runner drives a core
//!   only through `sut::SystemUnderTest`; it names `core::Builtin` once, as the default.
//! - Input comes in through `load` only: `scenario` (the format) imports nothing of `load`
//!   (the reader and the checks), so neither imports the other; `run` and `judge` never read
//!   a file.
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

mod clauses;
#[cfg(feature = "cli")]
pub mod cli;
pub mod core;
mod coverage;
pub mod dialect;
mod evidence;
#[cfg(feature = "fuzz")]
mod fuzz;
#[cfg(feature = "fuzz")]
mod generate;
mod golden;
mod harness;
#[cfg(feature = "cli")]
mod jobs;
mod judge;
pub mod load;
mod markup;
mod oracles;
pub mod rules;
mod run;
#[doc(hidden)]
pub mod runner;
#[doc(hidden)]
pub mod scenario;
mod seed;
pub mod sut;
// Its file writers (`--timeline`) are the command line's; the library draws in memory.
#[cfg_attr(not(feature = "cli"), allow(dead_code, unused_imports))]
mod timeline;
pub mod trace;
#[cfg(feature = "wire")]
pub mod wire;

#[doc(hidden)]
pub mod internals;

pub use crate::judge::{Failure, FailureKind, Judgement, Served, Subject, Verdict};
pub use crate::run::Run;
pub use crate::runner::{Prepared, Runner, Unsupported};
pub use crate::scenario::{Lane, Reply, Scenario, ScenarioBuilder, ScenarioError, Turn};

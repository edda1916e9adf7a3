//! The runner (`src/runner.rs`, `src/run.rs`): determinism, tie orders, robustness, the library's API, logging, cores without events and a core of one's own.

mod determinism;
mod instants;
mod library;
mod logging;
mod no_events;
mod order_robust;
pub(crate) mod own_runtime;
mod robustness;

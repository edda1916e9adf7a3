//! Integration tests, one module per area.

mod authoring;
mod bad_input;
mod cli;
mod determinism;
mod fuzz_campaigns;
mod golden;
mod hostile;
mod instants;
mod library;
mod logging;
mod oracles;
mod order_robust;
mod own_runtime;
mod robustness;
mod scenarios;
mod support;
mod timeline;

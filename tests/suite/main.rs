//! Integration tests, one module per area.

mod bad_input;
mod cli;
mod coverage;
mod determinism;
mod fuzz_campaigns;
mod golden;
mod hostile;
mod library;
mod logging;
mod oracles;
mod own_runtime;
mod robustness;
mod scenarios;
mod support;
mod timeline;

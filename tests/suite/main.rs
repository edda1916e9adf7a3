//! Integration tests, one module per area.

mod authoring;
mod bad_input;
mod cli;
mod coverage;
mod determinism;
mod fuzz_campaigns;
mod golden;
mod hostile;
mod instants;
mod library;
mod logging;
mod oracles;
mod oracles_context;
mod oracles_costs;
mod oracles_precedence;
mod oracles_routing;
mod oracles_runs;
mod oracles_sessions;
mod oracles_texts;
mod oracles_wait;
mod order_robust;
mod own_runtime;
mod robustness;
mod scenarios;
mod support;
mod timeline;

//! Integration tests in one binary, a folder per area of `src/` (as turmoil's `tests/net/`):
//! this file only declares them.

mod architecture;
mod blind_attribution;
mod cli;
mod coverage;
mod face;
mod golden;
mod load;
mod oracles;
mod readme;
mod runner;
mod scenarios;
mod support;
mod timeline;
mod wire;

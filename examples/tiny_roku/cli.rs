//! The whole `rehearsal` command line on TinyRoku, the independently written core of
//! `core.rs`, built with one call to [`rehearsal::cli::main_with`]: what a team with its own
//! core puts in its `src/bin/` or runs from its `tests/`.
//!
//! ```text
//! cargo run --example tiny_roku_cli -- run scenarios/roku --format junit
//! cargo run --example tiny_roku_cli -- fuzz --cases 500
//! ```
//!
//! Every subcommand and option of `rehearsal` works (`run` with text, JSON and JUnit,
//! `--explore`, `--coverage`, `--timeline`, `--snapshots`/`--accept`; `fuzz`; `new`;
//! `schema`). TinyRoku's capabilities decide what runs: a file that needs Bub's background
//! `subagent` or steering is refused naming what is missing, and `fuzz` draws Roku cases only
//! and says how many it skipped for steering or an added `subagent` family.

#[path = "core.rs"]
// The deliberate bugs and the call-id choice are for `tiny_roku`'s own options; this binary
// runs the core as written.
#[allow(dead_code)]
mod core;

use std::process::ExitCode;

fn main() -> ExitCode {
    rehearsal::cli::main_with(&core::TinyRoku::new())
}

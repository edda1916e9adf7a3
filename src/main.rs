//! The `rehearsal` binary: the command line ([`rehearsal::cli::main_with`]) on the built-in
//! core. It maps the outcome to an exit code (0 passed, 1 a scenario failed, 2 bad input or
//! usage, 3 an internal error; `serve` also 4 when the system under test could not be run;
//! `fuzz` also 130 when interrupted). The library does the work.

use std::process::ExitCode;

/// mimalloc instead of the system allocator: a run makes many small, short-lived allocations
/// (messages, calls, trace lines), and glibc's malloc and free were a seventh of its time.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    rehearsal::cli::main_with(&rehearsal::core::Builtin)
}

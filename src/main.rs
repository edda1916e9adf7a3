//! The `rehearsal` binary: parse the command line, run it, map the outcome to an exit code
//! (0 passed, 1 a scenario failed, 2 bad input or usage, 3 an internal error; `fuzz` also
//! 130 when interrupted). The library does the work.

use std::process::ExitCode;

use clap::Parser;

/// mimalloc instead of the system allocator: a run makes many small, short-lived allocations
/// (messages, calls, trace lines), and glibc's malloc and free were a seventh of its time.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = match rehearsal::cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            // clap exits 0 for --help and --version, 2 for usage errors.
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let terminal = rehearsal::cli::Terminal::detect();
    let code = rehearsal::cli::main_with(cli, &mut std::io::stdout().lock(), &mut std::io::stderr().lock(), terminal);
    ExitCode::from(code as u8)
}

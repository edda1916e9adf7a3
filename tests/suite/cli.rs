//! The `rehearsal` command line (`src/cli/`): `run`'s reports and exit codes, JUnit against its schema, `fuzz` campaigns, and the command line on a second core.

mod fuzz;
mod fuzz_shapes;
pub(crate) mod junit_schema;
mod own_cli;
mod run;

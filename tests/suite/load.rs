//! The front door (`src/load.rs`, `src/scenario/`): authoring errors, bad input with its place, and hostile files.

mod authoring;
mod bad_input;
mod hostile;

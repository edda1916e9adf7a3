//! The wire wing (`src/wire/`): `serve` over HTTP, `drive` and `record` on real processes, hostile input, and the clock across the process boundary.

mod anthropic;
mod clock_protocol;
mod clock_serve;
mod clock_shim;
mod drive;
mod fuzz_runtime;
mod hostile;
mod record;
mod record_messages;
mod record_responses;
mod responses;
mod serve;

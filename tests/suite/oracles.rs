//! Every oracle can fire: each of the first nine is handed hand-built evidence that breaks its rule
//! and must report exactly that (oracle, agent, virtual time, message, trace lines), and a
//! correct trace of the same shape that it must pass. Then a few real scenario runs are
//! tampered with, and `runner::judge` must fail them naming the oracle.
//!
//! The traces mirror what the core really records (see `snapshots/`); line numbers in the
//! comments are the indices the oracles report.
//!
//! One file per oracle under `tests/suite/oracles/`, beside `evidence` (building a case by hand)
//! and `traces` (the standard traces the cases start from); `end_to_end` holds the tampered real
//! runs and the helpers the other `oracles_*` modules share.

pub(crate) mod attribution;
mod budget;
mod concurrency;
mod context;
mod costs;
mod delivery;
mod depth;
mod determinism;
mod end_to_end;
mod evidence;
mod fork_isolation;
mod model_side;
mod model_side_blind;
mod model_side_blind38;
mod model_side_rules;
mod precedence;
mod rendered_history;
mod routing;
pub(crate) mod runs;
mod sessions;
mod termination;
mod texts;
mod timeouts;
mod traces;
mod truncation;
mod wait;

pub(crate) use end_to_end::{line_of, parse, tampered};
pub(crate) use evidence::edit;

const DEPTH_ERROR: &str = "[Sub-agent error] Sub-agents cannot spawn further sub-agents.";

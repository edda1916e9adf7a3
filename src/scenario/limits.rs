//! The limits that make every run end: a file's `limits`, their defaults, and the ceilings no
//! file can raise.
//!
//! It does not enforce a limit (the runner does) nor refuse a file over the ceilings
//! (`validate` does).

use serde::{Deserialize, Serialize};

/// Limits that make every run end.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Virtual time after which the run is stopped (default one hour; at most
    /// [`MAX_VIRTUAL_MS`]).
    #[serde(default = "default_horizon_ms")]
    pub horizon_ms: u64,
    /// Trace events after which the run is stopped (default 10,000; at least 1, at most
    /// [`Ceilings::max_events`]).
    #[serde(default = "default_max_events")]
    pub max_events: usize,
    /// Longest text (in characters) a `repeat` or a literal may stand for (default 1,000,000;
    /// at most [`Ceilings::max_text_chars`]). All the texts of a file's request checks together
    /// may stand for no more either.
    #[serde(default = "default_max_text_chars")]
    pub max_text_chars: usize,
    /// Most tool calls in one scripted reply (default 1,000; at most
    /// [`Ceilings::max_calls_per_reply`]).
    #[serde(default = "default_max_calls_per_reply")]
    pub max_calls_per_reply: usize,
    /// Deepest `rules.depth_limit` the file may set (default 100; at most [`MAX_DEPTH`]):
    /// foreground children run inline, so a chain of agents is a chain of nested futures.
    #[serde(default = "default_max_depth")]
    pub max_depth: u32,
}

/// The longest virtual time any duration of a scenario may name (ten years): tokio's clock
/// cannot wait much longer, and would shorten longer waits without saying so.
pub const MAX_VIRTUAL_MS: u64 = 10 * 365 * 24 * 3_600_000;

/// The deepest agent chain any scenario may ask for, whatever its `limits.max_depth`. The
/// core polls deep chains on extra stack segments, so this bounds memory and the trace
/// (each agent's alias grows with its depth), not the thread's stack.
pub const MAX_DEPTH: u32 = 1_000;

/// The hard ceilings over the `limits` of every file, and the run budget: what no file can
/// raise, so that a file under the front door's size cap (`load::MAX_FILE_BYTES`) cannot make a run allocate without bound.
///
/// A limit a file sets past its ceiling is refused at load, naming the field and the
/// ceiling. The command line may raise every ceiling at once ([`raise_ceilings`], `rehearsal
/// run --raise-ceilings`), with a warning: it is for a person who means a huge run, never for
/// a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ceilings {
    /// The most trace events a run may record (`limits.max_events`).
    pub max_events: usize,
    /// The longest text, in characters, a file may write (`limits.max_text_chars`).
    pub max_text_chars: usize,
    /// The most tool calls one scripted reply may hold (`limits.max_calls_per_reply`).
    pub max_calls_per_reply: usize,
    /// The run budget: the most bytes of text one run may produce, whatever produced it (the
    /// scripted replies, the simulated tools, the core's own messages such as the unknown-tool
    /// message). The harness stops a run that would pass it, as a stop of its own.
    pub run_text_bytes: usize,
    /// The most bytes of message text one run's request checks may examine (each check text
    /// against each message of each request it checks).
    pub check_scan_bytes: u64,
}

/// The ceilings as built: 100 times the default event limit, 4 Mi characters of text, 100,000
/// calls per reply (the event limit bounds what they do), 32 MiB of text per run (a run keeps a few copies of its texts: the trace,
/// the conversation, the exchanges) and 16 GiB of check scanning (a few seconds).
pub const CEILINGS: Ceilings = Ceilings {
    max_events: 1_000_000,
    max_text_chars: 4 << 20,
    max_calls_per_reply: 100_000,
    run_text_bytes: 32 << 20,
    check_scan_bytes: 16 << 30,
};

/// By how much the command line raised the ceilings (1: not at all).
static CEILING_FACTOR: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);

/// By how much the ceilings were lowered (1: not at all).
static CEILING_DIVISOR: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);

/// The ceilings in force: [`CEILINGS`], times the factor [`raise_ceilings`] set, divided by
/// the divisor [`lower_ceilings`] set (each at least 1).
pub fn ceilings() -> Ceilings {
    let factor = CEILING_FACTOR.load(std::sync::atomic::Ordering::Relaxed);
    let divisor = CEILING_DIVISOR.load(std::sync::atomic::Ordering::Relaxed).max(1);
    let scaled = |ceiling: usize| (ceiling.saturating_mul(factor) / divisor).max(1);
    Ceilings {
        max_events: scaled(CEILINGS.max_events),
        max_text_chars: scaled(CEILINGS.max_text_chars),
        max_calls_per_reply: scaled(CEILINGS.max_calls_per_reply),
        run_text_bytes: scaled(CEILINGS.run_text_bytes),
        check_scan_bytes: (CEILINGS.check_scan_bytes.saturating_mul(factor as u64) / divisor as u64).max(1),
    }
}

/// Divides every ceiling by `divisor` (at least 1) for the rest of the process: tighter
/// limits than the built-in ones, for an embedder that wants them, or for a test that checks
/// the bounds hold on many cases quickly (`tests/ceilings.rs`). Like [`raise_ceilings`], a
/// process-wide choice no file can reach.
pub fn lower_ceilings(divisor: usize) {
    CEILING_DIVISOR.store(divisor.max(1), std::sync::atomic::Ordering::Relaxed);
}

/// Multiplies every ceiling by `factor` (at least 1) for the rest of the process: the
/// command line's `--raise-ceilings`, which warns. A process-wide setting on purpose: it is
/// the operator's decision for everything the process runs, and no file can reach it.
pub fn raise_ceilings(factor: usize) {
    CEILING_FACTOR.store(factor.max(1), std::sync::atomic::Ordering::Relaxed);
}

fn default_horizon_ms() -> u64 {
    3_600_000
}

fn default_max_events() -> usize {
    10_000
}

fn default_max_text_chars() -> usize {
    1_000_000
}

fn default_max_calls_per_reply() -> usize {
    1_000
}

fn default_max_depth() -> u32 {
    100
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            horizon_ms: default_horizon_ms(),
            max_events: default_max_events(),
            max_text_chars: default_max_text_chars(),
            max_calls_per_reply: default_max_calls_per_reply(),
            max_depth: default_max_depth(),
        }
    }
}

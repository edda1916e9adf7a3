//! What plugs into the core's traits under test. Nothing here is called by a core except
//! through the boundary's traits (`Llm`, `Tool`, `Asker`, `Observer`); nothing here knows
//! which core runs.
//!
//! - [`mock_llm`]: the scripted LLM engine, one script per agent lane.
//! - [`exchanges`]: records every request the model received and its reply (evidence).
//! - [`recorder`]: the trace recorder, the core's observer.
//! - [`sim_tools`]: simulated tools with virtual latency and scripted results.
//! - [`asker`]: the user's scripted answers to the risk-based approval gate.
//! - [`clock`]: the harness's waits (latencies, steering times), each instant delivered in one go.
//! - [`schedule`]: the one object that orders same-instant waits (schedule exploration).
//! - [`panics`]: a panic inside a run becomes that run's internal error.
//!
//! An authoring error found during a run (an exhausted lane, an agent without a lane, an
//! approval nobody scripted) halts the run through [`Stop`]; a failed request check is
//! recorded and the run goes on, so all failures of a run are reported together.
//!
//! [`Stop`] also keeps the run budget ([`scenario::Ceilings`](crate::scenario::Ceilings)):
//! the bytes of text the run produced, counted where text is made (the scripted replies and
//! tool results ask before they are built; every text a core reports in an event is counted
//! as it is recorded), and the bytes the request checks examined. Passing either stops the run
//! as a harness stop, like the event limit: it says what the run produced, and blames no one.
//! The budget does not bound a core's private memory: only what reaches the harness.

pub mod asker;
pub mod clock;
pub mod exchanges;
pub mod mock_llm;
pub mod panics;
pub mod recorder;
pub mod schedule;
pub mod sim_tools;

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use tokio::sync::Notify;

/// The harness's signals out of a run: reasons to stop it now, and failed checks; and the
/// run budget.
pub struct Stop {
    halts: Mutex<Vec<Halted>>,
    checks: Mutex<Vec<String>>,
    internal: Mutex<Vec<String>>,
    notify: Notify,
    budget: Budget,
}

impl Default for Stop {
    fn default() -> Stop {
        Stop::with_budget(crate::scenario::ceilings().run_text_bytes, crate::scenario::ceilings().check_scan_bytes)
    }
}

/// What a run may produce and examine, and what it did so far.
struct Budget {
    text_max: usize,
    text: AtomicUsize,
    scan_max: u64,
    scan: AtomicU64,
    /// Whether the budget stopped the run (reported once).
    spent: AtomicBool,
}

/// What kind of halt stopped a run: what the judge decides on, instead of searching the
/// reason's text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Halt {
    /// One of the run's limits: a stop the harness makes, not the core's doing or an
    /// authoring error; it blames no one.
    Limit(Limit),
    /// Judged from the model's side: a request no agent accounts for (no lane can answer it).
    /// The model-side attribution oracle's finding, not an authoring error.
    Unattributed,
    /// The core refused to start the session ([`crate::sut::Refused`]).
    Refused,
    /// The script cannot go on: an authoring error the harness found (an exhausted lane, a
    /// request no lane selects, a `when` that fails, an approval nobody scripted).
    Script,
}

/// One halt: its kind, and the reason as the trace and the verdict say it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Halted {
    /// What kind of halt.
    pub kind: Halt,
    /// What happened, in words.
    pub reason: String,
}

impl std::fmt::Display for Halted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

/// Which of a run's limits stopped it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// The scenario's `limits.horizon_ms` of virtual time passed.
    Horizon,
    /// The trace reached the event limit (`limits.max_events`): recording stops, and the
    /// run is stopped a little later, so the trace is cut.
    Events,
    /// The run budget (text made, messages examined), which no file can raise.
    Budget,
}

/// The limit that stopped a run, and the reason as the trace and the verdict say it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitHit {
    /// Which limit.
    pub limit: Limit,
    /// What happened, in words (the run's `stopped` line).
    pub reason: String,
}

impl Stop {
    /// A stop whose run may produce `text_max` bytes of text and whose checks may examine
    /// `scan_max` bytes (the default: the ceilings in force).
    pub fn with_budget(text_max: usize, scan_max: u64) -> Stop {
        Stop {
            halts: Mutex::default(),
            checks: Mutex::default(),
            internal: Mutex::default(),
            notify: Notify::new(),
            budget: Budget {
                text_max,
                text: AtomicUsize::new(0),
                scan_max,
                scan: AtomicU64::new(0),
                spent: AtomicBool::new(false),
            },
        }
    }

    /// Whether the run may still make a text of `bytes` bytes (`None`: past `usize::MAX`).
    /// Nothing is counted: the text is counted when a core reports it ([`Stop::count_text`]).
    /// When it may not, the run is stopped, and the caller must not build the text.
    pub fn may_make_text(&self, bytes: Option<usize>) -> bool {
        let spent = self.budget.text.load(Ordering::Relaxed);
        let fits = bytes.and_then(|b| b.checked_add(spent)).is_some_and(|total| total <= self.budget.text_max);
        if !fits {
            self.budget_spent(format!("the run produced more than {} bytes of text", self.budget.text_max));
        }
        fits
    }

    /// Counts `bytes` of text the run produced; false (and the run stopped) past the budget.
    pub fn count_text(&self, bytes: usize) -> bool {
        let total = self.budget.text.fetch_add(bytes, Ordering::Relaxed).saturating_add(bytes);
        if total > self.budget.text_max {
            self.budget_spent(format!("the run produced more than {} bytes of text", self.budget.text_max));
            return false;
        }
        true
    }

    /// Counts `bytes` of message text a request check examined; false (and the run
    /// stopped) past the budget.
    pub fn count_scan(&self, bytes: u64) -> bool {
        let total = self.budget.scan.fetch_add(bytes, Ordering::Relaxed).saturating_add(bytes);
        if total > self.budget.scan_max {
            self.budget_spent(format!(
                "the run's request checks examined more than {} bytes of messages",
                self.budget.scan_max
            ));
            return false;
        }
        true
    }

    /// The bytes of text the run produced so far.
    pub fn text_bytes(&self) -> usize {
        self.budget.text.load(Ordering::Relaxed)
    }

    fn budget_spent(&self, what: String) {
        if !self.budget.spent.swap(true, Ordering::Relaxed) {
            self.halt_as(Halt::Limit(Limit::Budget), format!("{what} (the run budget, which no file can raise)"));
        }
    }

    /// Stops the run for `reason`, an authoring error ([`Halt::Script`]; the runner is
    /// waiting on [`Stop::halted`]).
    pub fn halt(&self, reason: String) {
        self.halt_as(Halt::Script, reason);
    }

    /// Stops the run for `reason`, a halt of kind `kind`.
    pub fn halt_as(&self, kind: Halt, reason: String) {
        self.halts.lock().expect("stop lock poisoned").push(Halted { kind, reason });
        self.notify.notify_one();
    }

    /// The first run limit that stopped the run ([`Halt::Limit`]), if one did.
    pub fn run_limit(&self) -> Option<LimitHit> {
        let halts = self.halts.lock().expect("stop lock poisoned");
        halts.iter().find_map(|h| match h.kind {
            Halt::Limit(limit) => Some(LimitHit { limit, reason: h.reason.clone() }),
            Halt::Unattributed | Halt::Refused | Halt::Script => None,
        })
    }

    /// Records a panic inside the run (the harness's or the core's) and stops the run.
    pub fn internal_error(&self, message: String) {
        self.internal.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(message);
        self.notify.notify_one();
    }

    /// The panics inside the run, in order.
    pub fn internal_errors(&self) -> Vec<String> {
        self.internal.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// Records a failed check; the run goes on.
    pub fn check_failed(&self, message: String) {
        self.checks.lock().expect("stop lock poisoned").push(message);
    }

    /// Resolves once the run was halted.
    pub async fn halted(&self) {
        self.notify.notified().await;
    }

    /// Why the run was halted, in order.
    pub fn halts(&self) -> Vec<Halted> {
        self.halts.lock().expect("stop lock poisoned").clone()
    }

    /// The failed checks, in order.
    pub fn failed_checks(&self) -> Vec<String> {
        self.checks.lock().expect("stop lock poisoned").clone()
    }
}

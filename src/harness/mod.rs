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

pub mod asker;
pub mod clock;
pub mod exchanges;
pub mod mock_llm;
pub mod panics;
pub mod recorder;
pub mod schedule;
pub mod sim_tools;

use std::sync::Mutex;

use tokio::sync::Notify;

/// The harness's signals out of a run: reasons to stop it now, and failed checks.
#[derive(Default)]
pub struct Stop {
    halts: Mutex<Vec<String>>,
    checks: Mutex<Vec<String>>,
    internal: Mutex<Vec<String>>,
    notify: Notify,
}

impl Stop {
    /// Stops the run for `reason` (the runner is waiting on [`Stop::halted`]).
    pub fn halt(&self, reason: String) {
        self.halts.lock().expect("stop lock poisoned").push(reason);
        self.notify.notify_one();
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
    pub fn halts(&self) -> Vec<String> {
        self.halts.lock().expect("stop lock poisoned").clone()
    }

    /// The failed checks, in order.
    pub fn failed_checks(&self) -> Vec<String> {
        self.checks.lock().expect("stop lock poisoned").clone()
    }
}

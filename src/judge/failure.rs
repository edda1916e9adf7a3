//! One reason a scenario failed, as data: its kind, the rule clause it breaks and the agent
//! it is about (for an oracle's finding), the trace lines involved, and what was expected
//! against what came. The prose in `what` is for people; a machine reads the fields.
//!
//! What this module deliberately does not do: decide anything. Judges make failures; the
//! verdict orders them; reports render them.

/// One reason a scenario failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// What kind of check failed, for a machine reading the report (JSON `kind`, JUnit
    /// `type`).
    pub kind: FailureKind,
    /// What failed (the expectation, check or oracle), and how.
    pub what: String,
    /// The trace lines involved.
    pub lines: Vec<String>,
    /// What the file expected and what the run gave, where one value says it (an expected
    /// outcome, message, count or golden line); `None` when only the prose can.
    pub expected: Option<String>,
    /// See `expected`.
    pub actual: Option<String>,
    /// The rule clause broken, for a broken rule (`oracle.depth`,
    /// `oracle.model-side.delivery`): what a machine compares, never the prose.
    pub clause: Option<String>,
    /// The agent the failure is about, where one is (an oracle's finding).
    pub agent: Option<String>,
}

/// The kinds of [`Failure`], each named in reports by [`FailureKind::name`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// An expectation of the file (`turns[i].expect`, `expect.*`) did not hold.
    Expectation,
    /// A turn ended in an error no expectation names: the likely cause of what follows.
    UnexpectedError,
    /// An oracle (a rule of `docs/rules/`) was broken.
    Oracle,
    /// Two runs of the same order gave different traces.
    Determinism,
    /// A request check of the script (`expect_request`) failed.
    Check,
    /// Part of the script was never used.
    UnusedScript,
    /// The run was stopped (a run limit, an exhausted script).
    Stopped,
    /// The harness or the core broke an invariant.
    Internal,
    /// The trace differs from its golden file, or has none yet.
    Snapshot,
}

impl FailureKind {
    /// The kind's name in reports: `expectation`, `oracle`, `unused_script`, …
    pub fn name(self) -> &'static str {
        match self {
            FailureKind::Expectation => "expectation",
            FailureKind::UnexpectedError => "unexpected_error",
            FailureKind::Oracle => "oracle",
            FailureKind::Determinism => "determinism",
            FailureKind::Check => "check",
            FailureKind::UnusedScript => "unused_script",
            FailureKind::Stopped => "stopped",
            FailureKind::Internal => "internal",
            FailureKind::Snapshot => "snapshot",
        }
    }
}

impl Failure {
    /// A failure told in prose only.
    pub fn new(kind: FailureKind, what: String, lines: Vec<String>) -> Failure {
        Failure { kind, what, lines, expected: None, actual: None, clause: None, agent: None }
    }

    /// The same failure as a finding of the rule `clause` about `agent`.
    pub fn of_rule(mut self, clause: impl Into<String>, agent: impl Into<String>) -> Failure {
        self.clause = Some(clause.into());
        self.agent = Some(agent.into());
        self
    }

    /// The same failure with the values that differ.
    pub fn differing(mut self, expected: impl Into<String>, actual: impl Into<String>) -> Failure {
        self.expected = Some(expected.into());
        self.actual = Some(actual.into());
        self
    }
}

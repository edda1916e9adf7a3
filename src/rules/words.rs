//! The fixed words of the rules (docs/rules/) that the judges read in the evidence: tool
//! names and the texts a core must write. Written once here for the oracles, the coverage
//! detectors and the dialects; the built-in core keeps its own copy (`src/core`), so that a
//! core typo is caught by a judge reading these, not copied into it.

/// The names of the `subagent` family, in catalogue order (`bub.tools.family`).
pub const SUBAGENT_FAMILY: [&str; 4] = ["subagent", "subagent.wait", "subagent.send", "subagent.cancel"];

/// The terminal tools of a Roku loop (`roku.terminal.*`); `ask_user` is one at the root only.
pub const TERMINAL: [&str; 3] = ["final_answer", "ask_user", "fail"];

/// The depth error (`core.depth.guard-error`).
pub const DEPTH_ERROR: &str = "[Sub-agent error] Sub-agents cannot spawn further sub-agents.";

/// An `Agent` call with an empty task (`roku.agent.empty-task`).
pub const NO_TASK: &str = "[Sub-agent error] No task provided.";

/// How a loop's end text begins when its step budget ran out (`oracle.texts.loop-end`:
/// `Step budget exhausted after N steps; goal: G`).
pub const EXHAUSTED: &str = "Step budget exhausted after ";

//! The scenario as a file holds it: the top-level `Scenario` and the parts without a file
//! of their own (rules, session, approval, profiles, turns, steering, expectations).
//!
//! These are plain serde types; they do not validate beyond what their types refuse (that is
//! `validate`), parse files (`parse`) or build scenarios in code (`builder`).

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

use crate::rules::{Preset, Rules};
use crate::sut::approval::GateMode;
use crate::sut::event::{OutcomeKind, Status};

use super::lanes::Lane;
use super::limits::Limits;
use super::text::Text;
use super::tools::ToolSpec;

/// A scenario, as written in a file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// The version of the scenario format the file is written in; left out, the newest this
    /// rehearsal reads (2). A newer version is refused, naming both; docs/format-versions.md
    /// says what each version changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 2))]
    pub format: Option<u32>,
    /// Its name, shown in verdicts.
    pub name: String,
    /// What behaviour it shows. Every rule clause id it cites must be a clause of docs/rules/.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// The rule preset and knob overrides.
    #[serde(default)]
    pub rules: RulesSpec,
    /// Root seed of everything the run draws (task ids).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub seed: u64,
    /// Session context passed to every request.
    #[serde(default, skip_serializing_if = "is_default")]
    pub session: SessionSpec,
    /// The approval gate.
    #[serde(default, skip_serializing_if = "is_default")]
    pub approval: ApprovalSpec,
    /// Simulated tools.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
    /// Agent profiles declared inline.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub profiles: Vec<ProfileSpec>,
    /// Folders to load profile files from, relative to the scenario file.
    #[serde(default, skip_serializing_if = "ProfileDirs::is_empty")]
    pub profile_dirs: ProfileDirs,
    /// Profile files written into the scenario, by file name (`reviewer.md`): read as files
    /// of the workspace folder, after the folder's own.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub profile_files: BTreeMap<String, String>,
    /// Scripts of the mock LLM, one per agent lane.
    pub lanes: Vec<Lane>,
    /// The user turns, in order.
    pub turns: Vec<Turn>,
    /// Messages injected into the root at a virtual time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steer: Vec<Steer>,
    /// What the whole run must show.
    #[serde(default, skip_serializing_if = "is_default")]
    pub expect: Expect,
    /// Limits that make every run end.
    #[serde(default, skip_serializing_if = "is_default")]
    pub limits: Limits,
    /// The limits a runtime in another process is started with, by the names its runtime
    /// description makes settable (`settable`: `max_turns`, `max_concurrency`, ...): `drive`
    /// sets each one's variable and judges the run against the value. Not read in process,
    /// where `rules` sets the core's limits.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub runtime_limits: BTreeMap<String, u64>,
}

pub(super) fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

impl Scenario {
    /// What a core must implement to run this scenario: the spawning tools its rules offer
    /// the root, the risk gate when the approval mode asks for it, steering when the scenario
    /// steers.
    pub fn requires(&self) -> crate::sut::Capabilities {
        let rules = self.rules.resolve();
        crate::sut::Capabilities {
            foreground: rules.agent_tool,
            background: rules.subagent_tools,
            risk_gate: self.approval.mode == GateMode::Risk,
            steering: !self.steer.is_empty(),
        }
    }
}

/// A knob with no "off": absent keeps the preset's value, and `null` is refused (it would
/// otherwise silently mean the same as absent).
fn not_null<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    match Option::<T>::deserialize(d)? {
        Some(value) => Ok(Some(value)),
        None => Err(serde::de::Error::custom(
            "null does not turn this knob off (it has no off); leave the field out to keep the preset's value",
        )),
    }
}

/// Distinguishes an absent field (`None`) from an explicit `null` (`Some(None)`).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// Which preset to start from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PresetName {
    /// Roku's rules.
    #[default]
    Roku,
    /// Bub's rules.
    Bub,
}

/// A preset and the knobs it overrides; `null` for a limit means "none".
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct RulesSpec {
    #[serde(default)]
    pub preset: PresetName,
    #[serde(default, deserialize_with = "not_null", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "u32")]
    pub root_step_budget: Option<u32>,
    #[serde(default, deserialize_with = "not_null", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "u32")]
    pub recovery_budget: Option<u32>,
    #[serde(default, deserialize_with = "not_null", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "u32")]
    pub depth_limit: Option<u32>,
    #[serde(default, deserialize_with = "not_null", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "u32")]
    pub child_step_cap: Option<u32>,
    #[serde(default, deserialize_with = "not_null", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "u32")]
    pub spawn_cost: Option<u32>,
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub result_limit_chars: Option<Option<usize>>,
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub agent_timeout_ms: Option<Option<u64>>,
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub subagent_default_timeout_ms: Option<Option<u64>>,
    #[serde(default, deserialize_with = "not_null", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "usize")]
    pub max_concurrency: Option<usize>,
    #[serde(default, deserialize_with = "not_null", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "bool")]
    pub agent_tool: Option<bool>,
    #[serde(default, deserialize_with = "not_null", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "bool")]
    pub subagent_tools: Option<bool>,
    #[serde(default, deserialize_with = "not_null", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub unknown_tool_message: Option<String>,
}

impl RulesSpec {
    /// The preset with the overrides applied.
    pub fn resolve(&self) -> Rules {
        use std::time::Duration;
        let mut r = Rules::preset(match self.preset {
            PresetName::Roku => Preset::Roku,
            PresetName::Bub => Preset::Bub,
        });
        let ms = |v: Option<u64>| v.map(Duration::from_millis);
        r.root_step_budget = self.root_step_budget.unwrap_or(r.root_step_budget);
        r.recovery_budget = self.recovery_budget.unwrap_or(r.recovery_budget);
        r.depth_limit = self.depth_limit.unwrap_or(r.depth_limit);
        r.child_step_cap = self.child_step_cap.unwrap_or(r.child_step_cap);
        r.spawn_cost = self.spawn_cost.unwrap_or(r.spawn_cost);
        r.result_limit_chars = self.result_limit_chars.unwrap_or(r.result_limit_chars);
        r.agent_timeout = self.agent_timeout_ms.map(ms).unwrap_or(r.agent_timeout);
        r.subagent_default_timeout = self.subagent_default_timeout_ms.map(ms).unwrap_or(r.subagent_default_timeout);
        r.max_concurrency = self.max_concurrency.unwrap_or(r.max_concurrency);
        r.agent_tool = self.agent_tool.unwrap_or(r.agent_tool);
        r.subagent_tools = self.subagent_tools.unwrap_or(r.subagent_tools);
        if let Some(message) = &self.unknown_tool_message {
            r.unknown_tool_message = message.clone();
        }
        r
    }
}

/// Session context.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionSpec {
    /// Session id (default `session-1`).
    #[serde(default = "default_session_id")]
    pub id: String,
    /// Model override.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Reasoning effort.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// Memory sections.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory: Vec<String>,
    /// Base system prompt.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub system_prompt: String,
    /// Skills the root may use.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<String>,
    /// Requests the runtime makes besides its agents' (a title for the conversation, a
    /// summary), each matched by a text its last message contains: judged from the model's
    /// side, such a request is answered with the declared reply and put down to no agent.
    /// A request no agent accounts for that matches none stays the finding
    /// `unattributed request`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub side_requests: Vec<SideRequest>,
}

/// A side request: a runtime's own call to the model, not an agent's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SideRequest {
    /// A text the request's last message contains (the first matching declaration answers).
    pub contains: String,
    /// The reply's text.
    #[serde(default)]
    pub reply: String,
    /// Virtual time before the reply arrives.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub latency_ms: u64,
}

fn default_session_id() -> String {
    "session-1".to_string()
}

impl Default for SessionSpec {
    fn default() -> SessionSpec {
        SessionSpec {
            id: default_session_id(),
            model: None,
            reasoning_effort: None,
            memory: Vec::new(),
            system_prompt: String::new(),
            skills: Vec::new(),
            side_requests: Vec::new(),
        }
    }
}

/// The approval gate and the user's scripted answers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalSpec {
    /// `auto` or `risk`.
    #[serde(default)]
    pub mode: GateMode,
    /// Tools the policy refuses outright (risk gate).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policy_deny: Vec<String>,
    /// The user's answers, in the order the gate asks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub answers: Vec<Answer>,
}

/// One scripted answer of the user.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Answer {
    /// The tool the gate must be asking about.
    pub tool: String,
    /// Whether the user approves.
    pub approve: bool,
}

/// An agent profile declared in the scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct ProfileSpec {
    pub name: String,
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skills: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub body: String,
}

/// Folders holding `.agents/agents/*.md` profile files, relative to the scenario file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProfileDirs {
    /// The workspace folder (its profiles win).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// The home folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home: Option<String>,
}

impl ProfileDirs {
    fn is_empty(&self) -> bool {
        self.workspace.is_none() && self.home.is_none()
    }
}

/// One user turn.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// The user's message.
    pub user: String,
    /// Over the wire, whether the runtime may send the model a root message of its own for
    /// this turn: by default the root must send one holding `user` (a finding otherwise,
    /// since a runtime that loses or replaces its user's message breaks the run). In-process
    /// the core is given `user` and this changes nothing. Format 3.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub user_free: bool,
    /// Virtual time the turn starts (default: when the previous one ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_ms: Option<u64>,
    /// Request id (default `req-<turn number>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// What the turn must end with.
    #[serde(default, skip_serializing_if = "is_default")]
    pub expect: TurnExpect,
}

/// What a turn must end with.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct TurnExpect {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<OutcomeKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    /// The exact final message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Text>,
    /// A text the final message must contain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_contains: Option<Text>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_left: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<u32>,
    /// Why this expectation holds in the default tie order only: it is skipped in explored
    /// orders, and the report says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_dependent: Option<String>,
}

/// A message injected into the root at a virtual time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Steer {
    /// When, from the start of the run.
    pub at_ms: u64,
    /// The message.
    pub message: String,
}

/// What the whole run must show.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// Fragments of the text trace that must appear, in this order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trace: Vec<String>,
    /// Fragments that must not appear anywhere in the trace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trace_absent: Vec<String>,
    /// Virtual time from start to the end of the last turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_ms: Option<u64>,
    /// Sessions the store still holds when the session has ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live_sessions: Option<Vec<String>>,
    /// Why these expectations hold in the default tie order only: they are skipped in
    /// explored orders, and the report says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_dependent: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_null_turns_a_limit_off() {
        let r: RulesSpec = serde_json::from_str(r#"{"result_limit_chars": null}"#).unwrap();
        assert_eq!(r.resolve().result_limit_chars, None);
        let r: RulesSpec = serde_json::from_str("{}").unwrap();
        assert_eq!(r.resolve().result_limit_chars, Some(4000));
    }
}

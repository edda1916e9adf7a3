//! The scenario file format: JSON, unknown fields rejected, documented in
//! `docs/scenarios.md`.
//!
//! A scenario holds the rules, the simulated tools, the scripted lanes of the mock LLM, the
//! user turns and what must come out. This module parses and validates; it does not run
//! anything. Every error names the file and the place (line and column for syntax and type
//! errors, the field path for both), never panics, and is a value the CLI maps to exit 2.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize};

use crate::rules::{Preset, Rules};

mod builtin;
pub mod place;
mod schema;
mod suggest;

pub use crate::sut::approval::GateMode;
use crate::sut::event::{OutcomeKind, Status};
pub use place::Place;
pub use schema::schema;
#[cfg(feature = "profile-files")]
pub(crate) use suggest::hint_for_serde;
pub(crate) use suggest::{did_you_mean, nearest as nearest_name};

/// The newest scenario format version this rehearsal reads, the one a file without `format`
/// is read as. Version 1 is the format as docs/scenarios.md describes it; version 2 adds
/// `check.recorded` (`rehearsal record`); see docs/format-versions.md for what each version
/// changes.
pub const FORMAT: u32 = 3;

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
}

fn is_zero(n: &u64) -> bool {
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

/// Scenario text: a string, `{"repeat": "ab", "count": 3}`, or a list of those, joined.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Text {
    /// Literal text.
    Plain(String),
    /// `repeat` written `count` times.
    Repeat {
        /// The unit.
        repeat: String,
        /// How many times.
        count: usize,
    },
    /// Pieces, joined.
    Parts(Vec<Text>),
}

/// Hand-written so that a bad text says which forms are accepted and an unknown key inside
/// `{"repeat", "count"}` is rejected like everywhere else (an untagged derive would say only
/// "did not match any variant").
impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Text, D::Error> {
        use serde::de::{self, MapAccess, SeqAccess, Visitor};
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(r#"a text: a string, {"repeat": "…", "count": N}, or a list of those"#)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Text, E> {
                Ok(Text::Plain(s.to_string()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Text, A::Error> {
                let mut parts = Vec::new();
                while let Some(part) = seq.next_element()? {
                    parts.push(part);
                }
                Ok(Text::Parts(parts))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Text, A::Error> {
                const FIELDS: &[&str] = &["repeat", "count"];
                let (mut repeat, mut count) = (None, None);
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "repeat" if repeat.is_none() => repeat = Some(map.next_value::<String>()?),
                        "count" if count.is_none() => count = Some(map.next_value::<usize>()?),
                        "repeat" | "count" => return Err(de::Error::custom(format!("duplicate field `{key}`"))),
                        _ => return Err(de::Error::unknown_field(&key, FIELDS)),
                    }
                }
                let repeat = repeat.ok_or_else(|| de::Error::missing_field("repeat"))?;
                let count = count.ok_or_else(|| de::Error::missing_field("count"))?;
                Ok(Text::Repeat { repeat, count })
            }
        }
        d.deserialize_any(TextVisitor)
    }
}

/// Written by hand like the `Deserialize` above: the three forms, the `repeat` one closed.
impl schemars::JsonSchema for Text {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Text".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let list = generator.subschema_for::<Text>();
        schemars::json_schema!({
            "description": "A text: a string, {\"repeat\": \"…\", \"count\": N} (the unit N times), or a list of those, joined.",
            "anyOf": [
                {"type": "string"},
                {
                    "type": "object",
                    "properties": {"repeat": {"type": "string"}, "count": {"type": "integer", "minimum": 0}},
                    "required": ["repeat", "count"],
                    "additionalProperties": false
                },
                {"type": "array", "items": list}
            ]
        })
    }
}

impl From<&str> for Text {
    fn from(text: &str) -> Text {
        Text::Plain(text.to_string())
    }
}

impl From<String> for Text {
    fn from(text: String) -> Text {
        Text::Plain(text)
    }
}

impl Text {
    /// The length in bytes of the text [`Text::render`] builds, without building it (`None`
    /// past `usize::MAX`): the harness asks before it makes a text, against the run budget.
    pub fn byte_len(&self) -> Option<usize> {
        match self {
            Text::Plain(s) => Some(s.len()),
            Text::Repeat { repeat, count } => repeat.len().checked_mul(*count),
            Text::Parts(parts) => parts.iter().try_fold(0usize, |sum, part| sum.checked_add(part.byte_len()?)),
        }
    }

    /// Whether the text [`Text::render`] builds is empty or whitespace, without building it.
    pub fn is_blank(&self) -> bool {
        match self {
            Text::Plain(s) => s.trim().is_empty(),
            Text::Repeat { repeat, count } => *count == 0 || repeat.trim().is_empty(),
            Text::Parts(parts) => parts.iter().all(Text::is_blank),
        }
    }

    /// The text it stands for.
    pub fn render(&self) -> String {
        match self {
            Text::Plain(s) => s.clone(),
            Text::Repeat { repeat, count } => repeat.repeat(*count),
            Text::Parts(parts) => parts.iter().map(Text::render).collect(),
        }
    }
}

/// How risky a simulated tool is, for the risk gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RiskTag {
    /// `risk:safe`.
    Safe,
    /// `risk:write`.
    Write,
}

impl RiskTag {
    /// The tag the tool carries (`risk:safe`, `risk:write`).
    pub fn tag(self) -> &'static str {
        match self {
            RiskTag::Safe => "risk:safe",
            RiskTag::Write => "risk:write",
        }
    }
}

/// A simulated tool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    /// Its name.
    pub name: String,
    /// Its description.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Virtual time each call takes.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub latency_ms: u64,
    /// Results of successive calls; the last one repeats. Empty: the text `ok`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub results: Vec<ToolResult>,
    /// Risk tag for the risk gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk: Option<RiskTag>,
    /// A Rust function that answers every call instead of `results` (scenarios built in code
    /// only; never read from or written to a file).
    #[serde(skip)]
    pub handler: Option<ToolFn>,
}

/// A Rust function acting as a simulated tool: the call's arguments in, a result out.
#[derive(Clone)]
pub struct ToolFn(pub std::sync::Arc<dyn Fn(&serde_json::Value) -> ToolResult + Send + Sync>);

impl fmt::Debug for ToolFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ToolFn(..)")
    }
}

impl PartialEq for ToolFn {
    fn eq(&self, other: &ToolFn) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

/// A Rust function answering as the model for one lane: the request in, a reply out (as
/// pydantic-ai's `FunctionModel` does).
#[derive(Clone)]
pub struct ReplyFn(pub std::sync::Arc<dyn Fn(&crate::sut::llm::LlmRequest) -> Reply + Send + Sync>);

impl fmt::Debug for ReplyFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ReplyFn(..)")
    }
}

impl PartialEq for ReplyFn {
    fn eq(&self, other: &ReplyFn) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

/// One result of a simulated tool: `{"text": ...}` or `{"error": ...}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolResult {
    /// A successful result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<Text>,
    /// A failed result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Text>,
    /// Overrides the tool's latency for this call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
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

/// A script for the agents one selector picks.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Lane {
    /// Selects the agent with this alias (`main`, `main/2`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Selects children whose task contains this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_contains: Option<String>,
    /// Selects children running this profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// The replies, one per request, in order.
    pub replies: Vec<Reply>,
    /// Checked on every request of this lane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_every: Option<Check>,
    /// A Rust function that answers every request of this lane after its scripted replies
    /// are used (scenarios built in code only; never read from or written to a file).
    #[serde(skip)]
    pub respond: Option<ReplyFn>,
}

impl Lane {
    /// The selector, as written.
    pub fn selector(&self) -> String {
        match (&self.agent, &self.task_contains, &self.profile) {
            (Some(a), _, _) => format!("agent {}", crate::trace::quoted(a)),
            (_, Some(t), _) => format!("task_contains {}", crate::trace::quoted(t)),
            (_, _, Some(p)) => format!("profile {}", crate::trace::quoted(p)),
            _ => "no selector".to_string(),
        }
    }
}

/// One scripted reply.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Reply {
    /// The reply's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<Text>,
    /// The reply's tool calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<Call>,
    /// Virtual time before the reply arrives.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub latency_ms: u64,
    /// Instead of a reply: the LLM call fails with this error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// With `error`, over the wire (`rehearsal serve`): the HTTP status of the error answer
    /// (400 to 599; default 500). In-process the call fails with `error` whatever the status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 400, max = 599))]
    pub error_status: Option<u16>,
    /// With `error`, over the wire: the `type` of the API error object (default by status:
    /// `invalid_request_error` for 400, `rate_limit_error` for 429, `server_error` for 5xx, …).
    /// In-process it has no effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_type: Option<String>,
    /// A reply (text and/or calls) whose stream breaks: over the wire a streamed answer sends
    /// this many SSE chunks and then closes the connection without `[DONE]` (a non-streamed
    /// answer closes it with no response). In-process the model call fails, as a dropped
    /// connection fails a client: with the error `stream dropped after N chunks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drop_after_chunks: Option<usize>,
    /// Instead of a reply: no answer ever comes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hang: bool,
    /// What the request this reply answers must hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Check>,
    /// When this reply answers: what the request must hold for it to be chosen. A reply whose
    /// `when` does not hold is passed over if it is `optional` or `repeatable`, and otherwise
    /// stops the run (the script expected it here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<When>,
    /// The reply may be used once or not at all: a request it does not fit (its `when` does
    /// not hold) goes to the next reply, and leaving it unused is no failure.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
    /// The reply may be used any number of times, none included: it answers every request
    /// its `when` holds for, and the first that it does not goes on to the next reply.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub repeatable: bool,
}

/// What a request must hold for a reply to answer it (every field given must hold).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct When {
    /// Texts some message must contain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contains: Vec<Text>,
    /// Texts no message may contain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub absent: Vec<Text>,
    /// Tasks (`$taskN`, the N-th task the run queued) whose result the request holds, as a
    /// notification or in a `subagent.wait` answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub result_of: Vec<String>,
    /// Tasks (`$taskN`) whose result the request does not hold yet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub no_result_of: Vec<String>,
    /// The exact number of messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<usize>,
    /// At least this many messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_messages: Option<usize>,
}

/// One scripted tool call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Call {
    /// The tool name.
    pub tool: String,
    /// Its arguments (for a built-in tool, those its parameter schema accepts).
    #[serde(default = "empty_object", skip_serializing_if = "is_empty_object")]
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    pub args: serde_json::Value,
    /// The tool is deliberately not declared (to show the unknown-tool answer).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub undeclared: bool,
    /// The arguments of a built-in tool are deliberately not what it accepts (an unknown
    /// name, a wrong type, a missing argument, a session named like a kind): sent as written,
    /// not checked at load.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bad_args: bool,
}

fn empty_object() -> serde_json::Value {
    serde_json::json!({})
}

fn is_empty_object(v: &serde_json::Value) -> bool {
    v.as_object().is_some_and(|o| o.is_empty())
}

/// Assertions on one request the core sent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct Check {
    /// Number of messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<usize>,
    /// Texts some message must contain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contains: Vec<Text>,
    /// Texts no message may contain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub absent: Vec<Text>,
    /// The first message's exact content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_message: Option<Text>,
    /// The last message's exact content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_message: Option<Text>,
    /// The exact content of the message at position `n` (from 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nth_message: Option<NthMessage>,
    /// The exact tool names offered, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools_include: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools_exclude: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Vec<String>>,
    /// Texts the system prompt must contain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub system_contains: Vec<String>,
    /// Texts the system prompt may not contain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub system_absent: Vec<String>,
    /// The request's messages are exactly the parent's conversation at the `subagent` call
    /// that forked this child, followed by the child's prompt.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fork_of_parent: bool,
    /// The request as a real run sent it (`rehearsal record`): the request must hold the same
    /// messages (roles, texts, calls' tools and arguments; not call ids), and the same system
    /// text when one is given, once every span a `volatile` pattern matches is blanked in
    /// both. A miss names the first differing message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded: Option<RecordedRequest>,
    /// Why this check holds in the default tie order only: it is skipped in explored orders,
    /// and the report says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_dependent: Option<String>,
}

/// A request as it was recorded (`check.recorded`), compared with the one sent on replay.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecordedRequest {
    /// Regular expressions (the `regex` crate's syntax) of what changes from run to run (the
    /// date bub writes into every user message): each match, in the recorded texts and in
    /// the request's, is replaced by `…` before they are compared.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volatile: Vec<String>,
    /// The system text (every `system` and `developer` message, joined by a blank line); not
    /// compared when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// The messages, in order.
    pub messages: Vec<RecordedMessage>,
}

/// One message of a [`RecordedRequest`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecordedMessage {
    /// `user`, `assistant` or `tool`.
    pub role: RecordedRole,
    /// Its text.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub content: String,
    /// An assistant message's calls, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<RecordedCall>,
}

/// Who wrote a [`RecordedMessage`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RecordedRole {
    /// The user, or the runtime speaking for the user.
    User,
    /// The model.
    Assistant,
    /// A tool result.
    Tool,
}

/// One call of a recorded assistant message: its tool and arguments (ids differ between
/// runs, so they are not kept).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecordedCall {
    /// The tool name.
    pub tool: String,
    /// Its arguments.
    #[serde(default = "empty_object", skip_serializing_if = "is_empty_object")]
    pub args: serde_json::Value,
}

/// The most compiled size of one `volatile` pattern, in bytes (the `regex` crate's own
/// bound on a pattern's program; its default is 10 MiB): a pattern is run over every message
/// of every request it checks.
pub const VOLATILE_PATTERN_MAX_BYTES: usize = 1 << 20;

/// Whether a call of `tool` with `args` is one the built-in tool's parameters accept: `None`
/// when `tool` is not a built-in tool (a file must declare it or mark the call).
pub(crate) fn builtin_call_fits(tool: &str, args: &serde_json::Value) -> Option<bool> {
    builtin::parameters(tool)?;
    Some(builtin::check_call(tool, args, "").is_ok())
}

/// A `volatile` pattern compiled, or why it cannot be.
pub(crate) fn volatile_regex(pattern: &str) -> Result<regex::Regex, regex::Error> {
    regex::RegexBuilder::new(pattern).size_limit(VOLATILE_PATTERN_MAX_BYTES).build()
}

/// The exact content of one message of a request, by its position.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NthMessage {
    /// The message's position, counting from 1 (the first message is 1).
    pub n: usize,
    /// Its exact content.
    pub text: Text,
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

// ---------------------------------------------------------------------------------------------
// Building scenarios in code
// ---------------------------------------------------------------------------------------------

impl Scenario {
    /// A builder for a scenario named `name`: the `roku` preset, nothing else until added.
    pub fn builder(name: impl Into<String>) -> ScenarioBuilder {
        ScenarioBuilder { scenario: Scenario { name: name.into(), ..Scenario::default() } }
    }
}

/// Builds a [`Scenario`] in code, field by field; [`ScenarioBuilder::build`] validates it as
/// a file is validated.
///
/// ```
/// use rehearsal::scenario::{Lane, PresetName, Reply, Scenario, ToolSpec, Turn};
/// use rehearsal::sut::event::OutcomeKind;
/// use serde_json::json;
///
/// let scenario = Scenario::builder("agent-budget-from-30")
///     .preset(PresetName::Roku)
///     .tool(ToolSpec::new("Read").latency_ms(50).result("log contents"))
///     .lane(
///         Lane::agent("main")
///             .reply(Reply::call("Agent", json!({"task": "Summarise the logs"})).latency_ms(100))
///             .reply(Reply::text("The child says: all clear.").latency_ms(100)),
///     )
///     .lane(Lane::agent("main/1").reply(Reply::text("All clear.").latency_ms(200)))
///     .turn(Turn::user("Check the logs").expect_outcome(OutcomeKind::FinalAnswer).expect_budget_left(18))
///     .build()
///     .unwrap();
/// assert_eq!(scenario.lanes.len(), 2);
/// ```
#[derive(Clone, Debug)]
pub struct ScenarioBuilder {
    scenario: Scenario,
}

impl ScenarioBuilder {
    /// What behaviour it shows.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.scenario.description = description.into();
        self
    }

    /// The preset to start from.
    pub fn preset(mut self, preset: PresetName) -> Self {
        self.scenario.rules.preset = preset;
        self
    }

    /// Overrides rule knobs: `.rules(|r| r.root_step_budget = Some(5))`.
    pub fn rules(mut self, edit: impl FnOnce(&mut RulesSpec)) -> Self {
        edit(&mut self.scenario.rules);
        self
    }

    /// The root seed of every draw.
    pub fn seed(mut self, seed: u64) -> Self {
        self.scenario.seed = seed;
        self
    }

    /// Edits the session context: `.session(|s| s.model = Some("big".into()))`.
    pub fn session(mut self, edit: impl FnOnce(&mut SessionSpec)) -> Self {
        edit(&mut self.scenario.session);
        self
    }

    /// The approval gate.
    pub fn approval(mut self, approval: ApprovalSpec) -> Self {
        self.scenario.approval = approval;
        self
    }

    /// Declares a simulated tool.
    pub fn tool(mut self, tool: ToolSpec) -> Self {
        self.scenario.tools.push(tool);
        self
    }

    /// Declares an agent profile.
    pub fn profile(mut self, profile: ProfileSpec) -> Self {
        self.scenario.profiles.push(profile);
        self
    }

    /// Adds a lane of the mock model.
    pub fn lane(mut self, lane: Lane) -> Self {
        self.scenario.lanes.push(lane);
        self
    }

    /// Adds a user turn.
    pub fn turn(mut self, turn: Turn) -> Self {
        self.scenario.turns.push(turn);
        self
    }

    /// Injects a message into the root at `at_ms` of virtual time.
    pub fn steer(mut self, at_ms: u64, message: impl Into<String>) -> Self {
        self.scenario.steer.push(Steer { at_ms, message: message.into() });
        self
    }

    /// A fragment the text trace must show (after the previous ones).
    pub fn expect_trace(mut self, fragment: impl Into<String>) -> Self {
        self.scenario.expect.trace.push(fragment.into());
        self
    }

    /// The virtual time from start to the end of the last turn.
    pub fn expect_elapsed_ms(mut self, ms: u64) -> Self {
        self.scenario.expect.elapsed_ms = Some(ms);
        self
    }

    /// The run limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.scenario.limits = limits;
        self
    }

    /// The scenario, validated as a file is.
    pub fn build(self) -> Result<Scenario, ScenarioError> {
        validate(&self.scenario).map_err(|problem| problem.at(Path::new("(scenario built in code)"), None))?;
        Ok(self.scenario)
    }
}

impl ToolSpec {
    /// A tool called `name` that answers `ok` at once.
    pub fn new(name: impl Into<String>) -> ToolSpec {
        ToolSpec { name: name.into(), ..ToolSpec::default() }
    }

    /// Virtual time each call takes.
    pub fn latency_ms(mut self, ms: u64) -> Self {
        self.latency_ms = ms;
        self
    }

    /// Adds a successful result (results are used in order; the last one repeats).
    pub fn result(mut self, text: impl Into<String>) -> Self {
        self.results.push(ToolResult { text: Some(Text::Plain(text.into())), ..ToolResult::default() });
        self
    }

    /// Adds a failed result.
    pub fn error(mut self, text: impl Into<String>) -> Self {
        self.results.push(ToolResult { error: Some(Text::Plain(text.into())), ..ToolResult::default() });
        self
    }

    /// Tags the tool for the risk gate.
    pub fn risk(mut self, risk: RiskTag) -> Self {
        self.risk = Some(risk);
        self
    }

    /// Answers every call with a Rust function of the call's arguments.
    pub fn handler(mut self, f: impl Fn(&serde_json::Value) -> ToolResult + Send + Sync + 'static) -> Self {
        self.handler = Some(ToolFn(std::sync::Arc::new(f)));
        self
    }
}

impl ToolResult {
    /// A successful result.
    pub fn text(text: impl Into<String>) -> ToolResult {
        ToolResult { text: Some(Text::Plain(text.into())), ..ToolResult::default() }
    }

    /// A failed result.
    pub fn error(text: impl Into<String>) -> ToolResult {
        ToolResult { error: Some(Text::Plain(text.into())), ..ToolResult::default() }
    }
}

impl Lane {
    /// The lane of the agent with this alias (`main`, `main/2`).
    pub fn agent(alias: impl Into<String>) -> Lane {
        Lane { agent: Some(alias.into()), ..Lane::default() }
    }

    /// The lane of children whose task contains `text`.
    pub fn task_contains(text: impl Into<String>) -> Lane {
        Lane { task_contains: Some(text.into()), ..Lane::default() }
    }

    /// The lane of children running the profile `name`.
    pub fn profile(name: impl Into<String>) -> Lane {
        Lane { profile: Some(name.into()), ..Lane::default() }
    }

    /// Adds the next scripted reply.
    pub fn reply(mut self, reply: Reply) -> Self {
        self.replies.push(reply);
        self
    }

    /// Checks every request of the lane.
    pub fn check_every(mut self, check: Check) -> Self {
        self.check_every = Some(check);
        self
    }

    /// Answers every request after the scripted replies with a Rust function of the request.
    pub fn respond_with(mut self, f: impl Fn(&crate::sut::llm::LlmRequest) -> Reply + Send + Sync + 'static) -> Self {
        self.respond = Some(ReplyFn(std::sync::Arc::new(f)));
        self
    }
}

impl Reply {
    /// A text reply without calls.
    pub fn text(text: impl Into<String>) -> Reply {
        Reply { text: Some(Text::Plain(text.into())), ..Reply::default() }
    }

    /// A reply with one call.
    pub fn call(tool: impl Into<String>, args: serde_json::Value) -> Reply {
        Reply::default().and_call(tool, args)
    }

    /// Adds a call to the reply.
    pub fn and_call(mut self, tool: impl Into<String>, args: serde_json::Value) -> Self {
        self.calls.push(Call { tool: tool.into(), args, undeclared: false, bad_args: false });
        self
    }

    /// A failed model call.
    pub fn error(message: impl Into<String>) -> Reply {
        Reply { error: Some(message.into()), ..Reply::default() }
    }

    /// A model call that never answers.
    pub fn hang() -> Reply {
        Reply { hang: true, ..Reply::default() }
    }

    /// Virtual time before the reply arrives.
    pub fn latency_ms(mut self, ms: u64) -> Self {
        self.latency_ms = ms;
        self
    }

    /// What the request this reply answers must hold.
    pub fn check(mut self, check: Check) -> Self {
        self.check = Some(check);
        self
    }
}

impl Turn {
    /// A user turn with this message.
    pub fn user(message: impl Into<String>) -> Turn {
        Turn { user: message.into(), ..Turn::default() }
    }

    /// Starts the turn at `ms` of virtual time.
    pub fn at_ms(mut self, ms: u64) -> Self {
        self.at_ms = Some(ms);
        self
    }

    /// The outcome the turn must end with.
    pub fn expect_outcome(mut self, outcome: OutcomeKind) -> Self {
        self.expect.outcome = Some(outcome);
        self
    }

    /// The status the turn must end with.
    pub fn expect_status(mut self, status: Status) -> Self {
        self.expect.status = Some(status);
        self
    }

    /// The exact final message.
    pub fn expect_message(mut self, message: impl Into<String>) -> Self {
        self.expect.message = Some(Text::Plain(message.into()));
        self
    }

    /// The steps the root must have left.
    pub fn expect_budget_left(mut self, budget: u32) -> Self {
        self.expect.budget_left = Some(budget);
        self
    }

    /// The root's step index at the end.
    pub fn expect_steps(mut self, steps: u32) -> Self {
        self.expect.steps = Some(steps);
        self
    }
}

/// A scenario file that cannot be used.
#[derive(Debug)]
pub enum ScenarioError {
    /// The file could not be read.
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// Bad JSON, a wrong type or an unknown field.
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column, in characters.
        column: usize,
        /// JSON path of the field (`lanes[0].replies[2]`), `.` for the top.
        field: String,
        /// What is wrong.
        message: String,
        /// What to do about it (`did you mean `lanes`?`), when there is something to say.
        hint: Option<String>,
    },
    /// Well-formed but inconsistent (an undeclared tool, a lane without selector, ...).
    Invalid {
        /// The file.
        path: PathBuf,
        /// Where the field stands in the file (none for a scenario built in code).
        place: Option<Place>,
        /// JSON path of the field.
        field: String,
        /// What is wrong.
        message: String,
        /// What to do about it, when there is something to say.
        hint: Option<String>,
    },
    /// Well-formed, but the core it is to run on does not implement what it needs (a family,
    /// an approval gate, ...): skipped rather than failed by a caller that sweeps cores.
    Unsupported {
        /// The file.
        path: PathBuf,
        /// The core's name (`SystemUnderTest::name`).
        core: String,
        /// What the scenario needs and the core lacks.
        missing: Vec<&'static str>,
    },
}

impl ScenarioError {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            ScenarioError::Io { path, .. }
            | ScenarioError::Parse { path, .. }
            | ScenarioError::Invalid { path, .. }
            | ScenarioError::Unsupported { path, .. } => path,
        }
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (path, place, field, message, hint) = match self {
            ScenarioError::Io { path, message } => return write!(f, "{}: cannot read: {message}", path.display()),
            ScenarioError::Unsupported { path, core, missing } => {
                return write!(f, "{}: the core `{core}` does not implement {}", path.display(), missing.join(", "));
            }
            ScenarioError::Parse { path, line, column, field, message, hint } => {
                (path, Some(Place { line: *line, column: *column }), field, message, hint)
            }
            ScenarioError::Invalid { path, place, field, message, hint } => (path, *place, field, message, hint),
        };
        write!(f, "{}", path.display())?;
        if let Some(place) = place {
            write!(f, ":{place}")?;
        }
        write!(f, ": at `{field}`: {message}")?;
        if let Some(hint) = hint {
            write!(f, "; {hint}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ScenarioError {}

/// Something validation found wrong: the field's JSON path, what is wrong, and what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// JSON path of the field (`lanes[0].replies[2].calls[1].tool`), `.` for the top.
    pub field: String,
    /// What is wrong.
    pub message: String,
    /// What to do about it (`did you mean `Agent`?`, the accepted names), if anything.
    pub hint: Option<String>,
}

impl Problem {
    /// A problem at `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Problem {
        Problem { field: field.into(), message: message.into(), hint: None }
    }

    /// With a hint.
    pub fn hint(mut self, hint: impl Into<String>) -> Problem {
        self.hint = Some(hint.into());
        self
    }

    /// With a hint, if there is one.
    pub fn maybe_hint(mut self, hint: Option<String>) -> Problem {
        self.hint = hint;
        self
    }

    /// The error of file `path`; with the file's text, it names the line and column too.
    pub fn at(self, path: &Path, text: Option<&str>) -> ScenarioError {
        ScenarioError::Invalid {
            path: path.to_path_buf(),
            place: text.map(|text| place::locate(text.strip_prefix('\u{feff}').unwrap_or(text), &self.field)),
            field: self.field,
            message: self.message,
            hint: self.hint,
        }
    }
}

impl From<(String, String)> for Problem {
    fn from((field, message): (String, String)) -> Problem {
        Problem::new(field, message)
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at `{}`: {}", self.field, self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, "; {hint}")?;
        }
        Ok(())
    }
}

/// Parses scenario JSON; `path` only names the source in errors.
///
/// Notes for readers are taken out first: a `"$comment"` key holding a string in any object
/// (but inside a call's `args`, which are sent as written), and `"$schema"` at the top.
pub fn parse(path: &Path, json: &str) -> Result<Scenario, ScenarioError> {
    // A byte-order mark is accepted, as in profile files.
    let json = json.strip_prefix('\u{feff}').unwrap_or(json);
    // serde would read a top-level array as the struct's fields by position.
    let start = json.find(|c: char| !c.is_whitespace());
    if let Some(at) = start.filter(|at| !json[*at..].starts_with('{')) {
        let place = Place::of_offset(json, at);
        return Err(ScenarioError::Parse {
            path: path.to_path_buf(),
            line: place.line,
            column: place.column,
            field: ".".into(),
            message: "a scenario file holds one JSON object (`{ \"name\": …, \"lanes\": […], \"turns\": […] }`)".into(),
            hint: None,
        });
    }
    let json = place::without_notes(json);
    let parse_error = |e: serde_json::Error, field: String| {
        let message = e.to_string();
        // serde_json appends " at line L column C"; the place is printed in front instead.
        let message = message.rsplit_once(" at line ").map_or(message.clone(), |(m, _)| m.to_string());
        let place = Place::from_serde(&json, e.line(), e.column());
        ScenarioError::Parse {
            path: path.to_path_buf(),
            line: place.line,
            column: place.column,
            field,
            hint: suggest::hint_for_serde(&message),
            message,
        }
    };
    let de = &mut serde_json::Deserializer::from_str(&json);
    let scenario: Scenario = serde_path_to_error::deserialize(&mut *de).map_err(|e| {
        // A file of a newer format may use fields this version does not know: its version is
        // the error worth reporting, not the first field it does not know.
        if let Some(problem) = future_format(&json) {
            return problem.at(path, Some(&json));
        }
        let field = field_path(&e.path().to_string());
        parse_error(e.into_inner(), field)
    })?;
    // Anything after the scenario object (a stray brace, a second object) is an error too.
    de.end().map_err(|e| parse_error(e, ".".to_string()))?;
    validate(&scenario).map_err(|problem| problem.at(path, Some(&json)))?;
    Ok(scenario)
}

/// A JSON path without the `?` segments serde_path_to_error writes where a syntax error left
/// no key; `.` for the top.
fn field_path(path: &str) -> String {
    let kept: Vec<&str> = path.split('.').filter(|segment| *segment != "?" && !segment.is_empty()).collect();
    if kept.is_empty() { ".".to_string() } else { kept.join(".") }
}

/// Checks what types alone cannot: returns the first problem, with its field path and a hint.
pub fn validate(s: &Scenario) -> Result<(), Problem> {
    check_format(s.format.map(u64::from))?;
    let rules = s.rules.resolve();
    rules.validate().map_err(|m| Problem::new("rules", m.to_string()))?;
    validate_limits(s)?;
    if s.turns.is_empty() {
        return Err(Problem::new("turns", "a scenario needs at least one user turn")
            .hint(r#"add one: "turns": [{"user": "…"}]"#));
    }
    check_cited_ids(&s.description)?;
    // Places are spelled only for a problem: a `String` for each reply and call of every
    // file would cost more than the checks (the fuzzer validates every case it draws).
    let text = |place: &dyn fmt::Display, text: &Text| check_text(text, s.limits.max_text_chars, place);
    let ms = |place: &dyn fmt::Display, ms: u64| {
        if ms > MAX_VIRTUAL_MS {
            return Err(Problem::new(
                place.to_string(),
                format!(
                    "{ms} ms is longer than the longest virtual time a scenario may name ({MAX_VIRTUAL_MS} ms, ten years)"
                ),
            ));
        }
        Ok(())
    };
    for (i, turn) in s.turns.iter().enumerate() {
        if let Some(at) = turn.at_ms {
            ms(&format_args!("turns[{i}].at_ms"), at)?;
        }
        let e = &turn.expect;
        check_order_dependent(&e.order_dependent, &format!("turns[{i}].expect"))?;
        for (field, value) in [("message", &e.message), ("message_contains", &e.message_contains)] {
            if let Some(value) = value {
                text(&format_args!("turns[{i}].expect.{field}"), value)?;
            }
        }
    }
    for (i, steer) in s.steer.iter().enumerate() {
        ms(&format_args!("steer[{i}].at_ms"), steer.at_ms)?;
    }
    for (i, side) in s.session.side_requests.iter().enumerate() {
        if side.contains.is_empty() {
            return Err(Problem::new(
                format!("session.side_requests[{i}].contains"),
                "a side request needs a text to match: an empty one would take every request from its agent",
            )
            .hint(r#"name a text the runtime's own request holds, as "contains": "Write a title""#));
        }
        ms(&format_args!("session.side_requests[{i}].latency_ms"), side.latency_ms)?;
    }
    check_order_dependent(&s.expect.order_dependent, "expect")?;
    let mut declared = std::collections::BTreeSet::new();
    for (i, tool) in s.tools.iter().enumerate() {
        if tool.name.trim().is_empty() {
            return Err(Problem::new(format!("tools[{i}].name"), "a tool needs a name"));
        }
        if builtin::parameters(&tool.name).is_some() {
            return Err(Problem::new(
                format!("tools[{i}].name"),
                format!("`{}` is a built-in tool of the core", tool.name),
            )
            .hint("call it without declaring it"));
        }
        if !declared.insert(tool.name.as_str()) {
            return Err(Problem::new(format!("tools[{i}].name"), format!("tool `{}` is declared twice", tool.name)));
        }
        ms(&format_args!("tools[{i}].latency_ms"), tool.latency_ms)?;
        for (j, result) in tool.results.iter().enumerate() {
            if result.text.is_some() == result.error.is_some() {
                return Err(Problem::new(format!("tools[{i}].results[{j}]"), "give exactly one of `text` and `error`"));
            }
            for (field, value) in [("text", &result.text), ("error", &result.error)] {
                if let Some(value) = value {
                    text(&format_args!("tools[{i}].results[{j}].{field}"), value)?;
                }
            }
            if let Some(latency) = result.latency_ms {
                ms(&format_args!("tools[{i}].results[{j}].latency_ms"), latency)?;
            }
        }
    }
    // The files written into `profile_files` are read by the front door (`load`), which
    // owns the profile reader.
    for (i, profile) in s.profiles.iter().enumerate() {
        if profile.description.trim().is_empty() {
            return Err(Problem::new(format!("profiles[{i}].description"), "a profile needs a description"));
        }
        if let Some(seconds) = profile.timeout_seconds {
            check_seconds(seconds).map_err(|m| Problem::new(format!("profiles[{i}].timeout_seconds"), m))?;
        }
    }
    if s.lanes.is_empty() {
        return Err(Problem::new(
            "lanes",
            "a scenario needs at least one lane: the root asks the model at its first step",
        )
        .hint(r#"add the root's lane: {"agent": "main", "replies": [{"text": "…"}]}"#));
    }
    for (i, lane) in s.lanes.iter().enumerate() {
        let selectors = [&lane.agent, &lane.task_contains, &lane.profile].iter().filter(|s| s.is_some()).count();
        if selectors != 1 {
            return Err(Problem::new(
                format!("lanes[{i}]"),
                "give exactly one selector: `agent`, `task_contains` or `profile`",
            ));
        }
        if let Some(alias) = &lane.agent {
            check_alias(alias).map_err(|hint| {
                Problem::new(
                    format!("lanes[{i}].agent"),
                    format!(
                        "`{}` is not an agent alias: the root is `main`, its children `main/1`, `main/2`, … in spawn order, a grandchild `main/1/1`",
                        crate::trace::printable(alias)
                    ),
                )
                .maybe_hint(hint)
            })?;
        }
        if let Some(check) = &lane.check_every {
            validate_check(check, s.limits.max_text_chars, &format!("lanes[{i}].check_every"))?;
        }
        let lane_place = Indexed(&"", "lanes", i);
        for (j, reply) in lane.replies.iter().enumerate() {
            let place = Indexed(&lane_place, ".replies", j);
            ms(&format_args!("{place}.latency_ms"), reply.latency_ms)?;
            if let Some(value) = &reply.text {
                text(&format_args!("{place}.text"), value)?;
            }
            if let Some(check) = &reply.check {
                validate_check(check, s.limits.max_text_chars, &format!("{place}.check"))?;
            }
            if let Some(when) = &reply.when {
                check_when(when, s.limits.max_text_chars, &format!("{place}.when"))?;
            }
            if reply.calls.len() > s.limits.max_calls_per_reply {
                return Err(Problem::new(
                    format!("{place}.calls"),
                    format!(
                        "{} calls in one reply, more than limits.max_calls_per_reply ({}); raise the limit if you mean it",
                        reply.calls.len(),
                        s.limits.max_calls_per_reply
                    ),
                ));
            }
            let answers = reply.text.is_some() || !reply.calls.is_empty();
            if [answers, reply.error.is_some(), reply.hang].iter().filter(|b| **b).count() > 1 {
                return Err(Problem::new(
                    place.to_string(),
                    "a reply is text and/or calls, or an `error`, or a `hang`: not several",
                ));
            }
            if let Some(status) = reply.error_status
                && !(400..=599).contains(&status)
            {
                return Err(Problem::new(
                    format!("{place}.error_status"),
                    format!("{status} is not an HTTP error status; write one from 400 to 599"),
                ));
            }
            if reply.error.is_none() && (reply.error_status.is_some() || reply.error_type.is_some()) {
                let field = if reply.error_status.is_some() { "error_status" } else { "error_type" };
                return Err(Problem::new(format!("{place}.{field}"), "shapes an `error` reply; add `error`"));
            }
            if reply.drop_after_chunks.is_some() && !answers {
                return Err(Problem::new(
                    format!("{place}.drop_after_chunks"),
                    "breaks the stream of a reply with text and/or calls; this reply has neither",
                ));
            }
            for (k, call) in reply.calls.iter().enumerate() {
                let at = Indexed(&place, ".calls", k);
                let builtin = builtin::parameters(&call.tool).is_some();
                if !builtin && !declared.contains(call.tool.as_str()) && !call.undeclared {
                    let mut names: Vec<&str> = builtin::names().collect();
                    names.extend(declared.iter().copied());
                    let guess =
                        suggest::did_you_mean(&call.tool, names).map(|g| format!("{g} Otherwise ")).unwrap_or_default();
                    return Err(Problem::new(
                        format!("{at}.tool"),
                        format!("the script calls `{}`, which is not a declared tool", crate::trace::printable(&call.tool)),
                    )
                    .hint(format!(
                        "{guess}declare it under `tools`, or mark the call `\"undeclared\": true` to show the unknown-tool answer"
                    )));
                }
                if !builtin && !declared.contains(call.tool.as_str()) {
                    unknown_tool_answer(&rules.unknown_tool_message, &call.tool, s.limits.max_text_chars, at)?;
                }
                if !call.args.is_object() {
                    return Err(Problem::new(format!("{at}.args"), "arguments must be a JSON object"));
                }
                check_task_refs(&call.args, format_args!("{at}.args"))?;
                if builtin && !call.bad_args {
                    builtin::check_call(&call.tool, &call.args, at)?;
                }
            }
        }
    }
    Ok(())
}

/// A place in the file one index below another (`lanes[0]`, then `lanes[0].replies[2]`),
/// spelled only when a problem names it: [`validate`] passes one for every reply and call.
#[derive(Clone, Copy)]
struct Indexed<'a>(&'a dyn fmt::Display, &'static str, usize);

impl fmt::Display for Indexed<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}[{}]", self.0, self.1, self.2)
    }
}

/// Checks the profile names a scenario uses (a lane's `profile`, a `subagent` call's `agent`)
/// against the profiles it can use (`names`: inline ones and those of its profile folders,
/// known only once the folders are read).
pub fn check_profile_names<'a>(s: &Scenario, names: impl IntoIterator<Item = &'a str>) -> Result<(), Problem> {
    let names: Vec<&str> = names.into_iter().collect();
    let unknown = |field: String, name: &str, what: &str, opt_out: &str| {
        let known = if names.is_empty() {
            "The scenario has no profiles: declare them under `profiles` or in `profile_dirs`".to_string()
        } else {
            format!("Its profiles: {}", names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "))
        };
        let guess = did_you_mean(name, names.iter().copied()).map(|g| format!("{g} ")).unwrap_or_default();
        Problem::new(
            field,
            format!("{what} `{}`, which is not a profile of this scenario", crate::trace::printable(name)),
        )
        .hint(format!("{guess}{known}{opt_out}"))
    };
    for (i, lane) in s.lanes.iter().enumerate() {
        if let Some(profile) = &lane.profile
            && !names.contains(&profile.as_str())
        {
            let field = format!("lanes[{i}].profile");
            return Err(unknown(field, profile, "the lane selects children running profile", ""));
        }
        for (j, reply) in lane.replies.iter().enumerate() {
            for (k, call) in reply.calls.iter().enumerate() {
                let agent = call.args.get("agent").and_then(serde_json::Value::as_str);
                if call.tool == "subagent"
                    && !call.bad_args
                    && let Some(agent) = agent
                    && !names.contains(&agent)
                {
                    let field = format!("lanes[{i}].replies[{j}].calls[{k}].args.agent");
                    let opt_out =
                        "; mark the call `\"bad_args\": true` if the model names a missing profile on purpose";
                    return Err(unknown(field, agent, "the call asks for profile", opt_out));
                }
            }
        }
    }
    Ok(())
}

/// Whether `alias` is an agent alias (`main`, `main/2`, `main/1/3`); the error is a
/// suggestion, when one is near.
fn check_alias(alias: &str) -> Result<(), Option<String>> {
    let number = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) && !part.starts_with('0');
    let mut parts = alias.split('/');
    if parts.next() == Some("main") && parts.all(number) {
        return Ok(());
    }
    // The nearest alias: `main` for a slip of the root's name, separators made `/`, numbers
    // without leading zeros.
    let mut parts = alias.split(['/', '.', '\\', '-', '_', ' ']).filter(|p| !p.is_empty());
    let root = parts.next().unwrap_or_default();
    if suggest::nearest(root, ["main"]).is_none() && root != "main" {
        return Err(None);
    }
    let mut guess = String::from("main");
    for part in parts {
        let digits = part.trim_start_matches('0');
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(None);
        }
        guess.push('/');
        guess.push_str(digits);
    }
    Err(Some(format!("did you mean `{guess}`?")))
}

/// The texts of a request check, each within the text limit.
fn check_when(when: &When, max: usize, place: &str) -> Result<(), Problem> {
    for (field, texts) in [("contains", &when.contains), ("absent", &when.absent)] {
        for (i, value) in texts.iter().enumerate() {
            check_text(value, max, &format_args!("{place}.{field}[{i}]"))?;
        }
    }
    for (field, refs) in [("result_of", &when.result_of), ("no_result_of", &when.no_result_of)] {
        for (i, reference) in refs.iter().enumerate() {
            // The same spelling as in call arguments: no sign, no leading zero (issue 27:
            // `$task01` and `$task+1` were read as `$task1` here).
            if task_number(reference).is_none() {
                return Err(Problem::new(
                    format!("{place}.{field}[{i}]"),
                    format!(
                        "{} is not a task reference: write `$taskN`, the N-th task the run queued (from 1)",
                        crate::trace::quoted(reference)
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn check_order_dependent(reason: &Option<String>, place: &str) -> Result<(), Problem> {
    match reason {
        Some(reason) if reason.trim().is_empty() => Err(Problem::new(
            format!("{place}.order_dependent"),
            "say why it holds in the default tie order only: the reason is shown when explored orders skip it",
        )),
        _ => Ok(()),
    }
}

fn validate_check(check: &Check, max: usize, place: &str) -> Result<(), Problem> {
    check_order_dependent(&check.order_dependent, place)?;
    for (field, texts) in [("contains", &check.contains), ("absent", &check.absent)] {
        for (i, value) in texts.iter().enumerate() {
            check_text(value, max, &format_args!("{place}.{field}[{i}]"))?;
        }
    }
    for (field, value) in [("first_message", &check.first_message), ("last_message", &check.last_message)] {
        if let Some(value) = value {
            check_text(value, max, &format_args!("{place}.{field}"))?;
        }
    }
    if let Some(nth) = &check.nth_message {
        if nth.n == 0 {
            return Err(Problem::new(format!("{place}.nth_message.n"), "messages are counted from 1: the first is 1"));
        }
        check_text(&nth.text, max, &format_args!("{place}.nth_message.text"))?;
    }
    if let Some(recorded) = &check.recorded {
        for (i, pattern) in recorded.volatile.iter().enumerate() {
            if let Err(why) = volatile_regex(pattern) {
                return Err(Problem::new(
                    format!("{place}.recorded.volatile[{i}]"),
                    format!("not a regular expression: {why}"),
                ));
            }
        }
        let texts =
            recorded.system.iter().map(|s| ("system".to_string(), s)).chain(
                recorded.messages.iter().enumerate().map(|(i, m)| (format!("messages[{i}].content"), &m.content)),
            );
        for (field, text) in texts {
            if text.chars().count() > max {
                return Err(Problem::new(
                    format!("{place}.recorded.{field}"),
                    format!("the text is longer than limits.max_text_chars ({max})"),
                ));
            }
        }
    }
    Ok(())
}

/// The run limits themselves: each within what the harness can honour.
/// The problem with a file's `format`, if it has one this rehearsal cannot read.
fn check_format(format: Option<u64>) -> Result<(), Problem> {
    match format {
        None => Ok(()),
        Some(n) if (1..=u64::from(FORMAT)).contains(&n) => Ok(()),
        Some(0) => Err(Problem::new("format", "format versions start at 1")
            .hint(format!("write `\"format\": {FORMAT}` or leave the field out"))),
        Some(n) => Err(Problem::new(
            "format",
            format!("this file is written in scenario format {n}, but this rehearsal reads formats up to {FORMAT}"),
        )
        .hint(format!(
            "use a rehearsal that reads format {n} (docs/format-versions.md says what each version adds), or write the file in format {FORMAT}"
        ))),
    }
}

/// A future format in a file that did not parse: only its top-level `format` is read.
fn future_format(json: &str) -> Option<Problem> {
    #[derive(Deserialize)]
    struct Version {
        format: Option<serde_json::Value>,
    }
    let version: Version = serde_json::from_str(json).ok()?;
    let n = version.format?.as_u64()?;
    check_format(Some(n)).err().filter(|_| n > u64::from(FORMAT))
}

/// Every clause id the description cites (`core.budget.never-refunded`, or a whole area,
/// `bub.spawn.*`) is a clause of docs/rules/: a misspelt id would silently count for nothing,
/// so it is refused like a misspelt field.
fn check_cited_ids(description: &str) -> Result<(), Problem> {
    use crate::clauses::{citable_ids, cited_ids, is_citable};
    let Some((_, id)) = cited_ids(description).into_iter().find(|(_, id)| !is_citable(id)) else { return Ok(()) };
    // A cut-short id (`core.budget.pre-deduction`) is best answered by the id it starts.
    let extended = citable_ids().iter().filter(|c| c.starts_with(id)).min_by_key(|c| c.len());
    let hint = extended.map(|c| format!("did you mean `{c}`?"));
    let hint = hint.or_else(|| suggest::did_you_mean(id, citable_ids().iter().copied())).unwrap_or_else(|| {
        "clause ids are the bold list items of docs/rules/*.md; `rehearsal run --coverage-all` lists them".into()
    });
    Err(Problem::new(
        "description",
        format!("`{id}` is written as a rule clause id, but docs/rules/ has no such clause"),
    )
    .hint(hint))
}

fn validate_limits(s: &Scenario) -> Result<(), Problem> {
    let limits = &s.limits;
    if limits.max_events == 0 {
        return Err(Problem::new("limits.max_events", "must be at least 1"));
    }
    // No file lifts its own limits past the ceilings (issue 27: a 150-byte file that raised
    // `max_text_chars` asked for a 20 GB text).
    let ceilings = ceilings();
    for (field, value, ceiling) in [
        ("limits.max_events", limits.max_events, ceilings.max_events),
        ("limits.max_text_chars", limits.max_text_chars, ceilings.max_text_chars),
        ("limits.max_calls_per_reply", limits.max_calls_per_reply, ceilings.max_calls_per_reply),
    ] {
        if value > ceiling {
            return Err(Problem::new(
                field,
                format!("{value} is past the ceiling of {ceiling}, which no file can raise"),
            )
            .hint("`rehearsal run --raise-ceilings` raises every ceiling for one command, if a person means it"));
        }
    }
    if limits.horizon_ms == 0 || limits.horizon_ms > MAX_VIRTUAL_MS {
        return Err(Problem::new(
            "limits.horizon_ms",
            format!("must be from 1 to {MAX_VIRTUAL_MS} ms (ten years of virtual time)"),
        ));
    }
    if limits.max_depth > MAX_DEPTH {
        return Err(Problem::new("limits.max_depth", format!("must be at most {MAX_DEPTH}")));
    }
    let rules = s.rules.resolve();
    if rules.depth_limit > limits.max_depth {
        return Err(Problem::new(
            "rules.depth_limit",
            format!(
                "{} is deeper than limits.max_depth ({}): foreground children run inline, so each level nests; raise limits.max_depth (up to {MAX_DEPTH}) if you mean it",
                rules.depth_limit, limits.max_depth
            ),
        ));
    }
    for (knob, limit) in [
        ("rules.agent_timeout_ms", rules.agent_timeout),
        ("rules.subagent_default_timeout_ms", rules.subagent_default_timeout),
    ] {
        if let Some(limit) = limit
            && limit.as_millis() > u128::from(MAX_VIRTUAL_MS)
        {
            return Err(Problem::new(
                knob,
                format!("longer than the longest virtual time a scenario may name ({MAX_VIRTUAL_MS} ms)"),
            ));
        }
    }
    check_texts_total(s)
}

/// The answer the core makes to a call of an unknown tool is the rules' `unknown_tool_message`
/// with every `{name}` replaced by the tool's name: bounded here, at load, by the text limit,
/// since the core expands it (issue 27: `{name}` repeated, with long names, took 2.9 GB).
fn unknown_tool_answer(message: &str, tool: &str, max: usize, at: impl fmt::Display) -> Result<(), Problem> {
    let names = message.matches("{name}").count();
    let chars =
        (message.chars().count() - names * "{name}".len()).saturating_add(names.saturating_mul(tool.chars().count()));
    if chars > max {
        return Err(Problem::new(
            format!("{at}.tool"),
            format!(
                "the unknown-tool answer to this call (rules.unknown_tool_message with each {{name}} replaced by the tool's name) stands for {chars} characters, more than limits.max_text_chars ({max})"
            ),
        ));
    }
    Ok(())
}

/// A text's length in characters, without building it (`None` past `usize::MAX`).
fn text_chars(text: &Text) -> Option<usize> {
    match text {
        Text::Plain(s) => Some(s.chars().count()),
        Text::Repeat { repeat, count } => repeat.chars().count().checked_mul(*count),
        Text::Parts(parts) => parts.iter().try_fold(0usize, |sum, part| sum.checked_add(text_chars(part)?)),
    }
}

/// All the texts of the file's request checks (`check_every`, `check`, `when`) together stand
/// for at most `limits.max_text_chars` characters: each is searched for in every message of
/// every request it checks, so their sum, not only each one, sets the work of a request
/// (issue 27: 2,000 long `absent` texts in a 70 KB file ran past 30 s).
fn check_texts_total(s: &Scenario) -> Result<(), Problem> {
    fn of_check(check: &Check) -> impl Iterator<Item = &Text> {
        let ends = [&check.first_message, &check.last_message].into_iter().flatten();
        check.contains.iter().chain(&check.absent).chain(ends).chain(check.nth_message.iter().map(|n| &n.text))
    }
    let max = s.limits.max_text_chars;
    let mut total = 0usize;
    for (i, lane) in s.lanes.iter().enumerate() {
        let every = lane.check_every.iter().flat_map(of_check);
        let replies = lane.replies.iter().flat_map(|reply| {
            let whens = reply.when.iter().flat_map(|when| when.contains.iter().chain(&when.absent));
            reply.check.iter().flat_map(of_check).chain(whens)
        });
        for text in every.chain(replies) {
            total = total.saturating_add(text_chars(text).unwrap_or(usize::MAX));
            if total > max {
                return Err(Problem::new(
                    format!("lanes[{i}]"),
                    format!(
                        "the texts of the file's request checks stand for more than limits.max_text_chars ({max}) characters together; each is searched for in every request it checks"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// A text's length in characters, without building it, within `max` characters.
fn check_text(text: &Text, max: usize, place: &dyn fmt::Display) -> Result<(), Problem> {
    match text_chars(text) {
        Some(n) if n <= max => Ok(()),
        n => Err(Problem::new(
            place.to_string(),
            format!(
                "this text stands for {} characters, more than limits.max_text_chars ({max}); raise the limit if you mean it",
                n.map_or_else(|| "more than 2^64".to_string(), |n| n.to_string())
            ),
        )),
    }
}

/// A time limit in seconds given in a file (a profile's `timeout_seconds`).
pub(crate) fn check_seconds(seconds: f64) -> Result<(), String> {
    if !(seconds.is_finite() && seconds >= 0.0) {
        return Err(format!("must be a number of seconds, 0 or more (got {seconds})"));
    }
    if seconds > crate::rules::MAX_SECONDS {
        return Err(format!(
            "{seconds:e} s is longer than the longest limit a file may give ({} s)",
            crate::rules::MAX_SECONDS
        ));
    }
    Ok(())
}

/// A text of a check or an expectation with each `$taskN` in it (`$task` and a number from
/// 1) replaced by the N-th task id of `ids`. The error names the reference no id answers.
pub(crate) fn with_task_ids<'t>(text: &'t str, ids: &[String]) -> Result<std::borrow::Cow<'t, str>, String> {
    if !text.contains("$task") {
        return Ok(std::borrow::Cow::Borrowed(text));
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("$task") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "$task".len()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            out.push_str("$task");
        } else {
            let reference = &rest[at..at + "$task".len() + digits];
            let id = after[..digits].parse::<usize>().ok().and_then(|n| ids.get(n.checked_sub(1)?));
            out.push_str(id.ok_or_else(|| reference.to_string())?);
        }
        rest = &after[digits..];
    }
    out.push_str(rest);
    Ok(std::borrow::Cow::Owned(out))
}

/// A string argument that is a task reference, whitespace around it allowed: the whitespace
/// before, the `$task` reference itself, and the whitespace after (`" $task2\n"` is
/// `(" ", "$task2", "\n")`). `None` when the trimmed string does not start with `$task`.
pub(crate) fn task_reference(s: &str) -> Option<(&str, &str, &str)> {
    let body = s.trim();
    if !body.starts_with("$task") {
        return None;
    }
    let before = s.len() - s.trim_start().len();
    Some((&s[..before], body, &s[before + body.len()..]))
}

/// The N of a task reference `$taskN` (from 1: no sign, no leading zero, nothing after it).
pub(crate) fn task_number(reference: &str) -> Option<usize> {
    let number = reference.strip_prefix("$task")?;
    let digits = !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()) && !number.starts_with('0');
    number.parse::<usize>().ok().filter(|_| digits)
}

/// Every string in call arguments that starts with `$task` (after any whitespace) must be a
/// task reference, `$task1`, `$task2`, … (no sign, no leading zero, nothing after the number).
fn check_task_refs(args: &serde_json::Value, place: impl fmt::Display) -> Result<(), Problem> {
    use serde_json::Value;
    match args {
        Value::String(s) if let Some((_, reference, _)) = task_reference(s) => {
            if task_number(reference).is_some() {
                Ok(())
            } else {
                Err(Problem::new(
                    place.to_string(),
                    format!(
                        "{} is not a task reference: write $task1, $task2, … (the N-th task id the request shows)",
                        crate::trace::quoted(s)
                    ),
                ))
            }
        }
        Value::Array(items) => {
            items.iter().enumerate().try_for_each(|(i, v)| check_task_refs(v, format_args!("{place}[{i}]")))
        }
        Value::Object(map) => map.iter().try_for_each(|(k, v)| check_task_refs(v, format_args!("{place}.{k}"))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_references_may_have_whitespace_around_them() {
        assert_eq!(task_reference("$task2"), Some(("", "$task2", "")));
        assert_eq!(task_reference(" $task2\n"), Some((" ", "$task2", "\n")));
        assert_eq!(task_reference("\t$task01 "), Some(("\t", "$task01", " ")));
        assert_eq!(task_reference("sub-1 $task2"), None);
        assert_eq!(task_number("$task12"), Some(12));
        for bad in ["$task", "$task0", "$task01", "$task+1", "$task 1", "$task1x"] {
            assert_eq!(task_number(bad), None, "{bad}");
        }
        let args = serde_json::json!({"task_ids": ["$task1", " $task0\n"]});
        let problem = check_task_refs(&args, "calls[0].args").unwrap_err();
        assert_eq!(problem.field, "calls[0].args.task_ids[1]");
    }

    #[test]
    fn text_forms_render() {
        let t: Text = serde_json::from_str(r#"["a", {"repeat": "字", "count": 3}]"#).unwrap();
        assert_eq!(t.render(), "a字字字");
    }

    #[test]
    fn task_references_in_texts_are_replaced() {
        let ids = ["sub-1".to_string(), "sub-2".to_string()];
        assert_eq!(
            with_task_ids("delivered $task2 ok, $task1; $taskX", &ids).unwrap(),
            "delivered sub-2 ok, sub-1; $taskX"
        );
        assert_eq!(with_task_ids("$task3", &ids).unwrap_err(), "$task3");
        assert_eq!(with_task_ids("$task0", &ids).unwrap_err(), "$task0");
        assert_eq!(with_task_ids("plain", &ids).unwrap(), "plain");
    }

    #[test]
    fn explicit_null_turns_a_limit_off() {
        let r: RulesSpec = serde_json::from_str(r#"{"result_limit_chars": null}"#).unwrap();
        assert_eq!(r.resolve().result_limit_chars, None);
        let r: RulesSpec = serde_json::from_str("{}").unwrap();
        assert_eq!(r.resolve().result_limit_chars, Some(4000));
    }
}

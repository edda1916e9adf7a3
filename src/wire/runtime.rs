//! Runtime descriptions: what `rehearsal drive` must know of an agent runtime in another
//! process, as data. A [`RuntimeDescription`] names the [`Dialect`] its requests are read in
//! (the one place of runtime spelling), the environment that points it at the server, the
//! runtime's own limits (which the oracles judge against, since a scenario's `rules` knobs
//! cannot reach an outside runtime), and the scenario features it has, so that a scenario
//! needing more is skipped with a reason, as `Capabilities` does in process.
//!
//! The name is chosen so that it is not confused with agent *profiles* (what a child is told),
//! rule *presets* (the knobs of a family) or *dialects* (how requests are spelt): a
//! description is about starting and judging a process.
//!
//! API: [`RuntimeDescription::builtin`]`(name)` for `bub` (bub 0.5.1 from PyPI), `py-runtime`
//! (examples/py_runtime), `roku` and `generic`; [`RuntimeDescription::from_json`] and
//! [`RuntimeDescription::load`] for a user's own (docs/runtimes.md documents the format).
//!
//! What this module deliberately does not do: start a process (that is `drive`), or read a
//! request (that is the dialect's and the attribution's).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::dialect::Dialect;
pub use crate::oracles::model_side::{CheckedAt, LimitedAgents, RequestLimit, RequestScope};
use crate::scenario::{PresetName, Scenario};

/// What `rehearsal drive` knows of one runtime.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeDescription {
    /// Its name, for messages.
    pub name: String,
    /// The dialect its requests are read in: a built-in dialect's name (see
    /// [`crate::dialect::BUILTIN`]), a dialect file (relative to the description's folder), or
    /// the dialect itself, inline.
    pub dialect: DialectRef,
    /// The environment it is started with, by variable. In each value `{base_url}` stands for
    /// the server's base URL (`http://127.0.0.1:PORT/v1`), `{origin}` for it without `/v1`
    /// (`http://127.0.0.1:PORT`, what the `anthropic` SDKs take as `ANTHROPIC_BASE_URL`: they
    /// add `/v1/messages` themselves), `{model}` for the scenario's model
    /// (`session.model`, else `rehearsal`), `{home}` for the temp home and `{workdir}` for the
    /// working directory. `HOME` and `PATH` are set by drive (`HOME` to the temp home).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The rules family it implements: the preset its limits start from.
    pub preset: PresetName,
    /// Its own limits: the facts the oracles judge against, whatever a scenario's `rules` say.
    #[serde(default)]
    pub limits: RuntimeLimits,
    /// The scenario features it has.
    #[serde(default)]
    pub features: Features,
    /// The limits a scenario may set (`runtime_limits`), each by the environment variable the
    /// runtime reads it from: a knob of [`SETTABLE_KNOBS`] or a request limit's name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub settable: BTreeMap<String, String>,
    /// Model-side oracles that cannot judge this runtime, each with the reason (printed as a
    /// note on every scenario): their findings are left out of its verdicts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub oracles_off: Vec<OracleOff>,
    /// What a user should know about checking it (printed once per `drive`).
    #[serde(default)]
    pub note: Option<String>,
    /// The request header in which it names the agent sending each request, if it does: the
    /// ground truth rehearsal's attribution is measured against, never read to attribute.
    /// Default `{"name": "X-Rehearsal-Agent", "absent": "unlabelled"}`.
    #[serde(default)]
    pub agent_header: crate::wire::AgentHeader,
}

/// The dialect a description names: a built-in dialect by name, a dialect file, or one written
/// inline. A file is read when the description is ([`RuntimeDescription::from_json`]), relative
/// to the description's folder, and checked as `serve --runtime FILE` checks it.
#[derive(Clone, Debug, PartialEq)]
pub enum DialectRef {
    /// A built-in dialect's name.
    Builtin(String),
    /// A dialect file as written in the description, and the dialect read from it.
    File {
        /// The path as written.
        path: String,
        /// The dialect it holds.
        dialect: Box<Dialect>,
    },
    /// A dialect written inline, as a JSON object in the dialect file's form.
    Inline(Box<Dialect>),
}

impl DialectRef {
    /// The dialect itself.
    pub fn dialect(&self) -> Dialect {
        match self {
            DialectRef::Builtin(name) => Dialect::builtin(name).expect("checked when the description was made"),
            DialectRef::File { dialect, .. } | DialectRef::Inline(dialect) => (**dialect).clone(),
        }
    }
}

impl From<&str> for DialectRef {
    fn from(name: &str) -> DialectRef {
        DialectRef::Builtin(name.to_string())
    }
}

impl Serialize for DialectRef {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            DialectRef::Builtin(name) | DialectRef::File { path: name, .. } => s.serialize_str(name),
            DialectRef::Inline(dialect) => dialect.serialize(s),
        }
    }
}

/// A string is kept as a name (a file is read after parsing, where its folder is known); an
/// object is read as a dialect, its errors placed by line, column and field path.
impl<'de> Deserialize<'de> for DialectRef {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<DialectRef, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = DialectRef;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a built-in dialect's name, a dialect file's path, or a dialect object")
            }
            fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<DialectRef, E> {
                Ok(DialectRef::Builtin(name.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<DialectRef, A::Error> {
                Dialect::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(|d| DialectRef::Inline(Box::new(d)))
            }
        }
        d.deserialize_any(Visit)
    }
}

/// A model-side oracle a runtime's description turns off, and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OracleOff {
    /// Its name (`truncation`; one of `oracles::model_side::ORACLES`).
    pub oracle: String,
    /// Why it cannot judge this runtime.
    pub why: String,
}

/// A runtime's own limits; an absent field keeps the preset's value.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeLimits {
    /// The deepest an agent runs (the root is 0).
    #[serde(default)]
    pub depth_limit: Option<u32>,
    /// A child's hand-over longer than this many characters is cut or spilled; `null`: never.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub result_limit_chars: Option<Option<usize>>,
    /// The background children running at once.
    #[serde(default)]
    pub max_concurrency: Option<usize>,
    /// A background child's default time limit in milliseconds; `null`: none.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub subagent_default_timeout_ms: Option<Option<u64>>,
    /// The root's step budget per turn.
    #[serde(default)]
    pub root_step_budget: Option<u32>,
    /// Limits on the model requests it makes (openai-agents' `max_turns`, smolagents'
    /// `max_steps`, pydantic-ai's `request_limit`), judged by `oracle.model-side.requests`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub request_limits: Vec<RequestLimit>,
}

/// The limits a scenario may set: the knobs of [`RuntimeLimits`] with a single value.
/// `subagent_default_timeout_seconds` is the default time limit for a runtime that reads it in
/// seconds: the variable gets the seconds, the oracles judge the same limit in milliseconds.
pub const SETTABLE_KNOBS: [&str; 6] = [
    "depth_limit",
    "result_limit_chars",
    "max_concurrency",
    "subagent_default_timeout_ms",
    "subagent_default_timeout_seconds",
    "root_step_budget",
];

/// A field that may be written `null`: present, it is `Some` of what was written (`null`:
/// `Some(None)`, "none"); absent, `#[serde(default)]` leaves `None`, "keep the preset's".
/// Plain `Option<Option<_>>` would read `null` as absent.
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// The scenario features a runtime has. A scenario that needs one it lacks is skipped.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Features {
    /// The tools the model may be scripted to call (spawn tools, waits, catalogue tools). A
    /// scenario whose script calls any other tool (unless marked `undeclared`) is skipped;
    /// empty: any tool.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Agent profiles (`profiles`, `profile_files`).
    #[serde(default)]
    pub profiles: bool,
    /// Steering (`steer`).
    #[serde(default)]
    pub steering: bool,
    /// An approval gate other than auto-approve.
    #[serde(default)]
    pub approvals: bool,
    /// More than one user turn in one scenario (a session kept across runs of the command).
    #[serde(default = "yes")]
    pub turns: bool,
}

fn yes() -> bool {
    true
}

impl Default for Features {
    fn default() -> Features {
        Features { tools: Vec::new(), profiles: false, steering: false, approvals: false, turns: true }
    }
}

/// A runtime description that could not be read: which file or name, and what in it.
#[derive(Debug)]
pub enum RuntimeError {
    /// Neither a built-in name nor a `.json` file.
    UnknownRuntime {
        /// The name given.
        name: String,
        /// The built-in descriptions ([`BUILTIN`]).
        builtins: &'static [&'static str],
    },
    /// The `.json` file could not be read.
    Unreadable {
        /// The file.
        file: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a description in JSON (a syntax error, an unknown or missing field).
    NotADescription {
        /// The file.
        file: String,
        /// The line (from 1) the parser stopped at.
        line: usize,
        /// The column (from 1) the parser stopped at.
        column: usize,
        /// The field the parser was in, as a path (`limits.max_concurrency`).
        field: String,
        /// The parser's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// `oracles_off` names an oracle that is not a model-side oracle.
    UnknownOracle {
        /// The file.
        file: String,
        /// The name given.
        oracle: String,
        /// The model-side oracles.
        known: &'static [&'static str],
    },
    /// A request limit or a settable limit that cannot be used.
    BadLimit {
        /// The description's file.
        file: String,
        /// The field (`limits.request_limits[1].name`, `settable.max_turn`).
        field: String,
        /// What is wrong.
        why: String,
    },
    /// `dialect` names a file or holds a dialect that is not a good dialect.
    BadDialect {
        /// The description's file.
        file: String,
        /// What is wrong with the dialect (its own file, line and column where it has them).
        source: crate::dialect::DialectError,
    },
    /// `dialect` is neither a built-in dialect nor a `.json` file.
    UnknownDialect {
        /// The file.
        file: String,
        /// The name given.
        dialect: String,
        /// The built-in dialects.
        known: &'static [&'static str],
    },
}

impl std::fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RuntimeError::UnknownRuntime { name, builtins } => write!(
                f,
                "unknown runtime `{name}`: a built-in is one of {}, or give a description `.json` file",
                builtins.join(", ")
            ),
            RuntimeError::Unreadable { file, source } => write!(f, "{file}: cannot read: {source}"),
            RuntimeError::NotADescription { file, line, column, field, source } => {
                write!(f, "{file}:{line}:{column}: at `{field}`: {source}")
            }
            RuntimeError::UnknownOracle { file, oracle, known } => {
                write!(f, "{file}: oracles_off: `{oracle}` is not a model-side oracle (one of {})", known.join(", "))
            }
            RuntimeError::UnknownDialect { file, dialect, known } => write!(
                f,
                "{file}: dialect `{dialect}` is not a built-in dialect (one of {}) or a dialect `.json` file",
                known.join(", ")
            ),
            RuntimeError::BadDialect { file, source } => write!(f, "{file}: dialect: {source}"),
            RuntimeError::BadLimit { file, field, why } => write!(f, "{file}: at `{field}`: {why}"),
        }
    }
}

impl std::error::Error for RuntimeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RuntimeError::Unreadable { source, .. } => Some(source),
            RuntimeError::NotADescription { source, .. } => Some(&**source),
            RuntimeError::BadDialect { source, .. } => Some(source),
            RuntimeError::UnknownRuntime { .. }
            | RuntimeError::UnknownOracle { .. }
            | RuntimeError::UnknownDialect { .. }
            | RuntimeError::BadLimit { .. } => None,
        }
    }
}

/// The names of the built-in descriptions.
pub const BUILTIN: [&str; 7] = ["bub", "py-runtime", "roku", "generic", "pydantic-ai", "openai-agents", "smolagents"];

/// A framework's description as its example folder holds it (`examples/frameworks/NAME/`:
/// `runtime.json`, naming `dialect.json` beside it), compiled in so that `--runtime NAME`
/// needs no checkout; the files stay the one source.
fn framework(runtime: &str, dialect: &str) -> RuntimeDescription {
    let mut d: RuntimeDescription = serde_json::from_str(runtime).expect("a framework's runtime.json is a description");
    let DialectRef::Builtin(path) = &d.dialect else { panic!("a framework's runtime.json names its dialect file") };
    let dialect = Dialect::from_json(dialect, path).expect("a framework's dialect.json is a dialect");
    d.dialect = DialectRef::File { path: path.clone(), dialect: Box::new(dialect) };
    d
}

/// The server's origin: its base URL without the `/v1` the OpenAI SDKs take.
pub(crate) fn origin(base_url: &str) -> &str {
    base_url.strip_suffix("/v1").unwrap_or(base_url)
}

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

impl RuntimeDescription {
    /// A built-in description by name ([`BUILTIN`]).
    pub fn builtin(name: &str) -> Option<RuntimeDescription> {
        let openai = [("OPENAI_BASE_URL", "{base_url}"), ("OPENAI_API_KEY", "rehearsal")];
        Some(match name {
            // bub 0.5.1 as shipped on PyPI (docs/rules/bub-0.5.1.md): one synchronous
            // `subagent` tool, children cannot spawn. It never cuts a result: one of 16,384
            // bytes or more is spilt behind a handle, which the conformance scenarios' request
            // checks judge (the truncation oracle knows cuts, not spills), so no limit is
            // stated. Its model id is `openai:<id>`.
            "bub" => RuntimeDescription {
                name: "bub".into(),
                dialect: "bub-0.5.1".into(),
                env: env(&[
                    ("BUB_MODEL", "openai:{model}"),
                    ("BUB_API_BASE", "{base_url}"),
                    ("BUB_API_KEY", "rehearsal"),
                    ("BUB_HOME", "{home}/.bub"),
                    ("NO_COLOR", "1"),
                ]),
                preset: PresetName::Bub,
                limits: RuntimeLimits {
                    depth_limit: Some(1),
                    result_limit_chars: Some(None),
                    // Every call of a reply runs at once (`asyncio.gather`), with no cap.
                    max_concurrency: Some(usize::MAX),
                    subagent_default_timeout_ms: None,
                    root_step_budget: None,
                    request_limits: Vec::new(),
                },
                features: Features {
                    tools: Vec::new(),
                    profiles: false,
                    steering: false,
                    approvals: false,
                    turns: true,
                },
                oracles_off: vec![
                    OracleOff {
                        oracle: "truncation".into(),
                        why: "bub 0.5.1 never cuts a result; one of 16,384 bytes or more is spilt behind a handle, \
                              which the conformance scenarios' request checks judge (the oracle knows cuts only)"
                            .into(),
                    },
                    // The preset's budget rules are the core's: bub 0.5.1 counts no steps and
                    // grants none (docs/rules/bub-0.5.1.md, section 7), so three children of one
                    // reply would "spend" a root budget the runtime does not have.
                    OracleOff {
                        oracle: "budget".into(),
                        why: "bub 0.5.1 counts no steps and grants a child none; the step budget and grant rules \
                              do not apply to it"
                            .into(),
                    },
                ],
                note: None,
                agent_header: crate::wire::AgentHeader::default(),
                settable: BTreeMap::new(),
            },
            // examples/py_runtime: Bub's background family as docs/rules/bub.md writes it.
            "py-runtime" => RuntimeDescription {
                name: "py-runtime".into(),
                dialect: "bub".into(),
                // A budget of 60 (its default is 30) leaves room for five spawns of 1 + a grant
                // of 10 each; the limit below states the same number, as a fact to judge.
                env: env(&[openai[0], openai[1], ("PY_RUNTIME_MODEL", "{model}"), ("PY_RUNTIME_STEP_BUDGET", "60")]),
                preset: PresetName::Bub,
                limits: RuntimeLimits { depth_limit: Some(1), root_step_budget: Some(60), ..RuntimeLimits::default() },
                features: Features {
                    tools: names(&[
                        "subagent",
                        "subagent.wait",
                        "subagent.send",
                        "subagent.cancel",
                        "final_answer",
                        "ask_user",
                        "fail",
                        "fs_read",
                    ]),
                    profiles: false,
                    steering: false,
                    approvals: false,
                    turns: true,
                },
                oracles_off: Vec::new(),
                note: None,
                agent_header: crate::wire::AgentHeader::default(),
                // The limits a scenario (or `fuzz --runtime`) may set: each is an environment
                // variable of py_runtime's (examples/py_runtime/README.md).
                settable: env(&[
                    ("depth_limit", "PY_RUNTIME_DEPTH_LIMIT"),
                    ("max_concurrency", "BUB_SUBAGENT_MAX_CONCURRENCY"),
                    ("result_limit_chars", "PY_RUNTIME_RESULT_LIMIT_CHARS"),
                    ("root_step_budget", "PY_RUNTIME_STEP_BUDGET"),
                    ("subagent_default_timeout_seconds", "BUB_SUBAGENT_TIMEOUT_SECONDS"),
                ]),
            },
            "roku" => RuntimeDescription {
                name: "roku".into(),
                dialect: "roku".into(),
                env: env(&[
                    ("ROKU_OPENAI_BASE_URL", "{base_url}/chat/completions"),
                    ("ROKU_OPENAI_API_KEY", "rehearsal"),
                ]),
                preset: PresetName::Roku,
                limits: RuntimeLimits::default(),
                features: Features {
                    tools: Vec::new(),
                    profiles: true,
                    steering: false,
                    approvals: false,
                    turns: true,
                },
                oracles_off: Vec::new(),
                note: Some(
                    "roku: only Roku's wire format is checked (its provider posts to the full URL in \
                     ROKU_OPENAI_BASE_URL); this description was not run against Roku itself"
                        .into(),
                ),
                agent_header: crate::wire::AgentHeader::default(),
                settable: BTreeMap::new(),
            },
            "generic" => RuntimeDescription {
                name: "generic".into(),
                dialect: "generic".into(),
                env: env(&[openai[0], openai[1], ("OPENAI_MODEL", "{model}")]),
                preset: PresetName::Roku,
                limits: RuntimeLimits::default(),
                features: Features::default(),
                oracles_off: Vec::new(),
                note: None,
                agent_header: crate::wire::AgentHeader::default(),
                settable: BTreeMap::new(),
            },
            // pydantic-ai 2.78 agent delegation (docs/conformance/pydantic-ai.md).
            "pydantic-ai" => framework(
                include_str!("../../examples/frameworks/pydantic-ai/runtime.json"),
                include_str!("../../examples/frameworks/pydantic-ai/dialect.json"),
            ),
            // openai-agents 0.24 agents as tools and handoffs (docs/conformance/openai-agents.md).
            "openai-agents" => framework(
                include_str!("../../examples/frameworks/openai-agents/runtime.json"),
                include_str!("../../examples/frameworks/openai-agents/dialect.json"),
            ),
            // smolagents 1.26 managed agents (docs/conformance/smolagents.md).
            "smolagents" => framework(
                include_str!("../../examples/frameworks/smolagents/runtime.json"),
                include_str!("../../examples/frameworks/smolagents/dialect.json"),
            ),
            _ => return None,
        })
    }

    /// A description a user wrote, in the JSON form of [`RuntimeDescription`]; `file` names it
    /// in errors, which say line, column and the field.
    pub fn from_json(text: &str, file: &str) -> Result<RuntimeDescription, RuntimeError> {
        let de = &mut serde_json::Deserializer::from_str(text);
        let description: RuntimeDescription = serde_path_to_error::deserialize(de).map_err(|e| {
            let field = e.path().to_string();
            let inner = e.into_inner();
            RuntimeError::NotADescription {
                file: file.to_string(),
                line: inner.line(),
                column: inner.column(),
                field,
                source: Box::new(inner),
            }
        })?;
        for off in &description.oracles_off {
            if !crate::oracles::model_side::ORACLES.contains(&off.oracle.as_str()) {
                return Err(RuntimeError::UnknownOracle {
                    file: file.to_string(),
                    oracle: off.oracle.clone(),
                    known: &crate::oracles::model_side::ORACLES,
                });
            }
        }
        description.check_limits().map_err(|(field, why)| RuntimeError::BadLimit {
            file: file.to_string(),
            field,
            why,
        })?;
        let mut description = description;
        let bad = |source| RuntimeError::BadDialect { file: file.to_string(), source };
        match &description.dialect {
            DialectRef::Builtin(name) if Dialect::builtin(name).is_some() => {}
            DialectRef::Builtin(path) if path.ends_with(".json") => {
                let at = Path::new(file).parent().unwrap_or(Path::new("")).join(path);
                let dialect = Dialect::load(&at.to_string_lossy()).map_err(bad)?;
                description.dialect = DialectRef::File { path: path.clone(), dialect: Box::new(dialect) };
            }
            DialectRef::Builtin(name) => {
                return Err(RuntimeError::UnknownDialect {
                    file: file.to_string(),
                    dialect: name.clone(),
                    known: &crate::dialect::BUILTIN,
                });
            }
            DialectRef::File { dialect, .. } | DialectRef::Inline(dialect) => {
                dialect.check(&format!("{file} (its inline dialect)")).map_err(bad)?;
            }
        }
        Ok(description)
    }

    /// A built-in name, or a `.json` file.
    pub fn load(name_or_path: &str) -> Result<RuntimeDescription, RuntimeError> {
        if let Some(d) = RuntimeDescription::builtin(name_or_path) {
            return Ok(d);
        }
        if !name_or_path.ends_with(".json") {
            return Err(RuntimeError::UnknownRuntime { name: name_or_path.to_string(), builtins: &BUILTIN });
        }
        let text = std::fs::read_to_string(Path::new(name_or_path))
            .map_err(|source| RuntimeError::Unreadable { file: name_or_path.to_string(), source })?;
        RuntimeDescription::from_json(&text, name_or_path)
    }

    /// The request limits and settable names checked against each other: a request limit
    /// allows at least one request and names itself once; a settable name is a knob or a request
    /// limit's name, set by a variable a process can be given. The error names the field.
    fn check_limits(&self) -> Result<(), (String, String)> {
        let limits = &self.limits.request_limits;
        for (i, limit) in limits.iter().enumerate() {
            let at = |f: &str| format!("limits.request_limits[{i}].{f}");
            if limit.name.trim().is_empty() {
                return Err((at("name"), "a request limit needs the runtime's name for it".into()));
            }
            if limits[..i].iter().any(|l| l.name == limit.name) || SETTABLE_KNOBS.contains(&limit.name.as_str()) {
                return Err((at("name"), format!("`{}` names another limit too", limit.name)));
            }
            if limit.requests == 0 {
                return Err((at("requests"), "a limit of 0 requests lets no run start; the least is 1".into()));
            }
        }
        for (name, var) in &self.settable {
            let known = SETTABLE_KNOBS.contains(&name.as_str()) || limits.iter().any(|l| &l.name == name);
            if !known {
                let mut names: Vec<&str> = SETTABLE_KNOBS.to_vec();
                names.extend(limits.iter().map(|l| l.name.as_str()));
                return Err((
                    format!("settable.{name}"),
                    format!(
                        "`{name}` is neither a limit knob nor a request limit's name (one of {})",
                        names.join(", ")
                    ),
                ));
            }
            if var.is_empty() || var.contains('=') || var.contains('\0') {
                return Err((format!("settable.{name}"), format!("{var:?} is not an environment variable's name")));
            }
        }
        Ok(())
    }

    /// This description as one scenario starts the runtime: each of the scenario's
    /// `runtime_limits` set in its variable (`settable`) and in the limits judged, with a note
    /// each. A limit the description cannot set is among [`missing`](Self::missing)'s.
    pub fn started_for(&self, scenario: &Scenario) -> (RuntimeDescription, Vec<String>) {
        let mut started = self.clone();
        let mut notes = Vec::new();
        for (name, value) in &scenario.runtime_limits {
            let Some(var) = self.settable.get(name) else { continue };
            started.env.insert(var.clone(), value.to_string());
            let l = &mut started.limits;
            let set = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
            match name.as_str() {
                "depth_limit" => l.depth_limit = Some(set(*value)),
                "result_limit_chars" => l.result_limit_chars = Some(Some(*value as usize)),
                "max_concurrency" => l.max_concurrency = Some(*value as usize),
                "subagent_default_timeout_ms" => l.subagent_default_timeout_ms = Some(Some(*value)),
                "subagent_default_timeout_seconds" => {
                    l.subagent_default_timeout_ms = Some(Some(value.saturating_mul(1000)));
                }
                "root_step_budget" => l.root_step_budget = Some(set(*value)),
                _ => {
                    if let Some(limit) = l.request_limits.iter_mut().find(|r| &r.name == name) {
                        limit.requests = set(*value);
                    }
                }
            }
            notes.push(format!(
                "runtime_limits.{name} = {value}: the runtime is started with {var}={value} and judged with it"
            ));
        }
        (started, notes)
    }

    /// The dialect its requests are read in.
    pub fn dialect(&self) -> Dialect {
        self.dialect.dialect()
    }

    /// The environment for one scenario, every placeholder filled (`{origin}`: `base_url`
    /// without its `/v1`).
    pub fn env_for(&self, base_url: &str, model: &str, home: &Path, workdir: &Path) -> Vec<(String, String)> {
        self.env
            .iter()
            .map(|(k, v)| {
                let v = v
                    .replace("{base_url}", base_url)
                    .replace("{origin}", origin(base_url))
                    .replace("{model}", model)
                    .replace("{home}", &home.to_string_lossy())
                    .replace("{workdir}", &workdir.to_string_lossy());
                (k.clone(), v)
            })
            .collect()
    }

    /// Why `scenario` cannot be run on this runtime, if it cannot: each feature it needs and
    /// the runtime lacks.
    pub fn missing(&self, scenario: &Scenario) -> Vec<String> {
        let f = &self.features;
        let mut out = Vec::new();
        if !f.steering && !scenario.steer.is_empty() {
            out.push("steering (`steer`)".to_string());
        }
        if !f.profiles && (!scenario.profiles.is_empty() || !scenario.profile_files.is_empty()) {
            out.push("agent profiles".to_string());
        }
        if !f.approvals && scenario.approval.mode != crate::scenario::GateMode::Auto {
            out.push("an approval gate".to_string());
        }
        if !f.turns && scenario.turns.len() > 1 {
            out.push("more than one turn".to_string());
        }
        for name in scenario.runtime_limits.keys().filter(|n| !self.settable.contains_key(*n)) {
            out.push(format!("`runtime_limits.{name}` (the description sets no variable for it)"));
        }
        if !f.tools.is_empty() {
            let mut unknown: Vec<&str> = scenario
                .lanes
                .iter()
                .flat_map(|l| &l.replies)
                .flat_map(|r| &r.calls)
                .filter(|c| !c.undeclared && !f.tools.contains(&c.tool))
                .map(|c| c.tool.as_str())
                .collect();
            unknown.sort_unstable();
            unknown.dedup();
            for tool in unknown {
                out.push(format!("the tool `{tool}`"));
            }
        }
        out
    }

    /// `scenario` with this runtime's preset and limits in place of its `rules` (which cannot
    /// reach an outside runtime; a limit the description does not state is its preset's), and
    /// a sentence for each knob the file set that was replaced.
    pub fn judged_as(&self, scenario: &Scenario) -> (Scenario, Vec<String>) {
        let mut judged = scenario.clone();
        let mut notes = Vec::new();
        let given = scenario.rules.clone();
        let l = &self.limits;
        let mut rules = crate::scenario::RulesSpec { preset: self.preset, ..Default::default() };
        rules.depth_limit = l.depth_limit;
        rules.result_limit_chars = l.result_limit_chars;
        rules.max_concurrency = l.max_concurrency;
        rules.subagent_default_timeout_ms = l.subagent_default_timeout_ms;
        rules.root_step_budget = l.root_step_budget;
        if given.preset != rules.preset {
            notes
                .push(format!("rules.preset {:?} is judged as {:?}, the runtime's family", given.preset, rules.preset));
        }
        let knobs = [
            ("depth_limit", given.depth_limit.is_some()),
            ("result_limit_chars", given.result_limit_chars.is_some()),
            ("max_concurrency", given.max_concurrency.is_some()),
            ("subagent_default_timeout_ms", given.subagent_default_timeout_ms.is_some()),
            ("root_step_budget", given.root_step_budget.is_some()),
            ("recovery_budget", given.recovery_budget.is_some()),
            ("child_step_cap", given.child_step_cap.is_some()),
            ("spawn_cost", given.spawn_cost.is_some()),
            ("agent_timeout_ms", given.agent_timeout_ms.is_some()),
            ("unknown_tool_message", given.unknown_tool_message.is_some()),
            ("agent_tool", given.agent_tool.is_some()),
            ("subagent_tools", given.subagent_tools.is_some()),
        ];
        for (knob, set) in knobs {
            if set {
                notes.push(format!("rules.{knob}: does not reach runtime `{}`; its own limits are judged", self.name));
            }
        }
        judged.rules = rules;
        (judged, notes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every built-in reads its dialect (a framework's from the file beside its example's
    /// description) and passes the checks a user's description does; a framework's is its
    /// example's files, read as a user would read them.
    #[test]
    fn every_builtin_has_a_dialect_and_passes_a_users_checks() {
        for name in BUILTIN {
            let d = RuntimeDescription::builtin(name).expect("listed");
            assert_eq!(d.name, name);
            let _ = d.dialect();
            let text = serde_json::to_string(&d).unwrap();
            let file = match &d.dialect {
                DialectRef::File { .. } => format!("examples/frameworks/{name}/runtime.json"),
                _ => name.to_string(),
            };
            assert_eq!(RuntimeDescription::from_json(&text, &file).unwrap(), d, "{name}");
            if let DialectRef::File { .. } = &d.dialect {
                assert_eq!(RuntimeDescription::load(&file).unwrap(), d, "{name}: the example's own files");
            }
        }
    }

    #[test]
    fn the_bub_env_template_fills_base_url_and_model() {
        let d = RuntimeDescription::builtin("bub").unwrap();
        let env = d.env_for("http://127.0.0.1:9/v1", "m1", Path::new("/h"), Path::new("/w"));
        assert!(env.contains(&("BUB_MODEL".into(), "openai:m1".into())));
        assert!(env.contains(&("BUB_API_BASE".into(), "http://127.0.0.1:9/v1".into())));
        let roku = RuntimeDescription::builtin("roku").unwrap();
        let mut claude = roku.clone();
        claude.env = super::env(&[("ANTHROPIC_BASE_URL", "{origin}")]);
        let origin = claude.env_for("http://x/v1", "m", Path::new("/h"), Path::new("/w"));
        assert_eq!(origin, [("ANTHROPIC_BASE_URL".to_string(), "http://x".to_string())]);
        let env = roku.env_for("http://x/v1", "m", Path::new("/h"), Path::new("/w"));
        assert!(env.contains(&("ROKU_OPENAI_BASE_URL".into(), "http://x/v1/chat/completions".into())));
    }

    #[test]
    fn a_user_description_round_trips_and_a_bad_field_names_its_place() {
        let d = RuntimeDescription::builtin("py-runtime").unwrap();
        let text = serde_json::to_string_pretty(&d).unwrap();
        assert_eq!(RuntimeDescription::from_json(&text, "d.json").unwrap(), d);
        let bad = RuntimeDescription::from_json(
            "{\"name\":\"x\",\"dialect\":\"generic\",\"preset\":\"bub\",\n \"limts\":{}}",
            "d.json",
        )
        .unwrap_err();
        assert!(bad.to_string().starts_with("d.json:2:"), "{bad}");
        assert!(bad.to_string().contains("limts"), "{bad}");
        let RuntimeError::NotADescription { file, line, column, field, .. } = &bad else { panic!("{bad:?}") };
        assert_eq!((file.as_str(), *line, *column, field.as_str()), ("d.json", 2, 8, "limts"), "{bad}");
        assert!(std::error::Error::source(&bad).is_some());
        let deep = RuntimeDescription::from_json(
            "{\"name\":\"x\",\"dialect\":\"generic\",\"preset\":\"bub\",\"limits\":{\"max_concurency\":1}}",
            "d.json",
        )
        .unwrap_err();
        assert!(
            matches!(&deep, RuntimeError::NotADescription { field, .. } if field == "limits.max_concurency"),
            "{deep:?}"
        );
        let dialect =
            RuntimeDescription::from_json("{\"name\":\"x\",\"dialect\":\"nope\",\"preset\":\"bub\"}", "d.json")
                .unwrap_err();
        assert!(dialect.to_string().contains("`nope` is not a built-in dialect"), "{dialect}");
        assert!(dialect.to_string().contains("or a dialect `.json` file"), "{dialect}");
        assert!(matches!(&dialect, RuntimeError::UnknownDialect { dialect, .. } if dialect == "nope"), "{dialect:?}");
        let off = RuntimeDescription::from_json(
            "{\"name\":\"x\",\"dialect\":\"bub\",\"preset\":\"bub\",\"oracles_off\":[{\"oracle\":\"trunc\",\"why\":\"w\"}]}",
            "d.json",
        )
        .unwrap_err();
        assert!(off.to_string().contains("`trunc` is not a model-side oracle"), "{off}");
        let RuntimeError::UnknownOracle { oracle, known, .. } = &off else { panic!("{off:?}") };
        assert_eq!(oracle, "trunc");
        assert_eq!(*known, &crate::oracles::model_side::ORACLES[..]);
    }

    #[test]
    fn an_agent_header_no_request_can_carry_is_refused_where_it_is_written() {
        // A name HTTP does not allow is never found on a request: under `absent: root` every
        // sub-agent's request would read as the root's, a false attribution error each.
        for name in ["X Agent", "", "X-Agent:", "X-Agént"] {
            let text = format!(
                "{{\"name\":\"x\",\"dialect\":\"bub\",\"preset\":\"bub\",\"agent_header\":{{\"name\":{},\"absent\":\"root\"}}}}",
                serde_json::to_string(name).unwrap()
            );
            let err = RuntimeDescription::from_json(&text, "d.json").unwrap_err();
            assert!(
                matches!(&err, RuntimeError::NotADescription { field, .. } if field == "agent_header.name"),
                "{name:?}: {err:?}"
            );
            assert!(err.to_string().contains("not a header name a request can carry"), "{err}");
        }
        let text = "{\"name\":\"x\",\"dialect\":\"bub\",\"preset\":\"bub\",\"agent_header\":{\"name\":\"x-agent-ID\"}}";
        let d = RuntimeDescription::from_json(text, "d.json").unwrap();
        assert_eq!(
            d.agent_header,
            crate::wire::AgentHeader {
                name: "x-agent-ID".into(),
                absent: crate::wire::Absent::Unlabelled,
                reused: false
            }
        );
    }

    /// `dialect` as a file beside the description (read relative to its folder, not the
    /// current one) and inline; each bad form is refused where it is written.
    #[test]
    fn a_dialect_may_be_a_file_beside_the_description_or_inline() {
        let dir = tempfile::tempdir().unwrap();
        let generic = serde_json::to_string_pretty(&Dialect::builtin("generic").unwrap()).unwrap();
        let mine = generic.replace("spawn_agent", "delegate");
        std::fs::create_dir(dir.path().join("d")).unwrap();
        std::fs::write(dir.path().join("d/mine.json"), &mine).unwrap();
        let file = dir.path().join("runtime.json");
        let text = r#"{"name": "x", "dialect": "d/mine.json", "preset": "roku"}"#;
        std::fs::write(&file, text).unwrap();
        let d = RuntimeDescription::load(&file.to_string_lossy()).unwrap();
        assert_eq!(d.dialect().spawn[0].name, "delegate");
        assert!(matches!(&d.dialect, DialectRef::File { path, .. } if path == "d/mine.json"));
        // Written back, the file is named as it was written.
        assert!(serde_json::to_string(&d).unwrap().contains(r#""dialect":"d/mine.json""#));

        let inline = format!(r#"{{"name": "x", "preset": "roku", "dialect": {mine}}}"#);
        let d = RuntimeDescription::from_json(&inline, "r.json").unwrap();
        assert_eq!(d.dialect().spawn[0].name, "delegate");
        let again = serde_json::to_string(&d).unwrap();
        assert_eq!(RuntimeDescription::from_json(&again, "r.json").unwrap(), d, "an inline dialect round-trips");

        let typo = "{\"name\": \"x\", \"preset\": \"roku\",\n \"dialect\": {\"name\": \"d\", \"spwn\": []}}";
        let err = RuntimeDescription::from_json(typo, "r.json").unwrap_err();
        let RuntimeError::NotADescription { line, field, .. } = &err else { panic!("{err:?}") };
        assert_eq!((*line, field.as_str()), (2, "dialect.spwn"), "{err}");

        let no_spawn = r#"{"name": "x", "preset": "roku", "dialect": {"name": "d", "spawn": []}}"#;
        let err = RuntimeDescription::from_json(no_spawn, "r.json").unwrap_err();
        assert!(matches!(&err, RuntimeError::BadDialect { .. }), "{err:?}");
        assert!(err.to_string().contains("`spawn` names no tool"), "{err}");

        std::fs::write(&file, r#"{"name": "x", "dialect": "missing.json", "preset": "roku"}"#).unwrap();
        let err = RuntimeDescription::load(&file.to_string_lossy()).unwrap_err();
        assert!(matches!(&err, RuntimeError::BadDialect { .. }), "{err:?}");
        assert!(err.to_string().contains("missing.json"), "{err}");
        std::fs::write(dir.path().join("d/bad.json"), "{\"name\": \"d\",\n  \"spawn\": 3}").unwrap();
        std::fs::write(&file, r#"{"name": "x", "dialect": "d/bad.json", "preset": "roku"}"#).unwrap();
        let err = RuntimeDescription::load(&file.to_string_lossy()).unwrap_err();
        assert!(err.to_string().contains("d/bad.json:2:"), "the dialect file's own line: {err}");
    }

    /// A scenario's `runtime_limits` reach the runtime through the variables the description
    /// names, and the run is judged with them; a limit it cannot set skips the scenario.
    #[test]
    fn a_scenario_sets_the_limits_the_description_makes_settable() {
        let text = r#"{"name": "fw", "dialect": "generic", "preset": "roku",
            "env": {"OPENAI_BASE_URL": "{base_url}"},
            "limits": {"request_limits": [{"name": "request_limit", "requests": 50, "scope": "shared"}]},
            "settable": {"request_limit": "FW_REQUEST_LIMIT", "max_concurrency": "FW_CAP"}}"#;
        let d = RuntimeDescription::from_json(text, "fw.json").unwrap();
        let scenario: Scenario = serde_json::from_str(
            r#"{"name":"s","runtime_limits":{"request_limit":4,"max_concurrency":2},"lanes":[],"turns":[]}"#,
        )
        .unwrap();
        assert!(d.missing(&scenario).is_empty());
        let (started, notes) = d.started_for(&scenario);
        assert_eq!(started.limits.request_limits[0].requests, 4);
        assert_eq!(started.limits.max_concurrency, Some(2));
        let env = started.env_for("http://b/v1", "m", Path::new("/h"), Path::new("/w"));
        assert!(env.contains(&("FW_REQUEST_LIMIT".into(), "4".into())), "{env:?}");
        assert!(env.contains(&("FW_CAP".into(), "2".into())), "{env:?}");
        assert!(notes.iter().any(|n| n.contains("started with FW_REQUEST_LIMIT=4 and judged with it")), "{notes:?}");
        assert_eq!(d.limits.request_limits[0].requests, 50, "the description itself is unchanged");
        let other: Scenario =
            serde_json::from_str(r#"{"name":"s","runtime_limits":{"max_turns":3},"lanes":[],"turns":[]}"#).unwrap();
        assert_eq!(d.missing(&other), ["`runtime_limits.max_turns` (the description sets no variable for it)"]);
    }

    #[test]
    fn a_request_limit_or_settable_name_that_cannot_be_used_is_refused_where_written() {
        let with = |limits: &str, settable: &str| {
            let text = format!(
                r#"{{"name": "fw", "dialect": "generic", "preset": "roku", "limits": {{"request_limits": [{limits}]}}, "settable": {{{settable}}}}}"#
            );
            RuntimeDescription::from_json(&text, "fw.json").map(|_| ()).map_err(|e| e.to_string())
        };
        let limit = r#"{"name": "max_turns", "requests": 10, "scope": "run"}"#;
        assert_eq!(with(limit, r#""max_turns": "MAX_TURNS""#), Ok(()));
        let err = with(r#"{"name": "max_turns", "requests": 0, "scope": "run"}"#, "").unwrap_err();
        assert!(err.starts_with("fw.json: at `limits.request_limits[0].requests`: a limit of 0"), "{err}");
        let err = with(&format!("{limit}, {limit}"), "").unwrap_err();
        assert!(err.contains("limits.request_limits[1].name") && err.contains("names another limit"), "{err}");
        let err = with(limit, r#""max_turn": "X""#).unwrap_err();
        assert!(err.contains("at `settable.max_turn`") && err.contains("one of depth_limit"), "{err}");
        assert!(err.contains("max_turns"), "the request limit is among the names: {err}");
        let err = with(limit, r#""max_turns": "A=B""#).unwrap_err();
        assert!(err.contains("not an environment variable's name"), "{err}");
        let err = with(r#"{"name": "max_turns", "requests": 3, "scope": "session"}"#, "").unwrap_err();
        assert!(err.contains("limits.request_limits[0].scope") && err.contains("`agent`, `run`, `shared`"), "{err}");
    }

    #[test]
    fn an_unknown_runtime_and_an_unreadable_file_say_which() {
        let err = RuntimeDescription::load("nope").unwrap_err();
        assert!(
            matches!(&err, RuntimeError::UnknownRuntime { name, builtins } if name == "nope" && *builtins == &BUILTIN[..])
        );
        assert_eq!(
            err.to_string(),
            "unknown runtime `nope`: a built-in is one of bub, py-runtime, roku, generic, pydantic-ai, openai-agents, smolagents, or give a description `.json` file"
        );
        let err = RuntimeDescription::load("no/such/runtime.json").unwrap_err();
        let RuntimeError::Unreadable { file, source } = &err else { panic!("{err:?}") };
        assert_eq!(file, "no/such/runtime.json");
        assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        assert!(err.to_string().starts_with("no/such/runtime.json: cannot read: "), "{err}");
    }

    #[test]
    fn the_runtime_limits_replace_the_scenarios_rules_and_say_so() {
        let scenario: Scenario = serde_json::from_str(
            r#"{"name":"s","rules":{"preset":"roku","max_concurrency":9,"child_step_cap":3},"lanes":[],"turns":[]}"#,
        )
        .unwrap();
        let d = RuntimeDescription::builtin("py-runtime").unwrap();
        let (judged, notes) = d.judged_as(&scenario);
        assert_eq!(judged.rules.preset, PresetName::Bub);
        assert_eq!(judged.rules.root_step_budget, Some(60));
        assert_eq!(judged.rules.max_concurrency, None, "a limit the runtime does not state is its preset's");
        assert_eq!(judged.rules.child_step_cap, None);
        assert!(
            notes.iter().any(|n| n.contains("rules.max_concurrency: does not reach runtime `py-runtime`")),
            "{notes:?}"
        );
    }
}

//! The scenario file format: JSON, unknown fields rejected, documented in
//! `docs/scenarios.md`.
//!
//! A scenario holds the rules, the simulated tools, the scripted lanes of the mock LLM, the
//! user turns and what must come out. This module parses and validates; it does not run
//! anything. Every error names the file and the place (line and column for syntax and type
//! errors, the field path for both), never panics, and is a value the CLI maps to exit 2.

mod builder;
mod builtin;
mod error;
mod format;
mod lanes;
mod limits;
mod parse;
pub mod place;
mod recorded;
mod schema;
mod suggest;
mod task_refs;
mod text;
mod tools;
mod validate;
mod version;
mod vocabulary;

pub use crate::sut::approval::GateMode;
pub use builder::ScenarioBuilder;
pub use error::{Problem, ScenarioError};
pub use format::{
    Answer, ApprovalSpec, Expect, PresetName, ProfileDirs, ProfileSpec, RulesSpec, Scenario, SessionSpec, SideRequest,
    Steer, Turn, TurnExpect,
};
pub use lanes::{Call, Check, Lane, NthMessage, Reply, ReplyFn, When};
pub use limits::{CEILINGS, Ceilings, Limits, MAX_DEPTH, MAX_VIRTUAL_MS, ceilings, lower_ceilings, raise_ceilings};
pub use parse::{parse, parse_with};
pub use place::Place;
pub(crate) use recorded::volatile_regex;
pub use recorded::{RecordedCall, RecordedMessage, RecordedRequest, RecordedRole, VOLATILE_PATTERN_MAX_BYTES};
pub use schema::schema;
#[cfg(feature = "profile-files")]
pub(crate) use suggest::hint_for_serde;
pub(crate) use suggest::{did_you_mean, nearest as nearest_name};
pub(crate) use task_refs::with_task_ids;
pub(crate) use task_refs::{task_number, task_reference};
pub use text::Text;
#[cfg(feature = "wire")]
pub(crate) use tools::builtin_call_fits;
pub use tools::{RiskTag, ToolFn, ToolResult, ToolSpec};
pub(crate) use validate::check_seconds;
pub use validate::{check_profile_names, validate, validate_with};
pub use version::FORMAT;
pub use vocabulary::Vocabulary;

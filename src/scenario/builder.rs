//! Building scenarios in code: `Scenario::builder` and the small constructors of its parts.
//!
//! A built scenario is validated as a file is (by `validate`); this module adds no checks of
//! its own and reads no files.

use std::path::Path;

use crate::sut::event::{OutcomeKind, Status};

use super::error::ScenarioError;
use super::format::{ApprovalSpec, PresetName, ProfileSpec, RulesSpec, Scenario, SessionSpec, Steer, Turn};
use super::lanes::{Call, Check, Lane, Reply, ReplyFn};
use super::limits::Limits;
use super::text::Text;
use super::tools::{RiskTag, ToolFn, ToolResult, ToolSpec};
use super::validate::validate;

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

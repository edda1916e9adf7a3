//! TinyRoku: a second, small orchestration core, written from `docs/rules/roku.md`,
//! `docs/rules/core.md` and the evidence contract (`docs/evidence.md`) only, and driven
//! through the public boundary (`rehearsal::sut`). It never looks at the built-in core.
//!
//! It is foreground-only: Roku's agent loop and its `Agent` sub-agent, the auto gate and
//! Roku's risk-based gate. No background `subagent` family, no steering.
//!
//! Shape, in reading order:
//! - [`TinyRoku`] is the `SystemUnderTest`; [`Bug`] switches on one deliberate rule bug.
//! - [`Kit`] is what every agent of one session shares (rules, context, model, tools, gate,
//!   observer), built once per session.
//! - [`Agent`] is one loop: one agent serving one goal. The root gets a fresh one per user
//!   turn (history, child numbering and call ids carried over); a child gets one per `Agent`
//!   call and lives inside that call.
//! - [`Gate`] is the approval gate, handed by reference to every loop of a session.
//!
//! Call ids are TinyRoku's own by default ([`CallIds::Own`]): whatever id the model gives a
//! call, the loop renames it `c1`, `c2`, ... (counted per agent) in the assistant message it
//! keeps and in the result it appends. `docs/evidence.md` says call ids may be anything and
//! are compared only within one request; the fork-isolation oracle disagrees for the root's
//! own replies, so [`CallIds::Model`] (echo the model's ids) exists to show that the ids are
//! the only difference (`tests/suite/runner/own_runtime.rs`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use rehearsal::rules::Rules;
use rehearsal::sut::approval::{ApprovalGate, Asker, Decision, GateMode};
use rehearsal::sut::event::{Event, Family, Observer, OutcomeKind, Status};
use rehearsal::sut::llm::{BoxFuture, Llm, LlmRequest, Message, ToolCall, ToolSpec, Transcript};
use rehearsal::sut::tool::{ToolCatalog, ToolContext};
use rehearsal::sut::{
    AgentId, Capabilities, CoreSession, Harness, Outcome, Refused, SessionConfig, Steer, SystemUnderTest,
};

/// A deliberate rule bug, for proving that the oracles catch a core that breaks a rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bug {
    /// Breaks `roku.grant.never-refunded`: the steps a child did not use go back to its parent
    /// when the child ends.
    RefundGrant,
    /// Breaks `roku.truncation.limit-4000`: a long child result is cut at the limit but the
    /// `...\n[Sub-agent response truncated to N chars]` notice is left out.
    NoTruncationNotice,
}

/// Which ids the calls of a reply carry in the conversation the core keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CallIds {
    /// TinyRoku's own: `c1`, `c2`, ... counted per agent, whatever the model said.
    #[default]
    Own,
    /// The ids the model gave, echoed unchanged.
    Model,
}

/// The TinyRoku core. `TinyRoku::new()` follows the rules with its own call ids; `with_bug`
/// breaks one rule on purpose; `with_call_ids` chooses whose call ids the conversation keeps.
#[derive(Clone, Copy, Debug, Default)]
pub struct TinyRoku {
    bug: Option<Bug>,
    ids: CallIds,
}

impl TinyRoku {
    /// The core without any bug, with its own call ids.
    pub fn new() -> TinyRoku {
        TinyRoku::default()
    }

    /// The core with one deliberate rule bug.
    pub fn with_bug(bug: Bug) -> TinyRoku {
        TinyRoku { bug: Some(bug), ..TinyRoku::default() }
    }

    /// The same core, keeping `ids` in the conversation.
    pub fn with_call_ids(self, ids: CallIds) -> TinyRoku {
        TinyRoku { ids, ..self }
    }
}

impl SystemUnderTest for TinyRoku {
    fn name(&self) -> &str {
        "tiny-roku"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities { foreground: true, background: false, risk_gate: true, steering: false }
    }

    fn start(&self, config: SessionConfig, harness: Harness) -> Result<Box<dyn CoreSession>, Refused> {
        config.rules.validate()?;
        let kit = Arc::new(Kit::new(config, harness, self.bug, self.ids));
        Ok(Box::new(TinySession { kit, history: Transcript::new(), turns: 0, root_children: 0, root_ids: 0 }))
    }
}

// ---------------------------------------------------------------------------------------------
// Fixed texts of the rules (docs/rules/roku.md, docs/rules/core.md).

const FINAL_ANSWER: &str = "final_answer";
const ASK_USER: &str = "ask_user";
const FAIL: &str = "fail";
const AGENT: &str = "Agent";

const DEPTH_REFUSAL: &str = "[Sub-agent error] Sub-agents cannot spawn further sub-agents.";
const NO_TASK: &str = "[Sub-agent error] No task provided.";
const EMPTY_REPLY: &str = "Runtime loop completed.";
const FAIL_WITHOUT_REASON: &str = "LLM reported failure.";

fn budget_spent(steps: u32, goal: &str) -> String {
    format!("Step budget exhausted after {steps} steps; goal: {goal}")
}

fn model_failed(goal: &str) -> String {
    format!("LLM call failed for goal: {goal}")
}

fn nudge(steps: u32, recovery: u32) -> String {
    format!(
        "System: step budget exhausted (remaining: {steps}, recovery: {recovery}). Please call final_answer or fail now."
    )
}

fn timed_out(limit: Duration) -> String {
    format!("[Sub-agent error] Timed out after {} seconds.", seconds(limit))
}

/// `core.time.seconds-format`: whole seconds print without a fraction, others as the shortest
/// decimal (`f64`'s `Display` is the shortest round-tripping form).
fn seconds(d: Duration) -> String {
    if d.subsec_nanos() == 0 { d.as_secs().to_string() } else { d.as_secs_f64().to_string() }
}

/// What a parent reads of a child's final message (`roku.truncation.*`): unchanged up to the
/// limit, else the first `limit` Unicode scalar values and the notice. Returns the text and
/// the limit when it cut.
fn hand_over(message: &str, limit: Option<usize>, bug: Option<Bug>) -> (String, Option<usize>) {
    let Some(limit) = limit else { return (message.to_string(), None) };
    // The byte offset of the first scalar value past the limit, if there is one.
    let Some((cut, _)) = message.char_indices().nth(limit) else { return (message.to_string(), None) };
    let kept = &message[..cut];
    if bug == Some(Bug::NoTruncationNotice) {
        return (kept.to_string(), Some(limit));
    }
    (format!("{kept}...\n[Sub-agent response truncated to {limit} chars]"), Some(limit))
}

// ---------------------------------------------------------------------------------------------
// The approval gate.

/// The session's one gate; every loop, root or child, asks this same object
/// (`roku.approval.shared-gate`).
enum Gate {
    /// Approves everything, asks nobody.
    Auto,
    /// Roku's risk-based gate.
    Risk { policy_deny: Vec<String>, asker: Arc<dyn Asker> },
}

impl Gate {
    /// `roku.approval.risk-classes`: whether a call may run without approval.
    fn is_safe(name: &str, tags: &[String]) -> bool {
        if [FINAL_ANSWER, ASK_USER, FAIL].contains(&name) {
            return true;
        }
        let tagged = |tag: &str| tags.iter().any(|t| t == tag);
        !tagged("risk:write") && tagged("risk:safe")
    }
}

impl ApprovalGate for Gate {
    fn check<'a>(&'a self, agent: &'a AgentId, call: &'a ToolCall, tags: &'a [String]) -> BoxFuture<'a, Decision> {
        Box::pin(async move {
            let Gate::Risk { policy_deny, asker } = self else { return Decision::Approve };
            if Gate::is_safe(&call.name, tags) {
                Decision::Approve
            } else if policy_deny.contains(&call.name) {
                Decision::Deny(format!("Tool `{}` is denied by the current security policy.", call.name))
            } else if asker.ask(agent, call).await {
                Decision::Approve
            } else {
                Decision::Deny("User denied the operation.".to_string())
            }
        })
    }
}

// ---------------------------------------------------------------------------------------------
// What a session's agents share.

/// Everything the agents of one session share, built once per session.
struct Kit {
    rules: Rules,
    bug: Option<Bug>,
    ids: CallIds,
    llm: Arc<dyn Llm>,
    catalog: ToolCatalog,
    gate: Gate,
    observer: Arc<dyn Observer>,
    session_id: Arc<str>,
    model: Option<Arc<str>>,
    effort: Option<Arc<str>>,
    memory: Arc<[String]>,
    system: Arc<str>,
    /// What the root is offered; children get theirs from [`Kit::offer`] at their depth.
    root_tools: Arc<[ToolSpec]>,
}

impl Kit {
    fn new(config: SessionConfig, harness: Harness, bug: Option<Bug>, ids: CallIds) -> Kit {
        let gate = match harness.approval.mode {
            GateMode::Auto => Gate::Auto,
            GateMode::Risk => {
                Gate::Risk { policy_deny: harness.approval.policy_deny.clone(), asker: harness.approval.asker.clone() }
            }
        };
        let mut kit = Kit {
            rules: config.rules,
            bug,
            ids,
            llm: harness.llm,
            catalog: harness.tools,
            gate,
            observer: harness.observer,
            session_id: Arc::from(config.session_id),
            model: config.model.map(Arc::from),
            effort: config.reasoning_effort.map(Arc::from),
            memory: Arc::from(config.memory),
            // `core.context.system-prompt`: the prompt never starts with whitespace.
            system: Arc::from(config.system_prompt.trim_start()),
            root_tools: Arc::from(Vec::new()),
        };
        kit.root_tools = kit.offer(0);
        kit
    }

    /// The tools a loop at `depth` is offered (`roku.tools.*`, `roku.child.tools`,
    /// `core.depth.agent-offered-below-limit`): the catalog, then `final_answer`, `ask_user`
    /// (the root only), `fail`, and `Agent` while below the depth limit.
    fn offer(&self, depth: u32) -> Arc<[ToolSpec]> {
        let mut tools: Vec<ToolSpec> = self.catalog.iter().map(|tool| tool.spec().clone()).collect();
        tools.push(pseudo(FINAL_ANSWER, "End the loop with a final answer.", &[("message", false)]));
        if depth == 0 {
            tools.push(pseudo(ASK_USER, "Stop and ask the user a question.", &[("question", false)]));
        }
        tools.push(pseudo(FAIL, "End the loop as a failure.", &[("reason", false)]));
        if self.rules.agent_tool && depth < self.rules.depth_limit {
            tools.push(pseudo(
                AGENT,
                "Hand a task to a sub-agent and wait for its answer.",
                &[("task", true), ("tools", false)],
            ));
        }
        Arc::from(tools)
    }

    fn report(&self, agent: &AgentId, event: Event) {
        self.observer.event(agent, event);
    }
}

/// A pseudo tool with string parameters `(name, required)`.
fn pseudo(name: &str, description: &str, params: &[(&str, bool)]) -> ToolSpec {
    let properties: serde_json::Map<String, serde_json::Value> =
        params.iter().map(|(p, _)| (p.to_string(), serde_json::json!({"type": "string"}))).collect();
    let required: Vec<&str> = params.iter().filter(|(_, needed)| *needed).map(|(p, _)| *p).collect();
    ToolSpec {
        name: name.to_string(),
        description: description.to_string(),
        parameters: Arc::new(serde_json::json!({"type": "object", "properties": properties, "required": required})),
        tags: Vec::new(),
    }
}

// ---------------------------------------------------------------------------------------------
// The session.

struct TinySession {
    kit: Arc<Kit>,
    /// The root's conversation, kept across turns.
    history: Transcript,
    turns: u32,
    /// Children the root has spawned so far (aliases count on across turns).
    root_children: u32,
    /// Call ids the root has handed out so far.
    root_ids: u32,
}

/// Steering is not implemented (the capabilities say so); messages are dropped.
struct NoSteering;

impl Steer for NoSteering {
    fn steer(&self, _: &str) {}
}

impl CoreSession for TinySession {
    fn turn<'a>(&'a mut self, message: &'a str, request_id: &'a str) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            self.turns += 1;
            let kit = &*self.kit;
            let root = AgentId::root();
            let budget = kit.rules.root_step_budget;
            kit.report(&root, Event::TurnStarted { turn: self.turns, message: message.to_string(), budget });
            let mut history = self.history.clone();
            history.push(Message::user(message));
            let mut agent = Agent {
                kit,
                me: root.clone(),
                goal: Arc::from(message),
                request_id: Arc::from(request_id),
                tools: kit.root_tools.clone(),
                history,
                steps: budget,
                recovery: kit.rules.recovery_budget,
                step_index: 0,
                asked: 0,
                children: self.root_children,
                ids: self.root_ids,
            };
            let end = agent.run().await;
            self.history = agent.history;
            self.root_children = agent.children;
            self.root_ids = agent.ids;
            kit.report(
                &root,
                Event::TurnEnded { turn: self.turns, kind: end.kind, status: end.status, budget: end.budget_left },
            );
            end
        })
    }

    fn steerer(&self) -> Arc<dyn Steer> {
        Arc::new(NoSteering)
    }

    fn quit(&mut self) -> BoxFuture<'_, ()> {
        // Children run inside their parent's call and no task is ever spawned: once a turn has
        // returned, nothing of the session is left running.
        Box::pin(async {})
    }

    fn live_sessions(&self) -> Vec<String> {
        Vec::new()
    }
}

// ---------------------------------------------------------------------------------------------
// One agent loop.

/// One loop: an agent serving one goal (a user turn at the root, a task in a child).
struct Agent<'k> {
    kit: &'k Kit,
    me: AgentId,
    goal: Arc<str>,
    request_id: Arc<str>,
    tools: Arc<[ToolSpec]>,
    history: Transcript,
    /// Remaining step budget.
    steps: u32,
    /// Remaining recovery budget.
    recovery: u32,
    step_index: u32,
    /// Model requests made by this loop.
    asked: u32,
    /// Children spawned so far.
    children: u32,
    /// Call ids handed out so far.
    ids: u32,
}

/// How one call of a response went, for the step index.
#[derive(PartialEq, Eq)]
enum Ran {
    /// A catalog tool or an unknown name (`roku.step.index-regular-only`).
    Regular,
    /// An `Agent` call, or a call the gate denied.
    NotRegular,
}

type ChildRun<'k> = Pin<Box<dyn Future<Output = Outcome> + Send + 'k>>;

impl<'k> Agent<'k> {
    fn report(&self, event: Event) {
        self.kit.report(&self.me, event);
    }

    fn spend(&mut self, steps: u32) {
        self.steps = self.steps.saturating_sub(steps);
    }

    /// The id a call of the model's keeps in this agent's conversation.
    fn id_for(&mut self, model_id: String) -> String {
        self.ids += 1;
        match self.kit.ids {
            CallIds::Own => format!("c{}", self.ids),
            CallIds::Model => model_id,
        }
    }

    fn is_terminal(&self, name: &str) -> bool {
        // A child has no `ask_user`: for it the name is unknown, not terminal
        // (`roku.child.ask-user-refused`).
        name == FINAL_ANSWER || name == FAIL || (name == ASK_USER && self.me.depth() == 0)
    }

    /// Ends the loop: reports `AgentEnded` and returns the outcome.
    fn finish(&self, kind: OutcomeKind, status: Status, message: String) -> Outcome {
        self.report(Event::AgentEnded {
            kind,
            status,
            message: message.clone(),
            steps: self.step_index,
            budget: self.steps,
        });
        Outcome { kind, status, message, steps: self.step_index, budget_left: self.steps }
    }

    fn boxed(self) -> ChildRun<'k> {
        Box::pin(async move {
            let mut agent = self;
            agent.run().await
        })
    }

    /// The loop (`roku.loop.*`), until an outcome.
    async fn run(&mut self) -> Outcome {
        loop {
            if self.steps == 0 {
                return self.finish(OutcomeKind::Fail, Status::Error, budget_spent(self.step_index, &self.goal));
            }
            self.asked += 1;
            let request = LlmRequest {
                agent: self.me.clone(),
                goal: self.goal.clone(),
                profile: None,
                request_id: self.request_id.clone(),
                session_id: self.kit.session_id.clone(),
                model: self.kit.model.clone(),
                reasoning_effort: self.kit.effort.clone(),
                memory: self.kit.memory.clone(),
                system: self.kit.system.clone(),
                messages: self.history.clone(),
                tools: self.tools.clone(),
            };
            self.report(Event::LlmRequest {
                call: self.asked,
                messages: self.history.len(),
                tools: self.tools.len(),
                budget: self.steps,
            });
            let reply = match self.kit.llm.complete(&request).await {
                Ok(reply) => reply,
                Err(error) => {
                    self.report(Event::LlmFailed { error: error.to_string() });
                    return self.finish(OutcomeKind::Fail, Status::Error, model_failed(&self.goal));
                }
            };
            self.report(Event::LlmReply {
                text: reply.text.clone(),
                calls: reply.tool_calls.iter().map(|c| c.name.clone()).collect(),
            });
            // The ids this agent keeps (its own unless told to echo the model's), the same in
            // the assistant message and in the results that answer it.
            let calls: Vec<ToolCall> = reply
                .tool_calls
                .into_iter()
                .map(|call| ToolCall { id: self.id_for(call.id), name: call.name, args: call.args })
                .collect();
            self.history.push(Message::assistant(reply.text.clone(), calls.clone()));

            if calls.is_empty() {
                self.spend(1);
                let message = if reply.text.is_empty() { EMPTY_REPLY.to_string() } else { reply.text };
                return self.finish(OutcomeKind::FinalAnswer, Status::Ok, message);
            }
            if let Some(terminal) = calls.iter().find(|call| self.is_terminal(&call.name)) {
                let text_arg = |key: &str| terminal.args.get(key).and_then(|v| v.as_str()).map(str::to_string);
                return match terminal.name.as_str() {
                    FINAL_ANSWER => {
                        self.spend(1);
                        let message = text_arg("message").unwrap_or_default();
                        self.finish(OutcomeKind::FinalAnswer, Status::Ok, message)
                    }
                    FAIL => {
                        self.spend(1);
                        let message = text_arg("reason").unwrap_or_else(|| FAIL_WITHOUT_REASON.to_string());
                        self.finish(OutcomeKind::Fail, Status::Error, message)
                    }
                    _ => {
                        let question = text_arg("question").unwrap_or_default();
                        self.finish(OutcomeKind::AwaitingUser, Status::Ok, question)
                    }
                };
            }
            let mut regular = false;
            for call in &calls {
                regular |= self.one_call(call).await == Ran::Regular;
            }
            if regular {
                self.step_index += 1;
            }
            self.report(Event::StepCompleted { step_index: self.step_index, budget: self.steps });
        }
    }

    /// Runs one non-terminal call: the gate, then `Agent`, a catalog tool or the unknown-name
    /// answer.
    async fn one_call(&mut self, call: &ToolCall) -> Ran {
        let tool = self.kit.catalog.get(&call.name).cloned();
        let tags: &[String] = tool.as_ref().map_or(&[], |t| &t.spec().tags);
        if let Decision::Deny(reason) = self.kit.gate.check(&self.me, call, tags).await {
            self.spend(1);
            self.history.push(Message::tool(&call.id, format!("[Tool denied] {reason}"), true));
            self.report(Event::Denied { tool: call.name.clone(), reason, budget: self.steps });
            return Ran::NotRegular;
        }
        if call.name == AGENT && self.kit.rules.agent_tool {
            self.delegate(call).await;
            return Ran::NotRegular;
        }
        let (content, is_error) = match &tool {
            Some(tool) => {
                self.report(Event::ToolStarted {
                    call_id: call.id.clone(),
                    tool: call.name.clone(),
                    args: call.args.clone(),
                });
                let context = ToolContext { agent: self.me.clone(), call_id: call.id.clone() };
                let output = tool.call(&context, &call.args).await;
                (output.content, output.is_error)
            }
            None => (self.kit.rules.unknown_tool_message.replace("{name}", &call.name), true),
        };
        self.spend(1);
        if is_error {
            self.recovery = self.recovery.saturating_sub(1);
        }
        self.history.push(Message::tool(&call.id, content.clone(), is_error));
        self.report(Event::ToolEnded {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            is_error,
            result: content,
            budget: self.steps,
            recovery: self.recovery,
        });
        if self.steps == 0 || self.recovery == 0 {
            self.history.push(Message::user(nudge(self.steps, self.recovery)));
            self.report(Event::Nudge { budget: self.steps, recovery: self.recovery });
        }
        Ran::Regular
    }

    /// An approved `Agent` call (`roku.agent.*`, `roku.grant.*`, `roku.child.*`,
    /// `roku.timeout.*`, `roku.result.*`).
    async fn delegate(&mut self, call: &ToolCall) {
        self.report(Event::ToolStarted { call_id: call.id.clone(), tool: AGENT.to_string(), args: call.args.clone() });
        let kit = self.kit;
        let rules = &kit.rules;
        let before = self.steps;
        self.spend(rules.spawn_cost);
        let task = call.args.get("task").and_then(|v| v.as_str()).unwrap_or("").trim();
        let refusal = if self.me.depth() >= rules.depth_limit {
            Some(DEPTH_REFUSAL)
        } else if task.is_empty() {
            Some(NO_TASK)
        } else {
            None
        };
        if let Some(reason) = refusal {
            self.report(Event::SpawnRefused { tool: AGENT.to_string(), reason: reason.to_string() });
            self.answer(call, reason.to_string(), true);
            return;
        }

        let grant = self.steps.min(rules.child_step_cap);
        self.steps -= grant;
        self.children += 1;
        let child_id = self.me.child(self.children);
        self.report(Event::Spawned {
            child: child_id.clone(),
            family: Family::Foreground,
            task: task.to_string(),
            cost: rules.spawn_cost,
            grant,
            budget_before: before,
            budget_after: self.steps,
        });
        let depth = child_id.depth();
        let request_id: Arc<str> = Arc::from(format!("{}-sub", self.request_id));
        kit.report(
            &child_id,
            Event::AgentStarted { depth, goal: task.to_string(), budget: grant, request_id: request_id.to_string() },
        );
        let child = Agent {
            kit,
            me: child_id.clone(),
            goal: Arc::from(task),
            request_id,
            tools: kit.offer(depth),
            history: Transcript::from(vec![Message::user(task)]),
            steps: grant,
            recovery: rules.recovery_budget,
            step_index: 0,
            asked: 0,
            children: 0,
            ids: 0,
        };
        let limit = rules.agent_timeout.filter(|limit| !limit.is_zero());
        let ended = match limit {
            // A child that ends in the very instant of its limit has finished
            // (`core.time.finish-at-limit-wins`). The reply it waits for may be delivered by
            // another task in that instant, after the timer fired: let the instant run once,
            // then look at the child one last time before calling it timed out.
            Some(limit) => {
                let mut child = child.boxed();
                match tokio::time::timeout(limit, &mut child).await {
                    Ok(end) => Some(end),
                    Err(_) => {
                        tokio::task::yield_now().await;
                        let last_look = std::future::poll_fn(|cx| std::task::Poll::Ready(child.as_mut().poll(cx)));
                        match tokio::task::unconstrained(last_look).await {
                            std::task::Poll::Ready(end) => Some(end),
                            std::task::Poll::Pending => None,
                        }
                    }
                }
            }
            None => Some(child.boxed().await),
        };
        let Some(end) = ended else {
            let limit = limit.unwrap_or_default();
            self.report(Event::TimedOut { child: child_id, after: limit });
            self.answer(call, timed_out(limit), true);
            return;
        };
        let is_error = end.status == Status::Error;
        let (text, truncated_to) = hand_over(&end.message, rules.result_limit_chars, kit.bug);
        self.report(Event::ChildResult { child: child_id, is_error, chars: end.message.chars().count(), truncated_to });
        if kit.bug == Some(Bug::RefundGrant) {
            self.steps += end.budget_left;
        }
        self.answer(call, text, is_error);
    }

    /// Appends the result of an `Agent` call and reports its end.
    fn answer(&mut self, call: &ToolCall, result: String, is_error: bool) {
        self.history.push(Message::tool(&call.id, result.clone(), is_error));
        self.report(Event::ToolEnded {
            call_id: call.id.clone(),
            tool: AGENT.to_string(),
            is_error,
            result,
            budget: self.steps,
            recovery: self.recovery,
        });
    }
}

//! The agent loop: one agent, one request, until a terminal outcome (`docs/rules/roku.md`, `roku.loop.*`, `roku.terminal.*`, `roku.calls.*`).
//!
//! Per iteration: take in what arrived (steering, background results), check the budget, ask
//! the model, scan for a terminal call first, then run the calls one at a time. The loop
//! delegates spawning to `foreground` (`Agent`) and `background` (the `subagent` family); it
//! does not know who answers the model or runs the tools.

use std::collections::BTreeSet;
use std::sync::Arc;

use tracing::Instrument;

use super::budget::Budget;
use super::{Inbox, Shared, background, foreground, pseudo};
use crate::sut::approval::Decision;
use crate::sut::event::{Event, OutcomeKind, Status};
use crate::sut::llm::Transcript;
use crate::sut::llm::{BoxFuture, LlmRequest, Message, ToolCall, ToolSpec};
use crate::sut::tool::{ToolContext, ToolOutput};
use crate::sut::{AgentId, Outcome};

/// The state of one running loop.
pub(crate) struct Loop {
    pub agent: AgentId,
    pub depth: u32,
    pub goal: Arc<str>,
    pub request_id: Arc<str>,
    pub model: Option<Arc<str>>,
    pub reasoning_effort: Option<Arc<str>>,
    pub profile: Option<Arc<str>>,
    pub system: Arc<str>,
    pub history: Transcript,
    pub budget: Budget,
    pub step_index: u32,
    /// Catalog tools this loop may use; `None` = the whole catalog.
    pub catalog: Option<BTreeSet<String>>,
    pub skills: Vec<String>,
    /// Whether `ask_user` is offered (never to a child).
    pub ask_user: bool,
    /// Messages sent to this agent from outside (steering, `subagent.send`).
    pub inbox: Arc<Inbox>,
    /// Children spawned so far (numbers their aliases).
    pub children: u32,
    /// Model requests made so far.
    pub llm_calls: u32,
    /// The tools offered to the model, built at the first request (they do not change
    /// during a loop).
    pub offered: Option<Arc<[ToolSpec]>>,
}

const TERMINALS: [&str; 3] = ["final_answer", "ask_user", "fail"];

/// What decides the tools a loop is offered.
#[derive(PartialEq, Eq)]
pub(crate) struct OfferKey {
    catalog: Option<BTreeSet<String>>,
    ask_user: bool,
    agent: bool,
    subagents: bool,
}

impl Loop {
    /// A child of `self`: fresh counters, the parent's context passed through.
    pub fn child(&self, agent: AgentId, goal: &str, grant: u32, shared: &Shared) -> Loop {
        let mut history = Transcript::new();
        history.push(Message::user(goal));
        Loop {
            agent,
            depth: self.depth + 1,
            goal: Arc::from(goal),
            request_id: Arc::from(format!("{}-sub", self.request_id)),
            model: self.model.clone(),
            reasoning_effort: self.reasoning_effort.clone(),
            profile: None,
            system: self.system.clone(),
            history,
            budget: Budget { remaining: grant, recovery: shared.rules.recovery_budget },
            step_index: 0,
            catalog: self.catalog.clone(),
            skills: self.skills.clone(),
            ask_user: false,
            inbox: Arc::new(Inbox::default()),
            children: 0,
            llm_calls: 0,
            offered: None,
        }
    }

    /// Whether this loop is offered the `Agent` tool.
    fn offers_agent(&self, shared: &Shared) -> bool {
        shared.rules.agent_tool && self.depth < shared.rules.depth_limit
    }

    /// Whether this loop has the `subagent` family: the root only, so no child of either
    /// family can start background children (a child's call is an unknown tool).
    fn has_subagents(&self, shared: &Shared) -> bool {
        shared.rules.subagent_tools && self.depth == 0
    }

    /// Whether the family is offered to the model: only below the depth limit. A call made
    /// anyway at the limit still reaches the family, whose depth guard answers it, as the
    /// `Agent` tool's does.
    fn offers_subagents(&self, shared: &Shared) -> bool {
        self.has_subagents(shared) && self.depth < shared.rules.depth_limit
    }

    /// Catalog tools this loop may call, in catalog order.
    pub fn catalog_names(&self, shared: &Shared) -> Vec<String> {
        shared
            .tools
            .iter()
            .map(|t| t.spec().name.clone())
            .filter(|name| self.catalog.as_ref().is_none_or(|allowed| allowed.contains(name)))
            .collect()
    }

    /// The tools offered to the model, shared by every loop offered the same set (the
    /// session keeps one list per distinct set).
    fn offered_tools(&self, shared: &Shared) -> Arc<[ToolSpec]> {
        let key = OfferKey {
            catalog: self.catalog.clone(),
            ask_user: self.ask_user,
            agent: self.offers_agent(shared),
            subagents: self.offers_subagents(shared),
        };
        let mut offers = shared.offers.lock().expect("offer cache lock poisoned");
        if let Some((_, tools)) = offers.iter().find(|(k, _)| *k == key) {
            return tools.clone();
        }
        let tools: Arc<[ToolSpec]> = self.build_offered(shared).into();
        offers.push((key, tools.clone()));
        tools
    }

    /// The tools offered to the model: catalog tools, then the pseudo tools.
    fn build_offered(&self, shared: &Shared) -> Vec<ToolSpec> {
        let mut specs: Vec<ToolSpec> =
            self.catalog_names(shared).iter().map(|n| shared.tools.get(n).expect("listed").spec().clone()).collect();
        specs.push(pseudo::spec("final_answer").clone());
        if self.ask_user {
            specs.push(pseudo::spec("ask_user").clone());
        }
        specs.push(pseudo::spec("fail").clone());
        if self.offers_agent(shared) {
            specs.push(pseudo::spec("Agent").clone());
        }
        if self.offers_subagents(shared) {
            specs.extend(pseudo::family().iter().cloned());
        }
        specs
    }

    fn is_terminal(&self, name: &str) -> bool {
        TERMINALS.contains(&name) && (name != "ask_user" || self.ask_user)
    }

    fn emit(&self, shared: &Shared, event: Event) {
        shared.observer.event(&self.agent, event);
    }

    fn end(&self, shared: &Shared, kind: OutcomeKind, status: Status, message: String) -> Outcome {
        let outcome = Outcome { kind, status, message, steps: self.step_index, budget_left: self.budget.remaining };
        self.emit(
            shared,
            Event::AgentEnded {
                kind,
                status,
                message: outcome.message.clone(),
                steps: outcome.steps,
                budget: outcome.budget_left,
            },
        );
        outcome
    }

    /// Takes in what arrived since the last step: messages sent to this agent, then (at the
    /// root) finished background results, in completion order.
    fn absorb(&mut self, shared: &Shared) {
        for message in self.inbox.take() {
            self.history.push(message);
        }
        if self.depth == 0 {
            for notification in shared.board.take_notifications(shared) {
                self.history.push(Message::user(notification));
            }
        }
    }

    /// At the root, a turn does not end while its background children are unfinished or
    /// their results unread: wait for the next result and go on. Returns whether it waited.
    async fn hold_for_children(&mut self, shared: &Shared) -> bool {
        // With no step left the loop cannot read what arrives: the turn has reached its step
        // limit, and unfinished results come with the next turn.
        if self.depth != 0 || self.budget.remaining == 0 {
            return false;
        }
        // A child ending in this very instant counts as unfinished work of this turn.
        shared.board.settle().await;
        let unfinished = shared.board.outstanding();
        if unfinished == 0 {
            return false;
        }
        self.emit(shared, Event::AwaitingChildren { unfinished });
        shared.board.news(&self.inbox).await;
        true
    }

    async fn drive(&mut self, shared: &Shared) -> Outcome {
        loop {
            // The budget is checked before anything is taken in: what arrives for a loop that
            // cannot take another step stays for the next turn, where the model can read it.
            if self.budget.remaining == 0 {
                let message = format!("Step budget exhausted after {} steps; goal: {}", self.step_index, self.goal);
                return self.end(shared, OutcomeKind::Fail, Status::Error, message);
            }
            if self.depth == 0 {
                // The root acts only once everything due at this instant has happened:
                // results and steering that arrive now are in this request.
                shared.board.settle().await;
            }
            self.absorb(shared);
            self.llm_calls += 1;
            if self.offered.is_none() {
                self.offered = Some(self.offered_tools(shared));
            }
            let tools = self.offered.clone().unwrap_or_else(|| Arc::from([]));
            let request = LlmRequest {
                agent: self.agent.clone(),
                goal: self.goal.clone(),
                profile: self.profile.clone(),
                request_id: self.request_id.clone(),
                session_id: shared.session_id.clone(),
                model: self.model.clone(),
                reasoning_effort: self.reasoning_effort.clone(),
                memory: shared.memory.clone(),
                system: self.system.clone(),
                messages: self.history.clone(),
                tools,
            };
            self.emit(
                shared,
                Event::LlmRequest {
                    call: self.llm_calls,
                    messages: request.messages.len(),
                    tools: request.tools.len(),
                    budget: self.budget.remaining,
                },
            );
            let reply = match shared.llm.complete(&request).await {
                Ok(reply) => reply,
                Err(error) => {
                    self.emit(shared, Event::LlmFailed { error: error.to_string() });
                    let message = format!("LLM call failed for goal: {}", self.goal);
                    return self.end(shared, OutcomeKind::Fail, Status::Error, message);
                }
            };
            drop(request);
            let calls: Vec<String> = reply.tool_calls.iter().map(|c| c.name.clone()).collect();
            self.emit(shared, Event::LlmReply { text: reply.text.clone(), calls });
            let assistant_len = self.history.len() + 1;
            self.history.push(Message::assistant(reply.text, reply.tool_calls));
            // The reply, as the conversation now holds it (shared, not copied): the calls are
            // read from here while the loop appends their results.
            let reply = self.history.clone();
            let reply = reply.last().expect("the assistant message was just appended");

            if reply.tool_calls.is_empty() {
                self.budget.spend(1);
                if self.hold_for_children(shared).await {
                    continue;
                }
                let message = if reply.content.is_empty() {
                    "Runtime loop completed.".to_string()
                } else {
                    reply.content.clone()
                };
                return self.end(shared, OutcomeKind::FinalAnswer, Status::Ok, message);
            }

            // Terminal scan first: the first terminal call ends the loop, and no other call of
            // this response runs, not even one listed before it.
            if let Some(call) = reply.tool_calls.iter().find(|c| self.is_terminal(&c.name)) {
                match call.name.as_str() {
                    "final_answer" => {
                        self.budget.spend(1);
                        if self.hold_for_children(shared).await {
                            continue;
                        }
                        let message = string_arg(&call.args, "message").unwrap_or_default();
                        return self.end(shared, OutcomeKind::FinalAnswer, Status::Ok, message);
                    }
                    "fail" => {
                        self.budget.spend(1);
                        let reason = string_arg(&call.args, "reason").unwrap_or_else(|| "LLM reported failure.".into());
                        return self.end(shared, OutcomeKind::Fail, Status::Error, reason);
                    }
                    _ => {
                        let question = string_arg(&call.args, "question").unwrap_or_default();
                        return self.end(shared, OutcomeKind::AwaitingUser, Status::Ok, question);
                    }
                }
            }

            if self.depth == 0 {
                // The root acts on the reply only once its instant has settled: a child that
                // finishes, or frees a slot, in the instant the reply arrives has done so
                // before a cancel, send or spawn of this reply looks at it.
                shared.board.settle().await;
            }
            let mut ran_regular = false;
            for call in &reply.tool_calls {
                // A reply may hold any number of calls, most of which finish without waiting:
                // give the scheduler its turn now and then, so whoever runs the session can
                // still stop it (tokio's cooperative budget; it yields only once the budget
                // is spent).
                tokio::task::consume_budget().await;
                ran_regular |= self.dispatch(shared, call, assistant_len).await;
            }
            if ran_regular {
                self.step_index += 1;
            }
            self.emit(shared, Event::StepCompleted { step_index: self.step_index, budget: self.budget.remaining });
        }
    }

    /// Runs one non-terminal call and appends its result. Returns whether it was a regular
    /// call (a catalog tool or an unknown name), which advances `step_index`.
    async fn dispatch(&mut self, shared: &Shared, call: &ToolCall, assistant_len: usize) -> bool {
        let tags = shared.tools.get(&call.name).map_or(&[][..], |t| &t.spec().tags[..]);
        if let Decision::Deny(reason) = shared.gate.check(&self.agent, call, tags).await {
            self.budget.spend(1);
            self.emit(
                shared,
                Event::Denied { tool: call.name.clone(), reason: reason.clone(), budget: self.budget.remaining },
            );
            self.history.push(Message::tool(&call.id, format!("[Tool denied] {reason}"), true));
            return false;
        }

        if call.name == "Agent" && shared.rules.agent_tool {
            self.started(shared, call);
            let output = foreground::call(self, shared, call).await;
            self.finish(shared, call, output);
            return false;
        }
        if background::is_family(&call.name) && self.has_subagents(shared) {
            self.started(shared, call);
            let output = background::call(self, shared, call, assistant_len).await;
            self.finish(shared, call, output);
            return false;
        }

        let allowed = self.catalog.as_ref().is_none_or(|names| names.contains(&call.name));
        let output = match shared.tools.get(&call.name).filter(|_| allowed) {
            Some(tool) => {
                self.started(shared, call);
                let ctx = ToolContext { agent: self.agent.clone(), call_id: call.id.clone() };
                tool.call(&ctx, &call.args).await
            }
            None => ToolOutput { content: shared.rules.unknown_tool(&call.name), is_error: true },
        };
        self.budget.spend(1);
        if output.is_error {
            self.budget.spend_recovery();
        }
        self.finish(shared, call, output);
        if self.budget.exhausted() {
            let (budget, recovery) = (self.budget.remaining, self.budget.recovery);
            self.history.push(Message::user(format!(
                "System: step budget exhausted (remaining: {budget}, recovery: {recovery}). Please call final_answer or fail now."
            )));
            self.emit(shared, Event::Nudge { budget, recovery });
        }
        true
    }

    fn started(&self, shared: &Shared, call: &ToolCall) {
        self.emit(
            shared,
            Event::ToolStarted { call_id: call.id.clone(), tool: call.name.clone(), args: call.args.clone() },
        );
    }

    fn finish(&mut self, shared: &Shared, call: &ToolCall, output: ToolOutput) {
        self.emit(
            shared,
            Event::ToolEnded {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                is_error: output.is_error,
                result: output.content.clone(),
                budget: self.budget.remaining,
                recovery: self.budget.recovery,
            },
        );
        self.history.push(Message::tool(&call.id, output.content, output.is_error));
    }
}

/// Runs a loop to its outcome inside a span naming the agent, and hands the loop back (its
/// history is the session record of a turn or a named session).
pub(crate) fn run(shared: Arc<Shared>, mut lp: Loop) -> BoxFuture<'static, (Outcome, Loop)> {
    let span = tracing::info_span!("agent", alias = %lp.agent, depth = lp.depth);
    Box::pin(
        async move {
            if lp.depth > 0 {
                lp.emit(
                    &shared,
                    Event::AgentStarted {
                        depth: lp.depth,
                        goal: lp.goal.to_string(),
                        budget: lp.budget.remaining,
                        request_id: lp.request_id.to_string(),
                    },
                );
            }
            let outcome = lp.drive(&shared).await;
            (outcome, lp)
        }
        .instrument(span),
    )
}

/// A string argument, if present and a string.
pub(crate) fn string_arg(args: &serde_json::Value, name: &str) -> Option<String> {
    args.get(name).and_then(|v| v.as_str()).map(str::to_string)
}

//! Turning a plan into an ordinary scenario: the lanes, replies and checks a user would write,
//! with task references that are sure to resolve and gate answers in the order they are asked;
//! and dropping what a core lacks before it is compiled.
//!
//! It draws nothing (every choice was made in the plan, by `draw`).

use serde_json::json;

use crate::scenario::{
    Answer, ApprovalSpec, Call, Expect, GateMode, Lane, Limits, ProfileSpec, Reply, RiskTag, Scenario, SessionSpec,
    Steer, Text, ToolResult, ToolSpec, Turn, TurnExpect,
};

use super::plan::{
    AgentPick, BODIES, CLAMPED_MS, CONTINUATION, ChildStep, FRACTIONAL_MS, FileForm, GatePlan, Grant, Knobs, LeafStep,
    Plan, ProfilePlan, RARE_LIMIT_MS, Rare, RootCall, RootReply, SHAPE_LIMIT_MS, SKILLS, SPAWNING, SPELLINGS, Said,
    SessionPick, Shape, SkillGrant, SpawnExtras, TASK_PICKS, TaskForm, TextArg, UNITS, UNKNOWN_NAMES,
};

fn call(tool: &str, args: serde_json::Value) -> Call {
    Call { tool: tool.to_string(), args, undeclared: false, bad_args: false }
}

/// A terminal call with its text argument written as `arg` says, and text of the reply's own
/// beside it when `said`.
fn terminal(tool: &str, name: &str, given: &str, arg: TextArg, said: Said) -> Reply {
    let call = match arg {
        TextArg::Given => call(tool, json!({ name: given })),
        TextArg::Missing => Call { bad_args: true, ..call(tool, json!({})) },
        TextArg::Empty => call(tool, json!({ name: "" })),
        TextArg::Padded => call(tool, json!({ name: format!("  {given}\n") })),
    };
    let text = said.then(|| Text::Plain("Let me wrap up.".into()));
    Reply { text, ..reply(vec![call], 1) }
}

fn reply(calls: Vec<Call>, latency_ms: u64) -> Reply {
    Reply { calls, latency_ms, ..Reply::default() }
}

fn text(s: &str) -> Reply {
    Reply { text: Some(Text::Plain(s.to_string())), ..Reply::default() }
}

struct Compiler {
    /// The rules the knobs resolve to (the preset where a knob is unset).
    rules: crate::rules::Rules,
    lanes: Vec<Lane>,
    tasks: usize,
    /// The tasks started so far: `subagent` calls the gate lets through and nothing refuses.
    /// A call that may meet its named session in use is not counted (whether it does depends
    /// on timing), so a `$taskN` never names more tasks than the request is sure to show.
    spawned: usize,
    /// The named sessions earlier `subagent` calls asked for: a later call on one of them may
    /// find it in use (`bub.session.named-one-at-a-time`).
    named: Vec<String>,
    /// Whether a `subagent.send` was written: a send may continue a task that was cancelled
    /// while queued, whose first request is then the continuation's, with the message as its
    /// task, so a lane must select that message.
    sends: bool,
    /// Roku's risk gate, if the plan has it.
    gate: Option<GatePlan>,
    /// The user's answers to the gate so far, in the order it asks.
    answers: Vec<Answer>,
    /// Whether the foreground child of the root's one `Agent` call may make calls the gate asks
    /// about: that call is the root's last question, so the child's follow it in the order.
    asking_child: bool,
    profile: ProfilePlan,
    /// The scenario's seed, from which the core draws the task ids.
    seed: u64,
    /// Whether the root has skills.
    skills: bool,
}

impl Compiler {
    /// Whether a call of `tool` runs past the gate; a question it asks takes the next answer.
    fn ask(&mut self, tool: &str) -> bool {
        let Some(gate) = &self.gate else { return true };
        if !gate.asks(tool) {
            return gate.safe(tool) || !gate.policy().contains(&tool);
        }
        let approve = gate.answers[self.answers.len() % gate.answers.len()];
        self.answers.push(Answer { tool: tool.to_string(), approve });
        approve
    }

    /// Whether a child makes its call of `tool`: one the gate lets through or refuses without
    /// asking, or one the asking child makes, whose question is answered in turn; not one
    /// whose question could come out of order.
    fn child_calls(&mut self, tool: &str) -> bool {
        match &self.gate {
            Some(gate) if gate.asks(tool) => {
                let asked = self.asking_child && matches!(tool, "Read" | "Flaky");
                if asked {
                    self.ask(tool);
                }
                asked
            }
            _ => true,
        }
    }

    /// The result length around the limit (or around 8 without one).
    fn answer_text(&self, unit: usize, around: i8) -> Text {
        let limit = self.rules.result_limit_chars.unwrap_or(8) as i64;
        let count = (limit + i64::from(around)).max(0) as usize;
        Text::Repeat { repeat: UNITS[unit].to_string(), count }
    }

    /// Registers a lane for a new child task and returns the task's text.
    fn child(&mut self, steps: &[ChildStep], timeout_applies: bool) -> String {
        self.tasks += 1;
        let label = format!("[task-{}]", self.tasks);
        let mut replies = Vec::new();
        for step in steps {
            let tool = match step {
                ChildStep::Read(_) => "Read",
                ChildStep::Flaky => "Flaky",
                ChildStep::SpawnGrandchild(_) => "Agent",
                ChildStep::CallSubagent => "subagent",
                _ => "",
            };
            if !tool.is_empty() && !self.child_calls(tool) {
                replies.push(text("Nothing to add."));
                continue;
            }
            replies.push(match step {
                ChildStep::Read(latency) => reply(vec![call("Read", json!({"path": "notes.md"}))], *latency),
                ChildStep::Flaky => reply(vec![call("Flaky", json!({}))], 1),
                ChildStep::SpawnGrandchild(leaf) => {
                    let task = self.leaf(leaf);
                    reply(vec![call("Agent", json!({"task": task}))], 1)
                }
                ChildStep::CallSubagent => reply(vec![call("subagent", json!({"prompt": "nested"}))], 1),
                ChildStep::Answer { unit, around, latency } => {
                    Reply { text: Some(self.answer_text(*unit, *around)), latency_ms: *latency, ..Reply::default() }
                }
                ChildStep::Blank => text(" \n "),
                ChildStep::Fail => reply(vec![call("fail", json!({"reason": "cannot"}))], 1),
                ChildStep::AskUser => reply(vec![call("ask_user", json!({"question": "Which file?"}))], 1),
                // A child hangs only when a limit will stop it: otherwise the run could not end.
                ChildStep::Hang if timeout_applies => Reply { hang: true, ..Reply::default() },
                ChildStep::Hang => text("done after all"),
                ChildStep::LlmError => Reply { error: Some("rate limited".into()), latency_ms: 1, ..Reply::default() },
            });
        }
        // Spare answers: a child may run again (send) or need more steps than scripted.
        replies.extend((0..3).map(|_| text("spare answer")));
        self.lanes.push(Lane { task_contains: Some(label.clone()), replies, ..lane() });
        format!("{label} look into it")
    }

    fn leaf(&mut self, steps: &[LeafStep]) -> String {
        self.tasks += 1;
        let label = format!("[task-{}]", self.tasks);
        let mut replies: Vec<Reply> = steps
            .iter()
            .map(|step| match step {
                LeafStep::Read(latency) => reply(vec![call("Read", json!({"path": "deep.md"}))], *latency),
                LeafStep::Answer { unit, around, latency } => {
                    Reply { text: Some(self.answer_text(*unit, *around)), latency_ms: *latency, ..Reply::default() }
                }
            })
            .collect();
        replies.push(text("spare answer"));
        self.lanes.push(Lane { task_contains: Some(label.clone()), replies, ..lane() });
        format!("{label} dig deeper")
    }

    /// `$taskN` for an earlier background task, or a made-up id when none was started. `pick`
    /// is drawn from `0..8 * TASK_PICKS`: its rest modulo `TASK_PICKS` picks the task, and
    /// the top eighth writes the reference with whitespace around it, as a model may copy an
    /// id (the core looks ids up trimmed).
    ///
    /// With `respell` (a `send` or a `cancel`), the seventh eighth writes the task's id in upper
    /// case instead, an id that names no task (`bub.task-id.unknown`: ids are matched exactly,
    /// only trimmed). The id is the one `bub.task-id.seeded` gives the task from the seed, so a
    /// core that matched ids in any case would find the task.
    fn task_ref(&self, pick: u8, spawned_before: usize, respell: bool) -> String {
        // Without the family (or with depth limit 0, which hides it) no task id ever appears.
        if spawned_before == 0 || !self.rules.subagent_tools || self.rules.depth_limit == 0 {
            return "sub-00000000".to_string();
        }
        let n = usize::from(pick % TASK_PICKS) % spawned_before;
        let reference = format!("$task{}", n + 1);
        if pick >= 7 * TASK_PICKS {
            format!(" {reference}\n")
        } else if respell && pick >= 6 * TASK_PICKS {
            let counter = self.seed.wrapping_add((n as u64).wrapping_mul(crate::seed::GAMMA));
            format!("SUB-{:08X}", crate::seed::splitmix64(counter) >> 32)
        } else {
            reference
        }
    }

    /// The root's first replies that open `rare` (the knobs are [`Plan::rare_knobs`]'s).
    fn rare(&mut self, rare: Rare) -> Vec<Reply> {
        let slow = |c: &mut Compiler| c.child(&[ChildStep::Answer { unit: 0, around: 0, latency: 500 }], false);
        let spawn = |prompt: String, session: Option<&str>| {
            let mut args = json!({ "prompt": prompt });
            if let Some(name) = session {
                args["session"] = json!(name);
            }
            call("subagent", args)
        };
        match rare {
            Rare::QueuedCancelled => {
                let calls = (0..3).map(|_| spawn(slow(self), None)).collect();
                self.spawned += 3;
                // The request after the spawns shows their three ids: the second is queued,
                // the third queued behind it.
                vec![reply(calls, 1), reply(vec![call("subagent.cancel", json!({"task_id": "$task2"}))], 1)]
            }
            Rare::SendOnSessionInUse => {
                let quick = self.child(&[ChildStep::Answer { unit: 0, around: 0, latency: 1 }], false);
                let first = spawn(quick, Some("notes-0"));
                // 50 ms later the first run has ended, so the second starts on the name.
                let second = spawn(slow(self), Some("notes-0"));
                self.spawned += 2;
                self.named.push("notes-0".into());
                self.sends = true;
                let send = call("subagent.send", json!({"task_id": "$task1", "message": CONTINUATION}));
                vec![reply(vec![first], 1), reply(vec![second], 50), reply(vec![send], 1)]
            }
            Rare::ForegroundReplyAtLimit => {
                let task = self.child(&[ChildStep::Answer { unit: 0, around: 0, latency: RARE_LIMIT_MS }], true);
                vec![reply(vec![call("Agent", json!({ "task": task }))], 1)]
            }
        }
    }

    /// The root's first replies that open `shape`, in the variant `twist` picks (the knobs
    /// are [`Plan::shape_knobs`]'s, the gate [`Plan::shape_gate`]'s).
    fn shape(&mut self, shape: Shape, twist: u8) -> Vec<Reply> {
        let read = || call("Read", json!({"path": "file-1.md"}));
        let flaky = || call("Flaky", json!({}));
        let unknown = || Call { tool: UNKNOWN_NAMES[0].into(), args: json!({}), undeclared: true, bad_args: false };
        let answer = |latency| ChildStep::Answer { unit: 0, around: 0, latency };
        let spawn = |prompt: String, session: Option<&str>, timeout_ms: Option<u64>| {
            let mut args = json!({ "prompt": prompt });
            if let Some(name) = session {
                args["session"] = json!(name);
            }
            if let Some(ms) = timeout_ms {
                args["timeout_seconds"] = json!(ms as f64 / 1000.0);
            }
            call("subagent", args)
        };
        // One reply holding every call, or one reply per call.
        let spread = |calls: Vec<Call>, together: bool| match together {
            true => vec![reply(calls, 1)],
            false => calls.into_iter().map(|c| reply(vec![c], 1)).collect(),
        };
        match shape {
            Shape::BudgetOutRecoveryLeft => {
                // Bits 0-1 and 2-3 are the budgets' (`shape_knobs`); 4-5 the last call; 6 together.
                let budget = self.rules.root_step_budget as usize;
                let mut calls: Vec<Call> = (1..budget).map(|_| read()).collect();
                calls.push(match (twist >> 4) % 3 {
                    0 => read(),
                    1 => flaky(),
                    _ => unknown(),
                });
                spread(calls, twist & 64 != 0)
            }
            Shape::RecoveryOutStepsLeft => {
                // Bit 0 is the recovery budget's; 1 the failing call; 2 together.
                let recovery = self.rules.recovery_budget as usize;
                let failing = if twist & 2 != 0 { unknown } else { flaky };
                let mut calls: Vec<Call> = (0..recovery).map(|_| failing()).collect();
                // A call after recovery is gone is nudged again, and the loop goes on.
                calls.push(read());
                spread(calls, twist & 4 != 0)
            }
            Shape::TerminalBeside => {
                let terminal = match twist % 3 {
                    0 => call("final_answer", json!({"message": "All done."})),
                    1 => call("fail", json!({"reason": "Giving up."})),
                    _ => call("ask_user", json!({"question": "Which one?"})),
                };
                // A child that would answer at once, if its spawn ran (it must not).
                let other = match (twist >> 3) % 5 {
                    0 => read(),
                    1 => flaky(),
                    2 => unknown(),
                    3 => call("Agent", json!({"task": self.child(&[answer(1)], false)})),
                    _ => spawn(self.child(&[answer(1)], false), None, None),
                };
                let calls = if twist & 4 != 0 { vec![other, terminal] } else { vec![terminal, other] };
                vec![reply(calls, 1)]
            }
            Shape::BackgroundReplyAtLimit => {
                // Bit 0 is the limit's source (`shape_knobs`); 1 two steps; 2 a wait after
                // (else text).
                let steps = if twist & 2 != 0 {
                    // 100 ms, the `Read` tool's 10 ms, then 140 ms: the last reply at the limit.
                    vec![ChildStep::Read(100), answer(SHAPE_LIMIT_MS - 110)]
                } else {
                    vec![answer(SHAPE_LIMIT_MS)]
                };
                let prompt = self.child(&steps, true);
                let given = (twist & 1 == 0).then_some(SHAPE_LIMIT_MS);
                self.spawned += 1;
                // Then the root waits for it (a wait, or text, which holds the turn open):
                // a free reply next could end the turn and cancel it.
                let then = match twist & 4 {
                    0 => text("Let me wait for it."),
                    _ => reply(vec![call("subagent.wait", json!({"task_ids": ["$task1"]}))], 1),
                };
                vec![reply(vec![spawn(prompt, None, given)], 1), then]
            }
            Shape::SafeToolDenied => {
                // Through the gate like any root call: the safe `Read` runs unasked, and a
                // `Flaky` beside it (bit 5) is asked about or refused as its tag and the
                // policy say.
                let spawned = self.spawned;
                let mut calls = vec![self.root_call(&RootCall::Read(1), spawned)];
                if twist & 32 != 0 {
                    calls.push(self.root_call(&RootCall::Flaky, spawned));
                }
                vec![reply(calls, 1)]
            }
            Shape::ForkBeside => {
                let session = if twist & 16 != 0 { "inherit" } else { "fork" };
                let steps = if twist & 32 != 0 { vec![ChildStep::Read(1), answer(1)] } else { vec![answer(1)] };
                let fork = |c: &mut Compiler| {
                    c.spawned += 1;
                    spawn(c.child(&steps, false), Some(session), None)
                };
                let other = |c: &mut Compiler| match twist % 4 {
                    0 => read(),
                    1 => flaky(),
                    2 => {
                        c.spawned += 1;
                        spawn(c.child(&[answer(1)], false), Some("temp"), None)
                    }
                    _ => fork(c),
                };
                // Bits 2-3: the other call before the fork, after it, or on both sides.
                let place = (twist >> 2) % 3;
                let mut calls = Vec::new();
                if place != 1 {
                    calls.push(other(self));
                }
                calls.push(fork(self));
                if place != 0 {
                    calls.push(other(self));
                }
                // Text holds the turn open for the children.
                vec![reply(calls, 1), text("Let me wait for them.")]
            }
            Shape::Refund => {
                // Bits 0-1: how the child ends early; 2-3 the budget (`shape_knobs`).
                let rules = &self.rules;
                let left_after_spawn = rules.root_step_budget.saturating_sub(rules.spawn_cost);
                let left = left_after_spawn - left_after_spawn.min(rules.child_step_cap);
                let spawn_call = match twist % 4 {
                    0 => call("Agent", json!({"task": self.child(&[answer(1)], false)})),
                    1 => call("Agent", json!({"task": self.child(&[ChildStep::Fail], false)})),
                    2 => spawn(self.child(&[answer(1)], false), None, None),
                    _ => spawn(self.child(&[ChildStep::Hang], true), None, Some(100)),
                };
                if twist % 4 >= 2 {
                    self.spawned += 1;
                }
                // The child has ended (and a background one's result is in) before the
                // parent's last step is spent.
                let mut replies = vec![reply(vec![spawn_call], 1)];
                replies.extend((0..left).map(|_| reply(vec![read()], 150)));
                replies
            }
            Shape::FractionalLimit => {
                // Bits 0-1: the limit's source (`shape_knobs`); 2 the late child first; 3 and
                // 4 each child's script.
                let early = if twist & 8 != 0 {
                    // Asks again at 1,490 ms, answers at 1,499 ms.
                    vec![ChildStep::Read(FRACTIONAL_MS - 20), answer(9)]
                } else {
                    vec![answer(FRACTIONAL_MS - 1)]
                };
                let late = if twist & 16 != 0 {
                    // Its `Read` ends at 1,505 ms, after the limit: it must not ask again.
                    vec![ChildStep::Read(FRACTIONAL_MS - 5), answer(1)]
                } else {
                    vec![answer(FRACTIONAL_MS + 1)]
                };
                let mut scripts = [early, late];
                if twist & 4 != 0 {
                    scripts.reverse();
                }
                let calls: Vec<Call> = scripts
                    .iter()
                    .map(|steps| {
                        let task = self.child(steps, true);
                        match twist % 3 {
                            0 => call("Agent", json!({ "task": task })),
                            source => {
                                self.spawned += 1;
                                spawn(task, None, (source == 1).then_some(FRACTIONAL_MS))
                            }
                        }
                    })
                    .collect();
                // Text holds the turn open for background children, once for each: the first
                // to end wakes the root, and a free reply then could end the turn and cancel
                // the other.
                vec![reply(calls, 1), text("Let me wait for them."), text("Let me wait for the other.")]
            }
        }
    }

    /// Whether a `subagent` call with these arguments is refused (and so starts no task): a
    /// blank prompt, a missing profile, a tool or a skill nobody has (`bub.spawn.*`).
    fn refused(&self, grant: Option<&Grant>, extras: &SpawnExtras, profile: bool) -> bool {
        let skills = match extras.skills {
            Some(SkillGrant::Empty) | None => profile.then(|| self.profile.skill_names()).flatten(),
            Some(grant) => Some(grant.names()),
        };
        let unknown_skill = skills.is_some_and(|names| {
            !names.is_empty()
                && (!self.skills || names.iter().any(|n| !SKILLS.contains(&n.trim().to_lowercase().as_str())))
        });
        extras.blank
            || matches!(extras.agent, AgentPick::Missing | AgentPick::Respelled)
            || (self.profile.undeclared && matches!(extras.agent, AgentPick::Helper | AgentPick::Padded))
            || matches!(grant, Some(Grant::Unknown { .. }))
            || unknown_skill
    }

    fn root_call(&mut self, c: &RootCall, spawned_before: usize) -> Call {
        let runs = self.ask(c.tool());
        let rules = &self.rules;
        match c {
            RootCall::Read(latency) => call("Read", json!({"path": format!("file-{latency}.md")})),
            RootCall::Flaky => call("Flaky", json!({})),
            RootCall::Unknown { .. } => {
                Call { tool: c.tool().into(), args: json!({}), undeclared: true, bad_args: false }
            }
            RootCall::Agent { child, form, tools } => {
                let task = self.child(child, rules.agent_timeout.is_some_and(|t| !t.is_zero()));
                let task = match form {
                    TaskForm::Plain => task,
                    TaskForm::Blank => "   ".to_string(),
                    TaskForm::Padded => format!("  {task}\n"),
                };
                let mut args = json!({ "task": task });
                if *tools {
                    args["tools"] = json!("Read");
                }
                call("Agent", args)
            }
            RootCall::Spawn { child, session, timeout_ms, grant, extras } => {
                let profile = !self.profile.undeclared && matches!(extras.agent, AgentPick::Helper | AgentPick::Padded);
                // The first source that gives a limit decides, and 0 is none (`bub.timeout.*`).
                let default = rules.subagent_default_timeout.map(|t| t.as_millis() as u64);
                // A negative limit counts as not given (`bub.timeout.invalid-ignored`).
                let given = timeout_ms.and_then(|ms| u64::try_from(ms).ok()).filter(|_| !extras.timeout_text);
                let of_profile = if profile { self.profile.timeout_ms } else { None };
                let limit = given.or(of_profile).or(default);
                // A child hangs only under a limit inside the run's horizon.
                let applies = limit.is_some_and(|ms| ms > 0 && ms < CLAMPED_MS as u64);
                let prompt = self.child(child, applies);
                let name = match session {
                    SessionPick::Default => None,
                    SessionPick::Temp => Some("temp".to_string()),
                    SessionPick::Fork => Some("fork".to_string()),
                    SessionPick::Inherit => Some("inherit".to_string()),
                    SessionPick::Named(n) => Some(format!("notes-{n}")),
                    SessionPick::NamedLikeTemp => Some("temp/notes".to_string()),
                    SessionPick::KindCapitalised(fork) => Some(if *fork { "Fork" } else { "Temp" }.to_string()),
                };
                let named = name.clone().filter(|n| !matches!(n.as_str(), "temp" | "fork" | "inherit"));
                let maybe_in_use = named.as_ref().is_some_and(|n| self.named.contains(n));
                // A refused call starts no task for later calls to name.
                if runs && !self.refused(grant.as_ref(), extras, profile) && !maybe_in_use {
                    self.spawned += 1;
                }
                self.named.extend(named);
                let prompt = if extras.blank { "  ".to_string() } else { prompt };
                let mut args = json!({"prompt": prompt});
                if let Some(name) = name {
                    args["session"] = json!(name);
                }
                if let Some(ms) = timeout_ms {
                    args["timeout_seconds"] = json!(*ms as f64 / 1000.0);
                }
                if extras.timeout_text {
                    args["timeout_seconds"] = json!("0.1");
                }
                match extras.agent {
                    AgentPick::None => {}
                    AgentPick::Helper => args["agent"] = json!(self.profile.name()),
                    AgentPick::Padded => args["agent"] = json!(format!(" {} ", self.profile.name())),
                    AgentPick::Missing => args["agent"] = json!("nosuch"),
                    AgentPick::Respelled => args["agent"] = json!(self.profile.respelled()),
                }
                if let Some(grant) = grant {
                    args["allowed_tools"] = grant.arg();
                }
                if let Some(skills) = extras.skills {
                    args["allowed_skills"] = skills.arg();
                }
                if extras.model {
                    args["model"] = json!("model-c");
                }
                if extras.effort {
                    args["reasoning_effort"] = json!("low");
                }
                // A comma-separated string is a form the rules accept
                // (`bub.child.allowed-tools-string`) but the scenario format asks to mark, as
                // it asks for a profile name that is not the scenario's as written.
                let bad_args = matches!(grant, Some(Grant::Names { string: true, .. }))
                    || matches!(extras.agent, AgentPick::Padded | AgentPick::Missing | AgentPick::Respelled)
                    || (self.profile.undeclared && matches!(extras.agent, AgentPick::Helper))
                    || matches!(session, SessionPick::KindCapitalised(_))
                    || extras.timeout_text;
                Call { bad_args, ..call("subagent", args) }
            }
            RootCall::Wait { tasks, timeout_ms } => {
                let mut args = json!({});
                if let Some(ms) = timeout_ms {
                    args["timeout_seconds"] = json!(*ms as f64 / 1000.0);
                }
                if !tasks.is_empty() {
                    let ids: Vec<String> = tasks.iter().map(|t| self.task_ref(*t, spawned_before, false)).collect();
                    args["task_ids"] = json!(ids);
                }
                call("subagent.wait", args)
            }
            RootCall::Send(t, form) => {
                self.sends = true;
                self.send(*t, *form, spawned_before)
            }
            RootCall::Cancel(t) => call("subagent.cancel", json!({"task_id": self.task_ref(*t, spawned_before, true)})),
        }
    }

    /// A `subagent.send` of `CONTINUATION` to the earlier task `pick` names.
    fn send(&self, pick: u8, form: TaskForm, spawned_before: usize) -> Call {
        call(
            "subagent.send",
            json!({
                "task_id": self.task_ref(pick, spawned_before, true),
                "message": match form {
                    TaskForm::Plain => CONTINUATION.to_string(),
                    TaskForm::Blank => " ".to_string(),
                    TaskForm::Padded => format!("  {CONTINUATION}\n"),
                },
            }),
        )
    }
}

impl RootCall {
    /// The tool it calls.
    fn tool(&self) -> &'static str {
        match self {
            RootCall::Read(_) => "Read",
            RootCall::Flaky => "Flaky",
            RootCall::Unknown { which } => UNKNOWN_NAMES[*which],
            RootCall::Agent { .. } => "Agent",
            RootCall::Spawn { .. } => "subagent",
            RootCall::Wait { .. } => "subagent.wait",
            RootCall::Send(..) => "subagent.send",
            RootCall::Cancel(_) => "subagent.cancel",
        }
    }
}

impl GatePlan {
    /// Whether the gate lets a call of `tool` run without asking (`roku.approval.risk-classes`).
    fn safe(&self, tool: &str) -> bool {
        self.tag(tool) == Some(RiskTag::Safe)
    }

    /// The tools the policy refuses outright.
    fn policy(&self) -> Vec<&'static str> {
        let listed = [("Read", self.read.1), ("Flaky", self.flaky.1), ("Frobnicate", self.unknown_listed)];
        let named = listed.iter().filter(|(_, on)| *on).map(|(name, _)| *name);
        let spawning: &[&str] = if self.children { &[] } else { &SPAWNING };
        named.chain(self.safe_listed).chain(spawning.iter().copied()).collect()
    }

    /// Whether the gate asks the user about a call of `tool` (one of the catalog's, an
    /// undeclared name or a spawning one; terminal calls never reach here).
    fn asks(&self, tool: &str) -> bool {
        !self.safe(tool) && !self.policy().contains(&tool)
    }

    /// The tag of the catalog tool `name`.
    fn tag(&self, name: &str) -> Option<RiskTag> {
        match name {
            "Read" => self.read.0,
            "Flaky" => self.flaky.0,
            _ => None,
        }
    }
}

impl Grant {
    /// The `allowed_tools` argument.
    fn arg(&self) -> serde_json::Value {
        match self {
            Grant::Empty => json!([]),
            Grant::Names { which, spelling, string, reversed } => {
                let mut names: Vec<String> = ["Read", "Flaky", "final_answer", "fail"]
                    .iter()
                    .enumerate()
                    .filter(|(bit, _)| which & (1 << bit) != 0)
                    .map(|(_, name)| SPELLINGS[*spelling](name))
                    .collect();
                if *reversed {
                    names.reverse();
                }
                if *string { json!(names.join(",")) } else { json!(names) }
            }
            Grant::Unknown { several: false } => json!(["Read", "Write"]),
            // `Beta` sorts before `alpha` byte by byte, after it when case is ignored;
            // `final-answer` is no spelling of `final_answer` (only `.` stands for `_`).
            Grant::Unknown { several: true } => {
                json!(["zeta", "Read", "alpha", " zeta", "Beta", "final-answer", "Agent", "subagent.wait"])
            }
        }
    }
}

impl SkillGrant {
    fn names(&self) -> Vec<&'static str> {
        match self {
            SkillGrant::Empty => vec![],
            SkillGrant::One => vec!["deploy"],
            SkillGrant::Spelled => vec![" REVIEW "],
            SkillGrant::Unknown => vec!["nosuch", "deploy", "alpha"],
        }
    }

    /// The `allowed_skills` argument.
    fn arg(&self) -> serde_json::Value {
        json!(self.names())
    }
}

impl ProfilePlan {
    /// The profile's `skills`.
    fn skill_names(&self) -> Option<Vec<&'static str>> {
        match self.skills {
            0 => None,
            1 => Some(vec!["deploy"]),
            _ => Some(vec![" Review "]),
        }
    }

    /// The profile as a file's text: front matter, then the body.
    fn file_text(&self, form: FileForm) -> String {
        let spec = self.spec();
        // JSON strings and lists are YAML too, and keep the names' spaces and case.
        let list = |names: &[String]| match form.joined {
            true => json!(names.join(", ")).to_string(),
            false => json!(names).to_string(),
        };
        let mut front = Vec::new();
        if form.named {
            front.push(format!("name: {}", spec.name));
        }
        front.push(format!("description: {}", spec.description));
        front.extend(spec.model.map(|m| format!("model: {m}")));
        front.extend(spec.reasoning_effort.map(|r| format!("reasoning_effort: {r}")));
        front.extend(spec.tools.map(|t| format!("tools: {}", list(&t))));
        front.extend(spec.skills.map(|s| format!("skills: {}", list(&s))));
        front.extend(spec.timeout_seconds.map(|t| format!("timeout_seconds: {t}")));
        let text = format!("---\n{}\n---\n{}", front.join("\n"), spec.body);
        if form.crlf { text.replace('\n', "\r\n") } else { text }
    }

    fn name(&self) -> &'static str {
        if self.dotted { "code.helper" } else { "helper" }
    }

    /// The name spelled as a tool name could be, which names no profile.
    fn respelled(&self) -> &'static str {
        if self.dotted { "code_helper" } else { "Helper" }
    }

    /// The profile file's name: the profile's name, or another name when its front matter
    /// names it (the `name` field wins, `bub.profile.fields`).
    fn file_name(&self, form: FileForm) -> String {
        if form.named { format!("{}-file.md", self.name()) } else { format!("{}.md", self.name()) }
    }

    fn spec(&self) -> ProfileSpec {
        let strings = |names: Vec<&str>| names.into_iter().map(str::to_string).collect();
        ProfileSpec {
            name: self.name().into(),
            description: "Looks things up".into(),
            model: self.model.then(|| "model-b".into()),
            reasoning_effort: self.effort.then(|| "medium".into()),
            tools: match self.tools {
                0 => None,
                1 => Some(vec![]),
                2 => Some(strings(vec!["Read"])),
                _ => Some(strings(vec![" flaky", "FAIL"])),
            },
            skills: self.skill_names().map(strings),
            timeout_seconds: self.timeout_ms.map(|ms| ms as f64 / 1000.0),
            body: BODIES[self.body].to_string(),
        }
    }
}

fn lane() -> Lane {
    Lane::default()
}

impl Plan {
    /// The knobs, with what the rare situation needs set over the drawn ones: the family it
    /// uses on, a budget that pays for its spawns, a depth limit that lets them run, and its
    /// cap or time limit.
    fn rare_knobs(&self) -> Knobs {
        let mut k = self.knobs.clone();
        if self.shape.is_some() {
            return self.shape_knobs(k);
        }
        let Some(rare) = self.rare else { return k };
        k.root_step_budget = Some(40);
        k.spawn_cost = Some(1);
        k.child_step_cap = Some(2);
        k.depth_limit = Some(k.depth_limit.unwrap_or(1).max(1));
        match rare {
            Rare::QueuedCancelled | Rare::SendOnSessionInUse => {
                k.subagent_tools = Some(true);
                // No limit stops the children before the replies that need them running.
                k.default_timeout_ms = Some(None);
                k.max_concurrency = Some(if rare == Rare::QueuedCancelled { 1 } else { 2 });
            }
            Rare::ForegroundReplyAtLimit => {
                k.agent_tool = Some(true);
                k.agent_timeout_ms = Some(Some(RARE_LIMIT_MS));
            }
        }
        k
    }

    /// The knobs with what the model-side shape needs set over the drawn ones (its budgets,
    /// the family its calls use, a depth limit that lets them run, its time limits).
    fn shape_knobs(&self, mut k: Knobs) -> Knobs {
        let Some(shape) = self.shape else { return k };
        let twist = self.twist;
        let spawning = |k: &mut Knobs| {
            k.root_step_budget = Some(40);
            k.spawn_cost = Some(1);
            k.child_step_cap = Some(3);
            k.depth_limit = Some(k.depth_limit.unwrap_or(1).max(1));
            k.max_concurrency = Some(4);
        };
        match shape {
            Shape::BudgetOutRecoveryLeft => {
                k.root_step_budget = Some(2 + u32::from(twist % 3));
                k.recovery_budget = Some(2 + u32::from((twist >> 2) % 4));
            }
            Shape::RecoveryOutStepsLeft => {
                k.root_step_budget = Some(12);
                k.recovery_budget = Some(1 + u32::from(twist % 2));
            }
            Shape::TerminalBeside => {
                spawning(&mut k);
                match (twist >> 3) % 5 {
                    3 => k.agent_tool = Some(true),
                    4 => k.subagent_tools = Some(true),
                    _ => {}
                }
            }
            Shape::BackgroundReplyAtLimit => {
                spawning(&mut k);
                k.subagent_tools = Some(true);
                if twist & 1 != 0 {
                    k.default_timeout_ms = Some(Some(SHAPE_LIMIT_MS));
                }
            }
            Shape::SafeToolDenied => {}
            Shape::ForkBeside => {
                spawning(&mut k);
                k.subagent_tools = Some(true);
                // No limit stops a child before it answers.
                k.default_timeout_ms = Some(None);
            }
            Shape::Refund => {
                spawning(&mut k);
                k.root_step_budget = Some(6 + u32::from((twist >> 2) % 3));
                match twist % 4 {
                    0 | 1 => {
                        k.agent_tool = Some(true);
                        // The child answers at once: no limit may cut it short.
                        k.agent_timeout_ms = Some(None);
                    }
                    _ => k.subagent_tools = Some(true),
                }
            }
            Shape::FractionalLimit => {
                spawning(&mut k);
                match twist % 3 {
                    0 => {
                        k.agent_tool = Some(true);
                        k.agent_timeout_ms = Some(Some(FRACTIONAL_MS));
                    }
                    source => {
                        k.subagent_tools = Some(true);
                        k.default_timeout_ms = Some((source == 2).then_some(FRACTIONAL_MS));
                    }
                }
            }
        }
        k
    }

    /// The gate the plan runs under: the shape's for [`Shape::SafeToolDenied`], none for
    /// another shape or a rare situation (their calls are not asked about), else the drawn one.
    fn gate(&self) -> Option<GatePlan> {
        match self.shape {
            Some(Shape::SafeToolDenied) => Some(self.shape_gate()),
            Some(_) => None,
            None => self.gate.clone().filter(|_| self.rare.is_none()),
        }
    }

    /// The gate of [`Shape::SafeToolDenied`]: `Read` tagged `risk:safe` and listed; `Flaky`'s
    /// tag (bits 0-1), whether it is listed (bit 2), whether the unknown name is (bit 3) and the
    /// user's first answer (bit 4) from the twist. The policy refuses spawning calls.
    fn shape_gate(&self) -> GatePlan {
        let twist = self.twist;
        GatePlan {
            read: (Some(RiskTag::Safe), true),
            flaky: ([Some(RiskTag::Safe), None, Some(RiskTag::Write)][usize::from(twist % 3)], twist & 4 != 0),
            unknown_listed: twist & 8 != 0,
            safe_listed: None,
            children: false,
            answers: vec![twist & 16 != 0, true],
        }
    }

    /// Which families and features the shape needs: (foreground, background, risk gate).
    fn shape_needs(&self) -> (bool, bool, bool) {
        let twist = self.twist;
        match self.shape {
            None | Some(Shape::BudgetOutRecoveryLeft | Shape::RecoveryOutStepsLeft) => (false, false, false),
            Some(Shape::TerminalBeside) => ((twist >> 3) % 5 == 3, (twist >> 3) % 5 == 4, false),
            Some(Shape::BackgroundReplyAtLimit | Shape::ForkBeside) => (false, true, false),
            Some(Shape::SafeToolDenied) => (false, false, true),
            Some(Shape::Refund) => (twist % 4 < 2, twist % 4 >= 2, false),
            Some(Shape::FractionalLimit) => (twist % 3 == 0, twist % 3 != 0, false),
        }
    }

    /// The tools of the root's calls the gate asks about, in order (a reply with a terminal
    /// call runs none of its calls, `roku.terminal.scan-first`: only `Calls` replies run any).
    fn questions(&self, gate: &GatePlan) -> Vec<&'static str> {
        let calls = self.root.iter().filter_map(|r| match r {
            RootReply::Calls(calls, _) => Some(calls),
            _ => None,
        });
        calls.flatten().map(RootCall::tool).filter(|tool| gate.asks(tool)).collect()
    }

    /// The plan without what a core with `capabilities` lacks (see [`scenario_for`](super::scenario_for)).
    pub fn within(mut self, capabilities: crate::sut::Capabilities) -> Plan {
        if !capabilities.steering {
            self.steer.clear();
        }
        if !capabilities.risk_gate {
            self.gate = None;
        }
        // Only the family a preset adds is dropped, to what the preset itself gives.
        if !capabilities.background && !self.knobs.bub && self.knobs.subagent_tools == Some(true) {
            self.knobs.subagent_tools = None;
        }
        if !capabilities.foreground && self.knobs.bub && self.knobs.agent_tool == Some(true) {
            self.knobs.agent_tool = None;
        }
        let needs_background = matches!(self.rare, Some(Rare::QueuedCancelled | Rare::SendOnSessionInUse));
        let needs_foreground = matches!(self.rare, Some(Rare::ForegroundReplyAtLimit));
        if (needs_background && !capabilities.background) || (needs_foreground && !capabilities.foreground) {
            self.rare = None;
        }
        let (foreground, background, gate) = self.shape_needs();
        if (foreground && !capabilities.foreground)
            || (background && !capabilities.background)
            || (gate && !capabilities.risk_gate)
        {
            self.shape = None;
        }
        self
    }

    /// The scenario this plan stands for.
    pub fn compile(&self) -> Scenario {
        let k = &self.rare_knobs();
        let spec = k.spec();
        let mut c = Compiler {
            rules: spec.resolve(),
            lanes: Vec::new(),
            tasks: 0,
            spawned: 0,
            named: Vec::new(),
            sends: false,
            gate: self.gate(),
            answers: Vec::new(),
            asking_child: self.gate().is_some_and(|gate| {
                let questions = self.questions(&gate);
                questions.last() == Some(&"Agent") && questions.iter().filter(|t| **t == "Agent").count() == 1
            }),
            profile: self.profile.clone(),
            seed: k.seed,
            // Skills are Bub's: a Roku session has none.
            skills: self.skills && k.bub,
        };
        let mut root = match (self.shape, self.rare) {
            (Some(shape), _) => c.shape(shape, self.twist),
            (None, Some(rare)) => c.rare(rare),
            (None, None) => Vec::new(),
        };
        // The nudge of a budget run out is read by the model only in the next turn.
        let mut turn_gaps = self.turns.clone();
        if self.shape == Some(Shape::BudgetOutRecoveryLeft) && turn_gaps.is_empty() {
            turn_gaps.push(None);
        }
        for r in &self.root {
            root.push(match r {
                RootReply::Calls(calls, latency) => {
                    // Task ids of this reply's own spawns are not visible to its other calls.
                    let before = c.spawned;
                    let calls = calls.iter().map(|call| c.root_call(call, before)).collect();
                    reply(calls, *latency)
                }
                RootReply::Text => text("Here is what I found."),
                RootReply::Blank => text("  "),
                // A left-out `message` is the empty message (`roku.terminal.final-answer-default`);
                // `reason` is required by `fail`'s schema, so a model that leaves it out sends
                // bad arguments on purpose, and the default reason answers
                // (`roku.terminal.fail-default`); an empty one is a reason all the same.
                RootReply::FinalAnswer(arg, said) => terminal("final_answer", "message", "All done.", *arg, *said),
                RootReply::Fail(arg, said) => terminal("fail", "reason", "Giving up.", *arg, *said),
                RootReply::AskUser => reply(vec![call("ask_user", json!({"question": "Which one?"}))], 1),
                RootReply::LlmError => Reply { error: Some("overloaded".into()), latency_ms: 1, ..Reply::default() },
                RootReply::ReadThenFinal => {
                    reply(vec![call("Read", json!({"path": "x"})), call("final_answer", json!({"message": "ok"}))], 1)
                }
                RootReply::TwoTerminals(which) => {
                    let fail = call("fail", json!({"reason": "Cannot go on."}));
                    let done = call("final_answer", json!({"message": "Finished."}));
                    let ask = call("ask_user", json!({"question": "Go on?"}));
                    let calls = match which {
                        0 => vec![fail, done],
                        1 => vec![done, fail],
                        _ => vec![ask, done],
                    };
                    reply(calls, 1)
                }
            });
        }
        // Enough plain answers that the root never runs out: each ends a turn or reads one
        // more background result.
        let spare = c.spawned + turn_gaps.len() + 3;
        root.extend((0..spare).map(|_| text("Summary.")));
        let approval = match self.gate() {
            Some(gate) => ApprovalSpec {
                mode: GateMode::Risk,
                policy_deny: gate.policy().into_iter().map(str::to_string).collect(),
                answers: std::mem::take(&mut c.answers),
            },
            None => ApprovalSpec::default(),
        };
        let gate = self.gate();
        let tag = |name: &str| gate.as_ref().and_then(|gate| gate.tag(name));
        let mut lanes = vec![Lane { agent: Some("main".into()), replies: root, ..lane() }];
        lanes.extend(c.lanes);
        if c.sends {
            // A task cancelled while queued never asked the model; continued by a `send`, its
            // first request has the message as its task. Repeatable: any number of such
            // children, or none, may ask.
            let spare = Reply { repeatable: true, ..text("spare answer") };
            lanes.push(Lane { task_contains: Some(CONTINUATION.into()), replies: vec![spare], ..lane() });
        }

        let mut turns = vec![Turn {
            user: "Please investigate.".into(),
            user_free: false,
            at_ms: None,
            request_id: None,
            expect: TurnExpect::default(),
        }];
        let mut at = 0;
        for (i, gap) in turn_gaps.iter().enumerate() {
            let at_ms = gap.map(|g| {
                at += g;
                at
            });
            turns.push(Turn {
                user: format!("Follow-up {}.", i + 1),
                user_free: false,
                at_ms,
                request_id: None,
                expect: TurnExpect::default(),
            });
        }
        Scenario {
            format: None,
            name: "generated".into(),
            description: String::new(),
            rules: spec,
            seed: k.seed,
            // Half the sessions carry a reasoning effort, so the context oracle sees it handed
            // down (or lost) on every path; which half follows the scenario's seed.
            session: SessionSpec {
                model: Some("model-a".into()),
                reasoning_effort: (k.seed % 2 == 0).then(|| "high".into()),
                // Two sessions in three have a base system prompt, so the parts laid out after
                // it (profile listing, body, skills line) are joined to something visible.
                // One of those has whitespace at both ends: only the start is trimmed.
                system_prompt: match (k.seed >> 1) % 3 {
                    0 => String::new(),
                    1 => "You help.".into(),
                    _ => "  You help.\nBe brief.\n".into(),
                },
                // Half carry memory, which every request of every agent carries as it is.
                memory: if (k.seed >> 3) % 2 == 0 {
                    vec!["user likes brevity".into(), "repo is rehearsal".into()]
                } else {
                    Vec::new()
                },
                skills: if c.skills { SKILLS.iter().map(|s| s.to_string()).collect() } else { Vec::new() },
                ..SessionSpec::default()
            },
            approval,
            tools: vec![
                ToolSpec {
                    name: "Read".into(),
                    description: String::new(),
                    latency_ms: 10,
                    results: vec![ToolResult {
                        text: Some(Text::Plain("contents".into())),
                        error: None,
                        latency_ms: None,
                    }],
                    risk: tag("Read"),
                    handler: None,
                },
                ToolSpec {
                    name: "Flaky".into(),
                    description: String::new(),
                    latency_ms: 1,
                    results: vec![ToolResult {
                        text: None,
                        error: Some(Text::Plain("I/O error".into())),
                        latency_ms: None,
                    }],
                    risk: tag("Flaky"),
                    handler: None,
                },
            ],
            profiles: if self.profile.file.is_none() && !self.profile.undeclared {
                vec![self.profile.spec()]
            } else {
                Vec::new()
            },
            profile_dirs: Default::default(),
            profile_files: self
                .profile
                .file
                .filter(|_| !self.profile.undeclared)
                .map(|form| (self.profile.file_name(form), self.profile.file_text(form)))
                .into_iter()
                .collect(),
            lanes,
            turns,
            // Steering would wake the root while a shape's children still run.
            steer: self
                .steer
                .iter()
                .filter(|_| !self.shape.is_some_and(|shape| shape.spawns()))
                .map(|at_ms| Steer { at_ms: *at_ms, message: format!("steer at {at_ms}") })
                .collect(),
            expect: Expect::default(),
            limits: Limits::default(),
            runtime_limits: Default::default(),
        }
    }
}

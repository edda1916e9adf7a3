//! The scripted mock LLM: one script ("lane") per agent, chosen by a selector.
//!
//! The first request of an agent binds it to the one lane whose selector matches: `agent`
//! (its alias: `main`, or `main/2` for the root's second child), `task_contains` (a child
//! whose task holds the text), or `profile` (a child running that profile). No lane, or two,
//! is an authoring error naming the agent and its task. Each request takes the lane's next
//! reply, after checking what the core sent against the reply's `check`; an exhausted lane
//! halts the run naming the lane and the call number. Replies arrive after their virtual
//! latency; `hang` never arrives.
//!
//! Checks read the run's exchange log (to compare a fork child's first request with its
//! parent's conversation at the call); `$taskN` in call arguments resolves against the task ids
//! the core reported, as the request shows them.

use std::collections::{BTreeMap, BTreeSet};

use aho_corasick::AhoCorasick;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::dialect::Dialect;
use crate::evidence::attribution::{Attribution, Attributor, Configured, ModelSide, SidePattern};
use crate::evidence::{Due, fork_mismatch};
use crate::scenario::{Check, Lane, Reply, SideRequest, Text, When, with_task_ids};
use crate::sut::AgentId;
use crate::sut::llm::{BoxFuture, Llm, LlmError, LlmReply, LlmRequest, Message, Role, ToolCall, Transcript};
use crate::trace::{quoted, text_difference};

use super::clock::Clock;
use super::exchanges::ExchangeLog;
use super::recorder::Recorder;
use super::{Halt, Stop};

#[derive(Default)]
struct State {
    bindings: BTreeMap<AgentId, usize>,
    /// Per lane: the requests it answered.
    used: Vec<usize>,
    /// Per lane: the first reply the next request may take.
    cursor: Vec<usize>,
    /// Per lane, per reply: the requests it answered.
    uses: Vec<Vec<usize>>,
    seen: BTreeMap<AgentId, Seen>,
    /// In model-side mode: the calls numbered so far (their ids carry no alias).
    calls: usize,
}

/// Who a request is from, as the lanes select: the core's report in the default mode, the
/// attribution's in model-side mode.
pub(crate) struct Who {
    alias: AgentId,
    goal: Arc<str>,
    profile: Option<Arc<str>>,
}

impl Who {
    /// An agent as the lanes select it: its alias, goal and profile.
    pub(crate) fn new(alias: AgentId, goal: Arc<str>, profile: Option<Arc<str>>) -> Who {
        Who { alias, goal, profile }
    }
}

/// A scenario's lanes, prepared once and shared by every run of the scenario: the selectors
/// indexed, and each scripted call's arguments stored once.
pub struct Script {
    lanes: Vec<Lane>,
    selectors: Selectors,
    /// Per lane, per reply, per call: the arguments, and whether they refer to `$taskN`.
    args: Vec<Vec<Vec<PreparedArgs>>>,
}

/// A scripted call's arguments, stored once, and whether they refer to `$taskN`.
type PreparedArgs = (Arc<serde_json::Value>, bool);

impl Script {
    /// The script of `lanes`.
    pub fn new(lanes: &[Lane]) -> Script {
        let mut lanes = lanes.to_vec();
        // Each call's arguments move into a shared value (the lanes keep a null in their place).
        let args = lanes
            .iter_mut()
            .map(|lane| {
                lane.replies
                    .iter_mut()
                    .map(|reply| {
                        let calls = reply.calls.iter_mut();
                        calls
                            .map(|c| (refers_to_tasks(&c.args), std::mem::take(&mut c.args)))
                            .map(|(r, a)| (Arc::new(a), r))
                            .collect()
                    })
                    .collect()
            })
            .collect();
        let selectors = Selectors::new(&lanes);
        Script { lanes, selectors, args }
    }
}

/// The reply a request takes: a scripted one, or one a lane's function made. A pointer
/// either way: a `Reply` is large, and this is held across the reply's latency in every
/// request's future (a `Cow<Reply>` made each of them copy hundreds of bytes around).
pub(crate) enum Chosen<'a> {
    Scripted(&'a Reply),
    Made(Box<Reply>),
}

impl std::ops::Deref for Chosen<'_> {
    type Target = Reply;

    fn deref(&self) -> &Reply {
        match self {
            Chosen::Scripted(reply) => reply,
            Chosen::Made(reply) => reply,
        }
    }
}

/// The engine.
pub struct ScriptedLlm {
    script: Arc<Script>,
    state: Mutex<State>,
    stop: Arc<Stop>,
    /// Where replies wait out their latency.
    clock: Arc<Clock>,
    /// What the model received so far (for `fork_of_parent`).
    log: Arc<ExchangeLog>,
    /// The task ids the core reported (for `$taskN`).
    recorder: Arc<Recorder>,
    /// The run is in an explored tie order: checks marked `order_dependent` are skipped.
    explored: bool,
    /// Model-side mode: lanes are chosen by the attributed alias, and call ids carry none.
    attributor: Option<Mutex<Attributor>>,
    /// Where `$taskN` reads task ids instead of the core's reports: over the wire, the ids
    /// the attribution read in the runtime's spawn results.
    task_ids: Option<Arc<Mutex<Vec<String>>>>,
    /// Model-side mode: the declared side requests, answered outside every lane.
    side: Vec<SideRequest>,
}

impl ScriptedLlm {
    /// An engine playing `script`; authoring errors halt through `stop`; replies arrive on
    /// `clock`. `log` is the run's exchange log and `recorder` its trace recorder, read by
    /// request checks and `$taskN`.
    pub fn new(
        script: Arc<Script>,
        stop: Arc<Stop>,
        clock: Arc<Clock>,
        log: Arc<ExchangeLog>,
        recorder: Arc<Recorder>,
    ) -> ScriptedLlm {
        let used = vec![0; script.lanes.len()];
        let cursor = used.clone();
        let uses = script.lanes.iter().map(|l| vec![0; l.replies.len()]).collect();
        let state = Mutex::new(State { used, cursor, uses, ..State::default() });
        ScriptedLlm {
            script,
            state,
            stop,
            clock,
            log,
            recorder,
            explored: false,
            attributor: None,
            task_ids: None,
            side: Vec::new(),
        }
    }

    /// The same engine in model-side mode: each request is put down to an agent by an
    /// [`Attributor`] reading `dialect`, from what a model endpoint sees (never the alias the
    /// core reports), its lane is chosen by that alias, and the calls' ids are `call_1`,
    /// `call_2`, ... in the order the replies are given, so that they tell no alias.
    /// The attributor knows what the session was configured with (`configured`); a request
    /// matching one of `side` is answered with its reply and put down to no agent.
    pub fn model_side(self, dialect: Arc<Dialect>, configured: Configured, side: Vec<SideRequest>) -> ScriptedLlm {
        let patterns = side.iter().map(|s| SidePattern::last_message_contains(s.contains.clone())).collect();
        let attributor = Attributor::new(dialect, patterns).configured(configured);
        ScriptedLlm { attributor: Some(Mutex::new(attributor)), side, ..self }
    }

    /// The same engine with call ids that carry no alias (`call_1`, `call_2`, ...), lanes chosen
    /// by the alias its caller gives [`ScriptedLlm::answer_now`], and `$taskN` read from
    /// `task_ids`: the wire's engine, whose caller attributes each request itself.
    pub fn for_wire(self, task_ids: Arc<Mutex<Vec<String>>>) -> ScriptedLlm {
        let dialect = Arc::new(Dialect::builtin("generic").expect("a built-in dialect"));
        ScriptedLlm { task_ids: Some(task_ids), ..self.model_side(dialect, Configured::default(), Vec::new()) }
    }

    /// The task ids `$taskN` refers to: the core's reports, or the wire's.
    fn task_ids(&self) -> Vec<String> {
        match &self.task_ids {
            Some(ids) => ids.lock().expect("task id lock poisoned").clone(),
            None => self.recorder.task_ids(),
        }
    }

    /// In model-side mode, the run as the model saw it, with the attributions.
    pub fn model_side_record(&self) -> Option<ModelSide> {
        let attributor = self.attributor.as_ref()?;
        let side = attributor.lock().expect("attributor lock poisoned").record().clone();
        Some(ModelSide { errors_shown: true, ..side })
    }

    fn attributor(&self) -> Option<std::sync::MutexGuard<'_, Attributor>> {
        self.attributor.as_ref().map(|a| a.lock().expect("attributor lock poisoned"))
    }

    /// The same engine for a run in an explored tie order: request checks marked
    /// `order_dependent` are not made.
    pub fn explored(self, explored: bool) -> ScriptedLlm {
        ScriptedLlm { explored, ..self }
    }

    /// How many requests each lane answered.
    pub fn used(&self) -> Vec<usize> {
        self.state.lock().expect("mock lock poisoned").used.clone()
    }

    /// Whether the script has nothing left that must be used: in every lane, each reply from
    /// the cursor on may go unused (optional or repeatable), and no lane answers by a function.
    pub fn used_up(&self) -> bool {
        let st = self.state.lock().expect("mock lock poisoned");
        self.script.lanes.iter().zip(&st.cursor).all(|(lane, cursor)| {
            lane.respond.is_none() && lane.replies.iter().skip(*cursor).all(|r| r.optional || r.repeatable)
        })
    }

    /// How many requests each reply of each lane answered.
    pub fn reply_use(&self) -> Vec<Vec<usize>> {
        self.state.lock().expect("mock lock poisoned").uses.clone()
    }

    /// Binds the request's agent to its lane and takes the lane's next reply.
    ///
    /// This and [`ScriptedLlm::build`] are the engine's interface: the in-process path waits
    /// out the chosen reply's latency on the paused clock between the two; the wire chooses
    /// and builds at once and waits in its own time.
    pub(crate) fn next(
        &self,
        request: &LlmRequest,
        who: &Who,
    ) -> Result<(usize, usize, Option<usize>, Chosen<'_>), String> {
        let mut st = self.state.lock().expect("mock lock poisoned");
        let lane = match st.bindings.get(&who.alias) {
            Some(lane) => *lane,
            None => {
                let matching = self.script.selectors.matching(who);
                match matching[..] {
                    [lane] => {
                        st.bindings.insert(who.alias.clone(), lane);
                        lane
                    }
                    [] => return Err(self.no_lane(request, who, &st)),
                    [a, b, ..] => {
                        return Err(format!(
                            "lanes[{a}] ({}) and lanes[{b}] ({}) both select agent {} (task {}); make the selectors exclusive",
                            self.script.lanes[a].selector(),
                            self.script.lanes[b].selector(),
                            who.alias,
                            quoted(&who.goal)
                        ));
                    }
                }
            }
        };
        let call = st.used[lane] + 1;
        let scripted = &self.script.lanes[lane];
        // The first reply from the cursor that fits the request. Replies that may go unused
        // (optional, repeatable) are passed over when they do not fit, and stay available
        // until a reply that must be used is; that one fits or stops the run.
        let mut index = st.cursor[lane];
        let mut passed = Vec::new();
        let chosen = loop {
            let Some(reply) = scripted.replies.get(index) else { break None };
            let used_up = reply.optional && !reply.repeatable && st.uses[lane][index] > 0;
            let misfit = if used_up {
                Some("used once already".to_string())
            } else {
                reply.when.as_ref().and_then(|when| self.misfit(when, request))
            };
            match misfit {
                None => break Some(index),
                Some(why) if reply.optional || reply.repeatable => {
                    passed.push(format!("replies[{index}] ({why})"));
                    index += 1;
                }
                Some(why) => {
                    return Err(format!(
                        "lanes[{lane}].replies[{index}].when does not hold for {} request #{call}: {why}{}",
                        who.alias,
                        if passed.is_empty() { String::new() } else { format!("; passed over: {}", passed.join(", ")) }
                    ));
                }
            }
        };
        let reply = match (chosen, &scripted.respond) {
            (Some(index), _) => Chosen::Scripted(&scripted.replies[index]),
            // Past the scripted replies, a lane's Rust function answers.
            (None, Some(respond)) => Chosen::Made(Box::new((respond.0)(request))),
            (None, None) => {
                return Err(format!(
                    "lanes[{lane}] ({}) is exhausted: {} asked for call {call}, but the lane scripts {}{}",
                    self.script.lanes[lane].selector(),
                    who.alias,
                    plural(self.script.lanes[lane].replies.len(), "reply", "replies"),
                    if passed.is_empty() {
                        String::new()
                    } else {
                        format!(" and none fits from the cursor on: {}", passed.join(", "))
                    }
                ));
            }
        };
        st.used[lane] = call;
        if let Some(index) = chosen {
            st.uses[lane][index] += 1;
            if !(reply.optional || reply.repeatable) {
                st.cursor[lane] = index + 1;
            }
        } else {
            st.cursor[lane] = scripted.replies.len();
        }
        drop(st);
        let mut failures = Vec::new();
        if let Some(check) = &self.script.lanes[lane].check_every {
            failures
                .extend(self.check(check, request, who).into_iter().map(|f| (format!("lanes[{lane}].check_every"), f)));
        }
        if let Some(check) = &reply.check {
            failures.extend(
                self.check(check, request, who)
                    .into_iter()
                    .map(|f| (format!("{}.check", reply_place(lane, chosen)), f)),
            );
        }
        for (place, failure) in failures {
            self.stop.check_failed(format!("{place}: {} request #{call}: {failure}", who.alias));
        }
        Ok((lane, call, chosen, reply))
    }

    /// Why no lane selects the request's agent, with the lanes there are and the nearest
    /// alias lane that has selected no agent yet.
    fn no_lane(&self, _request: &LlmRequest, who: &Who, st: &State) -> String {
        let lanes = &self.script.lanes;
        let mut message = format!(
            "lanes: no lane selects agent {} (task {}); add a lane with `agent`, `task_contains` or `profile` that selects it",
            who.alias,
            quoted(&who.goal)
        );
        let selectors: Vec<String> =
            lanes.iter().enumerate().map(|(i, l)| format!("lanes[{i}] {}", l.selector())).collect();
        message.push_str(&format!(" (the lanes: {})", selectors.join(", ")));
        // An alias lane that has not selected anyone is the likely slip.
        let idle = lanes.iter().enumerate().filter(|(i, _)| st.used[*i] == 0).filter_map(|(_, l)| l.agent.as_deref());
        if let Some(alias) = crate::scenario::nearest_name(who.alias.as_str(), idle) {
            message.push_str(&format!("; the lane for `{alias}` has selected no agent: did you mean `{}`?", who.alias));
        }
        message
    }

    /// Why `when` does not hold for `request`, or `None` when it holds.
    fn misfit(&self, when: &When, request: &LlmRequest) -> Option<String> {
        let messages = &request.messages;
        let n = messages.len();
        if let Some(want) = when.messages
            && want != n
        {
            return Some(format!("it needs {want} messages, the request holds {n}"));
        }
        if let Some(want) = when.min_messages
            && n < want
        {
            return Some(format!("it needs at least {want} messages, the request holds {n}"));
        }
        // `$taskN` is the N-th task the run queued, in texts and task references alike.
        let ids = self.task_ids();
        let resolve = |text: &str| {
            with_task_ids(text, &ids)
                .map(|t| t.into_owned())
                .map_err(|r| format!("{r} refers to a task the run has not queued"))
        };
        let holds = |text: &str| messages.iter().any(|m| m.content.contains(text));
        let texts = when.contains.iter().map(|t| (t, true)).chain(when.absent.iter().map(|t| (t, false)));
        let scanned = scan_cost(messages);
        for (text, wanted) in texts {
            // As in `check`: building and searching for the text counts against the budget.
            if !self.stop.count_scan(scanned.saturating_add(text.byte_len().map_or(u64::MAX, |b| b as u64))) {
                return Some("the run budget is spent".to_string());
            }
            let text = match resolve(&text.render()) {
                Ok(text) => text,
                Err(why) => return Some(why),
            };
            if holds(&text) != wanted {
                let which = if wanted { "no message contains" } else { "a message contains" };
                return Some(format!("{which} {}", quoted(&text)));
            }
        }
        let tasks = when.result_of.iter().map(|r| (r, true)).chain(when.no_result_of.iter().map(|r| (r, false)));
        for (reference, wanted) in tasks {
            let id = match resolve(reference) {
                Ok(id) => id,
                Err(why) => return Some(why),
            };
            if holds_result(messages, &id) != wanted {
                let which = if wanted { "it holds no result of" } else { "it holds the result of" };
                return Some(format!("{which} {reference}"));
            }
        }
        None
    }

    fn check(&self, check: &Check, request: &LlmRequest, who: &Who) -> Vec<String> {
        let mut out = Vec::new();
        if self.explored && check.order_dependent.is_some() {
            return out;
        }
        let messages = &request.messages;
        let tool_names: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
        // `$taskN` in a check is the N-th task id of the run so far (the `task.queued` order).
        let mut ids: Option<Vec<String>> = None;
        // Each text is built and searched for in the messages: that work counts against the
        // run budget, so that many long check texts over many requests stop the run instead
        // of running for minutes.
        let scanned = scan_cost(messages);
        let mut text = |text: &Text, out: &mut Vec<String>| -> Option<String> {
            if !self.stop.count_scan(scanned.saturating_add(text.byte_len().map_or(u64::MAX, |b| b as u64))) {
                return None;
            }
            let rendered = text.render();
            if !rendered.contains("$task") {
                return Some(rendered);
            }
            let ids = ids.get_or_insert_with(|| self.task_ids());
            match with_task_ids(&rendered, ids) {
                Ok(text) => Some(text.into_owned()),
                Err(reference) => {
                    out.push(format!("{reference} refers to a task the run has not queued ({})", count_ids(ids)));
                    None
                }
            }
        };
        if let Some(n) = check.messages
            && messages.len() != n
        {
            out.push(format!("expected {n} messages, the request holds {}", messages.len()));
        }
        for want in &check.contains {
            if let Some(want) = text(want, &mut out)
                && !messages.iter().any(|m| m.content.contains(want.as_str()))
            {
                out.push(format!("no message contains {}", quoted(&want)));
            }
        }
        for want in &check.absent {
            if let Some(want) = text(want, &mut out)
                && let Some(i) = messages.iter().position(|m| m.content.contains(want.as_str()))
            {
                out.push(format!("message {} contains {}, which must be absent", i + 1, quoted(&want)));
            }
        }
        let nth = check.nth_message.as_ref().map(|nth| (format!("message {}", nth.n), nth.n, &nth.text));
        let exact = [
            check.first_message.as_ref().map(|t| ("the first message".to_string(), 1, t)),
            check.last_message.as_ref().map(|t| ("the last message".to_string(), messages.len().max(1), t)),
            nth,
        ];
        for (which, n, want) in exact.into_iter().flatten() {
            let Some(want) = text(want, &mut out) else { continue };
            match messages.get(n - 1) {
                None => out
                    .push(format!("{which}: the request holds {} messages, so it has no message {n}", messages.len())),
                Some(got) if got.content != want => {
                    out.push(format!("{which}: {}", text_difference(&want, &got.content)));
                }
                Some(_) => {}
            }
        }
        if let Some(tools) = &check.tools
            && tool_names != *tools
        {
            out.push(format!("the tools offered are {}, expected {}", names(&tool_names), names(tools)));
        }
        for tool in &check.tools_include {
            if !tool_names.contains(&tool.as_str()) {
                out.push(format!("tool `{tool}` is not offered (offered: {})", names(&tool_names)));
            }
        }
        for tool in &check.tools_exclude {
            if tool_names.contains(&tool.as_str()) {
                out.push(format!("tool `{tool}` is offered, but must not be"));
            }
        }
        let fields = [
            ("model", &check.model, request.model.as_deref()),
            ("reasoning_effort", &check.reasoning_effort, request.reasoning_effort.as_deref()),
        ];
        for (name, want, got) in fields {
            if let Some(want) = want
                && Some(want.as_str()) != got
            {
                let got = got.map_or_else(|| "not set".to_string(), quoted);
                out.push(format!("{name} is {got}, expected {}", quoted(want)));
            }
        }
        for (name, want, got) in [
            ("request_id", &check.request_id, &*request.request_id),
            ("session_id", &check.session_id, &*request.session_id),
        ] {
            if let Some(want) = want
                && want != got
            {
                out.push(format!("{name} is {}, expected {}", quoted(got), quoted(want)));
            }
        }
        if let Some(memory) = &check.memory
            && memory[..] != request.memory[..]
        {
            out.push(format!("memory is {}, expected {}", texts(&request.memory), texts(memory)));
        }
        for want in &check.system_contains {
            if !request.system.contains(want.as_str()) {
                out.push(format!(
                    "the system prompt does not contain {} (it is {})",
                    quoted(want),
                    quoted(&request.system)
                ));
            }
        }
        for want in &check.system_absent {
            if request.system.contains(want.as_str()) {
                out.push(format!("the system prompt contains {}, which must be absent", quoted(want)));
            }
        }
        if check.fork_of_parent {
            let mismatch = match self.attributor() {
                None => self.log.with(|exchanges| fork_mismatch(exchanges, request, &[])),
                // Judged from the model's side, the requests' own aliases and goals are not
                // read: the exchanges are labelled as the attribution put them down.
                Some(attributor) => {
                    let side = attributor.record();
                    let mut exchanges = self.log.with(<[_]>::to_vec);
                    for (i, e) in exchanges.iter_mut().enumerate() {
                        if let Some(Attribution::Agent(a)) = side.attributions.get(i) {
                            (e.request.agent, e.request.goal) = (a.alias.clone(), a.goal.clone());
                        }
                    }
                    let mut request = request.clone();
                    (request.agent, request.goal) = (who.alias.clone(), who.goal.clone());
                    fork_mismatch(&exchanges, &request, &[])
                }
            };
            out.extend(mismatch.map(|d| format!("fork_of_parent: {d}")));
        }
        if let Some(recorded) = &check.recorded {
            let size = recorded.messages.iter().map(|m| m.content.len() as u64).sum::<u64>();
            if self.stop.count_scan(scanned.saturating_add(size)) {
                out.extend(recorded_difference(recorded, request).map(|d| format!("recorded: {d}")));
            }
        }
        out
    }
}

/// How `request` differs from the recorded one: the first differing message (or the system
/// text), the recorded against the sent, after every `volatile` span is blanked in both.
/// `None`: they are the same.
pub(crate) fn recorded_difference(recorded: &crate::scenario::RecordedRequest, request: &LlmRequest) -> Option<String> {
    use crate::scenario::{RecordedRole, volatile_regex};
    // Validated at load; a pattern that still fails to compile blanks nothing.
    let patterns: Vec<regex::Regex> = recorded.volatile.iter().filter_map(|p| volatile_regex(p).ok()).collect();
    let blank = |text: &str| -> String {
        patterns.iter().fold(text.to_string(), |t, re| re.replace_all(&t, "…").into_owned())
    };
    if let Some(system) = &recorded.system {
        let (want, got) = (blank(system), blank(&request.system));
        if want != got {
            return Some(format!("the system text differs: {}", text_difference(&want, &got)));
        }
    }
    let role = |r: Role| match r {
        Role::User => RecordedRole::User,
        Role::Assistant => RecordedRole::Assistant,
        Role::Tool => RecordedRole::Tool,
    };
    let name = |r: RecordedRole| match r {
        RecordedRole::User => "user",
        RecordedRole::Assistant => "assistant",
        RecordedRole::Tool => "tool",
    };
    let (want_n, got_n) = (recorded.messages.len(), request.messages.len());
    for (i, want) in recorded.messages.iter().enumerate() {
        let Some(got) = request.messages.get(i) else {
            return Some(format!(
                "the request holds {got_n} messages, the recording {want_n}: message {} ({}) is missing, recorded as {}",
                i + 1,
                name(want.role),
                quoted(&want.content)
            ));
        };
        let n = i + 1;
        if role(got.role) != want.role {
            return Some(format!(
                "message {n} is a {} message {}, recorded as a {} message {}",
                name(role(got.role)),
                quoted(&got.content),
                name(want.role),
                quoted(&want.content)
            ));
        }
        let (w, g) = (blank(&want.content), blank(&got.content));
        if w != g {
            return Some(format!(
                "message {n} ({}) differs from the recording: {}",
                name(want.role),
                text_difference(&w, &g)
            ));
        }
        let want_calls: Vec<String> = want.calls.iter().map(|c| blank(&format!("{}{}", c.tool, c.args))).collect();
        let got_calls: Vec<String> = got.tool_calls.iter().map(|c| blank(&format!("{}{}", c.name, c.args))).collect();
        if want_calls != got_calls {
            return Some(format!(
                "message {n} (assistant) calls {}, recorded as {}",
                got_calls.join(", "),
                want_calls.join(", ")
            ));
        }
    }
    if got_n > want_n {
        let extra = request.messages.get(want_n).expect("the request holds more messages than the recording");
        return Some(format!(
            "the request holds {got_n} messages, the recording {want_n}: message {} ({}) was not recorded: {}",
            want_n + 1,
            name(role(extra.role)),
            quoted(&extra.content)
        ));
    }
    None
}

/// What searching a request's messages for one text costs, in bytes, for the run budget.
fn scan_cost(messages: &Transcript) -> u64 {
    messages.iter().map(|m| m.content.len() as u64).sum()
}

/// Where a reply comes from: `lanes[L].replies[R]`, or the lane's `respond` function past its
/// scripted replies.
fn reply_place(lane: usize, index: Option<usize>) -> String {
    match index {
        Some(index) => format!("lanes[{lane}].replies[{index}]"),
        None => format!("lanes[{lane}].respond"),
    }
}

/// Whether `messages` hold the result of task `id`: its notification, or an entry of a
/// `subagent.wait` answer that carries a result.
fn holds_result(messages: &Transcript, id: &str) -> bool {
    let notification = format!("<subagent-notification task_id=\"{id}\"");
    messages.iter().any(|m| {
        m.content.contains(&notification)
            || (m.content.starts_with('[')
                && m.content.contains(id)
                && serde_json::from_str::<Vec<serde_json::Value>>(&m.content).is_ok_and(|entries| {
                    entries
                        .iter()
                        .any(|e| e.get("task_id").and_then(|t| t.as_str()) == Some(id) && e.get("result").is_some())
                }))
    })
}

/// Tool names for a message: `a, b, c`, or `none`.
fn names<S: AsRef<str>>(names: &[S]) -> String {
    if names.is_empty() { "none".to_string() } else { names.iter().map(AsRef::as_ref).collect::<Vec<_>>().join(", ") }
}

/// Texts for a message: `["a", "b"]` in JSON quoting.
fn texts(texts: &[String]) -> String {
    format!("[{}]", texts.iter().map(|t| quoted(t)).collect::<Vec<_>>().join(", "))
}

/// The task ids known, for a message.
fn count_ids(ids: &[String]) -> String {
    match ids {
        [] => "no task has been queued yet".to_string(),
        ids => format!("{} queued so far: {}", plural(ids.len(), "task", "tasks"), ids.join(", ")),
    }
}

/// The lanes' selectors, indexed so that binding an agent costs a lookup and one pass over
/// its task, however many lanes there are.
struct Selectors {
    by_agent: BTreeMap<String, Vec<usize>>,
    by_profile: BTreeMap<String, Vec<usize>>,
    /// Every `task_contains` text at once (lane index per pattern).
    tasks: AhoCorasick,
    task_lanes: Vec<usize>,
}

impl Selectors {
    fn new(lanes: &[Lane]) -> Selectors {
        let (mut by_agent, mut by_profile) =
            (BTreeMap::<String, Vec<usize>>::new(), BTreeMap::<String, Vec<usize>>::new());
        let (mut patterns, mut task_lanes) = (Vec::new(), Vec::new());
        for (i, lane) in lanes.iter().enumerate() {
            if let Some(agent) = &lane.agent {
                by_agent.entry(agent.clone()).or_default().push(i);
            }
            if let Some(profile) = &lane.profile {
                by_profile.entry(profile.clone()).or_default().push(i);
            }
            if let Some(text) = &lane.task_contains {
                patterns.push(text.as_str());
                task_lanes.push(i);
            }
        }
        let tasks = AhoCorasick::new(patterns).expect("plain text patterns build an automaton");
        Selectors { by_agent, by_profile, tasks, task_lanes }
    }

    /// The lanes that select the request's agent, in lane order: by alias, and for a child by
    /// a text its task contains or by its profile.
    fn matching(&self, who: &Who) -> Vec<usize> {
        let mut lanes: Vec<usize> = self.by_agent.get(who.alias.as_str()).cloned().unwrap_or_default();
        if who.alias.depth() > 0 {
            lanes.extend(self.tasks.find_overlapping_iter(&*who.goal).map(|m| self.task_lanes[m.pattern().as_usize()]));
            if let Some(profile) = who.profile.as_deref() {
                lanes.extend(self.by_profile.get(profile).into_iter().flatten());
            }
        }
        lanes.sort_unstable();
        lanes.dedup();
        lanes
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// What one agent's requests showed of task ids so far, so each request scans only the
/// messages added since the agent's previous one.
#[derive(Default)]
struct Seen {
    /// The conversation of the previous request.
    messages: Transcript,
    /// How many of the known ids the scan looked for.
    known: usize,
    /// Ids found, with where they first stand: (message index, byte offset).
    found: Vec<((usize, usize), String)>,
    /// The same ids, for lookups.
    found_ids: BTreeSet<String>,
}

impl Seen {
    /// The task ids of `known` (those the core reported) a model could read in `messages`, in
    /// order of first appearance. An id counts where it stands as a whole word (not inside a
    /// longer name), so ids of any format work.
    fn update(&mut self, messages: &Transcript, known: &[String]) -> Vec<String> {
        if !messages.extends(&self.messages) {
            *self = Seen::default();
        }
        let from = self.messages.len();
        // Ids that became known since the last scan may stand in the old messages too.
        let new_ids = &known[self.known.min(known.len())..];
        if !new_ids.is_empty() && from > 0 {
            let old = std::mem::take(&mut self.messages);
            for (index, message) in old.iter().enumerate() {
                self.look(index, message, new_ids);
            }
        }
        let added = messages.since(&self.messages).unwrap_or_else(|| messages.iter().collect());
        for (offset, message) in added.into_iter().enumerate() {
            self.look(from + offset, message, known);
        }
        self.found.sort();
        self.messages = messages.clone();
        self.known = known.len();
        self.found.iter().map(|(_, id)| id.clone()).collect()
    }

    fn look(&mut self, index: usize, message: &Message, ids: &[String]) {
        let text = message.content.as_str();
        for id in ids {
            if self.found_ids.contains(id) {
                continue;
            }
            // A quick filter before the whole-word search: most messages hold no id at all.
            if text.len() >= id.len()
                && let Some(at) = whole_word(text, id)
            {
                self.found.push(((index, at), id.clone()));
                self.found_ids.insert(id.clone());
            }
        }
    }
}

/// Where `word` first stands in `text` with no id character on either side.
fn whole_word(text: &str, word: &str) -> Option<usize> {
    let is_id = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let first = word.as_bytes().first()?;
    // memchr-style scan for the first byte, then a comparison, instead of a substring searcher
    // per (message, id) pair.
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(offset) = bytes[from..].iter().position(|b| b == first) {
        let at = from + offset;
        if bytes[at..].starts_with(word.as_bytes())
            && !text[..at].chars().next_back().is_some_and(is_id)
            && !text[at + word.len()..].chars().next().is_some_and(is_id)
        {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// The id of the `n`-th call of an agent's `call`-th reply: `main/2#3.1`. Written piece by
/// piece into a string of the right size: `format!` was the costliest step of a reply.
fn call_id(agent: &str, call: usize, n: usize) -> String {
    let mut id = String::with_capacity(agent.len() + 8);
    id.push_str(agent);
    id.push('#');
    push_number(&mut id, call);
    id.push('.');
    push_number(&mut id, n);
    id
}

/// The id of the run's `n`-th call in model-side mode: `call_n`, which tells no alias.
fn anonymous_call_id(n: usize) -> String {
    let mut id = String::from("call_");
    push_number(&mut id, n);
    id
}

/// Appends `n` in decimal.
fn push_number(out: &mut String, mut n: usize) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend(digits[at..].iter().map(|d| char::from(*d)));
}

/// Whether some string in the arguments is a `$taskN` reference.
fn refers_to_tasks(args: &serde_json::Value) -> bool {
    use serde_json::Value;
    match args {
        Value::String(s) => crate::scenario::task_reference(s).is_some(),
        Value::Array(items) => items.iter().any(refers_to_tasks),
        Value::Object(map) => map.values().any(refers_to_tasks),
        _ => false,
    }
}

/// Replaces every string `$taskN` in the arguments by the N-th task id (from 1) the request
/// shows, as a model would copy it from an earlier result, keeping any whitespace written
/// around the reference (`" $task1"` becomes `" sub-…"`). Returns the bad reference.
fn resolve_task_refs(args: &serde_json::Value, ids: &[String]) -> Result<serde_json::Value, String> {
    use crate::scenario::{task_number, task_reference};
    use serde_json::Value;
    Ok(match args {
        Value::String(s) => {
            match task_reference(s).and_then(|(before, r, after)| Some((before, task_number(r)?, after))) {
                Some((before, n, after)) => {
                    let id = ids.get(n - 1).ok_or_else(|| s.trim().to_string())?;
                    Value::String(format!("{before}{id}{after}"))
                }
                None => args.clone(),
            }
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| resolve_task_refs(v, ids)).collect::<Result<_, _>>()?),
        Value::Object(map) => Value::Object(
            map.iter().map(|(k, v)| Ok((k.clone(), resolve_task_refs(v, ids)?))).collect::<Result<_, String>>()?,
        ),
        _ => args.clone(),
    })
}

impl Llm for ScriptedLlm {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> BoxFuture<'a, Result<LlmReply, LlmError>> {
        Box::pin(async move {
            let mut number = None;
            let attributed = self.attributor().map(|mut attributor| {
                let tools = request.tools.iter().map(|t| t.name.clone()).collect();
                let (n, attribution) = attributor.request(
                    &request.system,
                    &request.messages,
                    tools,
                    request.model.as_deref().map(String::from),
                    self.recorder.elapsed(),
                );
                attributor.reasoning_effort(n, request.reasoning_effort.as_deref().map(String::from));
                attributor.ids(n, &request.request_id, &request.session_id);
                (n, attribution)
            });
            let who = match attributed {
                None => Who::new(request.agent.clone(), request.goal.clone(), request.profile.clone()),
                Some((n, attribution)) => {
                    number = Some(n);
                    match attribution {
                        Attribution::Agent(a) => Who::new(a.alias, a.goal, a.profile),
                        Attribution::Side(i) => return self.side_reply(n, i).await,
                        Attribution::Unattributed(why) => {
                            self.stop.halt_as(Halt::Unattributed, format!("unattributed request: {why}"));
                            return std::future::pending().await;
                        }
                    }
                }
            };
            let answer = self.answer(request, &who, number).await;
            if let Some(number) = number
                && let Some(mut attributor) = self.attributor()
            {
                match &answer {
                    Ok(reply) => attributor.replied(
                        number,
                        &Message::assistant(reply.text.clone(), reply.tool_calls.clone()),
                        self.recorder.elapsed(),
                    ),
                    Err(_) => attributor.errored(number),
                }
            }
            answer
        })
    }
}

impl ScriptedLlm {
    /// The answer to exchange `number`, the side request declared `i`-th.
    async fn side_reply(&self, number: usize, i: usize) -> Result<LlmReply, LlmError> {
        let side = &self.side[i];
        let latency = Duration::from_millis(side.latency_ms);
        self.clock.sleep(latency, || format!("llm side request {i} (exchange {number})")).await;
        let reply = LlmReply { text: side.reply.clone(), ..LlmReply::default() };
        if let Some(mut attributor) = self.attributor() {
            attributor.replied(number, &Message::assistant(reply.text.clone(), Vec::new()), self.recorder.elapsed());
        }
        Ok(reply)
    }

    async fn answer(&self, request: &LlmRequest, who: &Who, number: Option<usize>) -> Result<LlmReply, LlmError> {
        let (lane, call, index, reply) = match self.next(request, who) {
            Ok(next) => next,
            Err(message) => {
                self.stop.halt(message);
                return std::future::pending().await;
            }
        };
        let asked = self.recorder.elapsed();
        // A text with no calls ends a loop, and so does a lone `final_answer` or `fail` (the
        // terminal calls every loop is offered).
        let terminal = match &reply.calls[..] {
            [] => reply.text.as_ref().is_some_and(|t| !t.is_blank()),
            [call] => !call.undeclared && matches!(call.tool.as_str(), "final_answer" | "fail"),
            _ => false,
        };
        let ends_loop = terminal && !reply.hang && reply.error.is_none() && reply.drop_after_chunks.is_none();
        let due = asked + Duration::from_millis(reply.latency_ms);
        self.log.schedule(Due { agent: who.alias.clone(), asked, due, ends_loop });
        if ends_loop
            && let Some(number) = number
            && let Some(mut attributor) = self.attributor()
        {
            attributor.ends_loop_due(number, due);
        }
        self.clock.sleep(Duration::from_millis(reply.latency_ms), || format!("llm {} #{call}", who.alias)).await;
        if reply.hang {
            return std::future::pending().await;
        }
        if let Some(error) = &reply.error {
            let error = error.clone();
            return Err(LlmError::Refused(error));
        }
        match self.build(lane, call, index, &reply, request, who) {
            // A dropped stream fails the call, as it fails a client.
            Some(_) if reply.drop_after_chunks.is_some() => {
                Err(LlmError::StreamDropped { chunks: reply.drop_after_chunks.unwrap_or_default() })
            }
            Some(reply) => Ok(reply),
            None => std::future::pending().await,
        }
    }

    /// Builds a reply's text and calls (ids, `$taskN` resolved). `None`: the run was halted
    /// (a reference to an unknown task, the run budget), and [`Stop`] says why.
    pub(crate) fn build(
        &self,
        lane: usize,
        call: usize,
        index: Option<usize>,
        reply: &Reply,
        request: &LlmRequest,
        who: &Who,
    ) -> Option<LlmReply> {
        // A scripted reply's arguments were prepared with the script; a reply a lane's
        // function made is prepared here.
        let made: Vec<PreparedArgs>;
        let prepared = match index.and_then(|index| self.script.args[lane].get(index)) {
            Some(prepared) => prepared,
            None => {
                made = reply.calls.iter().map(|c| (Arc::new(c.args.clone()), refers_to_tasks(&c.args))).collect();
                &made
            }
        };
        // The scan runs only for replies that refer to task ids.
        let task_ids = if prepared.iter().any(|(_, refers)| *refers) {
            let known = self.task_ids();
            let mut st = self.state.lock().expect("mock lock poisoned");
            st.seen.entry(who.alias.clone()).or_default().update(&request.messages, &known)
        } else {
            Vec::new()
        };
        let mut tool_calls = Vec::new();
        let first_call = if self.attributor.is_some() {
            let mut st = self.state.lock().expect("mock lock poisoned");
            st.calls += reply.calls.len();
            Some(st.calls - reply.calls.len())
        } else {
            None
        };
        for (i, (c, (args, refers))) in reply.calls.iter().zip(prepared).enumerate() {
            let resolved = if *refers { resolve_task_refs(args, &task_ids).map(Arc::new) } else { Ok(args.clone()) };
            let args = match resolved {
                Ok(args) => args,
                Err(reference) => {
                    self.stop.halt(format!(
                        "{}.calls[{i}]: {reference} refers to a task id the request does not show ({})",
                        reply_place(lane, index),
                        match task_ids.len() {
                            0 => "it shows none".to_string(),
                            n => format!("it shows {}: {}", plural(n, "task id", "task ids"), task_ids.join(", ")),
                        }
                    ));
                    return None;
                }
            };
            tool_calls.push(ToolCall {
                id: match first_call {
                    None => call_id(who.alias.as_str(), call, i + 1),
                    Some(before) => anonymous_call_id(before + i + 1),
                },
                name: c.tool.clone(),
                args,
            });
        }
        // The reply's text is built only when the run budget has room for it.
        let text = match &reply.text {
            Some(text) if !self.stop.may_make_text(text.byte_len()) => return None,
            Some(text) => text.render(),
            None => String::new(),
        };
        Some(LlmReply { text, tool_calls })
    }
}

#[cfg(test)]
mod tests {
    use super::resolve_task_refs;
    use serde_json::json;

    #[test]
    fn a_task_reference_keeps_the_whitespace_written_around_it() {
        let ids = ["sub-1".to_string(), "sub-2".to_string()];
        let args =
            json!({"task_id": " $task2\n", "task_ids": ["$task1", "\t$task2 "], "message": "$task is no reference"});
        assert_eq!(
            resolve_task_refs(&args, &ids).unwrap(),
            json!({"task_id": " sub-2\n", "task_ids": ["sub-1", "\tsub-2 "], "message": "$task is no reference"})
        );
        assert_eq!(resolve_task_refs(&json!([" $task3 "]), &ids).unwrap_err(), "$task3");
    }

    #[test]
    fn call_ids_read_agent_hash_call_dot_number() {
        assert_eq!(super::call_id("main/12", 3, 1), "main/12#3.1");
        assert_eq!(super::call_id("main", 100, 20), "main#100.20");
        assert_eq!(super::call_id("main/1", 0, 9), "main/1#0.9");
    }
}

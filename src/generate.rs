//! Proptest strategies that produce valid scenarios across both rule sets, for the property
//! tests and `rehearsal fuzz`.
//!
//! A strategy draws a [`Plan`] (rule knobs, the root's replies, each child's script, turns,
//! steering) and compiles it into an ordinary [`Scenario`], the same value a user writes, so
//! a finding serialises to a scenario file. Plans shrink the proptest way: fewer replies,
//! fewer calls, smaller numbers, simpler children.
//!
//! The draws sit around the edges of the rules: budgets from 1 to 40 and grants around the
//! child cap, depth limits 0 to 2, spawns past the limit, caps 1 to 8, latencies on and next
//! to each timeout, results one character either side of the truncation limit in ASCII,
//! accented, CJK and emoji text, temp / fork / named sessions, wait / send / cancel, steering,
//! several turns and LLM errors, child grants (`allowed_tools` empty, narrowed, spelled in every
//! way the name matching accepts, or naming a tool nobody has) and, one plan in eight, Roku's
//! risk gate with tags, a policy list (now and then naming a call that is safe all the same)
//! and the user's answers; in half of those the user, not the policy, decides on spawns, so
//! children run under the root's gate, and one foreground child asks questions of its own.
//! The scenario's profile is drawn too (a body plain, padded or blank, tools and skills that narrow
//! the child, a model, a reasoning effort, a time limit of its own, 0 or none; declared inline, or
//! one time in three written as a profile file, with or without its `name`, its name `helper` or
//! `code.helper` (a dot before `.md`), its lists as YAML lists or as comma-separated strings, its
//! lines ended with `\n` or `\r\n`), and so are a spawn's own model, reasoning effort and
//! `allowed_skills`, a profile name padded or missing, a blank prompt and bad names out of order.
//! Special values are drawn on purpose: 0 where 0 means "none" (a time limit from the knobs or a
//! call, a recovery budget, a spawn cost, a grant), `null` for an optional limit, a time limit of
//! exactly one second (`1 seconds`), a negative (invalid) or huge (clamped) time limit on a spawn,
//! a negative one on a wait, a wait without one (the default), a reply of whitespace only, a
//! `final_answer` or `fail` without its text, with whitespace around it or with text of the reply's
//! own beside it, an `Agent` task, a `subagent.send` message or a task id padded with whitespace, a
//! custom unknown-tool message (its `{name}` once or twice), and each knob left unset one time in
//! four, so the presets' own values run too. Same-instant ties are drawn on purpose too: latencies
//! lean to the values of the time limits, so children end together, on a limit, on a wait's
//! deadline or on a steering time, in every explored order the fuzzer then tries. Generated scripts
//! never leave a run waiting forever without a time limit inside the run's horizon (a child only
//! hangs when one applies to it), so a run that hits its horizon is a real termination finding.
//! One plan in six opens its first turn with a [`Rare`] situation the free draws reach only
//! once in thousands of cases (a queued task cancelled while another waits, a `send` that would
//! continue a named session another task is using, a foreground child's reply in the very
//! instant of its time limit), setting the knobs it needs. What the generator cannot know in
//! advance it does not bet on: a `subagent` call on a named session an earlier call used may find
//! it in use, so it is not counted among the tasks a `$taskN` may name, and a continued task that
//! never asked the model (cancelled while queued) finds a lane for the `send`'s message.
//! This module generates; it judges nothing.

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::json;

use crate::scenario::{
    Answer, ApprovalSpec, Call, Expect, GateMode, Lane, Limits, PresetName, ProfileSpec, Reply, RiskTag, RulesSpec,
    Scenario, SessionSpec, Steer, Text, ToolResult, ToolSpec, Turn, TurnExpect,
};

/// Latencies (ms) on and around the timeouts the knobs draw from.
const LATENCIES: [u64; 11] = [0, 1, 50, 99, 100, 101, 249, 250, 251, 499, 500];
/// Latencies that land on the time limits the knobs draw (100 and 250 ms), drawn more often:
/// children answering together, and answering in the very instant a limit, a wait deadline
/// or a steering message (drawn at the same values) falls, are where same-instant ties are.
const TIE_LATENCIES: [u64; 2] = [100, 250];

/// A latency: any of [`LATENCIES`], or one of [`TIE_LATENCIES`] one time in three.
fn latency() -> impl Strategy<Value = u64> + Clone {
    prop_oneof![2 => select(LATENCIES.to_vec()), 1 => select(TIE_LATENCIES.to_vec())]
}

/// The root's skills, when it has any.
const SKILLS: [&str; 2] = ["review", "deploy"];

/// Units of child results: 1, 2, 3 and 4 bytes per character.
const UNITS: [&str; 4] = ["a", "é", "字", "😀"];

/// Which rule sets a strategy draws from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Roku's preset (the `Agent` tool), sometimes with the `subagent` family added.
    Roku,
    /// Bub's preset (the `subagent` family), sometimes with `Agent` added.
    Bub,
    /// Either.
    Any,
}

/// The rule knobs of a plan, as the scenario file writes them: `None` leaves a knob unset, so
/// the preset's own value is the one fuzzed (a preset that silently took the other family's
/// value would otherwise never run).
#[derive(Clone, Debug)]
struct Knobs {
    bub: bool,
    root_step_budget: Option<u32>,
    recovery_budget: Option<u32>,
    child_step_cap: Option<u32>,
    depth_limit: Option<u32>,
    spawn_cost: Option<u32>,
    result_limit: Option<Option<usize>>,
    agent_timeout_ms: Option<Option<u64>>,
    default_timeout_ms: Option<Option<u64>>,
    max_concurrency: Option<usize>,
    agent_tool: Option<bool>,
    subagent_tools: Option<bool>,
    unknown_tool_message: Option<String>,
    seed: u64,
}

impl Knobs {
    /// The rules section a scenario file writes for these knobs.
    fn spec(&self) -> RulesSpec {
        RulesSpec {
            preset: if self.bub { PresetName::Bub } else { PresetName::Roku },
            root_step_budget: self.root_step_budget,
            recovery_budget: self.recovery_budget,
            depth_limit: self.depth_limit,
            child_step_cap: self.child_step_cap,
            spawn_cost: self.spawn_cost,
            result_limit_chars: self.result_limit,
            agent_timeout_ms: self.agent_timeout_ms,
            subagent_default_timeout_ms: self.default_timeout_ms,
            max_concurrency: self.max_concurrency,
            agent_tool: self.agent_tool,
            subagent_tools: self.subagent_tools,
            unknown_tool_message: self.unknown_tool_message.clone(),
        }
    }
}

/// One step of a child's script.
#[derive(Clone, Debug)]
enum ChildStep {
    /// Calls `Read` (which succeeds) after `latency` ms.
    Read(u64),
    /// Calls `Flaky` (which fails).
    Flaky,
    /// Calls `Agent` with a grandchild task (refused past the depth limit).
    SpawnGrandchild(Vec<LeafStep>),
    /// Calls `subagent`, which no child is offered.
    CallSubagent,
    /// Answers with `count` copies of `UNITS[unit]` around the result limit.
    Answer { unit: usize, around: i8, latency: u64 },
    /// Answers with whitespace only (an answer all the same: `roku.loop.empty-text-completed`
    /// replaces only an empty one).
    Blank,
    /// Calls `fail`.
    Fail,
    /// Calls `ask_user`, which no child has (refused as an unknown name).
    AskUser,
    /// Never answers (only when a timeout applies).
    Hang,
    /// The LLM call fails.
    LlmError,
}

/// A step of a grandchild's script.
#[derive(Clone, Debug)]
enum LeafStep {
    /// Calls `Read`.
    Read(u64),
    /// Answers with `count` copies of `UNITS[unit]`.
    Answer { unit: usize, around: i8, latency: u64 },
}

/// The `allowed_tools` of a `subagent` call.
#[derive(Clone, Debug)]
enum Grant {
    /// `[]`, which counts as not given (`bub.child.allowed-tools-empty`).
    Empty,
    /// A list naming some of `Read`, `Flaky`, `final_answer` and `fail` (by the bits of `which`),
    /// each spelled as [`SPELLINGS`]`[spelling]` says, in the other order when `reversed`; as
    /// one comma-separated string when `string`. A child granted less than the catalog still calls the rest of it.
    Names { which: u8, spelling: usize, string: bool, reversed: bool },
    /// A list that also names a tool nobody has, which refuses the call; with `several`, bad
    /// names out of order, one twice and one padded (the refusal lists them trimmed, sorted,
    /// once each).
    Unknown { several: bool },
}

/// How a `subagent` call names its profile (`agent`).
#[derive(Clone, Copy, Debug)]
enum AgentPick {
    /// No `agent`.
    None,
    /// `helper`, the scenario's profile.
    Helper,
    /// ` helper `, which names it too (names are trimmed).
    Padded,
    /// A profile nobody declared (refused).
    Missing,
    /// The profile's name spelled as a tool name may be (`Helper`, `code_helper`): profile
    /// names are matched exactly, so it is refused (`bub.spawn.unknown-profile`).
    Respelled,
}

/// The `allowed_skills` of a `subagent` call.
#[derive(Clone, Copy, Debug)]
enum SkillGrant {
    /// `[]`: counts as not given.
    Empty,
    /// `["deploy"]`.
    One,
    /// `[" REVIEW "]`: `review`, spelled another way.
    Spelled,
    /// Names no skill of the root has, out of order (refused).
    Unknown,
}

/// What a `subagent` call asks for besides its prompt, session, time limit and tools.
#[derive(Clone, Debug)]
struct SpawnExtras {
    /// A blank prompt (refused before anything else but the depth).
    blank: bool,
    agent: AgentPick,
    /// `timeout_seconds` written as a string (`"0.1"`): not a number, so not given.
    timeout_text: bool,
    /// `model` and `reasoning_effort` of the call's own.
    model: bool,
    effort: bool,
    skills: Option<SkillGrant>,
}

/// The scenario's one profile, `helper`: its body (one of [`BODIES`]), tools and skills
/// (narrowing the child unless the call names its own), model, reasoning effort and time limit.
#[derive(Clone, Debug)]
struct ProfilePlan {
    body: usize,
    /// `None`, `[]`, `["Read"]`, or `[" flaky", "FAIL"]` (names spelled other ways).
    tools: u8,
    /// `None`, `["deploy"]` or `[" Review "]`.
    skills: u8,
    model: bool,
    effort: bool,
    /// The profile's `timeout_seconds` in ms: unset, 0 (none) or 250.
    timeout_ms: Option<u64>,
    /// Written as a profile file (`profile_files`) instead of inline, one time in three.
    file: Option<FileForm>,
    /// Named `code.helper` instead of `helper`: a file name with a dot before its `.md`.
    dotted: bool,
    /// Not declared at all, so the session has no profile: no listing in the prompt, and a
    /// call naming `helper` is refused.
    undeclared: bool,
}

/// How the profile file is written: with its `name` or without (the file's name minus `.md`
/// names it, `bub.profile.fields`), its lists as YAML lists or as one comma-separated string,
/// its lines ended with `\n` or with `\r\n`.
#[derive(Clone, Copy, Debug)]
struct FileForm {
    named: bool,
    joined: bool,
    crlf: bool,
}

/// Profile bodies: none, plain, with whitespace around it (trimmed in the prompt), blank.
const BODIES: [&str; 4] = ["", "Be terse.", "\n  Be terse.\n", "  \n"];

/// How a granted name is spelled: as is, or in the other ways that name the same tool
/// (`bub.spawn.name-matching`: trimmed, any case, `.` for `_`).
const SPELLINGS: [fn(&str) -> String; 4] =
    [|n| n.to_string(), |n| format!(" {} ", n.to_uppercase()), |n| n.replace('_', "."), |n| n.to_lowercase()];

/// Where a background child's conversation comes from.
#[derive(Clone, Copy, Debug)]
enum SessionPick {
    /// No `session` argument: `temp` by default (`bub.spawn.params`).
    Default,
    /// `temp`.
    Temp,
    /// `fork`.
    Fork,
    /// `inherit` (an alias of fork).
    Inherit,
    /// A named session, `notes-0` or `notes-1`.
    Named(u8),
    /// A named session whose name looks like a task's record (`temp/notes`).
    NamedLikeTemp,
    /// A named session called `Temp` (or `Fork` with `fork`): the kinds are matched as
    /// written, so a capitalised kind is a name (a form the scenario format asks to mark).
    KindCapitalised(bool),
}

/// One call of the root.
#[derive(Clone, Debug)]
enum RootCall {
    /// `Read`.
    Read(u64),
    /// `Flaky` (fails).
    Flaky,
    /// A name nobody declared (calls are dispatched by their exact name,
    /// `roku.calls.unknown-tool`): [`UNKNOWN_NAMES`]`[which]`.
    Unknown { which: usize },
    /// `Agent` with a child, its task written as `form` says; with `tools`, a `tools`
    /// argument, which changes nothing (`roku.child.tools-arg-ignored`).
    Agent { child: Vec<ChildStep>, form: TaskForm, tools: bool },
    /// `subagent` with a child.
    /// `timeout_ms` below 0 is an invalid limit, which counts as not given; past
    /// [`CLAMPED_MS`] it is clamped.
    Spawn {
        child: Vec<ChildStep>,
        session: SessionPick,
        timeout_ms: Option<i64>,
        grant: Option<Grant>,
        extras: SpawnExtras,
    },
    /// `subagent.wait`, on some earlier tasks (or all).
    /// `timeout_ms` `None` leaves the argument out (the default wait); below 0 is invalid,
    /// which counts as not given.
    Wait { tasks: Vec<u8>, timeout_ms: Option<i64> },
    /// `subagent.send` to an earlier task: its message plain, of whitespace only (refused), or
    /// with whitespace around it (handed over as written).
    Send(u8, TaskForm),
    /// `subagent.cancel` of an earlier task.
    Cancel(u8),
}

/// How an `Agent` task or a `subagent.send` message is written.
#[derive(Clone, Copy, Debug)]
enum TaskForm {
    /// As the child's lane expects it.
    Plain,
    /// Blank (refused: no task, no message).
    Blank,
    /// With whitespace around it: a task the child must not see padded
    /// (`roku.child.fresh-history`), a message the child must see as written.
    Padded,
}

/// One reply of the root.
#[derive(Clone, Debug)]
enum RootReply {
    /// Tool calls, run in order.
    Calls(Vec<RootCall>, u64),
    /// Text without calls (ends the turn, or waits for children).
    Text,
    /// Whitespace without calls: an answer all the same.
    Blank,
    /// `final_answer`, its `message` given, left out (the empty message) or empty; with
    /// `said`, beside text of the reply's own, which is not the answer
    /// (`roku.terminal.final-answer`).
    FinalAnswer(TextArg, Said),
    /// `fail`, its `reason` given, left out (the default reason) or empty (an empty reason,
    /// not the default); with `said`, beside text of the reply's own.
    Fail(TextArg, Said),
    /// `ask_user`.
    AskUser,
    /// The LLM call fails.
    LlmError,
    /// A terminal call after a regular one (the regular one must not run).
    ReadThenFinal,
    /// Two terminal calls (the first decides): `fail` then `final_answer`, `final_answer`
    /// then `fail`, or `ask_user` then `final_answer`, by `which`.
    TwoTerminals(u8),
}

/// How a terminal call writes its text argument.
#[derive(Clone, Copy, Debug)]
enum TextArg {
    Given,
    /// Left out.
    Missing,
    /// `""`.
    Empty,
    /// Given, with whitespace around it, which is part of the text (nothing trims it).
    Padded,
}

fn text_arg() -> impl Strategy<Value = TextArg> {
    prop_oneof![
        7 => Just(TextArg::Given),
        3 => Just(TextArg::Missing),
        2 => Just(TextArg::Empty),
        2 => Just(TextArg::Padded)
    ]
}

/// Whether a reply with a terminal call has text of its own beside it.
type Said = bool;

/// A terminal call's text argument and, one time in three, text beside the call.
fn terminal_reply() -> impl Strategy<Value = (TextArg, Said)> {
    (text_arg(), prop::bool::weighted(0.35))
}

/// Roku's risk gate, for the plans that run their calls through it: the catalog tools' tags,
/// which names the policy refuses, and the user's answers.
///
/// The scripted answers must follow the order the gate asks in (the harness stops a run whose
/// gate asks about another tool than the next answer names), so the plan keeps that order
/// known. Without `children` the policy refuses `Agent` and the `subagent` family: no child
/// ever runs and every question is the root's, in the order of its script. With `children`
/// the user answers those calls too and children run, sharing the root's gate
/// (`roku.approval.shared-gate`); a child's calls are then ones the gate lets through or
/// refuses without asking, except for one foreground child whose parent asks nothing after
/// it, whose questions come next in the order.
#[derive(Clone, Debug)]
struct GatePlan {
    /// `Read`'s tag, and whether the policy lists it (a listed `risk:safe` tool still runs).
    read: (Option<RiskTag>, bool),
    /// `Flaky`'s.
    flaky: (Option<RiskTag>, bool),
    /// Whether the policy lists the undeclared name the root calls.
    unknown_listed: bool,
    /// A call the rules make safe that the policy lists all the same (a safe call is never
    /// refused, `roku.approval.risk-classes`): `ask_user`, `fail` or `final_answer`.
    safe_listed: Option<&'static str>,
    /// Whether the user, not the policy, decides on `Agent` and the `subagent` family.
    children: bool,
    /// The user's answers, in turn (from the start again when the gate asks more).
    answers: Vec<bool>,
}

/// The names the policy of a [`GatePlan`] without children refuses.
const SPAWNING: [&str; 5] = ["Agent", "subagent", "subagent.wait", "subagent.send", "subagent.cancel"];

/// A situation the free draws reach only once in thousands of cases, opened on purpose by the
/// first replies of the turn (and the knobs it needs), so a campaign of 3,000 cases reaches
/// each a hundred times or more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rare {
    /// A cap of 1 and three `subagent` calls: the second and third wait in the queue, and the
    /// next reply cancels the second while the third still waits.
    QueuedCancelled,
    /// A named session's task finishes, a second task runs on the name, and a `subagent.send`
    /// to the first would continue it on the session the second is using (refused).
    SendOnSessionInUse,
    /// A foreground child whose final reply comes in exactly the instant its time limit runs
    /// out (`core.time.finish-at-limit-wins`).
    ForegroundReplyAtLimit,
}

impl Rare {
    /// Every rare situation, in the order they are drawn.
    pub const ALL: [Rare; 3] = [Rare::QueuedCancelled, Rare::SendOnSessionInUse, Rare::ForegroundReplyAtLimit];
}

/// The time limit of [`Rare::ForegroundReplyAtLimit`], which its child's reply takes exactly.
const RARE_LIMIT_MS: u64 = 250;

/// Everything a generated scenario is made of.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The rare situation the turn opens with, if any.
    pub rare: Option<Rare>,
    knobs: Knobs,
    root: Vec<RootReply>,
    /// Virtual gaps before turns 2, 3, … (`None`: right after the previous one).
    turns: Vec<Option<u64>>,
    steer: Vec<u64>,
    /// Roku's risk gate instead of the auto gate.
    gate: Option<GatePlan>,
    profile: ProfilePlan,
    /// Whether the root has skills (`review`, `deploy`) for children to be narrowed to (Bub's
    /// preset only).
    skills: bool,
}

/// A `timeout_seconds` past `bub.timeout.clamped`'s 1,000,000,000 s, in ms.
const CLAMPED_MS: i64 = 2_000_000_000_000;

/// A knob's value, or (one time in four) the knob left unset so the preset decides.
fn or_preset<T: std::fmt::Debug + Clone + 'static>(
    value: impl Strategy<Value = T> + 'static,
) -> impl Strategy<Value = Option<T>> {
    prop_oneof![1 => Just(None), 3 => value.prop_map(Some)]
}

fn knobs(family: Family) -> impl Strategy<Value = Knobs> {
    let bub = match family {
        Family::Roku => Just(false).boxed(),
        Family::Bub => Just(true).boxed(),
        Family::Any => any::<bool>().boxed(),
    };
    // Special values are drawn on purpose: 0 where 0 means "none" (a time limit, a recovery
    // budget, a spawn cost, a grant), `null` for an optional limit, and preset values by
    // leaving knobs unset.
    let budgets = (
        or_preset(1u32..=40),
        or_preset(prop_oneof![1 => Just(0u32), 1 => 1u32..=3, 1 => Just(5)]),
        or_preset(0u32..=12),
        or_preset(0u32..=2),
        or_preset(0u32..=2),
    );
    let limits = (
        or_preset(prop_oneof![2 => Just(None), 3 => (1usize..=12).prop_map(Some), 1 => Just(Some(4000))]),
        or_preset(prop_oneof![
            Just(None),
            Just(Some(0)),
            select(vec![100u64, 250, 500, 1000]).prop_map(Some),
            Just(Some(120_000))
        ]),
        or_preset(
            prop_oneof![3 => Just(None), 1 => Just(Some(0)), 1 => select(vec![100u64, 250, 1000]).prop_map(Some)],
        ),
        // Small caps are where queueing happens: weight them.
        or_preset(prop_oneof![3 => 1usize..=2, 1 => 3usize..=8]),
    );
    // A custom unknown-tool message, its `{name}` once or twice (the core refuses one without).
    let message = prop_oneof![
        6 => Just(None),
        1 => Just(Some("No tool named {name} here.")),
        1 => Just(Some("no {name} here ({name})")),
    ];
    let families = (0u8..4, any::<bool>(), message);
    (bub, budgets, limits, families, any::<u64>()).prop_map(
        |(
            bub,
            (budget, recovery, cap, depth, cost),
            (limit, agent_timeout, default_timeout, concurrency),
            (extra, written, message),
            seed,
        )| {
            // Each preset's own family, and in one case of four the other one too; a value
            // equal to the preset's is written only sometimes.
            let (agent_tool, subagent_tools) = (!bub || extra == 0, bub || extra == 0);
            Knobs {
                bub,
                root_step_budget: budget,
                recovery_budget: recovery,
                child_step_cap: cap,
                depth_limit: depth,
                spawn_cost: cost,
                result_limit: limit,
                agent_timeout_ms: agent_timeout,
                default_timeout_ms: default_timeout,
                max_concurrency: concurrency,
                agent_tool: Some(agent_tool).filter(|on| written || *on == bub),
                subagent_tools: Some(subagent_tools).filter(|on| written || *on != bub),
                unknown_tool_message: message.map(str::to_string),
                seed,
            }
        },
    )
}

fn answer() -> impl Strategy<Value = (usize, i8, u64)> {
    (0..UNITS.len(), -1i8..=1, latency())
}

fn leaf_step() -> impl Strategy<Value = LeafStep> {
    prop_oneof![
        latency().prop_map(LeafStep::Read),
        answer().prop_map(|(unit, around, latency)| LeafStep::Answer { unit, around, latency }),
    ]
}

fn child_step() -> impl Strategy<Value = ChildStep> {
    prop_oneof![
        3 => answer().prop_map(|(unit, around, latency)| ChildStep::Answer { unit, around, latency }),
        2 => latency().prop_map(ChildStep::Read),
        1 => Just(ChildStep::Flaky),
        1 => Just(ChildStep::Blank),
        1 => vec(leaf_step(), 1..=2).prop_map(ChildStep::SpawnGrandchild),
        1 => Just(ChildStep::CallSubagent),
        1 => Just(ChildStep::Fail),
        1 => Just(ChildStep::AskUser),
        1 => Just(ChildStep::Hang),
        1 => Just(ChildStep::LlmError),
    ]
}

fn session() -> impl Strategy<Value = SessionPick> {
    prop_oneof![
        2 => Just(SessionPick::Temp),
        1 => Just(SessionPick::Default),
        2 => Just(SessionPick::Fork),
        1 => Just(SessionPick::Inherit),
        2 => (0u8..2).prop_map(SessionPick::Named),
        1 => Just(SessionPick::NamedLikeTemp),
        1 => any::<bool>().prop_map(SessionPick::KindCapitalised),
    ]
}

/// The `allowed_tools` of a spawn: none three times in four (the default grant), else an
/// empty list, a narrowing list spelled in any of the ways that name a tool, or a bad name.
fn grant() -> impl Strategy<Value = Option<Grant>> {
    prop_oneof![
        9 => Just(None),
        1 => Just(Some(Grant::Empty)),
        2 => (1u8..16, 0..SPELLINGS.len(), prop::bool::weighted(0.25), any::<bool>())
            .prop_map(|(which, spelling, string, reversed)| Some(Grant::Names { which, spelling, string, reversed })),
        1 => any::<bool>().prop_map(|several| Some(Grant::Unknown { several })),
    ]
}

/// A spawn's extras: mostly none; a blank prompt, a missing or padded profile name, a model,
/// a reasoning effort or skills of the call's own now and then.
fn spawn_extras() -> impl Strategy<Value = SpawnExtras> {
    let agent = prop_oneof![
        12 => Just(AgentPick::None),
        5 => Just(AgentPick::Helper),
        1 => Just(AgentPick::Padded),
        1 => Just(AgentPick::Missing),
        1 => Just(AgentPick::Respelled),
    ];
    let skills = prop_oneof![
        10 => Just(None),
        1 => Just(Some(SkillGrant::Empty)),
        2 => Just(Some(SkillGrant::One)),
        1 => Just(Some(SkillGrant::Spelled)),
        1 => Just(Some(SkillGrant::Unknown)),
    ];
    let flags = (
        prop::bool::weighted(0.06),
        prop::bool::weighted(0.05),
        prop::bool::weighted(0.15),
        prop::bool::weighted(0.15),
    );
    (flags, agent, skills).prop_map(|((blank, timeout_text, model, effort), agent, skills)| SpawnExtras {
        blank,
        timeout_text,
        agent,
        model,
        effort,
        skills,
    })
}

fn profile_plan() -> impl Strategy<Value = ProfilePlan> {
    (
        0..BODIES.len(),
        0u8..4,
        0u8..3,
        any::<bool>(),
        any::<bool>(),
        // Mostly 250 ms, a value latencies lean to, so a profile's child ends on its limit.
        prop_oneof![1 => Just(None), 1 => Just(Some(0u64)), 4 => Just(Some(250u64))],
        prop::option::weighted(
            0.35,
            (any::<bool>(), any::<bool>(), prop::bool::weighted(0.3)).prop_map(|(named, joined, crlf)| FileForm {
                named,
                joined,
                crlf,
            }),
        ),
        prop::bool::weighted(0.3),
        prop::bool::weighted(0.15),
    )
        .prop_map(|(body, tools, skills, model, effort, timeout_ms, file, dotted, undeclared)| ProfilePlan {
            body,
            tools,
            skills,
            model,
            effort,
            timeout_ms,
            file,
            dotted,
            undeclared,
        })
}

/// Names of calls that reach nothing: one like no tool, a catalog tool's name in another
/// case, and one that only starts like the `subagent` family's.
const UNKNOWN_NAMES: [&str; 3] = ["Frobnicate", "read", "subagent.status"];

/// The message of every `subagent.send`: the task of a continuation whose first run never
/// asked the model, which a lane of its own answers.
const CONTINUATION: &str = "also check the tests";

/// How many earlier tasks a wait, send or cancel chooses among (see `Compiler::task_ref`).
const TASK_PICKS: u8 = 4;

fn root_call() -> impl Strategy<Value = RootCall> {
    prop_oneof![
        2 => select(LATENCIES.to_vec()).prop_map(RootCall::Read),
        1 => Just(RootCall::Flaky),
        1 => prop_oneof![3 => Just(0), 1 => Just(1), 1 => Just(2)].prop_map(|which| RootCall::Unknown { which }),
        3 => (vec(child_step(), 1..=3), task_form(), prop::bool::weighted(0.15)).prop_map(|(child, form, tools)| RootCall::Agent { child, form, tools }),
        4 => (vec(child_step(), 1..=3), session(), prop::option::weighted(0.3, select(vec![0i64, 100, 250, 500, 1000, -1000, CLAMPED_MS])), grant(), spawn_extras())
            .prop_map(|(child, session, timeout_ms, grant, extras)| RootCall::Spawn { child, session, timeout_ms, grant, extras }),
        2 => (vec(0u8..8 * TASK_PICKS, 0..=2), prop::option::weighted(0.85, select(vec![0i64, 50, 250, 1000, 60_000, -50]))).prop_map(|(tasks, timeout_ms)| RootCall::Wait { tasks, timeout_ms }),
        1 => (0u8..8 * TASK_PICKS, task_form()).prop_map(|(task, form)| RootCall::Send(task, form)),
        1 => (0u8..8 * TASK_PICKS).prop_map(RootCall::Cancel),
    ]
}

/// An `Agent` task or a message: as the lane expects it mostly, blank or padded with whitespace
/// sometimes.
fn task_form() -> impl Strategy<Value = TaskForm> {
    prop_oneof![16 => Just(TaskForm::Plain), 2 => Just(TaskForm::Blank), 2 => Just(TaskForm::Padded)]
}

fn root_reply() -> impl Strategy<Value = RootReply> {
    prop_oneof![
        8 => (vec(root_call(), 1..=4), select(LATENCIES.to_vec())).prop_map(|(calls, latency)| RootReply::Calls(calls, latency)),
        2 => Just(RootReply::Text),
        1 => Just(RootReply::Blank),
        1 => terminal_reply().prop_map(|(arg, said)| RootReply::FinalAnswer(arg, said)),
        1 => terminal_reply().prop_map(|(arg, said)| RootReply::Fail(arg, said)),
        1 => Just(RootReply::AskUser),
        1 => Just(RootReply::LlmError),
        1 => Just(RootReply::ReadThenFinal),
        1 => (0u8..3).prop_map(RootReply::TwoTerminals),
    ]
}

fn risk_tag() -> impl Strategy<Value = Option<RiskTag>> {
    prop_oneof![2 => Just(Some(RiskTag::Safe)), 1 => Just(None), 1 => Just(Some(RiskTag::Write))]
}

fn gate_plan() -> impl Strategy<Value = GatePlan> {
    let safe_listed =
        prop_oneof![3 => Just(None), 1 => select(vec!["ask_user", "fail", "final_answer"]).prop_map(Some)];
    (
        (risk_tag(), any::<bool>()),
        (risk_tag(), any::<bool>()),
        any::<bool>(),
        (safe_listed, any::<bool>()),
        vec(any::<bool>(), 1..=4),
    )
        .prop_map(|(read, flaky, unknown_listed, (safe_listed, children), answers)| GatePlan {
            read,
            flaky,
            unknown_listed,
            safe_listed,
            children,
            answers,
        })
}

/// Plans of a family.
pub fn plan(family: Family) -> impl Strategy<Value = Plan> {
    (
        knobs(family),
        vec(root_reply(), 1..=8),
        vec(prop::option::of(select(vec![0u64, 100, 1000, 5000])), 0..=2),
        vec(select(vec![0u64, 50, 100, 250, 1000]), 0..=2),
        // One plan in eight runs its calls through the risk gate.
        prop::option::weighted(0.125, gate_plan()),
        (profile_plan(), prop::bool::weighted(0.6)),
        // One plan in six opens with a rare situation.
        prop::option::weighted(1.0 / 6.0, select(Rare::ALL.to_vec())),
    )
        .prop_map(|(knobs, root, turns, steer, gate, (profile, skills), rare)| Plan {
            rare,
            knobs,
            root,
            turns,
            steer,
            gate,
            profile,
            skills,
        })
}

/// Scenarios of a family, as a user would write them.
pub fn scenario(family: Family) -> impl Strategy<Value = Scenario> {
    plan(family).prop_map(|plan| plan.compile())
}

/// [`scenario`], for a core with `capabilities`: each plan drops what the core lacks before it
/// is compiled (steering, the risk gate, the other family added to a preset, a rare situation
/// of a missing family), so the draws and case numbers stay those of [`scenario`]. With
/// [`Capabilities::ALL`](crate::sut::Capabilities::ALL) it is [`scenario`]. A plan whose
/// preset itself is missing is left as drawn (the fuzzer skips and counts it).
pub fn scenario_for(family: Family, capabilities: crate::sut::Capabilities) -> impl Strategy<Value = Scenario> {
    plan(family).prop_map(move |plan| plan.within(capabilities).compile())
}

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

    /// The tools of the root's calls the gate asks about, in order (a reply with a terminal
    /// call runs none of its calls, `roku.terminal.scan-first`: only `Calls` replies run any).
    fn questions(&self, gate: &GatePlan) -> Vec<&'static str> {
        let calls = self.root.iter().filter_map(|r| match r {
            RootReply::Calls(calls, _) => Some(calls),
            _ => None,
        });
        calls.flatten().map(RootCall::tool).filter(|tool| gate.asks(tool)).collect()
    }

    /// The plan without what a core with `capabilities` lacks (see [`scenario_for`]).
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
            gate: self.gate.clone().filter(|_| self.rare.is_none()),
            answers: Vec::new(),
            asking_child: self.gate.as_ref().filter(|_| self.rare.is_none()).is_some_and(|gate| {
                let questions = self.questions(gate);
                questions.last() == Some(&"Agent") && questions.iter().filter(|t| **t == "Agent").count() == 1
            }),
            profile: self.profile.clone(),
            seed: k.seed,
            // Skills are Bub's: a Roku session has none.
            skills: self.skills && k.bub,
        };
        let mut root = self.rare.map(|rare| c.rare(rare)).unwrap_or_default();
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
        let spare = c.spawned + self.turns.len() + 3;
        root.extend((0..spare).map(|_| text("Summary.")));
        let approval = match self.gate.as_ref().filter(|_| self.rare.is_none()) {
            Some(gate) => ApprovalSpec {
                mode: GateMode::Risk,
                policy_deny: gate.policy().into_iter().map(str::to_string).collect(),
                answers: std::mem::take(&mut c.answers),
            },
            None => ApprovalSpec::default(),
        };
        let tag = |name: &str| self.gate.as_ref().filter(|_| self.rare.is_none()).and_then(|gate| gate.tag(name));
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
        for (i, gap) in self.turns.iter().enumerate() {
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
            steer: self
                .steer
                .iter()
                .map(|at_ms| Steer { at_ms: *at_ms, message: format!("steer at {at_ms}") })
                .collect(),
            expect: Expect::default(),
            limits: Limits::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    use super::*;

    #[test]
    fn generated_scenarios_are_valid_and_round_trip_through_json() {
        let mut runner = TestRunner::deterministic();
        for _ in 0..200 {
            let s = scenario(Family::Any).new_tree(&mut runner).unwrap().current();
            crate::scenario::validate(&s).unwrap_or_else(|e| panic!("{e:?}"));
            let json = serde_json::to_string_pretty(&s).unwrap();
            let back = crate::scenario::parse(std::path::Path::new("generated.json"), &json).unwrap();
            assert_eq!(back, s);
        }
    }
}

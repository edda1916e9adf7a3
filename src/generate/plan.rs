//! What a generated scenario is made of, as plain values: the [`Plan`], its knobs, its
//! replies and calls, the children's scripts, the gate, the profile and the rare situations,
//! with the tables of values they pick from.
//!
//! It neither draws plans (`draw`) nor turns them into scenarios (`compile`).

use crate::scenario::{PresetName, RiskTag, RulesSpec};

/// Latencies (ms) on and around the timeouts the knobs draw from.
pub(super) const LATENCIES: [u64; 11] = [0, 1, 50, 99, 100, 101, 249, 250, 251, 499, 500];
/// Latencies that land on the time limits the knobs draw (100 and 250 ms), drawn more often:
/// children answering together, and answering in the very instant a limit, a wait deadline
/// or a steering message (drawn at the same values) falls, are where same-instant ties are.
pub(super) const TIE_LATENCIES: [u64; 2] = [100, 250];

/// The root's skills, when it has any.
pub(super) const SKILLS: [&str; 2] = ["review", "deploy"];

/// Units of child results: 1, 2, 3 and 4 bytes per character.
pub(super) const UNITS: [&str; 4] = ["a", "é", "字", "😀"];

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
pub(super) struct Knobs {
    pub(super) bub: bool,
    pub(super) root_step_budget: Option<u32>,
    pub(super) recovery_budget: Option<u32>,
    pub(super) child_step_cap: Option<u32>,
    pub(super) depth_limit: Option<u32>,
    pub(super) spawn_cost: Option<u32>,
    pub(super) result_limit: Option<Option<usize>>,
    pub(super) agent_timeout_ms: Option<Option<u64>>,
    pub(super) default_timeout_ms: Option<Option<u64>>,
    pub(super) max_concurrency: Option<usize>,
    pub(super) agent_tool: Option<bool>,
    pub(super) subagent_tools: Option<bool>,
    pub(super) unknown_tool_message: Option<String>,
    pub(super) seed: u64,
}

impl Knobs {
    /// The rules section a scenario file writes for these knobs.
    pub(super) fn spec(&self) -> RulesSpec {
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
pub(super) enum ChildStep {
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
pub(super) enum LeafStep {
    /// Calls `Read`.
    Read(u64),
    /// Answers with `count` copies of `UNITS[unit]`.
    Answer { unit: usize, around: i8, latency: u64 },
}

/// The `allowed_tools` of a `subagent` call.
#[derive(Clone, Debug)]
pub(super) enum Grant {
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
pub(super) enum AgentPick {
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
pub(super) enum SkillGrant {
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
pub(super) struct SpawnExtras {
    /// A blank prompt (refused before anything else but the depth).
    pub(super) blank: bool,
    pub(super) agent: AgentPick,
    /// `timeout_seconds` written as a string (`"0.1"`): not a number, so not given.
    pub(super) timeout_text: bool,
    /// `model` and `reasoning_effort` of the call's own.
    pub(super) model: bool,
    pub(super) effort: bool,
    pub(super) skills: Option<SkillGrant>,
}

/// The scenario's one profile, `helper`: its body (one of [`BODIES`]), tools and skills
/// (narrowing the child unless the call names its own), model, reasoning effort and time limit.
#[derive(Clone, Debug)]
pub(super) struct ProfilePlan {
    pub(super) body: usize,
    /// `None`, `[]`, `["Read"]`, or `[" flaky", "FAIL"]` (names spelled other ways).
    pub(super) tools: u8,
    /// `None`, `["deploy"]` or `[" Review "]`.
    pub(super) skills: u8,
    pub(super) model: bool,
    pub(super) effort: bool,
    /// The profile's `timeout_seconds` in ms: unset, 0 (none) or 250.
    pub(super) timeout_ms: Option<u64>,
    /// Written as a profile file (`profile_files`) instead of inline, one time in three.
    pub(super) file: Option<FileForm>,
    /// Named `code.helper` instead of `helper`: a file name with a dot before its `.md`.
    pub(super) dotted: bool,
    /// Not declared at all, so the session has no profile: no listing in the prompt, and a
    /// call naming `helper` is refused.
    pub(super) undeclared: bool,
}

/// How the profile file is written: with its `name` or without (the file's name minus `.md`
/// names it, `bub.profile.fields`), its lists as YAML lists or as one comma-separated string,
/// its lines ended with `\n` or with `\r\n`.
#[derive(Clone, Copy, Debug)]
pub(super) struct FileForm {
    pub(super) named: bool,
    pub(super) joined: bool,
    pub(super) crlf: bool,
}

/// Profile bodies: none, plain, with whitespace around it (trimmed in the prompt), blank.
pub(super) const BODIES: [&str; 4] = ["", "Be terse.", "\n  Be terse.\n", "  \n"];

/// How a granted name is spelled: as is, or in the other ways that name the same tool
/// (`bub.spawn.name-matching`: trimmed, any case, `.` for `_`).
pub(super) const SPELLINGS: [fn(&str) -> String; 4] =
    [|n| n.to_string(), |n| format!(" {} ", n.to_uppercase()), |n| n.replace('_', "."), |n| n.to_lowercase()];

/// Where a background child's conversation comes from.
#[derive(Clone, Copy, Debug)]
pub(super) enum SessionPick {
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
pub(super) enum RootCall {
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
pub(super) enum TaskForm {
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
pub(super) enum RootReply {
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
pub(super) enum TextArg {
    Given,
    /// Left out.
    Missing,
    /// `""`.
    Empty,
    /// Given, with whitespace around it, which is part of the text (nothing trims it).
    Padded,
}

/// Whether a reply with a terminal call has text of its own beside it.
pub(super) type Said = bool;

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
pub(super) struct GatePlan {
    /// `Read`'s tag, and whether the policy lists it (a listed `risk:safe` tool still runs).
    pub(super) read: (Option<RiskTag>, bool),
    /// `Flaky`'s.
    pub(super) flaky: (Option<RiskTag>, bool),
    /// Whether the policy lists the undeclared name the root calls.
    pub(super) unknown_listed: bool,
    /// A call the rules make safe that the policy lists all the same (a safe call is never
    /// refused, `roku.approval.risk-classes`): `ask_user`, `fail` or `final_answer`.
    pub(super) safe_listed: Option<&'static str>,
    /// Whether the user, not the policy, decides on `Agent` and the `subagent` family.
    pub(super) children: bool,
    /// The user's answers, in turn (from the start again when the gate asks more).
    pub(super) answers: Vec<bool>,
}

/// The names the policy of a [`GatePlan`] without children refuses.
pub(super) const SPAWNING: [&str; 5] = ["Agent", "subagent", "subagent.wait", "subagent.send", "subagent.cancel"];

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
pub(super) const RARE_LIMIT_MS: u64 = 250;

/// A shape that makes a rule visible from the model's side alone (issue 38), drawn only when
/// the fuzzer judges a run by what the model endpoint saw ([`Mode::ModelSide`]): each opens the
/// first turn (instead of a [`Rare`] situation), sets the knobs it needs and reads the variant
/// it runs in from the plan's `twist` (a drawn byte: which call, which family, which source
/// of a time limit). The free draws reach these rarely, or in forms the model cannot tell
/// apart from a wrong core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// The root's step budget (2 to 4) reaches 0 by a regular call while recovery is left (a
    /// `Read`, a failing `Flaky` or an unknown name last; the calls in one reply or one each),
    /// so the nudge reads `remaining: 0, recovery: C` with C above 0; a second turn shows it
    /// to the model (`roku.nudge.after-regular-call`, `roku.loop.budget-zero-no-llm-call`).
    BudgetOutRecoveryLeft,
    /// The reverse: recovery (1 or 2) reaches 0 first by failed calls while steps are left, so
    /// the nudge reads `remaining: R, recovery: 0`, the loop goes on and every regular call
    /// after it is nudged again (`roku.nudge.recovery-does-not-stop`).
    RecoveryOutStepsLeft,
    /// A terminal call (`final_answer`, `fail` or `ask_user`) beside a `Read`, a `Flaky`, an
    /// unknown name, an `Agent` or a `subagent` call of the same reply, before or after it:
    /// none of the other calls runs (`roku.terminal.scan-first`).
    TerminalBeside,
    /// A background child's final reply in exactly the instant its time limit (from the
    /// call's `timeout_seconds` or the default knob) runs out, after one step or two: the
    /// reply wins (`core.time.finish-at-limit-wins`).
    BackgroundReplyAtLimit,
    /// Roku's risk gate with `Read` tagged `risk:safe` and on the policy's deny list, called
    /// by the root: a safe call runs all the same (`roku.approval.risk-classes`).
    SafeToolDenied,
    /// `subagent` calls on a `fork` (or `inherit`) session beside other calls of the same
    /// reply (a `Read`, a failing `Flaky`, a `temp` spawn, another fork), before or after
    /// them: each fork child starts from the parent's conversation up to that reply, without
    /// the results of its other calls (`bub.session.fork-snapshot`).
    ForkBeside,
    /// A child that ends early (an answer, a `fail`, a time limit) with most of its grant
    /// unused, then the parent's regular calls until its budget is exactly spent: a core that
    /// refunded the rest would ask the model once more (`core.budget.never-refunded`).
    Refund,
    /// Two children under a fractional time limit of 1.5 s (`Agent`'s knob, a call's
    /// `timeout_seconds` or the default knob): one replies just before it, one just after, so
    /// a limit cut to whole seconds (or rounded up) shows in the times and in the timeout text
    /// (`core.time.seconds-format`).
    FractionalLimit,
}

impl Shape {
    /// Every shape, in the order they are drawn.
    pub const ALL: [Shape; 8] = [
        Shape::BudgetOutRecoveryLeft,
        Shape::RecoveryOutStepsLeft,
        Shape::TerminalBeside,
        Shape::BackgroundReplyAtLimit,
        Shape::SafeToolDenied,
        Shape::ForkBeside,
        Shape::Refund,
        Shape::FractionalLimit,
    ];
}

impl Shape {
    /// Whether the shape starts children whose end the root waits for (steering, which
    /// wakes the root, is left out of its plan).
    pub(super) fn spawns(self) -> bool {
        matches!(self, Shape::BackgroundReplyAtLimit | Shape::ForkBeside | Shape::Refund | Shape::FractionalLimit)
    }
}

/// What a plan is drawn for: the fuzzer's judge decides which shapes are worth drawing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Judged from the core's events: the draws every recorded finding and case number was
    /// made with, kept byte for byte.
    #[default]
    Events,
    /// Judged from the model's side: the same plans, then a [`Shape`] in some of them.
    ModelSide,
}

/// The time limit of [`Shape::BackgroundReplyAtLimit`], which its child's last reply takes
/// exactly.
pub(super) const SHAPE_LIMIT_MS: u64 = 250;

/// The fractional time limit of [`Shape::FractionalLimit`], and its children's replies either
/// side of it.
pub(super) const FRACTIONAL_MS: u64 = 1500;

/// Everything a generated scenario is made of.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The rare situation the turn opens with, if any.
    pub rare: Option<Rare>,
    /// The model-side shape the turn opens with, if any (only in [`Mode::ModelSide`]; a plan
    /// with one has no rare situation).
    pub shape: Option<Shape>,
    /// Which variant of the shape runs (see each [`Shape`]).
    pub(super) twist: u8,
    pub(super) knobs: Knobs,
    pub(super) root: Vec<RootReply>,
    /// Virtual gaps before turns 2, 3, … (`None`: right after the previous one).
    pub(super) turns: Vec<Option<u64>>,
    pub(super) steer: Vec<u64>,
    /// Roku's risk gate instead of the auto gate.
    pub(super) gate: Option<GatePlan>,
    pub(super) profile: ProfilePlan,
    /// Whether the root has skills (`review`, `deploy`) for children to be narrowed to (Bub's
    /// preset only).
    pub(super) skills: bool,
}

/// A `timeout_seconds` past `bub.timeout.clamped`'s 1,000,000,000 s, in ms.
pub(super) const CLAMPED_MS: i64 = 2_000_000_000_000;

/// Names of calls that reach nothing: one like no tool, a catalog tool's name in another
/// case, and one that only starts like the `subagent` family's.
pub(super) const UNKNOWN_NAMES: [&str; 3] = ["Frobnicate", "read", "subagent.status"];

/// The message of every `subagent.send`: the task of a continuation whose first run never
/// asked the model, which a lane of its own answers.
pub(super) const CONTINUATION: &str = "also check the tests";

/// How many earlier tasks a wait, send or cancel chooses among (see `Compiler::task_ref`).
pub(super) const TASK_PICKS: u8 = 4;

//! The proptest strategies that draw plans, and through them scenarios: where each value is
//! drawn from and how often.
//!
//! It decides nothing about the scenario a plan becomes (`compile`) and holds no plan type
//! (`plan`).

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;

use crate::scenario::{RiskTag, Scenario};

use super::plan::{
    AgentPick, BODIES, CLAMPED_MS, ChildStep, Family, FileForm, GatePlan, Grant, Knobs, LATENCIES, LeafStep, Mode,
    Plan, ProfilePlan, Rare, RootCall, RootReply, SPELLINGS, Said, SessionPick, Shape, SkillGrant, SpawnExtras,
    TASK_PICKS, TIE_LATENCIES, TaskForm, TextArg, UNITS,
};

/// A latency: any of [`LATENCIES`], or one of [`TIE_LATENCIES`] one time in three.
pub(super) fn latency() -> impl Strategy<Value = u64> + Clone {
    prop_oneof![2 => select(LATENCIES.to_vec()), 1 => select(TIE_LATENCIES.to_vec())]
}
fn text_arg() -> impl Strategy<Value = TextArg> {
    prop_oneof![
        7 => Just(TextArg::Given),
        3 => Just(TextArg::Missing),
        2 => Just(TextArg::Empty),
        2 => Just(TextArg::Padded)
    ]
}

/// A terminal call's text argument and, one time in three, text beside the call.
fn terminal_reply() -> impl Strategy<Value = (TextArg, Said)> {
    (text_arg(), prop::bool::weighted(0.35))
}

/// A knob's value, or (one time in four) the knob left unset so the preset decides.
fn or_preset<T: std::fmt::Debug + Clone + 'static>(
    value: impl Strategy<Value = T> + 'static,
) -> impl Strategy<Value = Option<T>> {
    prop_oneof![1 => Just(None), 3 => value.prop_map(Some)]
}

pub(super) fn knobs(family: Family) -> impl Strategy<Value = Knobs> {
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

pub(super) fn answer() -> impl Strategy<Value = (usize, i8, u64)> {
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

pub(super) fn session() -> impl Strategy<Value = SessionPick> {
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
pub(super) fn grant() -> impl Strategy<Value = Option<Grant>> {
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

pub(super) fn root_call() -> impl Strategy<Value = RootCall> {
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
            shape: None,
            twist: 0,
            knobs,
            root,
            turns,
            steer,
            gate,
            profile,
            skills,
        })
}

/// How often a plan drawn for [`Mode::ModelSide`] without a rare situation opens with a
/// [`Shape`]: with eight shapes, each is drawn in about one case in twenty, some 150 times in
/// CI's 3,000 cases.
const SHAPE_WEIGHT: f64 = 0.48;

/// Plans of a family, drawn for `mode`. [`Mode::Events`] is [`plan`], draw for draw. Judged
/// from the model's side, the plan is drawn exactly as [`plan`] draws it, then a [`Shape`]
/// and its twist are drawn after it (so the same case keeps its knobs and replies); a plan
/// with a rare situation keeps it and takes no shape (the two would set the same knobs), so
/// the rare situations are drawn as often as judged from events.
pub fn plan_in(family: Family, mode: Mode) -> BoxedStrategy<Plan> {
    match mode {
        Mode::Events => plan(family).boxed(),
        Mode::ModelSide => {
            (plan(family), prop::option::weighted(SHAPE_WEIGHT, (select(Shape::ALL.to_vec()), any::<u8>())))
                .prop_map(|(plan, shape)| match shape {
                    Some((shape, twist)) if plan.rare.is_none() => Plan { shape: Some(shape), twist, ..plan },
                    _ => plan,
                })
                .boxed()
        }
    }
}

/// [`scenario_for`], drawn for `mode` ([`plan_in`]): with [`Mode::Events`] the same
/// scenarios, case for case.
pub fn scenario_in(family: Family, capabilities: crate::sut::Capabilities, mode: Mode) -> BoxedStrategy<Scenario> {
    plan_in(family, mode).prop_map(move |plan| plan.within(capabilities).compile()).boxed()
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

#[cfg(test)]
pub(super) mod tests {
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

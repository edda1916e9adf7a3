//! What the fuzzer draws for each judge: judged from events (the default), seed 1 draws exactly
//! the scenarios it always drew, so recorded findings and the case numbers in the docs keep
//! their meaning; judged from the model's side, plans also draw the shapes that make the
//! model-side rules visible (issue 38), and every one of them holds on the built-in core.

use std::path::Path;
use std::time::Duration;

use rehearsal::internals::fuzz::{self, CaseResult};
use rehearsal::internals::generate::{Family, Shape};
use rehearsal::internals::harness::schedule::Schedule;
use rehearsal::internals::oracles::model_side::Judge;
use rehearsal::sut::AgentId;
use rehearsal::sut::event::{Event, TaskStatus};
use rehearsal::trace::{Trace, What};

/// FNV-1a over bytes: a hash that is the same on every machine and every Rust release (the
/// standard library's `DefaultHasher` promises neither).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// The hash of the JSON of the first `cases` scenarios of seed 1, family `Any`, drawn by
/// `draw`.
fn draws_hash(cases: u64, draw: impl Fn(u64) -> rehearsal::Scenario) -> u64 {
    let mut all = Vec::new();
    for case in 0..cases {
        all.extend(serde_json::to_vec(&draw(case)).unwrap());
        all.push(b'\n');
    }
    fnv1a(&all)
}

/// The hash of seed 1's first 200 scenarios at commit 93b1157, before the model-side shapes
/// were drawn: recorded findings (`fuzz-seed1-caseN`) and the case numbers quoted in the docs
/// name these scenarios.
const EVENTS_DRAWS_SEED1_200: u64 = 0xfa52_f581_528e_c5df;

#[test]
fn events_judged_draws_are_the_ones_recorded_before_the_model_side_shapes() {
    let plain = draws_hash(200, |case| fuzz::case_plan(1, case, Family::Any).compile());
    assert_eq!(plain, EVENTS_DRAWS_SEED1_200, "the events-judged fuzzer draws other scenarios for seed 1");
    // The campaign's own path: the plan drawn for the events judge, on the built-in core.
    let judged = draws_hash(200, |case| {
        let plan = fuzz::case_plan_judged(1, case, Family::Any, Judge::Events);
        plan.within(rehearsal::sut::Capabilities::ALL).compile()
    });
    assert_eq!(judged, EVENTS_DRAWS_SEED1_200, "a campaign judged from events draws other scenarios for seed 1");
}

#[test]
fn events_judged_plans_never_draw_a_model_side_shape() {
    for case in 0..3000 {
        let plan = fuzz::case_plan_judged(1, case, Family::Any, Judge::Events);
        assert_eq!(plan.shape, None, "case {case}");
    }
}

#[test]
fn model_side_plans_are_the_events_plans_plus_a_shape() {
    // The plan is drawn first, the shape after it: a case without a shape is the events
    // case itself, and only a case without a rare situation takes one.
    let mut same = 0;
    for case in 0..300 {
        let events = fuzz::case_plan_judged(1, case, Family::Any, Judge::Events);
        let model = fuzz::case_plan_judged(1, case, Family::Any, Judge::ModelSide);
        if model.shape.is_none() {
            let (a, b) = (events.compile(), model.compile());
            assert_eq!(serde_json::to_string(&a).unwrap(), serde_json::to_string(&b).unwrap(), "case {case}");
            same += 1;
        } else {
            assert_eq!(events.rare, None, "case {case}: a plan with a rare situation takes no shape");
        }
    }
    assert!(same >= 120, "only {same} of 300 cases drew no shape");
}

/// The core's events of a run, with their time and agent.
fn events(trace: &Trace) -> Vec<(Duration, &AgentId, &Event)> {
    trace
        .entries
        .iter()
        .filter_map(|e| match &e.what {
            What::Core(event) => Some((e.at, &e.agent, event)),
            _ => None,
        })
        .collect()
}

/// Whether a run shows what `shape` opens, read from the core's events.
fn shows(shape: Shape, trace: &Trace) -> bool {
    let events = events(trace);
    let root = |a: &AgentId| a.depth() == 0;
    // The root asks the model after event `i`.
    let asks_after = |i: usize| events[i..].iter().any(|(_, a, e)| root(a) && matches!(e, Event::LlmRequest { .. }));
    match shape {
        Shape::BudgetOutRecoveryLeft => events.iter().enumerate().any(|(i, (_, a, e))| {
            root(a) && matches!(e, Event::Nudge { budget: 0, recovery } if *recovery > 0) && asks_after(i)
        }),
        Shape::RecoveryOutStepsLeft => events.iter().enumerate().any(|(i, (_, a, e))| {
            root(a) && matches!(e, Event::Nudge { budget, recovery: 0 } if *budget > 0) && asks_after(i)
        }),
        // The first reply's calls end the loop and run nothing.
        Shape::TerminalBeside => {
            let first_end =
                events.iter().position(|(_, a, e)| root(a) && matches!(e, Event::AgentEnded { .. })).unwrap_or(0);
            events[..first_end].iter().all(|(_, _, e)| !matches!(e, Event::ToolStarted { .. } | Event::Spawned { .. }))
        }
        // A task ends completed at exactly 250 ms after it started.
        Shape::BackgroundReplyAtLimit => events.iter().any(|(at, _, e)| {
            let Event::TaskStarted { task_id, .. } = e else { return false };
            events.iter().any(|(end, _, e)| {
                matches!(e, Event::TaskEnded { task_id: t, status: TaskStatus::Completed, .. } if t == task_id)
                    && *end == *at + Duration::from_millis(250)
            })
        }),
        Shape::SafeToolDenied => {
            events.iter().any(|(_, a, e)| root(a) && matches!(e, Event::ToolStarted { tool, .. } if tool == "Read"))
        }
        // A child's first request carries its parent's conversation: a fork ran.
        Shape::ForkBeside => events
            .iter()
            .any(|(_, a, e)| !root(a) && matches!(e, Event::LlmRequest { call: 1, messages, .. } if *messages >= 3)),
        // The root's turn ends with no step left, and a child ended before it.
        Shape::Refund => events.iter().any(|(_, a, e)| root(a) && matches!(e, Event::AgentEnded { budget: 0, .. })),
        // One child timed out after 1.5 s, and one did not.
        Shape::FractionalLimit => {
            let timed_out: Vec<&AgentId> = events
                .iter()
                .filter_map(|(_, _, e)| match e {
                    Event::TimedOut { child, after } if *after == Duration::from_millis(1500) => Some(child),
                    Event::TaskEnded { child, status: TaskStatus::TimedOut, .. } => Some(child),
                    _ => None,
                })
                .collect();
            let finished = events.iter().any(|(_, _, e)| match e {
                Event::ChildResult { child, is_error: false, .. } => !timed_out.contains(&child),
                Event::TaskEnded { child, status: TaskStatus::Completed, .. } => !timed_out.contains(&child),
                _ => false,
            });
            !timed_out.is_empty() && finished
        }
    }
}

#[test]
fn model_side_mode_draws_every_shape_and_each_holds_on_both_judges() {
    // Issue 38: the shapes that make the model-side rules visible, each drawn well over a
    // hundred times in CI's 3,000 cases of seed 1 judged model-side. Every fourth drawn case
    // is run (enough to count, quick enough for a debug build) and judged both ways: the
    // built-in core must hold, and the run must show the shape.
    let mut drawn = [0u32; Shape::ALL.len()];
    let mut shown = [0u32; Shape::ALL.len()];
    for case in 0..3000 {
        let plan = fuzz::case_plan_judged(1, case, Family::Any, Judge::ModelSide);
        let Some(shape) = plan.shape else { continue };
        let k = Shape::ALL.iter().position(|s| *s == shape).unwrap();
        drawn[k] += 1;
        if drawn[k] % 4 != 1 {
            continue;
        }
        let scenario = plan.compile();
        for judge in [Judge::ModelSide, Judge::Events] {
            let verdict = fuzz::check_judged(&scenario, Schedule::default_order(), judge);
            assert!(
                matches!(verdict, CaseResult::Holds),
                "case {case} ({shape:?}, judged {judge:?}): {verdict:?}\n{}",
                serde_json::to_string_pretty(&scenario).unwrap()
            );
        }
        let profiles = rehearsal::load::resolve_profiles(&scenario, Path::new(".")).unwrap();
        let run = rehearsal::Runner::new().run(&scenario, &profiles, Schedule::default_order());
        if shows(shape, &run.trace) {
            shown[k] += 1;
        }
    }
    println!("model-side shapes in 3,000 cases of seed 1: drawn {drawn:?}, shown {shown:?} (every fourth run)");
    for (k, shape) in Shape::ALL.iter().enumerate() {
        let ran = drawn[k].div_ceil(4);
        assert!(drawn[k] >= 100, "{shape:?} drawn in only {} of 3,000 cases", drawn[k]);
        assert!(shown[k] * 10 >= ran * 9, "{shape:?}: only {} of the {ran} runs show it", shown[k]);
    }
}

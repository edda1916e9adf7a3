//! The library as a user's `#[test]`s use it: scenarios built in code, one entry that validates
//! then runs (the same checks as the CLI), Rust functions as the model and as tools, and a
//! verdict that prints the CLI's report.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;

use rehearsal::runner::Runner;
use rehearsal::scenario::{Lane, PresetName, Reply, Scenario, ScenarioError, ToolResult, ToolSpec, Turn};
use rehearsal::sut::event::OutcomeKind;
use rehearsal::sut::{Capabilities, CoreSession, Harness, Refused, SessionConfig, SystemUnderTest};

fn hello() -> Scenario {
    Scenario::builder("hello")
        .lane(Lane::agent("main").reply(Reply::text("Hi.")))
        .turn(Turn::user("Hello?").expect_message("Hi."))
        .build()
        .expect("a valid scenario")
}

#[test]
fn a_scenario_built_in_code_checks_like_a_file() {
    let verdict = Runner::new().explore(3).check(&hello()).unwrap();
    verdict.assert_passed();
    // One reply, one wait: no same-instant tie, so the default order is every order (issue 27).
    assert_eq!(verdict.orders(), 1, "no tie: only the default order runs");
    assert!(verdict.untied());
    assert_eq!(verdict.name(), "hello");
}

/// Formerly a gap: `runner::verify` skipped validation, so a scenario built in code that calls
/// an undeclared tool passed while the same content as a file exits 2.
#[test]
fn an_undeclared_tool_in_code_is_refused_before_anything_runs() {
    let mut scenario = hello();
    scenario.lanes[0].replies[0] = Reply::call("Raed", json!({}));
    let error = Runner::new().check(&scenario).unwrap_err();
    let ScenarioError::Invalid { field, message, .. } = &error else { panic!("{error}") };
    assert_eq!(field, "lanes[0].replies[0].calls[0].tool");
    assert!(message.contains("`Raed`"), "{message}");
    // The builder refuses it the same way.
    let built = Scenario::builder("typo")
        .lane(Lane::agent("main").reply(Reply::call("Raed", json!({}))))
        .turn(Turn::user("x"))
        .build();
    assert!(built.unwrap_err().to_string().contains("`Raed`"));
}

#[test]
fn the_verdict_prints_the_cli_report_and_fails_a_test_with_it() {
    let mut scenario = hello();
    scenario.turns[0].expect.message = Some(rehearsal::scenario::Text::Plain("Bye.".into()));
    let verdict = Runner::new().check(&scenario).unwrap();
    assert!(!verdict.passed());
    let report = verdict.to_string();
    assert!(report.starts_with("FAIL hello ("), "{report}");
    assert!(report.contains("turns[0].expect.message: expected \"Bye.\", got \"Hi.\""), "{report}");
    let debug = format!("{verdict:?}");
    assert!(debug.contains("passed: false") && debug.contains("name: \"hello\""), "{debug}");
    let panic = std::panic::catch_unwind(|| verdict.assert_passed()).unwrap_err();
    let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert_eq!(message, report, "the test fails with the report");
}

#[test]
fn rust_functions_answer_as_the_model_and_as_a_tool() {
    let reads = Arc::new(AtomicUsize::new(0));
    let counted = reads.clone();
    let scenario = Scenario::builder("functions")
        .preset(PresetName::Roku)
        .tool(ToolSpec::new("Read").latency_ms(10).handler(move |args| {
            counted.fetch_add(1, Ordering::Relaxed);
            ToolResult::text(format!("contents of {}", args["path"].as_str().unwrap_or("?")))
        }))
        .lane(Lane::agent("main").respond_with(|request| {
            // Read once, then answer with what the last tool result said.
            let last = request.messages.last().expect("a request holds the user's message");
            if last.tool_call_id.is_none() {
                Reply::call("Read", json!({"path": "notes.md"})).latency_ms(100)
            } else {
                Reply::text(format!("I read: {}", last.content)).latency_ms(100)
            }
        }))
        .turn(Turn::user("What is in notes.md?").expect_message("I read: contents of notes.md"))
        .build()
        .unwrap();
    Runner::new().check(&scenario).unwrap().assert_passed();
    // Two runs (determinism) of one read each.
    assert_eq!(reads.load(Ordering::Relaxed), 2);
}

/// A core that implements nothing: the runner says which features a scenario needs of it.
struct Nothing;

impl SystemUnderTest for Nothing {
    fn name(&self) -> &str {
        "nothing"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities { foreground: false, background: false, risk_gate: false, steering: false }
    }

    fn start(&self, _: SessionConfig, _: Harness) -> Result<Box<dyn CoreSession>, Refused> {
        Err(Refused("this core runs nothing".into()))
    }
}

#[test]
fn a_core_that_lacks_a_feature_skips_with_the_reason() {
    let runner = Runner::new().on(&Nothing);
    let bub = Scenario::builder("needs-background")
        .preset(PresetName::Bub)
        .lane(Lane::agent("main").reply(Reply::text("ok")))
        .turn(Turn::user("go").expect_outcome(OutcomeKind::FinalAnswer))
        .build()
        .unwrap();
    let why = runner.applies(&bub).unwrap_err();
    assert_eq!(why.to_string(), "the core `nothing` does not implement background `subagent`");
    assert_eq!((why.core.as_str(), why.missing.as_slice()), ("nothing", &["background `subagent`"][..]));
    let error = runner.check(&bub).unwrap_err().to_string();
    assert!(error.contains("does not implement background `subagent`"), "{error}");
    // A core that refuses the session stops the run with its reason, never a panic.
    let plain = Scenario::builder("plain")
        .rules(|r| r.agent_tool = Some(false))
        .lane(Lane::agent("main").reply(Reply::text("ok")))
        .turn(Turn::user("go"))
        .build()
        .unwrap();
    let verdict = runner.check(&plain).unwrap();
    assert!(
        verdict.to_string().contains("the core `nothing` refused the session: this core runs nothing"),
        "{verdict}"
    );
    // The refusal is a kind of halt the judge decides on, not text to search.
    let kinds: Vec<_> = verdict.run().unwrap().halts.iter().map(|h| h.kind).collect();
    assert_eq!(kinds, [rehearsal::internals::harness::Halt::Refused]);
}

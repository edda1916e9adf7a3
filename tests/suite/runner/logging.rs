//! The core's `tracing` logs name the agent concerned by its alias (`main/1`), so a log line
//! can be matched to the trace. Captured with `tracing-test` (its `no-env-filter` feature lets
//! it see the `rehearsal` crate's logs, not only this test crate's).

use std::path::Path;

use rehearsal::runner;
use rehearsal::scenario::{self, Scenario};
use tracing_test::traced_test;

fn scenario(json: &str) -> Scenario {
    scenario::parse(Path::new("inline.json"), json).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs the scenario once and checks that it passed, so the logs come from the run we meant.
fn run_passing(json: &str) {
    let scenario = scenario(json);
    let verdict = runner::judge(
        &scenario,
        runner::Runner::new().run(&scenario, &[], rehearsal::internals::harness::schedule::Schedule::default_order()),
    );
    let failures: Vec<&str> = verdict.failures().iter().map(|f| f.what.as_str()).collect();
    assert!(failures.is_empty(), "{}: {failures:?}\n{}", scenario.name, verdict.run().unwrap().trace.text());
}

/// The log lines holding every one of `parts`, or an error listing all lines.
fn lines_with(lines: &[&str], parts: &[&str]) -> Result<(), String> {
    if lines.iter().any(|l| parts.iter().all(|p| l.contains(p))) {
        Ok(())
    } else {
        Err(format!("no log line holds all of {parts:?}; the lines:\n{}", lines.join("\n")))
    }
}

const TIMEOUT: &str = r#"{
  "name": "foreground-child-times-out",
  "rules": {"agent_timeout_ms": 1000},
  "lanes": [
    {"agent": "main", "replies": [
      {"calls": [{"tool": "Agent", "args": {"task": "Watch the logs"}}], "latency_ms": 10},
      {"text": "The child timed out.", "latency_ms": 10}
    ]},
    {"agent": "main/1", "replies": [{"hang": true}]}
  ],
  "turns": [{"user": "Watch", "expect": {"outcome": "final_answer", "message": "The child timed out."}}],
  "expect": {"trace": ["timeout        main/1 after=1.000s"]}
}"#;

#[test]
#[traced_test]
fn foreground_child_timeout_is_logged_with_the_childs_alias() {
    run_passing(TIMEOUT);
    assert!(logs_contain("sub-agent timed out"));
    // The event's own field (right after the message), not a span's (`agent{alias=main ...}`).
    logs_assert(|lines| lines_with(lines, &["WARN", "sub-agent timed out alias=main/1 after_s=1"]));
}

const REFUSED: &str = r#"{
  "name": "grandchild-spawn-refused",
  "lanes": [
    {"agent": "main", "replies": [
      {"calls": [{"tool": "Agent", "args": {"task": "Delegate the review"}}], "latency_ms": 10},
      {"text": "Reviewed.", "latency_ms": 10}
    ]},
    {"agent": "main/1", "replies": [
      {"calls": [{"tool": "Agent", "args": {"task": "Go deeper"}}], "latency_ms": 10},
      {"text": "I could not delegate.", "latency_ms": 10}
    ]}
  ],
  "turns": [{"user": "Review", "expect": {"outcome": "final_answer", "message": "Reviewed."}}],
  "expect": {"trace": ["main/1   spawn.refused  Agent \"[Sub-agent error] Sub-agents cannot spawn further sub-agents.\""]}
}"#;

#[test]
#[traced_test]
fn refused_spawn_is_logged_with_the_refused_agents_alias() {
    run_passing(REFUSED);
    assert!(logs_contain("spawn refused"));
    logs_assert(|lines| {
        lines_with(lines, &["WARN", "spawn refused alias=main/1 reason=", "Sub-agents cannot spawn further sub-agents"])
    });
}

#[test]
#[traced_test]
fn spawn_is_logged_with_parent_and_child_aliases() {
    run_passing(REFUSED);
    logs_assert(|lines| lines_with(lines, &["INFO", "spawn parent=main child=main/1 grant=10"]));
}

const BACKGROUND_TIMEOUT: &str = r#"{
  "name": "background-child-times-out",
  "rules": {"preset": "bub", "subagent_default_timeout_ms": 1000},
  "seed": 3,
  "lanes": [
    {"agent": "main", "replies": [
      {"calls": [{"tool": "subagent", "args": {"prompt": "Watch the logs"}}], "latency_ms": 10},
      {"calls": [{"tool": "subagent.wait", "args": {}}], "latency_ms": 10},
      {"text": "The child timed out.", "latency_ms": 10}
    ]},
    {"agent": "main/1", "replies": [{"hang": true}]}
  ],
  "turns": [{"user": "Watch", "expect": {"outcome": "final_answer", "message": "The child timed out."}}],
  "expect": {"trace": ["timeout        main/1 after=1.000s", "timed_out via=wait"]}
}"#;

#[test]
#[traced_test]
fn background_child_timeout_is_logged_with_the_childs_alias_and_task_id() {
    run_passing(BACKGROUND_TIMEOUT);
    logs_assert(|lines| lines_with(lines, &["WARN", "sub-agent timed out alias=main/1 task_id=sub-", "after_s=1"]));
}

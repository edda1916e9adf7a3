//! Determinism: the same scenario, run twice through `Runner::run` (each run on its own fresh
//! paused-clock runtime), gives byte-identical traces, in text and in JSON lines; and the
//! seed, the one source of what a run draws, does change the task ids.

use std::path::Path;

use rehearsal::runner;
use rehearsal::scenario::{self, Scenario};

/// Two background children racing, a steer in the middle of it and a shared tool whose results
/// depend on call order: everything the schedule could reorder.
const RACE: &str = r#"{
  "name": "determinism-background-race",
  "rules": {"preset": "bub"},
  "seed": 7,
  "tools": [{"name": "Read", "latency_ms": 30, "results": [{"text": "first read"}, {"text": "second read"}]}],
  "lanes": [
    {"agent": "main", "replies": [
      {"calls": [{"tool": "subagent", "args": {"prompt": "Read the alpha logs"}},
                 {"tool": "subagent", "args": {"prompt": "Read the beta logs"}}], "latency_ms": 10},
      {"calls": [{"tool": "subagent.wait", "args": {}}], "latency_ms": 10},
      {"text": "Both read.", "latency_ms": 10}
    ]},
    {"task_contains": "alpha", "replies": [
      {"calls": [{"tool": "Read", "args": {"path": "alpha"}}], "latency_ms": 50},
      {"text": "alpha done", "latency_ms": 20}
    ]},
    {"task_contains": "beta", "replies": [
      {"calls": [{"tool": "Read", "args": {"path": "beta"}}], "latency_ms": 40},
      {"text": "beta done", "latency_ms": 20}
    ]}
  ],
  "steer": [{"at_ms": 15, "message": "hurry"}],
  "turns": [{"user": "Read both logs", "expect": {"outcome": "final_answer", "message": "Both read."}}]
}"#;

fn race(seed: u64) -> Scenario {
    let mut s = scenario::parse(Path::new("inline.json"), RACE).unwrap_or_else(|e| panic!("{e}"));
    s.seed = seed;
    s
}

#[test]
fn same_scenario_run_twice_gives_identical_text_and_json_traces() {
    let scenario = race(7);
    let first =
        runner::Runner::new().run(&scenario, &[], rehearsal::internals::harness::schedule::Schedule::default_order());
    let second =
        runner::Runner::new().run(&scenario, &[], rehearsal::internals::harness::schedule::Schedule::default_order());
    assert!(first.halts.is_empty(), "{:?}\n{}", first.halts, first.trace.text());
    // Not vacuous: both children ran, the steer arrived and the wait delivered both results.
    let text = first.trace.text();
    for fragment in ["spawn          main/2 background", "steered        \"hurry\"", "via=wait", "\"Both read.\""] {
        assert!(text.contains(fragment), "{fragment:?} missing from\n{text}");
    }
    assert_eq!(first.trace.text(), second.trace.text());
    assert_eq!(first.trace.json_lines(), second.trace.json_lines());
    assert_eq!(first.elapsed, second.elapsed);
}

#[test]
fn verify_passes_the_race_scenario_with_no_determinism_failure() {
    let scenario = race(7);
    let verdict = runner::Runner::new().verify(&scenario, &[]);
    let failures: Vec<&str> = verdict.failures().iter().map(|f| f.what.as_str()).collect();
    assert!(failures.is_empty(), "{failures:?}\n{}", verdict.run().unwrap().trace.text());
}

#[test]
fn a_different_seed_draws_different_task_ids() {
    let a = runner::Runner::new()
        .run(&race(7), &[], rehearsal::internals::harness::schedule::Schedule::default_order())
        .trace
        .text();
    let b = runner::Runner::new()
        .run(&race(8), &[], rehearsal::internals::harness::schedule::Schedule::default_order())
        .trace
        .text();
    assert_ne!(a, b, "the seed should change the background task ids");
    // Only the drawn ids differ: with them masked, the traces are the same.
    assert_eq!(mask_task_ids(&a), mask_task_ids(&b));
}

/// The trace with every task id (`sub-` and 8 hex digits) replaced by `sub-########`.
fn mask_task_ids(trace: &str) -> String {
    let mut out = String::with_capacity(trace.len());
    let mut rest = trace;
    while let Some(at) = rest.find("sub-") {
        let (head, tail) = rest.split_at(at + 4);
        out.push_str(head);
        let id_len = tail.chars().take(8).take_while(char::is_ascii_hexdigit).count();
        if id_len == 8 {
            out.push_str("########");
            rest = &tail[8..];
        } else {
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

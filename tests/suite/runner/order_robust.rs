//! Scripts that hold in every explored order: replies chosen by what the request holds
//! (`when`), replies that may go unused (`optional`) or answer any number of requests
//! (`repeatable`), and expectations held to the default order (`order_dependent`), with what
//! the report says about each.

use serde_json::{Value, json};

use crate::support::{manifest_path, rehearsal};

const EXAMPLE: &str = "scenarios/bub/order-robust-script-answers-by-what-the-request-holds.json";

fn example() -> Value {
    serde_json::from_str(&std::fs::read_to_string(manifest_path(EXAMPLE)).unwrap()).unwrap()
}

/// Writes `scenario` to a temporary folder and runs `rehearsal run FILE ARGS`.
fn run(scenario: &Value, args: &[&str]) -> crate::support::Output {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("case.json");
    std::fs::write(&file, serde_json::to_string_pretty(scenario).unwrap()).unwrap();
    let file = file.to_string_lossy().into_owned();
    let mut all = vec!["run", file.as_str()];
    all.extend_from_slice(args);
    rehearsal(&all)
}

#[test]
fn the_documented_example_has_no_same_instant_tie_so_explore_runs_one_order() {
    let out = rehearsal(&["run", EXAMPLE, "--explore", "16"]);
    assert_eq!(out.code, Some(0), "{}", out.both());
    // Its children's replies are due at distinct instants: no same-instant tie, so every order
    // is the default one, and the pass line says so instead of running it 17 times (issue 27).
    assert!(out.stdout.contains("no same-instant ties: one order is every order)"), "{}", out.both());
}

#[test]
fn one_script_survives_other_latencies_and_no_steering() {
    // The number of wake-ups changes (no steering, children in another order of ending);
    // the same replies answer them, and the unused optional one is no failure.
    let mut s = example();
    s["steer"] = json!([]);
    s["lanes"][1]["replies"][0]["latency_ms"] = json!(25000);
    s["lanes"][2]["replies"][0]["latency_ms"] = json!(1000);
    let out = run(&s, &["--explore", "8"]);
    assert_eq!(out.code, Some(0), "{}", out.both());
}

#[test]
fn when_texts_may_name_tasks() {
    // The closing reply waits for the slow child's notification, named by `$task3`.
    let mut s = example();
    s["lanes"][0]["replies"][3]["when"] =
        json!({"contains": ["<subagent-notification task_id=\"$task3\" status=\"completed\">"]});
    let out = run(&s, &["--explore", "4"]);
    assert_eq!(out.code, Some(0), "{}", out.both());
    // Naming a task the run never queued fails the reply's `when`, saying so.
    s["lanes"][0]["replies"][3]["when"] = json!({"contains": ["$task9"]});
    let out = run(&s, &[]);
    assert_eq!(out.code, Some(1), "{}", out.both());
    assert!(out.stdout.contains("$task9 refers to a task the run has not queued"), "{}", out.both());
}

#[test]
fn a_required_reply_whose_when_does_not_hold_stops_the_run_saying_why() {
    let mut s = example();
    // The closing reply now wants a fourth task's result, and nothing else answers the last
    // request.
    s["lanes"][0]["replies"][3]["when"]["result_of"] = json!(["$task1", "$task2", "$task3", "$task4"]);
    let out = run(&s, &[]);
    assert_eq!(out.code, Some(1), "{}", out.both());
    assert!(
        out.stdout.contains(
            "stopped: lanes[0].replies[3].when does not hold for main request #6: $task4 refers to a task the run has not queued; passed over: replies[1] (used once already), replies[2] (it holds the result of $task3)"
        ),
        "{}",
        out.both()
    );
}

#[test]
fn a_lane_past_its_replies_is_exhausted_naming_what_was_passed_over() {
    let mut s = example();
    let replies = s["lanes"][0]["replies"].as_array_mut().unwrap();
    replies.pop();
    let out = run(&s, &[]);
    assert_eq!(out.code, Some(1), "{}", out.both());
    assert!(
        out.stdout.contains("is exhausted: main asked for call 6, but the lane scripts 3 replies and none fits from the cursor on: replies[1] (used once already), replies[2] (it holds the result of $task3)"),
        "{}",
        out.both()
    );
}

#[test]
fn only_replies_that_must_be_used_count_as_unused() {
    let mut s = example();
    // A required reply after the closing one is never reached.
    s["lanes"][0]["replies"].as_array_mut().unwrap().push(json!({"text": "Never asked."}));
    let out = run(&s, &[]);
    assert_eq!(out.code, Some(1), "{}", out.both());
    assert!(
        out.stdout.contains("unused script: lanes[0] (agent \"main\"): 1 of its 5 replies were not used (replies[4])"),
        "{}",
        out.both()
    );
    // The optional reply, unused without steering, is not reported.
    let mut s = example();
    s["steer"] = json!([]);
    let out = run(&s, &[]);
    assert_eq!(out.code, Some(0), "{}", out.both());
}

#[test]
fn a_task_reference_that_is_not_one_is_a_load_error_at_its_field() {
    let mut s = example();
    s["lanes"][0]["replies"][2]["when"]["no_result_of"] = json!(["task3"]);
    let out = run(&s, &[]);
    assert_eq!(out.code, Some(2), "{}", out.both());
    assert!(out.stderr.contains("lanes[0].replies[2].when.no_result_of[0]"), "{}", out.both());
    assert!(out.stderr.contains("write `$taskN`"), "{}", out.both());
}

/// Two children answer in one instant; which one's reply line comes first is the tie order's
/// to decide, so a fragment pinning it holds in the default order only.
fn tie_fragment(order_dependent: Option<&str>) -> Value {
    let mut s = json!({
        "name": "two-children-reply-lines-in-one-instant",
        "rules": {"preset": "bub", "child_step_cap": 3},
        "lanes": [
            {"agent": "main", "replies": [
                {"calls": [{"tool": "subagent", "args": {"prompt": "one"}}, {"tool": "subagent", "args": {"prompt": "two"}}], "latency_ms": 100},
                {"text": "Waiting.", "latency_ms": 100},
                {"text": "Both in.", "latency_ms": 100}
            ]},
            {"agent": "main/1", "replies": [{"text": "one done", "latency_ms": 1000}]},
            {"agent": "main/2", "replies": [{"text": "two done", "latency_ms": 1000}]}
        ],
        "turns": [{"user": "go", "expect": {"message": "Both in."}}],
        "expect": {"trace": ["1.100s main/1   session.close  temp/$task1 discarded\n    1.100s main/2   llm.reply"]}
    });
    if let Some(reason) = order_dependent {
        s["expect"]["order_dependent"] = json!(reason);
    }
    s
}

#[test]
fn an_expectation_that_holds_in_the_default_order_only_fails_explored_orders_once() {
    let out = run(&tie_fragment(None), &["--explore", "16"]);
    assert_eq!(out.code, Some(1), "{}", out.both());
    // One failure line for all the orders it failed in, with one to replay.
    let lines: Vec<&str> = out.stdout.lines().filter(|l| l.contains("expect.trace[0]")).collect();
    assert_eq!(lines.len(), 1, "{}", out.both());
    assert!(lines[0].contains(" of 16 tie orders (") && lines[0].contains("--explore-seed "), "{}", out.both());
}

#[test]
fn marked_order_dependent_it_passes_and_the_report_says_what_was_skipped() {
    let out = run(&tie_fragment(Some("which child's lines come first in one instant is open")), &["--explore", "16"]);
    assert_eq!(out.code, Some(0), "{}", out.both());
    assert!(
        out.stdout.contains("17 tie orders: the default and 16 explored; 1 expectation in the default order only)"),
        "{}",
        out.both()
    );
    assert!(
        out.stdout.contains(
            "· not checked in explored orders: expect (which child's lines come first in one instant is open)"
        ),
        "{}",
        out.both()
    );
    // Without exploring, nothing was skipped and nothing is said.
    let out = run(&tie_fragment(Some("open")), &[]);
    assert_eq!(out.code, Some(0), "{}", out.both());
    assert!(!out.stdout.contains("default order only") && !out.stdout.contains("not checked"), "{}", out.both());
}

#[test]
fn one_explored_order_checks_everything_and_says_which_order_ran() {
    // Seed 1 alone: the unmarked fragment is checked there too, so a wrong one fails.
    let out = run(&tie_fragment(None), &["--explore-seed", "3"]);
    assert!(out.stdout.contains(", tie order 3 only)"), "{}", out.both());
    let mut s = tie_fragment(None);
    s["turns"][0]["expect"]["message"] = json!("Wrong.");
    let out = run(&s, &["--explore-seed", "3"]);
    assert_eq!(out.code, Some(1), "{}", out.both());
    assert!(out.stdout.contains("turns[0].expect.message"), "{}", out.both());
}

#[test]
fn an_order_dependent_request_check_is_skipped_in_explored_orders_only() {
    let mut s = tie_fragment(None);
    s["expect"] = json!({});
    // The last message of the closing request is child 2's notification in every order (spawn
    // order), so a check wanting child 1's is wrong everywhere: marked, it fails the default
    // order only.
    s["lanes"][0]["replies"][2]["check"] = json!({
        "last_message": "<subagent-notification task_id=\"$task1\" status=\"completed\">\none done\n</subagent-notification>",
        "order_dependent": "deliberately wrong, to show where it is checked"
    });
    let out = run(&s, &["--explore", "4"]);
    assert_eq!(out.code, Some(1), "{}", out.both());
    let failures: Vec<&str> = out.stdout.lines().filter(|l| l.starts_with("  - ")).collect();
    assert_eq!(failures.len(), 1, "{}", out.both());
    assert!(failures[0].starts_with("  - check failed: lanes[0].replies[2].check"), "{}", out.both());
}

//! `rehearsal run`: exit codes, the text report, `--trace` and `--format json`.

use serde_json::Value;

use crate::support::rehearsal;

const PASSING: &str = "tests/fixtures/passing/text-reply.json";
const FAILING: &str = "tests/fixtures/failing/wrong-message.json";

fn json_reports(stdout: &str) -> Vec<Value> {
    stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON object ({e}): {l}"))).collect()
}

#[test]
fn passing_file_exits_0_with_a_pass_line_and_the_count() {
    let out = rehearsal(&["run", PASSING]);
    assert_eq!(out.code, Some(0), "{}", out.both());
    assert_eq!(
        out.stdout,
        "PASS fixture-text-reply (tests/fixtures/passing/text-reply.json; 5 events, 100 ms virtual)\n1 passed, 0 failed\n"
    );
    assert!(out.stderr.is_empty(), "{}", out.both());
}

#[test]
fn failing_expectation_exits_1_naming_it_with_the_relevant_trace_lines() {
    let out = rehearsal(&["run", FAILING]);
    assert_eq!(out.code, Some(1), "{}", out.both());
    assert_eq!(
        out.stdout,
        concat!(
            "FAIL fixture-wrong-message (tests/fixtures/failing/wrong-message.json; 5 events, 100 ms virtual)\n",
            "  - turns[0].expect.message: expected \"The answer is 41.\", got \"The answer is 42.\"\n",
            "      |     0.100s main     agent.end      final_answer ok steps=0 budget=29 \"The answer is 42.\"\n",
            "      |     0.100s main     turn.end       #1 final_answer ok budget=29\n",
            "0 passed, 1 failed\n",
        )
    );
    assert!(out.stderr.is_empty(), "a failed expectation is not bad input\n{}", out.both());
}

#[test]
fn one_failing_file_among_passing_ones_exits_1_and_counts_both() {
    let out = rehearsal(&["run", PASSING, FAILING]);
    assert_eq!(out.code, Some(1), "{}", out.both());
    assert!(out.stdout.contains("PASS fixture-text-reply"), "{}", out.both());
    assert!(out.stdout.contains("FAIL fixture-wrong-message"), "{}", out.both());
    assert!(out.stdout.ends_with("1 passed, 1 failed\n"), "{}", out.both());
}

#[test]
fn trace_flag_prints_every_trace_line_under_the_verdict() {
    let out = rehearsal(&["run", "--trace", PASSING]);
    assert_eq!(out.code, Some(0), "{}", out.both());
    let want = concat!(
        "PASS fixture-text-reply (tests/fixtures/passing/text-reply.json; 5 events, 100 ms virtual)\n",
        "        0.000s main     turn.start     #1 budget=30 \"What is the answer?\"\n",
        "        0.000s main     llm.request    #1 messages=1 tools=4 budget=30\n",
        "        0.100s main     llm.reply      calls=[] text=\"The answer is 42.\"\n",
        "        0.100s main     agent.end      final_answer ok steps=0 budget=29 \"The answer is 42.\"\n",
        "        0.100s main     turn.end       #1 final_answer ok budget=29\n",
        "1 passed, 0 failed\n",
    );
    assert_eq!(out.stdout, want);
}

#[test]
fn without_trace_flag_no_trace_is_printed() {
    let out = rehearsal(&["run", PASSING]);
    assert!(!out.stdout.contains("turn.start"), "{}", out.both());
}

#[test]
fn json_format_prints_one_object_per_scenario_with_verdict_and_failures() {
    let out = rehearsal(&["run", "--format", "json", PASSING, FAILING]);
    assert_eq!(out.code, Some(1), "{}", out.both());
    let reports = json_reports(&out.stdout);
    assert_eq!(reports.len(), 2, "one object per scenario, and no summary line\n{}", out.both());

    let pass = &reports[0];
    assert_eq!(pass["file"], PASSING);
    assert_eq!(pass["name"], "fixture-text-reply");
    assert_eq!(pass["verdict"], "pass");
    assert_eq!(pass["failures"], Value::Array(Vec::new()));
    assert_eq!(pass["events"], 5);
    assert_eq!(pass["elapsed_ms"], 100);
    assert!(pass.get("trace").is_none(), "no trace without --trace: {pass}");

    let fail = &reports[1];
    assert_eq!(fail["verdict"], "fail");
    let failures = fail["failures"].as_array().expect("failures is an array");
    assert_eq!(failures.len(), 1, "{fail}");
    assert_eq!(
        failures[0]["what"],
        "turns[0].expect.message: expected \"The answer is 41.\", got \"The answer is 42.\""
    );
    let lines = failures[0]["lines"].as_array().expect("lines is an array");
    assert!(lines.iter().any(|l| l.as_str().is_some_and(|l| l.contains("turn.end       #1"))), "{fail}");
}

#[test]
fn json_format_with_trace_gives_every_event_as_an_object() {
    let out = rehearsal(&["run", "--format", "json", "--trace", PASSING]);
    assert_eq!(out.code, Some(0), "{}", out.both());
    let reports = json_reports(&out.stdout);
    assert_eq!(reports.len(), 1, "{}", out.both());
    let trace = reports[0]["trace"].as_array().expect("--trace adds a trace array");
    assert_eq!(trace.len(), 5, "{}", out.both());
    for event in trace {
        assert!(event["t_ms"].is_u64(), "t_ms: {event}");
        assert!(event["agent"].is_string(), "agent: {event}");
        assert!(event["event"].is_string(), "event: {event}");
    }
    let names: Vec<&str> = trace.iter().map(|e| e["event"].as_str().unwrap_or_default()).collect();
    assert_eq!(names, ["turn.start", "llm.request", "llm.reply", "agent.end", "turn.end"]);
    let end = &trace[3];
    assert_eq!(end["t_ms"], 100);
    assert_eq!(end["agent"], "main");
    assert_eq!(end["message"], "The answer is 42.");
    assert_eq!(end["budget"], 29);
}

#[test]
fn version_flag_exits_0() {
    let out = rehearsal(&["--version"]);
    assert_eq!(out.code, Some(0), "{}", out.both());
    assert!(out.stdout.starts_with("rehearsal "), "{}", out.both());
}

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
    assert_eq!(reports.len(), 3, "one object per scenario, then the summary record\n{}", out.both());

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
    // Beside the prose, fields a CI bot can use without parsing it.
    assert_eq!(failures[0]["kind"], "expectation", "{fail}");
    assert_eq!(failures[0]["expected"], "The answer is 41.", "{fail}");
    assert_eq!(failures[0]["actual"], "The answer is 42.", "{fail}");
}

#[test]
fn json_format_with_trace_gives_every_event_as_an_object() {
    let out = rehearsal(&["run", "--format", "json", "--trace", PASSING]);
    assert_eq!(out.code, Some(0), "{}", out.both());
    let reports = json_reports(&out.stdout);
    assert_eq!(reports.len(), 2, "the scenario, then the summary\n{}", out.both());
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

// ---------------------------------------------------------------------------------------
// The JSON summary record, and the PASS line after --explore.

#[test]
fn json_format_ends_with_a_summary_record_with_the_counts_and_the_exit_code() {
    let out = rehearsal(&["run", "--format", "json", PASSING, FAILING]);
    assert_eq!(out.code, Some(1), "{}", out.both());
    let reports = json_reports(&out.stdout);
    assert!(reports[..2].iter().all(|r| r["type"] == "scenario"), "{}", out.both());
    let summary = reports.last().unwrap();
    assert_eq!(summary["type"], "summary", "{summary}");
    for (field, want) in [("passed", 1), ("failed", 1), ("bad_input", 0), ("internal_error", 0), ("exit_code", 1)] {
        assert_eq!(summary[field], want, "{field}: {summary}");
    }
    assert_eq!(summary["events"], 10, "{summary}");
    assert_eq!(summary["elapsed_ms"], 200, "the virtual time of every run: {summary}");
}

#[test]
fn the_pass_line_says_how_many_tie_orders_explore_checked() {
    let out =
        rehearsal(&["run", "--explore", "3", "scenarios/bub/five-children-cap-2-tie-at-30s-delivered-together.json"]);
    assert_eq!(out.code, Some(0), "{}", out.both());
    assert!(out.stdout.contains(", 4 tie orders: the default and 3 explored)\n"), "{}", out.both());
}

#[test]
fn explore_on_a_run_without_same_instant_ties_runs_one_order_and_says_so() {
    // Issue 27: `--explore 100000` on a scenario with no tie re-ran one order 100,001 times.
    // One reply, one wait: every tie order is the default one. A second run of the same order
    // would take as long again, so the time bounds how many ran.
    let out = rehearsal(&["run", "--explore", "4000000000", PASSING]);
    assert_eq!(out.code, Some(0), "{}", out.both());
    assert!(
        out.stdout.starts_with(
            "PASS fixture-text-reply (tests/fixtures/passing/text-reply.json; 5 events, 100 ms virtual, no same-instant ties: one order is every order)\n"
        ),
        "{}",
        out.both()
    );
}

// ---------------------------------------------------------------------------------------
// --filter, --quiet

#[test]
fn filter_runs_only_the_scenarios_whose_name_contains_the_pattern() {
    let out = rehearsal(&["run", "scenarios/roku", "--filter", "agent-budget-from"]);
    assert_eq!(out.code, Some(0), "{}", out.both());
    let names: Vec<&str> = out.stdout.lines().filter_map(|l| l.strip_prefix("PASS ")?.split(' ').next()).collect();
    assert_eq!(names, ["agent-budget-from-1", "agent-budget-from-11", "agent-budget-from-30", "agent-budget-from-5"]);
    let last = out.stdout.lines().last().unwrap();
    assert!(last.starts_with("4 passed, 0 failed (") && last.ends_with(" not matching --filter)"), "{last}");
}

#[test]
fn a_filter_with_a_star_or_question_mark_is_a_glob_over_the_whole_name() {
    let out = rehearsal(&["run", "scenarios/roku", "--filter", "agent-budget-from-?", "--filter", "*-11"]);
    assert_eq!(out.code, Some(0), "{}", out.both());
    let names: Vec<&str> = out.stdout.lines().filter_map(|l| l.strip_prefix("PASS ")?.split(' ').next()).collect();
    assert_eq!(names, ["agent-budget-from-1", "agent-budget-from-11", "agent-budget-from-5"]);
}

#[test]
fn a_filter_that_matches_nothing_exits_2_naming_the_pattern() {
    let out = rehearsal(&["run", "scenarios/roku", "--filter", "no-such-scenario"]);
    assert_eq!(out.code, Some(2), "{}", out.both());
    assert!(out.stderr.contains("error: --filter \"no-such-scenario\" matched none of the "), "{}", out.both());
    let out = rehearsal(&["run", "--format", "json", PASSING, "--filter", "nope"]);
    assert_eq!(json_reports(&out.stdout).last().unwrap()["exit_code"], 2, "{}", out.both());
}

#[test]
fn quiet_prints_only_failures_and_the_summary() {
    let out = rehearsal(&["run", "--quiet", PASSING, FAILING]);
    assert_eq!(out.code, Some(1), "{}", out.both());
    assert!(!out.stdout.contains("PASS"), "{}", out.both());
    assert!(out.stdout.starts_with("FAIL fixture-wrong-message ("), "{}", out.both());
    assert!(out.stdout.ends_with("1 passed, 1 failed\n"), "{}", out.both());
    let out = rehearsal(&["run", "-q", "--format", "json", PASSING, FAILING]);
    let reports = json_reports(&out.stdout);
    assert_eq!(reports.len(), 2, "the failure and the summary: {}", out.both());
    assert_eq!(reports[0]["verdict"], "fail");
}

// ---------------------------------------------------------------------------------------
// Colour: only on a terminal (or when asked), never in JSON or JUnit.

const RED: &str = "\u{1b}[1;31m";
const GREEN: &str = "\u{1b}[32m";

#[test]
fn color_always_paints_the_verdict_words_the_counts_and_the_error_prefix() {
    let out = rehearsal(&["run", "--color", "always", PASSING, FAILING, "tests/fixtures/bad/wrong-type.json"]);
    assert!(out.stdout.contains(&format!("{GREEN}PASS\u{1b}[0m fixture-text-reply")), "{:?}", out.stdout);
    assert!(out.stdout.contains(&format!("{RED}FAIL\u{1b}[0m fixture-wrong-message")), "{:?}", out.stdout);
    assert!(
        out.stdout.ends_with(&format!("{GREEN}1 passed\u{1b}[0m, {RED}1 failed\u{1b}[0m, {RED}1 bad input\u{1b}[0m\n")),
        "{:?}",
        out.stdout
    );
    assert!(
        out.stderr.starts_with(&format!("{RED}error:\u{1b}[0m tests/fixtures/bad/wrong-type.json")),
        "{:?}",
        out.stderr
    );
    // Only those words: the failure's text and the trace lines stay plain.
    assert_eq!(out.stdout.matches('\u{1b}').count(), 2 * 5, "{:?}", out.stdout);
}

#[test]
fn machine_formats_are_never_coloured() {
    for format in ["json", "junit"] {
        let out = rehearsal(&["run", "--color", "always", "--format", format, PASSING, FAILING]);
        assert!(!out.stdout.contains('\u{1b}'), "{format}: {:?}", out.stdout);
    }
}

#[test]
fn color_auto_into_a_pipe_and_color_never_are_plain() {
    for color in ["auto", "never"] {
        let out = rehearsal(&["run", "--color", color, PASSING, FAILING, "tests/fixtures/bad/wrong-type.json"]);
        assert!(!out.stdout.contains('\u{1b}') && !out.stderr.contains('\u{1b}'), "{color}: {}", out.both());
    }
}

/// Runs `rehearsal ARGS` on a pseudo-terminal (util-linux `script`), with `env` set; `None`
/// where `script` is missing. Returns what the terminal showed.
fn on_a_terminal(args: &[&str], env: &[(&str, &str)]) -> Option<String> {
    let binary = env!("CARGO_BIN_EXE_rehearsal");
    let command = std::iter::once(binary).chain(args.iter().copied()).collect::<Vec<_>>().join(" ");
    let out = std::process::Command::new("script")
        .args(["-q", "-e", "-c", &command, "/dev/null"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("NO_COLOR")
        .env("TERM", "xterm")
        .envs(env.iter().copied())
        .output()
        .ok()?;
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn color_auto_paints_a_terminal_unless_no_color_is_set() {
    let Some(shown) = on_a_terminal(&["run", PASSING], &[]) else {
        eprintln!("skipped: no `script` to make a terminal");
        return;
    };
    assert!(shown.contains(&format!("{GREEN}PASS")), "{shown:?}");
    let shown = on_a_terminal(&["run", PASSING], &[("NO_COLOR", "1")]).unwrap();
    assert!(shown.contains("PASS fixture-text-reply") && !shown.contains('\u{1b}'), "{shown:?}");
    let shown = on_a_terminal(&["run", "--color", "always", PASSING], &[("NO_COLOR", "1")]).unwrap();
    assert!(shown.contains(&format!("{GREEN}PASS")), "--color always wins over NO_COLOR: {shown:?}");
}

// ---------------------------------------------------------------------------------------
// Progress: a bar only on a terminal, never in what a program reads.

#[test]
fn a_large_suite_into_a_pipe_gets_no_progress_bar() {
    let out = rehearsal(&["run", "scenarios"]);
    assert_eq!(out.code, Some(0), "{}", out.both());
    assert!(out.stderr.is_empty(), "nothing but errors and notes on stderr: {:?}", out.stderr);
}

#[test]
fn a_large_suite_on_a_terminal_shows_its_progress_and_the_verdicts_whole() {
    let Some(shown) = on_a_terminal(&["run", "scenarios"], &[]) else {
        eprintln!("skipped: no `script` to make a terminal");
        return;
    };
    // The bar counts every scenario file of the folder (however many it holds today).
    let piped = rehearsal(&["run", "--quiet", "scenarios"]);
    let files = piped.stdout.split(" passed, ").next().unwrap_or_default();
    assert!(shown.contains(&format!("/{files} scenario files")), "a bar on the terminal, of {files} files: {shown:?}");
    // Each verdict line is written whole between two drawings of the bar.
    assert!(shown.contains("PASS\u{1b}[0m agent-budget-from-30 (scenarios/roku/agent-budget-from-30.json; 16 events, 400 ms virtual)\r\n"), "{shown:?}");
    assert!(shown.contains(" passed\u{1b}[0m, 0 failed"), "{shown:?}");
    let quiet = on_a_terminal(&["run", "--quiet", "scenarios"], &[]).unwrap();
    assert!(!quiet.contains("scenario files"), "--quiet has no progress bar: {quiet:?}");
}

// ---------------------------------------------------------------------------------------
// --help, and which files a folder walk takes.

#[test]
fn run_help_lists_the_exit_codes_and_how_folders_are_walked() {
    let out = rehearsal(&["run", "--help"]);
    assert_eq!(out.code, Some(0), "{}", out.both());
    for expected in [
        "  0    every scenario passed",
        "  1    a scenario failed",
        "--coverage-min / --require-coverage was not met",
        "  2    bad input or usage",
        "  3    internal error",
        "top-level\n\"lanes\" or \"turns\" key",
        "--filter <PATTERN>",
        "--quiet",
        "--color <WHEN>",
        "--coverage",
    ] {
        assert!(out.stdout.contains(expected), "{expected:?} missing:\n{}", out.stdout);
    }
}

const GOOD: &str = r#"{"name": "good", "lanes": [{"agent": "main", "replies": [{"text": "hi"}]}], "turns": [{"user": "go", "expect": {"message": "hi"}}]}"#;

#[test]
fn a_folder_walk_takes_scenarios_reports_broken_ones_and_skips_other_json_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("suite");
    std::fs::create_dir_all(root.join("data")).unwrap();
    std::fs::write(root.join("good.json"), GOOD).unwrap();
    std::fs::write(root.join("package.json"), r#"{"name": "app", "version": "1.0.0"}"#).unwrap();
    std::fs::write(root.join("data/rows.json"), r#"[{"id": 1}, {"id": 2}]"#).unwrap();
    std::fs::write(root.join("tsconfig.json"), "{ // comments are no JSON\n \"compilerOptions\": {} }").unwrap();
    std::fs::write(root.join("broken.json"), "{\"name\": \"broken\", \"lanes\": [] \"turns\": []}").unwrap();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_rehearsal"))
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
    };
    let (code, stdout, stderr) = run(&["run", "suite"]);
    assert_eq!(code, Some(2), "the broken scenario is bad input\n{stdout}{stderr}");
    assert!(stdout.contains("PASS good (suite/good.json;"), "{stdout}");
    assert!(stdout.ends_with("1 passed, 0 failed, 1 bad input\n"), "{stdout}");
    assert!(stderr.contains("error: suite/broken.json:1:32: "), "{stderr}");
    assert!(
        stderr.contains(
            "note: skipped suite/data/rows.json, suite/package.json, suite/tsconfig.json: not scenarios (no top-level \"lanes\" or \"turns\"); name a file to run it anyway"
        ),
        "{stderr}"
    );
    let (_, stdout, _) = run(&["run", "--format", "json", "suite"]);
    let summary: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(summary["skipped_files"], 3, "{summary}");
    // A file named on the command line is always taken.
    let (code, _, stderr) = run(&["run", "suite/package.json"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("error: suite/package.json:"), "{stderr}");
    // A folder of nothing but other JSON says so.
    let (code, _, stderr) = run(&["run", "suite/data"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("error: no scenario file (*.json) under suite/data (1 *.json file there is not)"),
        "{stderr}"
    );
}

#[test]
fn every_malformed_fixture_is_still_reported_when_its_folder_is_walked() {
    let out = rehearsal(&["run", "tests/fixtures/bad"]);
    assert!(!out.stderr.contains("note: skipped"), "{}", out.both());
    let files = std::fs::read_dir(crate::support::manifest_path("tests/fixtures/bad")).unwrap();
    for file in files {
        let name = format!("tests/fixtures/bad/{}", file.unwrap().file_name().to_string_lossy());
        assert!(out.stdout.contains(&name) || out.stderr.contains(&name), "{name} was not run\n{}", out.both());
    }
}

#[test]
fn a_timeline_that_cannot_be_written_exits_2_naming_the_path_after_the_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no-such-folder").join("t.svg");
    let path = path.to_str().unwrap();
    let out = rehearsal(&["run", PASSING, "--timeline", path]);
    assert_eq!(out.code, Some(2), "{}", out.both());
    assert!(out.stdout.starts_with("PASS "), "the scenario's verdict still stands\n{}", out.both());
    assert!(out.stdout.ends_with("1 passed, 0 failed\n"), "the path is no bad scenario\n{}", out.both());
    let error = format!("error: {path}: cannot write the timeline: ");
    assert!(out.stderr.starts_with(&error) && !out.stderr.contains("cannot read"), "{}", out.both());

    let out = rehearsal(&["run", PASSING, "--timeline", path, "--format", "json"]);
    let records = json_reports(&out.stdout);
    assert_eq!(records.len(), 2, "the scenario's record and the summary\n{}", out.stdout);
    assert_eq!(records[1]["exit_code"], 2, "{}", out.stdout);
}

#[test]
fn the_readme_s_timeline_picture_is_what_the_command_draws() {
    let cap4 = "scenarios/bub/cap-4-six-children-queue-fifo.json";
    let (scenario, verdict) = rehearsal::runner::Runner::new()
        .check_file(&crate::support::manifest_path(cap4))
        .unwrap_or_else(|e| panic!("{e}"));
    let drawn = rehearsal::internals::timeline::svg(&scenario.name, &verdict.run().unwrap().trace);
    let shown = std::fs::read_to_string(crate::support::manifest_path("docs/timeline-cap-4.svg")).unwrap();
    assert!(
        shown == drawn,
        "docs/timeline-cap-4.svg (in the README) is not what the command draws now; redraw it with \
         `cargo run -- run {cap4} --timeline docs/timeline-cap-4.svg`"
    );
}

#[test]
fn a_failure_block_quotes_its_trace_lines_once() {
    // Issue 42: two failures quoting the same two trace lines printed them twice (four lines
    // for four expectations on a wire run).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("twice.json");
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(crate::support::manifest_path(FAILING)).unwrap()).unwrap();
    value["turns"][0]["expect"]["message_contains"] = serde_json::json!("41");
    std::fs::write(&file, value.to_string()).unwrap();
    let out = rehearsal(&["run", "--color", "never", file.to_str().unwrap()]);
    assert_eq!(out.code, Some(1), "{}", out.both());
    assert_eq!(out.stdout.matches("turn.end       #1 final_answer ok budget=29").count(), 1, "{}", out.stdout);
    assert!(out.stdout.contains("      | (the trace lines quoted above)\n"), "{}", out.stdout);
}

#[test]
fn snapshot_drift_and_new_files_point_at_what_the_binary_offers() {
    // Issue 42: the pointers led to `cargo insta review` and docs/scenarios.md, which a user
    // of the installed binary has not got.
    let dir = tempfile::tempdir().unwrap();
    let snaps = dir.path().join("snaps");
    let out = rehearsal(&["run", "--color", "never", "--snapshots", snaps.to_str().unwrap(), PASSING]);
    assert!(!out.stdout.contains("cargo"), "{}", out.stdout);
    assert!(out.stdout.contains("run the same command again with --accept"), "{}", out.stdout);
    let new = dir.path().join("mine.json");
    let made = rehearsal(&["new", new.to_str().unwrap()]);
    assert_eq!(made.code, Some(0), "{}", made.both());
    let text = std::fs::read_to_string(&new).unwrap();
    assert!(!text.contains("docs/"), "{text}");
    assert!(text.contains("`rehearsal schema`") && text.contains("`rehearsal run --help`"), "{text}");
}

//! Bad input: every kind of unusable scenario, bad path and bad usage is reported with its
//! exact place and a clear message, and maps to the right exit code (2 for bad input or
//! usage, 1 for an authoring error found while running). The fixtures live in
//! `tests/fixtures/bad/` (never under `scenarios/`, which holds only passing scenarios).

use std::path::Path;

use rehearsal::scenario::{self, ScenarioError};

use crate::support::{manifest_path, rehearsal};

/// Runs one fixture of `tests/fixtures/bad/` and checks the exit code.
fn run_bad(file: &str, want_code: i32) -> crate::support::Output {
    let path = format!("tests/fixtures/bad/{file}");
    let out = rehearsal(&["run", &path]);
    assert_eq!(out.code, Some(want_code), "{path}: wrong exit code\n{}", out.both());
    out
}

fn assert_contains(haystack: &str, needle: &str, all: &str) {
    assert!(haystack.contains(needle), "expected to find\n  {needle}\nin\n{all}");
}

// ---------------------------------------------------------------------------------------
// Through the binary: parse and validation errors exit 2 and name file, place and field.

#[test]
fn malformed_json_exits_2_naming_file_line_and_column() {
    let out = run_bad("malformed-json.json", 2);
    // The missing comma after `lanes` is seen at the next key, line 6 column 3.
    assert_contains(&out.stderr, "error: tests/fixtures/bad/malformed-json.json:6:3: at `", &out.both());
    assert_contains(&out.stderr, "expected `,` or `}`", &out.both());
    // serde_json's own " at line L column C" suffix is replaced by the place in front.
    assert!(!out.stderr.contains(" at line "), "{}", out.both());
    assert_contains(&out.stdout, "0 passed, 0 failed, 1 bad input", &out.both());
}

#[test]
fn unknown_top_level_field_exits_2_naming_field_and_place() {
    let out = run_bad("unknown-top-field.json", 2);
    assert_contains(
        &out.stderr,
        "error: tests/fixtures/bad/unknown-top-field.json:3:9: at `lanez`: unknown field `lanez`, expected one of `format`, `name`",
        &out.both(),
    );
}

#[test]
fn unknown_nested_field_exits_2_naming_its_json_path() {
    let out = run_bad("unknown-nested-field.json", 2);
    assert_contains(
        &out.stderr,
        "error: tests/fixtures/bad/unknown-nested-field.json:5:12: at `lanes[0].replies[0].txt`: unknown field `txt`, expected one of `text`",
        &out.both(),
    );
}

#[test]
fn wrong_type_exits_2_naming_the_path_and_the_types() {
    let out = run_bad("wrong-type.json", 2);
    assert_contains(
        &out.stderr,
        "error: tests/fixtures/bad/wrong-type.json:5:41: at `lanes[0].replies[0].latency_ms`: invalid type: string \"fast\", expected u64",
        &out.both(),
    );
}

#[test]
fn call_to_undeclared_tool_exits_2_naming_the_call_and_the_tool() {
    let out = run_bad("undeclared-tool.json", 2);
    assert_contains(
        &out.stderr,
        "error: tests/fixtures/bad/undeclared-tool.json:7:60: at `lanes[0].replies[1].calls[1].tool`: the script calls `Grep`, which is not a declared tool; declare it under `tools`, or mark the call `\"undeclared\": true`",
        &out.both(),
    );
}

/// Trailing characters after the scenario object (here a stray `}`) are a syntax error, not
/// silently ignored.
#[test]
fn trailing_characters_after_the_scenario_exit_2_naming_the_place() {
    let out = run_bad("trailing-characters.json", 2);
    assert_contains(&out.stderr, "error: tests/fixtures/bad/trailing-characters.json:7:2: ", &out.both());
    assert_contains(&out.stderr, "trailing characters", &out.both());
}

/// "Unknown fields are rejected everywhere", including inside a `{"repeat", "count"}` text.
#[test]
fn unknown_field_in_repeat_text_exits_2_naming_the_field() {
    let out = run_bad("unknown-field-in-repeat-text.json", 2);
    assert_contains(&out.stderr, "error: tests/fixtures/bad/unknown-field-in-repeat-text.json:", &out.both());
    assert_contains(&out.stderr, "lanes[0].replies[0].text", &out.both());
    assert_contains(&out.stderr, "cuont", &out.both());
}

// ---------------------------------------------------------------------------------------
// Through the binary: authoring errors found while running exit 1 and name lane and agent.

#[test]
fn exhausted_lane_exits_1_naming_the_lane_and_the_call_number() {
    let out = run_bad("exhausted-lane.json", 1);
    assert_contains(&out.stdout, "FAIL exhausted-lane (tests/fixtures/bad/exhausted-lane.json;", &out.both());
    assert_contains(
        &out.stdout,
        "  - stopped: lanes[0] (agent \"main\") is exhausted: main asked for call 2, but the lane scripts 1 reply",
        &out.both(),
    );
    // The trace lines leading to the stop are shown: the request that found the lane empty.
    assert_contains(&out.stdout, "      |     0.110s main     llm.request    #2 messages=3", &out.both());
    assert_contains(&out.stdout, "0 passed, 1 failed", &out.both());
    assert!(out.stderr.is_empty(), "a run-time authoring error is a verdict, not bad input\n{}", out.both());
}

#[test]
fn child_without_lane_exits_1_naming_the_agent_and_its_task() {
    let out = run_bad("child-without-lane.json", 1);
    assert_contains(
        &out.stdout,
        "  - stopped: lanes: no lane selects agent main/1 (task \"Summarise the logs\"); add a lane",
        &out.both(),
    );
    assert_contains(&out.stdout, "      |     0.100s main/1   llm.request    #1", &out.both());
}

#[test]
fn two_lanes_selecting_one_child_exit_1_naming_both_lanes_and_the_agent() {
    let out = run_bad("two-lanes-one-child.json", 1);
    assert_contains(
        &out.stdout,
        "  - stopped: lanes[1] (agent \"main/1\") and lanes[2] (task_contains \"logs\") both select agent main/1 (task \"Summarise the logs\"); make the selectors exclusive",
        &out.both(),
    );
}

#[test]
fn reference_to_an_unseen_task_id_exits_1_naming_the_call_and_the_reference() {
    let out = run_bad("unseen-task-reference.json", 1);
    assert_contains(
        &out.stdout,
        "  - stopped: lanes[0].replies[0].calls[0]: $task1 refers to a task id the request does not show (it shows none)",
        &out.both(),
    );
}

// ---------------------------------------------------------------------------------------
// Through the binary: bad paths and bad usage exit 2.

#[test]
fn missing_file_exits_2_naming_it() {
    let out = run_bad("does-not-exist.json", 2);
    assert_contains(
        &out.stderr,
        "error: tests/fixtures/bad/does-not-exist.json: cannot read: no such file or folder",
        &out.both(),
    );
}

#[test]
fn missing_file_next_to_a_good_one_exits_2_naming_it() {
    let out = rehearsal(&["run", "tests/fixtures/passing/text-reply.json", "tests/fixtures/nowhere.json"]);
    assert_eq!(out.code, Some(2), "{}", out.both());
    assert_contains(
        &out.stderr,
        "error: tests/fixtures/nowhere.json: cannot read: no such file or folder",
        &out.both(),
    );
}

#[test]
fn unknown_flag_exits_2_with_usage() {
    let out = rehearsal(&["run", "--frobnicate", "tests/fixtures/passing/text-reply.json"]);
    assert_eq!(out.code, Some(2), "{}", out.both());
    assert_contains(&out.stderr, "unexpected argument '--frobnicate'", &out.both());
    assert_contains(&out.stderr, "Usage: rehearsal run", &out.both());
    assert!(out.stdout.is_empty(), "nothing is run on a usage error\n{}", out.both());
}

#[test]
fn run_without_paths_exits_2_with_usage() {
    let out = rehearsal(&["run"]);
    assert_eq!(out.code, Some(2), "{}", out.both());
    assert_contains(&out.stderr, "the following required arguments were not provided", &out.both());
    assert_contains(&out.stderr, "<PATHS>...", &out.both());
}

#[test]
fn unknown_format_exits_2_naming_the_choices() {
    let out = rehearsal(&["run", "--format", "yaml", "tests/fixtures/passing/text-reply.json"]);
    assert_eq!(out.code, Some(2), "{}", out.both());
    assert_contains(&out.stderr, "invalid value 'yaml' for '--format <FORMAT>'", &out.both());
    assert_contains(&out.stderr, "[possible values: text, json, junit]", &out.both());
}

// ---------------------------------------------------------------------------------------
// Through the binary: one bad file in a folder loses nothing.

#[test]
fn folder_with_a_bad_file_still_runs_and_reports_the_good_one() {
    let out = rehearsal(&["run", "tests/fixtures/mixed"]);
    assert_eq!(out.code, Some(2), "{}", out.both());
    // The bad file (sorted first) is reported with its place...
    assert_contains(
        &out.stderr,
        "error: tests/fixtures/mixed/a-bad.json:4:60: at `lanes[0].replies[0].latecy_ms`: unknown field `latecy_ms`",
        &out.both(),
    );
    // ...and the good one after it still runs, and is counted.
    assert_contains(&out.stdout, "PASS mixed-good (tests/fixtures/mixed/b-good.json;", &out.both());
    assert_contains(&out.stdout, "1 passed, 0 failed, 1 bad input", &out.both());
}

#[test]
fn folder_with_a_bad_file_in_json_format_reports_both() {
    let out = rehearsal(&["run", "--format", "json", "tests/fixtures/mixed"]);
    assert_eq!(out.code, Some(2), "{}", out.both());
    let reports: Vec<serde_json::Value> =
        out.stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))).collect();
    assert_eq!(reports.len(), 3, "a record per file, then the summary\n{}", out.both());
    assert_eq!(reports[0]["file"], "tests/fixtures/mixed/a-bad.json");
    assert_eq!(reports[0]["verdict"], "bad_input");
    // The error comes in parts a program can use, and as the line stderr shows.
    let error = &reports[0]["error"];
    assert_eq!(error["kind"], "parse", "{error}");
    assert_eq!(error["file"], "tests/fixtures/mixed/a-bad.json");
    assert_eq!((&error["line"], &error["column"]), (&serde_json::json!(4), &serde_json::json!(60)), "{error}");
    assert_eq!(error["field"], "lanes[0].replies[0].latecy_ms");
    assert_eq!(error["message"], "unknown field `latecy_ms`");
    assert!(error["expected"].as_str().is_some_and(|h| h.starts_with("expected one of `text`")), "{error}");
    assert_eq!(error["hint"], "did you mean `latency_ms`?", "{error}");
    assert!(error["text"].as_str().is_some_and(|t| t.contains(":4:60: at `lanes[0].replies[0].latecy_ms`")), "{error}");
    assert_eq!(reports[1]["file"], "tests/fixtures/mixed/b-good.json");
    assert_eq!(reports[1]["verdict"], "pass");
    assert_eq!(reports[2]["type"], "summary");
    assert_eq!((&reports[2]["passed"], &reports[2]["bad_input"]), (&serde_json::json!(1), &serde_json::json!(1)));
    assert_eq!(reports[2]["exit_code"], 2);
}

// ---------------------------------------------------------------------------------------
// The library: `scenario::parse` returns the error as a value with its parts.

const GOOD: &str =
    r#"{"name": "x", "lanes": [{"agent": "main", "replies": [{"text": "hi"}]}], "turns": [{"user": "hello"}]}"#;

fn parse(json: &str) -> Result<scenario::Scenario, ScenarioError> {
    scenario::parse(Path::new("inline.json"), json)
}

/// The `Invalid` error's field and message, or a panic naming what came instead.
fn invalid(json: &str) -> (String, String) {
    match parse(json) {
        Err(ScenarioError::Invalid { path, field, message, .. }) => {
            assert_eq!(path, Path::new("inline.json"));
            (field, message)
        }
        other => panic!("expected an Invalid error, got {other:?}"),
    }
}

/// The `Parse` error's line, column, field and message.
fn parse_error(json: &str) -> (usize, usize, String, String) {
    match parse(json) {
        Err(ScenarioError::Parse { path, line, column, field, message, .. }) => {
            assert_eq!(path, Path::new("inline.json"));
            (line, column, field, message)
        }
        other => panic!("expected a Parse error, got {other:?}"),
    }
}

#[test]
fn parse_accepts_the_minimal_scenario() {
    let s = parse(GOOD).expect("the minimal scenario parses");
    assert_eq!(s.name, "x");
    assert_eq!(s.lanes.len(), 1);
}

#[test]
fn parse_error_carries_line_column_and_field_path() {
    let json = "{\n  \"name\": \"x\",\n  \"lanes\": [{\"agent\": \"main\", \"replies\": [\n    {\"text\": \"hi\", \"check\": {\"mesages\": 1}}\n  ]}],\n  \"turns\": [{\"user\": \"hello\"}]\n}";
    let (line, column, field, message) = parse_error(json);
    // serde_json points at the end of the unknown key.
    assert_eq!((line, column), (4, 38));
    assert_eq!(field, "lanes[0].replies[0].check.mesages");
    assert!(message.starts_with("unknown field `mesages`, expected one of `messages`"), "{message}");
    assert!(!message.contains(" at line "), "the place is not repeated in the message: {message}");
}

#[test]
fn parse_error_displays_as_file_line_column_field_message() {
    let err = parse(r#"{"name": "x", "lanes": [], "turns": [{"user": "hi", "at_ms": -5}]}"#).unwrap_err();
    assert_eq!(err.to_string(), "inline.json:1:63: at `turns[0].at_ms`: invalid value: integer `-5`, expected u64");
}

#[test]
fn missing_required_field_is_reported_at_the_top() {
    let (_, _, field, message) = parse_error(r#"{"name": "x", "turns": [{"user": "hello"}]}"#);
    assert_eq!(field, ".");
    assert_eq!(message, "missing field `lanes`");
}

#[test]
fn unknown_enum_value_names_the_choices() {
    let (_, _, field, message) =
        parse_error(r#"{"name": "x", "rules": {"preset": "roku2"}, "lanes": [], "turns": [{"user": "hi"}]}"#);
    assert_eq!(field, "rules.preset");
    assert_eq!(message, "unknown variant `roku2`, expected `roku` or `bub`");
}

#[test]
fn wrong_type_in_a_text_names_its_path() {
    let (_, _, field, _) = parse_error(
        r#"{"name": "x", "lanes": [{"agent": "main", "replies": [{"text": 5}]}], "turns": [{"user": "hi"}]}"#,
    );
    assert_eq!(field, "lanes[0].replies[0].text");
}

#[test]
fn undeclared_tool_is_invalid_at_the_call() {
    let (field, message) = invalid(
        r#"{"name": "x", "lanes": [{"agent": "main", "replies": [{"calls": [{"tool": "Bash"}]}]}], "turns": [{"user": "hi"}]}"#,
    );
    assert_eq!(field, "lanes[0].replies[0].calls[0].tool");
    assert!(message.starts_with("the script calls `Bash`, which is not a declared tool"), "{message}");
}

#[test]
fn call_marked_undeclared_is_accepted() {
    let json = r#"{"name": "x", "lanes": [{"agent": "main", "replies": [{"calls": [{"tool": "Bash", "undeclared": true}]}]}], "turns": [{"user": "hi"}]}"#;
    parse(json).expect("an undeclared call marked as such parses");
}

#[test]
fn call_args_must_be_an_object() {
    let (field, message) = invalid(
        r#"{"name": "x", "lanes": [{"agent": "main", "replies": [{"calls": [{"tool": "fail", "args": ["boom"]}]}]}], "turns": [{"user": "hi"}]}"#,
    );
    assert_eq!(field, "lanes[0].replies[0].calls[0].args");
    assert_eq!(message, "arguments must be a JSON object");
}

#[test]
fn lane_needs_exactly_one_selector() {
    let none = r#"{"name": "x", "lanes": [{"replies": []}], "turns": [{"user": "hi"}]}"#;
    let two = r#"{"name": "x", "lanes": [{"agent": "main", "replies": []}, {"agent": "main/1", "profile": "p", "replies": []}], "turns": [{"user": "hi"}]}"#;
    for (json, place) in [(none, "lanes[0]"), (two, "lanes[1]")] {
        let (field, message) = invalid(json);
        assert_eq!(field, place);
        assert_eq!(message, "give exactly one selector: `agent`, `task_contains` or `profile`");
    }
}

#[test]
fn reply_cannot_be_both_text_and_hang() {
    let (field, message) = invalid(
        r#"{"name": "x", "lanes": [{"agent": "main", "replies": [{"text": "hi"}, {"text": "a", "hang": true}]}], "turns": [{"user": "hi"}]}"#,
    );
    assert_eq!(field, "lanes[0].replies[1]");
    assert!(message.starts_with("a reply is text and/or calls, or an `error`, or a `hang`"), "{message}");
}

#[test]
fn scenario_needs_a_turn() {
    let (field, message) =
        invalid(r#"{"name": "x", "lanes": [{"agent": "main", "replies": [{"text": "hi"}]}], "turns": []}"#);
    assert_eq!(field, "turns");
    assert_eq!(message, "a scenario needs at least one user turn");
}

#[test]
fn tool_declarations_are_checked() {
    let lanes = r#""lanes": [{"agent": "main", "replies": [{"text": "hi"}]}], "turns": [{"user": "hi"}]"#;
    let cases = [
        (r#"[{"name": "Agent"}]"#, "tools[0].name", "`Agent` is a built-in tool of the core"),
        (r#"[{"name": "Read"}, {"name": "Read"}]"#, "tools[1].name", "tool `Read` is declared twice"),
        (r#"[{"name": " "}]"#, "tools[0].name", "a tool needs a name"),
        (
            r#"[{"name": "Read", "results": [{"text": "a", "error": "b"}]}]"#,
            "tools[0].results[0]",
            "give exactly one of `text` and `error`",
        ),
    ];
    for (tools, want_field, want_message) in cases {
        let (field, message) = invalid(&format!(r#"{{"name": "x", "tools": {tools}, {lanes}}}"#));
        assert_eq!((field.as_str(), message.as_str()), (want_field, want_message), "tools: {tools}");
    }
}

#[test]
fn zero_root_budget_is_invalid_at_rules() {
    let (field, message) = invalid(
        r#"{"name": "x", "rules": {"root_step_budget": 0}, "lanes": [{"agent": "main", "replies": [{"text": "hi"}]}], "turns": [{"user": "hi"}]}"#,
    );
    assert_eq!(field, "rules");
    assert!(message.contains("root_step_budget"), "{message}");
}

#[test]
fn trailing_characters_are_a_parse_error() {
    let (line, column, _, message) = parse_error(&format!("{GOOD}\n{{\"name\": \"second\"}}"));
    assert_eq!((line, column), (2, 1));
    assert_eq!(message, "trailing characters");
}

#[test]
fn unknown_field_in_repeat_text_is_a_parse_error() {
    let json = r#"{"name": "x", "lanes": [{"agent": "main", "replies": [{"text": {"repeat": "a", "count": 3, "cuont": 4}}]}], "turns": [{"user": "hi"}]}"#;
    let (_, _, field, _) = parse_error(json);
    assert!(field.starts_with("lanes[0].replies[0].text"), "{field}");
}

#[test]
fn load_of_a_missing_file_is_an_io_error() {
    let path = manifest_path("tests/fixtures/bad/does-not-exist.json");
    match rehearsal::load::file(&path, &rehearsal::core::Builtin) {
        Err(ScenarioError::Io { path: p, message }) => {
            assert_eq!(p, path);
            assert!(!message.is_empty());
        }
        other => panic!("expected an Io error, got {other:?}"),
    }
}

#[test]
fn profile_file_without_description_exits_2_naming_the_file() {
    let out = rehearsal(&["run", "tests/fixtures/bad-profiles/missing-description.json"]);
    assert_eq!(out.code, Some(2), "{}", out.both());
    assert_contains(
        &out.stderr,
        "error: tests/fixtures/bad-profiles/missing-description/ws/.agents/agents/reviewer.md: at `description`: a profile needs a `description` in its front matter",
        &out.both(),
    );
}

#[test]
fn profile_file_with_broken_front_matter_exits_2_naming_the_file_and_line() {
    let out = rehearsal(&["run", "tests/fixtures/bad-profiles/broken-front-matter.json"]);
    assert_eq!(out.code, Some(2), "{}", out.both());
    assert_contains(
        &out.stderr,
        "error: tests/fixtures/bad-profiles/broken-front-matter/ws/.agents/agents/reviewer.md:",
        &out.both(),
    );
    assert_contains(&out.stderr, "at `front matter`:", &out.both());
}

#[test]
fn broken_profile_file_written_in_is_placed_in_the_scenario_file() {
    let out = run_bad("profile-file-written-in-broken.json", 2);
    assert_contains(
        &out.stderr,
        "error: tests/fixtures/bad/profile-file-written-in-broken.json:4:3: at `profile_files[\"reviewer.md\"]`: line 4, column 1 of the file, front matter:",
        &out.both(),
    );
}

/// Issue 21 (one front door) and issue 27 (class 6): `rehearsal run` once skipped the profile
/// name check, so a misspelt profile ran and failed with knock-on errors (exit 1) where the
/// library refused it. Both doors now refuse it at load, with exit 2 and a did-you-mean.
#[test]
fn a_misspelt_profile_name_is_refused_by_the_cli_and_the_library_alike() {
    let relative = "tests/fixtures/bad-profiles/misspelt-name.json";
    let out = rehearsal(&["run", relative]);
    assert_eq!(out.code, Some(2), "{}", out.both());
    let field = "at `lanes[0].replies[0].calls[0].args.agent`";
    let guess = "did you mean `researcher`?";
    assert_contains(&out.stderr, &format!("error: {relative}:8:78: {field}"), &out.both());
    assert_contains(&out.stderr, guess, &out.both());

    let path = manifest_path(relative);
    let error = rehearsal::runner::Runner::new().check_file(&path).expect_err("the library refuses it too");
    let text = error.to_string();
    assert!(matches!(error, ScenarioError::Invalid { .. }), "{text}");
    assert!(text.contains(field) && text.contains(guess), "{text}");
    let error = rehearsal::load::file(&path, &rehearsal::core::Builtin).expect_err("the front door refuses it");
    assert_eq!(error.to_string(), text);
}

#[test]
fn a_misspelt_clause_id_in_the_description_exits_2_with_the_nearest_id() {
    // Issue 26: a clause id that names no clause of docs/rules/ used to pass silently.
    let out = run_bad("misspelt-clause-id.json", 2);
    assert_contains(
        &out.stderr,
        "error: tests/fixtures/bad/misspelt-clause-id.json:3:3: at `description`: `core.budget.pre-deduction` is written as a rule clause id, but docs/rules/ has no such clause; did you mean `core.budget.pre-deduction-both-families`?",
        &out.both(),
    );
}

#[test]
fn clause_ids_and_areas_that_exist_pass_and_a_missing_area_is_refused() {
    let with = |description: &str| {
        let json = format!(
            r#"{{"name": "ids", "description": {description:?}, "lanes": [{{"agent": "main", "replies": [{{"text": "done"}}]}}], "turns": [{{"user": "go"}}]}}"#
        );
        scenario::parse(Path::new("ids.json"), &json)
    };
    with("bub.spawn.*, oracle.depth.alias-numbering, bub051.nesting.no-grandchild: real ids.").unwrap();
    // Dotted words that are not ids: a file name, a path, two parts, another family.
    with("see docs/rules/core.md, core.md, core.budget, serde.json.value and main/1.").unwrap();
    let Err(ScenarioError::Invalid { field, message, .. }) = with("bub.spawnn.*: an area with no clause.") else {
        panic!("an area with no clause must be refused")
    };
    assert_eq!(field, "description");
    assert_eq!(message, "`bub.spawnn.*` is written as a rule clause id, but docs/rules/ has no such clause");
}

#[test]
fn a_future_format_version_exits_2_naming_both_versions_before_its_unknown_fields() {
    // Issue 26: a file of a newer format is refused for its version, not for the first field
    // this version does not know.
    let out = run_bad("future-format.json", 2);
    assert_contains(
        &out.stderr,
        "error: tests/fixtures/bad/future-format.json:2:3: at `format`: this file is written in scenario format 4, but this rehearsal reads formats up to 3; use a rehearsal that reads format 4",
        &out.both(),
    );
    assert!(!out.stderr.contains("a_field_of_format_4"), "{}", out.both());
}

#[test]
fn format_1_is_the_default_and_0_is_refused() {
    let with = |format: &str| {
        let json = format!(
            r#"{{{format}"name": "f", "lanes": [{{"agent": "main", "replies": [{{"text": "done"}}]}}], "turns": [{{"user": "go"}}]}}"#
        );
        scenario::parse(Path::new("f.json"), &json)
    };
    assert_eq!(scenario::FORMAT, 3);
    let (left_out, one) = (with("").unwrap(), with(r#""format": 1, "#).unwrap());
    assert_eq!((left_out.format, one.format), (None, Some(1)));
    // The version changes nothing a run does.
    let profiles = rehearsal::load::resolve_profiles(&one, Path::new(".")).unwrap();
    let trace = |s: &scenario::Scenario| {
        rehearsal::Runner::new()
            .run(s, &profiles, rehearsal::internals::harness::schedule::Schedule::default_order())
            .trace
            .text()
    };
    assert_eq!(trace(&left_out), trace(&one));
    let Err(ScenarioError::Invalid { field, message, .. }) = with(r#""format": 0, "#) else {
        panic!("format 0 must be refused")
    };
    assert_eq!((field.as_str(), message.as_str()), ("format", "format versions start at 1"));
    assert_eq!(with(r#""format": 2, "#).unwrap().format, Some(2));
    assert_eq!(with(r#""format": 3, "#).unwrap().format, Some(3));
    let Err(ScenarioError::Invalid { field, .. }) = with(r#""format": 4, "#) else {
        panic!("format 4 must be refused")
    };
    assert_eq!(field, "format");
}

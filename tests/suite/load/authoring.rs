//! Authoring scenarios (issue 12): each mistake the issue lists, made in a scenario file, is
//! refused at load with exit 2, its place and a hint, or, when only a run can show it, fails
//! the verdict with its cause first; the JSON Schema is the format and is kept in sync; and
//! `rehearsal new` writes a starting scenario that passes. Fixtures: `tests/fixtures/authoring/`.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::{Output, manifest_path, rehearsal};

fn run(file: &str, want_code: i32) -> Output {
    let path = format!("tests/fixtures/authoring/{file}");
    let out = rehearsal(&["run", &path]);
    assert_eq!(out.code, Some(want_code), "{path}: wrong exit code\n{}", out.both());
    out
}

#[track_caller]
fn assert_contains(haystack: &str, needle: &str, all: &str) {
    assert!(haystack.contains(needle), "expected to find\n  {needle}\nin\n{all}");
}

// ---------------------------------------------------------------------------------------
// The built-in tools' arguments, checked at load.

/// `{"tool":"subagent","args":{"task":"alpha"}}` loaded, and the run answered `error: empty
/// prompt`; now the load says the tool has no `task` and means `prompt`.
#[test]
fn subagent_called_with_task_instead_of_prompt_exits_2_suggesting_prompt() {
    let out = run("subagent-task-argument.json", 2);
    assert_contains(
        &out.stderr,
        "error: tests/fixtures/authoring/subagent-task-argument.json:7:48: at `lanes[0].replies[0].calls[0].args.task`: `subagent` has no argument `task`; did you mean `prompt`? It accepts `prompt` (a string, required), `agent` (a string)",
        &out.both(),
    );
    assert_contains(&out.stderr, "mark the call `\"bad_args\": true` if the model sends it on purpose", &out.both());
}

/// `"session": "forked"` quietly became a named session.
#[test]
fn session_named_one_slip_from_fork_exits_2_suggesting_fork() {
    let out = run("session-forked.json", 2);
    assert_contains(
        &out.stderr,
        "session-forked.json:7:67: at `lanes[0].replies[0].calls[0].args.session`: session `forked` would name a session of its own, since only `temp` and `fork` are kinds; did you mean `fork`?",
        &out.both(),
    );
}

/// `subagent.wait {"ids": ["$task1"], "timeout": 1}`: both arguments were ignored and the
/// scenario passed.
#[test]
fn wait_with_ids_and_timeout_exits_2_suggesting_task_ids_and_timeout_seconds() {
    let out = run("wait-ids-timeout.json", 2);
    assert_contains(
        &out.stderr,
        "wait-ids-timeout.json:8:53: at `lanes[0].replies[1].calls[0].args.ids`: `subagent.wait` has no argument `ids`; did you mean `task_ids`? It accepts `task_ids` (a list of strings), `timeout_seconds` (a number)",
        &out.both(),
    );
    let out = run("wait-timeout-only.json", 2);
    assert_contains(&out.stderr, "has no argument `timeout`; did you mean `timeout_seconds`?", &out.both());
}

#[test]
fn deliberately_bad_arguments_load_when_the_call_says_so() {
    let json = r#"{"name": "x", "rules": {"preset": "bub"}, "lanes": [{"agent": "main", "replies": [
        {"calls": [{"tool": "subagent.wait", "args": {"timeout_seconds": "soon"}, "bad_args": true}]}, {"text": "done"}]}],
        "turns": [{"user": "go"}]}"#;
    rehearsal::scenario::parse(Path::new("x.json"), json).expect("the opt-out is honoured");
    let refused = json.replace(", \"bad_args\": true", "");
    let error = rehearsal::scenario::parse(Path::new("x.json"), &refused).unwrap_err().to_string();
    assert!(
        error.starts_with("x.json:2:55: at `lanes[0].replies[0].calls[0].args.timeout_seconds`: argument `timeout_seconds` of `subagent.wait` is a number, not a string"),
        "{error}"
    );
}

// ---------------------------------------------------------------------------------------
// Did you mean, and places on errors found after parsing.

#[test]
fn misspelt_agent_tool_exits_2_suggesting_agent() {
    let out = run("tool-agnet.json", 2);
    assert_contains(
        &out.stderr,
        "tool-agnet.json:5:19: at `lanes[0].replies[0].calls[0].tool`: the script calls `Agnet`, which is not a declared tool; did you mean `Agent`?",
        &out.both(),
    );
}

#[test]
fn misspelt_wait_tool_exits_2_suggesting_subagent_wait() {
    let out = run("tool-subagent-wiat.json", 2);
    assert_contains(
        &out.stderr,
        "tool-subagent-wiat.json:6:19: at `lanes[0].replies[0].calls[0].tool`: the script calls `subagent.wiat`, which is not a declared tool; did you mean `subagent.wait`?",
        &out.both(),
    );
}

#[test]
fn misspelt_fields_and_enum_values_get_a_suggestion() {
    let parse = |json: &str| rehearsal::scenario::parse(Path::new("x.json"), json).unwrap_err().to_string();
    let error = parse(r#"{"name": "x", "lanez": [], "turns": []}"#);
    assert!(error.starts_with("x.json:1:21: at `lanez`: unknown field `lanez`, expected one of"), "{error}");
    assert!(error.ends_with("; did you mean `lanes`?"), "{error}");
    let error = parse(r#"{"name": "x", "rules": {"preset": "rokku"}, "lanes": [], "turns": []}"#);
    assert!(error.ends_with("unknown variant `rokku`, expected `roku` or `bub`; did you mean `roku`?"), "{error}");
}

#[test]
fn lane_aliases_and_profile_names_get_a_suggestion() {
    let parse = |json: &str| rehearsal::scenario::parse(Path::new("x.json"), json).unwrap_err().to_string();
    let error = parse(
        r#"{"name": "x", "lanes": [{"agent": "main", "replies": [{"text": "a"}]}, {"agent": "mian/01", "replies": []}], "turns": [{"user": "go"}]}"#,
    );
    assert!(error.starts_with("x.json:1:73: at `lanes[1].agent`: `mian/01` is not an agent alias"), "{error}");
    assert!(error.ends_with("; did you mean `main/1`?"), "{error}");

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("profiles.json");
    std::fs::write(
        &file,
        r#"{"name": "x", "rules": {"preset": "bub"},
  "profiles": [{"name": "reviewer", "description": "Reviews"}],
  "lanes": [{"agent": "main", "replies": [{"calls": [{"tool": "subagent", "args": {"prompt": "p", "agent": "reveiwer"}}]}]}],
  "turns": [{"user": "go"}]}"#,
    )
    .unwrap();
    let error = rehearsal::runner::Runner::new().check_file(&file).unwrap_err().to_string();
    assert!(
        error.contains(":3:99: at `lanes[0].replies[0].calls[0].args.agent`: the call asks for profile `reveiwer`, which is not a profile of this scenario; did you mean `reviewer`? Its profiles: `reviewer`;"),
        "{error}"
    );
}

/// Every error raised after parsing names line and column (the docs promised it).
#[test]
fn errors_found_after_parsing_name_line_and_column() {
    let json = "{\"name\": \"x\",\n \"tools\": [{\"name\": \"Read\"}, {\"name\": \"Read\"}],\n \"lanes\": [{\"agent\": \"main\", \"replies\": [{\"text\": \"a\"}]}],\n \"turns\": [{\"user\": \"go\"}]}";
    let error = rehearsal::scenario::parse(Path::new("x.json"), json).unwrap_err().to_string();
    assert_eq!(error, "x.json:2:31: at `tools[1].name`: tool `Read` is declared twice");
}

// ---------------------------------------------------------------------------------------
// Lanes that match nothing.

#[test]
fn empty_lanes_exit_2_at_load_naming_the_root_lane_to_add() {
    let out = run("lanes-empty.json", 2);
    assert_contains(
        &out.stderr,
        "lanes-empty.json:3:3: at `lanes`: a scenario needs at least one lane: the root asks the model at its first step; add the root's lane: {\"agent\": \"main\"",
        &out.both(),
    );
}

/// The run spawned only `main/1`, the lane said `main/2`: the stop names the lanes and the
/// slip.
#[test]
fn lane_for_a_child_that_was_never_spawned_names_the_agent_that_was() {
    let out = run("lane-for-unspawned-child.json", 1);
    assert_contains(
        &out.stdout,
        "  - stopped: lanes: no lane selects agent main/1 (task \"alpha\"); add a lane with `agent`, `task_contains` or `profile` that selects it (the lanes: lanes[0] agent \"main\", lanes[1] agent \"main/2\"); the lane for `main/2` has selected no agent: did you mean `main/1`?",
        &out.both(),
    );
}

#[test]
fn lane_that_selected_no_agent_is_reported_with_the_agents_that_asked() {
    let out = run("lane-never-selected.json", 1);
    assert_contains(
        &out.stdout,
        "  - unused script: lanes[2] (agent \"main/2\") selected no agent, so none of its 1 reply was used; the agents that asked the model: main, main/1; did you mean `main/1`?",
        &out.both(),
    );
}

// ---------------------------------------------------------------------------------------
// The cause before its consequences.

/// The root's budget ran out; the verdict listed only the unused replies.
#[test]
fn failed_turn_is_listed_before_the_unused_script() {
    let out = run("budget-exhausted.json", 1);
    let cause = "  - turns[0] ended with fail error: \"Step budget exhausted after 2 steps; goal: go\"";
    let consequence = "  - unused script: lanes[0] (agent \"main\"): 4 of its 6 replies were not used";
    assert_contains(&out.stdout, cause, &out.both());
    assert_contains(&out.stdout, consequence, &out.both());
    assert!(out.stdout.find(cause) < out.stdout.find(consequence), "the cause comes first\n{}", out.both());
}

// ---------------------------------------------------------------------------------------
// Trace fragments.

/// `"main/1 task.queued"` with one space matches the padded trace; so does `$task1`.
#[test]
fn fragments_match_whatever_the_column_padding() {
    run("fragments.json", 0);
}

/// `"0.000s main/4"` also matched `30.000s main/4`; a fragment starting with a time now starts
/// a line. The first fragment has no previous one to appear after.
#[test]
fn fragment_starting_with_a_time_is_anchored_and_shows_the_nearest_line() {
    let out = run("fragment-time-anchored.json", 1);
    assert_contains(
        &out.stdout,
        "  - expect.trace[0]: \"0.100s main/1 llm.reply\" does not appear in the trace (it starts with a time, so it must start a line); the nearest is trace line 16\n      |    30.100s main/1   llm.reply ",
        &out.both(),
    );
    assert!(!out.stdout.contains("previous fragment"), "{}", out.both());
}

/// The message named the line of the previous fragment as "found on trace line 18", which read
/// as if the missing fragment was there (issue 26).
#[test]
fn a_fragment_out_of_order_names_where_the_previous_one_was_found_and_where_it_is() {
    let out = run("fragment-out-of-order.json", 1);
    assert_contains(
        &out.stdout,
        "  - expect.trace[1]: \"main/1 task.queued\" does not appear after trace line 18, where expect.trace[0] was found; it appears earlier, on trace line 7",
        &out.both(),
    );
}

// ---------------------------------------------------------------------------------------
// Checks.

/// An 8,103-character line `the last message is Some("ééé…"), expected "ééé…"` is now lengths,
/// a position and a window.
#[test]
fn long_check_failure_shows_lengths_position_and_window() {
    let out = run("long-check-failure.json", 1);
    assert_contains(
        &out.stdout,
        "  - check failed: lanes[1].replies[0].check: main/1 request #1: the first message: expected 8100 characters, got 8100; they first differ at character 4000: expected …\"ééééééééééééxéééé",
        &out.both(),
    );
    let longest = out.stdout.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    assert!(longest < 400, "a line of {longest} characters\n{}", out.both());
    assert!(!out.stdout.contains("Some("), "{}", out.both());
}

/// `repeat` texts in checks and expectations, `nth_message`, and `$taskN` in checks and
/// expectations; `$comment` and `$schema` keys load.
#[test]
fn repeat_texts_nth_message_and_task_refs_work_in_checks_and_expectations() {
    run("checks-repeat-nth-task-refs.json", 0);
}

#[test]
fn task_ref_the_run_never_queued_fails_the_expectation_naming_it() {
    let json = r#"{"name": "x", "lanes": [{"agent": "main", "replies": [{"text": "a"}]}], "turns": [{"user": "go"}],
        "expect": {"trace": ["delivered $task1"]}}"#;
    let scenario = rehearsal::scenario::parse(Path::new("x.json"), json).unwrap();
    let verdict = rehearsal::runner::Runner::new().verify(&scenario, &[]);
    assert_eq!(
        verdict.failures()[0].what,
        "expect.trace[0]: $task1 refers to a task the run did not queue (it queued none)"
    );
}

// ---------------------------------------------------------------------------------------
// The JSON Schema.

const REGENERATE: &str = "cargo run -- schema > docs/scenario.schema.json";

fn committed_schema() -> Value {
    let text = std::fs::read_to_string(manifest_path("docs/scenario.schema.json")).expect("the schema is committed");
    serde_json::from_str(&text).expect("the committed schema is JSON")
}

fn validator() -> jsonschema::Validator {
    jsonschema::validator_for(&committed_schema()).expect("the schema is a valid draft-07 schema")
}

fn errors(validator: &jsonschema::Validator, instance: &Value) -> Vec<String> {
    validator.iter_errors(instance).map(|e| format!("{} at {}", e, e.instance_path())).collect()
}

#[test]
fn committed_schema_is_what_rehearsal_schema_prints() {
    let out = rehearsal(&["schema"]);
    assert_eq!(out.code, Some(0), "{}", out.both());
    let committed = std::fs::read_to_string(manifest_path("docs/scenario.schema.json")).unwrap();
    assert!(committed == out.stdout, "docs/scenario.schema.json is out of date; regenerate it with `{REGENERATE}`");
}

fn json_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            json_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "json") {
            out.push(path);
        }
    }
}

#[test]
fn schema_accepts_every_scenario_under_scenarios() {
    let validator = validator();
    let mut files = Vec::new();
    json_files(&manifest_path("scenarios"), &mut files);
    files.push(manifest_path("tests/fixtures/authoring/checks-repeat-nth-task-refs.json"));
    assert!(files.len() > 90, "{} files", files.len());
    for file in files {
        let instance: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let errors = errors(&validator, &instance);
        assert!(errors.is_empty(), "{}: {errors:#?}", file.display());
    }
}

#[test]
fn schema_refuses_misspelt_fields_and_bad_builtin_arguments() {
    let validator = validator();
    let good = serde_json::json!({
        "$schema": "docs/scenario.schema.json", "$comment": "a note",
        "name": "x", "lanes": [{"agent": "main", "replies": [{"text": "hi", "$comment": "a note"}]}],
        "turns": [{"user": "hello"}]
    });
    assert!(errors(&validator, &good).is_empty(), "{:?}", errors(&validator, &good));
    let mut misspelt = good.clone();
    misspelt["lanes"][0]["replies"][0]["txt"] = "hi".into();
    assert!(!validator.is_valid(&misspelt), "a misspelt nested field is refused");
    let mut misspelt = good.clone();
    misspelt["lanez"] = misspelt["lanes"].take();
    assert!(!validator.is_valid(&misspelt), "a misspelt top-level field is refused");

    let call = |call: Value| {
        let mut scenario = good.clone();
        scenario["lanes"][0]["replies"][0] = serde_json::json!({"calls": [call]});
        validator.is_valid(&scenario)
    };
    assert!(call(serde_json::json!({"tool": "subagent", "args": {"prompt": "p", "session": "temp"}})));
    assert!(!call(serde_json::json!({"tool": "subagent", "args": {"task": "p"}})));
    assert!(!call(serde_json::json!({"tool": "subagent.wait", "args": {"timeout_seconds": "soon"}})));
    assert!(!call(serde_json::json!({"tool": "fail"})), "a required argument is required");
    assert!(call(serde_json::json!({"tool": "subagent", "args": {"task": "p"}, "bad_args": true})));
    assert!(call(serde_json::json!({"tool": "Read", "args": {"anything": 1}})));
}

// ---------------------------------------------------------------------------------------
// rehearsal new.

#[test]
fn new_writes_a_commented_scenario_that_passes_and_never_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let within = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_rehearsal"))
            .args(args)
            .current_dir(dir.path())
            .output()
            .expect("the rehearsal binary runs");
        let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
        Output { code: out.status.code(), stdout: text(out.stdout), stderr: text(out.stderr) }
    };
    let validator = validator();
    for (name, preset) in [("x", "roku"), ("y.json", "bub")] {
        let out = within(&["new", name, "--preset", preset]);
        assert_eq!(out.code, Some(0), "{}", out.both());
        let file = if name.ends_with(".json") { name.to_string() } else { format!("{name}.json") };
        let out = within(&["run", &file]);
        assert_eq!(out.code, Some(0), "{preset}: the starting scenario passes\n{}", out.both());
        let text = std::fs::read_to_string(dir.path().join(&file)).unwrap();
        assert!(text.contains("\"$comment\""), "it is commented");
        let instance: Value = serde_json::from_str(&text).unwrap();
        assert!(errors(&validator, &instance).is_empty(), "{:?}", errors(&validator, &instance));
    }
    let out = within(&["new", "x"]);
    assert_eq!(out.code, Some(2), "{}", out.both());
    assert_contains(&out.stderr, "error: x.json already exists; not overwritten", &out.both());
}
// ---------------------------------------------------------------------------------------
// The documentation of the format.

#[test]
fn docs_have_a_section_for_every_top_level_field() {
    let docs = std::fs::read_to_string(manifest_path("docs/scenarios.md")).unwrap();
    let headings: Vec<&str> = docs.lines().filter(|l| l.starts_with('#')).collect();
    let schema = committed_schema();
    for field in schema["properties"].as_object().unwrap().keys() {
        let heading = format!("`{field}`");
        assert!(headings.iter().any(|h| h.contains(&heading)), "docs/scenarios.md has no section for `{field}`");
    }
    assert!(!docs.contains("(below)"), "every section the docs point to exists, so none says \"(below)\"");
}

#[test]
fn docs_list_every_argument_of_every_builtin_tool() {
    let docs = std::fs::read_to_string(manifest_path("docs/scenarios.md")).unwrap();
    for spec in rehearsal::core::pseudo::all() {
        let row = docs
            .lines()
            .find(|l| l.starts_with(&format!("| `{}` |", spec.name)))
            .unwrap_or_else(|| panic!("no row for `{}` in the built-in tools' table", spec.name));
        for argument in spec.parameters["properties"].as_object().unwrap().keys() {
            assert!(row.contains(&format!("`{argument}`")), "the row of `{}` lacks `{argument}`", spec.name);
        }
    }
}

//! `rehearsal drive` against a real process without Python: the test-only runtime
//! `rehearsal-test-runtime` (tests/wire_runtime/runtime.rs) over the scenarios of tests/drive/.
//! Issue 23: turn substitution, the process group killed, the wall-clock limit, a runtime that
//! dies or never calls, a command not found (exit 4), skipped scenarios, and a report that
//! does not depend on --jobs.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::{Output, rehearsal, test_runtime};

fn drive(extra: &[&str], command: &[&str]) -> Output {
    let mut args = vec!["drive", "--color", "never"];
    args.extend_from_slice(extra);
    args.push("--");
    args.extend_from_slice(command);
    rehearsal(&args)
}

#[test]
fn each_turn_runs_the_command_with_its_number_and_message_in_a_kept_workdir() {
    // The second request must extend the first: the runtime keeps its history in the working
    // directory, so this passes only if drive keeps it across the turns.
    let out = drive(&["tests/drive/two-turns.json"], &[test_runtime(), "ask", "turn {turn}: {message}"]);
    assert_eq!(out.code, Some(0), "{}", out.both());
    assert!(out.stdout.contains("PASS drive-two-turns"), "{}", out.both());
    assert!(out.stderr.contains("2 requests, 2 turns"), "{}", out.both());
}

/// Issue 40: `drive` serves the Messages API too. A runtime description sets
/// `ANTHROPIC_BASE_URL` to `{origin}` (no `/v1`, as the anthropic SDKs take it), and the test
/// runtime asks `POST /v1/messages?beta=true` each turn: the same scenario, checks and expected
/// messages pass as over Chat.
#[test]
fn a_runtime_speaking_the_messages_api_is_driven_from_its_description_env() {
    let out = drive(
        &["tests/drive/two-turns.json", "--runtime", "tests/wire_runtime/anthropic-runtime.json"],
        &[test_runtime(), "ask", "turn {turn}: {message}"],
    );
    assert_eq!(out.code, Some(0), "{}", out.both());
    assert!(out.stdout.contains("PASS drive-two-turns"), "{}", out.both());
    assert!(out.stderr.contains("2 requests, 2 turns"), "{}", out.both());
}

/// Issue 40: `drive` serves the Responses API too. The test runtime asks `POST
/// /v1/responses`, its second turn (a new process) sending only the new message and the first
/// answer's id as `previous_response_id`: the server reads it as the whole conversation, and
/// the same scenario, checks and expected messages pass as over Chat.
#[test]
fn a_runtime_speaking_the_responses_api_is_driven_and_its_turns_chained_by_previous_response_id() {
    let out = drive(
        &["tests/drive/two-turns.json", "--runtime", "tests/wire_runtime/responses-runtime.json", "--trace"],
        &[test_runtime(), "ask", "turn {turn}: {message}"],
    );
    assert_eq!(out.code, Some(0), "{}", out.both());
    assert!(out.stdout.contains("PASS drive-two-turns"), "{}", out.both());
    assert!(out.stderr.contains("2 requests, 2 turns"), "{}", out.both());
}

#[test]
fn a_wrong_substitution_is_caught_by_the_request_check() {
    let out = drive(&["tests/drive/two-turns.json"], &[test_runtime(), "ask", "{message}"]);
    assert_eq!(out.code, Some(1), "{}", out.both());
    assert!(out.stdout.contains("check failed"), "{}", out.both());
}

#[test]
fn stdout_is_what_expect_message_is_compared_with() {
    let out = drive(&["tests/drive/wrong-message.json"], &[test_runtime(), "ask", "{message}"]);
    assert_eq!(out.code, Some(1), "{}", out.both());
    assert!(
        out.stdout.contains(
            "turns[0].expect.message: expected \"something else\", the runtime printed \"what the model said\""
        ),
        "{}",
        out.both()
    );
}

#[cfg(unix)]
#[test]
fn a_grandchild_left_sleeping_is_killed_with_the_process_group() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let pid_file = dir.path().join("pid");
    let out = Command::new(env!("CARGO_BIN_EXE_rehearsal"))
        .args(["drive", "tests/drive/one-turn.json", "--", test_runtime(), "grandchild", "hello"])
        .env("TEST_RUNTIME_PID_FILE", &pid_file)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("rehearsal runs");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let pid: i32 = std::fs::read_to_string(&pid_file).expect("the runtime wrote the pid").trim().parse().unwrap();
    // The sleeper's parent exited first, so init reaps it; a zombie counts as gone.
    let gone = |pid: i32| {
        // SAFETY: signal 0 only asks whether the process exists.
        let absent = unsafe { libc::kill(pid, 0) } != 0;
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'))
            .unwrap_or(true);
        absent || zombie
    };
    let until = Instant::now() + Duration::from_secs(5);
    while !gone(pid) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    if !gone(pid) {
        // SAFETY: cleans up the sleeper this test failed on.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        panic!("the grandchild {pid} outlived rehearsal drive");
    }
}

#[test]
fn a_runtime_past_the_wall_clock_limit_is_killed_and_reported() {
    let started = Instant::now();
    let out = drive(&["tests/drive/one-turn.json", "--turn-limit", "500ms"], &[test_runtime(), "hang", "hello"]);
    assert_eq!(out.code, Some(1), "{}", out.both());
    assert!(out.stdout.contains("turns[0]: the runtime passed the wall-clock limit"), "{}", out.both());
    assert!(started.elapsed() < Duration::from_secs(20), "took {:?}", started.elapsed());
}

#[test]
fn a_runtime_that_dies_is_a_verdict_with_its_stderr() {
    let out = drive(&["tests/drive/one-turn.json"], &[test_runtime(), "die"]);
    assert_eq!(out.code, Some(1), "{}", out.both());
    assert!(out.stdout.contains("the runtime died of signal"), "{}", out.both());
    assert!(out.stdout.contains("stderr: rehearsal-test-runtime: dying on purpose"), "{}", out.both());
}

#[test]
fn a_runtime_that_never_calls_is_a_verdict_not_a_hang() {
    let out = drive(&["tests/drive/one-turn.json"], &[test_runtime(), "silent"]);
    assert_eq!(out.code, Some(1), "{}", out.both());
    assert!(out.stdout.contains("the runtime made no request to the model"), "{}", out.both());
}

#[test]
fn a_command_not_found_is_exit_4_not_a_rule_broken() {
    let out = drive(&["tests/drive/one-turn.json"], &["rehearsal-no-such-runtime-anywhere"]);
    assert_eq!(out.code, Some(4), "{}", out.both());
    assert!(out.stderr.contains("the system under test could not be run"), "{}", out.both());
    assert!(out.stderr.contains("`rehearsal-no-such-runtime-anywhere` was not found"), "{}", out.both());
}

#[test]
fn a_scenario_needing_a_tool_the_runtime_lacks_is_skipped_with_the_reason() {
    let out = drive(&["tests/wire/delegate.json", "--runtime", "py-runtime"], &[test_runtime(), "silent"]);
    assert_eq!(out.code, Some(0), "{}", out.both());
    assert!(out.stderr.contains("skipped wire-delegate"), "{}", out.both());
    assert!(out.stderr.contains("lacks the tool `Agent`"), "{}", out.both());
}

#[test]
fn expectations_on_core_events_are_noted_as_not_judged() {
    let out = drive(&["tests/wire/delegate.json"], &[test_runtime(), "silent"]);
    assert!(out.stderr.contains("not judged over the wire: turns[0].expect.outcome"), "{}", out.both());
    assert!(!out.stderr.contains("expect.message:"), "message is judged on stdout: {}", out.both());
}

#[test]
fn an_unknown_runtime_or_a_bad_description_file_is_bad_input() {
    let out = drive(&["tests/drive/one-turn.json", "--runtime", "nope"], &[test_runtime(), "silent"]);
    assert_eq!(out.code, Some(2), "{}", out.both());
    assert!(out.stderr.contains("unknown runtime `nope`"), "{}", out.both());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mine.json");
    std::fs::write(&file, "{\"name\": \"mine\", \"dialect\": \"generic\",\n \"preset\": \"roku\", \"envv\": {}}")
        .unwrap();
    let out =
        drive(&["tests/drive/one-turn.json", "--runtime-file", file.to_str().unwrap()], &[test_runtime(), "silent"]);
    assert_eq!(out.code, Some(2), "{}", out.both());
    assert!(out.stderr.contains("mine.json:2:"), "{}", out.both());
    assert!(out.stderr.contains("envv"), "{}", out.both());
}

#[test]
fn a_folder_gives_the_same_report_for_any_number_of_jobs() {
    let command = [test_runtime(), "ask", "turn {turn}: {message}"];
    let one = drive(&["tests/drive", "--jobs", "1"], &command);
    let three = drive(&["tests/drive", "--jobs", "3"], &command);
    assert_eq!(one.code, Some(1), "{}", one.both());
    assert_eq!(one.stdout, three.stdout);
    let json = |jobs: &str| drive(&["tests/drive", "--jobs", jobs, "--format", "json"], &command).stdout;
    assert_eq!(json("1"), json("3"));
    assert!(one.stdout.contains("2 passed, 1 failed"), "{}", one.both());
}

#[test]
fn golden_files_of_driven_runs_leave_wall_times_out_and_catch_a_change() {
    let dir = tempfile::tempdir().unwrap();
    let snaps = dir.path().join("snaps");
    let snaps = snaps.to_str().unwrap();
    let good = [test_runtime(), "ask", "turn {turn}: {message}"];
    let accepted = drive(&["tests/drive/two-turns.json", "--barrier", "50ms", "--snapshots", snaps, "--accept"], &good);
    assert_eq!(accepted.code, Some(0), "{}", accepted.both());
    let golden = std::fs::read_to_string(dir.path().join("snaps/two-turns.snap")).unwrap();
    assert!(
        golden
            .contains("\n---\nscenario: drive-two-turns\nturn 1: exited 0\nturn 2: exited 0\n---\nexchange 0  main #1"),
        "{golden}"
    );
    assert!(!golden.contains("ms wall"), "wall times differ in every run: {golden}");
    assert!(golden.contains("barrier 2  released main (exchange 1)  held 1: main"), "{golden}");
    let again = drive(&["tests/drive/two-turns.json", "--barrier", "50ms", "--snapshots", snaps], &good);
    assert_eq!(again.code, Some(0), "the same run matches its golden file: {}", again.both());
    let dead =
        drive(&["tests/drive/two-turns.json", "--barrier", "50ms", "--snapshots", snaps], &[test_runtime(), "die"]);
    assert_eq!(dead.code, Some(1), "{}", dead.both());
    assert!(dead.stdout.contains("snapshot two-turns: the trace differs from its golden file"), "{}", dead.both());
}

#[test]
fn golden_files_without_the_clock_or_a_barrier_are_refused() {
    let out = drive(
        &["tests/drive/two-turns.json", "--snapshots", "/nonexistent-snaps"],
        &[test_runtime(), "ask", "turn {turn}: {message}"],
    );
    assert_eq!(out.code, Some(2), "{}", out.both());
    assert!(out.stderr.contains("--snapshots needs --clock or --barrier"), "{}", out.both());
}

#[test]
fn coverage_of_driven_runs_counts_what_the_model_side_shows() {
    let out = drive(&["tests/drive/two-turns.json", "--coverage"], &[test_runtime(), "ask", "turn {turn}: {message}"]);
    assert_eq!(out.code, Some(0), "{}", out.both());
    assert!(out.stdout.contains("oracle.model-side.attribution "), "{}", out.both());
    // The oracles of the core's events did not judge a wire run: their clauses do not count.
    let event_oracles: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("oracle.") && !l.trim_start().starts_with("oracle.model-side."))
        .collect();
    assert!(event_oracles.is_empty(), "{event_oracles:#?}");
    let gated = drive(
        &["tests/drive/two-turns.json", "--coverage-min", "100"],
        &[test_runtime(), "ask", "turn {turn}: {message}"],
    );
    assert_eq!(gated.code, Some(1), "{}", gated.both());
    assert!(gated.stderr.contains("--coverage-min 100 needs 100%"), "{}", gated.both());
}

/// The spans of `class` in an SVG timeline (not the legend's swatch), as (row y, t0, t1) in
/// virtual or wall µs.
fn spans(svg: &str, class: &str) -> Vec<(String, u64, u64)> {
    let doc = roxmltree::Document::parse(svg).expect("the timeline is XML");
    doc.descendants()
        .filter(|n| n.has_tag_name("rect") && n.attribute("class") == Some(class) && n.has_attribute("data-t0"))
        .map(|n| {
            let at = |a: &str| n.attribute(a).unwrap_or_else(|| panic!("{a} on a {class} span")).parse().unwrap();
            (n.attribute("y").unwrap().to_string(), at("data-t0"), at("data-t1"))
        })
        .collect()
}

#[test]
fn a_driven_run_s_timeline_draws_what_the_model_saw() {
    // Issue 23: `--timeline` works for wire runs, over what the model side shows. The fan-out
    // runtime's root spawns two children in one reply; each child looks one thing up (after
    // 100 and 300 ms) and answers.
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("fanout.svg");
    let command = [test_runtime(), "fanout", "{message}"];
    let out = drive(
        &[
            "tests/drive-timeline/fanout.json",
            "--runtime",
            "tests/record/fanout-runtime.json",
            "--barrier",
            "50ms",
            "--timeline",
            svg.to_str().unwrap(),
        ],
        &command,
    );
    assert_eq!(out.code, Some(0), "{}", out.both());
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains(">3 agents, 14 model-side events, "), "{text}");
    assert!(text.contains(" of wall time</text>"), "off the clock the axis is wall time: {text}");
    for alias in ["main", "main/1", "main/2"] {
        assert!(text.contains(&format!("<title>agent {alias}")), "a row for {alias}: {text}");
    }
    // Six model calls: the root's two, and two for each child, one row each.
    let llm = spans(&text, "llm");
    assert_eq!(llm.len(), 6, "{llm:?}");
    let rows: std::collections::BTreeSet<&str> = llm.iter().map(|(y, _, _)| y.as_str()).collect();
    assert_eq!(rows.len(), 3, "{llm:?}");
    // The child asked 300 ms ahead of its answer waited about that long (wall time, so only a floor).
    assert!(llm.iter().any(|(_, t0, t1)| t1 - t0 >= 300_000), "{llm:?}");
    // Two spawn arrows, from the root's first reply; a runtime's budget is never drawn.
    assert_eq!(text.matches("synchronous via subagent task=").count(), 2, "{text}");
    assert!(!text.contains("class=\"budget\""), "the model sees no budget: {text}");
    assert!(!text.contains("budget="), "no line claims a budget: {text}");
    // The picture of the model's side is no substitute for a core's: --timeline draws one run,
    // and never over its input.
    let two = drive(&["tests/drive", "--timeline", svg.to_str().unwrap()], &command);
    assert_eq!(two.code, Some(2), "{}", two.both());
    assert!(
        two.stderr.contains("--timeline draws one run: give exactly one scenario file (3 given)"),
        "{}",
        two.both()
    );
    let over = drive(&["tests/drive-timeline/fanout.json", "--timeline", "tests/drive-timeline/fanout.json"], &command);
    assert_eq!(over.code, Some(2), "{}", over.both());
    assert!(over.stderr.contains("is the input file"), "{}", over.both());
}

#[test]
fn a_served_run_s_timeline_draws_what_the_model_saw() {
    // `serve --timeline`: the same picture, for a runtime started by hand.
    use std::io::BufRead as _;
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("served.html");
    let mut serve = Command::new(env!("CARGO_BIN_EXE_rehearsal"))
        .args(["serve", "tests/drive-timeline/fanout.json", "--runtime", "bub-0.5.1", "--idle-limit", "20s"])
        .args(["--color", "never", "--timeline", svg.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(serve.stderr.take().unwrap());
    let mut base = None;
    let mut line = String::new();
    while base.is_none() && stderr.read_line(&mut line).unwrap() > 0 {
        base = line.trim().strip_prefix("export OPENAI_BASE_URL=").map(str::to_string);
        line.clear();
    }
    let base = base.expect("serve prints its base URL");
    let runtime =
        Command::new(test_runtime()).args(["fanout", "Run both jobs."]).env("OPENAI_BASE_URL", &base).output().unwrap();
    assert!(runtime.status.success(), "{}", String::from_utf8_lossy(&runtime.stderr));
    let served = serve.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&served.stdout);
    assert_eq!(served.status.code(), Some(0), "{stdout}");
    let page = std::fs::read_to_string(&svg).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"), "a .html file gets the page: {page}");
    assert_eq!(spans(&page[page.find("<svg").unwrap()..page.find("</svg>").unwrap() + 6], "llm").len(), 6, "{page}");
    assert!(page.contains("main/2 llm.reply #2 calls=[] text=&quot;B done: the config is fine.&quot;"), "{page}");
    let over =
        rehearsal(&["serve", "tests/drive-timeline/fanout.json", "--timeline", "tests/drive-timeline/fanout.json"]);
    assert_eq!(over.code, Some(2), "{}", over.both());
    assert!(over.stderr.contains("is the input file: not overwritten"), "{}", over.both());
}

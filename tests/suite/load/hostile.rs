//! Hostile input: every file a hostile or careless user can write gives a verdict or a clear
//! error (exit 0, 1 or 2), never a panic, a hang or a blow-up; a panic inside a run is that
//! run's internal error; one bad path never costs the other files their verdict.
//!
//! The fixtures are in `tests/fixtures/hostile/`: `answered/` (numbers a model may send, which
//! the core must answer), `refused/` (what a file may not ask for, refused at load with the
//! limit and the field), `stops/` (runs the harness stops, with no oracle blaming the core)
//! and `output/` (text that must not reach the terminal raw). Folders with FIFOs, device
//! links and link loops are built in a temporary folder, since git cannot hold them.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rehearsal::internals::fuzz;
use rehearsal::internals::harness::schedule::Schedule;
use rehearsal::runner::Runner;
use rehearsal::scenario::{self, Lane, PresetName, Reply, Scenario, ToolSpec, Turn};
use rehearsal::sut::llm::BoxFuture;
use rehearsal::sut::{Capabilities, CoreSession, Harness, Outcome, Refused, SessionConfig, Steer, SystemUnderTest};
use serde_json::json;

use crate::support::{Output, rehearsal};

/// Runs the binary in `dir` and kills it after `limit`: a hang fails the test instead of
/// stalling the suite.
fn rehearsal_within(dir: &Path, args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rehearsal"))
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the rehearsal binary starts");
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for rehearsal") {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("rehearsal {args:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output { code: status.code(), stdout: out.join().unwrap(), stderr: err.join().unwrap() }
}

fn fixtures(folder: &str) -> Vec<String> {
    let mut files: Vec<String> =
        std::fs::read_dir(crate::support::manifest_path(&format!("tests/fixtures/hostile/{folder}")))
            .expect("the fixture folder exists")
            .map(|e| format!("tests/fixtures/hostile/{folder}/{}", e.unwrap().file_name().to_string_lossy()))
            .collect();
    files.sort();
    files
}

// ---------------------------------------------------------------------------------------
// Numbers a model sends: the core answers them by the rules, never panics.

#[test]
fn every_number_a_model_may_send_as_a_timeout_is_answered() {
    // 1e300, 2^64-1, 1e19 (clamped to 1e9 s), -1, "soon" (ignored), 0 (no limit): in a
    // `subagent` call and in a `subagent.wait`, each with the expected trace line.
    let out = rehearsal(&["run", "tests/fixtures/hostile/answered"]);
    assert_eq!(out.code, Some(0), "{}", out.both());
    assert!(out.stdout.contains("13 passed, 0 failed"), "{}", out.both());
}

// ---------------------------------------------------------------------------------------
// What a file may not ask for: exit 2, naming the file, the field and the limit.

#[test]
fn what_no_file_may_ask_for_is_refused_at_load_naming_field_and_limit() {
    let cases: &[(&str, &str)] = &[
        ("deep-chain-3500", "at `rules.depth_limit`: 3500 is deeper than limits.max_depth (100)"),
        ("horizon-40-years", "at `limits.horizon_ms`: must be from 1 to 315360000000 ms"),
        ("latency-40-years", "at `lanes[0].replies[0].latency_ms`: 1261440000000 ms is longer than"),
        ("max-events-0", "at `limits.max_events`: must be at least 1"),
        ("null-knob", ":7:3: at `rules.max_concurrency`: null does not turn this knob off"),
        ("profile-timeout-1e300", "at `profiles[0].timeout_seconds`: 1e300 s is longer than the longest limit"),
        (
            "profile-timeout-negative",
            "at `profiles[0].timeout_seconds`: must be a number of seconds, 0 or more (got -1)",
        ),
        ("repeat-count-1e10", "this text stands for 20000000000 characters, more than limits.max_text_chars"),
        ("repeat-count-u64-max", "this text stands for more than 2^64 characters"),
        ("result-of-leading-zero", "\"$task01\" is not a task reference: write `$taskN`"),
        ("result-of-plus", "\"$task+1\" is not a task reference: write `$taskN`"),
        ("task-ref-leading-zero", "\"$task01\" is not a task reference"),
        ("task-ref-minus", "\"$task-1\" is not a task reference"),
        ("task-ref-plus", "\"$task+1\" is not a task reference"),
        ("task-ref-space", "\"$task 1\" is not a task reference"),
        ("top-level-array", ":1:1: at `.`: a scenario file holds one JSON object"),
    ];
    assert_eq!(fixtures("refused").len(), cases.len(), "a case for every fixture of refused/");
    for (name, message) in cases {
        let path = format!("tests/fixtures/hostile/refused/{name}.json");
        let out = rehearsal(&["run", &path]);
        assert_eq!(out.code, Some(2), "{path}\n{}", out.both());
        assert!(out.stderr.starts_with(&format!("error: {path}")), "{path}\n{}", out.both());
        assert!(out.stderr.contains(message), "{path}: expected {message:?}\n{}", out.both());
        assert!(out.stdout.contains("0 passed, 0 failed, 1 bad input"), "{}", out.both());
    }
}

#[test]
fn a_profile_file_with_a_misspelt_key_or_a_huge_timeout_is_refused_with_file_and_key() {
    let out = rehearsal(&["run", "tests/fixtures/bad-profiles/front-matter-typo.json"]);
    assert_eq!(out.code, Some(2), "{}", out.both());
    assert!(
        out.stderr.contains(
            "front-matter-typo/ws/.agents/agents/reviewer.md:2:1: at `front matter`: unknown field `descripton`"
        ),
        "{}",
        out.both()
    );
    let out = rehearsal(&["run", "tests/fixtures/bad-profiles/huge-timeout.json"]);
    assert_eq!(out.code, Some(2), "{}", out.both());
    assert!(
        out.stderr.contains("huge-timeout/ws/.agents/agents/reviewer.md: at `timeout_seconds`: 1e300 s is longer"),
        "{}",
        out.both()
    );
}

#[test]
fn a_byte_order_mark_is_read_like_no_mark() {
    let out = rehearsal(&["run", "tests/fixtures/hostile/answered/bom.json"]);
    assert_eq!(out.code, Some(0), "{}", out.both());
}

// ---------------------------------------------------------------------------------------
// Stops: the verdict names the harness's stop first, and no oracle blames the core for it.

#[test]
fn a_run_the_harness_stops_is_judged_on_the_stop_alone() {
    let expected: &[(&str, &str)] = &[
        ("event-cap", "stopped: the run exceeded the event limit of 25 events"),
        ("exhausted-lane", "stopped: lanes[0] (agent \"main\") is exhausted"),
        // Issue 27: fork-isolation blamed the core for requests past the event limit's cut.
        ("fork-cut-by-event-limit-early", "stopped: the run exceeded the event limit of 5 events"),
        ("fork-cut-by-event-limit-late", "stopped: the run exceeded the event limit of 55 events"),
        ("horizon", "stopped: the run did not end within its horizon of 1000 ms"),
        ("missing-lane", "stopped: lanes: no lane selects agent main/2 (task \"c2\")"),
    ];
    assert_eq!(fixtures("stops").len(), expected.len());
    for (name, stop) in expected {
        let path = format!("tests/fixtures/hostile/stops/{name}.json");
        let out = rehearsal(&["run", &path, "--format", "json"]);
        assert_eq!(out.code, Some(1), "{path}\n{}", out.both());
        let record: serde_json::Value = serde_json::from_str(out.stdout.lines().next().unwrap()).unwrap();
        let failures: Vec<&str> =
            record["failures"].as_array().unwrap().iter().map(|f| f["what"].as_str().unwrap()).collect();
        assert!(failures[0].starts_with(stop), "{path}: the stop comes first: {failures:#?}");
        assert!(
            failures.iter().all(|f| !f.starts_with("oracle ")),
            "{path}: an oracle blamed the core for the harness's stop: {failures:#?}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Output: nothing from a file reaches the terminal raw.

#[test]
fn control_characters_in_a_name_are_escaped_and_cannot_forge_a_line() {
    let out = rehearsal(&["run", "tests/fixtures/hostile/output/control-characters-in-name.json"]);
    assert_eq!(out.code, Some(1), "{}", out.both());
    assert!(
        out.stdout.starts_with("FAIL evil\\nPASS forged (x; 1 events)\\n\\u{1b}[32mgreen\\u{202e} ("),
        "{}",
        out.both()
    );
    assert!(!out.stdout.contains('\u{1b}') && !out.stdout.contains('\u{202e}'), "{}", out.both());
    assert!(!out.stdout.lines().any(|l| l.starts_with("PASS")), "a forged PASS line:\n{}", out.stdout);
}

#[test]
fn control_characters_in_an_error_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let json = r#"{"name": "t", "lanes": [{"agent": "main", "replies": [{"calls": [{"tool": "x\nPASS y\u001b[0m", "args": {}}]}]}], "turns": [{"user": "go"}]}"#;
    std::fs::write(dir.path().join("bad.json"), json).unwrap();
    let out = rehearsal_within(dir.path(), &["run", "bad.json"], Duration::from_secs(60));
    assert_eq!(out.code, Some(2), "{}", out.both());
    assert!(out.stderr.contains("the script calls `x\\nPASS y\\u{1b}[0m`"), "{}", out.both());
    assert_eq!(out.stderr.lines().count(), 1, "one error, one line:\n{}", out.stderr);
}

// ---------------------------------------------------------------------------------------
// Bounded work.

fn many_calls(calls: usize, limits: serde_json::Value) -> String {
    let spawns: Vec<_> = (0..calls).map(|i| json!({"tool": "subagent", "args": {"prompt": format!("p{i}")}})).collect();
    json!({
        "name": "many",
        "rules": {"preset": "bub", "root_step_budget": 4_000_000, "max_concurrency": 1},
        "lanes": [
            {"agent": "main", "replies": [{"calls": spawns}, {"text": "ok"}]},
            {"task_contains": "p", "replies": [{"hang": true}]}
        ],
        "turns": [{"user": "go"}],
        "limits": limits
    })
    .to_string()
}

#[test]
fn a_hundred_thousand_calls_in_one_reply_are_refused_by_default_naming_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("many.json"), many_calls(100_000, json!({}))).unwrap();
    let out = rehearsal_within(dir.path(), &["run", "many.json"], Duration::from_secs(60));
    assert_eq!(out.code, Some(2), "{}", out.both());
    assert!(
        out.stderr.contains(
            "at `lanes[0].replies[0].calls`: 100000 calls in one reply, more than limits.max_calls_per_reply (1000)"
        ),
        "{}",
        out.both()
    );
}

#[test]
fn the_event_cap_stops_a_run_of_many_queued_children_promptly() {
    // Raised to 20,000 calls, capped at 5,000 events: the cap cuts the run short, and ending
    // the session cancels every queued child in one pass (it was quadratic).
    let dir = tempfile::tempdir().unwrap();
    let json = many_calls(20_000, json!({"max_calls_per_reply": 20_000, "max_events": 5_000}));
    std::fs::write(dir.path().join("many.json"), json).unwrap();
    let out = rehearsal_within(dir.path(), &["run", "many.json"], Duration::from_secs(120));
    assert_eq!(out.code, Some(1), "{}", out.both());
    assert!(out.stdout.contains("stopped: the run exceeded the event limit of 5000 events"), "{}", out.both());
    assert!(!out.stdout.contains("oracle "), "{}", out.both());
}

/// A foreground chain `depth` deep, each level one `Agent` call, the last one hanging when
/// `hang` (so the whole chain is dropped when the horizon stops the run). Each level hands its
/// whole budget down (`roku.grant.min-remaining-cap`), so the levels between end out of steps
/// once their child returns, and only the root answers again.
fn chain(depth: u32, hang: bool) -> Scenario {
    let mut lanes = vec![
        json!({"agent": "main", "replies": [{"calls": [{"tool": "Agent", "args": {"task": "<1>"}}]}, {"text": "done"}]}),
    ];
    for level in 1..depth {
        lanes.push(json!({"task_contains": format!("<{level}>"), "replies": [
            {"calls": [{"tool": "Agent", "args": {"task": format!("<{}>", level + 1)}}]}
        ]}));
    }
    let bottom = if hang { json!({"hang": true}) } else { json!({"text": "bottom"}) };
    lanes.push(json!({"task_contains": format!("<{depth}>"), "replies": [bottom]}));
    let json = json!({
        "name": "chain",
        "rules": {"preset": "roku", "depth_limit": depth, "root_step_budget": 4_000_000, "child_step_cap": 100_000},
        "limits": {"max_depth": depth, "horizon_ms": 1000},
        "lanes": lanes,
        "turns": [{"user": "go", "expect": {"message": if hang { "" } else { "done" }}}],
    });
    scenario::parse(Path::new("chain.json"), &json.to_string()).expect("a valid chain")
}

#[test]
fn the_deepest_chain_a_file_may_ask_for_runs_on_a_test_threads_stack() {
    // This test runs on a 2 MiB test thread in a debug build: every level nests a poll.
    let verdict = Runner::new().check(&chain(scenario::MAX_DEPTH, false)).unwrap();
    verdict.assert_passed();
    let deepest = format!("agent.start    depth={} ", scenario::MAX_DEPTH);
    assert!(verdict.run().unwrap().trace.lines().iter().any(|l| l.contains(&deepest)), "the chain reached the limit");
    // Stopped while 1000 levels are in flight: the whole chain is dropped, and the verdict
    // names the horizon alone.
    let verdict = Runner::new().check(&chain(scenario::MAX_DEPTH, true)).unwrap();
    assert!(!verdict.internal_error(), "{verdict}");
    assert!(verdict.failures()[0].what.starts_with("stopped: the run did not end within its horizon"), "{verdict}");
}

// ---------------------------------------------------------------------------------------
// Panics inside a run: that run's internal error, with the message and the place.

/// A core that panics in its turn, or in a task it spawned.
struct Panicky {
    in_spawned_task: bool,
}

struct PanickySession {
    in_spawned_task: bool,
}

struct Deaf;

impl Steer for Deaf {
    fn steer(&self, _: &str) {}
}

impl SystemUnderTest for Panicky {
    fn name(&self) -> &str {
        "panicky"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    fn start(&self, _: SessionConfig, _: Harness) -> Result<Box<dyn CoreSession>, Refused> {
        Ok(Box::new(PanickySession { in_spawned_task: self.in_spawned_task }))
    }
}

impl CoreSession for PanickySession {
    fn turn<'a>(&'a mut self, _: &'a str, _: &'a str) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            if self.in_spawned_task {
                tokio::spawn(async { panic!("a child task broke") });
                // The session waits on a task that will never answer: only the panic's stop
                // can end the run before its horizon.
                tokio::time::sleep(Duration::from_secs(10)).await;
            }
            panic!("the turn broke");
        })
    }

    fn steerer(&self) -> std::sync::Arc<dyn Steer> {
        std::sync::Arc::new(Deaf)
    }

    fn quit(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }

    fn live_sessions(&self) -> Vec<String> {
        Vec::new()
    }
}

fn one_turn() -> Scenario {
    Scenario::builder("one-turn")
        .preset(PresetName::Roku)
        .lane(Lane::agent("main").reply(Reply::text("hi")))
        .turn(Turn::user("go"))
        .build()
        .unwrap()
}

#[test]
fn a_panic_in_the_cores_turn_is_the_runs_internal_error_with_its_place() {
    let verdict = Runner::new().on(&Panicky { in_spawned_task: false }).check(&one_turn()).unwrap();
    assert!(verdict.internal_error(), "{verdict}");
    let first = &verdict.failures()[0].what;
    assert!(first.starts_with("internal error: panicked at tests/suite/load/hostile.rs:"), "{verdict}");
    assert!(first.ends_with(": the turn broke"), "{verdict}");
}

#[test]
fn a_panic_in_a_task_the_core_spawned_is_never_swallowed() {
    let verdict = Runner::new().on(&Panicky { in_spawned_task: true }).check(&one_turn()).unwrap();
    assert!(verdict.internal_error(), "{verdict}");
    let first = &verdict.failures()[0].what;
    assert!(first.starts_with("internal error: panicked at tests/suite/load/hostile.rs:"), "{verdict}");
    assert!(first.ends_with(": a child task broke"), "{verdict}");
    // It stopped the run at once, not at the horizon, and the horizon is not blamed.
    assert!(verdict.run().unwrap().elapsed < Duration::from_secs(10), "{verdict}");
    assert!(verdict.failures().iter().all(|f| !f.what.contains("horizon")), "{verdict}");
}

fn panicking_tool() -> Scenario {
    Scenario::builder("panicking-tool")
        .preset(PresetName::Roku)
        .tool(ToolSpec::new("Read").handler(|_| panic!("the tool broke")))
        .lane(Lane::agent("main").reply(Reply::call("Read", json!({}))).reply(Reply::text("done")))
        .turn(Turn::user("go"))
        .build()
        .unwrap()
}

#[test]
fn a_panic_in_the_harness_is_an_internal_error_too_and_the_next_run_is_clean() {
    let verdict = Runner::new().check(&panicking_tool()).unwrap();
    assert!(verdict.internal_error(), "{verdict}");
    assert!(verdict.failures()[0].what.ends_with(": the tool broke"), "{verdict}");
    // The capture ends with the run: the next run on this thread is judged as usual.
    Runner::new().check(&one_turn()).unwrap();
}

#[test]
fn the_fuzzer_reports_a_panic_as_a_finding_and_shrinks_it_as_one() {
    let scenario = panicking_tool();
    let fuzz::CaseResult::Panics(panics) = fuzz::check(&scenario, Schedule::default_order()) else {
        panic!("a panicking run is a finding")
    };
    assert!(panics[0].ends_with(": the tool broke"), "{panics:?}");
    use proptest::strategy::{Just, Strategy};
    let mut tree = Just(scenario).new_tree(&mut proptest::test_runner::TestRunner::deterministic()).unwrap();
    let (_, violations, panics) = fuzz::shrink(&mut tree, Schedule::default_order(), 16);
    assert!(violations.is_empty() && panics.len() == 1, "{violations:?} {panics:?}");
}

// ---------------------------------------------------------------------------------------
// File walking: regular files only, each once, and a bad path never costs the others.

const GOOD: &str = r#"{"name": "good", "lanes": [{"agent": "main", "replies": [{"text": "hi"}]}], "turns": [{"user": "go", "expect": {"message": "hi"}}]}"#;

#[cfg(unix)]
#[test]
fn fifos_devices_and_link_loops_are_reported_and_every_good_file_runs_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("suite");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(root.join("good.json"), GOOD).unwrap();
    std::fs::write(root.join("sub/also-good.json"), GOOD.replace("\"good\"", "\"also-good\"")).unwrap();
    let fifo = root.join("fifo.json");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
    assert!(made.success());
    std::os::unix::fs::symlink("/dev/zero", root.join("zero.json")).unwrap();
    std::os::unix::fs::symlink(".", root.join("self")).unwrap();
    std::os::unix::fs::symlink(".", root.join("x")).unwrap();
    std::os::unix::fs::symlink("..", root.join("sub/up")).unwrap();
    let out = rehearsal_within(dir.path(), &["run", "suite", "missing.json"], Duration::from_secs(60));
    assert_eq!(out.code, Some(2), "{}", out.both());
    assert_eq!(out.stdout.matches("PASS good (").count(), 1, "each file runs once:\n{}", out.both());
    assert_eq!(out.stdout.matches("PASS also-good (").count(), 1, "{}", out.both());
    assert!(out.stdout.ends_with("2 passed, 0 failed, 3 bad input\n"), "{}", out.both());
    for expected in [
        "error: suite/fifo.json: cannot read: not a regular file (a FIFO, a socket or a device): not read",
        "error: suite/zero.json: cannot read: not a regular file (a FIFO, a socket or a device): not read",
        "error: missing.json: cannot read: no such file or folder",
        "note: suite/self leads back to a folder being walked; not followed",
        "note: suite/x leads back to a folder being walked; not followed",
        "note: suite/sub/up leads back to a folder being walked; not followed",
    ] {
        assert!(out.stderr.contains(expected), "expected {expected:?}\n{}", out.both());
    }
}

#[test]
fn an_empty_folder_or_a_folder_without_scenarios_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("empty")).unwrap();
    std::fs::create_dir(dir.path().join("notes")).unwrap();
    std::fs::write(dir.path().join("notes/readme.txt"), "not a scenario").unwrap();
    for folder in ["empty", "notes"] {
        let out = rehearsal_within(dir.path(), &["run", folder], Duration::from_secs(60));
        assert_eq!(out.code, Some(2), "{}", out.both());
        assert!(out.stderr.contains(&format!("error: no scenario file (*.json) under {folder}")), "{}", out.both());
    }
}

#[test]
fn a_missing_path_is_reported_while_the_good_files_still_run() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("good.json"), GOOD).unwrap();
    let out = rehearsal_within(dir.path(), &["run", "nope.json", "good.json", "nope-dir"], Duration::from_secs(60));
    assert_eq!(out.code, Some(2), "{}", out.both());
    assert!(out.stdout.contains("PASS good ("), "{}", out.both());
    assert!(out.stdout.ends_with("1 passed, 0 failed, 2 bad input\n"), "{}", out.both());
}

#[test]
fn a_file_over_the_size_limit_is_refused_without_being_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let file = std::fs::File::create(dir.path().join("huge.json")).unwrap();
    // Sparse: 65 MiB that take no disk space.
    file.set_len(rehearsal::load::MAX_FILE_BYTES + 1024 * 1024).unwrap();
    let out = rehearsal_within(dir.path(), &["run", "huge.json"], Duration::from_secs(60));
    assert_eq!(out.code, Some(2), "{}", out.both());
    assert!(out.stderr.contains("huge.json"), "{}", out.both());
    assert!(
        out.stderr.contains("huge.json: cannot read: larger than 67108864 bytes, the most a scenario file may hold"),
        "{}",
        out.both()
    );
}

// ---------------------------------------------------------------------------------------
// Issue 27: limits a file cannot lift, and the run budget.

#[test]
fn no_file_lifts_its_limits_past_the_ceilings() {
    // Each file in `ceilings/` asks for more than a ceiling allows (a limit, the sum of its
    // check texts, one unknown-tool answer): refused at load with the field, exit 2.
    for file in fixtures("ceilings") {
        let out = rehearsal(&["run", &file]);
        assert_eq!(out.code, Some(2), "{file}: {}", out.both());
        assert!(out.stderr.contains("error: ") && out.stderr.contains("at `"), "{file}: {}", out.both());
    }
}

#[test]
fn amplification_stops_at_the_run_budget_as_a_harness_stop() {
    // Each file in `budget/` amplifies text or events at the ceilings; the run is stopped by
    // the run budget or the event limit, exit 1, and no oracle blames the core for the cut.
    for file in fixtures("budget") {
        let out = rehearsal_within(Path::new(env!("CARGO_MANIFEST_DIR")), &["run", &file], Duration::from_secs(300));
        assert_eq!(out.code, Some(1), "{file}: {}", out.both());
        let stopped = out.stdout.contains("(the run budget, which no file can raise)")
            || out.stdout.contains("stopped: the run exceeded the event limit");
        assert!(stopped, "{file}: {}", out.both());
        assert!(!out.stdout.contains("oracle "), "{file}: {}", out.both());
    }
}

// ---------------------------------------------------------------------------------------
// Round 3 (issue 27, classes 4 to 6): the fuzzer's command line, outputs, verdicts.

/// A scenario file that passes, under `name` in `dir`.
fn passing_file(dir: &Path, name: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let text =
        std::fs::read_to_string(crate::support::manifest_path("tests/fixtures/passing/text-reply.json")).unwrap();
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn fuzz_threads_are_capped_at_the_cases_and_cores_so_a_huge_jobs_count_runs() {
    // Issue 27: `-j 40000` panicked ("a fuzz thread starts: WouldBlock").
    let dir = tempfile::tempdir().unwrap();
    let out = rehearsal_within(
        dir.path(),
        &["fuzz", "--cases", "3", "-j", "40000", "--out", "findings"],
        Duration::from_secs(120),
    );
    assert_eq!(out.code, Some(0), "{}", out.both());
    assert!(out.stdout.starts_with("3 cases in "), "{}", out.both());
    assert!(!out.stdout.contains("40000 threads"), "{}", out.both());
}

#[test]
fn a_fuzz_campaign_that_would_run_no_case_is_refused() {
    // Issue 27: `--cases 0` and an empty shard exited 0, a CI gate that cannot fail.
    let dir = tempfile::tempdir().unwrap();
    for (args, says) in [
        (&["fuzz", "--cases", "0"][..], "--cases 0 runs no case"),
        (&["fuzz", "--cases", "2", "--shard", "3/4"][..], "shard 3/4 holds none of the 2 cases"),
    ] {
        let out = rehearsal_within(dir.path(), args, Duration::from_secs(10));
        assert_eq!(out.code, Some(2), "{args:?}\n{}", out.both());
        assert!(out.stderr.contains(says), "{args:?}\n{}", out.both());
        assert!(out.stdout.is_empty(), "{args:?}: no campaign ran\n{}", out.both());
    }
}

#[test]
fn fuzz_checks_that_its_out_folder_is_writable_before_the_first_case() {
    // Issue 27: `--out` was checked only once a finding had been shrunk. A million cases
    // would take minutes: the refusal comes at once.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a-file"), "").unwrap();
    for out_dir in ["a-file", "a-file/below"] {
        let out =
            rehearsal_within(dir.path(), &["fuzz", "--cases", "1000000", "--out", out_dir], Duration::from_secs(10));
        assert_eq!(out.code, Some(2), "{out_dir}\n{}", out.both());
        assert!(out.stderr.contains(&format!("--out {out_dir}: a-file is not a folder")), "{}", out.both());
    }
    // A folder that does not exist yet is fine (made for a finding), and nothing is left behind.
    let out = rehearsal_within(dir.path(), &["fuzz", "--cases", "1", "--out", "new/deeper"], Duration::from_secs(60));
    assert_eq!(out.code, Some(0), "{}", out.both());
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, ["a-file"], "the probe leaves nothing");
}

#[test]
fn a_timeline_that_would_overwrite_its_scenario_is_refused() {
    // Issue 27: `--timeline self.json` overwrote the scenario it ran, with exit 0.
    let dir = tempfile::tempdir().unwrap();
    let file = passing_file(dir.path(), "self.json");
    let before = std::fs::read(&file).unwrap();
    std::os::unix::fs::symlink("self.json", dir.path().join("link.svg")).unwrap();
    for target in ["self.json", "./self.json", "link.svg"] {
        for format in ["text", "json"] {
            let out = rehearsal_within(
                dir.path(),
                &["run", "self.json", "--timeline", target, "--format", format],
                Duration::from_secs(10),
            );
            assert_eq!(out.code, Some(2), "{target}\n{}", out.both());
            assert!(out.stderr.contains("is the input file self.json: not overwritten"), "{}", out.both());
        }
    }
    assert_eq!(std::fs::read(&file).unwrap(), before, "the scenario is untouched");
}

#[test]
fn a_report_that_cannot_be_written_to_stdout_exits_non_zero_with_a_message() {
    // Issue 27: `> /dev/full` exited 0 with nothing on stderr.
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else { return };
    let out = Command::new(env!("CARGO_BIN_EXE_rehearsal"))
        .args(["run", "tests/fixtures/passing/text-reply.json"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(full)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("error: cannot write the report to standard output:"), "{stderr}");
}

#[test]
fn an_early_usage_error_still_gives_the_json_summary_and_the_junit_document() {
    // Issue 27: an empty folder or a bad --require-coverage printed no document at all.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("empty")).unwrap();
    passing_file(dir.path(), "one.json");
    let cases: [&[&str]; 3] = [
        &["run", "empty"],
        &["run", "one.json", "--require-coverage", "missing.txt"],
        &["run", "one.json", "--filter", "nothing*"],
    ];
    for args in cases {
        let json = rehearsal_within(dir.path(), &[args, &["--format", "json"]].concat(), Duration::from_secs(10));
        assert_eq!(json.code, Some(2), "{args:?}\n{}", json.both());
        let last: serde_json::Value = serde_json::from_str(json.stdout.lines().last().unwrap_or("")).unwrap();
        assert_eq!((last["type"].as_str(), last["exit_code"].as_u64()), (Some("summary"), Some(2)), "{}", json.both());
        let usage: serde_json::Value = serde_json::from_str(json.stdout.lines().next().unwrap()).unwrap();
        assert_eq!(usage["type"], "usage_error", "{}", json.both());
        let junit = rehearsal_within(dir.path(), &[args, &["--format", "junit"]].concat(), Duration::from_secs(10));
        assert_eq!(junit.code, Some(2), "{args:?}\n{}", junit.both());
        assert!(junit.stdout.starts_with("<?xml"), "{}", junit.both());
        assert!(junit.stdout.contains("<testcase name=\"usage\" classname=\"rehearsal.usage\""), "{}", junit.both());
        assert!(junit.stdout.contains("errors=\"1\""), "{}", junit.both());
    }
}

#[test]
fn two_files_never_share_a_golden_file() {
    // Issue 27: `x/s.json` and `y/s.json` named on their own, and `a__b.json` beside
    // `a/b.json`, shared one golden file; `--accept` passed both while one overwrote the other.
    let dir = tempfile::tempdir().unwrap();
    for name in ["x/s.json", "y/s.json", "suite/a__b.json", "suite/a/b.json", "suite/ok.json"] {
        passing_file(dir.path(), name);
    }
    let out = rehearsal_within(
        dir.path(),
        &["run", "x/s.json", "y/s.json", "suite", "--snapshots", "golden", "--accept"],
        Duration::from_secs(30),
    );
    assert_eq!(out.code, Some(2), "{}", out.both());
    for (file, other) in [("x/s.json", "y/s.json"), ("y/s.json", "x/s.json"), ("suite/a__b.json", "suite/a/b.json")] {
        let says = format!("{file}: at `--snapshots`: its golden file ");
        let line = out.stderr.lines().find(|l| l.contains(&says)).unwrap_or_else(|| panic!("{file}\n{}", out.both()));
        assert!(line.contains(&format!("would also be that of {other}: not run")), "{line}");
    }
    assert!(out.stdout.contains("1 passed, 0 failed, 4 bad input"), "{}", out.both());
    let written: Vec<_> =
        std::fs::read_dir(dir.path().join("golden")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(written, ["ok.snap"], "only the file with a golden name of its own was written");
    // The folder that holds both gives each its own name.
    let out =
        rehearsal_within(dir.path(), &["run", ".", "--snapshots", "golden2", "--accept"], Duration::from_secs(30));
    assert!(out.stderr.contains("suite__a__b.snap would also be that of ./suite/a/b.json"), "{}", out.both());
    assert!(!out.stderr.contains("s.snap would"), "x__s and y__s are apart: {}", out.both());
}

#[test]
fn a_steer_timed_after_the_last_turn_fails_instead_of_passing_silently() {
    // Issue 27: a `steer` after the last turn was never delivered, and the run passed.
    let out = rehearsal(&["run", "tests/fixtures/hostile/verdicts/steer-after-last-turn.json"]);
    assert_eq!(out.code, Some(1), "{}", out.both());
    assert!(
        out.stdout.contains("steer[0] (at_ms 5000) was never delivered: the session's last turn ended at 100 ms"),
        "{}",
        out.both()
    );
}

#[test]
fn a_file_named_and_also_found_in_a_named_folder_runs_once() {
    // Issue 27: it ran twice and counted twice.
    let dir = tempfile::tempdir().unwrap();
    passing_file(dir.path(), "suite/a.json");
    passing_file(dir.path(), "suite/b.json");
    for args in [
        &["run", "suite/a.json", "suite"][..],
        &["run", "suite", "suite/a.json"],
        &["run", "suite/a.json", "./suite/a.json"],
    ] {
        let out = rehearsal_within(dir.path(), args, Duration::from_secs(30));
        assert_eq!(out.code, Some(0), "{args:?}\n{}", out.both());
        let runs = out.stdout.lines().filter(|l| l.starts_with("PASS ")).count();
        let expected = if args.len() == 3 && args[2] == "./suite/a.json" { 1 } else { 2 };
        assert_eq!(runs, expected, "{args:?}\n{}", out.both());
    }
}

#[test]
fn nested_flow_yaml_in_profile_front_matter_is_refused_at_once() {
    // Issue 27: 162 KB of nested flow-style YAML in a profile took 16 s to parse.
    let dir = tempfile::tempdir().unwrap();
    let profile = format!("---\ndescription: x\ntools: {}{}\n---\nBody.\n", "[".repeat(81_000), "]".repeat(81_000));
    let scenario = json!({
        "name": "nested-profile",
        "rules": {"preset": "bub"},
        "profile_files": {"deep.md": profile},
        "lanes": [{"agent": "main", "replies": [{"text": "ok"}]}],
        "turns": [{"user": "hi"}]
    });
    std::fs::write(dir.path().join("s.json"), scenario.to_string()).unwrap();
    let started = Instant::now();
    let out = rehearsal_within(dir.path(), &["run", "s.json"], Duration::from_secs(10));
    assert_eq!(out.code, Some(2), "{}", out.both());
    assert!(out.stderr.contains("more than the 16384 a profile may have"), "{}", out.both());
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// Issue 27, class 3: a golden file (`--snapshots`) that is a FIFO hung the run, and one that
/// links to /dev/zero read until memory ran out. Both now go through the front door's bounded
/// reader (`load::read`) and are refused unread, naming the file, with exit 2.
#[cfg(unix)]
#[test]
fn a_golden_file_that_is_a_fifo_or_a_link_to_dev_zero_is_refused_unread() {
    for kind in ["fifo", "zero"] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("good.json"), GOOD).unwrap();
        std::fs::create_dir(dir.path().join("snaps")).unwrap();
        let golden = dir.path().join("snaps/good.snap");
        if kind == "fifo" {
            assert!(Command::new("mkfifo").arg(&golden).status().expect("mkfifo runs").success());
        } else {
            std::os::unix::fs::symlink("/dev/zero", &golden).unwrap();
        }
        let out = rehearsal_within(dir.path(), &["run", "good.json", "--snapshots", "snaps"], Duration::from_secs(60));
        assert_eq!(out.code, Some(2), "{kind}: {}", out.both());
        assert!(
            out.stderr.contains("snaps/good.snap: cannot read: not a regular file")
                && out.stderr.contains("a golden file is not read from it"),
            "{kind}: {}",
            out.both()
        );
    }
}

/// Issue 27, class 3: a `--require-coverage` file that is a FIFO or a link to /dev/zero is
/// refused unread, naming the file, with exit 2.
#[cfg(unix)]
#[test]
fn a_coverage_requirements_file_that_is_a_fifo_or_a_link_to_dev_zero_is_refused_unread() {
    for kind in ["fifo", "zero"] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("good.json"), GOOD).unwrap();
        let required = dir.path().join("required.txt");
        if kind == "fifo" {
            assert!(Command::new("mkfifo").arg(&required).status().expect("mkfifo runs").success());
        } else {
            std::os::unix::fs::symlink("/dev/zero", &required).unwrap();
        }
        let args = ["run", "good.json", "--require-coverage", "required.txt"];
        let out = rehearsal_within(dir.path(), &args, Duration::from_secs(60));
        assert_eq!(out.code, Some(2), "{kind}: {}", out.both());
        assert!(
            out.stderr.contains("required.txt: cannot read: not a regular file")
                && out.stderr.contains("a coverage requirements file is not read from it"),
            "{kind}: {}",
            out.both()
        );
    }
}

/// Issue 27, class 6: a scenario file with one Latin-1 byte got "stream did not contain valid
/// UTF-8", with no line or column. The bounded reader places the byte.
#[test]
fn a_latin1_byte_in_a_scenario_is_placed_by_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = GOOD.replace("\"go\"", "\"caf?\"").into_bytes();
    let at = bytes.iter().position(|&b| b == b'?').unwrap();
    bytes[at] = 0xe9;
    std::fs::write(dir.path().join("latin1.json"), bytes).unwrap();
    let out = rehearsal_within(dir.path(), &["run", "latin1.json"], Duration::from_secs(60));
    assert_eq!(out.code, Some(2), "{}", out.both());
    let column = at + 1;
    assert!(out.stderr.contains(&format!("latin1.json:1:{column}: at `.`: byte 0xe9 is not UTF-8")), "{}", out.both());
    assert!(!out.stderr.contains("stream did not contain valid UTF-8"), "{}", out.both());
}

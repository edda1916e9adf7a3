//! `rehearsal record` (issue 25): a real run captured through the proxy and replayed with
//! `drive`. The "real model" is a second `rehearsal serve` started in-process on 127.0.0.1
//! port 0 (it stops when the test finishes it); the runtime is the test-only
//! `rehearsal-test-runtime` (tests/wire_runtime/runtime.rs), so no Python and no internet.
//! Guarded: the recording is a scenario the schema and the front door accept, and it replays
//! green; no key reaches the file, whether it came as a header or inside a body; a runtime
//! whose code changed one request fails the replay naming that request's first differing
//! message; upstream faults are recorded as their scripted kinds; a parent and two parallel
//! children replay with each child bound to its own lane 20 of 20 times, the children's
//! answers ordered both ways by their latencies.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use rehearsal::dialect::Dialect;
use rehearsal::wire::{ServeOptions, Server};

use crate::support::{Output, manifest_path, test_runtime};

const FANOUT: &str = "tests/record/fanout-runtime.json";
/// A key shaped like OpenAI's: the default patterns know it.
const KEY: &str = "sk-test-4f3e2d1c0b9a8877";

/// Runs the binary from the crate's root with extra environment variables.
pub(super) fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rehearsal"));
    command.args(args).current_dir(env!("CARGO_MANIFEST_DIR")).env_remove("OPENAI_API_KEY");
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().expect("the rehearsal binary runs");
    Output {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(out.stderr).expect("stderr is UTF-8"),
    }
}

/// An upstream: `scenario` served in-process (wall time, scale 1) on a thread of its own with
/// a current-thread tokio runtime, until [`Upstream::finish`].
pub(super) struct Upstream {
    pub(super) url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<rehearsal::wire::WireRun>>,
}

impl Upstream {
    pub(super) fn start(scenario: &rehearsal::Scenario, dialect: &str) -> Upstream {
        let (scenario, dialect) = (scenario.clone(), Dialect::builtin(dialect).unwrap());
        let (url_tx, url_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async move {
                let options =
                    ServeOptions { idle_limit: Duration::from_secs(60), created_s: Some(0), ..ServeOptions::default() };
                let server = Server::start(&scenario, dialect, options).await.unwrap();
                url_tx.send(server.base_url()).unwrap();
                let _ = stopped.await;
                server.finish(rehearsal::wire::End::Caller).await
            })
        });
        let url = url_rx.recv().expect("the upstream starts");
        Upstream { url, stop: Some(stop), thread: Some(thread) }
    }

    /// Stops it; its own verdict on what it was asked.
    pub(super) fn finish(mut self, scenario: &rehearsal::Scenario) -> rehearsal::Verdict {
        let _ = self.stop.take().expect("not finished yet").send(());
        let run = self.thread.take().expect("not finished yet").join().expect("the upstream thread ends");
        rehearsal::wire::judge(scenario, &run)
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

pub(super) fn load_text(text: &str, dir: &Path, name: &str) -> rehearsal::Scenario {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    rehearsal::load::outside(&path).unwrap().into_parts().0
}

/// The upstream of the fan-out: the root spawns two children in one reply; each child looks
/// one thing up (its first reply waits `a_ms` / `b_ms`) and answers.
fn fanout_upstream(dir: &Path, a_ms: u64, b_ms: u64) -> rehearsal::Scenario {
    let text = serde_json::json!({
        "name": "record-fanout-upstream",
        "rules": {"preset": "bub"},
        "tools": [{"name": "lookup"}],
        "lanes": [
            {"agent": "main", "replies": [
                {"calls": [
                    {"tool": "subagent", "args": {"prompt": "Job A: find the logs"}},
                    {"tool": "subagent", "args": {"prompt": "Job B: find the config"}}
                ]},
                {"text": "Both jobs done."}
            ]},
            {"task_contains": "Job A", "replies": [
                {"calls": [{"tool": "lookup", "args": {"q": "logs"}}], "latency_ms": a_ms},
                {"text": "A done: the logs are fine."}
            ]},
            {"task_contains": "Job B", "replies": [
                {"calls": [{"tool": "lookup", "args": {"q": "config"}}], "latency_ms": b_ms},
                {"text": "B done: the config is fine."}
            ]}
        ],
        "turns": [{"user": "Run both jobs."}]
    });
    load_text(&text.to_string(), dir, &format!("upstream-{a_ms}-{b_ms}.json"))
}

/// Records the fan-out through an upstream whose children answer after `a_ms` / `b_ms`.
fn record_fanout(dir: &Path, a_ms: u64, b_ms: u64, env: &[(&str, &str)]) -> (PathBuf, Output) {
    record_fanout_with(dir, a_ms, b_ms, env, &[])
}

/// [`record_fanout`] with extra `record` flags.
fn record_fanout_with(dir: &Path, a_ms: u64, b_ms: u64, env: &[(&str, &str)], flags: &[&str]) -> (PathBuf, Output) {
    let upstream_scenario = fanout_upstream(dir, a_ms, b_ms);
    let upstream = Upstream::start(&upstream_scenario, "bub-0.5.1");
    let out = dir.join(format!("recorded-{a_ms}-{b_ms}.json"));
    let mut args = vec![
        "record",
        "--color",
        "never",
        "--upstream",
        &upstream.url,
        "--out",
        out.to_str().unwrap(),
        "--runtime",
        FANOUT,
        "--message",
        "Run both jobs.",
    ];
    args.extend_from_slice(flags);
    args.extend(["--", test_runtime(), "fanout", "{message}"]);
    let output = run(&args, env);
    let verdict = upstream.finish(&upstream_scenario);
    // The upstream judges what it was asked too: it passes unless the runtime breaks a rule.
    let broken = env.contains(&("TEST_RUNTIME_VARIANT", "swap"));
    assert_eq!(verdict.passed(), !broken, "the upstream itself: {verdict}\n{}", output.both());
    (out, output)
}

pub(super) fn drive(file: &Path, runtime: &str, command: &[&str], env: &[(&str, &str)]) -> Output {
    let mut args = vec!["drive", "--color", "never", "--trace", "--runtime", runtime, file.to_str().unwrap(), "--"];
    args.extend_from_slice(command);
    run(&args, env)
}

pub(super) fn schema_accepts(file: &Path) {
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(manifest_path("docs/scenario.schema.json")).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("the committed schema compiles");
    let value: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let errors: Vec<String> =
        validator.iter_errors(&value).map(|e| format!("{} at {}", e, e.instance_path())).collect();
    assert!(errors.is_empty(), "{}: {errors:#?}", file.display());
}

#[test]
fn a_recording_is_schema_valid_holds_no_key_and_replays_green() {
    let dir = tempfile::tempdir().unwrap();
    let leak = [("OPENAI_API_KEY", KEY), ("TEST_RUNTIME_KEY_IN_BODY", "1")];
    let (file, out) = record_fanout(dir.path(), 0, 0, &leak);
    assert_eq!(out.code, Some(0), "{}", out.both());
    assert!(out.stdout.contains("PASS recorded-0-0"), "{}", out.both());
    let text = std::fs::read_to_string(&file).unwrap();
    // The key went as `Authorization: Bearer KEY`, as an `api_key` body field and inside the
    // first user message; none of it is written, and the blank is.
    assert!(!text.contains(KEY), "{text}");
    assert!(!text.contains("4f3e2d1c0b9a8877"), "{text}");
    assert!(text.contains("(api key [redacted])"), "{text}");
    schema_accepts(&file);
    // One lane per agent, the children by their distinct tasks, each with a check on its
    // first message.
    for lane in [
        r#"{"agent": "main", "replies": ["#,
        r#"{"task_contains": "Job A: find the logs", "replies": ["#,
        r#"{"task_contains": "Job B: find the config", "replies": ["#,
    ] {
        assert!(text.contains(lane), "{lane} in {text}");
    }
    assert!(text.contains(r#""first_message":"Job A: find the logs""#), "{text}");
    // Replayed with another key of the same shape: the volatile secret spans compare equal.
    let replay = drive(
        &file,
        FANOUT,
        &[test_runtime(), "fanout", "{message}"],
        &[("OPENAI_API_KEY", "sk-other-0000000000"), ("TEST_RUNTIME_KEY_IN_BODY", "1")],
    );
    assert_eq!(replay.code, Some(0), "{}", replay.both());
    assert!(replay.stdout.contains("PASS recorded-0-0"), "{}", replay.both());
}

#[test]
fn a_literal_key_no_pattern_knows_is_blanked_too() {
    // A key of no known shape, sent as a header and in the body: blanked because the proxy
    // saw it in the auth header.
    let dir = tempfile::tempdir().unwrap();
    let key = "plain-credential-31337";
    let leak = [("OPENAI_API_KEY", key), ("TEST_RUNTIME_KEY_IN_BODY", "1")];
    let (file, out) = record_fanout(dir.path(), 0, 0, &leak);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains(key), "{text}");
    assert!(text.contains("(api key [redacted])"), "{text}");
    // The recording's own check reads the recording blanked as the file is: the writer and
    // the recording agree, and nothing is blamed on the runtime (issue 37; before, this was
    // a failed verdict, the writer's inconsistency put down to the real run).
    assert_eq!(out.code, Some(0), "{}", out.both());
    // No pattern knows the key, so a replay that sends it again cannot compare equal to the
    // blanked request (docs/record.md, "Secrets").
    let replay = drive(&file, FANOUT, &[test_runtime(), "fanout", "{message}"], &leak);
    assert_eq!(replay.code, Some(1), "{}", replay.both());
    assert!(replay.stdout.contains("recorded: message 1 (user) differs from the recording"), "{}", replay.both());
    // Named with --redact, the pattern is volatile too: the recording and its replay pass.
    let dir = tempfile::tempdir().unwrap();
    let (file, out) = record_fanout_with(dir.path(), 0, 0, &leak, &["--redact", "plain-credential-[0-9]+"]);
    assert_eq!(out.code, Some(0), "{}", out.both());
    assert!(!std::fs::read_to_string(&file).unwrap().contains(key));
    let replay = drive(
        &file,
        FANOUT,
        &[test_runtime(), "fanout", "{message}"],
        &[("OPENAI_API_KEY", "plain-credential-4242"), ("TEST_RUNTIME_KEY_IN_BODY", "1")],
    );
    assert_eq!(replay.code, Some(0), "{}", replay.both());
}

#[test]
fn a_runtime_change_that_alters_one_request_fails_the_replay_naming_its_first_differing_message() {
    let dir = tempfile::tempdir().unwrap();
    let (file, out) = record_fanout(dir.path(), 0, 0, &[]);
    assert_eq!(out.code, Some(0), "{}", out.both());
    let replay = drive(&file, FANOUT, &[test_runtime(), "fanout", "{message}"], &[("TEST_RUNTIME_VARIANT", "v2")]);
    assert_eq!(replay.code, Some(1), "{}", replay.both());
    let first = replay.stdout.lines().find(|l| l.contains("check failed")).unwrap_or_default().to_string();
    // Child B's second request is the one the change altered: its message 3, the lookup
    // result, is named against the recorded text.
    assert!(first.contains("lanes[2].replies[1].check"), "{}", replay.both());
    assert!(
        first.contains(
            r#"recorded: message 3 (tool) differs from the recording: expected "looked up: config", got "looked up (v2): config""#
        ),
        "{}",
        replay.both()
    );
}

#[test]
fn a_real_run_that_breaks_a_rule_is_recorded_and_the_rule_named() {
    // The runtime hands the root its children's results swapped: the recording is written
    // (the incident, as it happened) and its verdict names the model-side rule broken.
    let dir = tempfile::tempdir().unwrap();
    let (file, out) = record_fanout(dir.path(), 0, 0, &[("TEST_RUNTIME_VARIANT", "swap")]);
    assert_eq!(out.code, Some(1), "{}", out.both());
    assert!(out.stdout.contains("FAIL recorded-0-0"), "{}", out.both());
    assert!(out.stdout.contains("(oracle.model-side.truncation): main request #2 (exchange 5): the result of the `subagent` call that made main/1 is not main/1's final reply"), "{}", out.both());
    assert!(out.stderr.contains("the real run broke the rules below"), "{}", out.both());
    schema_accepts(&file);
    // Replayed to the same broken runtime, the same rule breaks again.
    let replay = drive(&file, FANOUT, &[test_runtime(), "fanout", "{message}"], &[("TEST_RUNTIME_VARIANT", "swap")]);
    assert_eq!(replay.code, Some(1), "{}", replay.both());
    assert!(replay.stdout.contains("(oracle.model-side.truncation)"), "{}", replay.both());
}

#[test]
fn upstream_faults_are_recorded_as_their_scripted_kinds_and_replay_as_they_happened() {
    let dir = tempfile::tempdir().unwrap();
    let upstream_scenario =
        rehearsal::load::outside(&manifest_path("tests/record/upstream-faults.json")).unwrap().into_parts().0;
    let upstream = Upstream::start(&upstream_scenario, "generic");
    let file = dir.path().join("faults.json");
    let env = [("TEST_RUNTIME_STREAM", "1"), ("TEST_RUNTIME_TIMEOUT_MS", "500")];
    let mut args = vec!["record", "--color", "never", "--upstream", &upstream.url, "--out", file.to_str().unwrap()];
    for m in ["one", "two", "three", "four", "five"] {
        args.extend(["--message", m]);
    }
    args.extend(["--", test_runtime(), "ask", "{message}"]);
    let out = run(&args, &env);
    let verdict = upstream.finish(&upstream_scenario);
    assert!(verdict.passed(), "the upstream itself: {verdict}");
    assert_eq!(out.code, Some(0), "{}", out.both());
    let text = std::fs::read_to_string(&file).unwrap();
    schema_accepts(&file);
    assert!(text.contains(r#"{"error":"slow down","error_status":429,"error_type":"rate_limit_error""#), "{text}");
    // Two chunks: the role, then the first 24 characters of the text.
    assert!(text.contains(r#"{"text":"This text is cut off aft","drop_after_chunks":2"#), "{text}");
    assert!(text.contains(r#"{"hang":true"#), "{text}");
    for turn in ["two", "three", "four"] {
        assert!(text.contains(&format!(r#"{{"user":"{turn}","expect":{{"status":"error"}}}}"#)), "{text}");
    }
    assert!(text.contains(r#"{"user":"five","expect":{"message":"back again"}}"#), "{text}");
    let replay = drive(&file, "generic", &[test_runtime(), "ask", "{message}"], &env);
    assert_eq!(replay.code, Some(0), "{}", replay.both());
}

/// The order in which the children's second requests (the ones after their lookups) arrived,
/// from `drive --trace`'s exchange lines: `A` or `B` per line answered by that child's final
/// text.
fn second_request_order(trace: &str) -> String {
    trace
        .lines()
        .filter(|l| l.contains(" exchange "))
        .filter_map(|l| {
            if l.contains("\"A done") {
                Some('A')
            } else if l.contains("\"B done") {
                Some('B')
            } else {
                None
            }
        })
        .collect()
}

#[test]
fn parallel_children_replay_bound_to_their_own_lanes_20_of_20_in_both_orders() {
    let dir = tempfile::tempdir().unwrap();
    for (a_ms, b_ms, order) in [(400, 0, "BA"), (0, 400, "AB")] {
        let (file, out) = record_fanout(dir.path(), a_ms, b_ms, &[]);
        assert_eq!(out.code, Some(0), "{}", out.both());
        let text = std::fs::read_to_string(&file).unwrap();
        // The latencies as measured (wall time): the slow child's lookup reply took at least
        // 400 ms, and more on a loaded machine.
        let measured: Vec<u64> = text
            .split(r#""latency_ms":"#)
            .skip(1)
            .filter_map(|rest| rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
            .collect();
        assert!(measured.iter().any(|ms| (400..2_000).contains(ms)), "{measured:?} in {text}");
        // Twenty copies in one folder, driven two at a time.
        let copies = dir.path().join(format!("copies-{a_ms}-{b_ms}"));
        std::fs::create_dir(&copies).unwrap();
        for i in 0..20 {
            std::fs::copy(&file, copies.join(format!("r{i:02}.json"))).unwrap();
        }
        let replay = drive(&copies, FANOUT, &[test_runtime(), "fanout", "{message}"], &[]);
        assert_eq!(replay.code, Some(0), "{}", replay.both());
        assert_eq!(replay.stdout.matches("PASS ").count(), 20, "{}", replay.both());
        // Each scenario's trace: the children's answers in the order the latencies force.
        let blocks: Vec<&str> = replay.stdout.split("PASS ").skip(1).collect();
        assert_eq!(blocks.len(), 20);
        for block in blocks {
            assert_eq!(second_request_order(block), order, "{block}");
        }
    }
}

#[test]
fn the_plain_proxy_form_ends_at_the_idle_limit_and_writes_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let upstream_scenario =
        rehearsal::load::outside(&manifest_path("tests/drive/one-turn.json")).unwrap().into_parts().0;
    let upstream = Upstream::start(&upstream_scenario, "generic");
    let file = dir.path().join("plain.json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_rehearsal"))
        .args(["record", "--color", "never", "--idle-limit", "1s", "--upstream", &upstream.url, "--out"])
        .arg(&file)
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The base URL is on stderr's first line.
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut stderr, &mut first).unwrap();
    let base = first.split_whitespace().nth(2).expect("recording through URL to ...").to_string();
    let ran = Command::new(test_runtime())
        .args(["ask", "hello"])
        .env("OPENAI_BASE_URL", &base)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&ran.stdout).trim(), "the only reply");
    let status = child.wait().unwrap();
    upstream.finish(&upstream_scenario);
    assert_eq!(status.code(), Some(0));
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains(r#"{"user":"hello"}"#), "{text}");
    assert!(text.contains(r#"{"text":"the only reply""#), "{text}");
    schema_accepts(&file);
}

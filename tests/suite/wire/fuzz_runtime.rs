//! `rehearsal fuzz --runtime` (issue 41) against `rehearsal-test-runtime fanout`
//! (tests/wire_runtime/runtime.rs), so no Python: the correct runtime survives a campaign, the
//! broken one (`TEST_RUNTIME_VARIANT=swap`: the root gets its children's results in reverse call
//! order) is found, shrunk to a small scenario that `drive` replays failing, the same file for
//! the same seed; a runtime that breaks the rule only every other run is reported as flaky; and
//! bad usage is refused before any case runs.

use crate::support::{rehearsal, test_runtime};

const FANOUT: &str = "tests/fuzz/fanout-runtime.json";

fn fuzz(out: &std::path::Path, cases: &str, command: &[&str]) -> crate::support::Output {
    let out = out.to_string_lossy().into_owned();
    let mut args =
        vec!["fuzz", "--runtime", FANOUT, "--cases", cases, "--seed", "1", "--jobs", "2", "--out", out.as_str(), "--"];
    args.extend_from_slice(command);
    rehearsal(&args)
}

#[test]
fn a_correct_runtime_survives_and_a_broken_one_is_found_shrunk_and_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let correct = fuzz(&dir.path().join("correct"), "30", &[test_runtime(), "fanout", "{message}"]);
    assert_eq!(correct.code, Some(0), "{}", correct.both());
    assert!(correct.stdout.starts_with("30 cases of runtime `test-runtime-fanout`"), "{}", correct.both());
    assert!(correct.stdout.contains(", 0 finding(s), 0 invalid, 0 stopped;"), "{}", correct.both());

    let swap = ["env", "TEST_RUNTIME_VARIANT=swap", test_runtime(), "fanout", "{message}"];
    let mut files = Vec::new();
    for attempt in ["first", "second"] {
        let broken = fuzz(&dir.path().join(attempt), "30", &swap);
        assert_eq!(broken.code, Some(1), "{}", broken.both());
        assert!(
            broken.stdout.contains("reproduces: 3 of 3 replays broke oracle.model-side.truncation"),
            "{}",
            broken.both()
        );
        let file =
            broken.stdout.lines().find_map(|l| l.strip_prefix("minimal scenario: ")).expect("a file").to_string();
        let replay = broken.stdout.lines().find_map(|l| l.strip_prefix("replay: ")).expect("a replay command");
        assert!(replay.starts_with(&format!("rehearsal drive {file} --runtime {FANOUT} -- env")), "{replay}");
        let text = std::fs::read_to_string(&file).unwrap();
        let scenario: serde_json::Value = serde_json::from_str(&text).unwrap();
        let replies: usize =
            scenario["lanes"].as_array().unwrap().iter().map(|l| l["replies"].as_array().unwrap().len()).sum();
        assert!(replies <= 6, "shrunk to {replies} replies:\n{text}");
        // The written file is an ordinary scenario: drive fails it on the same clause.
        let mut args = vec!["drive", file.as_str(), "--runtime", FANOUT, "--color", "never", "--"];
        args.extend_from_slice(&swap);
        let replayed = rehearsal(&args);
        assert_eq!(replayed.code, Some(1), "{}", replayed.both());
        assert!(replayed.stdout.contains("(oracle.model-side.truncation)"), "{}", replayed.both());
        files.push(text);
    }
    assert_eq!(files[0], files[1], "the same seed finds and shrinks to the same file");
}

/// A runtime that breaks the rule on every other run only: the shrunk case does not fail on
/// every replay, and the report says flaky with its rate, never a clean reproduction.
#[test]
fn a_finding_that_does_not_recur_every_time_is_reported_as_flaky() {
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("runs");
    let script = format!(
        "n=$(cat '{c}' 2>/dev/null || echo 0); echo $((n + 1)) > '{c}'; \
         if [ $((n % 2)) = 1 ]; then export TEST_RUNTIME_VARIANT=swap; fi; exec '{rt}' fanout \"$1\"",
        c = counter.display(),
        rt = test_runtime()
    );
    let out = dir.path().join("out").to_string_lossy().into_owned();
    let args = [
        "fuzz",
        "--runtime",
        FANOUT,
        "--cases",
        "20",
        "--seed",
        "1",
        "--jobs",
        "1",
        "--replays",
        "4",
        "--out",
        &out,
        "--",
        "sh",
        "-c",
        &script,
        "sh",
        "{message}",
    ];
    let flaky = rehearsal(&args);
    assert_eq!(flaky.code, Some(1), "{}", flaky.both());
    assert!(
        flaky.stdout.contains("flaky: 2 of 4 replays broke oracle.model-side.truncation (50%)"),
        "{}",
        flaky.both()
    );
    assert!(!flaky.stdout.contains("reproduces:"), "{}", flaky.both());
}

#[test]
fn bad_usage_is_refused_before_any_case_runs() {
    let cases = [
        (vec!["fuzz", "--runtime", FANOUT], "give the runtime's command after `--`"),
        (vec!["fuzz", "--clock"], "--clock drives a runtime in another process"),
        (vec!["fuzz", "--cases", "5", "--", "python3"], "a command after `--` is a runtime's"),
        (vec!["fuzz", "--runtime", FANOUT, "--judge", "events", "--", "x"], "has no events to judge"),
        (vec!["fuzz", "--runtime", "no-such-runtime", "--", "x"], "--runtime"),
        (vec!["fuzz", "--runtime", FANOUT, "--cases", "0", "--", "x"], "--cases 0 runs no case"),
    ];
    for (args, says) in cases {
        let out = rehearsal(&args);
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.both());
        assert!(out.stderr.contains(says), "{args:?}: {}", out.both());
    }
    let missing = rehearsal(&[
        "fuzz",
        "--runtime",
        FANOUT,
        "--cases",
        "1",
        "--out",
        "target/tmp/fuzz-missing",
        "--",
        "/no/such/runtime",
    ]);
    assert_eq!(missing.code, Some(4), "{}", missing.both());
    assert!(missing.stderr.contains("the system under test could not be run"), "{}", missing.both());
}

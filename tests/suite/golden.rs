//! Golden traces for any scenario folder (`rehearsal run DIR --snapshots SNAPS`), and the JUnit
//! XML report (`--format junit`) checked against a public JUnit schema (see `junit_schema`).

use std::path::{Path, PathBuf};

use crate::support::{manifest_path, rehearsal};

/// A fresh folder under `target/` holding copies of `files` (paths under the crate root),
/// as a user's own scenario folder.
fn user_folder(test: &str, files: &[&str]) -> PathBuf {
    let dir = manifest_path("target/golden-tests").join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("scenarios/nested")).unwrap();
    for (i, file) in files.iter().enumerate() {
        let name = Path::new(file).file_name().unwrap();
        let to = if i == 0 { dir.join("scenarios").join(name) } else { dir.join("scenarios/nested").join(name) };
        std::fs::copy(manifest_path(file), to).unwrap();
    }
    dir
}

fn run_in(dir: &Path, extra: &[&str]) -> crate::support::Output {
    let scenarios = dir.join("scenarios");
    let snaps = dir.join("snaps");
    let mut args = vec!["run", scenarios.to_str().unwrap(), "--snapshots", snaps.to_str().unwrap(), "-j", "1"];
    args.extend_from_slice(extra);
    rehearsal(&args)
}

#[test]
fn a_user_folder_gets_golden_traces_that_fail_until_accepted() {
    let dir = user_folder(
        "accept",
        &["scenarios/roku/agent-budget-from-30.json", "scenarios/bub/three-children-notified-in-completion-order.json"],
    );
    let snaps = dir.join("snaps");
    // No golden traces yet: both fail, and this run's traces wait for review.
    let first = run_in(&dir, &[]);
    assert_eq!(first.code, Some(1), "{}", first.both());
    assert!(first.stdout.contains("no golden trace yet"), "{}", first.both());
    let pending = snaps.join("nested__three-children-notified-in-completion-order.snap.new");
    assert!(pending.exists(), "named after the path under the folder: {}", first.both());
    assert!(snaps.join("agent-budget-from-30.snap.new").exists());
    // Accepted: written as golden files, in insta's format.
    let accepted = run_in(&dir, &["--accept"]);
    assert_eq!(accepted.code, Some(0), "{}", accepted.both());
    let golden = std::fs::read_to_string(snaps.join("agent-budget-from-30.snap")).unwrap();
    assert!(golden.starts_with("---\nsource: "), "{golden}");
    assert!(golden.contains("\n---\nscenario: agent-budget-from-30\n"), "{golden}");
    assert!(!pending.exists(), "accepting removes the pending trace");
    // Unchanged: passes.
    assert_eq!(run_in(&dir, &[]).code, Some(0));
    // A changed trace (the child answers otherwise) fails, showing the first line that
    // differs, until accepted again.
    let file = dir.join("scenarios/agent-budget-from-30.json");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replace("\"All clear.\"", "\"All quiet.\"")).unwrap();
    let changed = run_in(&dir, &[]);
    assert_eq!(changed.code, Some(1), "{}", changed.both());
    assert!(changed.stdout.contains("the trace differs from its golden file at line"), "{}", changed.both());
    assert!(changed.stdout.contains("| golden: ") && changed.stdout.contains("| now:    "), "{}", changed.both());
    assert!(snaps.join("agent-budget-from-30.snap.new").exists());
    assert_eq!(run_in(&dir, &["--accept"]).code, Some(0));
    assert_eq!(run_in(&dir, &[]).code, Some(0));
}

#[test]
fn this_repository_s_snapshots_are_the_golden_traces_of_its_scenarios() {
    let out = rehearsal(&["run", "scenarios", "--snapshots", "snapshots"]);
    assert_eq!(out.code, Some(0), "{}", out.both());
    assert!(out.stdout.ends_with(" passed, 0 failed\n"), "{}", out.both());
}

#[test]
fn accept_needs_a_snapshot_folder() {
    let out = rehearsal(&["run", "scenarios", "--accept"]);
    assert_eq!(out.code, Some(2), "{}", out.both());
    assert!(out.stderr.contains("--snapshots"), "{}", out.both());
}

/// Checks `xml` against the JUnit schema of Jenkins' xunit plugin
/// (`tests/fixtures/junit/junit-10.xsd`), read by `junit_schema`: nothing outside cargo.
fn junit_valid(xml: &str) -> Result<(), String> {
    crate::cli::junit_schema::Schema::junit().check(xml)
}

#[test]
fn the_junit_report_is_valid_junit_xml() {
    // Passing, failing and unusable files together.
    let args = [
        "run",
        "tests/fixtures/mixed",
        "tests/fixtures/failing",
        "scenarios/roku/agent-budget-from-30.json",
        "--format",
        "junit",
    ];
    let out = rehearsal(&args);
    assert_eq!(out.code, Some(2), "bad input wins the exit code: {}", out.both());
    assert!(out.stdout.starts_with("<?xml"), "{}", out.both());
    if let Err(said) = junit_valid(&out.stdout) {
        panic!("the JUnit schema refuses the report: {said}\n{}", out.stdout);
    }
    let doc = roxmltree::Document::parse(&out.stdout).unwrap();
    let cases: Vec<_> = doc.descendants().filter(|n| n.has_tag_name("testcase")).collect();
    let names: Vec<_> = cases.iter().map(|c| c.attribute("classname")).collect();
    let failures = doc.descendants().filter(|n| n.has_tag_name("failure")).count();
    let errors = doc.descendants().filter(|n| n.has_tag_name("error")).count();
    let files = ["tests/fixtures/mixed", "tests/fixtures/failing"]
        .iter()
        .map(|d| std::fs::read_dir(manifest_path(d)).unwrap().count())
        .sum::<usize>();
    assert_eq!(cases.len(), files + 1, "one test case per file: {names:?}");
    assert!(failures >= 1 && errors >= 1, "a failing scenario and a bad file: {}", out.stdout);
    assert!(cases.iter().any(|c| c.attribute("name") == Some("agent-budget-from-30")));
    // Each case's class is its path without the extension, which Jenkins would split at
    // the dot; its time is the wall time the scenario took (what a CI dashboard sums; issue
    // 42), and its virtual time a property of the suite.
    let budget = cases.iter().find(|c| c.attribute("name") == Some("agent-budget-from-30")).unwrap();
    assert_eq!(budget.attribute("classname"), Some("scenarios.roku.agent-budget-from-30"));
    assert!(cases.iter().all(|c| c.attribute("classname").is_some_and(|n| !n.contains(".json"))), "{names:?}");
    let wrong = cases.iter().find(|c| c.attribute("name") == Some("fixture-wrong-message")).unwrap();
    let property = |name: &str| {
        doc.descendants()
            .find(|n| n.has_tag_name("property") && n.attribute("name") == Some(name))
            .and_then(|n| n.attribute("value"))
    };
    assert_eq!(property("rehearsal.time"), Some("wall"));
    assert_eq!(
        property("virtual_seconds.tests.fixtures.failing.wrong-message.fixture-wrong-message"),
        Some("0.100"),
        "the fixture's reply comes at 100 ms of virtual time"
    );
    assert!(cases.iter().all(|c| c.attribute("time").is_some()), "every case has a time");
    // With --junit-time virtual the case's time is the virtual one: the same in every run.
    let out = rehearsal(&[args.as_slice(), &["--junit-time", "virtual"]].concat());
    assert!(
        out.stdout.contains(
            r#"<testcase name="fixture-wrong-message" classname="tests.fixtures.failing.wrong-message" time="0.100">"#
        ),
        "{}",
        out.stdout
    );
    let failure = wrong.children().find(|n| n.has_tag_name("failure")).expect("it fails");
    assert_eq!(failure.attribute("type"), Some("rehearsal.expectation"));
    assert_eq!(
        failure.attribute("message"),
        Some("turns[0].expect.message: expected \"The answer is 41.\", got \"The answer is 42.\"")
    );
    let again = rehearsal(&[args.as_slice(), &["--junit-time", "virtual"]].concat());
    assert_eq!(again.stdout, out.stdout, "with --junit-time virtual the report is byte-identical across runs");
    // The check can say no (junit_schema's own tests break each rule): a test case without
    // a name is refused.
    let refused = junit_valid(
        "<testsuites><testsuite name=\"s\" tests=\"1\" failures=\"0\" errors=\"0\"><testcase classname=\"c\"/></testsuite></testsuites>",
    );
    assert!(refused.is_err(), "the schema check is live");
}

#[test]
fn a_coverage_requirement_is_a_test_case_of_the_junit_report() {
    let out = rehearsal(&["run", "tests/fixtures/passing", "--coverage-min", "100", "--format", "junit"]);
    assert_eq!(out.code, Some(1), "one passing scenario cannot cover every clause: {}", out.both());
    if let Err(said) = junit_valid(&out.stdout) {
        panic!("the JUnit schema refuses the report: {said}\n{}", out.stdout);
    }
    let doc = roxmltree::Document::parse(&out.stdout).unwrap();
    let case = doc.descendants().find(|n| n.attribute("name") == Some("rule coverage")).expect("a coverage case");
    assert_eq!(case.attribute("classname"), Some("rehearsal.coverage"));
    let failure = case.children().find(|n| n.has_tag_name("failure")).expect("it fails");
    assert_eq!(failure.attribute("type"), Some("rehearsal.coverage"));
    assert_eq!(case.attribute("time"), Some("0.000"), "a requirement takes no virtual time");
    assert!(failure.attribute("message").is_some_and(|m| m.contains("--coverage-min 100 needs 100%")), "{failure:?}");
    let suite = doc.descendants().find(|n| n.has_tag_name("testsuite")).unwrap();
    assert_eq!((suite.attribute("tests"), suite.attribute("failures")), (Some("2"), Some("1")));
}

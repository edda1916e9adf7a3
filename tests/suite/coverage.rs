//! Rule coverage (issue 13): `rehearsal run --coverage` lists every clause of `docs/rules/`
//! with the passing scenarios that exercised it, measured from each run's evidence; the gate
//! (`--coverage-min`, `--require-coverage`) fails a suite that leaves a clause unhit; the
//! detectors fire on what a run shows and not on its neighbour's; the fuzzer reports the
//! clauses its campaign reached.

use std::path::Path;

use serde_json::Value;

use rehearsal::internals::coverage::{self, Measure};
use rehearsal::runner;

use crate::support::{manifest_path, rehearsal};

fn json_lines(stdout: &str) -> Vec<Value> {
    stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))).collect()
}

#[test]
fn run_scenarios_with_coverage_lists_every_clause_with_its_count() {
    let out = rehearsal(&["run", "scenarios", "--coverage-all"]);
    assert_eq!(out.code, Some(0), "{}", out.both());
    let table: Vec<&str> = out.stdout.lines().skip_while(|l| !l.starts_with("rule coverage: ")).collect();
    assert!(table[0].contains(" measurable clauses exercised by "), "{}", table[0]);
    for clause in coverage::clauses() {
        let line = table
            .iter()
            .find(|l| l.split_whitespace().next() == Some(clause.id))
            .unwrap_or_else(|| panic!("no line for {}:\n{}", clause.id, out.stdout));
        let count = line.split_whitespace().nth(1).unwrap();
        match coverage::measure(clause.id) {
            Some(Measure::Detected) => {
                let n: u64 = count.parse().unwrap_or_else(|_| panic!("{line}"));
                assert!(n >= 1, "scenarios/ leaves {} unhit: {line}", clause.id);
                assert!(line.contains(" scenarios/"), "an example file: {line}");
            }
            _ => assert!(count == "-" && line.contains("not measurable: "), "{line}"),
        }
    }
}

#[test]
fn the_suite_meets_full_coverage_and_a_coverage_file_of_areas() {
    let out = rehearsal(&["run", "scenarios", "--coverage-min", "100", "--quiet"]);
    assert_eq!(out.code, Some(0), "{}", out.both());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("required.txt");
    std::fs::write(
        &file,
        "# Bub's queue, and one Roku rule\nbub.cap.*\nroku.grant.min-remaining-cap  # the remainder\n",
    )
    .unwrap();
    let out =
        rehearsal(&["run", "scenarios/bub", "scenarios/roku", "--require-coverage", file.to_str().unwrap(), "-q"]);
    assert_eq!(out.code, Some(0), "{}", out.both());
}

/// The clause with the fewest passing scenarios, one of them, and that scenario's file.
fn a_clause_only_one_scenario_exercises() -> (String, String) {
    let out = rehearsal(&["run", "scenarios", "--coverage", "--format", "json"]);
    let records = json_lines(&out.stdout);
    let only = records
        .iter()
        .find(|r| r["type"] == "clause" && r["scenarios"] == 1)
        .unwrap_or_else(|| panic!("every clause has two scenarios or more:\n{}", out.stdout));
    (only["id"].as_str().unwrap().to_string(), only["example"].as_str().unwrap().to_string())
}

fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[test]
fn removing_the_only_scenario_of_a_clause_fails_the_coverage_gate() {
    let (clause, only) = a_clause_only_one_scenario_exercises();
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("scenarios");
    copy_tree(&manifest_path("scenarios"), &copy);
    std::fs::remove_file(dir.path().join(&only)).unwrap();
    let copy = copy.to_str().unwrap();

    let out = rehearsal(&["run", copy, "--coverage-min", "100", "-q"]);
    assert_eq!(out.code, Some(1), "an unhit clause fails the run\n{}", out.both());
    assert!(out.stderr.contains("error: rule coverage: "), "{}", out.both());
    let unhit = out.stderr.lines().find_map(|l| l.split_once(" unhit: ")).map(|(_, ids)| ids).unwrap_or_default();
    assert!(unhit.split(", ").any(|id| id == clause), "names the clause {clause}\n{}", out.both());
    assert!(out.stdout.contains(&format!("  {clause} ")) && out.stdout.contains("UNHIT"), "{}", out.both());
    assert!(out.stdout.ends_with(", rule coverage not met\n"), "{}", out.both());

    // The same through a list of required clauses, and in JSON.
    let required = dir.path().join("required.txt");
    std::fs::write(&required, format!("{clause}\n")).unwrap();
    let out = rehearsal(&["run", copy, "--require-coverage", required.to_str().unwrap(), "--format", "json"]);
    assert_eq!(out.code, Some(1), "{}", out.both());
    let summary = json_lines(&out.stdout).pop().unwrap();
    assert_eq!(summary["exit_code"], 1, "{summary}");
    assert_eq!(summary["coverage"]["met"], false, "{summary}");
    assert!(summary["coverage"]["unhit"].as_array().unwrap().iter().any(|id| *id == *clause), "{summary}");

    // Without a requirement, --coverage only reports.
    let out = rehearsal(&["run", copy, "--coverage", "-q"]);
    assert_eq!(out.code, Some(0), "{}", out.both());
}

#[test]
fn a_coverage_requirement_names_only_measurable_clauses_of_the_docs() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("required.txt");
    for (text, error) in [
        (
            "bub.cap.fifo-queue\nbub.cap.fifo-queu\n",
            ":2: `bub.cap.fifo-queu` names no measurable clause of docs/rules/",
        ),
        ("core.never.wall-clock\n", ":1: `core.never.wall-clock` cannot be required: no run can show it"),
        ("nothing.*\n", ":1: `nothing.*` names no measurable clause"),
        ("# bub.cap.fifo-queue\n\n", "required.txt: lists no clause"),
        ("", "required.txt: lists no clause"),
    ] {
        std::fs::write(&file, text).unwrap();
        let out = rehearsal(&["run", "tests/fixtures/passing", "--require-coverage", file.to_str().unwrap()]);
        assert_eq!(out.code, Some(2), "{text}\n{}", out.both());
        assert!(out.stderr.contains(error), "{error:?}\n{}", out.both());
        assert!(out.stdout.is_empty(), "nothing runs on a bad requirement\n{}", out.both());
    }
}

#[test]
fn json_coverage_is_a_record_per_clause_and_a_part_of_the_summary() {
    let out = rehearsal(&["run", "scenarios/roku/agent-budget-from-5.json", "--coverage-all", "--format", "json"]);
    assert_eq!(out.code, Some(0), "{}", out.both());
    let records = json_lines(&out.stdout);
    let clauses: Vec<&Value> = records.iter().filter(|r| r["type"] == "clause").collect();
    assert_eq!(clauses.len(), coverage::clauses().len());
    let grant = clauses.iter().find(|r| r["id"] == "roku.grant.min-remaining-cap").unwrap();
    assert_eq!(grant["scenarios"], 1, "{grant}");
    assert_eq!(grant["example"], "scenarios/roku/agent-budget-from-5.json");
    assert_eq!(grant["page"], "docs/rules/roku.md");
    let never = clauses.iter().find(|r| r["id"] == "core.never.wall-clock").unwrap();
    assert_eq!(never["measured"], false, "{never}");
    let summary = records.last().unwrap();
    assert_eq!(summary["coverage"]["met"], true, "no requirement, nothing unmet: {summary}");
    assert!(summary["coverage"]["exercised"].as_u64().unwrap() < summary["coverage"]["measurable"].as_u64().unwrap());
}

/// (scenario file, clause, whether its run exercises the clause): each detector against a
/// run that shows the behaviour and a neighbouring run that does not.
const SHOWN: &[(&str, &str, bool)] = &[
    ("roku/agent-budget-from-5.json", "roku.grant.min-remaining-cap", true),
    ("roku/agent-budget-from-30.json", "roku.grant.min-remaining-cap", false),
    ("roku/agent-budget-from-30.json", "core.knob.child-step-cap", true),
    ("bub/cap-4-six-children-queue-fifo.json", "bub.cap.fifo-queue", true),
    ("bub/three-children-notified-in-completion-order.json", "bub.cap.fifo-queue", false),
    ("bub/cap-4-six-children-queue-fifo.json", "bub.delivery.completion-order", true),
    ("bub/three-children-notified-in-completion-order.json", "bub.delivery.completion-order", false),
    ("roku/agent-child-answering-at-exactly-120s-is-not-timed-out.json", "core.time.finish-at-limit-wins", true),
    ("roku/agent-timeout-119s-child-finishes.json", "core.time.finish-at-limit-wins", false),
    ("roku/agent-timeout-121s-child.json", "core.time.finish-at-limit-wins", false),
    ("roku/agent-timeout-stops-grandchild.json", "oracle.timeouts.children-stop", true),
    ("roku/agent-timeout-121s-child.json", "oracle.timeouts.children-stop", false),
    ("roku/agent-result-4000-chars-unchanged.json", "roku.truncation.exact-limit-unchanged", true),
    ("roku/agent-result-3999-chars-unchanged.json", "roku.truncation.exact-limit-unchanged", false),
    ("roku/agent-result-4001-chars-truncated.json", "roku.truncation.limit-4000", true),
    ("roku/agent-result-4000-chars-unchanged.json", "roku.truncation.limit-4000", false),
    ("bub/final-answer-call-held-while-child-runs.json", "bub.turn.held-final-answer", true),
    ("bub/three-children-notified-in-completion-order.json", "bub.turn.held-final-answer", false),
    ("bub/result-arriving-at-zero-budget-waits-for-next-turn.json", "bub.turn.budget-checked-before-intake", true),
    ("bub/step-limit-with-child-running-result-arrives-next-turn.json", "bub.turn.budget-checked-before-intake", false),
    ("bub/fork-snapshot-isolation.json", "bub.session.fork-snapshot", true),
    ("bub/fork-child-queued-behind-cap-starts-from-its-call.json", "bub.session.fork-snapshot-when-queued", true),
    ("bub/fork-snapshot-isolation.json", "bub.session.fork-snapshot-when-queued", false),
    ("bub/cap-4-six-children-queue-fifo.json", "bub.session.fork-snapshot-when-queued", false),
    ("bub/temp-session-starts-empty-and-is-discarded.json", "bub.session.fork-snapshot", false),
    ("bub/child-aliases-count-on-across-turns.json", "bub.child.aliases-unique", true),
    ("bub/turn-fails-child-result-arrives-next-turn.json", "bub.child.aliases-unique", false),
    ("roku/agent-refusal-and-timeout-errors-never-truncated.json", "roku.result.errors-verbatim", true),
    ("roku/agent-empty-task.json", "roku.result.errors-verbatim", false),
    ("bub/timeout-zero-in-call-lifts-profile-limit.json", "bub.timeout.zero-is-none", true),
    ("bub/timeout-none-long-child-completes.json", "bub.timeout.zero-is-none", false),
    ("bub/timeout-none-long-child-completes.json", "bub.timeout.none-by-default", true),
    ("roku/spawn-cost-paid-before-grant-child-keeps-system-prompt.json", "roku.child.system-prompt", true),
    ("roku/agent-budget-from-30.json", "roku.child.system-prompt", false),
    ("bub/send-continues-named-task-same-alias-and-launch.json", "bub.send.continue-keeps-launch", true),
    // Continued, but launched with nothing of its own to keep.
    ("bub/send-message-costs-one-continuation-pays-spawn-cost.json", "bub.send.continue-keeps-launch", false),
    ("bub/allowed-tools-replace-profile-tools-in-catalog-order.json", "core.context.system-prompt", true),
    ("bub/three-children-notified-in-completion-order.json", "core.context.system-prompt", false),
    // One instant: a reply and a result due together, against one result waking a held root
    // (or ending a wait) and what the root does next in that instant.
    ("bub/cancel-and-result-at-one-instant-cancel-finds-it-finished.json", "core.instant.settle-before-acting", true),
    ("bub/profile-inline-over-files.json", "core.instant.settle-before-acting", true),
    ("bub/three-children-notified-in-completion-order.json", "core.instant.settle-before-acting", false),
    ("bub/wait-with-and-without-ids.json", "core.instant.settle-before-acting", false),
    ("bub/result-and-steering-at-one-instant-read-together.json", "core.instant.ties-together", true),
    ("bub/three-children-tie-read-by-wait-in-spawn-order.json", "core.instant.ties-together", true),
    // Ended in one instant, but read together only at a later request.
    ("bub/results-ready-at-once-delivered-in-completion-order.json", "core.instant.ties-together", false),
    ("bub/slot-refilled-child-yielding-many-times-settles-first.json", "core.instant.how", true),
    ("bub/steering-parent-during-child-run-reaches-parent-only.json", "core.instant.how", false),
    ("bub/result-and-steering-at-one-instant-read-together.json", "oracle.delivery.instant-settled", true),
    ("bub/results-ready-at-once-delivered-in-completion-order.json", "oracle.delivery.instant-settled", false),
    // One per oracle family of oracles 10 to 16.
    ("bub/budget-checked-before-intake-result-waits-for-next-turn.json", "oracle.costs.nudge", true),
    ("roku/agent-budget-from-30.json", "oracle.costs.nudge", false),
    ("bub/cancel-running-task-frees-slot-no-notification.json", "oracle.texts.bodies", true),
    ("bub/three-children-notified-in-completion-order.json", "oracle.texts.bodies", false),
    ("bub/final-answer-call-held-while-child-runs.json", "oracle.precedence.held-turn", true),
    ("roku/agent-budget-from-30.json", "oracle.precedence.held-turn", false),
    ("bub/three-children-tie-read-by-wait-in-spawn-order.json", "oracle.wait.result-order", true),
    ("bub/wait-deadline-and-result-at-one-instant-returns-the-result.json", "oracle.wait.result-order", false),
    ("roku/agent-budget-from-30.json", "oracle.context.foreground", true),
    ("bub/three-children-notified-in-completion-order.json", "oracle.context.foreground", false),
    ("bub/send-message-costs-one-continuation-pays-spawn-cost.json", "oracle.routing.send-reported", true),
    ("bub/send-continues-named-task-same-alias-and-launch.json", "oracle.routing.send-reported", false),
    ("bub/named-session-kept-continued-and-shared.json", "oracle.sessions.in-use-refused", true),
    ("bub/named-session-records-failed-run-not-timed-out-one.json", "oracle.sessions.in-use-refused", false),
];

#[test]
fn detectors_fire_on_what_a_run_shows_and_not_on_its_neighbour() {
    let mut wrong = Vec::new();
    for (file, clause, want) in SHOWN {
        let path = manifest_path("scenarios").join(file);
        let (_, verdict) = runner::Runner::new().check_file(&path).unwrap_or_else(|e| panic!("{e}"));
        verdict.assert_passed();
        let reached = coverage::reached(&verdict.run().unwrap().evidence());
        let got = reached.ids().any(|id| id == *clause);
        if got != *want {
            wrong.push(format!("{file}: {clause} {}", if *want { "not detected" } else { "detected" }));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn every_scenario_description_names_only_clauses_of_the_docs() {
    let mut unknown = Vec::new();
    for entry in walk(&manifest_path("scenarios")) {
        let scenario = rehearsal::load::file(&entry, &rehearsal::core::Builtin).unwrap().into_parts().0;
        let head = scenario.description.split(": ").next().unwrap_or_default();
        for id in head.split(", ").filter(|id| id.split('.').count() >= 3 && !id.contains(' ')) {
            if !coverage::clauses().iter().any(|c| c.id == id) {
                unknown.push(format!("{}: {id}", entry.display()));
            }
        }
    }
    assert!(unknown.is_empty(), "descriptions naming ids docs/rules/ does not have: {unknown:#?}");
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else if path.extension().is_some_and(|e| e == "json") {
            out.push(path);
        }
    }
    out
}

#[test]
fn the_fuzzer_reports_the_clauses_its_campaign_reached_whatever_its_threads() {
    use rehearsal::internals::fuzz::{Options, Shard, run_campaign};
    let options = |jobs| Options {
        cases: 60,
        seed: 7,
        explore: 0,
        family: rehearsal::internals::generate::Family::Any,
        shrink_steps: 64,
        jobs,
        judge: Default::default(),
    };
    let one = run_campaign(&options(1), Shard::WHOLE, || None, |_| {});
    let three = run_campaign(&options(3), Shard::WHOLE, || None, |_| {});
    assert_eq!(one.reached, three.reached);
    let reached = one.reached.iter().filter(|r| r.is_some()).count();
    assert!(reached > 50, "60 cases reach many clauses: {reached}");

    let out = rehearsal(&["fuzz", "--cases", "40", "--seed", "7", "--out", "target/fuzz-coverage-test"]);
    assert_eq!(out.code, Some(0), "{}", out.both());
    assert!(out.stdout.contains("\n  rule clauses reached: "), "{}", out.both());
    assert!(out.stdout.contains("\n  never reached ("), "{}", out.both());
}

#[test]
fn shards_reach_together_the_clauses_of_the_unsharded_campaign_first_at_the_same_cases() {
    use rehearsal::internals::fuzz::{Options, Shard, run_campaign};
    let options = Options {
        cases: 90,
        seed: 3,
        explore: 0,
        family: rehearsal::internals::generate::Family::Any,
        shrink_steps: 64,
        jobs: 2,
        judge: Default::default(),
    };
    let whole = run_campaign(&options, Shard::WHOLE, || None, |_| {});
    assert!(whole.reached.iter().flatten().any(|case| *case > 0), "later cases reach clauses too");
    let mut merged = vec![None; whole.reached.len()];
    for index in 1..=3 {
        let shard = Shard::new(index, 3).unwrap();
        let report = run_campaign(&options, shard, || None, |_| {});
        for (all, mine) in merged.iter_mut().zip(&report.reached) {
            if let Some(case) = mine {
                assert!(shard.contains(*case), "{shard} reports case {case}, which it does not run");
            }
            *all = match (*all, *mine) {
                (Some(a), Some(b)) => Some(std::cmp::min(a, b)),
                (a, b) => a.or(b),
            };
        }
    }
    assert_eq!(merged, whole.reached, "each clause first reached at the same case, sharded or not");
}

/// `--coverage` on one file printed all 311 clauses, 232 of them `UNHIT` (issue 26): it now
/// lists what the file reached and counts the rest; `--coverage-all` lists every clause.
#[test]
fn coverage_of_a_few_files_lists_what_they_reached_unless_every_clause_is_asked_for() {
    let file = "scenarios/roku/agent-budget-from-30.json";
    let out = rehearsal(&["run", file, "--coverage"]);
    assert_eq!(out.code, Some(0), "{}", out.both());
    assert!(!out.stdout.contains("UNHIT") && !out.stdout.contains("not measurable:"), "{}", out.both());
    assert!(out.stdout.contains(&format!("  {file}\n")), "each listed clause names the file: {}", out.both());
    assert!(out.stdout.contains("not listed; --coverage-all lists them)"), "{}", out.both());
    let json = json_lines(&rehearsal(&["run", file, "--coverage", "--format", "json"]).stdout);
    let clauses: Vec<_> = json.iter().filter(|r| r["type"] == "clause").collect();
    assert!(!clauses.is_empty() && clauses.iter().all(|r| r["scenarios"] == 1), "only reached clauses: {clauses:?}");
    let all = rehearsal(&["run", file, "--coverage-all"]);
    assert_eq!(all.code, Some(0), "{}", all.both());
    assert!(all.stdout.contains("UNHIT"), "{}", all.both());
    let listed = |text: &str| text.lines().filter(|l| l.starts_with("  ") && !l.starts_with("  (")).count();
    assert!(listed(&all.stdout) > listed(&out.stdout), "{}", all.both());
}

//! The whole command line on a user's own core (issue 26): `cli::main_with(&core)` is the
//! `rehearsal` command line driving that core, as `examples/tiny_roku/cli.rs` builds it for
//! TinyRoku. These tests go through [`cli::execute`], the part of `main_with` after parsing,
//! with TinyRoku (foreground `Agent` and the risk gate; no background `subagent`, no
//! steering): `run` with JUnit, golden traces and coverage; `fuzz` drawing only what the core
//! can run and counting what it skipped.

use clap::Parser;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use rehearsal::cli::{self, Cli, Exit, Terminal};
use rehearsal::internals::fuzz;
use rehearsal::internals::generate::{self, Family};
use rehearsal::sut::{Capabilities, SystemUnderTest};

use crate::cli::junit_schema::Schema;
use crate::support::manifest_path;

// TinyRoku is compiled once for the suite, in `own_runtime`.
use crate::runner::own_runtime::tiny_roku::TinyRoku;

/// Runs a command line on `core`; the exit and what it wrote to stdout and stderr.
fn on(core: &dyn SystemUnderTest, args: &[&str]) -> (Exit, String, String) {
    let cli = Cli::try_parse_from(std::iter::once("tiny_roku_cli").chain(args.iter().copied())).unwrap();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let exit = cli::execute(cli, core, &mut out, &mut err, Terminal::default());
    (exit, String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap())
}

fn roku_files() -> usize {
    let found = cli::collect(&[manifest_path("scenarios/roku")]);
    assert!(found.problems.is_empty(), "{:?}", found.problems);
    found.files.len()
}

#[test]
fn run_on_your_own_core_writes_valid_junit_with_a_case_per_scenario() {
    let roku = manifest_path("scenarios/roku");
    let (exit, xml, err) = on(&TinyRoku::new(), &["run", roku.to_str().unwrap(), "--format", "junit"]);
    assert_eq!(exit, Exit::Passed, "{err}\n{xml}");
    Schema::junit().check(&xml).unwrap_or_else(|e| panic!("not valid JUnit: {e}\n{xml}"));
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let cases = doc.descendants().filter(|n| n.has_tag_name("testcase")).count();
    assert_eq!(cases, roku_files(), "one test case per Roku scenario");
    assert!(cases >= 50, "the Roku folder holds its scenarios ({cases})");
    assert!(!xml.contains("<failure") && !xml.contains("<error"), "{xml}");
}

#[test]
fn run_refuses_a_file_your_core_cannot_run_naming_what_it_lacks() {
    let bub = manifest_path("scenarios/bub/wait-with-and-without-ids.json");
    let (exit, out, err) = on(&TinyRoku::new(), &["run", bub.to_str().unwrap()]);
    assert_eq!(exit, Exit::BadInput, "{out}{err}");
    assert!(
        format!("{out}{err}").contains("the core `tiny-roku` does not implement background `subagent`"),
        "{out}{err}"
    );
}

#[test]
fn golden_traces_coverage_json_and_timeline_work_on_your_own_core() {
    let dir = tempfile::tempdir().unwrap();
    let snaps = dir.path().join("snaps");
    let file = manifest_path("scenarios/roku/agent-budget-from-1.json");
    let (file, snaps) = (file.to_str().unwrap(), snaps.to_str().unwrap());
    let (exit, out, err) = on(&TinyRoku::new(), &["run", file, "--snapshots", snaps, "--accept"]);
    assert_eq!(exit, Exit::Passed, "{out}{err}");
    let (exit, out, err) = on(&TinyRoku::new(), &["run", file, "--snapshots", snaps, "--coverage"]);
    assert_eq!(exit, Exit::Passed, "the accepted golden trace matches TinyRoku's run: {out}{err}");
    assert!(out.contains("roku.grant"), "coverage lists the clauses reached: {out}");
    let svg = dir.path().join("run.svg");
    let args = ["run", file, "--format", "json", "--explore", "2", "--timeline", svg.to_str().unwrap()];
    let (exit, out, err) = on(&TinyRoku::new(), &args);
    assert_eq!(exit, Exit::Passed, "{out}{err}");
    for line in out.lines() {
        serde_json::from_str::<serde_json::Value>(line).unwrap_or_else(|e| panic!("{e}: {line}"));
    }
    roxmltree::Document::parse(&std::fs::read_to_string(&svg).unwrap()).expect("the timeline is well-formed SVG");
}

#[test]
fn fuzz_on_your_own_core_draws_only_what_it_implements_and_says_so_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let (exit, out, err) =
        on(&TinyRoku::new(), &["fuzz", "--cases", "500", "--out", dir.path().to_str().unwrap(), "-j", "2"]);
    assert_eq!(exit, Exit::Passed, "{out}{err}");
    let first = out.lines().next().unwrap();
    assert!(first.starts_with("500 cases in "), "{out}");
    assert!(first.contains(", 0 finding(s), 0 invalid case(s);"), "{out}");
    let said: Vec<&str> = out.lines().filter(|l| l.contains("lacks")).collect();
    assert_eq!(
        said,
        ["  core `tiny-roku` lacks background `subagent`, steering: cases are drawn without it; 0 case(s) skipped"],
        "{out}"
    );
}

#[test]
fn fuzz_refuses_a_family_your_core_lacks() {
    let (exit, out, err) = on(&TinyRoku::new(), &["fuzz", "--cases", "5", "--family", "bub"]);
    assert_eq!(exit, Exit::BadInput, "{out}{err}");
    assert!(
        err.contains("--family bub: the core does not implement background `subagent` (core `tiny-roku`)"),
        "{err}"
    );
}

#[test]
fn cases_a_core_cannot_run_are_skipped_and_counted_not_run() {
    // The library lets a campaign draw a family the core lacks (the command line refuses it):
    // every case is then skipped, and counted with what it needed.
    let options = fuzz::Options {
        cases: 20,
        seed: 3,
        explore: 0,
        family: Family::Bub,
        shrink_steps: 0,
        jobs: 1,
        judge: Default::default(),
    };
    let report = fuzz::run_campaign_on(&TinyRoku::new(), &options, fuzz::Shard::WHOLE, || None, |_| {});
    assert_eq!((report.cases, report.skipped, report.invalid), (20, 20, 0));
    assert!(report.finding.is_none());
    assert!(report.skipped_for.contains("background `subagent`"), "{:?}", report.skipped_for);
    let on_builtin = fuzz::run_campaign(&options, fuzz::Shard::WHOLE, || None, |_| {});
    assert_eq!(on_builtin.skipped, 0, "the built-in core has every feature");
}

#[test]
fn a_core_with_every_feature_gets_the_very_scenarios_of_the_plain_generator() {
    // So the built-in core's campaigns (seeds, case numbers, findings) are unchanged.
    for family in [Family::Roku, Family::Bub, Family::Any] {
        let rng = || TestRunner::new_with_rng(Config::default(), TestRng::from_seed(RngAlgorithm::ChaCha, &[9; 32]));
        let (mut a, mut b) = (rng(), rng());
        let (plain, within) = (generate::scenario(family), generate::scenario_for(family, Capabilities::ALL));
        for _ in 0..200 {
            let x = serde_json::to_string(&plain.new_tree(&mut a).unwrap().current()).unwrap();
            let y = serde_json::to_string(&within.new_tree(&mut b).unwrap().current()).unwrap();
            assert_eq!(x, y);
        }
    }
}

#[test]
fn a_roku_only_core_gets_no_case_it_cannot_run() {
    let core = TinyRoku::new();
    let strategy = generate::scenario_for(Family::Roku, core.capabilities());
    let mut rng = TestRunner::new_with_rng(Config::default(), TestRng::from_seed(RngAlgorithm::ChaCha, &[5; 32]));
    for case in 0..500 {
        let scenario = strategy.new_tree(&mut rng).unwrap().current();
        let missing = rehearsal::load::unsupported(&core, &scenario);
        assert!(missing.is_empty(), "case {case} needs {missing:?}");
    }
}

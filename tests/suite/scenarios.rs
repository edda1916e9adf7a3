//! Every scenario file under `scenarios/` runs through the core: its expectations must hold,
//! two runs must give byte-identical traces, and its trace must match the reviewed snapshot
//! in `snapshots/` (named after the file).

use std::fmt::Write as _;

use rehearsal::runner;

fn render(scenario: &rehearsal::scenario::Scenario, verdict: &runner::Verdict) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "scenario: {}", scenario.name);
    for (i, outcome) in verdict.run.outcomes.iter().enumerate() {
        let _ = writeln!(
            out,
            "turn {}: {:?} {:?} budget_left={} steps={} message={:?}",
            i + 1,
            outcome.kind,
            outcome.status,
            outcome.budget_left,
            outcome.steps,
            outcome.message
        );
    }
    let _ = writeln!(out, "elapsed: {} ms virtual", verdict.run.elapsed.as_millis());
    let _ = writeln!(out, "---");
    out.push_str(&verdict.run.trace.text());
    out
}

#[test]
fn every_scenario_passes_and_matches_its_snapshot() {
    insta::glob!("../../scenarios", "**/*.json", |path| {
        let (scenario, verdict) = runner::verify_file(path).unwrap_or_else(|e| panic!("{e}"));
        let failures: Vec<String> = verdict
            .failures
            .iter()
            .map(|f| format!("{}\n{}", f.what, f.lines.iter().map(|l| format!("    | {l}\n")).collect::<String>()))
            .collect();
        assert!(failures.is_empty(), "{}: {} failed:\n{}", path.display(), scenario.name, failures.join("\n"));
        // Named after the file (`roku/x.json` -> `roku__x.snap`), whatever else the glob matched.
        let relative = path.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap_or(path);
        let name = relative.with_extension("").to_string_lossy().replace('\\', "/");
        let name = name.trim_start_matches("scenarios/").replace('/', "__");
        insta::with_settings!({
            snapshot_path => "../../snapshots",
            snapshot_suffix => "",
            prepend_module_to_snapshot => false,
            description => scenario.description.clone(),
            omit_expression => true,
        }, {
            insta::assert_snapshot!(name, render(&scenario, &verdict));
        });
    });
}

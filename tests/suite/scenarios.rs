//! Every scenario file under `scenarios/` runs through the core: its expectations must hold,
//! two runs must give byte-identical traces, and its trace must match the reviewed snapshot
//! in `snapshots/` (named after the file). The body is `rehearsal::internals::golden::render`, so
//! `rehearsal run scenarios --snapshots snapshots` compares against the very same files.

use rehearsal::runner;

#[test]
fn every_scenario_passes_and_matches_its_snapshot() {
    insta::glob!("../../scenarios", "**/*.json", |path| {
        let (scenario, verdict) = runner::Runner::new().check_file(path).unwrap_or_else(|e| panic!("{e}"));
        let failures: Vec<String> = verdict
            .failures()
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
            insta::assert_snapshot!(name, rehearsal::internals::golden::render(&scenario, verdict.run().unwrap()));
        });
    });
}

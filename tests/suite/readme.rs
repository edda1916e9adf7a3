//! The figures of the README and docs/scenarios.md are what the commands beside them print: a
//! count of scenarios or clauses that drifts fails here (issue 26 found 106 / 109 / 249
//! against 135 / 139 / 300). Benchmark figures are the benchmark's to write, not checked here.

use crate::support::{manifest_path, rehearsal};

/// The lines a page shows after `$ COMMAND`, up to the next command or the end of the block.
fn shown_after<'a>(page: &'a str, command: &str) -> Vec<&'a str> {
    let mut lines = page.lines().skip_while(|l| *l != format!("$ {command}"));
    assert!(lines.next().is_some(), "the page shows `$ {command}`");
    lines.take_while(|l| !l.starts_with("$ ") && !l.starts_with("```")).collect()
}

/// Runs `rehearsal ARGS` as the page writes it (quotes around one argument allowed), and
/// gives what a terminal shows: stderr's lines, then stdout's.
fn printed(command: &str) -> Vec<String> {
    let args: Vec<String> = command
        .strip_prefix("rehearsal ")
        .expect("a rehearsal command")
        .split(' ')
        .map(|a| a.trim_matches('\'').to_string())
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = rehearsal(&args);
    out.stderr.lines().chain(out.stdout.lines()).map(str::to_string).collect()
}

fn page(name: &str) -> String {
    std::fs::read_to_string(manifest_path(name)).unwrap()
}

#[test]
fn the_readme_s_run_examples_print_what_it_shows() {
    let readme = page("README.md");
    for command in [
        "rehearsal run scenarios --filter 'cap-4-*' --filter timeout-zero",
        "rehearsal run scenarios tests/fixtures/bad/wrong-type.json --quiet",
    ] {
        assert_eq!(shown_after(&readme, command), printed(command), "README.md, `$ {command}`");
    }
}

#[test]
fn the_readme_s_coverage_figures_are_the_suite_s() {
    let readme = page("README.md");
    let out = rehearsal(&["run", "scenarios", "--coverage"]);
    let headline = out.stdout.lines().find(|l| l.starts_with("rule coverage: ")).expect("a coverage headline");
    assert!(readme.contains(&format!("\n{headline}\n")), "README.md should show the headline\n{headline}");
    // The example of a copy of scenarios/ without the only scenario of one clause: one clause
    // and one scenario fewer than the suite.
    let numbers: Vec<usize> = headline.split(' ').filter_map(|w| w.parse().ok()).collect::<Vec<_>>();
    let [exercised, measurable, scenarios, not_measurable] = numbers[..] else { panic!("{headline}") };
    assert_eq!(exercised, measurable, "{headline}");
    let copy = format!(
        "rule coverage: {} of {measurable} measurable clauses exercised by {} passing scenarios; {not_measurable} not measurable from a run",
        exercised - 1,
        scenarios - 1
    );
    assert!(readme.contains(&copy), "README.md should show\n{copy}");
    let gate = format!(
        "error: rule coverage: {} of {measurable} measurable clauses exercised (99%), --coverage-min 100 needs 100%",
        exercised - 1
    );
    assert!(readme.contains(&gate), "README.md should show\n{gate}");
    assert!(readme.contains(&format!("\n{} passed, 0 failed, rule coverage not met\n", scenarios - 1)));
}

#[test]
fn the_scenarios_page_s_json_summary_is_the_suite_s() {
    let docs = page("docs/scenarios.md");
    let out = rehearsal(&["run", "scenarios", "--coverage-min", "100", "--format", "json", "--quiet"]);
    let summary = out.stdout.lines().last().unwrap();
    assert!(docs.contains(&format!("\n{summary}\n")), "docs/scenarios.md should show the summary\n{summary}");
}

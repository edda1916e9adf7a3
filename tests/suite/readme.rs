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
        "rehearsal run scenarios/roku/agent-budget-from-5.json tests/fixtures/bad/wrong-type.json --format json",
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

/// The long flags of `rehearsal COMMAND --help`.
fn flags_of(command: &str) -> Vec<String> {
    let out = rehearsal(&[command, "--help"]);
    out.stdout
        .lines()
        .filter_map(|l| {
            l.trim_start().trim_start_matches(|c: char| c == '-' || c.is_ascii_alphabetic()).strip_prefix(", ")
        })
        .chain(out.stdout.lines().map(str::trim_start).filter(|l| l.starts_with("--")))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|f| f.starts_with("--") && *f != "--help")
        .map(str::to_string)
        .collect()
}

#[test]
fn the_readme_s_synopsis_names_every_flag_of_every_command() {
    // Issue 42: the synopsis left out serve, drive, record and half of run's flags.
    let readme = page("README.md");
    let synopsis = readme.split("## The command line").nth(1).unwrap().split("```").nth(1).unwrap();
    for command in ["run", "fuzz", "serve", "drive", "record", "new", "schema"] {
        let block: String = synopsis
            .split("\nrehearsal ")
            .find(|b| b.trim_start_matches("rehearsal ").starts_with(command))
            .unwrap_or_else(|| panic!("the synopsis has no `rehearsal {command}`"))
            .to_string();
        let flags = flags_of(command);
        assert!(command == "schema" || command == "new" || flags.len() > 5, "{command}: {flags:?}");
        for flag in flags {
            assert!(
                block.contains(&format!("{flag} ")) || block.contains(&format!("{flag}]")),
                "README.md's synopsis of `rehearsal {command}` lacks {flag}"
            );
        }
    }
}

#[test]
fn every_help_gives_the_exit_codes() {
    for args in [
        &["--help"][..],
        &["run", "--help"],
        &["fuzz", "--help"],
        &["serve", "--help"],
        &["drive", "--help"],
        &["record", "--help"],
        &["new", "--help"],
        &["schema", "--help"],
    ] {
        let out = rehearsal(args);
        assert!(out.stdout.contains("Exit codes"), "rehearsal {args:?} gives no exit codes:\n{}", out.stdout);
    }
}

#[test]
fn the_readme_s_ci_list_is_what_ci_runs() {
    // Issue 42: the README's list of CI steps had left out three that .ci/run runs.
    let readme = page("README.md");
    let ci = page(".ci/run");
    let list = readme.split("CI (`.ci/run`) runs, in this order:").nth(1).unwrap().split("\n\n").next().unwrap();
    let list = list.replace('\n', " ");
    let steps = [
        "cargo fmt --check",
        "cargo clippy",
        "cargo test",
        "tests/scratch-crate",
        "--coverage-min 100",
        "fuzz --cases",
        "scripts/check-patches",
        "scripts/broken-variants/run",
        "scripts/python-tests",
        "scripts/node-tests",
        "scripts/clients-table",
        "scripts/conformance bub",
        "--explore 16",
    ];
    let mut last_in_ci = 0;
    for step in steps {
        assert!(list.contains(step), "README.md's CI list lacks `{step}`: {list}");
        let at = ci.find(step).unwrap_or_else(|| panic!(".ci/run has no `{step}`"));
        assert!(at >= last_in_ci, "`{step}` is out of .ci/run's order");
        last_in_ci = at;
    }
    // Every script .ci/run calls is in the list.
    for line in ci.lines().filter(|l| l.starts_with("scripts/")) {
        let script = line.split_whitespace().next().unwrap();
        assert!(list.contains(script), "README.md's CI list lacks `{script}`, which .ci/run runs");
    }
}

#[test]
fn the_fuzzing_page_s_clause_counts_are_ci_s_campaign_s() {
    // Issue 42: docs/fuzzing.md said 309 of 311 while the campaign reached 311 of 313.
    let docs = page("docs/fuzzing.md");
    let dir = tempfile::tempdir().unwrap();
    let out =
        rehearsal(&["fuzz", "--cases", "3000", "--seed", "1", "--explore", "1", "--out", dir.path().to_str().unwrap()]);
    assert_eq!(out.code, Some(0), "{}", out.both());
    let reached: Vec<&str> = out
        .stdout
        .lines()
        .chain(out.stderr.lines())
        .filter(|l| l.starts_with("  rule clauses reached") || l.starts_with("  never reached"))
        .collect();
    assert_eq!(reached.len(), 2, "{}", out.both());
    for line in reached {
        assert!(docs.contains(&format!("\n{line}\n")), "docs/fuzzing.md should show\n{line}");
    }
}

#[test]
fn the_readme_s_timeline_example_prints_what_it_shows_and_draws_the_committed_picture() {
    let readme = page("README.md");
    let command = "rehearsal run scenarios/bub/cap-4-six-children-queue-fifo.json --timeline docs/timeline-cap-4.svg";
    // Run as written but drawn into a temporary file, so that the test never writes the docs.
    let dir = tempfile::tempdir().unwrap();
    let drawn = dir.path().join("timeline-cap-4.svg");
    let out =
        rehearsal(&["run", "scenarios/bub/cap-4-six-children-queue-fifo.json", "--timeline", drawn.to_str().unwrap()]);
    let printed: Vec<String> = out.stderr.lines().chain(out.stdout.lines()).map(str::to_string).collect();
    assert_eq!(shown_after(&readme, command), printed, "README.md, `$ {command}`");
    assert_eq!(
        std::fs::read_to_string(&drawn).unwrap(),
        page("docs/timeline-cap-4.svg"),
        "the README's picture is this run's"
    );
}

#[test]
fn the_scenarios_page_s_first_commands_work_as_written() {
    // docs/scenarios.md: `rehearsal new my-scenario`, then `rehearsal run my-scenario.json --trace` passes.
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_rehearsal")).args(args).current_dir(dir.path()).output().unwrap()
    };
    for preset in [None, Some("bub")] {
        let _ = std::fs::remove_file(dir.path().join("my-scenario.json"));
        let mut args = vec!["new", "my-scenario"];
        args.extend(preset.map(|p| ["--preset", p]).into_iter().flatten());
        assert!(run(&args).status.success());
        let ran = run(&["run", "my-scenario.json", "--trace"]);
        assert!(ran.status.success(), "{}", String::from_utf8_lossy(&ran.stdout));
        assert!(String::from_utf8_lossy(&ran.stdout).starts_with("PASS "));
    }
}

#[test]
fn docs_readme_indexes_every_page_of_docs() {
    // Issue 35's index of docs/: every page (and folder) is listed, so none is lost.
    let index = page("docs/README.md");
    for entry in std::fs::read_dir(manifest_path("docs")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name == "README.md" || name.ends_with(".svg") {
            continue;
        }
        assert!(index.contains(&format!("]({name}")), "docs/README.md does not list {name}");
    }
}

//! `rehearsal run`: find the scenario files, check each (on several threads), compare golden
//! traces, count rule coverage, and report.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::coverage::Gate;
use super::report::{CoverageEnd, Reporter, Style};
use super::style::{Paint, Terminal};
use super::{Exit, Format, Orders, RunArgs};
use crate::coverage::{self, Reached, Tally};
use crate::golden::{self, Compared, Store};
use crate::jobs;
use crate::runner::{self, Failure, FailureKind};
use crate::scenario::{Scenario, ScenarioError};
use crate::trace::printable;

/// What the paths of a command line hold: the scenario files to run, each with the path
/// argument it was found under, and the paths that cannot be run.
#[derive(Debug, Default)]
pub struct Found {
    /// Scenario files (regular `*.json` files, each once), folder by folder in path order.
    pub files: Vec<(PathBuf, PathBuf)>,
    /// Paths that could not be read, and files that are not regular files (a FIFO or a device
    /// is reported, never opened).
    pub problems: Vec<ScenarioError>,
    /// Links that lead back to a folder being walked: not followed (each file runs once).
    pub loops: Vec<PathBuf>,
    /// `*.json` files found in folders that are not scenarios ([`is_scenario_text`]): not run.
    pub skipped: Vec<PathBuf>,
}

/// Whether the text of a `*.json` file found by walking a folder is a scenario: a JSON object
/// with a top-level `lanes` or `turns` key (a scenario needs both; either marks an attempt at
/// one, whose mistakes are then reported). A text that is not valid JSON is a scenario when it
/// names `"lanes"` or `"turns"`, so a broken scenario file is reported as bad input rather
/// than skipped. Anything else (`package.json`, a data fixture, a top-level array) is not.
pub fn is_scenario_text(text: &str) -> bool {
    use std::collections::BTreeMap;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    match serde_json::from_str::<BTreeMap<String, serde::de::IgnoredAny>>(text) {
        Ok(keys) => keys.contains_key("lanes") || keys.contains_key("turns"),
        Err(e) if e.is_data() => false,
        Err(_) => text.contains("\"lanes\"") || text.contains("\"turns\""),
    }
}

/// Whether a file found by walking a folder is to run: a scenario, or a file that cannot be
/// read (the loader then reports why).
fn walked_scenario(path: &Path) -> bool {
    crate::load::read(path, "scenario file").ok().is_none_or(|text| is_scenario_text(&text))
}

/// Every scenario file under the given paths. A path named is taken as it is; folders are
/// walked in file-name order for `*.json` files that are scenarios ([`is_scenario_text`]),
/// hidden entries (`.name`) skipped, links followed with loop detection; a file reached twice
/// (by a link, named twice, or named and found in a folder named) runs once, where it was
/// first reached. Nothing here stops at a bad path: every other path is still walked.
pub fn collect(paths: &[PathBuf]) -> Found {
    let mut found = Found::default();
    let mut seen = std::collections::BTreeSet::new();
    let io = |path: &Path, message: String| ScenarioError::Io { path: path.to_path_buf(), message };
    for root in paths {
        let metadata = match std::fs::metadata(root) {
            Ok(metadata) => metadata,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                found.problems.push(io(root, "no such file or folder".into()));
                continue;
            }
            Err(e) => {
                found.problems.push(io(root, e.to_string()));
                continue;
            }
        };
        if !metadata.is_dir() {
            if metadata.is_file() {
                // Named and also found in a folder named (either first): it runs, and is
                // counted, once.
                if seen.insert(std::fs::canonicalize(root).unwrap_or_else(|_| root.clone())) {
                    found.files.push((root.clone(), root.clone()));
                }
            } else {
                found.problems.push(io(root, NOT_REGULAR.into()));
            }
            continue;
        }
        let walk = walkdir::WalkDir::new(root)
            .follow_links(true)
            .sort_by_file_name()
            .into_iter()
            .filter_entry(|e| e.depth() == 0 || !e.file_name().to_string_lossy().starts_with('.'));
        for entry in walk {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) if e.loop_ancestor().is_some() => {
                    found.loops.push(e.path().map_or_else(|| root.clone(), Path::to_path_buf));
                    continue;
                }
                Err(e) => {
                    let at = e.path().map_or_else(|| root.clone(), Path::to_path_buf);
                    let message = e.io_error().map_or_else(|| e.to_string(), |io| io.to_string());
                    found.problems.push(io(&at, message));
                    continue;
                }
            };
            let path = entry.path();
            if entry.file_type().is_dir() || !path.to_string_lossy().ends_with(".json") {
                continue;
            }
            if !entry.file_type().is_file() {
                found.problems.push(io(path, NOT_REGULAR.into()));
                continue;
            }
            let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
            if !seen.insert(canonical) {
                continue;
            }
            if walked_scenario(path) {
                found.files.push((path.to_path_buf(), root.clone()));
            } else {
                found.skipped.push(path.to_path_buf());
            }
        }
    }
    found
}

const NOT_REGULAR: &str = "not a regular file (a FIFO, a socket or a device): not read";

/// Below this many files a suite runs too fast for a progress bar to help.
const PROGRESS_MIN_FILES: usize = 20;

/// What became of one file.
enum Checked {
    /// It could not be used.
    Bad(ScenarioError),
    /// `--filter` left it out.
    Filtered,
    /// It ran: what decides its verdict (the golden file is compared before it is built), and
    /// the clauses its run exercised (with `--coverage`).
    Ran(Box<(Scenario, crate::runner::Judgement, Option<Reached>, std::time::Duration)>),
}

pub(super) fn run(
    args: &RunArgs,
    sut: &dyn crate::sut::SystemUnderTest,
    out: &mut dyn Write,
    err: &mut dyn Write,
    terminal: Terminal,
) -> Exit {
    let orders = Orders { explore: args.explore, seed: args.explore_seed };
    let jobs = args.jobs.map_or_else(jobs::default_jobs, usize::from);
    let style = Style {
        format: args.format,
        trace: args.trace,
        quiet: args.quiet,
        coverage_all: args.coverage_all || args.coverage_min.is_some() || args.require_coverage.is_some(),
        out: if args.format == Format::Text { Paint::new(args.color, terminal.stdout) } else { Paint::default() },
        err: Paint::new(args.color, terminal.stderr),
        junit_time: args.junit_time,
        verbose: args.verbose,
    };
    let mut reporter = Reporter::new(style);
    let with_coverage =
        args.coverage || args.coverage_all || args.coverage_min.is_some() || args.require_coverage.is_some();
    let gate = match Gate::new(args.coverage_min, args.require_coverage.as_deref()) {
        Ok(gate) => gate,
        Err(e) => return early(reporter, out, err, &format!("--require-coverage: {e}")),
    };
    let found = collect(&args.paths);
    for link in &found.loops {
        let link = printable(&link.to_string_lossy()).into_owned();
        reporter.note(err, &format!("{link} leads back to a folder being walked; not followed"));
    }
    if !found.skipped.is_empty() {
        let shown: Vec<String> =
            found.skipped.iter().take(3).map(|p| printable(&p.to_string_lossy()).into_owned()).collect();
        let more =
            if found.skipped.len() > 3 { format!(", … ({} in all)", found.skipped.len()) } else { String::new() };
        reporter.note(
            err,
            &format!(
                "skipped {}{more}: not scenarios (no top-level \"lanes\" or \"turns\"); name a file to run it anyway",
                shown.join(", ")
            ),
        );
    }
    reporter.skipped = found.skipped.len();
    if found.files.is_empty() && found.problems.is_empty() {
        let paths: Vec<String> = args.paths.iter().map(|p| printable(&p.to_string_lossy()).into_owned()).collect();
        let skipped = match found.skipped.len() {
            0 => String::new(),
            n => format!(
                " ({n} *.json file{} there {} not)",
                if n == 1 { "" } else { "s" },
                if n == 1 { "is" } else { "are" }
            ),
        };
        let text = format!("no scenario file (*.json) under {}{skipped}", paths.join(", "));
        return early(reporter, out, err, &text);
    }
    let files = found.files;
    if args.timeline.is_some() && files.len() != 1 {
        let text = format!("--timeline draws one run: give exactly one scenario file ({} given)", files.len());
        return early(reporter, out, err, &text);
    }
    // No output may be written over an input (`--timeline self.json` would overwrite the
    // scenario it runs, with exit 0).
    let inputs: Vec<PathBuf> =
        files.iter().map(|(file, _)| file.clone()).chain(args.require_coverage.iter().cloned()).collect();
    if let Some(timeline) = &args.timeline
        && let Some(input) = inputs.iter().find(|input| golden::same_file(timeline, input))
    {
        let timeline = printable(&timeline.to_string_lossy()).into_owned();
        let input = printable(&input.to_string_lossy()).into_owned();
        let text = format!("--timeline {timeline} is the input file {input}: not overwritten (name another file)");
        return early(reporter, out, err, &text);
    }
    let store = args.snapshots.as_ref().map(|dir| Store::new(dir).protecting(inputs.clone()));
    let (files, shared) = if store.is_some() { golden_names_apart(files) } else { (files, Vec::new()) };
    // Paths that cannot be run are reported first; every other file still runs.
    for problem in found.problems.iter().chain(&shared) {
        reporter.bad_input(out, err, problem.path(), problem);
    }
    // Threads go to files first; with fewer files than threads, the two runs of each
    // verification take two.
    let mut runner = runner::Runner::new().on(sut).parallel(files.len() < jobs).explore(orders.explore);
    if args.judge == super::JudgeArg::ModelSide {
        runner = runner.judge(crate::oracles::model_side::Judge::ModelSide);
    }
    if let Some(seed) = orders.seed {
        runner = runner.only_order(seed);
    }
    let bar = progress_bar(files.len(), args, terminal);
    let mut tally = Tally::default();
    let mut matched = 0;
    jobs::ordered(
        &files,
        jobs,
        |(file, _)| {
            let loaded = match crate::load::file(file, runner.sut()) {
                Ok(loaded) => loaded,
                Err(e) => return Checked::Bad(e),
            };
            if !args.filter.is_empty()
                && !args.filter.iter().any(|pattern| name_matches(pattern, &loaded.scenario().name))
            {
                return Checked::Filtered;
            }
            // The wall time a scenario took, for JUnit's `time` only: it never reaches a
            // verdict, a trace or the text report.
            let started = std::time::Instant::now();
            let judgement = runner.judge_loaded(&loaded);
            let wall = started.elapsed();
            let scenario = loaded.into_parts().0;
            let reached = with_coverage.then(|| {
                let run = judgement.run().expect("an in-process run");
                let reached = coverage::reached(&run.evidence());
                // Judged from the model's side (asked for, or a core that reports no events), a
                // run exercises only what that side can show: the run says which it was.
                if run.model_side.is_some() { reached.model_side() } else { reached }
            });
            Checked::Ran(Box::new((scenario, judgement, reached, wall)))
        },
        |i, checked| {
            bar.inc(1);
            let (file, root) = &files[i];
            let (scenario, mut judgement, reached, wall) = match checked {
                Checked::Ran(ran) => *ran,
                Checked::Filtered => {
                    reporter.filtered_out += 1;
                    return;
                }
                Checked::Bad(e) => return bar.suspend(|| reporter.bad_input(out, err, file, &e)),
            };
            matched += 1;
            if let Some(store) = &store {
                let name = golden::name(file, root);
                let body = golden::render(&scenario, judgement.run().expect("an in-process run"));
                match store.compare(&name, file, &scenario.description, &body, args.accept) {
                    Ok(compared) => judgement = judgement.snapshot(snapshot_failure(&compared, &name)),
                    Err(e) => {
                        let problem =
                            ScenarioError::Io { path: file.clone(), message: format!("golden file {name}: {e}") };
                        return bar.suspend(|| reporter.bad_input(out, err, file, &problem));
                    }
                }
            }
            let verdict = judgement.verdict();
            if let Some(reached) = reached.filter(|_| verdict.passed()) {
                tally.add(&reached, &file.to_string_lossy());
            }
            bar.suspend(|| reporter.scenario(out, file, &verdict, wall));
            if let Some(path) = &args.timeline
                && let Some(trace) = verdict.trace()
                && let Err(e) = crate::timeline::write(path, &scenario.name, trace)
            {
                // The scenario was fine (its verdict is above); the output path was not.
                let shown = printable(&path.to_string_lossy()).into_owned();
                bar.suspend(|| reporter.error(err, &format!("{shown}: cannot write the timeline: {e}")));
                reporter.usage_errors += 1;
            }
        },
    );
    bar.finish_and_clear();
    if !args.filter.is_empty() && matched == 0 {
        let patterns: Vec<String> = args.filter.iter().map(|p| format!("{:?}", printable(p))).collect();
        let text = format!(
            "--filter {} matched none of the {} scenarios (it matches scenario names, not file names)",
            patterns.join(", "),
            reporter.filtered_out
        );
        reporter.usage_error(out, err, &text);
    }
    let end = with_coverage.then(|| CoverageEnd { tally: &tally, gate: &gate, unmet: gate.unmet(&tally) });
    reporter.finish(out, err, end)
}

/// The files whose golden files would be distinct, and an error for each file whose golden
/// name another file of the run also has (`x/s.json` and `y/s.json` named on their own, or
/// `a__b.json` beside `a/b.json`): golden names are injective, so no golden file is ever
/// shared (else `--accept` passes both while one overwrites the other). Names that differ
/// only in letter case count as shared too, since they are one file on a case-insensitive
/// file system. Refused rather than renamed: a golden's name stays a function of its file and
/// folder alone, whatever else runs beside it.
pub(super) fn golden_names_apart(files: Vec<(PathBuf, PathBuf)>) -> (Vec<(PathBuf, PathBuf)>, Vec<ScenarioError>) {
    let names: Vec<String> = files.iter().map(|(file, root)| golden::name(file, root)).collect();
    let mut holders: std::collections::BTreeMap<String, Vec<usize>> = std::collections::BTreeMap::new();
    for (i, name) in names.iter().enumerate() {
        holders.entry(name.to_lowercase()).or_default().push(i);
    }
    let mut kept = Vec::new();
    let mut shared = Vec::new();
    for (i, file) in files.iter().enumerate() {
        let holding = &holders[&names[i].to_lowercase()];
        if holding.len() == 1 {
            kept.push(file.clone());
            continue;
        }
        let others: Vec<String> = holding
            .iter()
            .filter(|j| **j != i)
            .map(|j| printable(&files[*j].0.to_string_lossy()).into_owned())
            .collect();
        let message = format!("its golden file {}.snap would also be that of {}: not run", names[i], others.join(", "));
        shared.push(ScenarioError::Invalid {
            path: file.0.clone(),
            place: None,
            field: "--snapshots".into(),
            message,
            hint: Some("give the folder that holds both, or rename one".into()),
        });
    }
    (kept, shared)
}

/// Ends the command at a usage error found before any file ran: exit 2, and under
/// `--format json|junit` the summary record or the whole document still.
fn early(mut reporter: Reporter, out: &mut dyn Write, err: &mut dyn Write, text: &str) -> Exit {
    reporter.usage_error(out, err, text);
    match reporter.format() {
        Format::Text => Exit::BadInput,
        Format::Json | Format::Junit => reporter.finish(out, err, None),
    }
}

/// A progress bar on stderr for a large suite, only when both streams are terminals and the
/// report is text (never in output a program reads); hidden otherwise.
fn progress_bar(files: usize, args: &RunArgs, terminal: Terminal) -> indicatif::ProgressBar {
    if !(terminal.stdout
        && terminal.stderr
        && args.format == Format::Text
        && !args.quiet
        && files >= PROGRESS_MIN_FILES)
    {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::with_draw_target(Some(files as u64), indicatif::ProgressDrawTarget::stderr());
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} scenario files, {elapsed}")
            .expect("a valid template"),
    );
    bar
}

/// Whether a scenario name matches a `--filter` pattern: as a glob over the whole name when
/// the pattern holds `*` or `?`, else as a substring.
///
/// In time linear in the name (times the length of the pattern's longest piece between `*`s,
/// over 64): the pieces are matched left to right, each at its leftmost place after the one
/// before, which is the whole glob's match whenever there is one. The classic backtracking
/// matcher costs pattern × name (17.5 s on a long name).
fn name_matches(pattern: &str, name: &str) -> bool {
    if !pattern.contains(['*', '?']) {
        return name.contains(pattern);
    }
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    let pieces: Vec<&[char]> = p.split(|c| *c == '*').collect();
    let fits = |piece: &[char], at: &[char]| piece.iter().zip(at).all(|(p, c)| *p == '?' || p == c);
    let [first, middle @ .., last] = &pieces[..] else {
        // No `*`: the pattern is one piece, matched against the whole name.
        return p.len() == t.len() && fits(&p, &t);
    };
    if t.len() < first.len() + last.len() || !fits(first, &t) || !fits(last, &t[t.len() - last.len()..]) {
        return false;
    }
    let (mut from, until) = (first.len(), t.len() - last.len());
    for piece in middle {
        match leftmost_end(piece, &t[from..until]) {
            Some(end) => from += end,
            None => return false,
        }
    }
    true
}

/// Where the leftmost match of `piece` (`?` matching any one character) in `text` ends, by
/// the bit-parallel shift-and search: one pass over `text`.
fn leftmost_end(piece: &[char], text: &[char]) -> Option<usize> {
    if piece.is_empty() {
        return Some(0);
    }
    let words = piece.len().div_ceil(64);
    let mut any = vec![0u64; words];
    let mut masks: std::collections::BTreeMap<char, Vec<u64>> = std::collections::BTreeMap::new();
    for (i, c) in piece.iter().enumerate() {
        let mask = if *c == '?' { &mut any } else { masks.entry(*c).or_insert_with(|| vec![0; words]) };
        mask[i / 64] |= 1 << (i % 64);
    }
    let last = piece.len() - 1;
    let mut state = vec![0u64; words];
    for (at, c) in text.iter().enumerate() {
        let mask = masks.get(c);
        let mut carry = 1u64;
        for w in 0..words {
            let shifted = (state[w] << 1) | carry;
            carry = state[w] >> 63;
            state[w] = shifted & (any[w] | mask.map_or(0, |m| m[w]));
        }
        if state[last / 64] & (1 << (last % 64)) != 0 {
            return Some(at + 1);
        }
    }
    None
}

/// The failure a golden-file comparison adds to a verdict, if any.
pub(super) fn snapshot_failure(compared: &Compared, name: &str) -> Option<Failure> {
    match compared {
        Compared::Same | Compared::Accepted { .. } => None,
        Compared::Missing { pending } => Some(Failure::new(
            FailureKind::Snapshot,
            format!(
                "snapshot {name}: no golden trace yet; this run's is in {} (read it; to keep it as the golden file, run the same command again with --accept)",
                pending.display()
            ),
            Vec::new(),
        )),
        Compared::Differs { pending, line, golden, now } => Some(
            Failure::new(
                FailureKind::Snapshot,
                format!(
                    "snapshot {name}: the trace differs from its golden file at line {line}; this run's is in {pending} (see what changed: diff {kept} {pending}; if the change is meant, run the same command again with --accept to keep it)",
                    pending = pending.display(),
                    kept = pending.with_extension("").display(),
                ),
                vec![format!("golden: {golden}"), format!("now:    {now}")],
            )
            .differing(golden.as_str(), now.as_str()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_linear_glob_matcher_agrees_with_the_backtracking_one() {
        // The classic backtracking matcher, as the reference on every pattern
        // and name of up to 5 characters over a small alphabet.
        fn classic(p: &[char], t: &[char]) -> bool {
            let (mut i, mut j, mut star, mut from) = (0, 0, None, 0);
            while j < t.len() {
                if i < p.len() && (p[i] == '?' || p[i] == t[j]) {
                    (i, j) = (i + 1, j + 1);
                } else if i < p.len() && p[i] == '*' {
                    (star, from, i) = (Some(i), j, i + 1);
                } else if let Some(s) = star {
                    (i, from) = (s + 1, from + 1);
                    j = from;
                } else {
                    return false;
                }
            }
            p[i..].iter().all(|c| *c == '*')
        }
        fn all(alphabet: &[char], max: usize) -> Vec<String> {
            let mut out = vec![String::new()];
            let mut last = vec![String::new()];
            for _ in 0..max {
                last = last.iter().flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}"))).collect();
                out.extend(last.iter().cloned());
            }
            out
        }
        let names = all(&['a', 'b'], 5);
        for pattern in all(&['a', 'b', '*', '?'], 4).iter().filter(|p| p.contains(['*', '?'])) {
            let p: Vec<char> = pattern.chars().collect();
            for name in &names {
                let t: Vec<char> = name.chars().collect();
                assert_eq!(name_matches(pattern, name), classic(&p, &t), "{pattern:?} against {name:?}");
            }
        }
    }

    #[test]
    fn a_long_glob_on_a_long_name_is_matched_in_one_pass() {
        // `*a*a*…*b` on a long run of `a`s costs a backtracking matcher pattern × name (17.5 s).
        let pattern = "*a".repeat(20_000) + "*b";
        let name = "a".repeat(200_000);
        assert!(!name_matches(&pattern, &name));
        assert!(name_matches(&pattern, &(name + "b")));
    }

    #[test]
    fn a_filter_is_a_substring_or_a_glob_over_the_whole_name() {
        assert!(name_matches("budget", "agent-budget-from-30"));
        assert!(!name_matches("Budget", "agent-budget-from-30"));
        assert!(name_matches("agent-*-30", "agent-budget-from-30"));
        assert!(!name_matches("budget*", "agent-budget-from-30"), "a glob matches the whole name");
        assert!(name_matches("*budget*", "agent-budget-from-30"));
        assert!(name_matches("cap-?-*", "cap-4-six-children-queue-fifo"));
        assert!(!name_matches("cap-?-*", "cap-44-x"));
        assert!(name_matches("a*b*c", "axxbyyc"));
        assert!(!name_matches("a*b*c", "axxcyyb"));
        assert!(name_matches("*?", "x"));
        assert!(!name_matches("*??", "x"));
        assert!(name_matches("a*a", "aa"));
        assert!(!name_matches("ab*ba", "aba"), "the first and last pieces may not overlap");
        assert!(name_matches("?*", "é"));
        assert!(name_matches("*", ""));
        assert!(name_matches("x?z", "xyz"));
        assert!(!name_matches("x?z", "xyzz"));
    }

    #[test]
    fn a_walked_file_is_a_scenario_when_it_has_lanes_or_turns_or_is_a_broken_attempt() {
        assert!(is_scenario_text(r#"{"name": "x", "lanes": [], "turns": []}"#));
        assert!(is_scenario_text("\u{feff}{\"turns\": []}"), "a byte order mark is skipped");
        assert!(is_scenario_text(r#"{"lanez": [], "turns": [{"user": "hi"}]}"#), "a typo is reported, not skipped");
        assert!(is_scenario_text("{\n  \"lanes\": [\n  ]\n  \"turns\": []\n}"), "broken JSON naming a key");
        assert!(!is_scenario_text(r#"{"name": "my-app", "version": "1.0.0", "dependencies": {}}"#));
        assert!(!is_scenario_text(r#"[{"lanes": []}]"#), "a top-level array is no scenario");
        assert!(!is_scenario_text("{ // a comment, as in tsconfig.json\n \"compilerOptions\": {} }"));
        assert!(!is_scenario_text(r#"{"nested": {"lanes": [], "turns": []}}"#), "only top-level keys count");
    }
}

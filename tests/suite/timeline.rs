//! The timeline picture of a run (`src/timeline.rs`): the reviewed SVG of the cap-4 scenario
//! (`snapshots/timeline__cap-4-six-children-queue-fifo.snap`), well-formed XML that shows its
//! queue and its four running slots, a foreground timeout, thirty agents, hostile text, every
//! scenario and generated ones, and `rehearsal run --timeline`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use proptest::prelude::*;
use rehearsal::internals::generate::{self, Family};
use rehearsal::internals::harness::schedule::Schedule;
use rehearsal::internals::timeline;
use rehearsal::sut::AgentId;
use rehearsal::sut::event::Event;
use rehearsal::trace::{Entry, Trace, What};
use rehearsal::{cli, runner};

use crate::support::{manifest_path, rehearsal};

const CAP4: &str = "scenarios/bub/cap-4-six-children-queue-fifo.json";
const FOREGROUND_TIMEOUT: &str = "scenarios/roku/agent-timeout-121s-child.json";
const THIRTY: &str = "tests/fixtures/timeline/thirty-agents.json";

/// The scenario's name and the trace of its run in the default tie order.
fn run(relative: &str) -> (String, Trace) {
    let (scenario, verdict) =
        runner::Runner::new().check_file(&manifest_path(relative)).unwrap_or_else(|e| panic!("{e}"));
    assert!(verdict.passed(), "{relative} should pass before it is drawn");
    (scenario.name, verdict.into_run().unwrap().trace)
}

fn picture(relative: &str) -> String {
    let (name, trace) = run(relative);
    timeline::svg(&name, &trace)
}

/// The HTML page opens with `<!DOCTYPE html>`; the rest of it is XML too.
fn parse_page(page: &str) -> Result<(), roxmltree::Error> {
    roxmltree::Document::parse_with_options(page, roxmltree::ParsingOptions { allow_dtd: true, ..Default::default() })
        .map(drop)
}

fn parse(svg: &str) -> roxmltree::Document<'_> {
    roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("the SVG is not well-formed XML: {e}"))
}

/// The drawn elements whose class is exactly `class` (not the legend's swatches).
fn drawn<'a>(doc: &'a roxmltree::Document, class: &'a str) -> impl Iterator<Item = roxmltree::Node<'a, 'a>> {
    doc.descendants()
        .filter(move |n| n.attribute("class") == Some(class))
        .filter(|n| !n.ancestors().any(|a| a.attribute("class") == Some("key")))
}

/// `(t0, t1)` in microseconds of every span whose class is exactly `class`.
fn spans(doc: &roxmltree::Document, class: &str) -> Vec<(u64, u64)> {
    drawn(doc, class)
        .map(|n| {
            let t = |a: &str| {
                n.attribute(a).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{class} span lacks {a}"))
            };
            (t("data-t0"), t("data-t1"))
        })
        .collect()
}

/// The most spans open at one instant (a span ending at `t` and one starting at `t` do not
/// overlap).
fn most_at_once(spans: &[(u64, u64)]) -> usize {
    spans.iter().map(|&(t, _)| spans.iter().filter(|&&(a, b)| a <= t && t < b).count()).max().unwrap_or(0)
}

#[test]
fn cap_4_svg_matches_its_reviewed_snapshot() {
    let svg = picture(CAP4);
    insta::with_settings!({
        snapshot_path => "../../snapshots",
        prepend_module_to_snapshot => false,
        omit_expression => true,
        description => format!("rehearsal run {CAP4} --timeline out.svg"),
    }, {
        insta::assert_snapshot!("timeline__cap-4-six-children-queue-fifo", svg);
    });
}

#[test]
fn cap_4_svg_is_well_formed_and_shows_the_queue_and_four_running_slots() {
    let svg = picture(CAP4);
    let doc = parse(&svg);
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert_eq!(root.tag_name().namespace(), Some("http://www.w3.org/2000/svg"));

    // Children 5 and 6 wait in the queue from their spawn at 0.100s until slots free at 0.400s
    // and 0.700s; children 1-4 never wait, so they have no queued span.
    let mut queued = spans(&doc, "queued");
    queued.sort();
    assert_eq!(queued, vec![(100_000, 400_000), (100_000, 700_000)]);

    // Six running spans, never more than four at once, and four at once right after the spawns.
    let running = spans(&doc, "running");
    assert_eq!(running.len(), 6, "{running:?}");
    assert_eq!(most_at_once(&running), 4);
    assert_eq!(running.iter().filter(|&&(t0, _)| t0 == 100_000).count(), 4);
    for (_, end) in &queued {
        assert!(running.iter().any(|&(t0, _)| t0 == *end), "a queued task starts running when it leaves the queue");
    }

    // The strip of slots says so too, and the six deliveries reach main at 2.100s.
    assert!(svg.contains(">at most 4 running</text>"), "the background strip names the most running at once");
    let deliveries = drawn(&doc, "a-notify").count();
    assert_eq!(deliveries, 6);
    let spawns = drawn(&doc, "a-spawn-bg").count();
    assert_eq!(spawns, 6);
}

#[test]
fn the_same_trace_gives_the_same_bytes() {
    let (name, trace) = run(CAP4);
    let (_, again) = run(CAP4);
    assert_eq!(timeline::svg(&name, &trace), timeline::svg(&name, &again));
    assert_eq!(timeline::html(&name, &trace), timeline::html(&name, &again));
}

#[test]
fn a_foreground_child_runs_from_its_spawn_to_its_timeout() {
    let svg = picture(FOREGROUND_TIMEOUT);
    let doc = parse(&svg);
    assert_eq!(spans(&doc, "fg"), vec![(100_000, 120_100_000)]);
    // Its model call was cut by the timeout, and the parent's Agent call ended in an error.
    assert_eq!(spans(&doc, "llm cut"), vec![(100_000, 120_100_000)]);
    assert_eq!(spans(&doc, "tool err"), vec![(100_000, 120_100_000)]);
    assert_eq!(drawn(&doc, "m-timeout").count(), 1);
    assert!(svg.contains(">timeout 120.000s</text>"));
    assert_eq!(drawn(&doc, "a-result").count(), 0);
}

#[test]
fn thirty_agents_get_thirty_rows_inside_the_picture() {
    let svg = picture(THIRTY);
    let doc = parse(&svg);
    let root = doc.root_element();
    let number = |n: roxmltree::Node, a: &str| n.attribute(a).map(|v| v.parse::<f64>().expect("a number"));
    let (width, height) = (number(root, "width").unwrap(), number(root, "height").unwrap());

    let aliases: Vec<&str> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("alias"))
        .filter_map(|n| n.text())
        .filter(|t| t.starts_with("main"))
        .collect();
    assert_eq!(aliases.len(), 30, "{aliases:?}");
    // Each child directly under its parent's subtree, in spawn order.
    assert_eq!(&aliases[..4], ["main", "main/1", "main/2", "main/2/1"]);

    for node in doc.descendants().filter(|n| n.is_element()) {
        let (x, y) = (number(node, "x").unwrap_or(0.0), number(node, "y").unwrap_or(0.0));
        let (w, h) = (number(node, "width").unwrap_or(0.0), number(node, "height").unwrap_or(0.0));
        if node.tag_name().name() == "svg" || node.tag_name().name() == "pattern" {
            continue;
        }
        assert!(x >= 0.0 && x + w <= width && y >= 0.0 && y + h <= height, "outside the picture: {node:?}");
    }
}

#[test]
fn markup_and_control_characters_in_the_trace_are_escaped() {
    let at = |ms| Duration::from_millis(ms);
    let root = AgentId::root();
    let entry = |ms, what| Entry { at: at(ms), agent: root.clone(), what };
    let trace = Trace {
        entries: vec![
            entry(0, What::Core(Event::TurnStarted { turn: 1, message: "go".into(), budget: 3 })),
            entry(10, What::Core(Event::Steered { message: "\u{1b}[31m<b>&\"it's\"</b>\u{0}".into() })),
            entry(20, What::Core(Event::Denied { tool: "Bash\u{7}<x>".into(), reason: "no\u{8}".into(), budget: 2 })),
            entry(30, What::Stopped("horizon ]]> \u{ffff} \u{85}".into())),
        ],
    };
    for text in [timeline::svg("a<b>&\u{1}", &trace), timeline::html("a<b>&\u{1}", &trace)] {
        parse_page(&text).unwrap_or_else(|e| panic!("not well-formed XML: {e}\n{text}"));
        assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "a raw control character is left");
        assert!(text.contains("denied Bash\\u{7}&lt;x&gt;"), "{text}");
        assert!(text.contains("a&lt;b&gt;&amp;\\u{1}"));
    }
}

/// Every agent the trace names, as the picture's rows must show them.
fn agents(trace: &Trace) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for entry in &trace.entries {
        out.insert(entry.agent.to_string());
        if let What::Core(
            Event::Spawned { child, .. }
            | Event::TaskQueued { child, .. }
            | Event::TaskStarted { child, .. }
            | Event::TaskEnded { child, .. }
            | Event::TimedOut { child, .. }
            | Event::ChildResult { child, .. },
        ) = &entry.what
        {
            out.insert(child.to_string());
        }
    }
    out
}

/// The picture is well-formed, has a row for each agent of the trace, its spans run forward,
/// and the HTML page is well-formed too.
fn check_picture(name: &str, trace: &Trace) -> Result<(), String> {
    let svg = timeline::svg(name, trace);
    let doc = roxmltree::Document::parse(&svg).map_err(|e| format!("SVG not well-formed: {e}"))?;
    let rows: BTreeSet<String> = doc
        .descendants()
        .filter(|n| {
            n.attribute("class") == Some("alias") && !n.ancestors().any(|a| a.attribute("class") == Some("key"))
        })
        .filter_map(|n| n.text().map(str::to_string))
        .filter(|t| t != "background")
        .collect();
    if rows != agents(trace) {
        return Err(format!("rows {rows:?} are not the agents {:?}", agents(trace)));
    }
    for node in doc.descendants().filter(|n| n.has_attribute("data-t0")) {
        let t = |a| node.attribute(a).and_then(|v| v.parse::<u64>().ok()).expect("a time");
        if t("data-t0") > t("data-t1") {
            return Err(format!("a span runs backwards: {node:?}"));
        }
    }
    parse_page(&timeline::html(name, trace)).map_err(|e| format!("page not well-formed: {e}"))
}

#[test]
fn every_scenario_and_fixture_that_runs_draws_a_well_formed_picture() {
    let folders: Vec<PathBuf> = ["scenarios", "tests/fixtures"].iter().map(|f| manifest_path(f)).collect();
    let mut drawn = 0;
    for (file, _) in cli::collect(&folders).files {
        // Bad input does not run; a run that stops (an exhausted lane) is drawn with its stop.
        let Ok((scenario, verdict)) = runner::Runner::new().check_file(&file) else { continue };
        check_picture(&scenario.name, &verdict.run().unwrap().trace)
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        drawn += 1;
    }
    assert!(drawn > 100, "only {drawn} files were drawn");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    /// Generated runs of both rule sets, in any tie order, draw a well-formed picture with a
    /// row per agent, the same bytes twice.
    #[test]
    fn generated_runs_draw_well_formed_pictures(scenario in generate::scenario(Family::Any), order in 0u64..1000) {
        let profiles = rehearsal::load::resolve_profiles(&scenario, Path::new(".")).expect("inline profiles only");
        let schedule = if order == 0 { Schedule::default_order() } else { Schedule::seeded(order) };
        let run = runner::Runner::new().run(&scenario, &profiles, schedule);
        let checked = check_picture(&scenario.name, &run.trace);
        prop_assert!(checked.is_ok(), "{}", checked.unwrap_err());
        prop_assert_eq!(timeline::svg(&scenario.name, &run.trace), timeline::svg(&scenario.name, &run.trace));
    }
}

/// A fresh folder for one test's output.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rehearsal-timeline-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    dir
}

#[test]
fn run_with_timeline_writes_the_svg_and_exits_0() {
    let dir = scratch("svg");
    let path = dir.join("t.svg");
    let out = rehearsal(&["run", CAP4, "--timeline", path.to_str().unwrap()]);
    assert_eq!(out.code, Some(0), "{}", out.both());
    assert!(out.stdout.starts_with("PASS cap-4-six-children-queue-fifo"), "{}", out.both());
    let written = std::fs::read_to_string(&path).expect("the timeline was written");
    assert_eq!(written, picture(CAP4), "the CLI writes the picture of the default-order run");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn run_with_an_html_timeline_writes_the_page_with_the_trace() {
    let dir = scratch("html");
    let path = dir.join("t.html");
    let out = rehearsal(&["run", FOREGROUND_TIMEOUT, "--timeline", path.to_str().unwrap()]);
    assert_eq!(out.code, Some(0), "{}", out.both());
    let page = std::fs::read_to_string(&path).expect("the page was written");
    assert!(page.starts_with("<!DOCTYPE html>"));
    parse_page(&page).unwrap_or_else(|e| panic!("the page is not well-formed: {e}"));
    assert!(page.contains("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(page.contains("<span id=\"L7\">  120.100s main     timeout        main/1 after=120.000s</span>"), "{page}");
    assert!(page.contains("<a href=\"#L7\">"), "the timeout's marker links to its trace line");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn timeline_with_several_files_is_a_usage_error() {
    let dir = scratch("several");
    let path = dir.join("t.svg");
    let out = rehearsal(&["run", CAP4, FOREGROUND_TIMEOUT, "--timeline", path.to_str().unwrap()]);
    assert_eq!(out.code, Some(2), "{}", out.both());
    assert!(out.stderr.contains("--timeline"), "{}", out.both());
    assert!(out.stdout.is_empty(), "nothing runs\n{}", out.both());
    assert!(!path.exists());

    let out = rehearsal(&["run", "scenarios/bub", "--timeline", path.to_str().unwrap()]);
    assert_eq!(out.code, Some(2), "a folder of many files is several files too\n{}", out.both());
    assert!(!path.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The declarations the picture's `<style>` gives a selector (`.ml`, `text`).
fn declarations<'a>(css: &'a str, selector: &str) -> Vec<(&'a str, &'a str)> {
    css.split('}')
        .filter_map(|rule| rule.split_once('{'))
        .filter(|(selectors, _)| selectors.split(',').any(|s| s.trim() == selector))
        .flat_map(|(_, body)| body.split(';').filter_map(|d| d.split_once(':')))
        .map(|(k, v)| (k.trim(), v.trim()))
        .collect()
}

/// Relative luminance of `#rgb` or `#rrggbb` (0 black, 1 white).
fn luminance(colour: &str) -> f64 {
    let hex = colour.strip_prefix('#').unwrap_or_else(|| panic!("a hex colour: {colour}"));
    let hex: String = if hex.len() == 3 { hex.chars().flat_map(|c| [c, c]).collect() } else { hex.to_string() };
    let channel = |i: usize| {
        let c = f64::from(u8::from_str_radix(&hex[i..i + 2], 16).unwrap()) / 255.0;
        if c <= 0.04045 { c / 12.92 } else { ((c + 0.055) / 1.055).powf(2.4) }
    };
    0.2126 * channel(0) + 0.7152 * channel(2) + 0.0722 * channel(4)
}

/// Labels read the same in browsers, rsvg and cairosvg (issue 26): no text has a stroke (a
/// `paint-order: stroke` halo, which cairosvg ignores, drew white over white), and every label
/// on the light background is dark enough to read; only `.in`, inside the dark model and tool
/// bars, is white.
#[test]
fn every_label_is_a_fill_without_a_halo_and_dark_on_the_light_background() {
    for file in [CAP4, FOREGROUND_TIMEOUT, THIRTY] {
        let svg = picture(file);
        let doc = parse(&svg);
        let css: String = doc.descendants().filter(|n| n.has_tag_name("style")).filter_map(|n| n.text()).collect();
        let default_fill = declarations(&css, "text").iter().find(|(k, _)| *k == "fill").map(|(_, v)| *v);
        let texts: Vec<_> = doc.descendants().filter(|n| n.has_tag_name("text")).collect();
        assert!(!texts.is_empty(), "{file}");
        for text in texts {
            assert!(text.attribute("stroke").is_none() && text.attribute("paint-order").is_none(), "{file}: {text:?}");
            let class = text.attribute("class").unwrap_or_default();
            let own = class.split(' ').flat_map(|c| declarations(&css, &format!(".{c}"))).collect::<Vec<_>>();
            for (property, value) in own.iter().chain(&declarations(&css, "text")) {
                assert!(
                    !property.starts_with("stroke") && *property != "paint-order",
                    "{file}: text .{class} has {property}:{value}"
                );
            }
            let fill = text
                .attribute("fill")
                .or(own.iter().rev().find(|(k, _)| *k == "fill").map(|(_, v)| *v))
                .or(default_fill)
                .unwrap_or("#000");
            if class.split(' ').any(|c| c == "in") {
                continue;
            }
            assert!(luminance(fill) < 0.35, "{file}: text .{class} is {fill}, too light to read on white");
        }
    }
}

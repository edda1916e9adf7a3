//! Judging from the model's side (issue 22): the attribution gives every exchange of every
//! scenario the alias the built-in core reported, the model-side oracles raise no false alarm
//! on the correct core, and each oracle fires on tampered evidence.

use std::path::{Path, PathBuf};

use rehearsal::dialect::Dialect;
use rehearsal::evidence::attribution::{Attribution, ModelSide};
use rehearsal::oracles::model_side::{self, Judge};
use rehearsal::runner::Runner;
use rehearsal::sut::llm::{Message, Transcript};

/// The scenarios whose attribution the model's side cannot get right online, each with why.
/// Both hinge on a refusal decided by something no request shows: a profile's tools.
const KNOWN: [(&str, &str); 2] = [
    (
        "allowed-tools-cannot-grant-what-parent-lacks",
        "call 2 is refused for its profile's tools, which no request shows, before call 3's child asks",
    ),
    (
        "named-session-records-failed-run-not-timed-out-one",
        "a timed-out run records nothing, so the next run starts from an earlier record than its last request",
    ),
];

fn scenario_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            scenario_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "json") {
            out.push(path);
        }
    }
}

#[test]
fn attribution_gives_every_exchange_the_cores_alias_on_every_scenario() {
    let mut files = Vec::new();
    scenario_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios"), &mut files);
    assert!(files.len() > 100, "the suite is there");
    let runner = Runner::new().judge(Judge::ModelSide);
    let mut failing = Vec::new();
    let mut exchanges = 0;
    for path in &files {
        let (scenario, verdict) = runner.check_file(path).unwrap_or_else(|e| panic!("{e}"));
        let side = verdict.run.model_side.as_ref().expect("a model-side record");
        exchanges += side.exchanges.len();
        assert_eq!(side.exchanges.len(), verdict.run.exchanges.len(), "{}", scenario.name);
        if !verdict.passed() {
            failing.push(format!("{}: {}", scenario.name, verdict.failures[0].what));
        }
    }
    let known: Vec<&str> = KNOWN.iter().map(|k| k.0).collect();
    let unexpected: Vec<&String> =
        failing.iter().filter(|f| !known.iter().any(|k| f.starts_with(&format!("{k}:")))).collect();
    assert!(unexpected.is_empty(), "model-side judging failed on the correct core:\n{unexpected:#?}");
    assert_eq!(failing.len(), KNOWN.len(), "a known limit no longer shows; drop it from KNOWN: {failing:#?}");
    assert!(exchanges > 500, "{exchanges} exchanges attributed");
}

/// A real run's model-side record, to tamper with.
fn record(file: &str) -> (ModelSide, rehearsal::rules::Rules) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios").join(file);
    let (_, verdict) = Runner::new().judge(Judge::ModelSide).check_file(&path).unwrap();
    verdict.assert_passed();
    (verdict.run.model_side.clone().unwrap(), verdict.run.rules.clone())
}

fn findings(side: &ModelSide, rules: &rehearsal::rules::Rules) -> Vec<String> {
    model_side::check(side, rules, &Dialect::builtin("rehearsal").unwrap()).iter().map(ToString::to_string).collect()
}

fn index_of(side: &ModelSide, alias: &str, nth: usize) -> usize {
    (0..side.exchanges.len()).filter(|&i| side.alias(i).is_some_and(|a| a.as_str() == alias)).nth(nth).unwrap()
}

#[test]
fn depth_fires_on_a_child_at_the_limit_offered_the_spawn_tool() {
    let (mut side, rules) = record("roku/agent-child-fresh-history-and-tools.json");
    assert!(findings(&side, &rules).is_empty());
    let i = index_of(&side, "main/1", 0);
    side.exchanges[i].tools.push("Agent".into());
    let got = findings(&side, &rules);
    assert!(
        got.iter().any(|f| f.starts_with("model-side depth (oracle.model-side.depth): main/1 request #1")),
        "{got:#?}"
    );
}

#[test]
fn append_only_fires_on_a_spliced_history() {
    let (mut side, rules) = record("roku/three-tools-run-in-order.json");
    assert!(findings(&side, &rules).is_empty());
    let i = index_of(&side, "main", 1);
    // Drop the second message: the history is spliced.
    let kept: Vec<Message> =
        side.exchanges[i].messages.iter().enumerate().filter(|(k, _)| *k != 1).map(|(_, m)| m.clone()).collect();
    side.exchanges[i].messages = Transcript::from(kept);
    let got = findings(&side, &rules);
    assert!(
        got.iter().any(|f| f.starts_with("model-side append-only (oracle.model-side.append-only): main request #2")),
        "{got:#?}"
    );
}

#[test]
fn truncation_fires_on_a_result_cut_wrong() {
    let (mut side, rules) = record("roku/agent-result-4001-chars-truncated.json");
    assert!(findings(&side, &rules).is_empty());
    let c = side.calls.iter_mut().find(|c| c.tool == "Agent").unwrap();
    let (text, error) = c.result.clone().unwrap();
    c.result = Some((text.replacen("4000 chars", "3999 chars", 1), error));
    let got = findings(&side, &rules);
    assert!(got.iter().any(|f| f.starts_with("model-side truncation (oracle.model-side.truncation)")), "{got:#?}");
}

#[test]
fn attribution_reports_a_request_no_agent_accounts_for() {
    let (mut side, rules) = record("roku/three-tools-run-in-order.json");
    side.attributions[1] = Attribution::Unattributed("tampered".into());
    let got = findings(&side, &rules);
    assert!(got.iter().any(|f| f.contains("unattributed request: tampered")), "{got:#?}");
}

#[test]
fn model_side_mode_hides_the_alias_from_call_ids() {
    let (side, _) = record("roku/agent-child-fresh-history-and-tools.json");
    for e in &side.exchanges {
        for c in e.reply.iter().flat_map(|r| &r.tool_calls) {
            assert!(c.id.starts_with("call_") && !c.id.contains("main"), "{}", c.id);
        }
    }
}

#[test]
fn a_dialect_file_loads_and_bad_names_are_errors() {
    let dir = std::env::temp_dir().join(format!("rehearsal-dialect-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("mine.json");
    let mine = Dialect { name: "mine".into(), ..Dialect::builtin("generic").unwrap() };
    std::fs::write(&file, serde_json::to_string(&mine).unwrap()).unwrap();
    assert_eq!(Dialect::load(file.to_str().unwrap()).unwrap(), mine);
    assert!(Dialect::load("no-such-dialect").unwrap_err().to_string().contains("neither a built-in dialect"));
    std::fs::remove_dir_all(&dir).unwrap();
}

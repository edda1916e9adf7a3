//! A core that reports no events at all is judged from the model's side alone (issue 22).
//!
//! `Silent` wraps the built-in core behind `SystemUnderTest`, declares
//! `Reports::NoEvents`, drops every event the core reports, and blanks what its requests say
//! about the asking agent (alias, goal, profile), so nothing but the traffic a model endpoint
//! sees reaches the judge. Without a bug every scenario that needs no reported event passes on
//! it, and the verdict names the model-side oracles that judged it. Two deliberate bugs are
//! caught by name: a depth bug (the core is configured one level deeper than the scenario's
//! rules) and a history splice (a message dropped from an agent's later request).

use crate::support::scenario_files;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rehearsal::core::Builtin;
use rehearsal::internals::evidence::attribution::Attribution;
use rehearsal::runner::{Runner, Verdict};
use rehearsal::sut::event::NoObserver;
use rehearsal::sut::llm::{BoxFuture, Llm, LlmError, LlmReply, LlmRequest, Message, Transcript};
use rehearsal::sut::{AgentId, Capabilities, CoreSession, Harness, Refused, Reports, SessionConfig, SystemUnderTest};

/// A bug the silent core can carry.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Bug {
    /// Runs one level deeper than the rules allow (`core.depth.no-agent-beyond-limit`).
    Depth,
    /// Drops the second message of any request holding five or more (append-only history).
    Splice,
}

/// What the silent core does besides its agents' requests.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
enum Extra {
    /// Nothing.
    #[default]
    None,
    /// Asks the model for a conversation title before the root's first request of a turn
    /// (a side request: no agent's).
    Titles,
}

/// The built-in core, reporting nothing.
struct Silent {
    bug: Option<Bug>,
    extra: Extra,
}

impl SystemUnderTest for Silent {
    fn name(&self) -> &str {
        "silent"
    }

    fn capabilities(&self) -> Capabilities {
        Builtin.capabilities()
    }

    fn start(&self, mut config: SessionConfig, harness: Harness) -> Result<Box<dyn CoreSession>, Refused> {
        if self.bug == Some(Bug::Depth) {
            config.rules.depth_limit += 1;
        }
        let llm = Arc::new(Masked {
            inner: harness.llm.clone(),
            splice: self.bug == Some(Bug::Splice),
            titles: self.extra == Extra::Titles,
        });
        Builtin.start(config, Harness { llm, observer: Arc::new(NoObserver), ..harness })
    }

    fn reports(&self) -> Reports {
        Reports::NoEvents
    }

    fn dialect(&self) -> String {
        "rehearsal".into()
    }
}

/// The model as the silent core calls it: requests name no agent, goal or profile.
struct Masked {
    inner: Arc<dyn Llm>,
    splice: bool,
    titles: bool,
}

impl Llm for Masked {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> BoxFuture<'a, Result<LlmReply, LlmError>> {
        let mut masked = request.clone();
        masked.agent = AgentId::root();
        masked.goal = "".into();
        masked.profile = None;
        if self.splice && masked.messages.len() >= 5 {
            let kept: Vec<_> =
                masked.messages.iter().enumerate().filter(|(i, _)| *i != 1).map(|(_, m)| m.clone()).collect();
            masked.messages = Transcript::from(kept);
        }
        let title = (self.titles && request.agent == AgentId::root() && request.messages.len() == 1).then(|| {
            let first = request.messages.iter().next().map(|m| m.content.clone()).unwrap_or_default();
            LlmRequest {
                messages: Transcript::from(vec![Message::user(format!(
                    "Write a title for this conversation: {first}"
                ))]),
                tools: Vec::new().into(),
                ..masked.clone()
            }
        });
        Box::pin(async move {
            if let Some(title) = title {
                // The runtime's own call: its answer names the conversation and nothing else.
                self.inner.complete(&title).await?;
            }
            self.inner.complete(&masked).await
        })
    }
}

fn scenario(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios").join(file)
}

fn check(core: &Silent, path: &Path) -> Verdict {
    let (_, verdict) = Runner::new().on(core).check_file(path).unwrap_or_else(|e| panic!("{e}"));
    verdict
}

#[test]
fn a_core_that_reports_no_events_is_judged_by_the_model_side_oracles_and_the_verdict_names_them() {
    let verdict =
        check(&Silent { bug: None, extra: Extra::None }, &scenario("roku/agent-child-fresh-history-and-tools.json"));
    verdict.assert_passed();
    assert_eq!(verdict.run().unwrap().reports, Reports::NoEvents);
    let oracles = verdict.judged_by().expect("judged from the model's side");
    assert_eq!(oracles, rehearsal::internals::oracles::model_side::CLAUSES.to_vec());
    let report = verdict.report_with(None, true);
    assert!(
        report.contains("judged from the model's side alone (the core reports no events): oracle.model-side.attribution, oracle.model-side.depth"),
        "{report}"
    );
    // Without --verbose, their count on one short line (issue 42: twelve ids on every verdict).
    let report = verdict.to_string();
    let count = rehearsal::internals::oracles::model_side::CLAUSES.len();
    assert!(
        report.contains(&format!(
            "judged from the model's side alone (the core reports no events): oracle.model-side.* ({count} oracles; --verbose names them)"
        )),
        "{report}"
    );
    // Nothing the core reports is read: no event reached the trace, and every request named
    // the root, yet the child's requests were put down to main/1.
    let side = verdict.run().unwrap().model_side.as_ref().unwrap();
    assert!(verdict.run().unwrap().exchanges.iter().all(|e| e.request.agent == AgentId::root()));
    assert!((0..side.exchanges.len()).any(|i| side.alias(i).is_some_and(|a| a.as_str() == "main/1")));
}

#[test]
fn the_silent_core_passes_every_scenario_that_needs_no_reported_event() {
    let mut files = Vec::new();
    scenario_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios"), &mut files);
    let core = Silent { bug: None, extra: Extra::None };
    let (mut passed, mut failing) = (0, Vec::new());
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        // `$taskN` resolves against the task ids the core reports; a silent core reports none.
        if text.contains("$task") {
            continue;
        }
        let verdict = check(&core, path);
        if verdict.passed() {
            passed += 1;
        } else {
            failing.push(format!("{}: {}", verdict.name(), verdict.failures()[0].what));
        }
    }
    assert!(failing.is_empty(), "{failing:#?}");
    assert!(passed > 80, "{passed} scenarios judged");
}

#[test]
fn a_depth_bug_in_the_silent_core_is_caught_by_the_model_side_depth_oracle() {
    let verdict = check(
        &Silent { bug: Some(Bug::Depth), extra: Extra::None },
        &scenario("roku/agent-child-fresh-history-and-tools.json"),
    );
    let what: Vec<&str> = verdict.failures().iter().map(|f| f.what.as_str()).collect();
    assert!(
        what.iter().any(|w| w.starts_with("model-side depth (oracle.model-side.depth): main/1 request #1")
            && w.contains("an agent at the depth limit (1) is offered the spawn tool `Agent`")),
        "{what:#?}"
    );
}

#[test]
fn a_history_splice_in_the_silent_core_is_caught_by_the_append_only_oracle() {
    let verdict =
        check(&Silent { bug: Some(Bug::Splice), extra: Extra::None }, &scenario("roku/three-tools-run-in-order.json"));
    let what: Vec<&str> = verdict.failures().iter().map(|f| f.what.as_str()).collect();
    assert!(
        what.iter().any(|w| w.starts_with("model-side append-only (oracle.model-side.append-only): main request #")),
        "{what:#?}"
    );
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/model-side").join(name)
}

#[test]
fn a_declared_side_request_is_answered_and_put_down_to_no_agent() {
    let verdict = check(&Silent { bug: None, extra: Extra::Titles }, &fixture("side-request-title.json"));
    verdict.assert_passed();
    let side = verdict.run().unwrap().model_side.as_ref().unwrap();
    assert_eq!(side.attributions[0], Attribution::Side(0));
    assert_eq!(side.exchanges[0].reply.as_ref().map(|r| r.content.as_str()), Some("Investigation"));
    let aliases: Vec<&str> = (1..side.exchanges.len()).filter_map(|i| side.alias(i)).map(|a| a.as_str()).collect();
    assert_eq!(aliases, ["main", "main/1", "main"]);
}

#[test]
fn an_undeclared_side_request_is_the_finding_unattributed_request() {
    let text = std::fs::read_to_string(fixture("side-request-title.json")).unwrap();
    let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json["session"].as_object_mut().unwrap().remove("side_requests");
    let scenario = rehearsal::scenario::parse(Path::new("undeclared.json"), &json.to_string()).unwrap();
    let verdict = Runner::new().on(&Silent { bug: None, extra: Extra::Titles }).verify(&scenario, &[]);
    let what: Vec<&str> = verdict.failures().iter().map(|f| f.what.as_str()).collect();
    assert!(
        what.iter().any(|w| w.starts_with(
            "model-side attribution (oracle.model-side.attribution): ? (exchange 1): unattributed request:"
        )),
        "{what:#?}"
    );
    // The fuzzer reads the halt's kind, not its text: a finding, never an invalid case.
    use rehearsal::internals::fuzz::{self, CaseResult};
    let silent = Silent { bug: None, extra: Extra::Titles };
    let schedule = rehearsal::internals::harness::schedule::Schedule::default_order();
    match fuzz::check_on(&silent, &scenario, schedule, rehearsal::internals::oracles::model_side::Judge::ModelSide) {
        CaseResult::Violates(v) => assert!(v[0].message.contains("unattributed request"), "{v:#?}"),
        other => panic!("expected the attribution finding, got {other:?}"),
    }
}

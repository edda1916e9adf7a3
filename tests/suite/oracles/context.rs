//! Oracle `context` (`oracle.context.*`, docs/rules/core.md): the request id, session id, model,
//! reasoning effort, memory, system prompt and profile each request carries.

use std::sync::Arc;

use super::runs::{BUB_TEXTS, ROKU_STEER, assert_has, request_of};
use super::tampered;

#[test]
fn context_foreground_child_without_its_parents_model() {
    let failures = tampered(ROKU_STEER, |run| request_of(run, "main/1", 0).request.model = None);
    assert_has(
        &failures,
        r#"oracle context: main/1 at 0.100s: main/1's request carries model none; the rules give "m-large""#,
    );
}

#[test]
fn context_foreground_child_with_its_parents_request_id() {
    let failures = tampered(ROKU_STEER, |run| request_of(run, "main/1", 1).request.request_id = Arc::from("ticket-7"));
    assert_has(
        &failures,
        r#"oracle context: main/1 at 0.210s: main/1's request carries request id "ticket-7"; the rules give "ticket-7-sub""#,
    );
}

#[test]
fn context_foreground_child_without_memory() {
    let failures = tampered(ROKU_STEER, |run| request_of(run, "main/1", 0).request.memory = Arc::from(Vec::new()));
    assert_has(
        &failures,
        r#"oracle context: main/1 at 0.100s: main/1's request carries memory []; the rules give ["Be brief."]"#,
    );
}

#[test]
fn context_root_with_another_session_id() {
    let failures = tampered(ROKU_STEER, |run| request_of(run, "main", 1).request.session_id = Arc::from("s-10"));
    assert_has(
        &failures,
        r#"oracle context: main at 0.310s: main's request carries session id "s-10"; the rules give "s-9""#,
    );
}

#[test]
fn context_profile_child_with_its_parents_model() {
    let failures = tampered(BUB_TEXTS, |run| request_of(run, "main/1", 0).request.model = Some(Arc::from("model-a")));
    assert_has(
        &failures,
        r#"oracle context: main/1 at 0.100s: main/1's request carries model "model-a"; the rules give "model-b""#,
    );
}

#[test]
fn context_child_naming_no_model_gets_none() {
    let failures = tampered(BUB_TEXTS, |run| request_of(run, "main/2", 1).request.model = None);
    assert_has(
        &failures,
        r#"oracle context: main/2 at 0.210s: main/2's request carries model none; the rules give "model-a""#,
    );
}

#[test]
fn context_profile_body_missing_from_the_system_prompt() {
    let failures = tampered(BUB_TEXTS, |run| {
        request_of(run, "main/1", 0).request.system = Arc::from("You help.\n\nSkills: search, math")
    });
    assert_has(
        &failures,
        r#"oracle context: main/1 at 0.100s: main/1's request carries system prompt "You help.\n\nSkills: search, math"; the rules give "You help.\n\nBe quick.\n\nSkills: search, math""#,
    );
}

#[test]
fn context_narrowed_skills_not_narrowed() {
    let failures = tampered(BUB_TEXTS, |run| {
        request_of(run, "main/2", 0).request.system = Arc::from("You help.\n\nSkills: search, math")
    });
    assert_has(
        &failures,
        r#"oracle context: main/2 at 0.100s: main/2's request carries system prompt "You help.\n\nSkills: search, math"; the rules give "You help.\n\nSkills: math""#,
    );
}

// `oracle.context.profiles-as-written`: the profiles the core was given are the scenario's.

/// A bub scenario with a profile file written into it and an inline profile; the root only
/// answers, so every other clause judges the run alike whatever profiles the core was given.
const PROFILE_SOURCES: &str = r#"{
  "name": "profile-sources",
  "rules": {"preset": "bub"},
  "profile_files": {
    "helper.md": "---\ndescription: Looks things up\ntools: Read, Grep\nskills: [review]\ntimeout_seconds: 2\n---\nBe quick.\n"
  },
  "profiles": [{"name": "inline", "description": "Declared here", "tools": ["Read"], "skills": ["review"]}],
  "lanes": [{"agent": "main", "replies": [{"text": "done"}]}],
  "turns": [{"user": "go"}]
}"#;

/// Runs [`PROFILE_SOURCES`] with the profiles as the loader reads them (which must pass), then
/// with them misread as `misread` says, and returns the context oracle's failures.
fn misread(misread: impl FnOnce(&mut Vec<rehearsal::sut::Profile>)) -> Vec<String> {
    use std::path::Path;

    use rehearsal::runner;
    let scenario = super::parse(PROFILE_SOURCES);
    let mut profiles = rehearsal::load::resolve_profiles(&scenario, Path::new(".")).unwrap_or_else(|e| panic!("{e}"));
    let clean = runner::judge(
        &scenario,
        rehearsal::runner::Runner::new().run(
            &scenario,
            &profiles,
            rehearsal::internals::harness::schedule::Schedule::default_order(),
        ),
    );
    let what: Vec<&str> = clean.failures().iter().map(|f| f.what.as_str()).collect();
    assert!(clean.passed(), "the profiles as read fail: {what:#?}");
    misread(&mut profiles);
    let judged = runner::judge(
        &scenario,
        rehearsal::runner::Runner::new().run(
            &scenario,
            &profiles,
            rehearsal::internals::harness::schedule::Schedule::default_order(),
        ),
    );
    judged.failures().iter().map(|f| f.what.clone()).filter(|w| w.starts_with("oracle context")).collect()
}

fn assert_one(failures: &[String], want: &str) {
    assert!(
        failures.len() == 1 && failures[0].ends_with(want),
        "expected one failure ending {want:?}, got {failures:#?}"
    );
}

#[test]
fn profiles_file_named_with_its_extension() {
    let failures = misread(|p| p[0].name = "helper.md".into());
    assert_one(
        &failures,
        r#"profile_files["helper.md"] names a profile `helper`; the profiles the core read are `helper.md`, `inline`"#,
    );
}

#[test]
fn profiles_file_list_string_not_split() {
    let failures = misread(|p| p[0].tools = Some(vec!["Read, Grep".into()]));
    assert_one(
        &failures,
        r#"profile `helper`: the core read its tools as Some(["Read, Grep"]); profile_files["helper.md"] writes Some(["Read", "Grep"])"#,
    );
}

#[test]
fn profiles_file_seconds_read_as_milliseconds() {
    let failures = misread(|p| p[0].timeout = Some(std::time::Duration::from_millis(2)));
    assert_one(
        &failures,
        r#"profile `helper`: the core read its timeout_seconds as Some(2ms); profile_files["helper.md"] writes Some(2s)"#,
    );
}

#[test]
fn profiles_inline_skills_copied_from_tools() {
    let failures = misread(|p| p[1].skills = p[1].tools.clone());
    assert_one(
        &failures,
        r#"profile `inline`: the core read its skills as Some(["Read"]); profiles[0] writes Some(["review"])"#,
    );
}

#[test]
fn profiles_whitespace_around_a_body_is_not_judged() {
    let failures = misread(|p| p[0].body = "\n  Be quick.\n".into());
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn profiles_refused_by_the_loader_is_a_finding_only_if_they_read() {
    let scenario = super::parse(PROFILE_SOURCES);
    let refused = rehearsal::internals::oracles::profiles_refused(&scenario.profile_files, &scenario.profiles, "no");
    assert!(refused.is_some_and(|v| v.message.contains("which read as written: no")));
    let mut broken = scenario.profile_files.clone();
    broken.insert("other.md".into(), "---\nmodel: m\n---\n".into());
    assert!(
        rehearsal::internals::oracles::profiles_refused(&broken, &scenario.profiles, "no").is_none(),
        "no description"
    );
}

#[test]
fn context_bub_preset_with_roku_s_agent_limit() {
    let failures = tampered(BUB_TEXTS, |run| run.rules.agent_timeout = Some(std::time::Duration::from_secs(120)));
    assert_has(
        &failures,
        "oracle context: main at 0.700s: rule `agent_timeout`: the core was given Some(120s); the preset gives None (bub preset)",
    );
}

#[test]
fn context_a_knob_the_scenario_sets_not_given() {
    let failures = tampered(BUB_TEXTS, |run| run.rules.child_step_cap = 10);
    assert_has(
        &failures,
        "oracle context: main at 0.700s: rule `child_step_cap`: the core was given 10; the scenario sets 3 (bub preset)",
    );
}

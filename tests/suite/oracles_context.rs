//! Oracle `context` (`oracle.context.*`, docs/rules/core.md): the request id, session id, model,
//! reasoning effort, memory, system prompt and profile each request carries.

use std::sync::Arc;

use super::oracles::tampered;
use super::oracles_runs::{BUB_TEXTS, ROKU_STEER, assert_has, request_of};

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

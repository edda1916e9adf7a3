//! Issue 38's blind set (`lab/model-side-blind/b38_*.patch`, designed by a helper that read
//! only the rules and the core): each test takes the clean core's model-side record of the
//! scenario written for a bug (`tests/fixtures/model-side-blind/b38_*.json`), shows that every
//! model-side oracle passes it, then changes the record as the patched core changes what the
//! model saw, and shows the oracle for the broken clause firing.

use std::path::Path;
use std::time::Duration;

use rehearsal::dialect::Dialect;
use rehearsal::internals::evidence::Setup;
use rehearsal::internals::evidence::attribution::{CallOutcome, ModelSide};
use rehearsal::internals::oracles::model_side::{self, Judge};
use rehearsal::rules::Rules;
use rehearsal::runner::Runner;
use rehearsal::sut::llm::{Message, Role};

/// The clean core's record of `name`, its rules and setup; every oracle passes it.
fn record(name: &str) -> (ModelSide, Rules, Setup) {
    record_of(&format!("tests/fixtures/model-side-blind/{name}.json"))
}

/// The clean core's record of the scenario at `file`, its rules and setup; every oracle passes it.
fn record_of(file: &str) -> (ModelSide, Rules, Setup) {
    let name = file;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    let (_, verdict) = Runner::new().judge(Judge::ModelSide).check_file(&path).unwrap();
    verdict.assert_passed();
    let run = verdict.run().unwrap();
    let out = (run.model_side.clone().unwrap(), run.rules.clone(), run.setup.clone());
    assert_eq!(findings(&out.0, &out.1, &out.2), Vec::<String>::new(), "{name}: the clean record passes");
    out
}

fn findings(side: &ModelSide, rules: &Rules, setup: &Setup) -> Vec<String> {
    model_side::check(side, rules, &Dialect::builtin("rehearsal").unwrap(), Some(setup))
        .iter()
        .map(ToString::to_string)
        .collect()
}

use super::model_side_blind::{edit, indices as of};

/// Replaces `from` by `to` in every tool result of `alias`'s requests.
fn rewrite_results(side: &mut ModelSide, alias: &str, from: &str, to: &str) {
    for i in of(side, alias) {
        edit(&mut side.exchanges[i], |ms| {
            for m in ms.iter_mut().filter(|m| m.role == Role::Tool) {
                m.content = m.content.replace(from, to);
            }
        });
    }
}

fn fired(got: &[String], clause: &str, text: &str) -> bool {
    got.iter().any(|f| f.contains(&format!("({clause})")) && f.contains(text))
}

/// `b38_allowed_tools_empty` (`bub.child.allowed-tools-empty`): `allowed_tools: []` read as a
/// grant of nothing leaves the child `final_answer` and `fail` only.
#[test]
fn child_tools_fires_on_an_empty_grant_read_as_nothing() {
    let (mut side, rules, setup) = record("b38_allowed_tools_empty");
    let first = of(&side, "main/1")[0];
    side.exchanges[first].tools = vec!["final_answer".into(), "fail".into()];
    let got = findings(&side, &rules, &setup);
    assert!(
        fired(
            &got,
            "oracle.model-side.child-tools",
            "is offered [final_answer, fail], where its call gives it [Read, Grep, final_answer, fail]"
        ),
        "{got:#?}"
    );
}

/// `b38_effort_falls_back` (`bub.child.model`): the child's reasoning effort is the parent's
/// model.
#[test]
fn context_fires_on_a_reasoning_effort_not_handed_down() {
    let (mut side, rules, setup) = record("b38_effort_falls_back");
    let first = of(&side, "main/1")[0];
    side.exchanges[first].reasoning_effort = Some("big-model".into());
    let got = findings(&side, &rules, &setup);
    assert!(fired(&got, "oracle.model-side.context", "asks for reasoning effort Some(\"big-model\")"), "{got:#?}");
}

/// `b38_wait_completion_order` (`bub.wait.result-shape`): the wait reads the slow task first.
#[test]
fn waiting_fires_on_results_out_of_completion_order() {
    let (mut side, rules, setup) = record("b38_wait_completion_order");
    let fast = r#"{"task_id":"sub-6e789e6a","status":"completed","result":"fast"}"#;
    let slow = r#"{"task_id":"sub-e220a839","status":"completed","result":"slow"}"#;
    rewrite_results(&mut side, "main", &format!("[{fast},{slow}]"), &format!("[{slow},{fast}]"));
    let got = findings(&side, &rules, &setup);
    assert!(
        fired(
            &got,
            "oracle.model-side.waiting",
            "reads sub-e220a839 (finished at 600 ms) before sub-6e789e6a (finished at 200 ms)"
        ),
        "{got:#?}"
    );
}

/// `b38_wait_zero_peeks` (`bub.wait.peek`): a wait of 0 seconds that waited for the result.
#[test]
fn waiting_fires_on_a_peek_that_waited() {
    let (mut side, rules, setup) = record("b38_wait_zero_peeks");
    let main = of(&side, "main");
    let after = main[2];
    side.exchanges[after].arrived += Duration::from_secs(5);
    let got = findings(&side, &rules, &setup);
    assert!(fired(&got, "oracle.model-side.waiting", "with a deadline of 0 s and answered only at"), "{got:#?}");
}

/// `b38_hold_ignores_unread` (`bub.turn.held-while-children`): the root's answer ends its turn
/// with the quick job's result unread; its last request (the one reading it) never comes.
#[test]
fn waiting_fires_on_a_turn_ended_with_a_result_unread() {
    let (mut side, rules, setup) = record("b38_hold_ignores_unread");
    let last = *of(&side, "main").last().unwrap();
    assert_eq!(last, side.exchanges.len() - 1, "the root's reading request is the run's last");
    side.exchanges.pop();
    side.attributions.pop();
    let got = findings(&side, &rules, &setup);
    assert!(fired(&got, "oracle.model-side.waiting", "was never read, with steps to spare"), "{got:#?}");
}

/// `b38_name_match_case` (`bub.spawn.name-matching`): `allowed_tools: ["read"]` refused though
/// the caller has `Read`.
#[test]
fn spawning_fires_on_a_name_refused_for_its_case() {
    let (mut side, rules, setup) = record("b38_name_match_case");
    let refusal = "unknown tool name(s): 'read'";
    let call = side.calls.iter_mut().find(|c| c.tool == "subagent").unwrap();
    let (running, _) = call.result.clone().unwrap();
    call.result = Some((refusal.into(), true));
    rewrite_results(&mut side, "main", &running, refusal);
    let got = findings(&side, &rules, &setup);
    assert!(fired(&got, "oracle.model-side.spawning", "names only tools its caller was offered"), "{got:#?}");
}

/// `b38_named_in_use_queued` (`bub.session.named-one-at-a-time`): the second call on `notes`
/// is accepted while the first call's task waits in the queue.
#[test]
fn sessions_fires_on_a_call_accepted_while_the_sessions_task_is_queued() {
    let (mut side, rules, setup) = record("b38_named_in_use_queued");
    let second = side.calls.iter_mut().filter(|c| c.tool == "subagent").nth(2).unwrap();
    assert!(matches!(second.outcome, CallOutcome::Refused), "{:?}", second.outcome);
    second.outcome = CallOutcome::Made;
    let got = findings(&side, &rules, &setup);
    assert!(
        fired(&got, "oracle.model-side.sessions", "was accepted while main/2's task on it was still queued"),
        "{got:#?}"
    );
}

/// `b38_slot_refill_order` (`bub.cap.slot-refilled-at-once`): job B starts only after the
/// slot job A freed at 200 ms has stayed idle.
#[test]
fn concurrency_fires_on_a_slot_left_idle_while_a_task_waits() {
    let (mut side, rules, setup) = record("b38_slot_refill_order");
    let b = of(&side, "main/2")[0];
    side.exchanges[b].arrived += Duration::from_millis(100);
    if let Some(r) = side.exchanges[b].replied.as_mut() {
        *r += Duration::from_millis(100);
    }
    let got = findings(&side, &rules, &setup);
    assert!(
        fired(&got, "oracle.model-side.concurrency", "0 of 1 slots were in use, yet task sub-6e789e6a waited"),
        "{got:#?}"
    );
}

/// `b38_timeout_fraction` (`core.time.seconds-format`, `bub.timeout.exact`): a limit of 1.5 s
/// cut to 1 s, read from the wait's answer.
#[test]
fn timeouts_fires_on_a_limit_cut_to_whole_seconds_in_a_wait_answer() {
    let (mut side, rules, setup) = record("b38_timeout_fraction");
    rewrite_results(
        &mut side,
        "main",
        r#""status":"completed","result":"finished""#,
        r#""status":"timed_out","result":"Timed out after 1 seconds.""#,
    );
    let got = findings(&side, &rules, &setup);
    assert!(
        fired(
            &got,
            "oracle.model-side.timeouts",
            "the timeout is reported as \"Timed out after 1 seconds.\", expected \"Timed out after 1.5 seconds.\""
        ),
        "{got:#?}"
    );
}

/// `oracle.model-side.context` (`bub.child.request-id`, `roku.child.context-passed`): the ids a
/// child's request carries, in process. Not one of the blind set's bugs: the record of
/// `b38_effort_falls_back` serves, its child's request id changed to Roku's `-sub` form.
#[test]
fn context_fires_on_a_background_childs_request_id_without_its_task_id() {
    let (mut side, rules, setup) = record("b38_effort_falls_back");
    let first = of(&side, "main/1")[0];
    let (id, session) = side.exchanges[first].ids.clone().expect("ids in process");
    assert!(id.starts_with("req-1-sub-"), "{id}");
    side.exchanges[first].ids = Some(("req-1-sub".into(), session));
    let got = findings(&side, &rules, &setup);
    assert!(fired(&got, "oracle.model-side.context", "carries request id \"req-1-sub\""), "{got:#?}");
}

/// `oracle.model-side.quit` (`bub.quit.cancels-children`; semantic mutant 327, quitting lets the
/// running tasks finish): the session's last turn fails while a task runs; its child given its
/// reply after that is the finding.
#[test]
fn quit_fires_on_a_child_answered_after_the_session_ended() {
    let (mut side, rules, setup) =
        record_of("tests/fixtures/model-side/quit-after-a-failed-turn-cancels-the-running-task.json");
    let child = of(&side, "main/1")[0];
    assert!(side.exchanges[child].reply.is_none(), "the clean core cancels the child before its reply");
    side.exchanges[child].reply = Some(Message::assistant("done at last", vec![]));
    side.exchanges[child].replied = Some(Duration::from_millis(510));
    let got = findings(&side, &rules, &setup);
    assert!(
        fired(
            &got,
            "oracle.model-side.quit",
            "main/1 is given the reply to its request #1 at 510 ms, after the session's last turn ended with `fail`"
        ),
        "{got:#?}"
    );
}

/// `oracle.model-side.task-ids` (`bub.task-id.seeded`; semantic mutant 330, a refused spawn
/// draws an id): the second task's id is not the seed's second; (`bub.spawn.session-key`;
/// mutant 332) a temp child's session named as the argument was given.
#[test]
fn task_ids_fires_on_an_id_off_the_seed_and_a_session_named_as_given() {
    let (side, rules, setup) = record("b38_wait_completion_order");
    let mut shifted = side.clone();
    let second = shifted.calls.iter_mut().filter(|c| c.tool == "subagent").nth(1).unwrap();
    assert_eq!(second.task_id.as_deref(), Some("sub-6e789e6a"));
    second.task_id = Some("sub-06c45d18".into());
    let got = findings(&shifted, &rules, &setup);
    assert!(
        fired(&got, "oracle.model-side.task-ids", "has the id sub-06c45d18, where seed 0 gives sub-6e789e6a"),
        "{got:#?}"
    );
    let mut renamed = side;
    let first = renamed.calls.iter_mut().find(|c| c.tool == "subagent").unwrap();
    let (text, error) = first.result.clone().unwrap();
    first.result = Some((text.replace("\"session\":\"temp/sub-e220a839\"", "\"session\":\"temp\""), error));
    let got = findings(&renamed, &rules, &setup);
    assert!(
        fired(&got, "oracle.model-side.task-ids", "names the session \"temp\"; its session is \"temp/sub-e220a839\""),
        "{got:#?}"
    );
}

/// `oracle.model-side.context` (`bub.profile.listed`; semantic mutant 336, profiles listed only
/// when the family is offered): the root's system prompt without its profile listing.
#[test]
fn context_fires_on_a_root_prompt_without_its_profile_listing() {
    let (mut side, rules, setup) = record_of("scenarios/bub/allowed-skills-narrow-from-call-or-profile.json");
    assert!(!setup.profiles.is_empty() && rules.subagent_tools);
    let root = of(&side, "main")[0];
    let system = side.exchanges[root].system.to_string();
    let listing = "Agent profiles (pass the name as `agent` to `subagent`):";
    assert!(system.contains(listing), "{system}");
    side.exchanges[root].system = system.replace(listing, "").into();
    let got = findings(&side, &rules, &setup);
    assert!(
        fired(&got, "oracle.model-side.context", "has a system prompt without the line \"Agent profiles"),
        "{got:#?}"
    );
}

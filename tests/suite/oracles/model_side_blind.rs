//! What the blind adversary of docs/model-side-blind.md found the model-side judge missing:
//! each test takes a clean run's model-side record of the scenario written for the bug
//! (`tests/fixtures/model-side-blind/`), shows that the oracles pass it, then changes the record
//! as the patched core (`lab/model-side-blind/NAME.patch`) changes what the model saw, and
//! shows the oracle for the broken clause firing.

use std::path::Path;
use std::time::Duration;

use rehearsal::dialect::Dialect;
use rehearsal::internals::evidence::attribution::{Attribution, ModelExchange, ModelSide};
use rehearsal::internals::oracles::model_side::{self, Judge};
use rehearsal::rules::Rules;
use rehearsal::runner::Runner;
use rehearsal::sut::llm::{Message, Role, Transcript};

/// The clean core's model-side record of the blind scenario `name`, which passes.
fn record(name: &str) -> (ModelSide, Rules) {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/model-side-blind").join(format!("{name}.json"));
    let (_, verdict) = Runner::new().judge(Judge::ModelSide).check_file(&path).unwrap();
    verdict.assert_passed();
    (verdict.run().unwrap().model_side.clone().unwrap(), verdict.run().unwrap().rules.clone())
}

fn findings(side: &ModelSide, rules: &Rules) -> Vec<String> {
    model_side::check(side, rules, &Dialect::builtin("rehearsal").unwrap(), None)
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// The exchanges put down to `alias`, in arrival order.
pub(super) fn indices(side: &ModelSide, alias: &str) -> Vec<usize> {
    (0..side.exchanges.len()).filter(|&i| side.alias(i).is_some_and(|a| a.as_str() == alias)).collect()
}

/// Changes exchange `e`'s messages with `f`.
pub(super) fn edit(e: &mut ModelExchange, f: impl Fn(&mut Vec<Message>)) {
    let mut messages: Vec<Message> = e.messages.iter().cloned().collect();
    f(&mut messages);
    e.messages = Transcript::from(messages);
}

/// `timeout_status_failed`: the timed-out task is notified with status `failed`
/// (`bub.timeout.outcome`: "a stopped child's task ends with status `timed_out`").
#[test]
fn timeouts_fires_on_a_timed_out_task_delivered_as_failed() {
    let (mut side, rules) = record("timeout_status_failed");
    assert!(findings(&side, &rules).is_empty());
    let mut changed = false;
    for i in indices(&side, "main") {
        edit(&mut side.exchanges[i], |ms| {
            for m in ms.iter_mut().filter(|m| m.role == Role::User) {
                m.content = m.content.replace("status=\"timed_out\"", "status=\"failed\"");
            }
        });
        changed |= side.exchanges[i].messages.iter().any(|m| m.content.contains("status=\"failed\""));
    }
    assert!(changed, "the record holds the timed-out notification");
    let got = findings(&side, &rules);
    assert!(
        got.iter().any(|f| f.starts_with("model-side timeouts (oracle.model-side.timeouts): main request #3")
            && f.contains("with status `failed`; a timed-out task's status is `timed_out`")),
        "{got:#?}"
    );
    // The truncation oracle does not take the runtime's timeout text for a wrong result.
    assert!(!got.iter().any(|f| f.contains("oracle.model-side.truncation")), "{got:#?}");
}

/// `nudge_before_result`: the nudge stands between the failing call and its result
/// (`roku.nudge.after-regular-call`: the nudge comes after the call's result).
#[test]
fn call_results_fires_on_a_nudge_before_the_result() {
    let (mut side, rules) = record("nudge_before_result");
    assert!(findings(&side, &rules).is_empty());
    let i = indices(&side, "main")[1];
    edit(&mut side.exchanges[i], |ms| {
        let k = ms.iter().position(|m| m.role == Role::Tool).expect("the call's result");
        assert_eq!(ms[k + 1].role, Role::User, "the nudge follows the result");
        ms.swap(k, k + 1);
    });
    let got = findings(&side, &rules);
    assert!(
        got.iter().any(|f| f.starts_with("model-side call-results (oracle.model-side.call-results): main request #2")
            && f.contains("stands between the assistant message 1 and the results of its calls")),
        "{got:#?}"
    );
}

/// `timeout_child_leaks`: the timed-out child keeps asking and gives a late final reply. The
/// timeouts oracle fires; the truncation oracle does not compare the parent's timeout result
/// with that late reply.
#[test]
fn a_late_final_reply_is_a_timeout_finding_not_a_truncation_one() {
    let (mut side, rules) = record("timeout_child_leaks");
    assert!(findings(&side, &rules).is_empty());
    let child = indices(&side, "main/1");
    let &last = child.last().unwrap();
    let Attribution::Agent(mut a) = side.attributions[last].clone() else { panic!("main/1's request") };
    // The clean core drops the child at its limit (1 s), before its second reply; the patched
    // one gives it that reply at 1.2 s and lets it ask once more.
    let at = Duration::from_millis(1200);
    let reply = side.exchanges[child[0]].reply.clone().expect("the child's first reply");
    side.exchanges[last].reply = Some(reply.clone());
    side.exchanges[last].replied = Some(at);
    let mut late = side.exchanges[last].clone();
    let id = reply.tool_calls[0].id.clone();
    edit(&mut late, |ms| {
        ms.push(reply.clone());
        ms.push(Message::tool(&id, "b", false));
    });
    late.arrived = at;
    late.replied = Some(at + Duration::from_millis(10));
    late.reply = Some(Message::assistant("Finished late.", Vec::new()));
    a.number += 1;
    side.exchanges.push(late);
    side.attributions.push(Attribution::Agent(a));
    let got = findings(&side, &rules);
    assert!(
        got.iter().any(|f| f.contains("(oracle.model-side.timeouts): main/1") && f.contains("after its time limit")),
        "{got:#?}"
    );
    assert!(!got.iter().any(|f| f.contains("oracle.model-side.truncation")), "{got:#?}");
}

/// `grant_ignores_remaining`: the root (budget 4) spawns after no other call, so its child's
/// grant is min(4 - 1, 10) = 3, and the clean core's child asks 3 times. Judged as if the root
/// had started with 3 steps (grant 2), the same run is a child asking past its grant, as the
/// patched core's child (granted the whole cap) does; `child_step_cap` alone would not see it.
#[test]
fn budget_bounds_a_child_by_its_grant_from_the_parents_replies() {
    let (side, rules) = record("grant_ignores_remaining");
    assert!(findings(&side, &rules).is_empty());
    assert_eq!(indices(&side, "main/1").len(), 3, "the child uses its whole grant");
    let tighter = Rules { root_step_budget: rules.root_step_budget - 1, ..rules.clone() };
    let got = findings(&side, &tighter);
    assert!(
        got.iter().any(|f| f.starts_with("model-side budget (oracle.model-side.budget): main/1 request #3")
            && f.contains(
                "its grant is at most 2: min(what main had left after the spawn cost, at most 2, child_step_cap 10;"
            )),
        "{got:#?}"
    );
}

/// `continuation_drops_unread`: `main/1` gives its final reply `Noted.`, then the root's send
/// continues its task; the patched core drops the first run's unread result, so no request of
/// the root holds `Noted.` (`bub.delivery.before-next-step`).
#[test]
fn delivery_fires_on_a_finished_run_never_delivered() {
    let (mut side, rules) = record("continuation_drops_unread");
    assert!(findings(&side, &rules).is_empty());
    let noted = |m: &Message| m.role == Role::User && m.content.contains("status=\"completed\">\nNoted.\n");
    let mut dropped = 0;
    for i in indices(&side, "main") {
        dropped += side.exchanges[i].messages.iter().filter(|m| noted(m)).count();
        edit(&mut side.exchanges[i], |ms| ms.retain(|m| !noted(m)));
    }
    assert!(dropped > 0, "the clean core delivers `Noted.`");
    let got = findings(&side, &rules);
    assert!(
        got.iter().any(|f| f.starts_with("model-side delivery (oracle.model-side.delivery): main request #3")
            && f.contains("holds 0 result(s) of task")
            && f.contains("but main/1 gave 1 final reply before it")),
        "{got:#?}"
    );
}

/// Over the wire, a final reply's time is when the server gave it, not when the runtime took
/// it in, so the same record on wall times is not judged by "before the parent's next
/// request": the example Python runtime under `rehearsal drive` took its children's results in
/// one request later than their replies' wall times, and was failed for it
/// (examples/py_runtime/scenarios/cap-four-children-at-once.json).
#[test]
fn delivery_does_not_order_by_wall_times() {
    let (mut side, rules) = record("continuation_drops_unread");
    let noted = |m: &Message| m.role == Role::User && m.content.contains("status=\"completed\">\nNoted.\n");
    for i in indices(&side, "main") {
        edit(&mut side.exchanges[i], |ms| ms.retain(|m| !noted(m)));
    }
    let lower_bound = |got: &[String]| got.iter().any(|f| f.contains("but main/1 gave 1 final reply before it"));
    assert!(lower_bound(&findings(&side, &rules)), "on virtual times the lower bound judges");
    side.wall_times = true;
    let got = findings(&side, &rules);
    assert!(!lower_bound(&got), "{got:#?}");
}

/// `notification_before_steering`: the result of `main/1` and the steering message both
/// arrive while the root waits; the patched core takes the result in first, so the root's
/// request 3 ends with the steering message, not the notification
/// (`bub.delivery.before-next-step`).
#[test]
fn delivery_fires_on_a_notification_before_a_steering_message() {
    let (mut side, rules) = record("notification_before_steering");
    assert!(findings(&side, &rules).is_empty());
    let i = indices(&side, "main")[2];
    edit(&mut side.exchanges[i], |ms| {
        let n = ms.len();
        assert!(ms[n - 1].content.starts_with("<subagent-notification"), "{:?}", ms[n - 1]);
        assert_eq!(ms[n - 2].content, "Also check the tests.");
        ms.swap(n - 2, n - 1);
    });
    let got = findings(&side, &rules);
    assert!(
        got.iter().any(|f| f.starts_with("model-side delivery (oracle.model-side.delivery): main request #3")
            && f.contains("before the user message User \"Also check the tests.\"")),
        "{got:#?}"
    );
}

/// `depth_zero_root_spawns`: with `depth_limit` 0 the root calls the unoffered `subagent`
/// anyway; the patched core starts a child and answers with its task. The depth oracle names
/// the broken clause, not only the attribution (`core.depth.subagent-root-only`).
#[test]
fn depth_fires_on_an_unoffered_spawn_call_that_starts_a_task_at_limit_zero() {
    let (mut side, rules) = record("depth_zero_root_spawns");
    assert!(findings(&side, &rules).is_empty());
    let c = side.calls.iter_mut().find(|c| c.tool == "subagent").expect("the root's subagent call");
    c.result = Some((r#"{"task_id":"sub-e220a839","status":"running"}"#.to_string(), false));
    let got = findings(&side, &rules);
    assert!(
        got.iter().any(|f| f.starts_with("model-side depth (oracle.model-side.depth): main request #1")
            && f.contains("made at the depth limit 0, was answered")),
        "{got:#?}"
    );
}

/// The same bug as the run shows it: the child's request comes before the root's next one, so
/// no result is seen and the request is unattributed. It begins with the prompt of the call
/// made at the limit, and the depth oracle names that.
#[test]
fn depth_fires_on_an_unattributed_request_of_a_call_made_at_the_limit() {
    let (mut side, rules) = record("depth_zero_root_spawns");
    let c = side.calls.iter().find(|c| c.tool == "subagent").expect("the root's subagent call").clone();
    let mut child = side.exchanges[0].clone();
    child.messages = Transcript::from(vec![Message::user(c.prompt.clone())]);
    side.exchanges.push(child);
    side.attributions.push(Attribution::Unattributed("tampered".into()));
    let got = findings(&side, &rules);
    assert!(
        got.iter().any(|f| f.starts_with("model-side depth (oracle.model-side.depth): ?")
            && f.contains("made at the depth limit 0: a child at depth 1 asks the model")),
        "{got:#?}"
    );
}

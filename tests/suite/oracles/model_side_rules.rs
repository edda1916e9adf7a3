//! Model-side oracles for rules the traffic shows (issue 38), each fed hand-built exchanges:
//! firing on the violating shape, silent on the correct one.

use rehearsal::dialect::Dialect;
use rehearsal::internals::oracles::model_side;
use rehearsal::rules::Rules;
use rehearsal::sut::llm::Message;

use super::attribution::{Talk, call};

fn findings(t: Talk, dialect: &Dialect, rules: &Rules) -> Vec<String> {
    model_side::check(&t.finish(), rules, dialect, None).iter().map(ToString::to_string).collect()
}

/// `oracle.model-side.terminal`: `[Read, final_answer]` ends the loop and runs neither call;
/// a next request answering the `Read` (or the `final_answer`) is the finding, a new turn is not.
#[test]
fn a_terminal_call_answered_as_a_tool_fires_and_a_new_turn_does_not() {
    let dialect = Dialect::builtin("roku").unwrap();
    for (next, fires) in [
        (Message::tool("r1", "file contents", false), true),
        (Message::tool("f1", "Unknown tool name: final_answer.", true), true),
        (Message::user("Next question."), false),
    ] {
        let mut t = Talk::new(dialect.clone());
        let u1 = Message::user("Read it and answer.");
        let reply = Message::assistant(
            "",
            vec![
                call("r1", "Read", serde_json::json!({"path": "a"})),
                call("f1", "final_answer", serde_json::json!({"message": "done"})),
            ],
        );
        let (n, _) = t.ask(std::slice::from_ref(&u1), &["Read", "final_answer", "fail"]);
        t.reply(n, &reply);
        t.ask(&[u1, reply, next.clone()], &["Read", "final_answer", "fail"]);
        let got = findings(t, &dialect, &Rules::roku());
        let fired = got.iter().any(|f| {
            f.starts_with("model-side terminal (oracle.model-side.terminal): main request #2")
                && f.contains("holds the terminal call `final_answer`")
        });
        assert_eq!(fired, fires, "{next:?}: {got:#?}");
    }
}

/// `oracle.model-side.terminal`: a held root woken by a notification answers its `final_answer`
/// call with a placeholder, as Chat Completions demands before the conversation goes on (found
/// by `fuzz --runtime` on py_runtime's correct mode): not a run. The same answer with nothing
/// new beside it is the loop going on as if the call were a tool.
#[test]
fn a_held_final_answer_answered_beside_a_notification_is_not_a_run() {
    let dialect = Dialect::builtin("bub").unwrap();
    let notification =
        Message::user("<subagent-notification task_id=\"sub-1\" status=\"completed\">\ndone\n</subagent-notification>");
    for (notified, fires) in [(true, false), (false, true)] {
        let mut t = Talk::new(dialect.clone());
        let u1 = Message::user("Coordinate.");
        let reply = Message::assistant("", vec![call("f1", "final_answer", serde_json::json!({"message": "ok"}))]);
        let (n, _) = t.ask(std::slice::from_ref(&u1), &["final_answer", "fail"]);
        t.reply(n, &reply);
        let mut next = vec![u1, reply, Message::tool("f1", "not run: the reply ended the loop", false)];
        if notified {
            next.push(notification.clone());
        }
        t.ask(&next, &["final_answer", "fail"]);
        let got = findings(t, &dialect, &Rules::bub());
        let fired = got.iter().any(|f| f.contains("(oracle.model-side.terminal)"));
        assert_eq!(fired, fires, "notified: {notified}: {got:#?}");
    }
}

/// `oracle.model-side.terminal`: asking again with nothing new after a terminal call.
#[test]
fn asking_again_with_nothing_new_after_a_terminal_call_fires() {
    let dialect = Dialect::builtin("roku").unwrap();
    let mut t = Talk::new(dialect.clone());
    let u1 = Message::user("Answer.");
    let reply = Message::assistant("", vec![call("f1", "fail", serde_json::json!({"reason": "no"}))]);
    let (n, _) = t.ask(std::slice::from_ref(&u1), &["fail"]);
    t.reply(n, &reply);
    t.ask(&[u1, reply], &["fail"]);
    let got = findings(t, &dialect, &Rules::roku());
    assert!(
        got.iter().any(|f| f.contains("(oracle.model-side.terminal)") && f.contains("asks again with nothing new")),
        "{got:#?}"
    );
}

/// `oracle.model-side.timeouts`, `core.time.finish-at-limit-wins`: a child whose final reply was
/// due exactly at its limit finished; its parent told it timed out is the finding. A reply due
/// after the limit makes the same timeout right.
#[test]
fn a_timeout_told_when_the_final_reply_was_due_at_the_limit_fires() {
    let dialect = Dialect::builtin("bub").unwrap();
    for (due_ms, fires) in [(1002, true), (1500, false)] {
        let mut t = Talk::new(dialect.clone());
        let u1 = Message::user("Start.");
        let spawn = Message::assistant(
            "",
            vec![call("c1", "subagent", serde_json::json!({"prompt": "Slow job.", "timeout_seconds": 1}))],
        );
        let (n, _) = t.ask(std::slice::from_ref(&u1), &["subagent", "subagent.wait"]);
        t.reply(n, &spawn);
        let started = Message::tool("c1", "{\"task_id\":\"t1\",\"status\":\"running\"}", false);
        let (n, _) = t.ask(&[u1.clone(), spawn.clone(), started.clone()], &["subagent", "subagent.wait"]);
        let wait = Message::assistant("", vec![call("w1", "subagent.wait", serde_json::json!({}))]);
        t.reply(n, &wait);
        // The child asks at 2 ms; its final reply is due at `due_ms` (the limit ends at 1002 ms).
        t.at(2);
        let (child, _) = t.ask(&[Message::user("Slow job.")], &[]);
        t.ends_loop_due(child, due_ms);
        t.at(1002);
        let told = Message::tool(
            "w1",
            "[{\"task_id\":\"t1\",\"status\":\"timed_out\",\"result\":\"Timed out after 1 seconds.\"}]",
            false,
        );
        let notice = Message::user(
            "<subagent-notification task_id=\"t1\" status=\"timed_out\">\nTimed out after 1 seconds.\n</subagent-notification>",
        );
        t.ask(&[u1, spawn, started, wait, told, notice], &["subagent", "subagent.wait"]);
        let got = findings(t, &dialect, &Rules::bub());
        let fired =
            got.iter().any(|f| f.contains("(oracle.model-side.timeouts)") && f.contains("a reply at the limit wins"));
        assert_eq!(fired, fires, "due at {due_ms} ms: {got:#?}");
    }
}

/// `oracle.model-side.sessions`: two runs on one named session never overlap. The second run
/// asking while the first has not ended fires; asking after the first's final reply (from the
/// session's record) does not.
#[test]
fn a_second_run_on_a_named_session_while_the_first_is_open_fires() {
    let dialect = Dialect::builtin("bub").unwrap();
    for (after, fires) in [(false, true), (true, false)] {
        let mut t = Talk::new(dialect.clone());
        let u1 = Message::user("Start.");
        let spawn = Message::assistant(
            "",
            vec![
                call("c1", "subagent", serde_json::json!({"prompt": "Note alpha.", "session": "notes"})),
                call("c2", "subagent", serde_json::json!({"prompt": "Note beta.", "session": "notes"})),
            ],
        );
        let (n, _) = t.ask(std::slice::from_ref(&u1), &["subagent"]);
        t.reply(n, &spawn);
        let alpha = Message::user("Note alpha.");
        let (a, _) = t.ask(std::slice::from_ref(&alpha), &[]);
        let noted = Message::assistant("alpha noted", Vec::new());
        if after {
            t.reply(a, &noted);
            t.ask(&[alpha, noted, Message::user("Note beta.")], &[]);
        } else {
            t.ask(&[Message::user("Note beta.")], &[]);
            t.at(10);
            t.reply(a, &noted);
        }
        let got = findings(t, &dialect, &Rules::bub());
        let fired = got.iter().any(|f| {
            f.starts_with("model-side sessions (oracle.model-side.sessions): main/2 request #1")
                && f.contains("while main/1's run on it")
        });
        assert_eq!(fired, fires, "second run after the first ended: {after}: {got:#?}");
    }
}

/// `oracle.model-side.child-tools`: a child narrowed to `Read` is offered `Bash` (outside its
/// grant), or a tool its parent lacked: each fires; offered `Read` and the terminal tools, or
/// `Agent` (offered by depth, not by grant: the limit is 2), it does not; `ask_user`, which only
/// the root is offered, fires.
#[test]
fn a_child_offered_a_tool_outside_its_grant_or_its_parents_fires() {
    let dialect = Dialect::builtin("rehearsal").unwrap();
    for (offered, fires) in [
        (&["Read", "Bash", "final_answer", "fail"][..], true),
        (&["Read", "Write", "final_answer", "fail"][..], true),
        (&["Read", "final_answer", "ask_user", "fail"][..], true),
        (&["Read", "final_answer", "fail", "Agent"][..], false),
    ] {
        let mut t = Talk::new(dialect.clone());
        let u1 = Message::user("Start.");
        let spawn = Message::assistant(
            "",
            vec![call("c1", "subagent", serde_json::json!({"prompt": "Read only.", "allowed_tools": ["Read"]}))],
        );
        let (n, _) = t
            .ask(std::slice::from_ref(&u1), &["Read", "Bash", "final_answer", "ask_user", "fail", "Agent", "subagent"]);
        t.reply(n, &spawn);
        t.ask(&[Message::user("Read only.")], offered);
        // With a depth limit of 2 a child is below the limit and is offered `Agent`.
        let got = findings(t, &dialect, &Rules { depth_limit: 2, ..Rules::bub() });
        let fired = got
            .iter()
            .any(|f| f.starts_with("model-side child-tools (oracle.model-side.child-tools): main/1 request #1"));
        assert_eq!(fired, fires, "{offered:?}: {got:#?}");
    }
}

/// The nudge for budgets `(steps, recovery)`, as `roku.nudge.after-regular-call` writes it.
fn nudge(steps: u32, recovery: u32) -> Message {
    Message::user(format!(
        "System: step budget exhausted (remaining: {steps}, recovery: {recovery}). Please call final_answer or fail now."
    ))
}

/// The root with `root_step_budget` 2 makes two `Read` calls, one per reply; the second leaves
/// the step budget at 0. `after_first` and `after_second` are what follows each result.
fn two_reads(
    after_first: Option<Message>,
    after_second: Option<Message>,
    first_failed: bool,
    shown: bool,
) -> Vec<String> {
    let dialect = Dialect::builtin("roku").unwrap();
    let rules = Rules { root_step_budget: 2, recovery_budget: 1, ..Rules::roku() };
    let tools = ["Read", "final_answer", "fail"];
    let mut t = Talk::new(dialect.clone());
    let mut history = vec![Message::user("Read two files.")];
    let (n, _) = t.ask(&history, &tools);
    for (k, after) in [(1, after_first), (2, after_second)] {
        let reply = Message::assistant("", vec![call(&format!("r{k}"), "Read", serde_json::json!({"path": k}))]);
        t.reply(n + k - 1, &reply);
        history.push(reply);
        history.push(Message::tool(&format!("r{k}"), "contents", k == 1 && first_failed));
        history.extend(after);
        t.ask(&history, &tools);
    }
    let mut side = t.finish();
    side.errors_shown = shown;
    model_side::check(&side, &rules, &dialect, None).iter().map(ToString::to_string).collect()
}

/// `oracle.model-side.nudges` (`roku.nudge.after-regular-call`): the call that spends the last
/// step is followed by the nudge printing what is left; a missing nudge, one with other numbers,
/// one after a call that left both budgets above 0, and one in another text are findings.
#[test]
fn a_nudge_is_there_exactly_when_due_with_the_budgets_left() {
    let ours = |f: &&String| f.contains("(oracle.model-side.nudges)");
    assert_eq!(two_reads(None, Some(nudge(0, 1)), false, true).iter().filter(ours).count(), 0);
    let missing = two_reads(None, None, false, true);
    assert!(
        missing
            .iter()
            .any(|f| ours(&f)
                && f.contains("no nudge follows the result of `Read`, which leaves remaining 0, recovery 1")),
        "{missing:#?}"
    );
    let wrong = two_reads(None, Some(nudge(0, 5)), false, true);
    assert!(
        wrong.iter().any(|f| ours(&f)
            && f.contains(
                "prints remaining 0, recovery 5, where the calls the model made leave remaining 0, recovery 1"
            )),
        "{wrong:#?}"
    );
    let early = two_reads(Some(nudge(1, 1)), Some(nudge(0, 1)), false, true);
    assert!(
        early.iter().any(|f| ours(&f) && f.contains("which leaves remaining 1, recovery 1: neither budget is at 0")),
        "{early:#?}"
    );
    let garbled = Message::user("System: step budget exhausted (remaining: 0). Stop.");
    let text = two_reads(None, Some(garbled), false, true);
    assert!(text.iter().any(|f| ours(&f) && f.contains("is not the rule's text")), "{text:#?}");
}

/// `roku.calls.failed-tool-recovery`: a failed `Read` spends the only recovery, so its nudge is
/// due at once. Where the API does not mark errors, both readings stand: the nudge is no finding
/// and neither is its absence; its numbers still must be one reading's.
#[test]
fn a_failed_call_spends_recovery_and_an_api_without_errors_leaves_both_readings() {
    let ours = |f: &&String| f.contains("(oracle.model-side.nudges)");
    let fired = two_reads(None, Some(nudge(0, 0)), true, true);
    assert!(
        fired
            .iter()
            .any(|f| ours(&f)
                && f.contains("no nudge follows the result of `Read`, which leaves remaining 1, recovery 0")),
        "{fired:#?}"
    );
    assert_eq!(two_reads(Some(nudge(1, 0)), Some(nudge(0, 0)), true, true).iter().filter(ours).count(), 0);
    assert_eq!(two_reads(None, Some(nudge(0, 1)), false, false).iter().filter(ours).count(), 0);
    assert_eq!(two_reads(Some(nudge(1, 0)), Some(nudge(0, 0)), true, false).iter().filter(ours).count(), 0);
    let wrong = two_reads(Some(nudge(1, 3)), Some(nudge(0, 0)), true, false);
    assert!(wrong.iter().any(|f| ours(&f) && f.contains("prints remaining 1, recovery 3")), "{wrong:#?}");
}

/// `roku.nudge.regular-only`, `core.spawn.no-nudge`, `roku.grant.min-remaining-cap`: an `Agent`
/// call that spends the parent's last steps on its grant is followed by no nudge; the child
/// counts from its grant, min(5 - 1, 10) = 4, so its fourth `Read` is the one nudged.
#[test]
fn no_nudge_after_a_spawn_and_the_child_counts_from_its_grant() {
    let dialect = Dialect::builtin("roku").unwrap();
    let rules = Rules { root_step_budget: 5, ..Rules::roku() };
    for (after_spawn, child_nudged_at) in [(None, 4), (Some(nudge(0, 5)), 4), (None, 3)] {
        let mut t = Talk::new(dialect.clone());
        let u1 = Message::user("Delegate.");
        let spawn = Message::assistant("", vec![call("a1", "Agent", serde_json::json!({"task": "Read four files."}))]);
        let (n, _) = t.ask(std::slice::from_ref(&u1), &["Read", "final_answer", "ask_user", "fail", "Agent"]);
        t.reply(n, &spawn);
        let mut child = vec![Message::user("Read four files.")];
        for k in 1..=4u32 {
            let (n, _) = t.ask(&child, &["Read", "final_answer", "fail"]);
            let read = Message::assistant("", vec![call(&format!("c{k}"), "Read", serde_json::json!({"path": k}))]);
            t.reply(n, &read);
            child.push(read);
            child.push(Message::tool(&format!("c{k}"), "contents", false));
            if k == child_nudged_at {
                child.push(nudge(4 - k, 5));
            }
        }
        let (n, _) = t.ask(&child, &["Read", "final_answer", "fail"]);
        t.reply(n, &Message::assistant("Read them.", vec![]));
        let mut root = vec![u1, spawn, Message::tool("a1", "Read them.", false)];
        root.extend(after_spawn.clone());
        t.ask(&root, &["Read", "final_answer", "ask_user", "fail", "Agent"]);
        let mut side = t.finish();
        side.errors_shown = true;
        let got: Vec<String> =
            model_side::check(&side, &rules, &dialect, None).iter().map(ToString::to_string).collect();
        let ours: Vec<&String> = got.iter().filter(|f| f.contains("(oracle.model-side.nudges)")).collect();
        match (after_spawn.is_some(), child_nudged_at) {
            (false, 4) => assert!(ours.is_empty(), "{got:#?}"),
            (true, _) => assert!(
                ours.iter().any(|f| f.contains("main request #2")
                    && f.contains("follows the result of `Agent`, which is no regular call")),
                "{got:#?}"
            ),
            _ => assert!(
                ours.iter().any(|f| f.contains("main/1")
                    && f.contains("which leaves remaining 1, recovery 5: neither budget is at 0")),
                "{got:#?}"
            ),
        }
    }
}

/// `oracle.model-side.steering` (`bub.steer.wakes-held-root`, `bub.steer.reaches-parent-only`):
/// the root answers while its child runs and is held; steering sent at 100 ms wakes it then.
/// Asking at 500 ms is late; asking without the message is a message lost.
#[test]
fn steering_wakes_a_held_root_at_once_and_reaches_its_next_request() {
    use rehearsal::internals::evidence::Setup;
    let dialect = Dialect::builtin("bub").unwrap();
    let setup = Setup {
        steering: vec![(std::time::Duration::from_millis(100), "Also check the tests.".into())],
        ..Setup::default()
    };
    let tools = ["subagent", "final_answer", "fail"];
    for (asks_at, with_message, expect) in [
        (99, true, None),
        (499, true, Some("asked again only at 500 ms")),
        (99, false, Some("is not in the root's first request since")),
    ] {
        let mut t = Talk::new(dialect.clone());
        let u1 = Message::user("Scan the repo.");
        let spawn = Message::assistant("", vec![call("s1", "subagent", serde_json::json!({"prompt": "Scan."}))]);
        let (n, _) = t.ask(std::slice::from_ref(&u1), &tools);
        t.reply(n, &spawn);
        let started = Message::tool("s1", "{\"task_id\":\"t1\",\"status\":\"running\"}", false);
        let mut root = vec![u1, spawn, started];
        let (n, _) = t.ask(&root, &tools);
        let answer = Message::assistant("Waiting for the scan.", vec![]);
        t.reply(n, &answer);
        let (c, _) = t.ask(&[Message::user("Scan.")], &["final_answer", "fail"]);
        t.at(900);
        t.reply(c, &Message::assistant("Clean.", vec![]));
        root.push(answer);
        if with_message {
            root.push(Message::user("Also check the tests."));
        }
        t.at(asks_at);
        t.ask(&root, &tools);
        let got: Vec<String> = model_side::check(&t.finish(), &Rules::bub(), &dialect, Some(&setup))
            .iter()
            .map(ToString::to_string)
            .collect();
        let ours: Vec<&String> = got.iter().filter(|f| f.contains("(oracle.model-side.steering)")).collect();
        match expect {
            None => assert!(ours.is_empty(), "{got:#?}"),
            Some(text) => assert!(ours.iter().any(|f| f.contains(text)), "{asks_at} {with_message}: {got:#?}"),
        }
    }
}

/// `oracle.model-side.approval` (`roku.approval.risk-classes` before `roku.approval.policy-deny`):
/// a `risk:safe` tool the policy lists is approved; its denial is the finding.
#[test]
fn a_safe_tool_denied_by_the_policy_fires() {
    use rehearsal::internals::evidence::Setup;
    let dialect = Dialect::builtin("roku").unwrap();
    let setup = Setup {
        risk_gate: true,
        policy_deny: vec!["Read".into()],
        tool_tags: [("Read".to_string(), vec!["risk:safe".to_string()])].into(),
        ..Setup::default()
    };
    for (result, fires) in
        [("contents", false), ("[Tool denied] Tool `Read` is denied by the current security policy.", true)]
    {
        let mut t = Talk::new(dialect.clone());
        let u1 = Message::user("Read it.");
        let read = Message::assistant("", vec![call("r1", "Read", serde_json::json!({"path": "a"}))]);
        let (n, _) = t.ask(std::slice::from_ref(&u1), &["Read", "final_answer", "fail"]);
        t.reply(n, &read);
        t.ask(&[u1, read, Message::tool("r1", result, result != "contents")], &["Read", "final_answer", "fail"]);
        let got: Vec<String> = model_side::check(&t.finish(), &Rules::roku(), &dialect, Some(&setup))
            .iter()
            .map(ToString::to_string)
            .collect();
        let fired = got.iter().any(|f| {
            f.contains("(oracle.model-side.approval)") && f.contains("is in the safe class (tagged risk:safe)")
        });
        assert_eq!(fired, fires, "{result}: {got:#?}");
    }
}

/// `oracle.model-side.approval` (`roku.agent.gate-first`): an `Agent` call on the policy's list
/// makes no child; a child asking the model after it is the finding, whether or not the call's
/// result was ever seen.
#[test]
fn a_child_made_by_a_spawn_call_the_policy_denies_fires() {
    use rehearsal::internals::evidence::Setup;
    let dialect = Dialect::builtin("roku").unwrap();
    for (listed, fires) in [(true, true), (false, false)] {
        let setup = Setup {
            risk_gate: true,
            policy_deny: if listed { vec!["Agent".into()] } else { Vec::new() },
            ..Setup::default()
        };
        let mut t = Talk::new(dialect.clone());
        let u1 = Message::user("Delegate.");
        let spawn = Message::assistant("", vec![call("a1", "Agent", serde_json::json!({"task": "Do it."}))]);
        let (n, _) = t.ask(std::slice::from_ref(&u1), &["final_answer", "ask_user", "fail", "Agent"]);
        t.reply(n, &spawn);
        t.ask(&[Message::user("Do it.")], &["final_answer", "fail"]);
        let got: Vec<String> = model_side::check(&t.finish(), &Rules::roku(), &dialect, Some(&setup))
            .iter()
            .map(ToString::to_string)
            .collect();
        let fired = got.iter().any(|f| {
            f.contains("(oracle.model-side.approval): main/1 request #1")
                && f.contains("the `Agent` call that made it is on the policy's list")
        });
        assert_eq!(fired, fires, "{listed}: {got:#?}");
    }
}

/// `oracle.model-side.spawning` (`roku.calls.unknown-tool`): a name the caller was not offered
/// is answered as an unknown tool, never by a tool of a similar name (semantic mutant 334's
/// `subagent.status` taken for the family by its prefix).
#[test]
fn a_name_not_offered_answered_by_another_tool_fires() {
    let dialect = Dialect::builtin("bub").unwrap();
    let rules = Rules::bub();
    for (answer, fires) in [("[]".to_string(), true), (rules.unknown_tool("subagent.status"), false)] {
        let mut t = Talk::new(dialect.clone());
        let u1 = Message::user("Status?");
        let status = Message::assistant("", vec![call("s1", "subagent.status", serde_json::json!({}))]);
        let tools = ["final_answer", "fail", "subagent", "subagent.wait"];
        let (n, _) = t.ask(std::slice::from_ref(&u1), &tools);
        t.reply(n, &status);
        t.ask(&[u1, status, Message::tool("s1", &answer, !fires)], &tools);
        let got: Vec<String> =
            model_side::check(&t.finish(), &rules, &dialect, None).iter().map(ToString::to_string).collect();
        let fired = got
            .iter()
            .any(|f| f.contains("(oracle.model-side.spawning)") && f.contains("`subagent.status` was not offered"));
        assert_eq!(fired, fires, "{answer}: {got:#?}");
    }
}

/// `oracle.model-side.task-ids` (`bub.task-id.unknown`; semantic mutant 331, ids matched without
/// regard to case): a cancel naming an id no task has is answered as unknown.
#[test]
fn a_cancel_of_an_id_no_task_has_answered_otherwise_fires() {
    let dialect = Dialect::builtin("bub").unwrap();
    for (answer, fires) in
        [("{\"task_id\":\"SUB-E220A839\",\"status\":\"cancelled\"}", true), ("unknown task id: 'SUB-E220A839'", false)]
    {
        let mut t = Talk::new(dialect.clone());
        let u1 = Message::user("Stop it.");
        let cancel = Message::assistant(
            "",
            vec![call("c1", "subagent.cancel", serde_json::json!({"task_id": " SUB-E220A839 "}))],
        );
        let tools = ["final_answer", "fail", "subagent", "subagent.cancel"];
        let (n, _) = t.ask(std::slice::from_ref(&u1), &tools);
        t.reply(n, &cancel);
        t.ask(&[u1, cancel, Message::tool("c1", answer, !fires)], &tools);
        let got: Vec<String> =
            model_side::check(&t.finish(), &Rules::bub(), &dialect, None).iter().map(ToString::to_string).collect();
        let fired = got
            .iter()
            .any(|f| f.contains("(oracle.model-side.task-ids)") && f.contains("names \"SUB-E220A839\", which no task"));
        assert_eq!(fired, fires, "{answer}: {got:#?}");
    }
}

/// `oracle.model-side.concurrency`, first come first started, on wall time. Three children of
/// one reply: C asks first, then A and B. On virtual time that is the finding; on wall time,
/// with the cap at 4, it is not (children started in one instant ask in any order: a CI run of
/// examples/py_runtime failed for it), and with the cap at 1, C asking while its own run fills
/// the cap proves A had not started (a LIFO queue), so it is.
#[test]
fn a_later_child_asking_first_on_wall_time_fires_only_when_the_cap_was_full_without_the_earlier() {
    let dialect = Dialect::builtin("bub").unwrap();
    for (wall, cap, fires) in [(false, 4, true), (true, 4, false), (true, 1, true)] {
        let mut t = Talk::new(dialect.clone());
        let spawn = Message::assistant(
            "",
            ["A", "B", "C"]
                .iter()
                .enumerate()
                .map(|(i, j)| call(&format!("c{i}"), "subagent", serde_json::json!({"prompt": format!("Job {j}")})))
                .collect(),
        );
        let (n, _) = t.ask(&[Message::user("Run three jobs.")], &["subagent"]);
        t.reply(n, &spawn);
        let mut asks = Vec::new();
        for j in ["C", "A", "B"] {
            let prompt = Message::user(format!("Job {j}"));
            let (k, _) = t.ask(std::slice::from_ref(&prompt), &[]);
            asks.push((k, j));
        }
        t.at(100);
        for (k, j) in asks {
            t.reply(k, &Message::assistant(format!("{j} done"), Vec::new()));
        }
        let mut side = t.finish();
        side.wall_times = wall;
        let rules = Rules { max_concurrency: cap, ..Rules::bub() };
        let got: Vec<String> =
            model_side::check(&side, &rules, &dialect, None).iter().map(ToString::to_string).collect();
        let fired = got.iter().any(|f| f.contains("the queue is first come, first started"));
        assert_eq!(fired, fires, "wall time {wall}, cap {cap}: {got:#?}");
    }
}

fn limits(name: &str, requests: u32, scope: model_side::RequestScope) -> Vec<model_side::RequestLimit> {
    vec![model_side::RequestLimit {
        name: name.into(),
        requests,
        scope,
        agents: Default::default(),
        checked_at: Default::default(),
        extra: 0,
    }]
}

fn over(side: &rehearsal::internals::evidence::attribution::ModelSide, l: &[model_side::RequestLimit]) -> Vec<String> {
    model_side::check_requests(side, l).iter().map(ToString::to_string).collect()
}

/// `oracle.model-side.requests`: the root asks twice (a delegation, then its answer), the
/// child three times, one of them its HTTP client's retry of a request that got no reply.
/// Per agent the child made 2 steps; shared, the turn made 4; each limit fires one under.
#[test]
fn a_request_past_a_stated_limit_fires_per_agent_and_shared_and_a_retry_is_not_counted() {
    use model_side::RequestScope::{Agent, Shared};
    let dialect = Dialect::builtin("generic").unwrap();
    let mut t = Talk::new(dialect.clone());
    let u = Message::user("Plan the trip.");
    let spawn = Message::assistant("", vec![call("c1", "spawn_agent", serde_json::json!({"prompt": "Find hotels."}))]);
    let (r, _) = t.ask(std::slice::from_ref(&u), &["spawn_agent"]);
    t.reply(r, &spawn);
    let task = Message::user("Find hotels.");
    let (c, _) = t.ask(std::slice::from_ref(&task), &["search"]);
    let search = Message::assistant("", vec![call("s1", "search", serde_json::json!({"q": "hotels"}))]);
    t.reply(c, &search);
    let found = Message::tool("s1", "Hotel A", false);
    let history = [task.clone(), search.clone(), found.clone()];
    t.ask(&history, &["search"]); // no reply: the client retries
    let (c3, _) = t.ask(&history, &["search"]);
    t.reply(c3, &Message::assistant("Hotel A", Vec::new()));
    let (r2, _) = t.ask(&[u, spawn, Message::tool("c1", "Hotel A", false)], &["spawn_agent"]);
    t.reply(r2, &Message::assistant("Stay at Hotel A.", Vec::new()));
    let side = t.finish();
    assert!(over(&side, &limits("max_steps", 2, Agent)).is_empty(), "the retry is the same step");
    let got = over(&side, &limits("max_steps", 1, Agent));
    assert_eq!(got.len(), 2, "each agent once: {got:#?}");
    assert!(got[0].contains("main/1 request #2") && got[0].contains("request 2 of main/1's"), "{got:#?}");
    assert!(got[0].contains("`max_steps` allows 1 model requests per agent"), "{got:#?}");
    assert!(over(&side, &limits("request_limit", 4, Shared)).is_empty());
    let got = over(&side, &limits("request_limit", 3, Shared));
    assert_eq!(got.len(), 1, "{got:#?}");
    assert!(got[0].contains("main request #2") && got[0].contains("request 4 of the agents'"), "{got:#?}");
    // pydantic-ai checks its `request_limit` only before the root's steps: the delegate's
    // requests count, and the finding stands at the root's next request, not at the child's.
    let mut root_checked = limits("request_limit", 2, Shared);
    let got = over(&side, &root_checked);
    assert!(got.len() == 1 && got[0].contains("main/1 request #2"), "checked at every request: {got:#?}");
    root_checked[0].checked_at = model_side::CheckedAt::Root;
    let got = over(&side, &root_checked);
    assert!(got.len() == 1 && got[0].contains("main request #2"), "checked at the root's: {got:#?}");
    // smolagents: the managed agents' own limit, and the final-answer request past it.
    let mut children = limits("max_steps", 1, Agent);
    children[0].agents = model_side::LimitedAgents::Children;
    let got = over(&side, &children);
    assert!(got.len() == 1 && got[0].contains("main/1"), "the root's requests are not counted: {got:#?}");
    children[0].extra = 1;
    assert!(over(&side, &children).is_empty(), "one request more by design");
    // Told that the root's second request began a second turn, the turn made 3 and 1.
    let mut turns = side.clone();
    turns.turn_starts = vec![r2];
    assert!(over(&turns, &limits("request_limit", 3, Shared)).is_empty());
}

/// `scope: run`: an agent and the agents it handed the conversation to count together
/// (openai-agents' `max_turns`: a handoff goes on in the same run); per agent they do not.
#[test]
fn a_run_counts_the_agents_it_handed_off_to() {
    use model_side::RequestScope::{Agent, Run};
    let mut dialect = Dialect::builtin("generic").unwrap();
    dialect.handoff = vec!["transfer_to_*".into()];
    let mut t = Talk::new(dialect.clone());
    let u = Message::user("My bill is wrong.");
    let hand = Message::assistant("", vec![call("h1", "transfer_to_billing", serde_json::json!({}))]);
    let (r, _) = t.ask(std::slice::from_ref(&u), &["transfer_to_billing"]);
    t.reply(r, &hand);
    let handed = [u.clone(), hand.clone(), Message::tool("h1", "{\"assistant\": \"Billing\"}", false)];
    let (b1, who) = t.ask(&handed, &["refund"]);
    let rehearsal::internals::evidence::attribution::Attribution::Agent(who) = who else { panic!("{who:?}") };
    assert_eq!(who.alias.to_string(), "main/1", "the billing agent");
    let refund = Message::assistant("", vec![call("f1", "refund", serde_json::json!({}))]);
    t.reply(b1, &refund);
    let mut more = handed.to_vec();
    more.extend([refund, Message::tool("f1", "done", false)]);
    let (b2, _) = t.ask(&more, &["refund"]);
    t.reply(b2, &Message::assistant("Refunded.", Vec::new()));
    let side = t.finish();
    assert!(over(&side, &limits("max_turns", 2, Agent)).is_empty());
    let got = over(&side, &limits("max_turns", 2, Run));
    assert_eq!(got.len(), 1, "{got:#?}");
    assert!(got[0].contains("request 3 of the run of main (handed to main/1)"), "{got:#?}");
    assert!(over(&side, &limits("max_turns", 3, Run)).is_empty());
}

/// A dialect whose spawn tool is `empty_starts` (pydantic-ai runs a delegate on an empty
/// question): the empty first message is that child's; without it the call made no child and
/// the request is no agent's.
#[test]
fn an_empty_prompt_starts_a_child_only_where_the_dialect_says_so() {
    for empty_starts in [true, false] {
        let mut dialect = Dialect::builtin("generic").unwrap();
        dialect.spawn[0].untrimmed = true;
        dialect.spawn[0].empty_starts = empty_starts;
        let mut t = Talk::new(dialect.clone());
        let (r, _) = t.ask(&[Message::user("Ask nothing.")], &["spawn_agent"]);
        t.reply(r, &Message::assistant("", vec![call("c1", "spawn_agent", serde_json::json!({"prompt": ""}))]));
        let (_, who) = t.ask(&[Message::user("")], &[]);
        let child = matches!(&who, rehearsal::internals::evidence::attribution::Attribution::Agent(a) if a.alias.to_string() == "main/1");
        assert_eq!(child, empty_starts, "empty_starts {empty_starts}: {who:?}");
    }
}

/// A handoff whose input filter removes the tools (openai-agents' `remove_all_tools`): the
/// target's first request is the conversation with every tool call and result taken out, the
/// handing-off text kept. That is the target's, by evidence; a copy that also drops the user's
/// message is no such thing, and stays a shared start (a finding).
#[test]
fn a_handoff_target_whose_history_had_its_tools_removed_is_the_target() {
    use rehearsal::internals::evidence::attribution::{Attribution, Basis};
    for (drop_user, target) in [(false, true), (true, false)] {
        let mut dialect = Dialect::builtin("generic").unwrap();
        dialect.handoff = vec!["transfer_to_*".into()];
        let mut t = Talk::new(dialect.clone());
        let u = Message::user("Refund me, in Spanish.");
        let translate = Message::assistant("", vec![call("t1", "translate", serde_json::json!({"text": "refund"}))]);
        let (r, _) = t.ask(std::slice::from_ref(&u), &["translate", "transfer_to_refunds"]);
        t.reply(r, &translate);
        let history = [u.clone(), translate, Message::tool("t1", "reembolso", false)];
        let (r2, _) = t.ask(&history, &["translate", "transfer_to_refunds"]);
        let hand =
            Message::assistant("Passing you on.", vec![call("h1", "transfer_to_refunds", serde_json::json!({}))]);
        t.reply(r2, &hand);
        let mut filtered = vec![u.clone(), Message::assistant("Passing you on.", Vec::new())];
        if drop_user {
            filtered.remove(0);
            filtered.insert(0, Message::user("Refund me."));
        }
        let (_, who) = t.ask(&filtered, &[]);
        let handed =
            matches!(&who, Attribution::Agent(a) if a.alias.to_string() == "main/1" && a.basis == Basis::Handoff);
        assert_eq!(handed, target, "{who:?}");
    }
}

/// `oracle.model-side.delivery`, results that end in one instant reach the parent together
/// (`core.instant.ties-together`): over the wire, within one virtual instant, a child's final
/// reply given only after the root's request arrived could not be in it (found by `fuzz
/// --runtime` on py_runtime: a queued child started and done in the instant its sibling ended);
/// the same reply given before the request is the tie the rule speaks of.
#[test]
fn a_tie_is_judged_only_where_the_later_reply_reached_the_runtime_before_the_request() {
    let dialect = Dialect::builtin("bub").unwrap();
    let tools = ["final_answer", "fail", "subagent"];
    let note = |id: &str, body: &str| {
        Message::user(format!(
            "<subagent-notification task_id=\"{id}\" status=\"completed\">\n{body}\n</subagent-notification>"
        ))
    };
    for (second_first, fires) in [(false, false), (true, true)] {
        let mut t = Talk::new(dialect.clone());
        t.at(0);
        let u1 = Message::user("Coordinate.");
        let spawn = Message::assistant(
            "",
            vec![
                call("c1", "subagent", serde_json::json!({"prompt": "job one"})),
                call("c2", "subagent", serde_json::json!({"prompt": "job two"})),
            ],
        );
        let (root1, _) = t.ask(std::slice::from_ref(&u1), &tools);
        t.reply(root1, &spawn);
        t.at(0);
        let (one, _) = t.ask(&[Message::user("job one")], &["final_answer", "fail"]);
        t.reply(one, &Message::assistant("one done", Vec::new()));
        t.at(0);
        let (two, _) = t.ask(&[Message::user("job two")], &["final_answer", "fail"]);
        if second_first {
            t.reply(two, &Message::assistant("two done", Vec::new()));
        }
        t.at(0);
        let history = vec![
            u1.clone(),
            spawn.clone(),
            Message::tool("c1", r#"{"task_id":"sub-1","status":"running"}"#, false),
            Message::tool("c2", r#"{"task_id":"sub-2","status":"queued"}"#, false),
            note("sub-1", "one done"),
        ];
        let (root2, _) = t.ask(&history, &tools);
        if !second_first {
            t.reply(two, &Message::assistant("two done", Vec::new()));
        }
        let answer = Message::assistant("noted", Vec::new());
        t.reply(root2, &answer);
        t.at(0);
        let mut later = history.clone();
        later.extend([answer, note("sub-2", "two done")]);
        let (root3, _) = t.ask(&later, &tools);
        t.reply(root3, &Message::assistant("all done", Vec::new()));
        let got = findings(t, &dialect, &Rules::bub());
        let fired = got.iter().any(|f| f.contains("(oracle.model-side.delivery)") && f.contains("same instant"));
        assert_eq!(fired, fires, "the second reply given before the root's request: {second_first}: {got:#?}");
    }
}

/// `oracle.model-side.delivery`, `bub.cancel.no-notification`: once the model has read that a
/// cancel succeeded, a notification of that task is the finding (py_runtime's
/// `blind_cancel_notified`, written blind to the runtime fuzzer); a cancel that found the task
/// finished, or a message sent to it after the cancel (a new run), makes a later notification
/// right.
#[test]
fn a_task_notified_after_its_cancel_succeeded_fires() {
    let dialect = Dialect::builtin("bub").unwrap();
    let tools = ["final_answer", "fail", "subagent", "subagent.cancel", "subagent.send"];
    let note = Message::user(
        "<subagent-notification task_id=\"sub-1\" status=\"cancelled\">\nCancelled.\n</subagent-notification>",
    );
    for (cancel_result, sent_after, fires) in [
        (r#"{"task_id":"sub-1","status":"cancelled"}"#, false, true),
        ("task sub-1 has already finished", false, false),
        (r#"{"task_id":"sub-1","status":"cancelled"}"#, true, false),
    ] {
        let mut t = Talk::new(dialect.clone());
        let u1 = Message::user("Coordinate.");
        let spawn = Message::assistant("", vec![call("c1", "subagent", serde_json::json!({"prompt": "job one"}))]);
        let (root1, _) = t.ask(std::slice::from_ref(&u1), &tools);
        t.reply(root1, &spawn);
        let (one, _) = t.ask(&[Message::user("job one")], &["final_answer", "fail"]);
        let cancel =
            Message::assistant("", vec![call("x1", "subagent.cancel", serde_json::json!({"task_id": "sub-1"}))]);
        let mut history = vec![u1, spawn, Message::tool("c1", r#"{"task_id":"sub-1","status":"running"}"#, false)];
        let (root2, _) = t.ask(&history, &tools);
        t.reply(root2, &cancel);
        history.extend([cancel, Message::tool("x1", cancel_result, !cancel_result.starts_with('{'))]);
        if sent_after {
            let send = Message::assistant(
                "",
                vec![call("s1", "subagent.send", serde_json::json!({"task_id": "sub-1", "message": "again"}))],
            );
            let (root3, _) = t.ask(&history, &tools);
            t.reply(root3, &send);
            history.extend([send, Message::tool("s1", r#"{"task_id":"sub-1","status":"running"}"#, false)]);
        }
        t.reply(one, &Message::assistant("one done", Vec::new()));
        history.push(note.clone());
        let (last, _) = t.ask(&history, &tools);
        t.reply(last, &Message::assistant("done", Vec::new()));
        let got = findings(t, &dialect, &Rules::bub());
        let fired =
            got.iter().any(|f| f.contains("(oracle.model-side.delivery)") && f.contains("told it was cancelled"));
        assert_eq!(fired, fires, "{cancel_result} / sent after: {sent_after}: {got:#?}");
    }
}

//! Oracle 1, depth: a child beyond the limit, and refusals at the limit with and without the
//! exact error.

use serde_json::json;

use rehearsal::internals::oracles::Oracle;
use rehearsal::rules::Rules;
use rehearsal::sut::event::{Event, Family};

use super::DEPTH_ERROR;
use super::evidence::{
    Case, agent_end, agent_start, assert_violation, child_result, kid, llm, root, spawned, step, tool_end, tool_start,
};

/// Roku with `depth_limit`: `main/1` calls `Agent` and `main/1/1` runs and answers.
///
/// ```text
///  0..5  as in `foreground` (main/1 budget 10)
///  6   0.200s main/1    tool.start   Agent
///  7   0.200s main/1    spawn        main/1/1 foreground grant=9 budget=10→0
///  8   0.200s main/1/1  agent.start  depth=2 budget=9
///  9   0.200s main/1/1  llm.request  #1 budget=9
/// 10   0.300s main/1/1  agent.end    budget=8 "Hotel booked."
/// 11   0.300s main/1    child.result main/1/1
/// 12   0.300s main/1    tool.end     Agent ok budget=0 "Hotel booked."
/// 13   0.300s main/1    agent.end    budget=0 "Plan with hotel."
/// 14.. the root receives main/1's answer
/// ```
fn grandchild(depth_limit: u32) -> Case {
    let mut c = Case::new(Rules { depth_limit, ..Rules::roku() });
    c.turn(0);
    c.root_llm(0, &[]);
    c.root += 1;
    c.agent_call(100, 1);
    let grand = kid(1).child(1);
    c.at(200, &kid(1), tool_start("main/1#1.1", "Agent", json!({"task": "Book the hotel"})));
    c.at(200, &kid(1), spawned(&grand, Family::Foreground, 9, 10, 0));
    c.at(200, &grand, agent_start(2, 9));
    c.at(200, &grand, llm(1, 9));
    c.at(300, &grand, agent_end("Hotel booked.", 8));
    let limit = c.rules.result_limit_chars;
    c.at(300, &kid(1), child_result(&grand, "Hotel booked.", limit));
    c.at(300, &kid(1), tool_end("main/1#1.1", "Agent", false, "Hotel booked.", 0));
    c.at(300, &kid(1), agent_end("Plan with hotel.", 0));
    c.at(300, &root(), child_result(&kid(1), "Plan with hotel.", limit));
    c.at(300, &root(), tool_end("main#1.1", "Agent", false, "Plan with hotel.", 19));
    c.at(300, &root(), step(19));
    c.root_llm(300, &[]);
    c.end_turn(400);
    c
}

#[test]
fn depth_child_spawned_beyond_the_limit() {
    let found = grandchild(1).only(Oracle::Depth);
    assert_eq!(found.len(), 3, "{found:#?}");
    assert_violation(
        &found[0],
        Oracle::Depth,
        "main/1",
        200,
        "main/1 spawned main/1/1 although it is at the depth limit 1",
        &[7],
    );
    assert_violation(
        &found[1],
        Oracle::Depth,
        "main/1/1",
        200,
        "main/1/1 runs at depth 2, beyond the depth limit 1",
        &[8],
    );
    assert_violation(
        &found[2],
        Oracle::Depth,
        "main/1",
        300,
        "an `Agent` call of main/1 at the depth limit must give the depth error and no child, got \"Hotel booked.\"",
        &[6, 12],
    );
}

#[test]
fn depth_grandchild_within_a_limit_of_2_passes() {
    grandchild(2).assert_clean();
}

/// Roku: `main/1`, at the depth limit 1, calls `Agent` and is refused with `reason`, the
/// tool ending with `result` (`is_error`).
///
/// ```text
///  6   0.200s main/1  tool.start     Agent
///  7   0.200s main/1  spawn.refused  Agent <reason>
///  8   0.200s main/1  tool.end       Agent <result> budget=9
/// ```
fn refused_at_limit(reason: &str, result: &str, is_error: bool) -> Case {
    let mut c = Case::roku();
    c.turn(0);
    c.root_llm(0, &[]);
    c.root += 1;
    c.agent_call(100, 1);
    c.at(200, &kid(1), tool_start("main/1#1.1", "Agent", json!({"task": "Book the hotel"})));
    c.at(200, &kid(1), Event::SpawnRefused { tool: "Agent".into(), reason: reason.into() });
    c.at(200, &kid(1), tool_end("main/1#1.1", "Agent", is_error, result, 9));
    c.at(200, &kid(1), step(9));
    c.at(200, &kid(1), llm(2, 9));
    c.at(300, &kid(1), agent_end("I could not delegate.", 8));
    let limit = c.rules.result_limit_chars;
    c.at(300, &root(), child_result(&kid(1), "I could not delegate.", limit));
    c.at(300, &root(), tool_end("main#1.1", "Agent", false, "I could not delegate.", 19));
    c.at(300, &root(), step(19));
    c.root_llm(300, &[]);
    c.end_turn(400);
    c
}

#[test]
fn depth_agent_call_at_the_limit_without_the_exact_error_string() {
    let v = refused_at_limit("Sub-agents cannot spawn.", "Sub-agents cannot spawn.", true).sole(Oracle::Depth);
    assert_violation(
        &v,
        Oracle::Depth,
        "main/1",
        200,
        "an `Agent` call of main/1 at the depth limit must give the depth error and no child, got \"Sub-agents cannot spawn.\"",
        &[6, 8],
    );
}

#[test]
fn depth_agent_call_at_the_limit_with_the_error_string_but_not_as_an_error() {
    let v = refused_at_limit(DEPTH_ERROR, DEPTH_ERROR, false).sole(Oracle::Depth);
    assert_violation(&v, Oracle::Depth, "main/1", 200, "must give the depth error and no child", &[6, 8]);
}

#[test]
fn depth_agent_call_at_the_limit_with_the_exact_error_passes() {
    refused_at_limit(DEPTH_ERROR, DEPTH_ERROR, true).assert_clean();
}

#[test]
fn depth_refusal_below_the_limit() {
    // The root (depth 0) is refused with the depth error although the limit is 1.
    let mut c = Case::roku();
    c.turn(0);
    c.root_llm(0, &[]);
    c.at(100, &root(), tool_start("main#1.1", "Agent", json!({"task": "T"})));
    let refused = c.at(100, &root(), Event::SpawnRefused { tool: "Agent".into(), reason: DEPTH_ERROR.into() });
    c.at(100, &root(), tool_end("main#1.1", "Agent", true, DEPTH_ERROR, 29));
    c.root_llm(100, &[]);
    c.end_turn(200);
    let v = c.sole(Oracle::Depth);
    assert_violation(
        &v,
        Oracle::Depth,
        "main",
        100,
        "main at depth 0 was refused a child although the depth limit is 1",
        &[refused],
    );
}

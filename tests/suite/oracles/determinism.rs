//! Oracle 9, determinism: two traces that differ, and where the report says they do.

use serde_json::json;

use rehearsal::internals::oracles::{self, Oracle};
use rehearsal::trace::What;

use super::evidence::{assert_violation, llm, tool_start, truncated};
use super::traces::{FG_CHILD_END, FG_CHILD_LLM, foreground, one_background};

#[test]
fn determinism_identical_traces_pass() {
    let c = one_background("done", "done");
    assert_eq!(oracles::determinism(&c.trace, &c.trace.clone()), None);
}

#[test]
fn determinism_traces_differing_in_one_line() {
    let first = foreground("All clear.", "All clear.").trace;
    let mut second = first.clone();
    second.entries[FG_CHILD_LLM].what = What::Core(llm(1, 9));
    let v = oracles::determinism(&first, &second).expect("the traces differ");
    let (a, b) = (&first.lines()[FG_CHILD_LLM], &second.lines()[FG_CHILD_LLM]);
    assert!(a.ends_with("main/1   llm.request    #1 messages=1 tools=3 budget=10"), "{a}");
    assert_violation(
        &v,
        Oracle::Determinism,
        "main/1",
        100,
        &format!("two runs differ at trace line 6: {a:?} vs {b:?}"),
        &[FG_CHILD_LLM],
    );
}

#[test]
fn determinism_one_trace_shorter() {
    let first = foreground("All clear.", "All clear.").trace;
    let mut second = first.clone();
    second.entries.truncate(10);
    let v = oracles::determinism(&first, &second).expect("the traces differ");
    assert_violation(&v, Oracle::Determinism, "main", 300, "two runs differ at trace line 11:", &[10]);
    assert!(v.message.ends_with("vs \"(end)\""), "{}", v.message);
}

/// Formerly a gap: when two traces differed only in what the text form does not show (a call
/// id, the middle of a long string), the oracle fired but named line `len + 1`, past the end of
/// both traces, with "(end)" vs "(end)". It now finds the entry by its JSON form, and shows
/// the JSON forms when the text forms are equal.
#[test]
fn determinism_difference_only_in_the_json_names_the_line() {
    let first = foreground("All clear.", "All clear.").trace;
    let mut second = first.clone();
    second.entries[2].what = What::Core(tool_start("main#1.9", "Agent", json!({"task": "T"})));
    assert_eq!(first.lines(), second.lines(), "the text form hides call ids");
    let v = oracles::determinism(&first, &second).expect("the JSON lines differ");
    assert_violation(&v, Oracle::Determinism, "main", 100, "two runs differ at trace line 3", &[2]);
    assert!(v.message.contains("main#1.1") && v.message.contains("main#1.9"), "{}", v.message);
}

#[test]
fn determinism_difference_in_the_middle_of_a_long_string() {
    // The text form shortens long strings in the middle; one char there differs.
    let long = "x".repeat(5000);
    let mut other = long.clone();
    other.replace_range(2500..2501, "y");
    let first = foreground(&long, &truncated(&long, 4000)).trace;
    let second = foreground(&other, &truncated(&other, 4000)).trace;
    assert_eq!(first.lines()[FG_CHILD_END], second.lines()[FG_CHILD_END], "the text form hides the middle");
    let v = oracles::determinism(&first, &second).expect("the JSON lines differ");
    assert_violation(&v, Oracle::Determinism, "main/1", 300, "two runs differ at trace line 7", &[FG_CHILD_END]);
}

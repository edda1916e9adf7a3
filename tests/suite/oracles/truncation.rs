//! Oracle 3, truncation: results cut by bytes, split characters, missing notices, wrong
//! counts, and results exactly at the limit.

use rehearsal::internals::oracles::Oracle;
use rehearsal::sut::event::Event;

use super::evidence::{Case, assert_violation, kid, truncated};
use super::traces::{BG_ENDED, FG_CHILD_END, FG_RESULT, FG_TOOL_END, foreground, one_background};

#[test]
fn truncation_by_bytes_instead_of_chars() {
    // 4001 emoji are 16004 bytes; cutting at 4000 bytes keeps only 1000 of them.
    let message = "😀".repeat(4001);
    let by_bytes = format!("{}...\n[Sub-agent response truncated to 4000 chars]", &message[..4000]);
    let v = foreground(&message, &by_bytes).sole(Oracle::Truncation);
    let want = truncated(&message, 4000);
    assert_violation(
        &v,
        Oracle::Truncation,
        "main",
        300,
        &format!(
            "the parent received {} chars ({} bytes) where the limit Some(4000) gives {} chars ({} bytes); they first differ at char 1000",
            by_bytes.chars().count(),
            by_bytes.len(),
            want.chars().count(),
            want.len()
        ),
        &[FG_CHILD_END, FG_TOOL_END],
    );
}

#[test]
fn truncation_splitting_a_character() {
    // "a" then 4000 × "é": a byte cut at 4000 splits the 2000th "é"; lossy decoding leaves U+FFFD.
    let message = format!("a{}", "é".repeat(4000));
    let split = String::from_utf8_lossy(&message.as_bytes()[..4000]).into_owned();
    assert!(split.ends_with('\u{FFFD}'));
    let handed = format!("{split}...\n[Sub-agent response truncated to 4000 chars]");
    let v = foreground(&message, &handed).sole(Oracle::Truncation);
    assert_violation(
        &v,
        Oracle::Truncation,
        "main",
        300,
        "they first differ at char 2000",
        &[FG_CHILD_END, FG_TOOL_END],
    );
}

#[test]
fn truncation_result_over_the_limit_returned_whole() {
    let message = "x".repeat(4001);
    let v = foreground(&message, &message).sole(Oracle::Truncation);
    assert_violation(
        &v,
        Oracle::Truncation,
        "main",
        300,
        "the parent received 4001 chars (4001 bytes) where the limit Some(4000) gives",
        &[FG_CHILD_END, FG_TOOL_END],
    );
}

#[test]
fn truncation_notice_missing() {
    let message = "x".repeat(4001);
    let want = truncated(&message, 4000).len();
    assert_eq!(want, 4048);
    let v = foreground(&message, &"x".repeat(4000)).sole(Oracle::Truncation);
    assert_violation(
        &v,
        Oracle::Truncation,
        "main",
        300,
        "the parent received 4000 chars (4000 bytes) where the limit Some(4000) gives 4048 chars (4048 bytes); they first differ at char 4000",
        &[FG_CHILD_END, FG_TOOL_END],
    );
}

#[test]
fn truncation_wrong_char_count_reported() {
    let mut c = foreground("All clear.", "All clear.");
    c.set(FG_RESULT, Event::ChildResult { child: kid(1), is_error: false, chars: 12, truncated_to: None });
    let v = c.sole(Oracle::Truncation);
    assert_violation(
        &v,
        Oracle::Truncation,
        "main",
        300,
        "main/1's result has 10 chars, reported 12",
        &[FG_CHILD_END, FG_RESULT],
    );
}

#[test]
fn truncation_truncated_to_reported_wrong() {
    // `child.result` must report `truncated_to: Some(limit)` exactly when the message is longer
    // than the limit; the result the parent receives is right in every case here.
    let over = "x".repeat(4001);
    let at_limit = "😀".repeat(4000);
    let cases: [(&str, String, Option<usize>, &str); 4] = [
        ("over the limit, not reported", over.clone(), None, "reports truncated_to None, expected Some(4000)"),
        ("over the limit, wrong limit", over, Some(3999), "reports truncated_to Some(3999), expected Some(4000)"),
        ("exactly the limit, reported cut", at_limit, Some(4000), "reports truncated_to Some(4000), expected None"),
        ("short, reported cut", "All clear.".into(), Some(4000), "reports truncated_to Some(4000), expected None"),
    ];
    for (what, message, truncated_to, phrase) in cases {
        let handed = if message.chars().count() > 4000 { truncated(&message, 4000) } else { message.clone() };
        let mut c = foreground(&message, &handed);
        c.assert_clean();
        let chars = message.chars().count();
        c.set(FG_RESULT, Event::ChildResult { child: kid(1), is_error: false, chars, truncated_to });
        let v = c.sole(Oracle::Truncation);
        assert!(v.message.starts_with("main/1's result"), "{what}: {v:#?}");
        assert_violation(&v, Oracle::Truncation, "main", 300, phrase, &[FG_CHILD_END, FG_RESULT]);
    }
}

#[test]
fn truncation_exactly_the_limit_is_returned_unchanged() {
    let message = "😀".repeat(4000);
    foreground(&message, &message).assert_clean();
    // ... and truncating it is wrong.
    let v = foreground(&message, &truncated(&message, 3999)).sole(Oracle::Truncation);
    assert_violation(
        &v,
        Oracle::Truncation,
        "main",
        300,
        "they first differ at char 3999",
        &[FG_CHILD_END, FG_TOOL_END],
    );
}

#[test]
fn truncation_over_the_limit_correctly_truncated_passes() {
    for message in ["x".repeat(4001), "😀".repeat(4001), "字".repeat(10_000), format!("a{}", "é".repeat(4000))] {
        foreground(&message, &truncated(&message, 4000)).assert_clean();
    }
}

#[test]
fn truncation_background_body_not_truncated() {
    let limit = |mut c: Case| {
        c.rules.result_limit_chars = Some(10);
        c
    };
    let message = "12 open tickets.";
    let v = limit(one_background(message, message)).sole(Oracle::Truncation);
    assert_violation(
        &v,
        Oracle::Truncation,
        "main/1",
        1100,
        "the parent received 16 chars (16 bytes) where the limit Some(10) gives",
        &[BG_ENDED - 1, BG_ENDED],
    );
    limit(one_background(message, &truncated(message, 10))).assert_clean();
    one_background(message, message).assert_clean(); // bub: no limit
}

/// Formerly a gap: the check was armed only by the core's own `child.result` event. The oracle
/// now pairs the child's final message (agent.end) with the parent's `Agent` result through the
/// spawn inside that call, so a core that skips `child.result` is still caught.
#[test]
fn truncation_is_checked_even_without_a_child_result_event() {
    let message = "x".repeat(4001);
    let mut c = foreground(&message, &message);
    c.trace.entries.remove(FG_RESULT);
    let found = c.of(Oracle::Truncation);
    assert_eq!(found.len(), 1, "an untruncated 4001-char result escaped the truncation oracle: {found:#?}");
    assert_violation(
        &found[0],
        Oracle::Truncation,
        "main",
        300,
        "the parent received 4001 chars",
        &[FG_CHILD_END, FG_TOOL_END - 1],
    );
}

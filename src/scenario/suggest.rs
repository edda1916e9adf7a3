//! "Did you mean …?": the nearest of the names that exist to a name that does not, for
//! tools, fields, enum values, arguments, lane aliases and profile names.
//!
//! The rule is rustc's for misspelt names: a case-insensitive match, else the fewest edits
//! (Damerau-Levenshtein, so a swapped pair of letters is one edit) within a third of the
//! name's length, else a name that contains the other (`ids` → `task_ids`). It suggests
//! nothing rather than something far.

/// The candidate nearest to `given`, if one is near enough to be what was meant.
pub fn nearest<'a>(given: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let given_lower = given.to_lowercase();
    let candidates: Vec<&str> = candidates.into_iter().filter(|c| *c != given).collect();
    if let Some(same) = candidates.iter().find(|c| c.to_lowercase() == given_lower) {
        return Some(same);
    }
    // Names shorter than three characters are too short to guess from.
    let length = given.chars().count();
    let max_edits = if length < 3 { 0 } else { (length / 3).max(1) };
    let by_edits = candidates
        .iter()
        .map(|c| (strsim::damerau_levenshtein(&given_lower, &c.to_lowercase()), *c))
        .filter(|(edits, _)| *edits <= max_edits)
        .min_by_key(|(edits, _)| *edits);
    if let Some((_, best)) = by_edits {
        return Some(best);
    }
    let short = |c: &str| c.chars().count() >= 3 && given.chars().count() >= 3;
    candidates
        .iter()
        .filter(|c| short(c))
        .filter(|c| {
            let c = c.to_lowercase();
            c.contains(&given_lower) || given_lower.contains(&c)
        })
        .min_by_key(|c| c.len().abs_diff(given.len()))
        .copied()
}

/// `did you mean `X`?` for the nearest candidate, if any.
pub fn did_you_mean<'a>(given: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<String> {
    nearest(given, candidates).map(|name| format!("did you mean `{name}`?"))
}

/// A hint for serde's "unknown field `x`, expected one of `a`, `b`" and "unknown variant"
/// messages: the nearest expected name. Works on the message text, so every field and enum of
/// the format (including ones added later) gets it.
pub fn hint_for_serde(message: &str) -> Option<String> {
    let rest = message.strip_prefix("unknown field `").or_else(|| message.strip_prefix("unknown variant `"))?;
    let (given, rest) = rest.split_once('`')?;
    if crate::scenario::place::NOTES.contains(&given) {
        return Some(
            "`$comment` (a note for readers, holding a string) may stand in any object but a call's `args`; `$schema` only at the top"
                .to_string(),
        );
    }
    let (_, expected) = rest.split_once("expected")?;
    let names: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    did_you_mean(given, names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_names_are_suggested() {
        let tools = ["final_answer", "fail", "Agent", "subagent", "subagent.wait", "subagent.send"];
        assert_eq!(nearest("Agnet", tools), Some("Agent"));
        assert_eq!(nearest("agent", tools), Some("Agent"));
        assert_eq!(nearest("subagent.wiat", tools), Some("subagent.wait"));
        assert_eq!(nearest("ids", ["task_ids", "timeout_seconds"]), Some("task_ids"));
        assert_eq!(nearest("timeout", ["task_ids", "timeout_seconds"]), Some("timeout_seconds"));
        assert_eq!(nearest("Frobnicate", tools), None);
        assert_eq!(nearest("x", ["y", "z"]), None);
    }

    #[test]
    fn serde_messages_get_the_nearest_expected_name() {
        assert_eq!(
            hint_for_serde("unknown field `lanez`, expected one of `name`, `lanes`, `turns`").as_deref(),
            Some("did you mean `lanes`?")
        );
        assert_eq!(
            hint_for_serde("unknown variant `roku2`, expected `roku` or `bub`").as_deref(),
            Some("did you mean `roku`?")
        );
        assert_eq!(hint_for_serde("unknown field `zzzzzz`, expected `text` or `error`"), None);
        assert_eq!(hint_for_serde("invalid type: string \"fast\", expected u64"), None);
        assert!(hint_for_serde("unknown field `$comment`, expected `text`").unwrap().contains("args"));
    }
}

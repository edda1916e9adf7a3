//! Task references (`$task1`, `$task2`, …): how a file names the N-th task id a request
//! shows, checked in call arguments and replaced in texts.
//!
//! It does not draw task ids (the run does); it only reads and replaces references.

use std::fmt;

use super::error::Problem;

/// A text of a check or an expectation with each `$taskN` in it (`$task` and a number from
/// 1) replaced by the N-th task id of `ids`. The error names the reference no id answers.
pub(crate) fn with_task_ids<'t>(text: &'t str, ids: &[String]) -> Result<std::borrow::Cow<'t, str>, String> {
    if !text.contains("$task") {
        return Ok(std::borrow::Cow::Borrowed(text));
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("$task") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "$task".len()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            out.push_str("$task");
        } else {
            let reference = &rest[at..at + "$task".len() + digits];
            let id = after[..digits].parse::<usize>().ok().and_then(|n| ids.get(n.checked_sub(1)?));
            out.push_str(id.ok_or_else(|| reference.to_string())?);
        }
        rest = &after[digits..];
    }
    out.push_str(rest);
    Ok(std::borrow::Cow::Owned(out))
}

/// A string argument that is a task reference, whitespace around it allowed: the whitespace
/// before, the `$task` reference itself, and the whitespace after (`" $task2\n"` is
/// `(" ", "$task2", "\n")`). `None` when the trimmed string does not start with `$task`.
pub(crate) fn task_reference(s: &str) -> Option<(&str, &str, &str)> {
    let body = s.trim();
    if !body.starts_with("$task") {
        return None;
    }
    let before = s.len() - s.trim_start().len();
    Some((&s[..before], body, &s[before + body.len()..]))
}

/// The N of a task reference `$taskN` (from 1: no sign, no leading zero, nothing after it).
pub(crate) fn task_number(reference: &str) -> Option<usize> {
    let number = reference.strip_prefix("$task")?;
    let digits = !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()) && !number.starts_with('0');
    number.parse::<usize>().ok().filter(|_| digits)
}

/// Every string in call arguments that starts with `$task` (after any whitespace) must be a
/// task reference, `$task1`, `$task2`, … (no sign, no leading zero, nothing after the number).
pub(super) fn check_task_refs(args: &serde_json::Value, place: impl fmt::Display) -> Result<(), Problem> {
    use serde_json::Value;
    match args {
        Value::String(s) if let Some((_, reference, _)) = task_reference(s) => {
            if task_number(reference).is_some() {
                Ok(())
            } else {
                Err(Problem::new(
                    place.to_string(),
                    format!(
                        "{} is not a task reference: write $task1, $task2, … (the N-th task id the request shows)",
                        crate::trace::quoted(s)
                    ),
                ))
            }
        }
        Value::Array(items) => {
            items.iter().enumerate().try_for_each(|(i, v)| check_task_refs(v, format_args!("{place}[{i}]")))
        }
        Value::Object(map) => map.iter().try_for_each(|(k, v)| check_task_refs(v, format_args!("{place}.{k}"))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_references_may_have_whitespace_around_them() {
        assert_eq!(task_reference("$task2"), Some(("", "$task2", "")));
        assert_eq!(task_reference(" $task2\n"), Some((" ", "$task2", "\n")));
        assert_eq!(task_reference("\t$task01 "), Some(("\t", "$task01", " ")));
        assert_eq!(task_reference("sub-1 $task2"), None);
        assert_eq!(task_number("$task12"), Some(12));
        for bad in ["$task", "$task0", "$task01", "$task+1", "$task 1", "$task1x"] {
            assert_eq!(task_number(bad), None, "{bad}");
        }
        let args = serde_json::json!({"task_ids": ["$task1", " $task0\n"]});
        let problem = check_task_refs(&args, "calls[0].args").unwrap_err();
        assert_eq!(problem.field, "calls[0].args.task_ids[1]");
    }

    #[test]
    fn task_references_in_texts_are_replaced() {
        let ids = ["sub-1".to_string(), "sub-2".to_string()];
        assert_eq!(
            with_task_ids("delivered $task2 ok, $task1; $taskX", &ids).unwrap(),
            "delivered sub-2 ok, sub-1; $taskX"
        );
        assert_eq!(with_task_ids("$task3", &ids).unwrap_err(), "$task3");
        assert_eq!(with_task_ids("$task0", &ids).unwrap_err(), "$task0");
        assert_eq!(with_task_ids("plain", &ids).unwrap(), "plain");
    }
}

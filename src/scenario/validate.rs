//! What types alone cannot check: names that must match, texts and limits within bounds, the
//! cited rule clauses, a file's profile names.
//!
//! It reads no files and returns the first problem found; it does not parse (`parse` does).

use std::fmt;

use super::error::Problem;
use super::format::Scenario;
use super::lanes::{Check, When};
use super::limits::{MAX_DEPTH, MAX_VIRTUAL_MS, ceilings};
use super::recorded::volatile_regex;
use super::suggest::did_you_mean;
use super::task_refs::{check_task_refs, task_number};
use super::text::Text;
use super::version::check_format;
use super::vocabulary::Vocabulary;
use super::{builtin, suggest};

/// Checks what types alone cannot: returns the first problem, with its field path and a hint.
pub fn validate(s: &Scenario) -> Result<(), Problem> {
    validate_with(s, &Vocabulary::core())
}

/// [`validate`] for calls answered by `vocabulary`'s runtime: which tool names are known
/// without declaring, reserved, and checked against the built-in core's schemas.
pub fn validate_with(s: &Scenario, vocabulary: &Vocabulary) -> Result<(), Problem> {
    check_format(s.format.map(u64::from))?;
    let rules = s.rules.resolve();
    rules.validate().map_err(|m| Problem::new("rules", m.to_string()))?;
    validate_limits(s)?;
    if s.turns.is_empty() {
        return Err(Problem::new("turns", "a scenario needs at least one user turn")
            .hint(r#"add one: "turns": [{"user": "…"}]"#));
    }
    check_cited_ids(&s.description)?;
    // Places are spelled only for a problem: a `String` for each reply and call of every
    // file would cost more than the checks (the fuzzer validates every case it draws).
    let text = |place: &dyn fmt::Display, text: &Text| check_text(text, s.limits.max_text_chars, place);
    let ms = |place: &dyn fmt::Display, ms: u64| {
        if ms > MAX_VIRTUAL_MS {
            return Err(Problem::new(
                place.to_string(),
                format!(
                    "{ms} ms is longer than the longest virtual time a scenario may name ({MAX_VIRTUAL_MS} ms, ten years)"
                ),
            ));
        }
        Ok(())
    };
    for (i, turn) in s.turns.iter().enumerate() {
        if let Some(at) = turn.at_ms {
            ms(&format_args!("turns[{i}].at_ms"), at)?;
        }
        let e = &turn.expect;
        check_order_dependent(&e.order_dependent, &format!("turns[{i}].expect"))?;
        for (field, value) in [("message", &e.message), ("message_contains", &e.message_contains)] {
            if let Some(value) = value {
                text(&format_args!("turns[{i}].expect.{field}"), value)?;
            }
        }
    }
    for (i, steer) in s.steer.iter().enumerate() {
        ms(&format_args!("steer[{i}].at_ms"), steer.at_ms)?;
    }
    for (i, side) in s.session.side_requests.iter().enumerate() {
        if side.contains.is_empty() {
            return Err(Problem::new(
                format!("session.side_requests[{i}].contains"),
                "a side request needs a text to match: an empty one would take every request from its agent",
            )
            .hint(r#"name a text the runtime's own request holds, as "contains": "Write a title""#));
        }
        ms(&format_args!("session.side_requests[{i}].latency_ms"), side.latency_ms)?;
    }
    check_order_dependent(&s.expect.order_dependent, "expect")?;
    let mut declared = std::collections::BTreeSet::new();
    for (i, tool) in s.tools.iter().enumerate() {
        if tool.name.trim().is_empty() {
            return Err(Problem::new(format!("tools[{i}].name"), "a tool needs a name"));
        }
        if vocabulary.owns(&tool.name) {
            return Err(Problem::new(
                format!("tools[{i}].name"),
                format!("`{}` is a tool the runtime's dialect reads", tool.name),
            )
            .hint("call it without declaring it"));
        }
        if builtin::parameters(&tool.name).is_some() && vocabulary.reserves_core_name(&tool.name) {
            return Err(Problem::new(
                format!("tools[{i}].name"),
                format!("`{}` is a built-in tool of the core", tool.name),
            )
            .hint("call it without declaring it"));
        }
        if !declared.insert(tool.name.as_str()) {
            return Err(Problem::new(format!("tools[{i}].name"), format!("tool `{}` is declared twice", tool.name)));
        }
        ms(&format_args!("tools[{i}].latency_ms"), tool.latency_ms)?;
        for (j, result) in tool.results.iter().enumerate() {
            if result.text.is_some() == result.error.is_some() {
                return Err(Problem::new(format!("tools[{i}].results[{j}]"), "give exactly one of `text` and `error`"));
            }
            for (field, value) in [("text", &result.text), ("error", &result.error)] {
                if let Some(value) = value {
                    text(&format_args!("tools[{i}].results[{j}].{field}"), value)?;
                }
            }
            if let Some(latency) = result.latency_ms {
                ms(&format_args!("tools[{i}].results[{j}].latency_ms"), latency)?;
            }
        }
    }
    // The files written into `profile_files` are read by the front door (`load`), which
    // owns the profile reader.
    for (i, profile) in s.profiles.iter().enumerate() {
        if profile.description.trim().is_empty() {
            return Err(Problem::new(format!("profiles[{i}].description"), "a profile needs a description"));
        }
        if let Some(seconds) = profile.timeout_seconds {
            check_seconds(seconds).map_err(|m| Problem::new(format!("profiles[{i}].timeout_seconds"), m))?;
        }
    }
    if s.lanes.is_empty() {
        return Err(Problem::new(
            "lanes",
            "a scenario needs at least one lane: the root asks the model at its first step",
        )
        .hint(r#"add the root's lane: {"agent": "main", "replies": [{"text": "…"}]}"#));
    }
    for (i, lane) in s.lanes.iter().enumerate() {
        let selectors = [&lane.agent, &lane.task_contains, &lane.profile].iter().filter(|s| s.is_some()).count();
        if selectors != 1 {
            return Err(Problem::new(
                format!("lanes[{i}]"),
                "give exactly one selector: `agent`, `task_contains` or `profile`",
            ));
        }
        if let Some(alias) = &lane.agent {
            check_alias(alias).map_err(|hint| {
                Problem::new(
                    format!("lanes[{i}].agent"),
                    format!(
                        "`{}` is not an agent alias: the root is `main`, its children `main/1`, `main/2`, … in spawn order, a grandchild `main/1/1`",
                        crate::trace::printable(alias)
                    ),
                )
                .maybe_hint(hint)
            })?;
        }
        if let Some(check) = &lane.check_every {
            validate_check(check, s.limits.max_text_chars, &format!("lanes[{i}].check_every"))?;
        }
        let lane_place = Indexed(&"", "lanes", i);
        for (j, reply) in lane.replies.iter().enumerate() {
            let place = Indexed(&lane_place, ".replies", j);
            ms(&format_args!("{place}.latency_ms"), reply.latency_ms)?;
            if let Some(value) = &reply.text {
                text(&format_args!("{place}.text"), value)?;
            }
            if let Some(check) = &reply.check {
                validate_check(check, s.limits.max_text_chars, &format!("{place}.check"))?;
            }
            if let Some(when) = &reply.when {
                check_when(when, s.limits.max_text_chars, &format!("{place}.when"))?;
            }
            if reply.calls.len() > s.limits.max_calls_per_reply {
                return Err(Problem::new(
                    format!("{place}.calls"),
                    format!(
                        "{} calls in one reply, more than limits.max_calls_per_reply ({}); raise the limit if you mean it",
                        reply.calls.len(),
                        s.limits.max_calls_per_reply
                    ),
                ));
            }
            let answers = reply.text.is_some() || !reply.calls.is_empty();
            if [answers, reply.error.is_some(), reply.hang].iter().filter(|b| **b).count() > 1 {
                return Err(Problem::new(
                    place.to_string(),
                    "a reply is text and/or calls, or an `error`, or a `hang`: not several",
                ));
            }
            if let Some(status) = reply.error_status
                && !(400..=599).contains(&status)
            {
                return Err(Problem::new(
                    format!("{place}.error_status"),
                    format!("{status} is not an HTTP error status; write one from 400 to 599"),
                ));
            }
            if reply.error.is_none() && (reply.error_status.is_some() || reply.error_type.is_some()) {
                let field = if reply.error_status.is_some() { "error_status" } else { "error_type" };
                return Err(Problem::new(format!("{place}.{field}"), "shapes an `error` reply; add `error`"));
            }
            if reply.drop_after_chunks.is_some() && !answers {
                return Err(Problem::new(
                    format!("{place}.drop_after_chunks"),
                    "breaks the stream of a reply with text and/or calls; this reply has neither",
                ));
            }
            for (k, call) in reply.calls.iter().enumerate() {
                let at = Indexed(&place, ".calls", k);
                let own = vocabulary.owns(&call.tool);
                let declared_here = declared.contains(call.tool.as_str());
                // A core name the runtime declares as its own tool is that tool, not the core's.
                let builtin = builtin::parameters(&call.tool).is_some() && !declared_here;
                if !builtin && !own && !declared_here && !call.undeclared {
                    let mut names: Vec<&str> = builtin::names().collect();
                    names.extend(declared.iter().copied());
                    names.extend(vocabulary.own_names());
                    let guess =
                        suggest::did_you_mean(&call.tool, names).map(|g| format!("{g} Otherwise ")).unwrap_or_default();
                    return Err(Problem::new(
                        format!("{at}.tool"),
                        format!("the script calls `{}`, which is not a declared tool", crate::trace::printable(&call.tool)),
                    )
                    .hint(format!(
                        "{guess}declare it under `tools`, or mark the call `\"undeclared\": true` to show the unknown-tool answer"
                    )));
                }
                if !builtin && !own && !declared_here {
                    unknown_tool_answer(&rules.unknown_tool_message, &call.tool, s.limits.max_text_chars, at)?;
                }
                if !call.args.is_object() {
                    return Err(Problem::new(format!("{at}.args"), "arguments must be a JSON object"));
                }
                check_task_refs(&call.args, format_args!("{at}.args"))?;
                if builtin && !call.bad_args && vocabulary.checks_core_schema(&call.tool) {
                    builtin::check_call(&call.tool, &call.args, at)?;
                }
            }
        }
    }
    Ok(())
}

/// A place in the file one index below another (`lanes[0]`, then `lanes[0].replies[2]`),
/// spelled only when a problem names it: [`validate`] passes one for every reply and call.
#[derive(Clone, Copy)]
struct Indexed<'a>(&'a dyn fmt::Display, &'static str, usize);

impl fmt::Display for Indexed<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}[{}]", self.0, self.1, self.2)
    }
}

/// Checks the profile names a scenario uses (a lane's `profile`, a `subagent` call's `agent`)
/// against the profiles it can use (`names`: inline ones and those of its profile folders,
/// known only once the folders are read).
pub fn check_profile_names<'a>(s: &Scenario, names: impl IntoIterator<Item = &'a str>) -> Result<(), Problem> {
    let names: Vec<&str> = names.into_iter().collect();
    let unknown = |field: String, name: &str, what: &str, opt_out: &str| {
        let known = if names.is_empty() {
            "The scenario has no profiles: declare them under `profiles` or in `profile_dirs`".to_string()
        } else {
            format!("Its profiles: {}", names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "))
        };
        let guess = did_you_mean(name, names.iter().copied()).map(|g| format!("{g} ")).unwrap_or_default();
        Problem::new(
            field,
            format!("{what} `{}`, which is not a profile of this scenario", crate::trace::printable(name)),
        )
        .hint(format!("{guess}{known}{opt_out}"))
    };
    for (i, lane) in s.lanes.iter().enumerate() {
        if let Some(profile) = &lane.profile
            && !names.contains(&profile.as_str())
        {
            let field = format!("lanes[{i}].profile");
            return Err(unknown(field, profile, "the lane selects children running profile", ""));
        }
        for (j, reply) in lane.replies.iter().enumerate() {
            for (k, call) in reply.calls.iter().enumerate() {
                let agent = call.args.get("agent").and_then(serde_json::Value::as_str);
                if call.tool == "subagent"
                    && !call.bad_args
                    && let Some(agent) = agent
                    && !names.contains(&agent)
                {
                    let field = format!("lanes[{i}].replies[{j}].calls[{k}].args.agent");
                    let opt_out =
                        "; mark the call `\"bad_args\": true` if the model names a missing profile on purpose";
                    return Err(unknown(field, agent, "the call asks for profile", opt_out));
                }
            }
        }
    }
    Ok(())
}

/// Whether `alias` is an agent alias (`main`, `main/2`, `main/1/3`); the error is a
/// suggestion, when one is near.
fn check_alias(alias: &str) -> Result<(), Option<String>> {
    let number = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) && !part.starts_with('0');
    let mut parts = alias.split('/');
    if parts.next() == Some("main") && parts.all(number) {
        return Ok(());
    }
    // The nearest alias: `main` for a slip of the root's name, separators made `/`, numbers
    // without leading zeros.
    let mut parts = alias.split(['/', '.', '\\', '-', '_', ' ']).filter(|p| !p.is_empty());
    let root = parts.next().unwrap_or_default();
    if suggest::nearest(root, ["main"]).is_none() && root != "main" {
        return Err(None);
    }
    let mut guess = String::from("main");
    for part in parts {
        let digits = part.trim_start_matches('0');
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(None);
        }
        guess.push('/');
        guess.push_str(digits);
    }
    Err(Some(format!("did you mean `{guess}`?")))
}

/// The texts of a request check, each within the text limit.
fn check_when(when: &When, max: usize, place: &str) -> Result<(), Problem> {
    for (field, texts) in [("contains", &when.contains), ("absent", &when.absent)] {
        for (i, value) in texts.iter().enumerate() {
            check_text(value, max, &format_args!("{place}.{field}[{i}]"))?;
        }
    }
    for (field, refs) in [("result_of", &when.result_of), ("no_result_of", &when.no_result_of)] {
        for (i, reference) in refs.iter().enumerate() {
            // The same spelling as in call arguments: no sign, no leading zero (so `$task01`
            // and `$task+1` are refused here, not read as `$task1`).
            if task_number(reference).is_none() {
                return Err(Problem::new(
                    format!("{place}.{field}[{i}]"),
                    format!(
                        "{} is not a task reference: write `$taskN`, the N-th task the run queued (from 1)",
                        crate::trace::quoted(reference)
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn check_order_dependent(reason: &Option<String>, place: &str) -> Result<(), Problem> {
    match reason {
        Some(reason) if reason.trim().is_empty() => Err(Problem::new(
            format!("{place}.order_dependent"),
            "say why it holds in the default tie order only: the reason is shown when explored orders skip it",
        )),
        _ => Ok(()),
    }
}

fn validate_check(check: &Check, max: usize, place: &str) -> Result<(), Problem> {
    check_order_dependent(&check.order_dependent, place)?;
    for (field, texts) in [("contains", &check.contains), ("absent", &check.absent)] {
        for (i, value) in texts.iter().enumerate() {
            check_text(value, max, &format_args!("{place}.{field}[{i}]"))?;
        }
    }
    for (field, value) in [("first_message", &check.first_message), ("last_message", &check.last_message)] {
        if let Some(value) = value {
            check_text(value, max, &format_args!("{place}.{field}"))?;
        }
    }
    if let Some(nth) = &check.nth_message {
        if nth.n == 0 {
            return Err(Problem::new(format!("{place}.nth_message.n"), "messages are counted from 1: the first is 1"));
        }
        check_text(&nth.text, max, &format_args!("{place}.nth_message.text"))?;
    }
    if let Some(recorded) = &check.recorded {
        for (i, pattern) in recorded.volatile.iter().enumerate() {
            if let Err(why) = volatile_regex(pattern) {
                return Err(Problem::new(
                    format!("{place}.recorded.volatile[{i}]"),
                    format!("not a regular expression: {why}"),
                ));
            }
        }
        let texts =
            recorded.system.iter().map(|s| ("system".to_string(), s)).chain(
                recorded.messages.iter().enumerate().map(|(i, m)| (format!("messages[{i}].content"), &m.content)),
            );
        for (field, text) in texts {
            if text.chars().count() > max {
                return Err(Problem::new(
                    format!("{place}.recorded.{field}"),
                    format!("the text is longer than limits.max_text_chars ({max})"),
                ));
            }
        }
    }
    Ok(())
}

/// Every clause id the description cites (`core.budget.never-refunded`, or a whole area,
/// `bub.spawn.*`) is a clause of docs/rules/: a misspelt id would silently count for nothing,
/// so it is refused like a misspelt field.
fn check_cited_ids(description: &str) -> Result<(), Problem> {
    use crate::clauses::{citable_ids, cited_ids, is_citable};
    let Some((_, id)) = cited_ids(description).into_iter().find(|(_, id)| !is_citable(id)) else { return Ok(()) };
    // A cut-short id (`core.budget.pre-deduction`) is best answered by the id it starts.
    let extended = citable_ids().iter().filter(|c| c.starts_with(id)).min_by_key(|c| c.len());
    let hint = extended.map(|c| format!("did you mean `{c}`?"));
    let hint = hint.or_else(|| suggest::did_you_mean(id, citable_ids().iter().copied())).unwrap_or_else(|| {
        "clause ids are the bold list items of docs/rules/*.md; `rehearsal run --coverage-all` lists them".into()
    });
    Err(Problem::new(
        "description",
        format!("`{id}` is written as a rule clause id, but docs/rules/ has no such clause"),
    )
    .hint(hint))
}

/// The run limits themselves: each within what the harness can honour.
fn validate_limits(s: &Scenario) -> Result<(), Problem> {
    let limits = &s.limits;
    if limits.max_events == 0 {
        return Err(Problem::new("limits.max_events", "must be at least 1"));
    }
    // No file lifts its own limits past the ceilings (a 150-byte file that raised
    // `max_text_chars` could ask for a 20 GB text).
    let ceilings = ceilings();
    for (field, value, ceiling) in [
        ("limits.max_events", limits.max_events, ceilings.max_events),
        ("limits.max_text_chars", limits.max_text_chars, ceilings.max_text_chars),
        ("limits.max_calls_per_reply", limits.max_calls_per_reply, ceilings.max_calls_per_reply),
    ] {
        if value > ceiling {
            return Err(Problem::new(
                field,
                format!("{value} is past the ceiling of {ceiling}, which no file can raise"),
            )
            .hint("`rehearsal run --raise-ceilings` raises every ceiling for one command, if a person means it"));
        }
    }
    if limits.horizon_ms == 0 || limits.horizon_ms > MAX_VIRTUAL_MS {
        return Err(Problem::new(
            "limits.horizon_ms",
            format!("must be from 1 to {MAX_VIRTUAL_MS} ms (ten years of virtual time)"),
        ));
    }
    if limits.max_depth > MAX_DEPTH {
        return Err(Problem::new("limits.max_depth", format!("must be at most {MAX_DEPTH}")));
    }
    let rules = s.rules.resolve();
    if rules.depth_limit > limits.max_depth {
        return Err(Problem::new(
            "rules.depth_limit",
            format!(
                "{} is deeper than limits.max_depth ({}): foreground children run inline, so each level nests; raise limits.max_depth (up to {MAX_DEPTH}) if you mean it",
                rules.depth_limit, limits.max_depth
            ),
        ));
    }
    for (knob, limit) in [
        ("rules.agent_timeout_ms", rules.agent_timeout),
        ("rules.subagent_default_timeout_ms", rules.subagent_default_timeout),
    ] {
        if let Some(limit) = limit
            && limit.as_millis() > u128::from(MAX_VIRTUAL_MS)
        {
            return Err(Problem::new(
                knob,
                format!("longer than the longest virtual time a scenario may name ({MAX_VIRTUAL_MS} ms)"),
            ));
        }
    }
    check_texts_total(s)
}

/// The answer the core makes to a call of an unknown tool is the rules' `unknown_tool_message`
/// with every `{name}` replaced by the tool's name: bounded here, at load, by the text limit,
/// since the core expands it (`{name}` repeated, with long names, can take 2.9 GB).
fn unknown_tool_answer(message: &str, tool: &str, max: usize, at: impl fmt::Display) -> Result<(), Problem> {
    let names = message.matches("{name}").count();
    let chars =
        (message.chars().count() - names * "{name}".len()).saturating_add(names.saturating_mul(tool.chars().count()));
    if chars > max {
        return Err(Problem::new(
            format!("{at}.tool"),
            format!(
                "the unknown-tool answer to this call (rules.unknown_tool_message with each {{name}} replaced by the tool's name) stands for {chars} characters, more than limits.max_text_chars ({max})"
            ),
        ));
    }
    Ok(())
}

/// A text's length in characters, without building it (`None` past `usize::MAX`).
fn text_chars(text: &Text) -> Option<usize> {
    match text {
        Text::Plain(s) => Some(s.chars().count()),
        Text::Repeat { repeat, count } => repeat.chars().count().checked_mul(*count),
        Text::Parts(parts) => parts.iter().try_fold(0usize, |sum, part| sum.checked_add(text_chars(part)?)),
    }
}

/// All the texts of the file's request checks (`check_every`, `check`, `when`) together stand
/// for at most `limits.max_text_chars` characters: each is searched for in every message of
/// every request it checks, so their sum, not only each one, sets the work of a request
/// (2,000 long `absent` texts in a 70 KB file would run past 30 s).
fn check_texts_total(s: &Scenario) -> Result<(), Problem> {
    fn of_check(check: &Check) -> impl Iterator<Item = &Text> {
        let ends = [&check.first_message, &check.last_message].into_iter().flatten();
        check.contains.iter().chain(&check.absent).chain(ends).chain(check.nth_message.iter().map(|n| &n.text))
    }
    let max = s.limits.max_text_chars;
    let mut total = 0usize;
    for (i, lane) in s.lanes.iter().enumerate() {
        let every = lane.check_every.iter().flat_map(of_check);
        let replies = lane.replies.iter().flat_map(|reply| {
            let whens = reply.when.iter().flat_map(|when| when.contains.iter().chain(&when.absent));
            reply.check.iter().flat_map(of_check).chain(whens)
        });
        for text in every.chain(replies) {
            total = total.saturating_add(text_chars(text).unwrap_or(usize::MAX));
            if total > max {
                return Err(Problem::new(
                    format!("lanes[{i}]"),
                    format!(
                        "the texts of the file's request checks stand for more than limits.max_text_chars ({max}) characters together; each is searched for in every request it checks"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// A text's length in characters, without building it, within `max` characters.
fn check_text(text: &Text, max: usize, place: &dyn fmt::Display) -> Result<(), Problem> {
    match text_chars(text) {
        Some(n) if n <= max => Ok(()),
        n => Err(Problem::new(
            place.to_string(),
            format!(
                "this text stands for {} characters, more than limits.max_text_chars ({max}); raise the limit if you mean it",
                n.map_or_else(|| "more than 2^64".to_string(), |n| n.to_string())
            ),
        )),
    }
}

/// A time limit in seconds given in a file (a profile's `timeout_seconds`).
pub(crate) fn check_seconds(seconds: f64) -> Result<(), String> {
    if !(seconds.is_finite() && seconds >= 0.0) {
        return Err(format!("must be a number of seconds, 0 or more (got {seconds})"));
    }
    if seconds > crate::rules::MAX_SECONDS {
        return Err(format!(
            "{seconds:e} s is longer than the longest limit a file may give ({} s)",
            crate::rules::MAX_SECONDS
        ));
    }
    Ok(())
}

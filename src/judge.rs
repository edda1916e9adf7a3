//! Judging a finished run: its expectations, the script it left unused, the trace fragments
//! it must or must not hold, and every oracle (the model-side ones too), into a [`Verdict`].
//!
//! Judging reads the run's record only; it never runs anything (that is `run`) and reads no
//! file.
//!
//! - `failure`: one reason a scenario failed, as data (kind, clause, agent, evidence).
//! - `verdict`: the [`Judgement`] (everything that decides a verdict, gathered) and the
//!   [`Verdict`] it builds, once: the only place a verdict is made (the wire's judge and the
//!   runner hand their inputs to it; `tests/suite/architecture.rs` holds this).
//! - this file: the in-process judge, a run against the scenario's expectations and oracles.

mod failure;
mod verdict;

pub use failure::{Failure, FailureKind};
use verdict::plural;
pub use verdict::{Judgement, Served, Subject, Verdict};

use crate::evidence::Evidence;
use crate::oracles::{self, Violation, model_side};
use crate::run::Run;
use crate::scenario::Scenario;
use crate::scenario::with_task_ids;
use crate::sut::event::Event;
use crate::trace::{Trace, What, printable, quoted, text_difference};
use std::time::Duration;

/// What the scenario holds to the default tie order only (`order_dependent`), each as its
/// place and reason.
pub fn default_only(scenario: &Scenario) -> Vec<String> {
    let mut out = Vec::new();
    let mut note = |place: String, reason: &Option<String>| {
        if let Some(reason) = reason {
            out.push(format!("{place} ({reason})"));
        }
    };
    for (i, turn) in scenario.turns.iter().enumerate() {
        note(format!("turns[{i}].expect"), &turn.expect.order_dependent);
    }
    for (i, lane) in scenario.lanes.iter().enumerate() {
        if let Some(check) = &lane.check_every {
            note(format!("lanes[{i}].check_every"), &check.order_dependent);
        }
        for (j, reply) in lane.replies.iter().enumerate() {
            if let Some(check) = &reply.check {
                note(format!("lanes[{i}].replies[{j}].check"), &check.order_dependent);
            }
        }
    }
    note("expect".to_string(), &scenario.expect.order_dependent);
    out
}

/// The model-side findings of a run: the model-side oracles, and, for a core that reports its
/// aliases, whether the attribution gave each exchange the core's alias.
fn model_side_findings(side: &crate::evidence::attribution::ModelSide, run: &Run) -> Vec<model_side::Finding> {
    let mut findings = model_side::check(side, &run.rules, &dialect_of(side), Some(&run.setup));
    if run.reports == crate::sut::Reports::Events {
        findings.extend(model_side::proof(side, &run.exchanges));
    }
    findings
}

/// The model-side findings of a run as violations (for the fuzzer's per-order check).
pub(crate) fn model_side_violations(side: &crate::evidence::attribution::ModelSide, run: &Run) -> Vec<Violation> {
    model_side_findings(side, run).into_iter().map(|f| model_side_violation(run, f)).collect()
}

/// A model-side oracle's finding as a failure: its clause and agent kept as data.
pub(crate) fn model_side_failure(finding: &model_side::Finding) -> Failure {
    Failure::new(FailureKind::Oracle, finding.to_string(), Vec::new()).of_rule(finding.clause, finding.agent.clone())
}

pub(crate) fn model_side_violation(run: &Run, f: crate::oracles::model_side::Finding) -> Violation {
    let at = run.model_side.as_ref().and_then(|s| s.exchanges.get(f.exchange)).map_or(Duration::ZERO, |e| e.arrived);
    Violation {
        oracle: oracles::Oracle::ModelSide,
        agent: f.agent.clone(),
        at,
        message: f.to_string(),
        lines: Vec::new(),
    }
}

/// The dialect a model-side record was attributed with.
fn dialect_of(side: &crate::evidence::attribution::ModelSide) -> crate::dialect::Dialect {
    side.dialect
        .as_deref()
        .cloned()
        .unwrap_or_else(|| crate::dialect::Dialect::builtin("rehearsal").expect("a built-in dialect"))
}

/// Which tie order a run was in, for what its judgement skips.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// The default order: everything is checked.
    Default,
    /// An explored order: expectations marked `order_dependent` are not checked.
    Explored,
}

/// Judges a run in the default order against the scenario's expectations.
///
/// The verdict lists causes before consequences: a panic, what stopped the run, then each
/// turn that ended otherwise than expected (or in an error nobody expected, when something
/// else failed), the oracles, the request checks and the expectations on the whole run, and
/// last the script left unused.
pub fn judge(scenario: &Scenario, run: Run) -> Verdict {
    judgement(scenario, run, Order::Default).verdict()
}

/// Judges a run in `order` against the scenario's expectations and the oracles.
pub fn judge_in(scenario: &Scenario, run: Run, order: Order) -> Verdict {
    judgement(scenario, run, order).verdict()
}

/// What decides the verdict on a run in `order`, before the caller adds what only it knows
/// (determinism, explored orders, the golden file).
pub(crate) fn judgement(scenario: &Scenario, run: Run, order: Order) -> Judgement {
    let explored = order == Order::Explored;
    let trace = &run.trace;
    let mut causes = Vec::new();
    let mut failures = Vec::new();
    let mut consequences = Vec::new();
    let fail = |list: &mut Vec<Failure>, what: String, lines: Vec<String>| {
        list.push(Failure::new(FailureKind::Expectation, what, lines))
    };
    for error in &run.internal_errors {
        causes.push(Failure::new(FailureKind::Internal, format!("internal error: {error}"), trace.tail(6)));
    }
    for halt in &run.halts {
        causes.push(Failure::new(FailureKind::Stopped, format!("stopped: {halt}"), trace.tail(6)));
    }
    let task_ids = queued_task_ids(trace);
    // Turns that ended in an error no expectation mentions: the likely cause of what follows.
    let mut unexpected_errors = Vec::new();
    for (i, turn) in scenario.turns.iter().enumerate() {
        let place = format!("turns[{i}].expect");
        let Some(outcome) = run.outcomes.get(i) else {
            if run.halts.is_empty() {
                fail(&mut causes, format!("{place}: the turn never ended"), Vec::new());
            }
            continue;
        };
        // The turn's end, and the root's outcome just before it.
        let turn_number = i as u32 + 1;
        let end = run
            .trace
            .entries
            .iter()
            .position(|e| matches!(&e.what, What::Core(Event::TurnEnded { turn, .. }) if *turn == turn_number));
        let turn_lines = || end.map_or_else(Vec::new, |end| trace.lines_at(&[end.saturating_sub(1), end]));
        let e = &turn.expect;
        if explored && e.order_dependent.is_some() {
            continue;
        }
        if outcome.status == crate::sut::event::Status::Error && e.outcome.is_none() && e.status.is_none() {
            unexpected_errors.push(Failure::new(
                FailureKind::UnexpectedError,
                format!(
                    "turns[{i}] ended with {} {}: {} (no expectation names this outcome; it is listed first as the likely cause)",
                    word(&outcome.kind),
                    word(&outcome.status),
                    quoted(&outcome.message)
                ),
                turn_lines(),
            ));
        }
        let mut mismatches = Vec::new();
        if let Some(want) = e.outcome {
            mismatches.push(("outcome", word(&want), word(&outcome.kind)));
        }
        if let Some(want) = e.status {
            mismatches.push(("status", word(&want), word(&outcome.status)));
        }
        for (field, want, got) in mismatches.drain(..) {
            if want != got {
                let what = format!("{place}.{field}: expected {want}, got {got}");
                causes.push(Failure::new(FailureKind::Expectation, what, turn_lines()).differing(want, got));
            }
        }
        if let Some(want) = &e.message {
            match with_task_ids(&want.render(), &task_ids) {
                Ok(want) if *want != outcome.message => causes.push(
                    Failure::new(
                        FailureKind::Expectation,
                        format!("{place}.message: {}", text_difference(&want, &outcome.message)),
                        turn_lines(),
                    )
                    .differing(want.as_ref(), outcome.message.as_str()),
                ),
                Ok(_) => {}
                Err(reference) => {
                    fail(&mut causes, unknown_task(&format!("{place}.message"), &reference, &task_ids), Vec::new())
                }
            }
        }
        if let Some(want) = &e.message_contains {
            match with_task_ids(&want.render(), &task_ids) {
                Ok(want) if !outcome.message.contains(want.as_ref()) => causes.push(
                    Failure::new(
                        FailureKind::Expectation,
                        format!(
                            "{place}.message_contains: the final message does not contain {}; it is {}",
                            quoted(&want),
                            quoted(&outcome.message)
                        ),
                        turn_lines(),
                    )
                    .differing(want.as_ref(), outcome.message.as_str()),
                ),
                Ok(_) => {}
                Err(reference) => fail(
                    &mut causes,
                    unknown_task(&format!("{place}.message_contains"), &reference, &task_ids),
                    Vec::new(),
                ),
            }
        }
        if let Some(want) = e.budget_left {
            mismatches.push(("budget_left", want.to_string(), outcome.budget_left.to_string()));
        }
        if let Some(want) = e.steps {
            mismatches.push(("steps", want.to_string(), outcome.steps.to_string()));
        }
        for (field, want, got) in mismatches {
            if want != got {
                let what = format!("{place}.{field}: expected {want}, got {got}");
                causes.push(Failure::new(FailureKind::Expectation, what, turn_lines()).differing(want, got));
            }
        }
    }
    // Judged from the model's side, the core's events are hidden: the model-side oracles
    // judge the exchanges, and no oracle or trace expectation reads the trace.
    let model_side = run.model_side.as_ref().map(|side| model_side_findings(side, &run));
    // A model-side finding is an oracle's (a clause of `oracle.model-side.*`), as an event
    // oracle's is.
    for finding in model_side.iter().flatten() {
        failures.push(model_side_failure(finding));
    }
    // A run limit that stopped the run is named as the stop already: the oracles are not
    // asked about it again (the termination oracle would report it a second time).
    let events =
        if model_side.is_some() { Vec::new() } else { oracles::check(&Evidence { limit_hit: None, ..run.evidence() }) };
    for violation in events {
        failures.push(
            Failure::new(FailureKind::Oracle, violation.to_string(), trace.lines_at(&violation.lines))
                .of_rule(format!("oracle.{}", violation.oracle.name()), violation.agent.clone()),
        );
    }
    for check in &run.failed_checks {
        failures.push(Failure::new(FailureKind::Check, format!("check failed: {check}"), Vec::new()));
    }
    // Expectations on the whole run the file holds to the default order are not checked in
    // an explored one.
    let whole = !(explored && scenario.expect.order_dependent.is_some());
    if whole && model_side.is_none() {
        failures.extend(fragments(scenario, trace, &task_ids));
    }
    if let Some(want) = scenario.expect.elapsed_ms.filter(|_| whole) {
        let got = run.elapsed.as_millis() as u64;
        if want != got {
            let what = format!("expect.elapsed_ms: expected {want} ms of virtual time, got {got} ms");
            failures.push(
                Failure::new(FailureKind::Expectation, what, Vec::new()).differing(want.to_string(), got.to_string()),
            );
        }
    }
    if let Some(want) = scenario.expect.live_sessions.as_ref().filter(|_| whole) {
        let want: Result<Vec<String>, String> =
            want.iter().map(|name| with_task_ids(name, &task_ids).map(|n| n.into_owned())).collect();
        match want {
            Ok(want) if want != run.live_sessions => {
                let (want, got) = (names(&want), names(&run.live_sessions));
                let what = format!("expect.live_sessions: expected {want}, got {got}");
                failures.push(Failure::new(FailureKind::Expectation, what, Vec::new()).differing(want, got))
            }
            Ok(_) => {}
            Err(reference) => {
                fail(&mut failures, unknown_task("expect.live_sessions", &reference, &task_ids), Vec::new())
            }
        }
    }
    if run.halts.is_empty() {
        consequences.extend(unused_lanes(scenario, &run));
    }
    let mut all = causes;
    if !(all.is_empty() && failures.is_empty() && consequences.is_empty()) {
        all.extend(unexpected_errors);
    }
    all.extend(failures);
    all.extend(consequences);
    Judgement::new(scenario.name.clone(), Subject::Run(Box::new(run)), all)
}

/// A value's name in the file format (`final_answer`, `error`), not Rust's.
fn word<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) => name,
        _ => "?".to_string(),
    }
}

/// Names for a message: `["a", "b"]` in JSON quoting.
fn names(names: &[String]) -> String {
    format!("[{}]", names.iter().map(|n| quoted(n)).collect::<Vec<_>>().join(", "))
}

/// The task ids of a run in the order the core queued them: what `$taskN` in an expectation
/// refers to.
fn queued_task_ids(trace: &Trace) -> Vec<String> {
    // A set beside the list: a task queued again (a continuation) is found without a scan of
    // every id so far, which made this quadratic in tasks.
    let mut seen: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
    let mut ids: Vec<String> = Vec::new();
    for entry in &trace.entries {
        if let What::Core(Event::TaskQueued { task_id, .. }) = &entry.what
            && seen.insert(task_id)
        {
            ids.push(task_id.clone());
        }
    }
    ids
}

fn unknown_task(place: &str, reference: &str, ids: &[String]) -> String {
    let queued = match ids {
        [] => "it queued none".to_string(),
        ids => format!("it queued {}: {}", plural(ids.len(), "task", "tasks"), ids.join(", ")),
    };
    format!("{place}: {reference} refers to a task the run did not queue ({queued})")
}

/// The script left unused: a lane that selected no agent (with the agents that did ask), and
/// replies no request took.
fn unused_lanes(scenario: &Scenario, run: &Run) -> Vec<Failure> {
    // The agents that asked the model, each once, in order: read only to explain a lane that
    // selected nobody.
    let agents_cell = std::cell::OnceCell::new();
    let agents = || {
        agents_cell.get_or_init(|| {
            let mut seen = std::collections::BTreeSet::new();
            let agents: Vec<&crate::sut::llm::LlmRequest> = run
                .exchanges
                .iter()
                .map(|exchange| &exchange.request)
                .filter(|request| seen.insert(&request.agent))
                .collect();
            agents
        })
    };
    let mut out = Vec::new();
    for (i, (lane, used)) in scenario.lanes.iter().zip(&run.lane_use).enumerate() {
        // Replies marked `optional` or `repeatable` may go unused.
        let uses = run.reply_use.get(i);
        let unused: Vec<usize> = (0..lane.replies.len())
            .filter(|j| uses.and_then(|u| u.get(*j)).copied().unwrap_or(0) == 0)
            .filter(|j| !(lane.replies[*j].optional || lane.replies[*j].repeatable))
            .collect();
        let left = unused.len();
        if left == 0 {
            continue;
        }
        if *used > 0 {
            let of = plural(lane.replies.len(), "reply was", "replies were");
            let which = if left < lane.replies.len() {
                let list: Vec<String> = unused.iter().map(|j| format!("replies[{j}]")).collect();
                format!(" ({})", list.join(", "))
            } else {
                String::new()
            };
            out.push(Failure::new(
                FailureKind::UnusedScript,
                format!("unused script: lanes[{i}] ({}): {left} of its {of} not used{which}", lane.selector()),
                Vec::new(),
            ));
            continue;
        }
        let agents = agents();
        let children = agents.iter().filter(|a| a.agent.depth() > 0);
        let (seen, hint) = match (&lane.agent, &lane.task_contains, &lane.profile) {
            (Some(alias), _, _) => {
                let aliases: Vec<&str> = agents.iter().map(|a| a.agent.as_str()).collect();
                let hint = crate::scenario::did_you_mean(alias, aliases.iter().copied());
                (format!("the agents that asked the model: {}", aliases.join(", ")), hint)
            }
            (_, Some(_), _) => {
                let tasks: Vec<String> = children.map(|a| format!("{} {}", a.agent, quoted(&a.goal))).collect();
                (
                    format!(
                        "the children's tasks: {}",
                        if tasks.is_empty() { "none".into() } else { tasks.join(", ") }
                    ),
                    None,
                )
            }
            _ => {
                let profiles: Vec<String> = children
                    .map(|a| format!("{} {}", a.agent, a.profile.as_deref().map_or("no profile".to_string(), quoted)))
                    .collect();
                let hint = crate::scenario::did_you_mean(
                    lane.profile.as_deref().unwrap_or_default(),
                    agents.iter().filter_map(|a| a.profile.as_deref()),
                );
                let profiles = if profiles.is_empty() { "none".into() } else { profiles.join(", ") };
                (format!("the children's profiles: {profiles}"), hint)
            }
        };
        let hint = hint.map(|h| format!("; {h}")).unwrap_or_default();
        out.push(Failure::new(
            FailureKind::UnusedScript,
            format!(
                "unused script: lanes[{i}] ({}) selected no agent, so none of its {} was used; {seen}{hint}",
                printable(&lane.selector()),
                plural(lane.replies.len(), "reply", "replies")
            ),
            Vec::new(),
        ));
    }
    out
}

/// A trace line with every run of whitespace made one space, trimmed: the columns of the text
/// trace are padding, not content.
fn normalise(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A fragment normalised as the lines are, line by line: runs of whitespace made one space,
/// each line's leading padding dropped, and the end of every line but the last trimmed (a
/// trailing space on the last still asks for a word to end there).
fn normalise_fragment(fragment: &str) -> String {
    let pieces: Vec<&str> = fragment.split('\n').collect();
    let last = pieces.len() - 1;
    let mut out = Vec::with_capacity(pieces.len());
    for (i, piece) in pieces.into_iter().enumerate() {
        let mut normal = normalise(piece);
        if i == last && piece.ends_with(char::is_whitespace) && !normal.is_empty() {
            normal.push(' ');
        }
        out.push(normal);
    }
    out.join("\n")
}

/// Whether a (normalised) fragment starts with a virtual time (`0.150s`): it then matches only
/// at the start of a line, so `0.000s main/4` is not found inside `30.000s main/4`.
fn starts_with_time(fragment: &str) -> bool {
    let first = fragment.split([' ', '\n']).next().unwrap_or_default();
    first.strip_suffix('s').and_then(|t| t.split_once('.')).is_some_and(|(secs, ms)| {
        !secs.is_empty()
            && secs.bytes().all(|b| b.is_ascii_digit())
            && ms.len() == 3
            && ms.bytes().all(|b| b.is_ascii_digit())
    })
}

/// Where a normalised fragment first stands in the normalised text at or after byte `from`;
/// an anchored one only at the start of a line.
fn find_from(text: &str, fragment: &str, from: usize, anchored: bool) -> Option<usize> {
    let mut at = from;
    while let Some(found) = text.get(at..)?.find(fragment) {
        let start = at + found;
        if !anchored || start == 0 || text.as_bytes()[start - 1] == b'\n' {
            return Some(start);
        }
        at = start + 1;
        while !text.is_char_boundary(at) {
            at += 1;
        }
    }
    None
}

/// The line of `lines` nearest to `fragment`: most of its words, then the most alike.
fn nearest_line(lines: &[String], fragment: &str) -> Option<usize> {
    let words: Vec<&str> = fragment.split(' ').collect();
    let score = |line: &str| {
        let shared = words.iter().filter(|w| line.contains(*w)).count();
        (shared, strsim::normalized_levenshtein(fragment, line))
    };
    (0..lines.len()).max_by(|a, b| {
        let (sa, sb) = (score(&lines[*a]), score(&lines[*b]));
        sa.0.cmp(&sb.0).then(sa.1.total_cmp(&sb.1)).then(b.cmp(a))
    })
}

/// `expect.trace` (in order) and `expect.trace_absent`, matched on whitespace-normalised
/// lines.
fn fragments(scenario: &Scenario, trace: &Trace, task_ids: &[String]) -> Vec<Failure> {
    let mut out = Vec::new();
    let expect = &scenario.expect;
    if expect.trace.is_empty() && expect.trace_absent.is_empty() {
        return out;
    }
    let lines = trace.lines();
    let normal: Vec<String> = lines.iter().map(|l| normalise(l)).collect();
    let text = normal.join("\n");
    let starts: Vec<usize> = std::iter::once(0).chain(text.match_indices('\n').map(|(at, _)| at + 1)).collect();
    let line_of = |at: usize| starts.partition_point(|start| *start <= at) - 1;
    let resolve = |place: &str, fragment: &str, out: &mut Vec<Failure>| match with_task_ids(fragment, task_ids) {
        Ok(fragment) => Some(normalise_fragment(&fragment)),
        Err(reference) => {
            out.push(Failure::new(FailureKind::Expectation, unknown_task(place, &reference, task_ids), Vec::new()));
            None
        }
    };
    // Where the previous fragment ended, and on which line it was found.
    let mut from = 0;
    let mut previous_line = None;
    for (i, fragment) in expect.trace.iter().enumerate() {
        let place = format!("expect.trace[{i}]");
        let Some(wanted) = resolve(&place, fragment, &mut out) else { continue };
        let anchored = starts_with_time(&wanted);
        if let Some(at) = find_from(&text, &wanted, from, anchored) {
            from = at + wanted.len();
            previous_line = Some(line_of(at));
            continue;
        }
        let anywhere = find_from(&text, &wanted, 0, anchored).map(line_of);
        let after = match previous_line {
            None => "does not appear in the trace".to_string(),
            Some(line) => {
                format!("does not appear after trace line {}, where expect.trace[{}] was found", line + 1, i - 1)
            }
        };
        let earlier = anywhere.map(|l| format!("; it appears earlier, on trace line {}", l + 1)).unwrap_or_default();
        let anchor = if anchored { " (it starts with a time, so it must start a line)" } else { "" };
        let mut what = format!("{place}: {} {after}{earlier}{anchor}", quoted(fragment));
        let mut shown = Vec::new();
        if anywhere.is_none()
            && let Some(near) = nearest_line(&normal, wanted.split('\n').next().unwrap_or_default())
        {
            what.push_str(&format!("; the nearest is trace line {}", near + 1));
            shown.push(lines[near].clone());
        }
        out.push(Failure::new(FailureKind::Expectation, what, shown));
    }
    for (i, fragment) in expect.trace_absent.iter().enumerate() {
        let place = format!("expect.trace_absent[{i}]");
        let Some(wanted) = resolve(&place, fragment, &mut out) else { continue };
        let anchored = starts_with_time(&wanted);
        let mut hits = Vec::new();
        let mut at = 0;
        while let Some(found) = find_from(&text, &wanted, at, anchored) {
            let line = line_of(found);
            hits.push(lines[line].clone());
            // On to the next line.
            at = text[found..].find('\n').map_or(text.len(), |nl| found + nl + 1);
        }
        if !hits.is_empty() {
            out.push(Failure::new(FailureKind::Expectation, format!("{place}: {} appears", quoted(fragment)), hits));
        }
    }
    out
}

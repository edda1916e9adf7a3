//! A served run judged: the model-side oracles over its exchanges, the server's own findings,
//! the request checks and the script's use, as the same [`Verdict`] `rehearsal run` reports.
//!
//! What this module deliberately does not do: judge any expectation on the core's events or
//! the turns' outcomes ([`not_applied`] lists them), or re-derive a rule (the oracles of
//! [`crate::oracles::model_side`] do).

use crate::judge::{Failure, FailureKind, Judgement, Served, Subject, Verdict};
use crate::oracles::model_side;
use crate::scenario::Scenario;

use super::{Absent, AgentHeader, End, FindingKind, WireRun};
use crate::evidence::attribution::{Attribution, ModelSide};

/// Judges a served run of `scenario`: what decides its verdict, on the record the model side
/// saw (a runtime in another process reports no events), with its wall time.
pub fn judge(scenario: &Scenario, wire: &WireRun) -> Verdict {
    judgement(scenario, wire, &[]).verdict()
}

/// What decides the verdict on a served run, before `drive` and `serve` add what only they
/// know (the runtime's switched-off oracles, how its commands ended, the clock's end).
pub(crate) fn judgement(scenario: &Scenario, wire: &WireRun, request_limits: &[model_side::RequestLimit]) -> Judgement {
    let mut causes = Vec::new();
    let mut failures = Vec::new();
    // A runtime that retries a request the script cannot answer meets the same stop again:
    // each stop is said once, with how many requests met it.
    let mut stops: Vec<(String, usize)> = Vec::new();
    for halt in &wire.halts {
        let said = halt.to_string();
        match stops.iter_mut().find(|(s, _)| *s == said) {
            Some((_, n)) => *n += 1,
            None => stops.push((said, 1)),
        }
    }
    for (said, n) in stops {
        let times = if n > 1 { format!(" ({n} requests met it)") } else { String::new() };
        causes.push(Failure::new(FailureKind::Stopped, format!("stopped: {said}{times}"), Vec::new()));
    }
    for finding in wire.findings.iter().filter(|f| f.kind != FindingKind::Unattributed) {
        // Unattributed requests are the model-side attribution oracle's to report.
        failures.push(Failure::new(
            FailureKind::Oracle,
            format!("wire: {}: {}", finding.kind.name(), finding.message),
            Vec::new(),
        ));
    }
    let rules = scenario.rules.resolve();
    let dialect = wire
        .side
        .dialect
        .as_deref()
        .cloned()
        .unwrap_or_else(|| crate::dialect::Dialect::builtin("generic").expect("a built-in dialect"));
    let findings = model_side::check(&wire.side, &rules, &dialect, None);
    for finding in findings.iter().chain(&model_side::check_requests(&wire.side, request_limits)) {
        failures.push(crate::judge::model_side_failure(finding));
    }
    for check in &wire.failed_checks {
        failures.push(Failure::new(FailureKind::Check, format!("check failed: {check}"), Vec::new()));
    }
    if wire.halts.is_empty() {
        failures.extend(unused(scenario, wire));
        failures.extend(users(scenario, wire));
    }
    causes.extend(failures);
    let served = Served {
        side: wire.side.clone(),
        exchanges: wire.exchanges.clone(),
        rules,
        elapsed: wire.elapsed,
        session_ended: wire.end == End::Script,
        stopped: !wire.halts.is_empty(),
    };
    let mut judgement = Judgement::new(scenario.name.clone(), Subject::Served(Box::new(served)), causes);
    // rehearsal's own attribution errors, before everything: every finding stands on them.
    for wrong in ground_truth(&wire.side, &wire.labels, &wire.agent_header).wrong {
        let failure = Failure::new(FailureKind::Internal, wrong, Vec::new());
        judgement.own_error(failure.of_rule("rehearsal.attribution", "rehearsal"));
    }
    judgement
}

/// The script a served run left unused: lanes that selected no agent, and replies that had to
/// be used and were not.
fn unused(scenario: &Scenario, wire: &WireRun) -> Vec<Failure> {
    let mut out = Vec::new();
    let ended = match wire.end {
        End::Idle => " before the idle limit ended the run",
        _ => "",
    };
    for (i, lane) in scenario.lanes.iter().enumerate() {
        let uses = wire.reply_use.get(i).map_or(&[][..], Vec::as_slice);
        let must: Vec<usize> = lane
            .replies
            .iter()
            .enumerate()
            .filter(|(j, r)| !(r.optional || r.repeatable) && uses.get(*j).copied().unwrap_or(0) == 0)
            .map(|(j, _)| j)
            .collect();
        if must.is_empty() {
            continue;
        }
        let what = if wire.lane_use.get(i).copied().unwrap_or(0) == 0 {
            format!("lanes[{i}] ({}) selected no agent{ended}: no request was put down to it", lane.selector())
        } else {
            let list: Vec<String> = must.iter().map(|j| format!("replies[{j}]")).collect();
            format!("lanes[{i}] ({}): {} never answered a request{ended}", lane.selector(), list.join(", "))
        };
        out.push(Failure::new(FailureKind::UnusedScript, what, Vec::new()));
    }
    out
}

/// The turns whose user message the root never sent. Each turn's `user` must appear in one of
/// the root's user messages, in turn order (contained, so that a runtime that wraps its user's
/// text, with a date line for one, still matches; messages in between, such as notifications,
/// are passed over). A turn with `user_free` matches nothing and is skipped.
fn users(scenario: &Scenario, wire: &WireRun) -> Vec<Failure> {
    use crate::evidence::attribution::Attribution;
    use crate::sut::llm::Role;
    // The root's user messages, in the order they first appeared.
    let mut said: Vec<&str> = Vec::new();
    for (e, a) in wire.side.exchanges.iter().zip(&wire.side.attributions) {
        let Attribution::Agent(a) = a else { continue };
        if a.alias != crate::sut::AgentId::root() {
            continue;
        }
        for m in e.messages.iter().filter(|m| m.role == Role::User) {
            if !said.contains(&m.content.as_str()) {
                said.push(&m.content);
            }
        }
    }
    if said.is_empty() {
        // No request of the root at all: the unused script and the attribution say so.
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut from = 0;
    for (i, turn) in scenario.turns.iter().enumerate() {
        if turn.user_free {
            continue;
        }
        let wanted = turn.user.trim();
        match said[from..].iter().position(|m| m.contains(wanted)) {
            Some(k) => from += k + 1,
            None => {
                let shown: Vec<String> =
                    said.iter().take(5).map(|m| crate::trace::quoted(&super::excerpt_to(m, 80))).collect();
                let more = if said.len() > 5 { format!(" and {} more", said.len() - 5) } else { String::new() };
                out.push(Failure::new(
                    FailureKind::Check,
                    format!(
                        "turns[{i}].user: the root never sent the model {} (after the turns before it); its user messages were {}{more} (set `user_free` on the turn to leave it free)",
                        crate::trace::quoted(&super::excerpt(wanted)),
                        shown.join(", ")
                    ),
                    Vec::new(),
                ));
            }
        }
    }
    out
}

/// The expectations of `scenario` a served run cannot judge, each as its place and why: the
/// core's events and the turns' outcomes are not on the wire.
pub fn not_applied(scenario: &Scenario) -> Vec<String> {
    let mut out = Vec::new();
    for (i, turn) in scenario.turns.iter().enumerate() {
        let e = &turn.expect;
        let fields = [
            ("outcome", e.outcome.is_some()),
            ("status", e.status.is_some()),
            ("message", e.message.is_some()),
            ("message_contains", e.message_contains.is_some()),
            ("budget_left", e.budget_left.is_some()),
            ("steps", e.steps.is_some()),
        ];
        for (field, set) in fields {
            if set {
                out.push(format!("turns[{i}].expect.{field}: a turn's outcome is the runtime's, not on the wire"));
            }
        }
    }
    let x = &scenario.expect;
    if !x.trace.is_empty() || !x.trace_absent.is_empty() {
        out.push("expect.trace / expect.trace_absent: the core's events are not on the wire".to_string());
    }
    if x.elapsed_ms.is_some() {
        out.push("expect.elapsed_ms: virtual time; a wire run measures wall time".to_string());
    }
    if x.live_sessions.is_some() {
        out.push("expect.live_sessions: the runtime's session store is not on the wire".to_string());
    }
    if !scenario.steer.is_empty() {
        out.push("steer: steering is sent by the runtime's user, not the model".to_string());
    }
    out
}

/// How a served run's attribution compares with the runtime's own names for its agents (the
/// agent header, [`AgentHeader`]): one alias per name and one name per alias, from the first
/// request of each.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroundTruth {
    /// Agents' requests whose alias and label agree.
    pub right: usize,
    /// Requests whose alias and label disagree: rehearsal's attribution errors, each told.
    pub wrong: Vec<String>,
    /// Labelled requests put down to no agent (refused as unattributed).
    pub unattributed: usize,
    /// Agents' requests with no label to compare.
    pub unlabelled: usize,
    /// Requests that fitted two candidates alike (each a finding), labelled or not.
    pub ambiguous: usize,
    /// Requests put down to an agent by a shared start only (each a finding), labelled or not.
    pub guessed: usize,
}

impl GroundTruth {
    /// Whether any request was compared at all.
    pub fn compared(&self) -> bool {
        self.right + self.wrong.len() + self.unattributed > 0
    }
}

/// A label as a message quotes it: printable, and cut as a request's text is (labels are
/// compared whole).
fn quote(label: &str) -> String {
    crate::trace::printable(&super::excerpt(label)).into_owned()
}

/// The name a request without the header stands for, when it means the root.
// A line break, which no header value can hold, so that no label a runtime sends is taken for it.
const ROOT_LABEL: &str = "\n(no header: the root)";

/// Compares each attributed request's alias with the runtime's label for it. The first request
/// of a label fixes its alias, and the first of an alias its label; a request that pairs either
/// otherwise is an attribution error of rehearsal's, told with both requests. Under a `reused`
/// header a label may name several agents in turn (never the root): a request of a label put
/// down to an agent that carries no label yet pairs them; each agent still carries one label.
pub fn ground_truth(side: &ModelSide, labels: &[Option<String>], header: &AgentHeader) -> GroundTruth {
    use std::collections::BTreeMap;
    let mut out = GroundTruth::default();
    // label -> (alias, exchange), alias -> (label, exchange)
    let mut alias_of: BTreeMap<String, (String, usize)> = BTreeMap::new();
    let mut label_of: BTreeMap<String, (String, usize)> = BTreeMap::new();
    let root = crate::sut::AgentId::root().to_string();
    if header.absent == Absent::Root {
        alias_of.insert(ROOT_LABEL.to_string(), (root.clone(), usize::MAX));
        label_of.insert(root.clone(), (ROOT_LABEL.to_string(), usize::MAX));
    }
    let name = &header.name;
    let reusable = |alias: &str| header.reused && *alias != root;
    for (i, attribution) in side.attributions.iter().enumerate() {
        let label = match (labels.get(i).cloned().flatten(), header.absent) {
            (Some(label), _) => Some(label),
            (None, Absent::Root) => Some(ROOT_LABEL.to_string()),
            (None, Absent::Unlabelled) => None,
        };
        let agent = match attribution {
            Attribution::Side(_) => continue,
            Attribution::Unattributed(_) => {
                out.unattributed += usize::from(label.is_some());
                continue;
            }
            Attribution::Agent(agent) => agent,
        };
        out.ambiguous += usize::from(agent.ambiguous.is_some());
        out.guessed += usize::from(agent.basis == crate::evidence::attribution::Basis::SharedStart);
        let Some(label) = label else {
            out.unlabelled += 1;
            continue;
        };
        let alias = agent.alias.to_string();
        // The pairing the description fixes (`absent: root`) is told as the rule, not as a label.
        let said = match (alias_of.get(&label), label_of.get(&alias)) {
            (None, None) => {
                alias_of.insert(label.clone(), (alias.clone(), i));
                label_of.insert(alias.clone(), (label.clone(), i));
                None
            }
            (Some((a, _)), Some((l, _))) if *a == alias && *l == label => None,
            // A reused name (`reused`): an earlier agent of the name asking again, or the name's
            // next agent, one that carries no name yet. Never the root, which is one agent.
            (_, Some((l, _))) if reusable(&alias) && *l == label => None,
            (Some((a, _)), None) if reusable(a) && reusable(&alias) => {
                alias_of.insert(label.clone(), (alias.clone(), i));
                label_of.insert(alias.clone(), (label.clone(), i));
                None
            }
            (_, Some((l, at))) if reusable(&alias) => Some(format!("`{alias}` is `{}` (at exchange {at})", quote(l))),
            (Some((a, at)), _) if *a != alias => Some(match *at {
                usize::MAX => format!("that is the root, `{a}`"),
                at => format!("`{}` is `{a}` (at exchange {at})", quote(&label)),
            }),
            (_, Some((l, at))) => Some(match *at {
                usize::MAX => format!("`{alias}` is the root, whose requests carry none"),
                at => format!("`{alias}` is `{}` (at exchange {at})", quote(l)),
            }),
            (Some(_), None) => None,
        };
        let named = if label == ROOT_LABEL {
            format!("it carries no {name} header (the root's, as the runtime is described: `absent: root`)")
        } else {
            format!("the runtime's {name} header names `{}`", quote(&label))
        };
        match said {
            None => out.right += 1,
            Some(earlier) => out.wrong.push(format!(
                "rehearsal's own attribution error, not the runtime's: exchange {i} was put down to `{alias}`, but {named}, and {earlier}"
            )),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::attribution::Attributed;
    use crate::sut::AgentId;

    /// `main`, `main/1`, ... from `"main"`, `"main/1"`: an agent's request; `"side"` a side
    /// request; `"?"` an unattributed one.
    fn side(aliases: &[&str]) -> ModelSide {
        let attributions = aliases
            .iter()
            .map(|a| match *a {
                "side" => Attribution::Side(0),
                "?" => Attribution::Unattributed("no agent".into()),
                alias => {
                    let mut id = AgentId::root();
                    for n in alias.split('/').skip(1) {
                        id = id.child(n.parse().unwrap());
                    }
                    Attribution::Agent(Attributed {
                        alias: id,
                        goal: "g".into(),
                        profile: None,
                        extends: true,
                        number: 1,
                        basis: crate::evidence::attribution::Basis::GoesOn,
                        ambiguous: None,
                    })
                }
            })
            .collect();
        ModelSide { attributions, ..ModelSide::default() }
    }

    fn labels(names: &[Option<&str>]) -> Vec<Option<String>> {
        names.iter().map(|n| n.map(String::from)).collect()
    }

    fn counts(truth: &GroundTruth) -> (usize, usize, usize, usize) {
        (truth.right, truth.wrong.len(), truth.unattributed, truth.unlabelled)
    }

    const UNLABELLED: AgentHeader = AgentHeader { name: String::new(), absent: Absent::Unlabelled, reused: false };

    fn header(absent: Absent) -> AgentHeader {
        AgentHeader { name: "X-Agent".into(), absent, reused: false }
    }

    #[test]
    fn ambiguous_and_guessed_requests_are_counted_labelled_or_not() {
        let mut side = side(&["main", "main/1", "main"]);
        let Attribution::Agent(who) = &mut side.attributions[1] else { unreachable!() };
        who.ambiguous = Some("it fits two calls".into());
        let Attribution::Agent(who) = &mut side.attributions[2] else { unreachable!() };
        who.basis = crate::evidence::attribution::Basis::SharedStart;
        let truth = ground_truth(&side, &labels(&[Some("root"), None, None]), &header(Absent::Unlabelled));
        assert_eq!((truth.ambiguous, truth.guessed), (1, 1));
        assert_eq!(counts(&truth), (1, 0, 0, 2));
    }

    #[test]
    fn two_children_swapped_are_told_only_where_a_later_request_crosses_the_first_pairing() {
        let side = side(&["main", "main/2", "main/1", "main/1", "main/2"]);
        // The first requests of `t1` and `t2` put down to each other's alias: each new name and
        // each new alias pair up, so nothing can tell yet (the comparison is of partitions, not
        // of names); the runtime's names are its own and say nothing of rehearsal's numbering.
        let swapped = labels(&[Some("root"), Some("t1"), Some("t2"), Some("t1"), Some("t2")]);
        let truth = ground_truth(&side, &swapped[..3], &header(Absent::Unlabelled));
        assert_eq!(counts(&truth), (3, 0, 0, 2));
        // Once `t1` is put down to `main/1` (the alias `t2` has), both later requests are told,
        // each naming the request that fixed the pairing.
        let truth = ground_truth(&side, &swapped, &header(Absent::Unlabelled));
        assert_eq!(counts(&truth), (3, 2, 0, 0));
        assert_eq!(
            truth.wrong,
            [
                "rehearsal's own attribution error, not the runtime's: exchange 3 was put down to `main/1`, but the runtime's X-Agent header names `t1`, and `t1` is `main/2` (at exchange 1)",
                "rehearsal's own attribution error, not the runtime's: exchange 4 was put down to `main/2`, but the runtime's X-Agent header names `t2`, and `t2` is `main/1` (at exchange 2)",
            ]
        );
    }

    #[test]
    fn a_name_on_two_aliases_and_an_alias_under_two_names_are_both_told() {
        let truth = ground_truth(
            &side(&["main", "main/1", "main/2", "main/1"]),
            &labels(&[Some("root"), Some("t1"), Some("t1"), Some("t9")]),
            &header(Absent::Unlabelled),
        );
        assert_eq!(counts(&truth), (2, 2, 0, 0));
        assert!(truth.wrong[0].contains("exchange 2 was put down to `main/2`, but the runtime's X-Agent header names `t1`, and `t1` is `main/1` (at exchange 1)"), "{:?}", truth.wrong);
        assert!(truth.wrong[1].contains("exchange 3 was put down to `main/1`, but the runtime's X-Agent header names `t9`, and `main/1` is `t1` (at exchange 1)"), "{:?}", truth.wrong);
    }

    fn reused(absent: Absent) -> AgentHeader {
        AgentHeader { reused: true, ..header(absent) }
    }

    #[test]
    fn a_reused_label_names_each_run_in_turn_and_each_run_still_one_label() {
        // smolagents' `researcher` called twice: two runs, two children, one label.
        let side = side(&["main", "main/1", "main/1", "main", "main/2", "main"]);
        let names = labels(&[
            Some("root"),
            Some("researcher"),
            Some("researcher"),
            Some("root"),
            Some("researcher"),
            Some("root"),
        ]);
        assert_eq!(counts(&ground_truth(&side, &names, &reused(Absent::Unlabelled))), (6, 0, 0, 0));
        // Without `reused` the second run is told, as before.
        let truth = ground_truth(&side, &names, &header(Absent::Unlabelled));
        assert_eq!(counts(&truth), (5, 1, 0, 0));
        assert!(truth.wrong[0].contains("exchange 4 was put down to `main/2`, but the runtime's X-Agent header names `researcher`, and `researcher` is `main/1` (at exchange 1)"), "{:?}", truth.wrong);
        // An earlier run asking again after the label moved on is still its own.
        let side_back = super::tests::side(&["main", "main/1", "main/2", "main/1"]);
        let back = labels(&[Some("root"), Some("researcher"), Some("researcher"), Some("researcher")]);
        assert_eq!(counts(&ground_truth(&side_back, &back, &reused(Absent::Unlabelled))), (4, 0, 0, 0));
    }

    #[test]
    fn a_reused_label_never_moves_off_the_root_and_a_run_never_takes_two_labels() {
        // The root's label on a new alias: the root is one agent, told as before.
        let truth = ground_truth(
            &side(&["main", "main/1"]),
            &labels(&[Some("root"), Some("root")]),
            &reused(Absent::Unlabelled),
        );
        assert_eq!(counts(&truth), (1, 1, 0, 0));
        assert!(truth.wrong[0].contains("exchange 1 was put down to `main/1`, but the runtime's X-Agent header names `root`, and `root` is `main` (at exchange 0)"), "{:?}", truth.wrong);
        // Nor does a child's label take the root's alias.
        let truth = ground_truth(
            &side(&["main", "main/1", "main"]),
            &labels(&[Some("root"), Some("researcher"), Some("researcher")]),
            &reused(Absent::Unlabelled),
        );
        assert_eq!(counts(&truth), (2, 1, 0, 0), "{:?}", truth.wrong);
        // One run under two labels: told, naming the run's label.
        let truth = ground_truth(
            &side(&["main", "main/1", "main/1"]),
            &labels(&[Some("root"), Some("researcher"), Some("reviewer")]),
            &reused(Absent::Unlabelled),
        );
        assert_eq!(counts(&truth), (2, 1, 0, 0));
        assert!(truth.wrong[0].contains("exchange 2 was put down to `main/1`, but the runtime's X-Agent header names `reviewer`, and `main/1` is `researcher` (at exchange 1)"), "{:?}", truth.wrong);
        // Under `absent: root` a request without the header is still the root's alone.
        let truth = ground_truth(&side(&["main", "main/1"]), &labels(&[None, None]), &reused(Absent::Root));
        assert_eq!(counts(&truth), (1, 1, 0, 0));
    }

    #[test]
    fn under_absent_root_the_root_is_fixed_before_any_request() {
        // A child's first request put down to the root, with no name of its own yet: told,
        // though it is the first request either way.
        let truth = ground_truth(&side(&["main", "main"]), &labels(&[None, Some("agent-1")]), &header(Absent::Root));
        assert_eq!(counts(&truth), (1, 1, 0, 0));
        assert_eq!(
            truth.wrong,
            [
                "rehearsal's own attribution error, not the runtime's: exchange 1 was put down to `main`, but the runtime's X-Agent header names `agent-1`, and `main` is the root, whose requests carry none"
            ]
        );
        // A child's request without the header, put down to the child: told against the rule.
        let truth = ground_truth(&side(&["main", "main/1"]), &labels(&[None, None]), &header(Absent::Root));
        assert_eq!(counts(&truth), (1, 1, 0, 0));
        assert_eq!(
            truth.wrong,
            [
                "rehearsal's own attribution error, not the runtime's: exchange 1 was put down to `main/1`, but it carries no X-Agent header (the root's, as the runtime is described: `absent: root`), and that is the root, `main`"
            ]
        );
        // Without the rule, neither is compared.
        let truth = ground_truth(&side(&["main", "main/1"]), &labels(&[None, None]), &UNLABELLED);
        assert_eq!(counts(&truth), (0, 0, 0, 2));
        assert!(!truth.compared());
    }

    #[test]
    fn the_counts_add_up_to_the_agents_requests_and_the_labelled_unattributed_ones() {
        let side = side(&["main", "side", "?", "?", "main/1", "main/1", "side", "main", "main/2"]);
        let names = labels(&[Some("root"), Some("root"), Some("x"), None, Some("t1"), Some("t2"), None, None]);
        for absent in [Absent::Unlabelled, Absent::Root] {
            let truth = ground_truth(&side, &names, &header(absent));
            let agents = side.attributions.iter().filter(|a| matches!(a, Attribution::Agent(_))).count();
            let labelled_unattributed = match absent {
                Absent::Unlabelled => 1,
                Absent::Root => 2,
            };
            assert_eq!(
                truth.right + truth.wrong.len() + truth.unattributed + truth.unlabelled,
                agents + labelled_unattributed,
                "{absent:?}: {truth:?}"
            );
            // Labels shorter than the exchanges (a record cut short) read as no header.
            // `t2` on `main/1`; under `absent: root`, also the root's `root` and `main/2` without it.
            assert_eq!(truth.wrong.len(), if absent == Absent::Root { 3 } else { 1 }, "{absent:?}: {truth:?}");
        }
    }
}

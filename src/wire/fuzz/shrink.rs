//! The smaller cases a failing [`Case`] is tried as, biggest cuts first: a whole turn, a whole
//! root reply, a call (a spawn takes its child's lane with it), a child's reply; then simpler
//! values: no latency, the default session, no time limit, a short answer, a limit left unset,
//! a text answer for a terminal call. Each candidate differs from its case by one cut, so a
//! greedy walk that keeps any candidate still failing the same way ends at a case none of
//! whose cuts does: minimal in that sense, not the smallest there is.
//!
//! This module proposes; the campaign drives each candidate (re-driving costs a runtime's
//! start-up, so it caches every verdict by the scenario's text) and decides.

use super::plan::{Call, Case, ChildReply, RootReply, Session, limit_values};

/// The candidates smaller than `case`, in the order they are tried; `settable`: the limits the
/// runtime lets a case set (a budget among them may be set to its least); `budget`: the root's
/// step budget as the runtime states it and what one spawn takes of it, where a case may set it.
pub fn candidates(case: &Case, settable: &[String], budget: Option<(u64, u64)>) -> Vec<Case> {
    let mut out = Vec::new();
    // Whole turns (never the last one left).
    if case.turns.len() > 1 {
        for t in 0..case.turns.len() {
            let mut c = case.clone();
            c.turns.remove(t);
            out.push(c);
        }
    }
    // Whole root replies, but a turn's final one.
    for (t, turn) in case.turns.iter().enumerate() {
        for r in 0..turn.replies.len().saturating_sub(1) {
            let mut c = case.clone();
            c.turns[t].replies.remove(r);
            out.push(c);
        }
    }
    // One call at a time (a reply left without calls goes too).
    for (t, turn) in case.turns.iter().enumerate() {
        for (r, reply) in turn.replies.iter().enumerate() {
            let RootReply::Calls { calls, .. } = reply else { continue };
            if calls.len() < 2 {
                continue;
            }
            for k in 0..calls.len() {
                let mut c = case.clone();
                if let RootReply::Calls { calls, .. } = &mut c.turns[t].replies[r] {
                    calls.remove(k);
                }
                out.push(c);
            }
        }
    }
    // A spawn dropped with the steps it took from the root's budget: a breach that needs the
    // budget spent (a refund that lets the root go on) keeps its arithmetic with one spawn less.
    if let Some((stated, cost)) = budget {
        let now = case.limits.iter().find(|(n, _)| n == "root_step_budget").map_or(stated, |(_, v)| *v);
        if now > cost {
            for (t, turn) in case.turns.iter().enumerate() {
                for (r, reply) in turn.replies.iter().enumerate() {
                    let RootReply::Calls { calls, .. } = reply else { continue };
                    for (k, call) in calls.iter().enumerate() {
                        if !matches!(call, Call::Spawn { .. }) {
                            continue;
                        }
                        let mut c = case.clone();
                        if let RootReply::Calls { calls, .. } = &mut c.turns[t].replies[r] {
                            calls.remove(k);
                        }
                        c.limits.retain(|(n, _)| n != "root_step_budget");
                        c.limits.push(("root_step_budget".to_string(), now - cost));
                        c.limits.sort();
                        out.push(c);
                    }
                }
            }
        }
    }
    // A child's replies, keeping its last.
    for child in case.spawned() {
        for r in 0..case.children[child].replies.len().saturating_sub(1) {
            let mut c = case.clone();
            c.children[child].replies.remove(r);
            out.push(c);
        }
    }
    // Simpler values.
    for (t, turn) in case.turns.iter().enumerate() {
        for (r, reply) in turn.replies.iter().enumerate() {
            let simpler = match reply {
                RootReply::Calls { calls, latency } if *latency > 0 => {
                    Some(RootReply::Calls { calls: calls.clone(), latency: 0 })
                }
                RootReply::Final { terminal, latency } if *terminal || *latency > 0 => {
                    Some(RootReply::Final { terminal: false, latency: 0 })
                }
                _ => None,
            };
            if let Some(simpler) = simpler {
                let mut c = case.clone();
                c.turns[t].replies[r] = simpler;
                out.push(c);
            }
            let RootReply::Calls { calls, .. } = reply else { continue };
            for (k, call) in calls.iter().enumerate() {
                let Call::Spawn { tool, child, session, timeout } = call else { continue };
                let mut plain = Vec::new();
                if *session != Session::Default {
                    plain.push(Call::Spawn {
                        tool: *tool,
                        child: *child,
                        session: Session::Default,
                        timeout: *timeout,
                    });
                }
                let hangs = case.children[*child].replies.contains(&ChildReply::Hang);
                if timeout.is_some() && (!hangs || case.default_timeout()) {
                    plain.push(Call::Spawn { tool: *tool, child: *child, session: session.clone(), timeout: None });
                }
                if *tool > 0 {
                    plain.push(Call::Spawn { tool: 0, child: *child, session: session.clone(), timeout: *timeout });
                }
                for call in plain {
                    let mut c = case.clone();
                    if let RootReply::Calls { calls, .. } = &mut c.turns[t].replies[r] {
                        calls[k] = call;
                    }
                    out.push(c);
                }
            }
        }
    }
    for child in case.spawned() {
        for (r, reply) in case.children[child].replies.iter().enumerate() {
            let simpler = match reply {
                ChildReply::Answer { unit, around, latency } => {
                    let mut s = Vec::new();
                    if *latency > 0 {
                        s.push(ChildReply::Answer { unit: *unit, around: *around, latency: 0 });
                    }
                    if around.is_some() && *unit > 0 {
                        s.push(ChildReply::Answer { unit: 0, around: *around, latency: *latency });
                    }
                    if around.is_some() {
                        s.push(ChildReply::Answer { unit: *unit, around: None, latency: *latency });
                    }
                    s
                }
                ChildReply::Error { status, latency } if *latency > 0 => {
                    vec![ChildReply::Error { status: *status, latency: 0 }]
                }
                ChildReply::Unknown { count } if *count > 1 => {
                    vec![ChildReply::Unknown { count: 1 }, ChildReply::Answer { unit: 0, around: None, latency: 0 }]
                }
                ChildReply::Spawn | ChildReply::Unknown { .. } | ChildReply::Error { .. } | ChildReply::Hang => {
                    vec![ChildReply::Answer { unit: 0, around: None, latency: 0 }]
                }
            };
            for simpler in simpler {
                let mut c = case.clone();
                c.children[child].replies[r] = simpler;
                out.push(c);
            }
        }
    }
    for k in 0..case.limits.len() {
        let mut c = case.clone();
        c.limits.remove(k);
        // A child that hangs needs a time limit: never drop the last one it has.
        if !hangs_unlimited(&c) {
            out.push(c);
        }
    }
    // A limit lowered, or a budget set to its least where the runtime's own applied: a case
    // that runs out with six spawns under the runtime's budget of 60 runs out with one under
    // 6, and its other spawns can go then. Such a candidate is not smaller by itself; the walk
    // takes each case at most once, so it cannot go round in circles.
    for (k, (name, value)) in case.limits.iter().enumerate() {
        for lower in limit_values(name).iter().filter(|v| *v < value) {
            let mut c = case.clone();
            c.limits[k].1 = *lower;
            out.push(c);
        }
    }
    for name in settable.iter().filter(|n| is_budget(n) && !case.limits.iter().any(|(l, _)| l == *n)) {
        let mut c = case.clone();
        c.limits.push((name.clone(), limit_values(name)[0]));
        c.limits.sort();
        out.push(c);
    }
    out
}

/// Whether the limit `name` bounds the work an agent may do (a step budget, a request limit),
/// so that a lower one makes the same breach with fewer calls.
fn is_budget(name: &str) -> bool {
    !matches!(
        name,
        "depth_limit"
            | "max_concurrency"
            | "result_limit_chars"
            | "subagent_default_timeout_ms"
            | "subagent_default_timeout_seconds"
    )
}

/// Whether some spawned child hangs with no time limit applying to it.
fn hangs_unlimited(case: &Case) -> bool {
    case.turns.iter().flat_map(|t| &t.replies).any(|r| match r {
        RootReply::Calls { calls, .. } => calls.iter().any(|c| match c {
            Call::Spawn { child, timeout, .. } => {
                case.children[*child].replies.contains(&ChildReply::Hang)
                    && !timeout.map_or(case.default_timeout(), |t| t > 0)
            }
            _ => false,
        }),
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::super::plan::{Child, Turn};
    use super::*;

    fn case() -> Case {
        let spawn = |child| Call::Spawn { tool: 0, child, session: Session::Fork(0), timeout: Some(1) };
        Case {
            limits: vec![("max_concurrency".into(), 1)],
            turns: vec![
                Turn {
                    replies: vec![
                        RootReply::Calls { calls: vec![spawn(0), spawn(1)], latency: 500 },
                        RootReply::Final { terminal: true, latency: 0 },
                    ],
                },
                Turn { replies: vec![RootReply::Final { terminal: false, latency: 0 }] },
            ],
            children: vec![
                Child {
                    replies: vec![ChildReply::Spawn, ChildReply::Answer { unit: 2, around: Some(1), latency: 999 }],
                },
                Child { replies: vec![ChildReply::Hang] },
            ],
        }
    }

    #[test]
    fn every_candidate_is_one_cut_smaller_and_the_big_cuts_come_first() {
        let case = case();
        let all = candidates(&case, &[], None);
        assert!(!all.is_empty());
        assert!(all.iter().all(|c| *c != case), "no candidate is the case itself");
        assert_eq!(all[0].turns.len(), 1, "a whole turn first");
        assert_eq!(all[1].turns.len(), 1);
        assert_eq!(all[2].turns[0].replies.len(), 1, "then a whole root reply");
        assert!(all.iter().all(|c| c.replies() <= case.replies()));
        // The hanging child keeps its time limit: without one it would hang forever.
        for c in &all {
            for turn in &c.turns {
                for reply in &turn.replies {
                    if let RootReply::Calls { calls, .. } = reply {
                        for call in calls {
                            if let Call::Spawn { child: 1, timeout, .. } = call {
                                assert!(timeout.is_some() || !c.children[1].replies.contains(&ChildReply::Hang));
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_minimal_case_has_no_candidate_left_but_its_values() {
        let minimal = Case {
            limits: Vec::new(),
            turns: vec![Turn { replies: vec![RootReply::Final { terminal: false, latency: 0 }] }],
            children: Vec::new(),
        };
        assert!(candidates(&minimal, &[], None).is_empty());
    }
}

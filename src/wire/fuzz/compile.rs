//! A [`Case`] written as an ordinary scenario file, in the runtime's own tool names: the file a
//! finding is saved as and `rehearsal drive` replays.
//!
//! The root's lane answers its requests in order, each turn's replies only in that turn (a
//! `when` on the turn's user message, when there are two turns), the last reply of a turn
//! repeatable: how many requests a root makes while its children's results come in is the
//! runtime's business, and every one of them is answered. Each child has a lane of its own,
//! bound by the `[job N]` in its prompt, its last reply repeatable too. No reply has to be used:
//! a case states no expectation of its own, and the model-side oracles alone judge it.

use serde_json::{Map, Value, json};

use super::plan::{Call, Case, ChildReply, Reach, RootReply, Session, UNITS};

/// The user message of turn `t` (from 0).
fn user(t: usize) -> String {
    format!("Turn {}: coordinate the jobs and report.", t + 1)
}

/// The marker in child `n`'s prompt that binds its lane: bracketed, so that no child's
/// marker holds another's (`job-1` is in `job-11`).
fn marker(child: usize) -> String {
    format!("[job {}]", child + 1)
}

/// `case` as a scenario named `name`, for a runtime of `reach`.
pub fn scenario(case: &Case, reach: &Reach, name: &str, description: &str) -> Value {
    let mut lanes = Vec::new();
    let mut root = Vec::new();
    let many = case.turns.len() > 1;
    // Tasks started before each reply, across turns: a `$taskN` beyond them is left out.
    let mut started = 0u32;
    for (t, turn) in case.turns.iter().enumerate() {
        let last = turn.replies.len().saturating_sub(1);
        for (r, reply) in turn.replies.iter().enumerate() {
            let mut out = match reply {
                RootReply::Calls { calls, latency } => {
                    let mut written = Vec::new();
                    let before = started;
                    for call in calls {
                        if let Some(call) = self::call(call, reach, before, &mut started) {
                            written.push(call);
                        }
                    }
                    let mut out = Map::new();
                    if written.is_empty() {
                        out.insert("text".into(), json!("Nothing to do yet."));
                    } else {
                        out.insert("calls".into(), Value::Array(written));
                    }
                    if *latency > 0 {
                        out.insert("latency_ms".into(), json!(latency));
                    }
                    out
                }
                RootReply::Final { terminal, latency } => {
                    let text = format!("All done with turn {}.", t + 1);
                    let mut out = Map::new();
                    match (terminal, &reach.terminal) {
                        (true, Some(tool)) => {
                            out.insert("calls".into(), json!([{"tool": tool.name, "args": {tool.text.clone(): text}}]));
                        }
                        _ => {
                            out.insert("text".into(), json!(text));
                        }
                    }
                    if *latency > 0 {
                        out.insert("latency_ms".into(), json!(latency));
                    }
                    out
                }
                RootReply::Error { status } => {
                    let mut out = Map::new();
                    out.insert("error".into(), json!(format!("the model is unavailable ({status})")));
                    out.insert("error_status".into(), json!(status));
                    out
                }
            };
            if r == last {
                out.insert("repeatable".into(), json!(true));
            } else {
                out.insert("optional".into(), json!(true));
            }
            if many {
                let mut when = Map::new();
                when.insert("contains".into(), json!([user(t)]));
                if t + 1 < case.turns.len() {
                    when.insert("absent".into(), json!([user(t + 1)]));
                }
                out.insert("when".into(), Value::Object(when));
            }
            root.push(Value::Object(out));
        }
    }
    lanes.push(json!({"agent": "main", "replies": root}));
    let mut deep = false;
    for child in case.spawned() {
        let script = &case.children[child];
        let last = script.replies.len().saturating_sub(1);
        let mut replies = Vec::new();
        for (r, reply) in script.replies.iter().enumerate() {
            let mut out = match reply {
                ChildReply::Answer { unit, around, latency } => {
                    let text = match (around, case.result_limit(reach)) {
                        (Some(d), Some(limit)) => {
                            UNITS[*unit].repeat(usize::try_from(limit as i64 + i64::from(*d)).unwrap_or(0).max(1))
                        }
                        _ => format!("{} finished {}", marker(child), UNITS[*unit]),
                    };
                    let mut out = Map::new();
                    out.insert("text".into(), json!(text));
                    if *latency > 0 {
                        out.insert("latency_ms".into(), json!(latency));
                    }
                    out
                }
                ChildReply::Spawn => {
                    deep = true;
                    let tool = &reach.spawns[0];
                    let prompt = format!("Deep task for job {}.", child + 1);
                    let mut out = Map::new();
                    out.insert("calls".into(), json!([{"tool": tool.name, "args": {tool.prompt.clone(): prompt}}]));
                    out
                }
                ChildReply::Unknown { count } => {
                    let calls: Vec<Value> =
                        (0..*count).map(|_| json!({"tool": "no_such_tool", "args": {}, "undeclared": true})).collect();
                    let mut out = Map::new();
                    out.insert("calls".into(), Value::Array(calls));
                    out
                }
                ChildReply::Error { status, latency } => {
                    let mut out = Map::new();
                    out.insert("error".into(), json!(format!("the child's model failed ({status})")));
                    out.insert("error_status".into(), json!(status));
                    if *latency > 0 {
                        out.insert("latency_ms".into(), json!(latency));
                    }
                    out
                }
                ChildReply::Hang => {
                    let mut out = Map::new();
                    out.insert("hang".into(), json!(true));
                    out
                }
            };
            out.insert(if r == last { "repeatable" } else { "optional" }.into(), json!(true));
            replies.push(Value::Object(out));
        }
        lanes.push(json!({"task_contains": marker(child), "replies": replies}));
    }
    if deep {
        // A grandchild only asks if the runtime lets a child spawn: its lane answers then.
        lanes.push(
            json!({"task_contains": "Deep task for job", "replies": [{"text": "deep done", "repeatable": true}]}),
        );
    }
    let mut file = Map::new();
    file.insert("name".into(), json!(name));
    file.insert("description".into(), json!(description));
    if !case.limits.is_empty() {
        let limits: Map<String, Value> = case.limits.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        file.insert("runtime_limits".into(), Value::Object(limits));
    }
    file.insert("lanes".into(), Value::Array(lanes));
    let turns: Vec<Value> = (0..case.turns.len()).map(|t| json!({"user": user(t)})).collect();
    file.insert("turns".into(), Value::Array(turns));
    Value::Object(file)
}

/// One root call in the runtime's names; `None` for a wait, send or cancel that would name
/// no task started before its reply (`before`). Counts the tasks a spawn starts in `started`.
fn call(call: &Call, reach: &Reach, before: u32, started: &mut u32) -> Option<Value> {
    match call {
        Call::Spawn { tool, child, session, timeout } => {
            let spec = &reach.spawns[*tool];
            let mut args = Map::new();
            args.insert(spec.prompt.clone(), json!(format!("Please do {} and report back.", marker(*child))));
            if let Some(arg) = &spec.session {
                let value = match session {
                    Session::Default => None,
                    Session::Temp(i) => spec.temp_values.get(*i).cloned(),
                    Session::Fork(i) => spec.fork_values.get(*i).cloned(),
                    Session::Named(n) => Some(format!("s{n}")),
                };
                if let Some(value) = value {
                    args.insert(arg.clone(), json!(value));
                }
            }
            if let (Some(arg), Some(seconds)) = (&spec.timeout_seconds, timeout) {
                args.insert(arg.clone(), json!(seconds));
            }
            if spec.result == crate::dialect::ResultMode::Async {
                *started += 1;
            }
            Some(json!({"tool": spec.name, "args": args}))
        }
        Call::Wait { tasks } => {
            let tool = reach.wait.as_ref()?;
            let ids: Vec<Value> = tasks.iter().filter(|t| **t <= before).map(|t| json!(format!("$task{t}"))).collect();
            (!ids.is_empty()).then(|| json!({"tool": tool, "args": {"task_ids": ids}}))
        }
        Call::Send { task, child } => {
            let tool = reach.send.as_ref()?;
            (*task <= before).then(|| {
                json!({"tool": tool.name, "args": {
                    tool.task_id.clone(): format!("$task{task}"),
                    tool.message.clone(): format!("One more thing for {}.", marker(*child)),
                }})
            })
        }
        Call::Cancel { task } => {
            let tool = reach.cancel.as_ref()?;
            (*task <= before)
                .then(|| json!({"tool": tool.name, "args": {tool.task_id.clone(): format!("$task{task}")}}))
        }
        Call::Unknown => Some(json!({"tool": "no_such_tool", "args": {}, "undeclared": true})),
    }
}

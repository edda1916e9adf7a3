//! The tools the core itself answers (the terminals, `Agent`, the `subagent` family): their
//! names, descriptions and JSON schemas, built once per process and shared by every offered
//! list.
//!
//! This module describes the tools; it does not run them (that is `agent_loop`,
//! `foreground` and `background`).

use std::sync::{Arc, LazyLock};

use serde_json::{Value, json};

use crate::sut::llm::ToolSpec;

/// Every pseudo tool, in the order the core offers them.
static SPECS: LazyLock<Vec<ToolSpec>> = LazyLock::new(|| {
    let strings = |params: &[(&str, bool)]| -> Value {
        let properties: serde_json::Map<String, Value> =
            params.iter().map(|(p, _)| (p.to_string(), json!({"type": "string"}))).collect();
        let required: Vec<&str> = params.iter().filter(|(_, r)| *r).map(|(p, _)| *p).collect();
        json!({"type": "object", "properties": properties, "required": required})
    };
    let with = |mut schema: Value, extra: &[(&str, Value)]| {
        let props = schema["properties"].as_object_mut().expect("object schema");
        for (name, property) in extra {
            props.insert(name.to_string(), property.clone());
        }
        schema
    };
    let list = json!({"type": "array", "items": {"type": "string"}});
    let number = json!({"type": "number"});
    let spec = |name: &str, description: &str, parameters: Value| ToolSpec {
        name: name.to_string(),
        description: description.to_string(),
        parameters: Arc::new(parameters),
        tags: Vec::new(),
    };
    vec![
        spec("final_answer", "Finish with a final answer.", strings(&[("message", true)])),
        spec("ask_user", "Ask the user a question and wait.", strings(&[("question", true)])),
        spec("fail", "Give up, with a reason.", strings(&[("reason", true)])),
        spec("Agent", "Run a sub-agent on a task and return its answer.", strings(&[("task", true), ("tools", false)])),
        spec(
            "subagent",
            "Start a sub-agent in the background; returns its task id at once.",
            with(
                strings(&[
                    ("prompt", true),
                    ("agent", false),
                    ("session", false),
                    ("model", false),
                    ("reasoning_effort", false),
                ]),
                &[
                    ("allowed_tools", list.clone()),
                    ("allowed_skills", list.clone()),
                    ("timeout_seconds", number.clone()),
                ],
            ),
        ),
        spec(
            "subagent.wait",
            "Return results of background tasks, waiting at most timeout_seconds.",
            with(strings(&[]), &[("task_ids", list), ("timeout_seconds", number)]),
        ),
        spec(
            "subagent.send",
            "Send a message to a task, or continue a finished named-session task.",
            strings(&[("task_id", true), ("message", true)]),
        ),
        spec("subagent.cancel", "Stop a running or queued task.", strings(&[("task_id", true)])),
    ]
});

/// The pseudo tool called `name`.
pub fn spec(name: &str) -> &'static ToolSpec {
    SPECS.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("{name} is a pseudo tool"))
}

/// Every pseudo tool, in the order offered.
pub fn all() -> &'static [ToolSpec] {
    &SPECS
}

/// The `subagent` family, in the order offered.
pub fn family() -> &'static [ToolSpec] {
    &SPECS[4..]
}

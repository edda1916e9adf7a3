//! Simulated tools: each call takes its virtual latency, then returns the next scripted
//! result (the last one repeats). They do no I/O.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::scenario;
use crate::sut::llm::{BoxFuture, ToolSpec};
use crate::sut::tool::{Tool, ToolContext, ToolOutput};

use super::clock::Clock;

/// One simulated tool.
pub struct SimTool {
    spec: ToolSpec,
    latency: Duration,
    results: Vec<scenario::ToolResult>,
    calls: Mutex<usize>,
    clock: Arc<Clock>,
    handler: Option<scenario::ToolFn>,
}

impl SimTool {
    /// The tool a scenario declares.
    pub fn new(decl: &scenario::ToolSpec, clock: Arc<Clock>) -> SimTool {
        let tags = decl.risk.iter().map(|risk| risk.tag().to_string()).collect();
        SimTool {
            spec: ToolSpec {
                name: decl.name.clone(),
                description: decl.description.clone(),
                parameters: Arc::new(serde_json::json!({"type": "object"})),
                tags,
            },
            latency: Duration::from_millis(decl.latency_ms),
            results: decl.results.clone(),
            calls: Mutex::new(0),
            clock,
            handler: decl.handler.clone(),
        }
    }
}

impl Tool for SimTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call<'a>(&'a self, _ctx: &'a ToolContext, args: &'a serde_json::Value) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let call = {
                let mut calls = self.calls.lock().expect("tool lock poisoned");
                *calls += 1;
                *calls
            };
            // A tool built in code with a Rust function answers from the arguments.
            let made = self.handler.as_ref().map(|handler| (handler.0)(args));
            let result = made.as_ref().or(self.results.get(call - 1)).or(self.results.last());
            let latency = result.and_then(|r| r.latency_ms).map_or(self.latency, Duration::from_millis);
            self.clock.sleep(latency, || format!("tool {} #{call}", self.spec.name)).await;
            match result {
                None => ToolOutput { content: "ok".to_string(), is_error: false },
                Some(r) => match (&r.text, &r.error) {
                    (_, Some(error)) => ToolOutput { content: error.render(), is_error: true },
                    (Some(text), None) => ToolOutput { content: text.render(), is_error: false },
                    // Files are validated to give one of them; a function may give neither.
                    (None, None) => ToolOutput { content: "ok".to_string(), is_error: false },
                },
            }
        })
    }
}

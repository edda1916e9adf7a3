//! Simulated tools: each call takes its virtual latency, then returns the next scripted
//! result (the last one repeats). They do no I/O, and build no result the run budget has no
//! room for (the run stops instead).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::scenario;
use crate::sut::llm::{BoxFuture, ToolSpec};
use crate::sut::tool::{Tool, ToolContext, ToolOutput};

use super::Stop;
use super::clock::Clock;

/// A declared tool as every run of a scenario plays it, built once per prepared scenario:
/// a run's tools share it and add only their call counts (building the spec and copying the
/// results per run was a fixed cost of every run, large next to a small scenario's work).
pub struct Declared {
    spec: ToolSpec,
    latency: Duration,
    results: Vec<scenario::ToolResult>,
    handler: Option<scenario::ToolFn>,
}

impl Declared {
    /// The tool a scenario declares.
    pub fn new(decl: &scenario::ToolSpec) -> Arc<Declared> {
        let tags = decl.risk.iter().map(|risk| risk.tag().to_string()).collect();
        Arc::new(Declared {
            spec: ToolSpec {
                name: decl.name.clone(),
                description: decl.description.clone(),
                parameters: Arc::new(serde_json::json!({"type": "object"})),
                tags,
            },
            latency: Duration::from_millis(decl.latency_ms),
            results: decl.results.clone(),
            handler: decl.handler.clone(),
        })
    }
}

/// One simulated tool in one run.
pub struct SimTool {
    declared: Arc<Declared>,
    calls: Mutex<usize>,
    clock: Arc<Clock>,
    /// The run budget: a result is built only when it has room for it.
    stop: Arc<Stop>,
}

impl SimTool {
    /// The declared tool, for a run on `clock` whose budget `stop` keeps.
    pub fn new(declared: Arc<Declared>, clock: Arc<Clock>, stop: Arc<Stop>) -> SimTool {
        SimTool { declared, calls: Mutex::new(0), clock, stop }
    }
}

impl Tool for SimTool {
    fn spec(&self) -> &ToolSpec {
        &self.declared.spec
    }

    fn call<'a>(&'a self, _ctx: &'a ToolContext, args: &'a serde_json::Value) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let call = {
                let mut calls = self.calls.lock().expect("tool lock poisoned");
                *calls += 1;
                *calls
            };
            // A tool built in code with a Rust function answers from the arguments.
            let declared = &*self.declared;
            let made = declared.handler.as_ref().map(|handler| (handler.0)(args));
            let result = made.as_ref().or(declared.results.get(call - 1)).or(declared.results.last());
            let latency = result.and_then(|r| r.latency_ms).map_or(declared.latency, Duration::from_millis);
            self.clock.sleep(latency, || format!("tool {} #{call}", declared.spec.name)).await;
            // A result is built only when the run budget has room for it: a repeatable call
            // of a tool whose result repeats a text a million times would outgrow memory first.
            let text = result.and_then(|r| r.error.as_ref().or(r.text.as_ref()));
            if let Some(text) = text
                && !self.stop.may_make_text(text.byte_len())
            {
                return std::future::pending().await;
            }
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

//! The tool trait and the catalog of tools an agent may call.
//!
//! The catalog holds the "real" tools (files, shells, search, ...). The pseudo tools
//! (`final_answer`, `Agent`, the `subagent` family, ...) are handled by the loop itself and
//! never live here.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::AgentId;
use super::llm::{BoxFuture, ToolSpec};

/// What a tool returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolOutput {
    /// The result text handed to the model.
    pub content: String,
    /// Whether the call failed.
    pub is_error: bool,
}

/// Where a tool call comes from.
#[derive(Clone, Debug)]
pub struct ToolContext {
    /// The calling agent.
    pub agent: AgentId,
    /// The call's id.
    pub call_id: String,
}

/// A tool the core can run.
pub trait Tool: Send + Sync {
    /// How the tool is offered to the model (and tagged for the approval gate).
    fn spec(&self) -> &ToolSpec;
    /// Runs one call. May take time on the tokio clock.
    fn call<'a>(&'a self, ctx: &'a ToolContext, args: &'a serde_json::Value) -> BoxFuture<'a, ToolOutput>;
}

/// The tools of a runtime, by name, in the order they were added (the order offered).
#[derive(Clone, Default)]
pub struct ToolCatalog {
    order: Vec<String>,
    by_name: BTreeMap<String, Arc<dyn Tool>>,
}

impl ToolCatalog {
    /// An empty catalog.
    pub fn new() -> ToolCatalog {
        ToolCatalog::default()
    }

    /// Adds a tool; a second tool of the same name replaces the first.
    pub fn add(&mut self, tool: Arc<dyn Tool>) {
        let name = tool.spec().name.clone();
        if self.by_name.insert(name.clone(), tool).is_none() {
            self.order.push(name);
        }
    }

    /// A tool by exact name.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.by_name.get(name)
    }

    /// The tools in the order they were added.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.order.iter().map(|name| &self.by_name[name])
    }
}

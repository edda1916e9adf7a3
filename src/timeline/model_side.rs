//! A run seen from the model's side, as a trace the picture can draw: each attributed
//! exchange becomes a model call of its agent (`llm.request` when it arrived, `llm.reply` or
//! `llm.failed` when it was answered), and each spawn call whose child asked becomes a spawn
//! from the parent's reply to that child. Nothing else is invented: the budgets, tools and ends
//! of a runtime over the wire are not seen, so they are not drawn.
//!
//! The lines (hover titles, and the HTML page's text) say what the model saw, not what a core
//! reported: no budget, and the time unit the exchanges were stamped in.

use crate::evidence::attribution::{Attribution, CallOutcome, ModelSide};
use crate::sut::event::{Event, Family};
use crate::trace::{Entry, Trace, What, quoted};

use super::secs;

/// The trace of `side`, in time order (stable: a reply before a request of the same instant
/// when it came first), and one line per entry.
pub(super) fn trace(side: &ModelSide) -> (Trace, Vec<String>) {
    let unit = if side.wall_times { "wall" } else { "virtual" };
    let mut drawn: Vec<(Entry, String)> = Vec::new();
    for (i, (exchange, attribution)) in side.exchanges.iter().zip(&side.attributions).enumerate() {
        let Attribution::Agent(who) = attribution else { continue };
        let agent = who.alias.clone();
        let call = u32::try_from(who.number).unwrap_or(u32::MAX);
        let asked =
            Event::LlmRequest { call, messages: exchange.messages.len(), tools: exchange.tools.len(), budget: 0 };
        let line = format!(
            "{} {unit} {agent} llm.request #{call} exchange={i} messages={} tools={}",
            secs(exchange.arrived),
            exchange.messages.len(),
            exchange.tools.len()
        );
        drawn.push((Entry { at: exchange.arrived, agent: agent.clone(), what: What::Core(asked) }, line));
        let Some(at) = exchange.replied else { continue };
        let (answered, line) = match &exchange.reply {
            Some(reply) => {
                let calls: Vec<String> = reply.tool_calls.iter().map(|c| c.name.clone()).collect();
                let line = format!(
                    "{} {unit} {agent} llm.reply #{call} calls=[{}] text={}",
                    secs(at),
                    calls.join(", "),
                    quoted(&reply.content)
                );
                (Event::LlmReply { text: reply.content.clone(), calls }, line)
            }
            None => {
                let line = format!("{} {unit} {agent} llm.failed #{call} (an error reply)", secs(at));
                (Event::LlmFailed { error: "an error reply".into() }, line)
            }
        };
        drawn.push((Entry { at, agent: agent.clone(), what: What::Core(answered) }, line));
        for spawn in side.calls.iter().filter(|c| c.exchange == i) {
            let CallOutcome::Child(child) = &spawn.outcome else { continue };
            let family = if spawn.sync { Family::Foreground } else { Family::Background };
            let made = Event::Spawned {
                child: child.clone(),
                family,
                task: spawn.prompt.clone(),
                cost: 0,
                grant: 0,
                budget_before: 0,
                budget_after: 0,
            };
            let line = format!(
                "{} {unit} {agent} spawn {child} {} via {} task={}",
                secs(at),
                if spawn.sync { "synchronous" } else { "background" },
                spawn.tool,
                quoted(&spawn.prompt)
            );
            drawn.push((Entry { at, agent: agent.clone(), what: What::Core(made) }, line));
        }
    }
    drawn.sort_by_key(|(entry, _)| entry.at);
    let (entries, lines) = drawn.into_iter().unzip();
    (Trace { entries }, lines)
}

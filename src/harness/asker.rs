//! The user's scripted answers to the risk-based gate, taken in the order the gate asks.

use std::sync::{Arc, Mutex};

use crate::scenario::Answer;
use crate::sut::AgentId;
use crate::sut::approval::Asker;
use crate::sut::llm::{BoxFuture, ToolCall};
use crate::trace::What;

use super::recorder::Recorder;

use super::Stop;

/// Answers from a scenario's `approval.answers`.
pub struct ScriptedAsker {
    answers: Vec<Answer>,
    next: Mutex<usize>,
    recorder: Arc<Recorder>,
    stop: Arc<Stop>,
}

impl ScriptedAsker {
    /// An asker answering with `answers`, in order.
    pub fn new(answers: Vec<Answer>, recorder: Arc<Recorder>, stop: Arc<Stop>) -> ScriptedAsker {
        ScriptedAsker { answers, next: Mutex::new(0), recorder, stop }
    }
}

impl Asker for ScriptedAsker {
    fn ask<'a>(&'a self, agent: &'a AgentId, call: &'a ToolCall) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            let n = {
                let mut next = self.next.lock().expect("asker lock poisoned");
                *next += 1;
                *next
            };
            let Some(answer) = self.answers.get(n - 1) else {
                self.stop.halt(format!(
                    "approval.answers: the gate asked about `{}` for {agent} (question {n}), but the scenario scripts only {} answers",
                    call.name,
                    self.answers.len()
                ));
                return std::future::pending().await;
            };
            if answer.tool != call.name {
                self.stop.check_failed(format!(
                    "approval.answers[{}]: the gate asked about `{}` for {agent}, but the answer is scripted for `{}`",
                    n - 1,
                    call.name,
                    answer.tool
                ));
            }
            self.recorder.record(agent, What::Asked { tool: call.name.clone(), approve: answer.approve });
            answer.approve
        })
    }
}

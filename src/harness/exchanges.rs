//! Records what the model received and answered: the exchanges of the evidence.
//!
//! [`Recorded`] wraps whatever model a run uses (the scripted lanes, or a closure) so that the
//! evidence never depends on the model or on the core: the harness writes down each request
//! as the model receives it and each reply as it is handed back.

use std::sync::{Arc, Mutex};

use crate::evidence::{Due, Exchange};
use crate::sut::llm::{BoxFuture, Llm, LlmError, LlmReply, LlmRequest, Message};

/// Every exchange of a run, in the order the requests arrived.
#[derive(Default)]
pub struct ExchangeLog {
    exchanges: Mutex<Vec<Exchange>>,
    /// The replies the script scheduled, as the mock chose them.
    due: Mutex<Vec<Due>>,
}

impl ExchangeLog {
    /// A log with room for `expected` exchanges (a capacity only).
    pub fn with_capacity(expected: usize) -> ExchangeLog {
        ExchangeLog { exchanges: Mutex::new(Vec::with_capacity(expected)), due: Mutex::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Exchange>> {
        self.exchanges.lock().expect("exchange log lock poisoned")
    }

    /// Runs `f` on the exchanges so far (for checks made during the run).
    pub fn with<T>(&self, f: impl FnOnce(&[Exchange]) -> T) -> T {
        f(&self.lock())
    }

    /// Adds an exchange (a request whose reply is yet to come); its index.
    pub fn push(&self, exchange: Exchange) -> usize {
        let mut log = self.lock();
        log.push(exchange);
        log.len() - 1
    }

    /// The reply of exchange `index`.
    pub fn set_reply(&self, index: usize, reply: Message) {
        if let Some(e) = self.lock().get_mut(index) {
            e.reply = Some(reply);
        }
    }

    /// Takes the exchanges out at the end of a run.
    pub fn take(&self) -> Vec<Exchange> {
        std::mem::take(&mut *self.lock())
    }

    /// Notes a reply the script scheduled.
    pub fn schedule(&self, due: Due) {
        self.due.lock().expect("exchange log lock poisoned").push(due);
    }

    /// Takes the scheduled replies out at the end of a run.
    pub fn take_due(&self) -> Vec<Due> {
        std::mem::take(&mut *self.due.lock().expect("exchange log lock poisoned"))
    }
}

/// A model whose every request and reply is recorded in an [`ExchangeLog`].
pub struct Recorded {
    inner: Arc<dyn Llm>,
    log: Arc<ExchangeLog>,
}

impl Recorded {
    /// Records `inner`'s exchanges in `log`.
    pub fn new(inner: Arc<dyn Llm>, log: Arc<ExchangeLog>) -> Recorded {
        Recorded { inner, log }
    }
}

impl Llm for Recorded {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> BoxFuture<'a, Result<LlmReply, LlmError>> {
        let index = {
            let mut log = self.log.lock();
            log.push(Exchange { request: request.clone(), reply: None });
            log.len() - 1
        };
        Box::pin(async move {
            let answer = self.inner.complete(request).await;
            if let Ok(reply) = &answer {
                self.log.lock()[index].reply = Some(Message::assistant(reply.text.clone(), reply.tool_calls.clone()));
            }
            answer
        })
    }
}

//! A panic inside a run becomes that run's verdict: an internal error naming the message and
//! the place, never a crash of the whole suite, and never swallowed.
//!
//! A panic in the run's main task unwinds out of the runtime and is caught by the runner. A
//! panic in a task the core spawned is caught by tokio and would go unseen; so while a run is
//! under way on a thread, a process-wide panic hook (installed once) hands every panic on that
//! thread to the run's [`Stop`], which records it and stops the run at once. Panics on threads
//! that run no scenario go to the previous hook, unchanged.

use std::cell::RefCell;
use std::panic::PanicHookInfo;
use std::sync::{Arc, Once};

use super::Stop;

thread_local! {
    /// The stop of the run under way on this thread, if one is.
    static CAPTURE: RefCell<Option<Arc<Stop>>> = const { RefCell::new(None) };
}

static HOOK: Once = Once::new();

fn install() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| match CAPTURE.with(|capture| capture.borrow().clone()) {
            Some(stop) => stop.internal_error(describe(info)),
            None => previous(info),
        }));
    });
}

/// `panicked at FILE:LINE:COLUMN: MESSAGE`.
fn describe(info: &PanicHookInfo<'_>) -> String {
    let payload = info.payload();
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(a panic without a message)".to_string());
    match info.location() {
        Some(at) => format!("panicked at {}:{}:{}: {message}", at.file(), at.line(), at.column()),
        None => format!("panicked: {message}"),
    }
}

/// While alive, panics on this thread go to `stop`.
pub struct Capture {
    previous: Option<Arc<Stop>>,
}

/// Sends this thread's panics to `stop` until the returned guard is dropped.
pub fn capture(stop: Arc<Stop>) -> Capture {
    install();
    let previous = CAPTURE.with(|capture| capture.borrow_mut().replace(stop));
    Capture { previous }
}

impl Drop for Capture {
    fn drop(&mut self) {
        let previous = self.previous.take();
        CAPTURE.with(|capture| *capture.borrow_mut() = previous);
    }
}

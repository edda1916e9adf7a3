//! Bub's background sub-agents: the `subagent` tool family (`docs/rules/bub.md`).
//!
//! The [`Board`] is the one place that holds a session's background tasks: their states, the
//! concurrency cap with its FIFO queue, the sessions children run in, and the results not yet
//! read by the parent. Children run as tokio tasks; the parent keeps working and takes in
//! finished results before its next step (`Loop::absorb`). Every state change happens under
//! the board's lock, so "running", "queued" and "slot freed" are always consistent.
//!
//! This module does not run loops itself (that is `agent_loop`) and does not know how tasks
//! are scheduled at one instant (that is tokio's, or the harness's schedule explorer's).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Waker;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{Notify, oneshot};
use tokio::task::{AbortHandle, JoinHandle};
use tokio::time::Instant;

use super::agent_loop::{self, Loop, string_arg};
use super::budget::{Budget, truncate_result};
use super::foreground::seconds;
use super::{Inbox, Shared, system_prompt};
use crate::seed::splitmix64;
use crate::sut::event::{Event, Family, Status, TaskStatus, Via};
use crate::sut::llm::Transcript;
use crate::sut::llm::{Message, ToolCall};
use crate::sut::tool::ToolOutput;
use crate::sut::{AgentId, Profile};

/// The pseudo tools every child keeps, whatever `allowed_tools` says.
const TERMINAL_TOOLS: [&str; 2] = ["final_answer", "fail"];

const FAMILY: [&str; 4] = ["subagent", "subagent.wait", "subagent.send", "subagent.cancel"];

/// Whether `name` is one of the `subagent` tools.
pub(crate) fn is_family(name: &str) -> bool {
    FAMILY.contains(&name)
}

/// Where a task's conversation comes from and where it goes afterwards.
#[derive(Clone, Debug, PartialEq, Eq)]
enum SessionMode {
    /// A new empty session, discarded afterwards.
    Temp,
    /// A copy of the parent's conversation at the call, discarded afterwards.
    Fork,
    /// A named session, kept afterwards.
    Named(String),
}

impl SessionMode {
    fn parse(session: &str) -> SessionMode {
        match session {
            "temp" => SessionMode::Temp,
            "fork" | "inherit" => SessionMode::Fork,
            name => SessionMode::Named(name.to_string()),
        }
    }

    fn key(&self, task_id: &str) -> String {
        match self {
            SessionMode::Temp => format!("temp/{task_id}"),
            SessionMode::Fork => format!("fork/{task_id}"),
            SessionMode::Named(name) => name.clone(),
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            SessionMode::Temp => "temp",
            SessionMode::Fork => "fork",
            SessionMode::Named(_) => "named",
        }
    }
}

/// How to (re)start a task's loop: what the call and the profile decided.
#[derive(Clone)]
struct Launch {
    request_id: Arc<str>,
    model: Option<Arc<str>>,
    reasoning_effort: Option<Arc<str>>,
    profile: Option<Arc<str>>,
    system: Arc<str>,
    catalog: Option<BTreeSet<String>>,
    skills: Vec<String>,
    timeout: Option<Duration>,
}

enum TaskState {
    Queued { start: oneshot::Sender<()> },
    Running,
    Done(TaskStatus),
}

/// The result of one finished run of a task. A named-session task may run several times, so
/// results are records of their own, kept apart from the task's current state: continuing a
/// task never loses a result the parent has not read.
struct Finished {
    task_id: String,
    /// The task's spawn order, for ties between results ending at one instant.
    seq: usize,
    status: TaskStatus,
    body: String,
    at: Instant,
    /// How the parent read it, once it did.
    read: Option<Via>,
}

struct Task {
    alias: AgentId,
    /// Runs that finished with a result (a named-session task may run several times).
    finished_runs: usize,
    /// Spawn order, for ties between results ending at one instant.
    seq: usize,
    session: SessionMode,
    state: TaskState,
    inbox: Arc<Inbox>,
    abort: Option<AbortHandle>,
    launch: Launch,
}

impl Task {
    fn status_word(&self) -> &'static str {
        match &self.state {
            TaskState::Queued { .. } => "queued",
            TaskState::Running => "running",
            TaskState::Done(status) => status.as_str(),
        }
    }

    fn active(&self) -> bool {
        !matches!(self.state, TaskState::Done(_))
    }
}

/// A session record of the store.
struct Record {
    conversation: Transcript,
    in_use_by: Option<String>,
}

#[derive(Default)]
struct BoardState {
    tasks: BTreeMap<String, Task>,
    /// Task ids in spawn order.
    order: Vec<String>,
    running: usize,
    queue: VecDeque<String>,
    /// Tasks queued or running (every launch is matched by one finish or one cancel).
    active: usize,
    /// Results of finished runs, in completion order.
    results: Vec<Finished>,
    /// Indices into `results` of those the parent has not read.
    unread: BTreeSet<usize>,
    /// Named sessions, by name: kept after their tasks.
    named: BTreeMap<String, Record>,
    /// Temp and fork sessions, by `temp/<id>` or `fork/<id>`: discarded with their task. A
    /// namespace apart, so no name a model gives a session can reach another task's record.
    scratch: BTreeMap<String, Record>,
    ids: u64,
    handles: Vec<JoinHandle<()>>,
}

/// A session's background tasks and sessions.
pub(crate) struct Board {
    state: Mutex<BoardState>,
    news: Notify,
    /// How many background tasks of the session the runtime is due to run: woken (or just
    /// spawned) and not polled since. While it is above zero, the children still have work
    /// at this instant ([`Board::settle`]).
    runnable: Arc<AtomicUsize>,
    /// How many times the runtime has polled a background task of the session.
    polls: Arc<AtomicU64>,
}

/// A background task's future, keeping the board's count of runnable tasks: the runtime's
/// wake-ups of the task pass through [`Runnable`], and each poll takes one off.
struct Counted<F> {
    work: std::pin::Pin<Box<F>>,
    runnable: Arc<Runnable>,
    waker: Waker,
}

/// Whether one background task has a wake-up the runtime has not yet acted on.
struct Runnable {
    pending: AtomicBool,
    /// The task's future is gone (it ended, or was cancelled): later wake-ups run nothing.
    gone: AtomicBool,
    count: Arc<AtomicUsize>,
    /// How many times any background task of the session has been polled.
    polls: Arc<AtomicU64>,
    /// The runtime's own waker for the task, passed every wake-up on.
    inner: Mutex<Option<Waker>>,
}

impl Runnable {
    fn mark(&self) {
        if !self.gone.load(Ordering::Acquire) && !self.pending.swap(true, Ordering::AcqRel) {
            self.count.fetch_add(1, Ordering::AcqRel);
        }
    }

    fn clear(&self) {
        self.polls.fetch_add(1, Ordering::AcqRel);
        if self.pending.swap(false, Ordering::AcqRel) {
            self.count.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl std::task::Wake for Runnable {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.mark();
        if let Some(waker) = self.inner.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            waker.wake_by_ref();
        }
    }
}

impl<F: Future> Counted<F> {
    /// `work`, counted as runnable from the start (a spawned task is scheduled at once).
    fn new(work: F, count: Arc<AtomicUsize>, polls: Arc<AtomicU64>) -> Counted<F> {
        let runnable = Arc::new(Runnable {
            pending: AtomicBool::new(false),
            gone: AtomicBool::new(false),
            count,
            polls,
            inner: Mutex::new(None),
        });
        runnable.mark();
        Counted { work: Box::pin(work), waker: Waker::from(runnable.clone()), runnable }
    }
}

impl<F: Future> Future for Counted<F> {
    type Output = F::Output;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<F::Output> {
        {
            let mut inner = self.runnable.inner.lock().unwrap_or_else(|p| p.into_inner());
            if !inner.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *inner = Some(cx.waker().clone());
            }
        }
        self.runnable.clear();
        let this = &mut *self;
        this.work.as_mut().poll(&mut std::task::Context::from_waker(&this.waker))
    }
}

impl<F> Drop for Counted<F> {
    fn drop(&mut self) {
        // A task that ended, or was cancelled, is no longer due to run, whoever wakes it.
        self.runnable.gone.store(true, Ordering::Release);
        self.runnable.clear();
    }
}

impl Board {
    /// Wakes a root waiting in [`Board::news`] (a message arrived for it).
    pub fn wake(&self) {
        self.news.notify_waiters();
    }

    pub fn new(seed: u64) -> Board {
        Board {
            state: Mutex::new(BoardState { ids: seed, ..BoardState::default() }),
            news: Notify::new(),
            runnable: Arc::default(),
            polls: Arc::default(),
        }
    }

    /// Returns once everything due at the current instant has happened
    /// (`core.instant.settle-before-acting`): yields to the runtime until no background task
    /// of the session is due to run. A yield lets every task that is ready run, and fires
    /// every timer due by now, before this task resumes; by then each child with work left
    /// at this instant (a reply that just arrived, a slot that just freed, a time limit that
    /// just ran out) has a wake-up pending, and is waited for. Children waiting for a later
    /// instant, or for a slot, have none, so this ends; it never moves the clock.
    pub async fn settle(&self) {
        // Two signs, because a task's wake-up may wait in the runtime's list of deferred
        // wake-ups (a cooperative yield) for a while: settled means a whole round of the
        // runtime passed in which no background task was due to run, and none ran.
        loop {
            let polls = self.polls.load(Ordering::Acquire);
            tokio::task::yield_now().await;
            if self.runnable.load(Ordering::Acquire) == 0 && self.polls.load(Ordering::Acquire) == polls {
                return;
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, BoardState> {
        self.state.lock().expect("board lock poisoned")
    }

    /// Tasks queued or running, plus finished results the parent has not read.
    pub fn outstanding(&self) -> usize {
        let st = self.lock();
        st.active + st.unread.len()
    }

    /// Names of the sessions still held (named ones, and temp/fork ones of unfinished tasks).
    pub fn live_sessions(&self) -> Vec<String> {
        let st = self.lock();
        let mut names: Vec<String> = st.named.keys().chain(st.scratch.keys()).cloned().collect();
        names.sort();
        names
    }

    /// Waits until an unread result exists, a message for the root arrived, or nothing is
    /// outstanding.
    pub async fn news(&self, root_inbox: &Inbox) {
        loop {
            let notified = self.news.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let st = self.lock();
                if !st.unread.is_empty() || !root_inbox.is_empty() || st.active == 0 {
                    return;
                }
            }
            notified.await;
        }
    }

    /// Finished results not yet read, in completion order (ties in spawn order), marked read,
    /// as notification messages.
    pub fn take_notifications(&self, shared: &Shared) -> Vec<String> {
        let mut st = self.lock();
        let st = &mut *st;
        let mut ready: Vec<usize> = std::mem::take(&mut st.unread).into_iter().collect();
        ready.sort_by_key(|i| (st.results[*i].at, st.results[*i].seq));
        let mut out = Vec::new();
        for i in ready {
            st.unread.remove(&i);
            let result = &mut st.results[i];
            result.read = Some(Via::Notification);
            out.push(format!(
                "<subagent-notification task_id=\"{}\" status=\"{}\">\n{}\n</subagent-notification>",
                result.task_id,
                result.status.as_str(),
                result.body
            ));
            shared.observer.event(
                &AgentId::root(),
                Event::Delivered { task_id: result.task_id.clone(), status: result.status, via: Via::Notification },
            );
        }
        out
    }

    fn next_id(st: &mut BoardState) -> String {
        loop {
            let z = splitmix64(st.ids);
            st.ids = st.ids.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let id = format!("sub-{:08x}", z >> 32);
            if !st.tasks.contains_key(&id) {
                return id;
            }
        }
    }

    /// Starts queued tasks while slots are free, in FIFO order.
    fn start_queued(st: &mut BoardState, shared: &Shared) {
        let cap = shared.rules.max_concurrency;
        while st.running < cap {
            let next = st.queue.pop_front();
            let Some(id) = next else { return };
            let task = st.tasks.get_mut(&id).expect("queued task exists");
            let TaskState::Queued { start } = std::mem::replace(&mut task.state, TaskState::Running) else {
                unreachable!("only queued tasks are in the queue")
            };
            st.running += 1;
            // The receiver lives in the task's future until it starts; a failed send means
            // the future is gone, which only cancellation does, and it removes from the queue.
            let _ = start.send(());
            shared.observer.event(
                &task.alias,
                Event::TaskStarted { task_id: id, child: task.alias.clone(), timeout: task.launch.timeout },
            );
        }
    }

    /// Queues a task's run and starts it if a slot is free. Returns `running` or `queued`.
    fn launch(&self, shared: &Arc<Shared>, id: &str, child: Loop) -> &'static str {
        let (start, started) = oneshot::channel();
        let mut st = self.lock();
        let timeout = st.tasks[id].launch.timeout;
        let run = run_task(shared.clone(), id.to_string(), child, timeout, started);
        let handle = tokio::spawn(Counted::new(run, self.runnable.clone(), self.polls.clone()));
        let task = st.tasks.get_mut(id).expect("launched task exists");
        task.abort = Some(handle.abort_handle());
        task.state = TaskState::Queued { start };
        let session = task.session.key(id);
        shared
            .observer
            .event(&task.alias, Event::TaskQueued { task_id: id.to_string(), child: task.alias.clone(), session });
        st.handles.push(handle);
        st.active += 1;
        st.queue.push_back(id.to_string());
        Board::start_queued(&mut st, shared);
        st.tasks[id].status_word()
    }

    /// Records the end of a task's run, frees its slot, and wakes the parent.
    fn finish(&self, shared: &Shared, id: &str, status: TaskStatus, body: String, history: Option<Transcript>) {
        let mut st = self.lock();
        // A child's own final message is its result and is cut to the limit; the timeout text
        // is the runtime's and is written whole (`bub.timeout.outcome`).
        let body = match status {
            TaskStatus::TimedOut => body,
            _ => truncate_result(&body, shared.rules.result_limit_chars).0,
        };
        let task = st.tasks.get_mut(id).expect("finished task exists");
        task.state = TaskState::Done(status);
        task.finished_runs += 1;
        let seq = task.seq;
        task.abort = None;
        let (alias, session) = (task.alias.clone(), task.session.clone());
        shared.observer.event(
            &alias,
            Event::TaskEnded { task_id: id.to_string(), child: alias.clone(), status, body: body.clone() },
        );
        Board::close_session(&mut st, shared, &alias, id, &session, history);
        st.results.push(Finished { task_id: id.to_string(), seq, status, body, at: Instant::now(), read: None });
        let index = st.results.len() - 1;
        st.unread.insert(index);
        st.active -= 1;
        st.running -= 1;
        Board::start_queued(&mut st, shared);
        drop(st);
        self.news.notify_waiters();
    }

    fn close_session(
        st: &mut BoardState,
        shared: &Shared,
        alias: &AgentId,
        id: &str,
        session: &SessionMode,
        history: Option<Transcript>,
    ) {
        let key = session.key(id);
        match session {
            SessionMode::Named(_) => {
                let record = st.named.get_mut(&key).expect("named session exists while used");
                if let Some(history) = history {
                    record.conversation = history;
                }
                record.in_use_by = None;
                shared.observer.event(alias, Event::SessionClosed { name: key, kept: true });
            }
            SessionMode::Temp | SessionMode::Fork => {
                st.scratch.remove(&key);
                shared.observer.event(alias, Event::SessionClosed { name: key, kept: false });
            }
        }
    }

    /// Stops a queued or running task: status `cancelled`, no notification, slot freed.
    fn cancel(&self, shared: &Shared, id: &str) -> Result<(), String> {
        let mut st = self.lock();
        let was_queued = match st.tasks.get(id).map(|t| &t.state) {
            None => return Err(format!("unknown task id: '{id}'")),
            Some(TaskState::Done(_)) => return Err(format!("task {id} has already finished")),
            Some(state) => matches!(state, TaskState::Queued { .. }),
        };
        if was_queued {
            st.queue.retain(|queued| queued != id);
        }
        Board::stop(&mut st, shared, id);
        Board::start_queued(&mut st, shared);
        drop(st);
        self.news.notify_waiters();
        Ok(())
    }

    /// Stops an unfinished task already taken out of the queue: status `cancelled`, no result
    /// record (the cancel's own result reports it, and no notification follows), its slot
    /// freed.
    fn stop(st: &mut BoardState, shared: &Shared, id: &str) {
        let task = st.tasks.get_mut(id).expect("a stopped task exists");
        let was_running = matches!(task.state, TaskState::Running);
        if let Some(abort) = task.abort.take() {
            abort.abort();
        }
        task.state = TaskState::Done(TaskStatus::Cancelled);
        let (alias, session) = (task.alias.clone(), task.session.clone());
        let body = "Cancelled.".to_string();
        shared.observer.event(
            &alias,
            Event::TaskEnded { task_id: id.to_string(), child: alias.clone(), status: TaskStatus::Cancelled, body },
        );
        Board::close_session(st, shared, &alias, id, &session, None);
        st.active -= 1;
        if was_running {
            st.running -= 1;
        }
    }

    /// Cancels every unfinished task and waits until none of their tokio tasks is alive.
    ///
    /// Queued ones first, in queue order (cancelling a running task first would hand its slot
    /// to a queued one, which would start only to be cancelled), then running ones in spawn
    /// order; all in one pass, however many there are.
    pub async fn quit(&self, shared: &Shared) {
        {
            let mut st = self.lock();
            let queued: Vec<String> = std::mem::take(&mut st.queue).into();
            let running: Vec<String> =
                st.order.iter().filter(|id| matches!(st.tasks[*id].state, TaskState::Running)).cloned().collect();
            for id in queued.iter().chain(&running) {
                Board::stop(&mut st, shared, id);
            }
        }
        self.news.notify_waiters();
        let handles = std::mem::take(&mut self.lock().handles);
        for handle in handles {
            // A cancelled task reports `JoinError::Cancelled`. A task that panicked passes its
            // panic on: a runtime never swallows one.
            if let Err(e) = handle.await
                && e.is_panic()
            {
                std::panic::resume_unwind(e.into_panic());
            }
        }
    }
}

/// One run of a background task: wait for a slot, run under the time limit, report.
async fn run_task(
    shared: Arc<Shared>,
    id: String,
    child: Loop,
    timeout: Option<Duration>,
    started: oneshot::Receiver<()>,
) {
    if started.await.is_err() {
        return;
    }
    // The clock starts when the task starts running, not while it was queued.
    let clock_start = Instant::now();
    let alias = child.agent.clone();
    let run = agent_loop::run(shared.clone(), child);
    let ended = match timeout {
        None => Some(run.await),
        // A limit the clock cannot reach is no limit.
        Some(limit) => match clock_start.checked_add(limit) {
            Some(deadline) => super::within_limit(deadline, run).await,
            None => Some(run.await),
        },
    };
    let (status, body, history) = match ended {
        Some((outcome, lp)) => {
            let status = if outcome.status == Status::Ok { TaskStatus::Completed } else { TaskStatus::Failed };
            let history = Some(lp.history);
            (status, outcome.message, history)
        }
        None => {
            let limit = timeout.expect("only a limit times out");
            shared.observer.event(&AgentId::root(), Event::TimedOut { child: alias.clone(), after: limit });
            tracing::warn!(alias = %alias, task_id = %id, after_s = limit.as_secs_f64(), "sub-agent timed out");
            (TaskStatus::TimedOut, format!("Timed out after {} seconds.", seconds(limit)), None)
        }
    };
    shared.board.finish(&shared, &id, status, body, history);
}

fn error(content: impl Into<String>) -> ToolOutput {
    ToolOutput { content: content.into(), is_error: true }
}

fn ok(value: Value) -> ToolOutput {
    // The same compact JSON as `value.to_string()`, written straight into one buffer rather
    // than through `Display`'s formatter.
    ToolOutput { content: serde_json::to_string(&value).expect("a JSON value serializes"), is_error: false }
}

/// Sleeps until `deadline`, or forever when there is none.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// A list argument: a JSON array of strings, or a comma-separated string.
fn list_arg(args: &Value, name: &str) -> Vec<String> {
    match args.get(name) {
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).map(str::to_string).collect(),
        Some(Value::String(s)) => s.split(',').map(str::to_string).filter(|s| !s.trim().is_empty()).collect(),
        _ => Vec::new(),
    }
}

/// A time limit a model gives in seconds, as the core uses it. Not a number, negative or NaN:
/// ignored (the next source of the limit applies, `bub.timeout.invalid-ignored`). Past
/// [`rules::MAX_SECONDS`](crate::rules::MAX_SECONDS) (about 31.7 years, far past any run's
/// horizon): clamped to it, so no value a model sends can overflow the clock.
fn seconds_arg(args: &Value, name: &str) -> Option<Duration> {
    let seconds = args.get(name).and_then(Value::as_f64).filter(|s| *s >= 0.0)?;
    Some(Duration::from_secs_f64(seconds.min(crate::rules::MAX_SECONDS)))
}

/// Bub's name matching: trimmed, case-insensitive, `.` and `_` alike.
fn normalize(name: &str) -> String {
    name.trim().to_lowercase().replace('.', "_")
}

/// Resolves requested names against the available ones; the error lists every name that is
/// unknown or not permitted, sorted and quoted.
fn resolve(requested: &[String], available: &[String], what: &str) -> Result<BTreeSet<String>, String> {
    let mut granted = BTreeSet::new();
    let mut bad = BTreeSet::new();
    for name in requested {
        match available.iter().find(|a| normalize(a) == normalize(name)) {
            Some(found) => {
                granted.insert(found.clone());
            }
            None => {
                bad.insert(name.trim().to_string());
            }
        }
    }
    if bad.is_empty() {
        return Ok(granted);
    }
    let names: Vec<String> = bad.iter().map(|n| format!("'{n}'")).collect();
    Err(format!("unknown {what} name(s): {}", names.join(", ")))
}

/// Runs one call of the family from the root loop (already approved by the gate).
pub(crate) async fn call(parent: &mut Loop, shared: &Shared, call: &ToolCall, assistant_len: usize) -> ToolOutput {
    match call.name.as_str() {
        "subagent" => start(parent, shared, &call.args, assistant_len),
        "subagent.send" => send(parent, shared, &call.args),
        "subagent.cancel" => {
            parent.budget.spend(1);
            let id = string_arg(&call.args, "task_id").unwrap_or_default();
            match shared.board.cancel(shared, id.trim()) {
                Ok(()) => ok(json!({"task_id": id.trim(), "status": "cancelled"})),
                Err(e) => error(e),
            }
        }
        _ => wait(parent, shared, &call.args).await,
    }
}

fn find_profile<'a>(shared: &'a Shared, name: &str) -> Option<&'a Profile> {
    shared.config.profiles.iter().find(|p| p.name == name)
}

/// `subagent`: validate everything, pay, then start or queue the child.
fn start(parent: &mut Loop, shared: &Shared, args: &Value, assistant_len: usize) -> ToolOutput {
    let rules = &shared.rules;
    let budget_before = parent.budget.remaining;
    parent.budget.spend(rules.spawn_cost);
    // One depth guard for both families (`core.depth.guard-error`): no agent runs deeper than the limit.
    if parent.depth >= rules.depth_limit {
        let reason = super::foreground::DEPTH_ERROR;
        shared.observer.event(&parent.agent, Event::SpawnRefused { tool: "subagent".into(), reason: reason.into() });
        tracing::warn!(alias = %parent.agent, reason, "spawn refused");
        return error(reason);
    }
    let prompt = string_arg(args, "prompt").unwrap_or_default().trim().to_string();
    if prompt.is_empty() {
        return error("error: empty prompt");
    }
    let profile = match string_arg(args, "agent").map(|a| a.trim().to_string()).filter(|a| !a.is_empty()) {
        None => None,
        Some(name) => match find_profile(shared, &name) {
            Some(profile) => Some(profile),
            None => return error(format!("unknown agent profile: '{name}'")),
        },
    };
    let tools = Some(list_arg(args, "allowed_tools"))
        .filter(|l| !l.is_empty())
        .or_else(|| profile.and_then(|p| p.tools.clone()).filter(|l| !l.is_empty()));
    let catalog = match tools {
        None => parent.catalog.clone(),
        Some(requested) => match resolve(
            &requested,
            &[parent.catalog_names(shared), TERMINAL_TOOLS.map(String::from).to_vec()].concat(),
            "tool",
        ) {
            // Every child has `final_answer` and `fail`; naming them grants nothing more.
            Ok(granted) => Some(granted.into_iter().filter(|t| !TERMINAL_TOOLS.contains(&t.as_str())).collect()),
            Err(e) => return error(e),
        },
    };
    let skills = Some(list_arg(args, "allowed_skills"))
        .filter(|l| !l.is_empty())
        .or_else(|| profile.and_then(|p| p.skills.clone()).filter(|l| !l.is_empty()));
    let skills = match skills {
        None => parent.skills.clone(),
        Some(requested) => match resolve(&requested, &parent.skills, "skill") {
            Ok(granted) => parent.skills.iter().filter(|s| granted.contains(*s)).cloned().collect(),
            Err(e) => return error(e),
        },
    };
    let session = SessionMode::parse(string_arg(args, "session").as_deref().map(str::trim).unwrap_or("temp"));
    let mut st = shared.board.lock();
    if let SessionMode::Named(name) = &session
        && let Some(Record { in_use_by: Some(user), .. }) = st.named.get(name)
    {
        return error(format!("session '{name}' is in use by task {user}"));
    }

    let grant = parent.budget.grant(rules.child_step_cap);
    let id = Board::next_id(&mut st);
    parent.children += 1;
    let alias = parent.agent.child(parent.children);
    let launch = Launch {
        request_id: Arc::from(format!("{}-{id}", parent.request_id)),
        model: string_arg(args, "model")
            .or_else(|| profile.and_then(|p| p.model.clone()))
            .map(Arc::from)
            .or_else(|| parent.model.clone()),
        reasoning_effort: string_arg(args, "reasoning_effort")
            .or_else(|| profile.and_then(|p| p.reasoning_effort.clone()))
            .map(Arc::from)
            .or_else(|| parent.reasoning_effort.clone()),
        profile: profile.map(|p| Arc::from(p.name.as_str())),
        system: Arc::from(system_prompt(&shared.config, None, profile.map(|p| p.body.as_str()), &skills)),
        catalog,
        skills,
        // The first source that gives a limit decides; a limit of 0 means none
        // (`bub.timeout.zero-is-none`, as for `Agent` children).
        timeout: seconds_arg(args, "timeout_seconds")
            .or_else(|| profile.and_then(|p| p.timeout))
            .or(rules.subagent_default_timeout)
            .filter(|limit| !limit.is_zero()),
    };
    // A temp session starts empty, a fork session from the snapshot at the call (an O(1)
    // fork), a named one where it left off.
    let key = session.key(&id);
    let records = if matches!(session, SessionMode::Named(_)) { &mut st.named } else { &mut st.scratch };
    let record =
        records.entry(key.clone()).or_insert_with(|| Record { conversation: Transcript::new(), in_use_by: None });
    record.in_use_by = Some(id.clone());
    if session == SessionMode::Fork {
        record.conversation = parent.history.prefix(assistant_len);
    }
    let conversation = record.conversation.clone();
    let seq = st.order.len();
    st.order.push(id.clone());
    st.tasks.insert(
        id.clone(),
        Task {
            alias: alias.clone(),
            finished_runs: 0,
            seq,
            session: session.clone(),
            state: TaskState::Running,
            inbox: Arc::new(Inbox::default()),
            abort: None,
            launch,
        },
    );
    drop(st);

    shared.observer.event(
        &parent.agent,
        Event::Spawned {
            child: alias.clone(),
            family: Family::Background,
            task: prompt.clone(),
            cost: rules.spawn_cost,
            grant,
            budget_before,
            budget_after: parent.budget.remaining,
        },
    );
    shared.observer.event(&alias, Event::SessionOpened { name: key.clone(), kind: session.kind() });
    tracing::info!(parent = %parent.agent, child = %alias, task_id = %id, grant, "spawn");
    let status = shared.board.launch(&shared.arc(), &id, child_loop(shared, &id, alias, &prompt, grant, conversation));
    ok(json!({"task_id": id, "status": status, "session": key}))
}

/// The loop of one run of task `id`, continuing `conversation` with `prompt`.
fn child_loop(
    shared: &Shared,
    id: &str,
    alias: AgentId,
    prompt: &str,
    grant: u32,
    mut conversation: Transcript,
) -> Loop {
    let st = shared.board.lock();
    let task = &st.tasks[id];
    let launch = task.launch.clone();
    conversation.push(Message::user(prompt));
    Loop {
        agent: alias,
        depth: 1,
        goal: Arc::from(prompt),
        request_id: launch.request_id,
        model: launch.model,
        reasoning_effort: launch.reasoning_effort,
        profile: launch.profile,
        system: launch.system,
        history: conversation,
        budget: Budget { remaining: grant, recovery: shared.rules.recovery_budget },
        step_index: 0,
        catalog: launch.catalog,
        skills: launch.skills,
        ask_user: false,
        inbox: task.inbox.clone(),
        children: 0,
        llm_calls: 0,
        offered: None,
    }
}

/// `subagent.send`: a message for a running or queued task, or a new run of a finished task
/// with a named session (granted afresh, counted against the cap).
///
/// A message costs 1 step like any call; a continuation is a spawn and pays the spawn cost
/// and a fresh grant.
fn send(parent: &mut Loop, shared: &Shared, args: &Value) -> ToolOutput {
    let rules = &shared.rules;
    let budget_before = parent.budget.remaining;
    let id = string_arg(args, "task_id").unwrap_or_default().trim().to_string();
    let message = string_arg(args, "message").unwrap_or_default();
    let mut st = shared.board.lock();
    let continues = st.tasks.get(&id).is_some_and(|t| !t.active() && matches!(t.session, SessionMode::Named(_)));
    parent.budget.spend(if continues { rules.spawn_cost } else { 1 });
    let Some(task) = st.tasks.get(&id) else { return error(format!("unknown task id: '{id}'")) };
    if message.trim().is_empty() {
        return error("error: empty message");
    }
    if task.active() {
        task.inbox.push(Message::user(message.clone()));
        let status = task.status_word();
        shared.observer.event(&task.alias, Event::Steered { message });
        return ok(json!({"task_id": id, "status": status}));
    }
    let SessionMode::Named(name) = task.session.clone() else {
        return error(format!("task {id} has finished and its session was discarded"));
    };
    let alias = task.alias.clone();
    let record = st.named.get_mut(&name).expect("named sessions are kept");
    if let Some(user) = &record.in_use_by {
        return error(format!("session '{name}' is in use by task {user}"));
    }
    record.in_use_by = Some(id.clone());
    let conversation = record.conversation.clone();
    drop(st);

    let grant = parent.budget.grant(rules.child_step_cap);
    shared.observer.event(
        &parent.agent,
        Event::Spawned {
            child: alias.clone(),
            family: Family::Background,
            task: message.clone(),
            cost: rules.spawn_cost,
            grant,
            budget_before,
            budget_after: parent.budget.remaining,
        },
    );
    shared.observer.event(&alias, Event::SessionOpened { name: name.clone(), kind: "named" });
    let child = child_loop(shared, &id, alias, &message, grant, conversation);
    let status = shared.board.launch(&shared.arc(), &id, child);
    ok(json!({"task_id": id, "status": status, "session": name}))
}

/// `subagent.wait`: results of the listed tasks (or of every task not yet read), waiting at
/// most `timeout_seconds` for all of them to finish.
async fn wait(parent: &mut Loop, shared: &Shared, args: &Value) -> ToolOutput {
    parent.budget.spend(1);
    let listed = list_arg(args, "task_ids");
    let targets: Vec<String> = {
        let st = shared.board.lock();
        if listed.is_empty() {
            let unread: BTreeSet<&str> = st.unread.iter().map(|i| st.results[*i].task_id.as_str()).collect();
            st.order.iter().filter(|id| st.tasks[*id].active() || unread.contains(id.as_str())).cloned().collect()
        } else {
            let mut targets = Vec::new();
            for id in listed.iter().map(|id| id.trim().to_string()) {
                if !st.tasks.contains_key(&id) {
                    return error(format!("unknown task id: '{id}'"));
                }
                if !targets.contains(&id) {
                    targets.push(id);
                }
            }
            // The result lists the tasks it does not read in spawn order, whatever order the
            // call named them in (`bub.wait.result-shape`).
            targets.sort_by_key(|id| st.tasks[id].seq);
            targets
        }
    };
    let limit = seconds_arg(args, "timeout_seconds").unwrap_or(Duration::from_secs(crate::rules::WAIT_DEFAULT_SECONDS));
    let deadline = Instant::now().checked_add(limit);
    // The targets still unfinished; each wake-up checks only those. After a wake-up (a task
    // ended, or the deadline came), the instant settles first: a result due in the same
    // instant as the one that woke the wait, or as the deadline, is in the answer
    // (`bub.wait.instant-settled`).
    let mut unfinished: Vec<&String> = targets.iter().collect();
    let mut deadline_passed = false;
    loop {
        let notified = shared.board.news.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        {
            let st = shared.board.lock();
            unfinished.retain(|id| st.tasks[*id].active());
        }
        if unfinished.is_empty() || deadline_passed {
            break;
        }
        tokio::select! {
            biased;
            _ = &mut notified => {}
            _ = sleep_until(deadline) => deadline_passed = true,
        }
        shared.board.settle().await;
    }
    let mut st = shared.board.lock();
    let BoardState { tasks, results: finished, unread: unread_set, .. } = &mut *st;
    let wanted: BTreeSet<&str> = targets.iter().map(String::as_str).collect();
    let mut results = Vec::new();
    let mut unread: Vec<usize> =
        unread_set.iter().copied().filter(|i| wanted.contains(finished[*i].task_id.as_str())).collect();
    unread.sort_by_key(|i| (finished[*i].at, finished[*i].seq));
    let mut answered = BTreeSet::new();
    for i in unread {
        unread_set.remove(&i);
        let result = &mut finished[i];
        result.read = Some(Via::Wait);
        answered.insert(result.task_id.clone());
        results.push(json!({"task_id": result.task_id, "status": result.status.as_str(), "result": result.body}));
        shared.observer.event(
            &parent.agent,
            Event::Delivered { task_id: result.task_id.clone(), status: result.status, via: Via::Wait },
        );
    }
    for id in targets.iter().filter(|id| !answered.contains(*id)) {
        let task = &tasks[id];
        let mut entry = json!({"task_id": id, "status": task.status_word()});
        if !task.active() && task.finished_runs > 0 {
            entry["already_delivered"] = json!(true);
        }
        results.push(entry);
    }
    ok(Value::Array(results))
}

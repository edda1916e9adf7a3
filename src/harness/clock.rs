//! The harness's clock: every virtual wait of the harness (a reply's or a tool's latency, a
//! steering message's time) is an entry here, and one task delivers each instant's entries.
//!
//! An instant is one value of virtual time. Everything the harness has due at an instant is
//! delivered in one go, by one task that never yields in between: the core can rely on "what
//! is due now has arrived once the runtime has had a round" (see `core.instant.*` in
//! `docs/rules/core.md`), whatever the tie order. The order of the entries within an instant
//! is the [`Schedule`]'s: registration order by default, a seeded permutation when exploring.
//! That order decides which waiting task the runtime runs first, which is all that exploring
//! may vary; it never splits an instant in two.
//!
//! A zero latency is no wait at all: the answer is ready at once, in the same poll.
//!
//! The harness reads virtual time from [`Now`], which the run's runtime
//! ([`paused_runtime`]) refreshes each time it wakes up, not from tokio's clock at every
//! event and wait.
//!
//! This module does not decide anything about the core's own timers (time limits, `wait`
//! deadlines): those are tokio's, and the core settles them itself.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::time::Instant;

use super::schedule::Schedule;

/// A run's virtual time as of the runtime's last wake-up.
///
/// A paused tokio clock moves only while its runtime parks: when every task waits, the
/// runtime advances the clock to the next timer, and wakes. Between two wake-ups the clock
/// reads the same, so the harness reads it once per wake-up (the runtime's unpark hook, set by
/// [`paused_runtime`]) instead of at every trace event and every wait, each of which took the
/// lock of tokio's clock. Debug builds (and so `cargo test`) check every reading made on the
/// runtime against tokio's clock.
pub struct Now {
    /// Virtual time zero: the runtime's paused clock when the run began.
    start: OnceLock<Instant>,
    /// The run's runtime: debug builds check readings made on it, and on no other.
    #[cfg(debug_assertions)]
    runtime: OnceLock<tokio::runtime::Id>,
    /// Nanoseconds from `start` to the virtual time of the runtime's last wake-up.
    since_start: AtomicU64,
}

impl Now {
    /// Virtual time since the run began: at the runtime's last wake-up, which is now while
    /// the runtime runs, and the end of the run after it.
    pub fn elapsed(&self) -> Duration {
        let elapsed = Duration::from_nanos(self.since_start.load(Ordering::Relaxed));
        #[cfg(debug_assertions)]
        if let (Some(start), Ok(current)) = (self.start.get(), tokio::runtime::Handle::try_current())
            && self.runtime.get() == Some(&current.id())
        {
            assert_eq!(elapsed, Instant::now() - *start, "virtual time moved without the runtime waking up");
        }
        elapsed
    }

    /// The current instant of virtual time (see [`Now::elapsed`]).
    pub fn instant(&self) -> Instant {
        *self.start.get().expect("a run's clock starts with its runtime") + self.elapsed()
    }

    /// Reads tokio's clock: the runtime just woke up.
    fn refresh(&self) {
        if let Some(start) = self.start.get() {
            // Virtual time within a run stays far below 2^64 ns (584 years): latencies and
            // horizons are validated at load.
            let since = (Instant::now() - *start).as_nanos();
            self.since_start.store(u64::try_from(since).unwrap_or(u64::MAX), Ordering::Relaxed);
        }
    }
}

impl Now {
    /// A clock that never starts: virtual time stays zero. For the wire, whose engine waits in
    /// real time and reads no virtual time.
    pub fn unstarted() -> Arc<Now> {
        Arc::new(Now {
            start: OnceLock::new(),
            #[cfg(debug_assertions)]
            runtime: OnceLock::new(),
            since_start: AtomicU64::new(0),
        })
    }
}

/// A fresh current-thread runtime with its clock paused, and the [`Now`] it keeps: a run's
/// runtime.
pub fn paused_runtime() -> (tokio::runtime::Runtime, Arc<Now>) {
    let now = Arc::new(Now {
        start: OnceLock::new(),
        #[cfg(debug_assertions)]
        runtime: OnceLock::new(),
        since_start: AtomicU64::new(0),
    });
    let hook = now.clone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .on_thread_unpark(move || hook.refresh())
        .build()
        .expect("a current-thread runtime builds");
    {
        let _on_runtime = runtime.enter();
        let _ = now.start.set(Instant::now());
        #[cfg(debug_assertions)]
        let _ = now.runtime.set(runtime.handle().id());
    }
    (runtime, now)
}

/// An entry's place in the queue: its instant, its rank within the instant (0 by default, a
/// seeded draw when exploring), and its registration number (ties of rank).
type Key = (Instant, u64, u64);

/// The run's clock for harness waits. Start [`Clock::drive`] on the run's runtime.
pub struct Clock {
    due: Mutex<Due>,
    schedule: Schedule,
    now: Arc<Now>,
    /// Instants at which two or more entries were due: the only places a tie order can
    /// differ from another ([`Clock::tied_instants`]).
    tied: AtomicU64,
}

/// The queue, and the driver's waker. Each entry holds the waker of the task waiting on it
/// (`None` once that wait was dropped: its instant is still kept, so the driver wakes at the
/// same instants whether or not a wait was cancelled). A delivered entry leaves the queue:
/// that is how its wait learns it arrived. Wakers kept here, under the one lock, cost no
/// allocation per wait (a channel per wait did).
#[derive(Default)]
struct Due {
    entries: BTreeMap<Key, Option<Waker>>,
    registered: u64,
    /// The driver's waker, once it has waited: woken when an entry earlier than every other
    /// is added.
    driver: Option<Waker>,
}

impl Clock {
    /// A clock reading virtual time from `now`, ordering same-instant entries as `schedule`
    /// says.
    pub fn new(schedule: Schedule, now: Arc<Now>) -> Arc<Clock> {
        Arc::new(Clock { due: Mutex::new(Due::default()), schedule, now, tied: AtomicU64::new(0) })
    }

    /// How many instants so far had two or more entries due at once (a dropped wait's entry
    /// counted too). With none, every tie order delivers every entry as the default one does:
    /// the schedule ranks entries within an instant and nowhere else, so the run is the same
    /// in every order.
    pub fn tied_instants(&self) -> u64 {
        self.tied.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Due> {
        self.due.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Waits `latency` of virtual time; `site` names the wait (`llm main/1 #2`) for the tie
    /// order, and is made only when exploring. A zero latency returns at once.
    pub async fn sleep(&self, latency: Duration, site: impl FnOnce() -> String) {
        if latency.is_zero() {
            return;
        }
        // Latencies are validated at load (at most ten years), far inside `Instant`'s range.
        self.sleep_until(self.now.instant() + latency, site).await;
    }

    /// Waits until `at` (at once if it has passed).
    pub async fn sleep_until(&self, at: Instant, site: impl FnOnce() -> String) {
        if at <= self.now.instant() {
            return;
        }
        let rank = self.schedule.rank(site);
        Wait { clock: self, at, rank, state: WaitState::New }.await;
    }

    /// Delivers each instant's entries when the run's virtual time reaches it, for as long as
    /// the run lasts (the runner aborts it at the end).
    pub async fn drive(self: Arc<Self>) {
        // One timer, moved to each next instant: a fresh timer per instant cost a
        // registration and a removal in tokio's timer wheel each time.
        let timer = tokio::time::sleep_until(self.now.instant());
        tokio::pin!(timer);
        std::future::poll_fn(|cx| self.tend(timer.as_mut(), cx)).await
    }

    /// One wake-up of the driver: sends every entry due by now, in queue order, without
    /// yielding in between (the tasks they wake run in that order, and all of them before
    /// anything woken later); then waits for the next entry's instant, or for an earlier entry.
    fn tend(&self, mut timer: Pin<&mut tokio::time::Sleep>, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            let next = {
                let now = self.now.instant();
                let mut due = self.lock();
                let mut last: Option<(Instant, bool)> = None;
                while let Some(entry) = due.entries.first_entry() {
                    if entry.key().0 > now {
                        break;
                    }
                    let at = entry.key().0;
                    match &mut last {
                        Some((instant, counted)) if *instant == at => {
                            if !*counted {
                                *counted = true;
                                self.tied.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        _ => last = Some((at, false)),
                    }
                    // A wait dropped meanwhile (its call was cancelled) has nothing to wake.
                    if let Some(waiting) = entry.remove() {
                        waiting.wake();
                    }
                }
                // The driver's waker is kept from one wait to the next (one task polls each
                // time), not cloned again at every poll.
                if !due.driver.as_ref().is_some_and(|driver| driver.will_wake(cx.waker())) {
                    due.driver = Some(cx.waker().clone());
                }
                due.entries.keys().next().map(|key| key.0)
            };
            let Some(at) = next else { return Poll::Pending };
            // Moved only when the next instant changed: the timer already waits for it
            // otherwise, and moving it saves nothing.
            if timer.deadline() != at {
                timer.as_mut().reset(at);
            }
            if timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
    }
}

/// Where a wait stands.
#[derive(Clone, Copy)]
enum WaitState {
    /// Not in the queue yet: it enters at its first poll, with the waker of that poll.
    New,
    /// In the queue under this key, until the driver delivers it.
    Queued(Key),
    /// Delivered.
    Done,
}

/// One wait of the harness: ready once the driver has delivered its entry.
struct Wait<'c> {
    clock: &'c Clock,
    at: Instant,
    rank: u64,
    state: WaitState,
}

impl Future for Wait<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut due = self.clock.lock();
        match self.state {
            WaitState::New => {
                let key = (self.at, self.rank, due.registered);
                due.registered += 1;
                let earliest = due.entries.keys().next().is_none_or(|first| key.0 < first.0);
                due.entries.insert(key, Some(cx.waker().clone()));
                if earliest && let Some(driver) = &due.driver {
                    driver.wake_by_ref();
                }
                drop(due);
                self.state = WaitState::Queued(key);
                Poll::Pending
            }
            WaitState::Queued(key) => match due.entries.get_mut(&key) {
                None => {
                    drop(due);
                    self.state = WaitState::Done;
                    Poll::Ready(())
                }
                Some(slot) => {
                    if !slot.as_ref().is_some_and(|waker| waker.will_wake(cx.waker())) {
                        *slot = Some(cx.waker().clone());
                    }
                    Poll::Pending
                }
            },
            WaitState::Done => Poll::Ready(()),
        }
    }
}

impl Drop for Wait<'_> {
    /// A wait dropped before its delivery keeps its instant (the driver still wakes then) but
    /// wakes nobody.
    fn drop(&mut self) {
        if let WaitState::Queued(key) = self.state
            && let Some(slot) = self.clock.lock().entries.get_mut(&key)
        {
            *slot = None;
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex as StdMutex;

    /// The order in which waits at one instant wake, as each records its name.
    fn wake_order(schedule: Schedule) -> Vec<&'static str> {
        let (runtime, now) = paused_runtime();
        runtime.block_on(async {
            let clock = Clock::new(schedule, now);
            let driver = tokio::spawn(clock.clone().drive());
            let order = Arc::new(StdMutex::new(Vec::new()));
            let mut tasks = Vec::new();
            for name in ["a", "b", "c", "d", "e"] {
                let (clock, order) = (clock.clone(), order.clone());
                tasks.push(tokio::spawn(async move {
                    clock.sleep(Duration::from_millis(100), || name.to_string()).await;
                    order.lock().unwrap().push(name);
                }));
            }
            for task in tasks {
                task.await.unwrap();
            }
            driver.abort();
            order.lock().unwrap().clone()
        })
    }

    #[test]
    fn same_instant_waits_wake_in_registration_order_by_default() {
        assert_eq!(wake_order(Schedule::default_order()), ["a", "b", "c", "d", "e"]);
    }

    #[test]
    fn a_seed_permutes_an_instant_and_replays_the_same_permutation() {
        let orders: Vec<_> = (0..8).map(|seed| wake_order(Schedule::seeded(seed))).collect();
        assert!(orders.iter().any(|o| o != &["a", "b", "c", "d", "e"]), "{orders:?}");
        assert_eq!(wake_order(Schedule::seeded(3)), orders[3]);
    }

    #[test]
    fn a_zero_latency_is_ready_in_the_same_poll() {
        let (runtime, now) = paused_runtime();
        runtime.block_on(async {
            let clock = Clock::new(Schedule::default_order(), now);
            let mut wait = std::pin::pin!(clock.sleep(Duration::ZERO, || unreachable!("no site for no wait")));
            let polled = std::future::poll_fn(|cx| std::task::Poll::Ready(wait.as_mut().poll(cx))).await;
            assert!(polled.is_ready());
        });
    }

    #[test]
    fn now_follows_the_paused_clock_whatever_timer_moved_it() {
        let (runtime, now) = paused_runtime();
        runtime.block_on(async {
            assert_eq!(now.elapsed(), Duration::ZERO);
            // A timer of tokio's, not the harness's: the runtime still wakes up after it.
            tokio::time::sleep(Duration::from_millis(2500)).await;
            assert_eq!(now.elapsed(), Duration::from_millis(2500));
            tokio::task::yield_now().await;
            assert_eq!(now.elapsed(), Duration::from_millis(2500));
        });
        // After the run, the time it ended at.
        assert_eq!(now.elapsed(), Duration::from_millis(2500));
    }

    #[test]
    fn waits_end_at_their_instant_of_virtual_time() {
        let (runtime, now) = paused_runtime();
        runtime.block_on(async {
            let clock = Clock::new(Schedule::default_order(), now);
            let driver = tokio::spawn(clock.clone().drive());
            let start = Instant::now();
            let later = {
                let clock = clock.clone();
                tokio::spawn(async move { clock.sleep(Duration::from_secs(30), String::new).await })
            };
            clock.sleep(Duration::from_millis(1500), String::new).await;
            assert_eq!(start.elapsed(), Duration::from_millis(1500));
            later.await.unwrap();
            assert_eq!(start.elapsed(), Duration::from_secs(30));
            driver.abort();
        });
    }

    #[test]
    fn now_read_after_the_run_inside_another_runtime_is_the_runs() {
        // A run started from inside another runtime's context: after its own runtime is gone,
        // `Now` is the run's last wake-up, and the debug check does not compare it with the
        // other runtime's clock.
        let outer = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let _outer = outer.enter();
        let (runtime, now) = paused_runtime();
        runtime.block_on(async { tokio::time::sleep(Duration::from_millis(2500)).await });
        drop(runtime);
        assert_eq!(now.elapsed(), Duration::from_millis(2500));
    }
}

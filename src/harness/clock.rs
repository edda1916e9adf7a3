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
//! This module does not decide anything about the core's own timers (time limits, `wait`
//! deadlines): those are tokio's, and the core settles them itself.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::time::Instant;

use super::schedule::Schedule;

/// An entry's place in the queue: its instant, its rank within the instant (0 by default, a
/// seeded draw when exploring), and its registration number (ties of rank).
type Key = (Instant, u64, u64);

/// The run's clock for harness waits. Start [`Clock::drive`] on the run's runtime.
pub struct Clock {
    due: Mutex<Due>,
    schedule: Schedule,
}

/// The queue, and how the driver is told that it changed. Each entry holds the waker of the
/// task waiting on it (`None` once that wait was dropped: its instant is still kept, so the
/// driver wakes at the same instants whether or not a wait was cancelled). A delivered entry
/// leaves the queue: that is how its wait learns it arrived. Wakers kept here, under the one
/// lock, cost no allocation per wait (a channel per wait did).
#[derive(Default)]
struct Due {
    entries: BTreeMap<Key, Option<Waker>>,
    registered: u64,
    /// An entry earlier than every other was added since the driver last looked.
    changed: bool,
    /// The driver's waker, once it has waited (woken only while `changed` matters to it:
    /// a spurious wake-up finds nothing changed and waits again).
    driver: Option<Waker>,
}

impl Clock {
    /// A clock ordering same-instant entries as `schedule` says.
    pub fn new(schedule: Schedule) -> Arc<Clock> {
        Arc::new(Clock { due: Mutex::new(Due::default()), schedule })
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
        self.sleep_until(Instant::now() + latency, site).await;
    }

    /// Waits until `at` (at once if it has passed).
    pub async fn sleep_until(&self, at: Instant, site: impl FnOnce() -> String) {
        if at <= Instant::now() {
            return;
        }
        let rank = self.schedule.rank(site);
        let key = {
            let mut due = self.lock();
            let earliest = due.entries.keys().next().map(|key| key.0);
            let key = (at, rank, due.registered);
            due.registered += 1;
            due.entries.insert(key, None);
            if earliest.is_none_or(|earliest| at < earliest) {
                due.changed = true;
                if let Some(driver) = &due.driver {
                    driver.wake_by_ref();
                }
            }
            key
        };
        Wait { clock: self, key }.await;
    }

    /// Delivers each instant's entries when the run's virtual time reaches it, for as long as
    /// the run lasts (the runner aborts it at the end).
    pub async fn drive(self: Arc<Self>) {
        // One timer, moved to each next instant: a fresh timer per instant cost a
        // registration and a removal in tokio's timer wheel each time, and `reset` re-registers
        // at the same point of the driver's poll, so the wheel holds its entry where a fresh
        // timer would have put it.
        let timer = tokio::time::sleep_until(Instant::now());
        tokio::pin!(timer);
        loop {
            let next = self.lock().entries.keys().next().map(|key| key.0);
            match next {
                None => self.changed(None).await,
                Some(at) if at > Instant::now() => {
                    timer.as_mut().reset(at);
                    self.changed(Some(timer.as_mut())).await;
                }
                Some(_) => self.deliver_due(),
            }
        }
    }

    /// Until the queue gets an earliest entry (looked at first), or `timer` ends.
    async fn changed(&self, mut timer: Option<Pin<&mut tokio::time::Sleep>>) {
        std::future::poll_fn(|cx| {
            {
                let mut due = self.lock();
                if std::mem::take(&mut due.changed) {
                    return Poll::Ready(());
                }
                // The driver's waker is kept from one wait to the next (one task polls each
                // time), not cloned again at every poll.
                if !due.driver.as_ref().is_some_and(|driver| driver.will_wake(cx.waker())) {
                    due.driver = Some(cx.waker().clone());
                }
            }
            match timer.as_mut() {
                Some(timer) => timer.as_mut().poll(cx),
                None => Poll::Pending,
            }
        })
        .await;
    }

    /// Sends every entry due by now, in queue order, without yielding in between: the tasks
    /// they wake run in that order, and all of them before anything woken later.
    fn deliver_due(&self) {
        let now = Instant::now();
        let mut due = self.lock();
        while let Some(entry) = due.entries.first_entry() {
            if entry.key().0 > now {
                break;
            }
            // A wait dropped meanwhile (its call was cancelled) has nothing to wake.
            if let Some(waiting) = entry.remove() {
                waiting.wake();
            }
        }
    }
}

/// One registered wait: ready once the driver has delivered its entry.
struct Wait<'c> {
    clock: &'c Clock,
    key: Key,
}

impl Future for Wait<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut due = self.clock.lock();
        match due.entries.get_mut(&self.key) {
            None => Poll::Ready(()),
            Some(slot) => {
                if !slot.as_ref().is_some_and(|waker| waker.will_wake(cx.waker())) {
                    *slot = Some(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }
}

impl Drop for Wait<'_> {
    /// A dropped wait keeps its instant (the driver still wakes then) but wakes nobody.
    fn drop(&mut self) {
        if let Some(slot) = self.clock.lock().entries.get_mut(&self.key) {
            *slot = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex as StdMutex;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap()
    }

    /// The order in which waits at one instant wake, as each records its name.
    fn wake_order(schedule: Schedule) -> Vec<&'static str> {
        runtime().block_on(async {
            let clock = Clock::new(schedule);
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
        runtime().block_on(async {
            let clock = Clock::new(Schedule::default_order());
            let mut wait = std::pin::pin!(clock.sleep(Duration::ZERO, || unreachable!("no site for no wait")));
            let polled = std::future::poll_fn(|cx| std::task::Poll::Ready(wait.as_mut().poll(cx))).await;
            assert!(polled.is_ready());
        });
    }

    #[test]
    fn waits_end_at_their_instant_of_virtual_time() {
        runtime().block_on(async {
            let clock = Clock::new(Schedule::default_order());
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
}

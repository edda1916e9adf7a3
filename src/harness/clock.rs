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
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use super::schedule::Schedule;

/// An entry's place in the queue: its instant, its rank within the instant (0 by default, a
/// seeded draw when exploring), and its registration number (ties of rank).
type Key = (Instant, u64, u64);

/// The run's clock for harness waits. Start [`Clock::drive`] on the run's runtime.
pub struct Clock {
    due: Mutex<Due>,
    changed: Notify,
    schedule: Schedule,
}

#[derive(Default)]
struct Due {
    entries: BTreeMap<Key, oneshot::Sender<()>>,
    registered: u64,
}

impl Clock {
    /// A clock ordering same-instant entries as `schedule` says.
    pub fn new(schedule: Schedule) -> Arc<Clock> {
        Arc::new(Clock { due: Mutex::new(Due::default()), changed: Notify::new(), schedule })
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
        let (send, arrived) = oneshot::channel();
        {
            let mut due = self.lock();
            let earliest = due.entries.keys().next().map(|key| key.0);
            let number = due.registered;
            due.registered += 1;
            due.entries.insert((at, rank, number), send);
            if earliest.is_none_or(|earliest| at < earliest) {
                self.changed.notify_one();
            }
        }
        if arrived.await.is_err() {
            // The clock stopped with the run: nothing arrives any more.
            std::future::pending::<()>().await;
        }
    }

    /// Delivers each instant's entries when the run's virtual time reaches it, for as long as
    /// the run lasts (the runner aborts it at the end).
    pub async fn drive(self: Arc<Self>) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let next = self.lock().entries.keys().next().map(|key| key.0);
            match next {
                None => changed.await,
                Some(at) if at > Instant::now() => {
                    tokio::select! {
                        biased;
                        _ = &mut changed => {}
                        _ = tokio::time::sleep_until(at) => {}
                    }
                }
                Some(_) => self.deliver_due(),
            }
        }
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
            // A receiver dropped meanwhile (its call was cancelled) has nothing to wake.
            let _ = entry.remove().send(());
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

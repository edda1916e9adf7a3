//! `--barrier`: replies held until the runtime is quiet, then released one at a time in alias
//! order, so that a runtime on real time is answered in the same order in every run.
//!
//! Without the clock, the order in which a runtime's agents are answered is whatever order
//! their requests reach the sockets, and a runtime that starts three children at once can see
//! them answered in any order. Under a barrier every scripted reply waits. A reply is due when
//! its scripted latency (times `--time-scale`) has passed since its request arrived; when no
//! request has arrived for the quiet period, the due reply of the lowest alias (`main` before
//! `main/1` before `main/2` before `main/10`; `main/1/1` after `main/1`) is released, and the
//! barrier waits for quiet again before the next one, so whatever the released reply sets off
//! (a tool, a new request) has happened before the next agent is answered. The number of
//! requests held at a release is how many agents the runtime really had waiting on the model
//! at once.
//!
//! **Quiet is a guess.** A runtime that takes longer than the quiet period between a reply and
//! its next request (a slow tool, a sleep, a cold import) is released past: its next request
//! joins a later barrier, and the order can differ between runs. The quiet period is the price
//! of every release: a run of N scripted replies costs at least N × quiet of wall time. Virtual
//! time (`--clock`, docs/clock-protocol.md) knows when the runtime is idle instead of guessing,
//! and the two are not combined. Replies due together are answered one at a time, so a script
//! that needs children to end in one instant (results delivered together) cannot be played
//! under a barrier: that is what the clock is for. A `hang` is never held (it is never
//! answered), and a request whose client gives up while held is passed over.

use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::{Notify, oneshot, watch};
use tokio::time::Instant;

/// One release: the request let go and every request held at that moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Release {
    /// The alias of the request released.
    pub released: String,
    /// Its exchange number, as the trace numbers it (in arrival order).
    pub exchange: usize,
    /// The aliases of every request held at the release (the released one included), in
    /// alias order.
    pub held: Vec<String>,
}

struct Waiting {
    alias: String,
    exchange: usize,
    /// When its scripted latency is over.
    due: Instant,
    go: oneshot::Sender<()>,
}

struct State {
    waiting: Vec<Waiting>,
    /// The last request's arrival, or the last release: quiet is measured from the later.
    last: Instant,
    releases: Vec<Release>,
}

/// The barrier of one served run.
pub(crate) struct Barrier {
    quiet: Duration,
    state: Mutex<State>,
    changed: Notify,
}

/// `main/2` before `main/10`: aliases compared segment by segment, numbers as numbers.
fn alias_order(a: &str, b: &str) -> std::cmp::Ordering {
    let key = |s: &str| -> Vec<(u64, String)> {
        s.split('/')
            .map(|part| part.parse::<u64>().map_or((u64::MAX, part.to_string()), |n| (n, String::new())))
            .collect()
    };
    key(a).cmp(&key(b))
}

impl Barrier {
    pub(crate) fn new(quiet: Duration) -> Barrier {
        Barrier {
            quiet,
            state: Mutex::new(State { waiting: Vec::new(), last: Instant::now(), releases: Vec::new() }),
            changed: Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A request arrived: the runtime is not quiet.
    pub(crate) fn arrived(&self) {
        self.lock().last = Instant::now();
        self.changed.notify_waiters();
    }

    /// Holds the request of `alias` (exchange `exchange`), whose reply is due after `latency`,
    /// until the barrier releases it. False when the barrier was dropped first (the server is
    /// stopping).
    pub(crate) async fn wait(&self, alias: &str, exchange: usize, latency: Duration) -> bool {
        let (go, released) = oneshot::channel();
        let due = Instant::now() + latency;
        self.lock().waiting.push(Waiting { alias: alias.to_string(), exchange, due, go });
        self.changed.notify_waiters();
        released.await.is_ok()
    }

    /// Every release so far, in order.
    pub(crate) fn releases(&self) -> Vec<Release> {
        self.lock().releases.clone()
    }

    /// Releases the due reply of the lowest alias, if the runtime has been quiet long enough;
    /// otherwise the instant to look again (`None`: nothing is held).
    fn try_release(&self, now: Instant) -> Result<(), Option<Instant>> {
        let mut st = self.lock();
        // A request whose client gave up is no longer waiting.
        st.waiting.retain(|w| !w.go.is_closed());
        let Some(first_due) = st.waiting.iter().map(|w| w.due).min() else { return Err(None) };
        let ready = (st.last + self.quiet).max(first_due);
        if now < ready {
            return Err(Some(ready));
        }
        st.waiting.sort_by(|a, b| alias_order(&a.alias, &b.alias).then(a.exchange.cmp(&b.exchange)));
        let held = st.waiting.iter().map(|w| w.alias.clone()).collect();
        let Some(at) = st.waiting.iter().position(|w| w.due <= now) else { return Err(Some(first_due)) };
        let first = st.waiting.remove(at);
        st.releases.push(Release { released: first.alias, exchange: first.exchange, held });
        st.last = now;
        // A receiver dropped since the check above is a give-up: nothing to answer.
        let _ = first.go.send(());
        Ok(())
    }

    /// The releaser: runs until `stop` turns true.
    pub(crate) async fn run(&self, mut stop: watch::Receiver<bool>) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let wake = match self.try_release(Instant::now()) {
                Ok(()) => continue,
                Err(wake) => wake,
            };
            tokio::select! {
                _ = stop.wait_for(|s| *s) => return,
                _ = &mut changed => {}
                _ = async {
                    match wake {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                } => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_are_ordered_by_their_numbers() {
        let mut aliases = vec!["main/10", "main/2", "main/1/1", "main", "main/1"];
        aliases.sort_by(|a, b| alias_order(a, b));
        assert_eq!(aliases, ["main", "main/1", "main/1/1", "main/2", "main/10"]);
    }

    #[tokio::test(start_paused = true)]
    async fn held_requests_go_one_at_a_time_in_alias_order_after_quiet() {
        let barrier = std::sync::Arc::new(Barrier::new(Duration::from_millis(100)));
        let (stop_tx, stop) = watch::channel(false);
        let releaser = tokio::spawn({
            let barrier = barrier.clone();
            async move { barrier.run(stop).await }
        });
        let order = std::sync::Arc::new(Mutex::new(Vec::new()));
        let mut handles = Vec::new();
        for (alias, exchange) in [("main/3", 1), ("main/1", 2), ("main/2", 3)] {
            let (barrier, order) = (barrier.clone(), order.clone());
            barrier.arrived();
            handles.push(tokio::spawn(async move {
                assert!(barrier.wait(alias, exchange, Duration::ZERO).await);
                order.lock().unwrap().push((alias, Instant::now()));
            }));
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
        let start = Instant::now();
        for h in handles {
            h.await.unwrap();
        }
        let order = order.lock().unwrap().clone();
        let aliases: Vec<&str> = order.iter().map(|(a, _)| *a).collect();
        assert_eq!(aliases, ["main/1", "main/2", "main/3"]);
        // Each release waits a quiet period after the one before.
        assert!(order.windows(2).all(|w| w[1].1 - w[0].1 >= Duration::from_millis(100)), "{order:?} from {start:?}");
        let releases = barrier.releases();
        assert_eq!(releases[0].held, ["main/1", "main/2", "main/3"]);
        assert_eq!(releases[2].held, ["main/3"]);
        stop_tx.send(true).unwrap();
        releaser.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_reply_waits_for_its_latency_and_the_due_one_goes_first() {
        let barrier = std::sync::Arc::new(Barrier::new(Duration::from_millis(100)));
        let (stop_tx, stop) = watch::channel(false);
        let releaser = tokio::spawn({
            let barrier = barrier.clone();
            async move { barrier.run(stop).await }
        });
        let start = Instant::now();
        // main/1's reply is due in 1 s, main/2's at once: main/2 goes first, after quiet.
        let slow = tokio::spawn({
            let barrier = barrier.clone();
            async move {
                assert!(barrier.wait("main/1", 1, Duration::from_secs(1)).await);
                Instant::now()
            }
        });
        let quick = tokio::spawn({
            let barrier = barrier.clone();
            async move {
                assert!(barrier.wait("main/2", 2, Duration::ZERO).await);
                Instant::now()
            }
        });
        let (slow, quick) = (slow.await.unwrap(), quick.await.unwrap());
        assert_eq!(quick - start, Duration::from_millis(100));
        assert_eq!(slow - start, Duration::from_secs(1));
        let released: Vec<String> = barrier.releases().into_iter().map(|r| r.released).collect();
        assert_eq!(released, ["main/2", "main/1"]);
        stop_tx.send(true).unwrap();
        releaser.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_given_up_on_while_held_is_passed_over() {
        let barrier = std::sync::Arc::new(Barrier::new(Duration::from_millis(100)));
        let (stop_tx, stop) = watch::channel(false);
        let releaser = tokio::spawn({
            let barrier = barrier.clone();
            async move { barrier.run(stop).await }
        });
        let gone = tokio::spawn({
            let barrier = barrier.clone();
            async move { barrier.wait("main/1", 1, Duration::ZERO).await }
        });
        let kept = tokio::spawn({
            let barrier = barrier.clone();
            async move { barrier.wait("main/2", 2, Duration::ZERO).await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        gone.abort();
        assert!(kept.await.unwrap());
        assert_eq!(barrier.releases().iter().map(|r| r.released.as_str()).collect::<Vec<_>>(), ["main/2"]);
        stop_tx.send(true).unwrap();
        releaser.await.unwrap();
    }
}

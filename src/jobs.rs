//! Independent work spread over threads, results handed back in order.
//!
//! Used where runs do not depend on each other (the files of a suite): each run keeps its own
//! current-thread runtime with a paused clock, so the threads change how fast a suite runs,
//! never what any run does or the order in which results are reported.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use crate::runner::RUN_STACK_BYTES;

/// The number of threads to use when none is given: the machine's cores.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Runs `work` on every item on `jobs` threads (the caller's among them) and hands each result
/// to `sink` on the calling thread, in item order, as soon as it and all before it are done.
pub fn ordered<T: Sync, R: Send>(
    items: &[T],
    jobs: usize,
    work: impl Fn(&T) -> R + Sync,
    mut sink: impl FnMut(usize, R),
) {
    let jobs = jobs.clamp(1, items.len().max(1));
    if jobs == 1 {
        for (i, item) in items.iter().enumerate() {
            sink(i, work(item));
        }
        return;
    }
    let next = AtomicUsize::new(0);
    let (send, receive) = mpsc::channel();
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            let send = send.clone();
            let (next, work) = (&next, &work);
            std::thread::Builder::new()
                .stack_size(RUN_STACK_BYTES)
                .spawn_scoped(scope, move || {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        if send.send((i, work(item))).is_err() {
                            break;
                        }
                    }
                })
                .expect("a worker thread starts");
        }
        drop(send);
        let mut waiting = BTreeMap::new();
        let mut due = 0;
        for (i, result) in receive {
            waiting.insert(i, result);
            while let Some(result) = waiting.remove(&due) {
                sink(due, result);
                due += 1;
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_item_order_whatever_the_threads() {
        let items: Vec<u64> = (0..200).collect();
        for jobs in [1, 2, 7] {
            let mut seen = Vec::new();
            ordered(&items, jobs, |n| n * n, |i, r| seen.push((i, r)));
            assert_eq!(seen, items.iter().map(|n| (*n as usize, n * n)).collect::<Vec<_>>());
        }
    }
}

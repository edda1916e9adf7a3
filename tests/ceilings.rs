//! Issue 27's property: no scenario file, whatever numbers it writes, makes a run produce more
//! events or text, or allocate more memory, than the ceilings allow. Counted, not timed: this
//! test binary's global allocator counts the bytes live on the heap, and the peak of each run
//! is compared with a bound derived from the ceilings.
//!
//! The cases are scenario files generated from one seed (SplitMix64, as every draw of
//! rehearsal): large and boundary numbers (0, 1, the ceiling, one past it, 2^64-1) for the
//! limits, text repetition counts, budgets, horizons, latencies and the unknown-tool message,
//! with `repeatable` replies that amplify whatever they do. Each is parsed as a file; one that
//! loads is run once. To run thousands of cases in seconds, the ceilings are lowered
//! ([`scenario::lower_ceilings`]): the bound scales with them, so what holds here at 1/64
//! holds at the built-in ceilings (which `tests/suite/load/hostile.rs` checks on its reproducers).
//! `CEILING_CASES` sets how many cases run (default 3,000); a failure prints the file.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use rehearsal::internals::harness::schedule::Schedule;
use rehearsal::internals::seed::splitmix64;
use rehearsal::runner::Runner;
use rehearsal::scenario::{self, Ceilings, MAX_VIRTUAL_MS};
use serde_json::{Value, json};

/// The system allocator, counting the bytes live and the most live since the last reset.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let pointer = unsafe { System.alloc(layout) };
        if !pointer.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        pointer
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        unsafe { System.dealloc(pointer, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let moved = unsafe { System.realloc(pointer, layout, new_size) };
        if !moved.is_null() {
            if new_size >= layout.size() {
                let live = LIVE.fetch_add(new_size - layout.size(), Ordering::Relaxed) + new_size - layout.size();
                PEAK.fetch_max(live, Ordering::Relaxed);
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        moved
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// By how much the ceilings are lowered for this test.
const DIVISOR: usize = 64;

/// The most heap a run may hold at once, over what was live before it: a few copies of every
/// text the run may produce (the trace, the conversation, the exchanges), a record per event,
/// and a fixed part (the runtime, the catalog, the prompts). At the built-in ceilings this is
/// 748 MiB: inside the promise of 1 GB for any file (checked below).
fn peak_bound(c: &Ceilings) -> usize {
    const COPIES_PER_TEXT_BYTE: usize = 8;
    const BYTES_PER_EVENT: usize = 512;
    const FIXED_BYTES: usize = 4 << 20;
    COPIES_PER_TEXT_BYTE * c.run_text_bytes + BYTES_PER_EVENT * c.max_events + FIXED_BYTES
}

/// One generated scenario file's draws.
struct Draw(u64);

impl Draw {
    fn next(&mut self) -> u64 {
        self.0 = splitmix64(self.0);
        self.0
    }

    fn pick<T: Clone>(&mut self, from: &[T]) -> T {
        from[(self.next() % from.len() as u64) as usize].clone()
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    /// A boundary number around `ceiling`: mostly one it allows (1, small, half, the ceiling
    /// itself), sometimes one past it (0, one past, 2^64-1, 1e10).
    fn around(&mut self, ceiling: usize) -> Value {
        let c = ceiling as u64;
        if self.chance(85) {
            self.pick(&[json!(1), json!(7), json!(c / 2), json!(c), json!(c)])
        } else {
            self.pick(&[json!(0), json!(c + 1), json!(u64::MAX), json!(1e10)])
        }
    }

    /// A text in one of the file's forms: a plain string, or a repeated one.
    /// `limit`: the file's `max_text_chars`, which the counts are drawn around.
    fn text(&mut self, limit: usize) -> Value {
        if self.chance(30) {
            return json!(self.pick(&["ok", "", "héllo wörld", "x"]));
        }
        let count = self.around(limit / 2);
        json!({"repeat": self.pick(&["x", "ab", "héllo", "{name}"]), "count": count})
    }

    fn reply(&mut self, limit: usize) -> Value {
        let mut reply = json!({"latency_ms": self.pick(&[0, 0, 1, 100])});
        if self.chance(70) {
            reply["text"] = self.text(limit);
        }
        let calls = self.pick(&[0, 0, 1, 2, 10]);
        let mut list: Vec<Value> = (0..calls).map(|_| json!({"tool": "big", "args": {}})).collect();
        if self.chance(20) {
            let name = "u".repeat(self.pick(&[1, 100, 5000]));
            list.push(json!({"tool": name, "args": {}, "undeclared": true}));
        }
        if !list.is_empty() {
            reply["calls"] = json!(list);
        }
        if self.chance(40) {
            reply["repeatable"] = json!(true);
        }
        reply
    }

    fn scenario(&mut self, i: u64, c: &Ceilings) -> Value {
        let mut limits = json!({
            "max_events": self.around(c.max_events),
            "max_text_chars": self.around(c.max_text_chars),
            "max_calls_per_reply": self.around(c.max_calls_per_reply),
            "horizon_ms": self.pick(&[1, 1000, 3_600_000, MAX_VIRTUAL_MS, MAX_VIRTUAL_MS, MAX_VIRTUAL_MS + 1]),
        });
        // A limit left out takes its default (which may itself be past a lowered ceiling).
        for field in ["max_events", "max_text_chars", "max_calls_per_reply", "horizon_ms"] {
            if self.chance(10) {
                limits.as_object_mut().unwrap().remove(field);
            }
        }
        let mut rules = json!({
            "preset": "roku",
            "root_step_budget": self.pick(&[1u64, 30, 1000, 4_000_000_000]),
            "recovery_budget": self.pick(&[0u64, 5, 4_000_000_000]),
        });
        if self.chance(20) {
            rules["unknown_tool_message"] = json!("{name}".repeat(self.pick(&[1, 10, 1000])));
        }
        // Texts are drawn around the file's own text limit (the default when it sets none).
        let limit = limits["max_text_chars"].as_u64().map_or(1_000_000, |l| l.min(c.max_text_chars as u64) as usize);
        let replies: Vec<Value> = (0..self.pick(&[1, 2, 3])).map(|_| self.reply(limit)).collect();
        let mut lane = json!({"agent": "main", "replies": replies});
        if self.chance(20) {
            let absent: Vec<Value> = (0..self.pick(&[1, 3, 50])).map(|_| self.text(limit / 64)).collect();
            lane["check_every"] = json!({"absent": absent});
        }
        let tool = json!({
            "name": "big",
            "latency_ms": self.pick(&[0, 1]),
            "results": [{"text": self.text(limit)}],
        });
        let turns: Vec<Value> = (0..self.pick(&[1, 2])).map(|_| json!({"user": "go"})).collect();
        json!({
            "name": format!("ceiling-case-{i}"),
            "rules": rules,
            "tools": [tool],
            "lanes": [lane],
            "turns": turns,
            "limits": limits,
        })
    }
}

#[test]
fn no_generated_file_makes_a_run_produce_or_allocate_past_the_ceilings() {
    scenario::lower_ceilings(DIVISOR);
    let c = scenario::ceilings();
    assert_eq!(c.max_events, scenario::CEILINGS.max_events / DIVISOR);
    let cases: u64 = std::env::var("CEILING_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(3000);
    let bound = peak_bound(&c);
    assert!(peak_bound(&scenario::CEILINGS) < 1 << 30, "the bound at the built-in ceilings keeps the 1 GB promise");
    let (mut ran, mut refused, mut stopped, mut highest_peak, mut most_events) = (0u64, 0u64, 0u64, 0usize, 0usize);
    let mut draw = Draw(27);
    for i in 0..cases {
        let text = serde_json::to_string_pretty(&draw.scenario(i, &c)).unwrap();
        let loaded = match scenario::parse(Path::new("case.json"), &text) {
            Ok(loaded) => loaded,
            Err(e) => {
                if std::env::var_os("CEILING_SHOW_REFUSED").is_some() {
                    eprintln!("case {i} refused: {}", e.to_string().chars().take(200).collect::<String>());
                }
                refused += 1;
                continue;
            }
        };
        let runner = Runner::new();
        let prepared = runner.prepare(&loaded, &[]);
        let before = LIVE.load(Ordering::Relaxed);
        PEAK.store(before, Ordering::Relaxed);
        let run = prepared.run(Schedule::default_order());
        let peak = PEAK.load(Ordering::Relaxed).saturating_sub(before);
        ran += 1;
        stopped += u64::from(!run.halts.is_empty());
        highest_peak = highest_peak.max(peak);
        let events = run.trace.entries.len();
        most_events = most_events.max(events);
        let conversation = run
            .exchanges
            .iter()
            .map(|e| e.request.messages.iter().map(|m| m.content.len()).sum::<usize>())
            .max()
            .unwrap_or(0);
        let case = || format!("case {i}:\n{text}");
        assert!(loaded.limits.max_events <= c.max_events, "a limit past its ceiling loaded: {}", case());
        assert!(events <= loaded.limits.max_events, "{events} events past the file's limit: {}", case());
        // The conversation holds the texts the run produced, and the core's own few words.
        assert!(
            conversation <= c.run_text_bytes + (64 << 10),
            "a request held {conversation} bytes, past the run budget of {}: {}",
            c.run_text_bytes,
            case()
        );
        assert!(peak <= bound, "the run held {peak} bytes at once, past {bound}: {}", case());
    }
    eprintln!(
        "{cases} cases: {refused} refused at load, {ran} ran ({stopped} stopped by a limit); most events {most_events}, highest peak {highest_peak} bytes (bound {bound})"
    );
    // The generator reaches both sides of every ceiling: some files load, some are refused,
    // and some runs are stopped (the property is not vacuous).
    assert!(
        ran >= cases / 10 && refused >= cases / 10 && stopped >= cases / 50,
        "{ran} ran, {refused} refused, {stopped} stopped"
    );
}
